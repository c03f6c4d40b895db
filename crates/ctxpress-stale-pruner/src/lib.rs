//! ctxpress strategy `stale_pruner`: removes tool operations that later
//! operations made obsolete (spec 002), across agent dialects.
//!
//! Used alone: a read of a file that is edited later goes, call and result
//! together.
//!
//! ```rust
//! use ctxpress_core::{Conversation, Pipeline, StageContext};
//! use serde_json::json;
//! use ctxpress_stale_pruner::{StalePruner, StalePrunerConfig};
//!
//! let call = |id: &str, name: &str, args: serde_json::Value| {
//!     let function = json!({"name": name, "arguments": args.to_string()});
//!     json!({"role": "assistant", "content": null,
//!            "tool_calls": [{"id": id, "type": "function", "function": function}]})
//! };
//! let result = |id: &str, text: &str| {
//!     json!({"role": "tool", "tool_call_id": id, "content": text})
//! };
//! let text = json!([
//!     {"role": "user", "content": "make main call run()"},
//!     call("c1", "Read", json!({"file_path": "src/main.rs"})),
//!     result("c1", "fn main() {}\n"),
//!     call("c2", "Edit", json!({"file_path": "src/main.rs",
//!         "old_string": "fn main() {}", "new_string": "fn main() { run() }"})),
//!     result("c2", "The file src/main.rs has been updated."),
//!     {"role": "assistant", "content": "Done."},
//! ])
//! .to_string();
//! let mut conv = Conversation::parse(&text)?;
//! let cfg = StalePrunerConfig { protected_tail: 0, ..StalePrunerConfig::default() };
//! let mut pipeline = Pipeline::new(Vec::new());
//! pipeline.push(Box::new(StalePruner::new(cfg)));
//! pipeline.run(&mut conv, &StageContext::default());
//! assert_eq!(conv.messages.len(), 4); // the read and its result are gone
//! assert!(ctxpress_core::validate(&conv).is_empty()); // pairing intact
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Operations are extracted from tool calls with the dialect table of
//! `ctxpress_dialect`. Rules, each switchable and counted:
//! 1. stale read: a read of a path that is later edited, written or created;
//! 2. superseded edit: of several full-file writes of a path only the last
//!    stays; partial edits follow [`PartialEdits`];
//! 3. stale command: the same command run again later (only the last run stays);
//! 4. failed command: removed unless it is the latest run of its command family
//!    (the agent still needs an unresolved error);
//!
//! plus read references: a read returning exactly what the agent wrote or a
//! kept earlier read returned becomes a short reference to it, and, with
//! `display_only` (spec 004), UI-only messages are deleted: those with a
//! top-level `"display_only": true` or the role `display_only_data`. The
//! archive records removed messages like any other, so `ctxpress expand`
//! restores them. And `environments`: the `<environment_details>` block
//! Cline and Roo Code append to every user turn is shortened to a one-line
//! note in every user message before the protected tail that a later user
//! message's block supersedes.
//!
//! Removing an operation removes its call and its result together. With an
//! archive to recall from (`StageContext::archive`), nothing goes without a
//! recall handle: a run of removed messages goes behind one note naming
//! what went, and an operation that cannot (one of parallel calls, or too
//! small for a note) stays with its result, and a superseded write's
//! content, cut to a short stub that gets a handle. Calls
//! without a result, unknown tools, user messages (but for their
//! environment blocks), the protected tail and messages annotated
//! `protected` are never touched (display-only messages
//! are not for the model, so the tail does not keep them; a display-only
//! message carrying tool calls or results stays, for the pairing).

use ctxpress_core::tokens::{TokenCounter, count_message};
use ctxpress_core::{
    ConfigError, Conversation, Message, Role, StageContext, StageOutcome, Strategy, StrategyError,
};
use ctxpress_dialect::Turns;
use ctxpress_dialect::traffic::{self, CallRef, Traffic};
use ctxpress_dialect::{
    DialectTable, OpKind, Operation, Status, command_family, content_fingerprint,
    content_line_count,
};
use ctxpress_text::bytes::fewer_chars_than;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cell::OnceCell;

/// What to do with partial edits (`Edit`, `str_replace`, patches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartialEdits {
    /// Keep them all: they carry change history no later write contains.
    #[default]
    Keep,
    /// Keep only the last change of each file (spec 002 literally).
    KeepLast,
}

/// Parameters of the `stale_pruner` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StalePrunerConfig {
    /// Rule 1: remove reads of files that are changed later.
    pub stale_reads: bool,
    /// Rule 2: remove full-file writes superseded by a later one.
    pub superseded_edits: bool,
    /// How partial edits are treated by rule 2.
    pub partial_edits: PartialEdits,
    /// Rule 3: remove earlier runs of a command that is run again.
    pub stale_commands: bool,
    /// Treat repeated identical searches (Grep, Glob, ...) like commands.
    pub stale_searches: bool,
    /// Rule 4: remove failed commands that were retried or superseded.
    pub failed_commands: bool,
    /// Replace reads that repeat known content with a reference.
    pub read_references: bool,
    /// Shorten the `<environment_details>` blocks (open tabs, time, file
    /// listing) that Cline and Roo Code append to every user turn, when a
    /// later user turn carries its own: only the newest is current.
    pub environments: bool,
    /// User and assistant messages at the end that are never touched.
    pub protected_tail: usize,
    /// Delete UI-only messages (spec 004 `display_only_data`): a top-level
    /// `"display_only": true` or the role `display_only_data`. Messages that
    /// carry tool calls or tool results, or are annotated `protected`, stay.
    pub display_only: bool,
    /// The session's working directory, when the conversation does not say.
    pub cwd: Option<String>,
    /// Extra tool dialects, layered over the built-in table.
    pub dialect: DialectTable,
}

impl Default for StalePrunerConfig {
    fn default() -> Self {
        StalePrunerConfig {
            stale_reads: true,
            superseded_edits: true,
            partial_edits: PartialEdits::Keep,
            stale_commands: true,
            stale_searches: true,
            failed_commands: true,
            read_references: true,
            environments: true,
            protected_tail: 5,
            display_only: false,
            cwd: None,
            dialect: DialectTable::default(),
        }
    }
}

/// The stale-op pruner.
#[derive(Debug, Clone)]
pub struct StalePruner {
    cfg: StalePrunerConfig,
    table: DialectTable,
}

impl StalePruner {
    /// Build from a config.
    pub fn new(cfg: StalePrunerConfig) -> Self {
        let mut table = DialectTable::builtin();
        table.extend(cfg.dialect.clone());
        StalePruner { cfg, table }
    }

    /// The configuration in use.
    pub fn config(&self) -> &StalePrunerConfig {
        &self.cfg
    }
}

impl Default for StalePruner {
    fn default() -> Self {
        Self::new(StalePrunerConfig::default())
    }
}

ctxpress_core::register_strategy!(
    "stale_pruner",
    "remove stale reads, superseded edits, repeated and failed commands",
    StalePrunerConfig,
    |c| Ok::<_, ConfigError>(StalePruner::new(c)),
    params: &[
        ("stale_reads", "Rule 1: remove reads of files that are changed later."),
        ("superseded_edits", "Rule 2: remove full-file writes superseded by a later one."),
        (
            "partial_edits",
            "How partial edits are treated by rule 2: `keep` them all, or `keep_last` (only the last change of each file).",
        ),
        ("stale_commands", "Rule 3: remove earlier runs of a command that is run again."),
        ("stale_searches", "Treat repeated identical searches (Grep, Glob, ...) like commands."),
        ("failed_commands", "Rule 4: remove failed commands that were retried or superseded."),
        ("read_references", "Replace reads that repeat known content with a reference."),
        (
            "environments",
            "Shorten the `<environment_details>` blocks of user turns (Cline, Roo Code) that a later user turn's block supersedes.",
        ),
        ("protected_tail", "User and assistant messages at the end that are never touched."),
        (
            "display_only",
            "Delete UI-only messages (`\"display_only\": true` or role `display_only_data`) that carry no tool calls or results.",
        ),
        ("cwd", "The session's working directory, when the conversation does not say."),
        ("dialect", "Extra tool dialects, layered over the built-in table."),
    ]
);

/// Why an operation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Rule {
    StaleRead,
    SupersededEdit,
    StaleCommand,
    FailedCommand,
}

/// One operation found in the conversation (borrowed from the traffic
/// index, copied only where the open file fills in its path).
#[derive(Debug)]
struct Rec<'t> {
    op: Cow<'t, Operation>,
    /// Where the call is in the traffic index.
    call: CallRef,
    call_id: &'t str,
    /// Message index of the result, when answered.
    result_msg: Option<usize>,
    /// The result's status, worked out when first asked for
    /// ([`Rec::status`]): most records are decided without it.
    status: OnceCell<Status>,
    /// May be removed or rewritten.
    mutable: bool,
}

impl Rec<'_> {
    /// The status of the result (`Unknown` without one), judged from its
    /// [`traffic::result_facts`] the first time it is asked for.
    fn status(&self, conv: &Conversation) -> Status {
        *self.status.get_or_init(|| {
            let Some(ri) = self.result_msg else {
                return Status::Unknown;
            };
            match conv
                .messages
                .get(ri)
                .and_then(|m| m.tool_result(self.call_id))
            {
                Some(res) => traffic::result_facts(conv, ri, self.call_id, &res.text).status(
                    self.op.exit,
                    &res.text,
                    res.is_error,
                ),
                None => Status::Unknown,
            }
        })
    }

    /// Answered and not failed.
    fn succeeded(&self, conv: &Conversation) -> bool {
        self.result_msg.is_some() && self.status(conv) != Status::Failure
    }

    /// A successful read: its payload's fingerprint may be needed.
    fn read_ok(&self, conv: &Conversation) -> bool {
        self.op.kind == OpKind::Read && self.succeeded(conv)
    }
}

/// Counts of one run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Rule 1.
    pub stale_reads: u64,
    /// Rule 2.
    pub superseded_edits: u64,
    /// Rule 3.
    pub stale_commands: u64,
    /// Rule 4.
    pub failed_commands: u64,
    /// Reads made references.
    pub read_references: u64,
    /// UI-only messages deleted (`display_only`).
    pub display_data_deleted: u64,
    /// Environment blocks shortened (`environments`).
    pub stale_environments: u64,
}

/// What a superseded environment block becomes.
pub const STALE_ENVIRONMENT: &str =
    "<environment_details>[ctxpress: superseded by a later turn's]</environment_details>";

/// Role of spec 004's UI-only messages.
pub const DISPLAY_ONLY_ROLE: &str = "display_only_data";

/// True for a UI-only message: a top-level `"display_only": true` or the role
/// [`DISPLAY_ONLY_ROLE`].
pub fn is_display_only(m: &ctxpress_core::Message) -> bool {
    m.role_str() == DISPLAY_ONLY_ROLE
        || m.fields().get("display_only") == Some(&serde_json::Value::Bool(true))
}

impl StalePruner {
    fn collect<'t>(&self, conv: &Conversation, traffic: &'t Traffic) -> Vec<Rec<'t>> {
        let tail = conv.tail_start(self.cfg.protected_tail);
        let mut recs = Vec::with_capacity(traffic.calls.len());
        // The open file (SWE-agent): borrowed from the operation that named
        // it, so no path is copied per file operation.
        let mut current_file: Option<&'t str> = None;
        for r in &traffic.calls {
            let call = traffic.call(r);
            let Some(given) = call.op.as_ref() else {
                continue;
            };
            let mut op = Cow::Borrowed(given);
            let mut filled = false;
            if op.paths.is_empty() && op.current_file {
                match current_file {
                    Some(f) if matches!(op.kind, OpKind::Read | OpKind::Edit) => {
                        op.to_mut().paths = vec![f.to_string()];
                        filled = true;
                    }
                    _ => {}
                }
            }
            if matches!(op.kind, OpKind::Read | OpKind::Write | OpKind::Edit) {
                if op.paths.is_empty() {
                    continue;
                }
                // A filled-in path is the open file already.
                if !filled && given.paths.len() == 1 {
                    current_file = given.paths.first().map(String::as_str);
                }
            }
            // The traffic index found the result among that message's
            // result ids: the message holds a result answering the call.
            let result_msg = r
                .result
                .filter(|&ri| conv.messages.get(ri).is_some_and(|m| m.answers(&call.id)));
            let protected = |i: usize| {
                conv.messages
                    .get(i)
                    .is_some_and(|m| conv.ann(m.id()).is_some_and(|a| a.protected))
            };
            let call_msg = r.msg;
            let mutable = r.unique
                && call_msg < tail
                && result_msg.is_some_and(|ri| ri < tail && !conv.is_protected(ri))
                && !conv.is_protected(call_msg)
                && *conv.messages[call_msg].role_ref() == Role::Assistant
                && !protected(call_msg)
                && !result_msg.is_some_and(protected);
            recs.push(Rec {
                op,
                call: *r,
                call_id: &call.id,
                result_msg,
                status: OnceCell::new(),
                mutable,
            });
        }
        recs
    }

    /// Decide removals: the rule that removes each record, if any (indexed
    /// as `recs`). A record's status is asked for only where it decides
    /// something (a write or edit whose paths are all changed later, a
    /// failed command whose family runs later, an answered operation that
    /// changes files), after the cheaper tests.
    fn decide(&self, conv: &Conversation, recs: &[Rec<'_>]) -> Vec<Option<Rule>> {
        let cfg = &self.cfg;
        let mut out: Vec<Option<Rule>> = vec![None; recs.len()];
        // Walk backwards, remembering what happens later.
        let mut later_modified: HashSet<&str> = HashSet::new();
        let mut later_full_write: HashSet<&str> = HashSet::new();
        let mut later_command: HashSet<(Option<&str>, &str)> = HashSet::new();
        let mut later_family: HashSet<(Option<&str>, String)> = HashSet::new();
        for (i, r) in recs.iter().enumerate().rev() {
            let answered = r.result_msg.is_some();
            let cwd = r.op.cwd.as_deref();
            let cmd = r.op.command.as_deref();
            let is_cmd = r.op.kind == OpKind::Command || r.op.is_shell();
            // The command's family: looked up by the failed-command rule (a
            // mutable record is answered) and recorded for earlier ones
            // (answered records), so worked out once, only for those.
            let family = match cmd {
                Some(c) if cfg.failed_commands && is_cmd && answered => {
                    Some((cwd, command_family(c)))
                }
                _ => None,
            };
            if r.mutable {
                let all = |set: &HashSet<&str>, paths: &[String]| {
                    !paths.is_empty() && paths.iter().all(|p| set.contains(p.as_str()))
                };
                let rule = match r.op.kind {
                    OpKind::Read if cfg.stale_reads && all(&later_modified, &r.op.paths) => {
                        Some(Rule::StaleRead)
                    }
                    OpKind::Write
                        if cfg.superseded_edits
                            && all(&later_full_write, &r.op.paths)
                            && r.succeeded(conv) =>
                    {
                        Some(Rule::SupersededEdit)
                    }
                    OpKind::Edit
                        if cfg.superseded_edits
                            && cfg.partial_edits == PartialEdits::KeepLast
                            && all(&later_modified, &r.op.paths)
                            && r.succeeded(conv) =>
                    {
                        Some(Rule::SupersededEdit)
                    }
                    OpKind::Command | OpKind::Search
                        if (r.op.kind == OpKind::Command || cfg.stale_searches)
                            && cfg.stale_commands
                            && cmd.is_some_and(|c| later_command.contains(&(cwd, c))) =>
                    {
                        Some(Rule::StaleCommand)
                    }
                    _ => None,
                };
                let rule = rule.or_else(|| {
                    (family.as_ref().is_some_and(|f| later_family.contains(f))
                        && r.status(conv) == Status::Failure)
                        .then_some(Rule::FailedCommand)
                });
                if let Some(slot) = out.get_mut(i) {
                    *slot = rule;
                }
            }
            if !answered {
                continue;
            }
            // Record this operation for earlier ones.
            let modified = r.op.modified_paths();
            if !modified.is_empty() && r.succeeded(conv) {
                for p in modified {
                    later_modified.insert(p.as_str());
                }
                if r.op.kind == OpKind::Write {
                    for p in &r.op.paths {
                        later_full_write.insert(p.as_str());
                    }
                }
            }
            if let Some(c) = cmd
                && matches!(r.op.kind, OpKind::Command | OpKind::Search)
            {
                later_command.insert((cwd, c));
            }
            // Families are only looked up by the failed-command rule.
            if let Some(f) = family {
                later_family.insert(f);
            }
        }
        out
    }
}

/// A read or write that read references look at: a kept, successful
/// operation on one path.
#[derive(Debug, Clone, Copy)]
struct RefOp<'a> {
    path: &'a str,
    /// A read (else a write).
    read: bool,
    /// Its result may be rewritten.
    mutable: bool,
    call_id: &'a str,
}

/// The reference to an earlier operation that returned or wrote the same
/// content.
fn reference_text(path: &str, what: &str, src: &str) -> String {
    format!("[ctxpress: {path} unchanged: same content as {what} call {src}]")
}

/// The reference is worth it when the result has more than twice its
/// characters.
fn worth_referencing(result: &str, text: &str) -> bool {
    !fewer_chars_than(result, text.chars().count() * 2 + 1)
}

/// The read references among `ops` (in order): (index into `ops`, the
/// reference that replaces that read's result). `hash(k)` is the content
/// fingerprint of op `k` (`None`: it has none) with what `worth` needs to
/// judge a reference to it; `lines(k)` is the number of lines that
/// fingerprint hashes ([`content_line_count`]; `None` exactly when `hash(k)`
/// is), cheap to count: ops whose fingerprints are equal have equal counts.
///
/// An op can only match, or be matched by, another op on its path, so only
/// the ops that can take part on their path ([`taking_part`]) are looked at,
/// and of those only ops with the same number of lines can match: they are
/// planned in groups of one path and one line count ([`plan_grouped`]), so a
/// fingerprint is worked out only for an op whose group holds another that
/// it can match or be matched by. `plan_refs_by_path` (tests; groups of one path,
/// every op) and `plan_refs_every_hash` (tests) give the same answer.
fn plan_refs<T>(
    ops: &[RefOp<'_>],
    mut lines: impl FnMut(usize) -> Option<usize>,
    hash: impl FnMut(usize) -> Option<(u64, T)>,
    worth: impl FnMut(&T, &str) -> bool,
) -> Vec<(usize, String)> {
    let grouped: Vec<(usize, (&str, usize))> = taking_part(ops)
        .into_iter()
        .filter_map(|k| Some((k, (ops.get(k)?.path, lines(k)?))))
        .collect();
    plan_grouped(ops, &grouped, hash, worth)
}

/// The ops (indices into `ops`, in order) that planning by path
/// (`plan_refs_by_path`) may fingerprint: on a path with two or more ops,
/// a write a read of its path follows, a read a read follows or (when it
/// may be rewritten) an op of its path came before. The others never take
/// part: none looks anything up, nothing looks them up.
fn taking_part(ops: &[RefOp<'_>]) -> Vec<usize> {
    let per_path = group_stats(ops, (0..ops.len()).map(|k| (k, ops[k].path)));
    let mut out = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        let Some(p) = per_path.get(op.path).filter(|p| p.n >= 2) else {
            continue;
        };
        let looked_up = p.last_read.is_some_and(|l| l > k);
        let looks = op.read && op.mutable && k != p.first;
        if looked_up || looks {
            out.push(k);
        }
    }
    out
}

/// The ops of one group: how many, the first, the last read.
struct GroupOps {
    n: usize,
    first: usize,
    last_read: Option<usize>,
}

/// [`GroupOps`] of each group of the ops `keyed` lists (index into `ops`,
/// its group), in order.
fn group_stats<K: std::hash::Hash + Eq>(
    ops: &[RefOp<'_>],
    keyed: impl Iterator<Item = (usize, K)>,
) -> HashMap<K, GroupOps> {
    let mut per_group: HashMap<K, GroupOps> = HashMap::new();
    for (k, key) in keyed {
        let p = per_group.entry(key).or_insert(GroupOps {
            n: 0,
            first: k,
            last_read: None,
        });
        p.n += 1;
        if ops.get(k).is_some_and(|op| op.read) {
            p.last_read = Some(k);
        }
    }
    per_group
}

/// The read references among the ops `keyed` lists (index into `ops`, its
/// group), in order, each op matched only within its group: a fingerprint
/// is worked out only where it can matter, a write's when a read of its
/// group follows, a read's when one follows or (when it may be rewritten)
/// an op of its group came before.
fn plan_grouped<K: std::hash::Hash + Eq + Copy, T>(
    ops: &[RefOp<'_>],
    keyed: &[(usize, K)],
    mut hash: impl FnMut(usize) -> Option<(u64, T)>,
    mut worth: impl FnMut(&T, &str) -> bool,
) -> Vec<(usize, String)> {
    let mut refs = Vec::new();
    let per_group = group_stats(ops, keyed.iter().copied());
    // (group, fingerprint) -> (call id, what)
    let mut known: HashMap<(K, u64), (&str, &'static str)> = HashMap::new();
    for &(k, key) in keyed {
        let (Some(op), Some(p)) = (ops.get(k), per_group.get(&key).filter(|p| p.n >= 2)) else {
            continue;
        };
        // A later read may look this op's content up.
        let looked_up = p.last_read.is_some_and(|l| l > k);
        if !op.read {
            // A later write or edit of the path invalidates older entries by
            // content only, so nothing to clear: equal content is equal.
            if looked_up && let Some((h, _)) = hash(k) {
                known.insert((key, h), (op.call_id, "written by"));
            }
            continue;
        }
        // Only a read that may be rewritten looks up, and only an earlier
        // op of its group can be found.
        let looks = op.mutable && k != p.first;
        if !looks && !looked_up {
            continue;
        }
        let Some((h, result)) = hash(k) else {
            continue;
        };
        if looks && let Some((src, what)) = known.get(&(key, h)) {
            let text = reference_text(op.path, what, src);
            if worth(&result, &text) {
                refs.push((k, text));
                continue;
            }
        }
        known.insert((key, h), (op.call_id, "returned by"));
    }
    refs
}

/// Operations a removal note names; the rest are counted.
const NAMED: usize = 3;
/// The longest path or command a removal note quotes, in characters.
const QUOTED: usize = 80;

/// One removed operation as a removal note names it: a path longer than
/// [`QUOTED`] characters keeps its end (where the file name is), a command
/// its first line and start.
fn removal(op: &Operation, rule: Rule) -> String {
    let path = |p: &str| {
        let n = p.chars().count();
        match p.char_indices().nth(n.saturating_sub(QUOTED)) {
            Some((at, _)) if n > QUOTED => format!("…{}", &p[at..]),
            _ => p.to_string(),
        }
    };
    let command = |c: &str| {
        let c = c.lines().next().unwrap_or("").trim();
        match c.char_indices().nth(QUOTED) {
            Some((at, _)) => format!("{}…", &c[..at]),
            None => c.to_string(),
        }
    };
    let path = op.paths.first().map(|p| path(p)).unwrap_or_default();
    let command = op
        .command
        .as_deref()
        .map(command)
        .unwrap_or_else(|| path.clone());
    match rule {
        Rule::StaleRead => format!("a read of {path} (changed later)"),
        Rule::SupersededEdit => format!("a write of {path} (written again later)"),
        Rule::StaleCommand if op.kind == OpKind::Search => {
            format!("the search `{command}` (run again later)")
        }
        Rule::StaleCommand => format!("`{command}` (run again later)"),
        Rule::FailedCommand => format!("`{command}`, which failed (run again later)"),
    }
}

/// The runs of consecutive indexes in `gone`, in order.
fn runs(gone: &HashSet<usize>) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = gone.iter().copied().collect();
    order.sort_unstable();
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for i in order {
        match runs.last_mut() {
            Some(r) if r.last().is_some_and(|&l| l + 1 == i) => r.push(i),
            _ => runs.push(vec![i]),
        }
    }
    runs
}

/// Whether a tool result follows the messages at `run` (consecutive
/// indexes): a note there would part results from their call.
fn before_result(conv: &Conversation, run: &[usize]) -> bool {
    run.last()
        .and_then(|&last| conv.messages.get(last + 1))
        .is_some_and(|m| m.is_tool_result())
}

/// Whether a note with `text`, with the recall handle the pipeline writes
/// into it, is shorter than the messages at `run` in characters and tokens.
fn note_fits(conv: &Conversation, run: &[usize], text: &str, counter: &dyn TokenCounter) -> bool {
    let Some(&first) = run.first() else {
        return false;
    };
    let olds = || run.iter().filter_map(|&i| conv.messages.get(i));
    let chars: usize = olds().map(Message::size).sum();
    let tokens: usize = olds().map(|m| count_message(counter, m)).sum();
    let id = conv.messages[first].id().clone();
    let probe = Message::text_message(
        id,
        "assistant",
        &format!("{text}{}", ctxpress_core::handle::PROBE),
    );
    probe.size() < chars && count_message(counter, &probe) < tokens
}

/// The note that takes the place of the messages at `run`: an assistant
/// message with `text` that `replaces` them, so the pipeline writes their
/// recall handle into it.
fn make_note(conv: &mut Conversation, run: &[usize], text: &str) -> Message {
    let ids: Vec<_> = run
        .iter()
        .filter_map(|&i| conv.messages.get(i))
        .map(|m| m.id().clone())
        .collect();
    let id = conv.fresh_id("pruned");
    conv.ann_mut(&id).replaces = ids;
    Message::text_message(id, "assistant", text)
}

/// Remove the messages at the indexes in `gone`, and put each note of
/// `notes` (by the index of the first message of the run it stands for)
/// in its run's place.
fn remove(conv: &mut Conversation, gone: &HashSet<usize>, notes: Option<HashMap<usize, Message>>) {
    if gone.is_empty() {
        return;
    }
    let mut notes = notes.unwrap_or_default();
    let old = std::mem::take(&mut conv.messages);
    conv.messages.reserve(old.len() - gone.len() + notes.len());
    for (i, m) in old.into_iter().enumerate() {
        if let Some(note) = notes.remove(&i) {
            conv.messages.push(note);
        }
        if !gone.contains(&i) {
            conv.messages.push(m);
        }
    }
}

/// The call ids the removals in `removed` take out of each message they
/// touch (a call's message and its result's), and the messages that go as
/// a whole: a tool message, an assistant message left with no content but
/// thinking, a user message that only carried the removed results.
fn plan<'t>(
    conv: &Conversation,
    recs: &[Rec<'t>],
    removed: &[Option<Rule>],
) -> (
    HashMap<usize, std::collections::HashSet<&'t str>>,
    HashSet<usize>,
) {
    let mut by_msg: HashMap<usize, std::collections::HashSet<&'t str>> = HashMap::new();
    for (r, _) in recs.iter().zip(removed).filter(|(_, rule)| rule.is_some()) {
        by_msg.entry(r.call.msg).or_default().insert(r.call_id);
        if let Some(ri) = r.result_msg {
            by_msg.entry(ri).or_default().insert(r.call_id);
        }
    }
    let mut drop_msgs: HashSet<usize> = HashSet::new();
    for (mi, ids) in &by_msg {
        let Some(m) = conv.messages.get(*mi) else {
            continue;
        };
        let goes = match m.role() {
            Role::Assistant => {
                let mut m = m.clone();
                m.remove_tool_calls(ids);
                m.is_empty() || only_thinking(&m)
            }
            Role::Tool | Role::Function => true,
            Role::User if m.is_tool_result_carrier() => {
                let mut m = m.clone();
                m.remove_tool_results(ids);
                matches!(m.content(), Some(serde_json::Value::Array(b)) if b.is_empty())
            }
            _ => false,
        };
        if goes {
            drop_msgs.insert(*mi);
        }
    }
    (by_msg, drop_msgs)
}

/// What goes with an archive to recall from (see [`settle`]).
struct Settled {
    /// The note in place of each run of messages that goes whole, by the
    /// index of the run's first message.
    notes: HashMap<usize, Message>,
    /// The messages that go: those of the runs with a note.
    gone: HashSet<usize>,
    /// The removed operations that stay, their results cut to a stub
    /// ([`stub`]): by record index.
    stubs: Vec<usize>,
}

/// With an archive to recall from: what of the removals in `removed` goes
/// and how, so that everything that goes can be recalled. A run of messages
/// the removals drop whole goes, with a note naming what went in its place,
/// where a note fits ([`note_fits`]) and no tool result follows the run
/// ([`before_result`]). Every other removed operation stays, call and
/// result, its result cut to a short stub that the pipeline gives a handle
/// ([`stub`]): the calls taken out of a message that stays (parallel calls,
/// some of them stale) and runs too small for a note. Without the stub the
/// call would go with no handle to recall it by.
fn settle(
    conv: &mut Conversation,
    recs: &[Rec<'_>],
    removed: &[Option<Rule>],
    drop_msgs: &HashSet<usize>,
    counter: &dyn TokenCounter,
) -> Settled {
    let mut noted: Vec<(Vec<usize>, String)> = runs(drop_msgs)
        .into_iter()
        .filter(|run| !before_result(conv, run))
        .map(|run| {
            let text = removal_note(recs, removed, &run);
            (run, text)
        })
        .filter(|(run, text)| note_fits(conv, run, text, counter))
        .collect();
    // An operation goes only when its call and its result both go under a
    // note; one that has a part in a run without a note stays, and so does
    // every run it has a part in (rare: a result answered far from its call).
    let within = |noted: &[(Vec<usize>, String)], i: usize| {
        noted.iter().any(|(run, _)| run.binary_search(&i).is_ok())
    };
    loop {
        let parted: HashSet<usize> = recs
            .iter()
            .zip(removed)
            .filter(|(_, rule)| rule.is_some())
            .flat_map(|(r, _)| {
                let parts = [Some(r.call.msg), r.result_msg];
                let inside = parts
                    .iter()
                    .flatten()
                    .filter(|&&i| within(&noted, i))
                    .count();
                let all = parts.iter().flatten().count();
                let split = inside > 0 && inside < all;
                parts.into_iter().flatten().filter(move |_| split)
            })
            .collect();
        if parted.is_empty() {
            break;
        }
        noted.retain(|(run, _)| !run.iter().any(|i| parted.contains(i)));
    }
    let mut notes = HashMap::new();
    let mut gone = HashSet::new();
    for (run, text) in &noted {
        notes.insert(run[0], make_note(conv, run, text));
        gone.extend(run.iter().copied());
    }
    let stubs = recs
        .iter()
        .zip(removed)
        .enumerate()
        .filter(|(_, (r, rule))| rule.is_some() && !within(&noted, r.call.msg))
        .map(|(k, _)| k)
        .collect();
    Settled { notes, gone, stubs }
}

/// The stub a removed operation's result is cut to when the operation
/// stays (see [`settle`]): the call before it says what was run.
fn stub(op: &Operation, rule: Rule) -> &'static str {
    match rule {
        Rule::StaleRead => "[ctxpress: stale read, the file changed later]",
        Rule::SupersededEdit => "[ctxpress: superseded, the file was written again later]",
        Rule::StaleCommand if op.kind == OpKind::Search => {
            "[ctxpress: stale output, the search was run again later]"
        }
        Rule::StaleCommand => "[ctxpress: stale output, the command was run again later]",
        Rule::FailedCommand => "[ctxpress: failed, the command was run again later]",
    }
}

/// Whether `stub`, with the recall handle the pipeline writes into it, is
/// shorter than `result` in characters and tokens.
fn stub_fits(result: &str, stub: &str, counter: &dyn TokenCounter) -> bool {
    let probe = stub.replacen(
        "ctxpress",
        &format!("ctxpress{}", ctxpress_core::handle::PROBE),
        1,
    );
    // The probe is ASCII: its characters are its bytes.
    !fewer_chars_than(result, probe.len() + 1) && counter.count(&probe) < counter.count(result)
}

/// The text of the note for the removed messages at `run` (sorted): the
/// operations whose calls they carried, the first [`NAMED`] named.
fn removal_note(recs: &[Rec<'_>], removed: &[Option<Rule>], run: &[usize]) -> String {
    let items: Vec<String> = recs
        .iter()
        .zip(removed)
        .filter_map(|(r, rule)| Some((r, (*rule)?)))
        .filter(|(r, _)| {
            run.binary_search(&r.call.msg).is_ok()
                || r.result_msg
                    .is_some_and(|ri| run.binary_search(&ri).is_ok())
        })
        .map(|(r, rule)| removal(&r.op, rule))
        .collect();
    let mut text = match items.as_slice() {
        [one] => format!("[ctxpress: removed {one}"),
        _ => format!(
            "[ctxpress: removed {} stale operations: {}",
            items.len(),
            items[..items.len().min(NAMED)].join("; ")
        ),
    };
    if items.len() > NAMED {
        text.push_str(&format!("; and {} more", items.len() - NAMED));
    }
    text.push(']');
    text
}

fn summary(c: &Counts, display_only: bool) -> String {
    let mut s = format!(
        "Removed: {} stale reads, {} stale edits, {} stale bash, {} failed bash; {} reads made references",
        c.stale_reads, c.superseded_edits, c.stale_commands, c.failed_commands, c.read_references
    );
    if c.stale_environments > 0 {
        s.push_str(&format!(
            "; {} superseded environment blocks shortened",
            c.stale_environments
        ));
    }
    if display_only {
        s.push_str(&format!(
            "; {} display-only messages deleted",
            c.display_data_deleted
        ));
    }
    s
}

fn only_thinking(m: &ctxpress_core::Message) -> bool {
    match m.content() {
        Some(serde_json::Value::Array(b)) => {
            !m.has_tool_calls()
                && !b.is_empty()
                && b.iter().all(|x| {
                    matches!(
                        x.get("type").and_then(serde_json::Value::as_str),
                        Some("thinking") | Some("redacted_thinking")
                    ) || (x.get("type").and_then(serde_json::Value::as_str) == Some("text")
                        && x.get("text")
                            .and_then(serde_json::Value::as_str)
                            .is_none_or(|t| t.trim().is_empty()))
                })
        }
        _ => false,
    }
}

impl StalePruner {
    /// Delete the UI-only messages (see [`is_display_only`]) that carry no
    /// tool call or result and are not annotated `protected`; returns how many.
    pub fn drop_display_only(conv: &mut Conversation) -> u64 {
        Self::drop_display_only_noted(conv, None)
    }

    /// [`drop_display_only`](Self::drop_display_only), with a note in place
    /// of each run of deleted messages when `notes` (see [`note_fits`]).
    fn drop_display_only_noted(conv: &mut Conversation, notes: Option<&dyn TokenCounter>) -> u64 {
        let ann = conv.annotations();
        let mut gone: HashSet<usize> = conv
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                is_display_only(m)
                    && !m.has_tool_calls()
                    && !m.is_tool_result()
                    && !ann.get(m.id()).is_some_and(|a| a.protected)
            })
            .map(|(i, _)| i)
            .collect();
        let notes = notes.map(|counter| {
            let mut placed = HashMap::new();
            for run in runs(&gone) {
                let n = run.len();
                let text = format!(
                    "[ctxpress: removed {n} display-only message{} (shown to the user, not meant for the model)]",
                    if n == 1 { "" } else { "s" }
                );
                if before_result(conv, &run) {
                    continue;
                }
                if note_fits(conv, &run, &text, counter) {
                    let note = make_note(conv, &run, &text);
                    placed.insert(run[0], note);
                } else {
                    // No note can stand for them: they stay.
                    run.iter().for_each(|i| {
                        gone.remove(i);
                    });
                }
            }
            placed
        });
        remove(conv, &gone, notes);
        gone.len() as u64
    }

    /// Prune `conv` in place and return the counts.
    pub fn prune(&self, conv: &mut Conversation) -> Counts {
        self.prune_noted(conv, None)
    }

    /// [`prune`](Self::prune); with `notes` (the run has an archive to
    /// recall from), each run of removed messages that can have one gets a
    /// note naming what went in its place (see [`settle`]).
    fn prune_noted(&self, conv: &mut Conversation, notes: Option<&dyn TokenCounter>) -> Counts {
        let display_data_deleted = if self.cfg.display_only {
            Self::drop_display_only_noted(conv, notes)
        } else {
            0
        };
        let traffic = Traffic::of(conv, &self.table, self.cfg.cwd.as_deref());
        let recs = self.collect(conv, &traffic);
        let removed = self.decide(conv, &recs);
        // What goes: decided by which calls go, so the read references
        // rewritten below change none of it.
        let (mut by_msg, mut drop_msgs) = plan(conv, &recs, &removed);
        let mut stubs = Vec::new();
        let notes = notes.map(|counter| {
            let s = settle(conv, &recs, &removed, &drop_msgs, counter);
            // With an archive nothing goes from a message that stays: the
            // operations outside the noted runs keep their calls.
            by_msg.clear();
            drop_msgs = s.gone;
            stubs = s.stubs.into_iter().map(|k| (k, counter)).collect();
            s.notes
        });
        let mut counts = Counts {
            display_data_deleted,
            ..Counts::default()
        };
        for rule in removed.iter().flatten() {
            match rule {
                Rule::StaleRead => counts.stale_reads += 1,
                Rule::SupersededEdit => counts.superseded_edits += 1,
                Rule::StaleCommand => counts.stale_commands += 1,
                Rule::FailedCommand => counts.failed_commands += 1,
            }
        }
        // Read references: point at a kept earlier read or write of the same content.
        let mut refs: Vec<(usize, String)> = Vec::new();
        if self.cfg.read_references {
            // The kept successful reads and writes of one path, in order
            // (with the record each is).
            let mut ops: Vec<RefOp<'_>> = Vec::new();
            let mut of_rec: Vec<usize> = Vec::new();
            // The kept reads and writes of one path, before their statuses
            // are asked for: a path with only one can give no reference (its
            // op alone is never looked at), so its op's status is not needed
            // and the op is left out.
            fn kept_one_path<'r>(r: &'r Rec<'_>, kept: bool) -> Option<&'r str> {
                match r.op.paths.as_slice() {
                    [path]
                        if kept
                            && matches!(r.op.kind, OpKind::Read | OpKind::Write)
                            && r.result_msg.is_some() =>
                    {
                        Some(path.as_str())
                    }
                    _ => None,
                }
            }
            let kept = |i: usize| removed.get(i).is_some_and(Option::is_none);
            let mut per_path: HashMap<&str, usize> = HashMap::new();
            for (i, r) in recs.iter().enumerate() {
                if let Some(path) = kept_one_path(r, kept(i)) {
                    *per_path.entry(path).or_default() += 1;
                }
            }
            for (i, r) in recs.iter().enumerate() {
                if let Some(path) = kept_one_path(r, kept(i))
                    && per_path.get(path).is_some_and(|&n| n >= 2)
                    && r.succeeded(conv)
                {
                    ops.push(RefOp {
                        path,
                        read: r.op.kind == OpKind::Read,
                        mutable: r.mutable,
                        call_id: r.call_id,
                    });
                    of_rec.push(i);
                }
            }
            // A successful read's result text and its payload's range in it.
            let read_payload = |r: &Rec<'_>| -> Option<(Cow<'_, str>, std::ops::Range<usize>)> {
                if !r.read_ok(conv) {
                    return None;
                }
                let ri = r.result_msg?;
                let res = conv.messages.get(ri)?.tool_result(r.call_id)?;
                let facts = traffic::result_facts(conv, ri, r.call_id, &res.text);
                Some((res.text, facts.payload_start..facts.payload_end))
            };
            // A write's content: decoded only when compared (then kept by
            // the traffic index's arguments).
            let write_content = |r: &Rec<'_>| -> Option<&str> {
                let call = traffic.call(&r.call);
                self.table.write_content(&call.name, &call.args)
            };
            let rec_of = |k: usize| recs.get(*of_rec.get(k)?);
            let lines = |k: usize| {
                let r = rec_of(k)?;
                if r.op.kind == OpKind::Read {
                    let (text, payload) = read_payload(r)?;
                    Some(content_line_count(text.get(payload).unwrap_or("")))
                } else {
                    write_content(r).map(content_line_count)
                }
            };
            // A successful read's payload fingerprint, with its result text.
            let hash = |k: usize| {
                let r = rec_of(k)?;
                if r.op.kind == OpKind::Read {
                    let (text, payload) = read_payload(r)?;
                    let h = content_fingerprint(text.get(payload).unwrap_or(""));
                    Some((h, text))
                } else {
                    write_content(r).map(|c| (content_fingerprint(c), Cow::Borrowed("")))
                }
            };
            refs = plan_refs(&ops, lines, hash, |r: &Cow<'_, str>, t| {
                worth_referencing(r, t)
            })
            .into_iter()
            .filter_map(|(k, text)| Some((*of_rec.get(k)?, text)))
            .collect();
        }
        counts.read_references = refs.len() as u64;
        // Apply: rewrite reference results, then remove calls and results.
        for (i, text) in &refs {
            if let Some(r) = recs.get(*i)
                && let Some(ri) = r.result_msg
                && let Some(m) = conv.messages.get_mut(ri)
            {
                m.set_tool_result_text(r.call_id, text.clone());
            }
        }
        for (k, counter) in stubs {
            let (Some(r), Some(rule)) = (recs.get(k), removed.get(k).copied().flatten()) else {
                continue;
            };
            let text = stub(&r.op, rule);
            if let Some(ri) = r.result_msg
                && let Some(m) = conv.messages.get_mut(ri)
                && m.tool_result(r.call_id)
                    .is_some_and(|res| stub_fits(&res.text, text, counter))
            {
                m.set_tool_result_text(r.call_id, text);
            }
            // A superseded write's content is in its call: cut it too (each
            // argument with spaces in it: not a path or a name).
            if rule == Rule::SupersededEdit
                && let Some(m) = conv.messages.get_mut(r.call.msg)
            {
                let call = traffic.call(&r.call);
                let long: Vec<&String> = call
                    .args
                    .value()
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, v)| {
                        v.as_str().is_some_and(|v| {
                            v.contains(char::is_whitespace) && stub_fits(v, text, counter)
                        })
                    })
                    .map(|(k, _)| k)
                    .collect();
                if !long.is_empty() {
                    let was = m.clone();
                    for k in long {
                        m.set_tool_call_arg(r.call_id, k, text);
                    }
                    // Re-serialized arguments must not come out longer.
                    if m.size() >= was.size() {
                        *m = was;
                    }
                }
            }
        }
        for (mi, ids) in &by_msg {
            if drop_msgs.contains(mi) {
                continue;
            }
            let Some(m) = conv.messages.get_mut(*mi) else {
                continue;
            };
            match m.role() {
                Role::Assistant => m.remove_tool_calls(ids),
                Role::User => m.remove_tool_results(ids),
                _ => {}
            }
        }
        remove(conv, &drop_msgs, notes);
        if self.cfg.environments {
            counts.stale_environments = self.prune_environments(conv);
        }
        counts
    }

    /// Shorten every environment block of a user message before the
    /// protected tail (and not protected) when a later user message has one;
    /// returns how many.
    fn prune_environments(&self, conv: &mut Conversation) -> u64 {
        use ctxpress_dialect::text_results::{environment_blocks, text_parts};
        let has_env = |m: &ctxpress_core::Message| {
            m.role() == Role::User
                && text_parts(m)
                    .iter()
                    .any(|(_, t)| t.contains(ctxpress_dialect::text_results::ENV_OPEN))
        };
        let Some(newest) = conv.messages.iter().rposition(has_env) else {
            return 0;
        };
        let tail = conv.tail_start(self.cfg.protected_tail).min(newest);
        let mut n = 0;
        for i in 0..tail {
            if conv.is_protected(i) || !conv.messages.get(i).is_some_and(has_env) {
                continue;
            }
            // The new text of each part that has a block worth shortening.
            let edits: Vec<(Option<usize>, String, u64)> = text_parts(&conv.messages[i])
                .into_iter()
                .filter_map(|(part, t)| {
                    let mut out = String::with_capacity(t.len());
                    let mut at = 0;
                    let mut k = 0;
                    for r in environment_blocks(t) {
                        if r.len() <= STALE_ENVIRONMENT.len() {
                            continue;
                        }
                        out.push_str(&t[at..r.start]);
                        out.push_str(STALE_ENVIRONMENT);
                        at = r.end;
                        k += 1;
                    }
                    out.push_str(&t[at..]);
                    (k > 0).then_some((part, out, k))
                })
                .collect();
            if let Some(m) = conv.messages.get_mut(i) {
                for (part, text, k) in edits {
                    if m.set_text_part(part, text) {
                        n += k;
                    }
                }
            }
        }
        n
    }
}

impl Strategy for StalePruner {
    fn name(&self) -> &str {
        "stale_pruner"
    }

    fn apply(
        &self,
        conv: &mut Conversation,
        ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        // Tokens before and after are the pipeline's to measure (every stage
        // report has them); counting the whole conversation twice here cost
        // more than finding what to prune.
        let msgs_before = conv.messages.len();
        let notes = ctx.archive.is_some().then_some(ctx.counter.as_ref());
        let c = self.prune_noted(conv, notes);
        let mut out = StageOutcome::default();
        out.count("stale_reads", c.stale_reads);
        out.count("superseded_edits", c.superseded_edits);
        out.count("stale_commands", c.stale_commands);
        out.count("failed_commands", c.failed_commands);
        out.count("read_references", c.read_references);
        out.count("stale_environments", c.stale_environments);
        if self.cfg.display_only {
            out.count("display_data_deleted", c.display_data_deleted);
        }
        out.notes.push(format!(
            "{}; messages {} -> {}",
            summary(&c, self.cfg.display_only),
            msgs_before,
            conv.messages.len(),
        ));
        Ok(out)
    }
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests;
