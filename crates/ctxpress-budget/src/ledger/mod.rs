//! The session ledger: what the messages moved out of a conversation held
//! that the agent may need next, as one deterministic note a model can read.
//!
//! [`Ledger::add`] reads messages in order (user requests, tool calls with
//! their operations and results, assistant prose) and keeps:
//!
//! - the task: the first and the latest user request, verbatim where they fit;
//! - files: each path with what was done to it (read, edited, written, how
//!   often), the names changed there (from edit and write arguments) or seen
//!   in its content, and the last error on it;
//! - commands: each command with its last status and the key error line, and
//!   the names its output mentioned;
//! - open errors (a failure not followed by a success of the same command or
//!   on the same path), open todo items of plan tools, and decisions stated in
//!   assistant prose;
//! - other names and values (identifiers, versions, URLs, error names, hashes,
//!   numbers with units) grouped by where they were seen: the user's
//!   messages, the assistant's, another tool's results.
//!
//! Every item gets a score from how often (in how many messages) and how
//! recently it was used, more for what the user and the assistant wrote than
//! for tool output. [`Ledger::render_within`] prints the most detailed note
//! whose tokens fit a limit by dropping the lowest-scored items (never by
//! clipping lines); the format is documented in `docs/ledger.md`. A name is
//! never printed bare: it stands in a line that says what it belongs to.
//!
//! A ledger note that is itself moved out again is read back
//! ([`Ledger::add`] sees its text) into its items: files, commands, errors,
//! todos, decisions and names, which the newer messages then update (the
//! anchored update: a later success resolves a carried error, a carried file
//! read again counts once more).
//!
//! Names the reader already sees (the text kept beside the note,
//! [`Ledger::new`]) are left out, and secrets are never listed. With an
//! archive, file and command lines end with the recall handle of their latest
//! call and result when it fits ([`Ledger::set_line_handles`]), and the note
//! with the handle of all it stands for ([`Ledger::set_handle`]). The plan-tool
//! rules are here too ([`is_plan_tool`], [`plan_op`]), shared with the
//! compactor's task state.

use ctxpress_core::markers::{Written, written};
use ctxpress_core::message::{Message, MessageId, Role};
use ctxpress_core::tokens::{TokenCounter, count_message};
use ctxpress_dialect::{self as dialect, OpKind, Status, result_payload, result_status};
use ctxpress_text::entities::ascii_regex;
use regex::Regex;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::LazyLock;

mod carry;
mod plan;
mod render;

pub use plan::{PlanOp, created_id, is_plan_tool, plan_op};

/// First words of a ledger note.
pub const HEAD: &str = "[session ledger:";
/// Last line of a ledger note.
pub const END: &str = "[/session ledger]";
/// Characters a quoted request keeps.
const REQUEST_CHARS: usize = 600;
/// Characters any other value keeps.
const VALUE_CHARS: usize = 160;
/// Most names listed in one line.
const MAX_NAMES: usize = 400;
/// Most names tracked (the rest, seen once and early, are dropped).
const MAX_TERMS: usize = 20_000;
/// Rank bonus of a line with an unresolved error: after the open todos,
/// before everything else.
const OPEN_ERROR: f64 = 1e5;
/// Most decisions kept (the latest).
const MAX_DECISIONS: usize = 12;

/// Names and values worth keeping: paths with an extension, compound
/// identifiers (camelCase, PascalCase, snake_case), numbers with units,
/// URLs, versions, hex ids with a digit, error names.
static TERM: LazyLock<Regex> = LazyLock::new(|| {
    ascii_regex(concat!(
        r"https?://[^\s)<>'`\x22\]]+",
        r"|(?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]+\.[A-Za-z0-9]{1,6}\b",
        r"|\b[A-Za-z_][A-Za-z0-9_]*\.(?:rs|ts|tsx|js|jsx|py|go|java|c|h|cpp|md|json|toml|yaml|yml|sh|html|css|sql|rb)\b",
        r"|\bv?\d+\.\d+\.\d+\b",
        r"|\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds|minutes|MB|GB|KB|kB|MiB|GiB|%|px|tokens|lines|bytes)\b",
        r"|\b[A-Z][A-Za-z]*(?:Error|Exception)\b",
        r"|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b",
        r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b",
        r"|\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b",
        r"|\b[0-9a-f]{7,40}\b",
    ))
});

/// Sentences of assistant prose that state a decision or a finding.
static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    ascii_regex(
        r"(?i)\b(?:I'll|I will|I'm going to|let's|we should|decided|instead|the (?:fix|issue|problem|cause|bug) (?:is|was)|root cause|because|turns out|the plan)\b",
    )
});

/// One line, white space collapsed, clipped to `max` characters (with `…`).
pub fn clip_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Where names were seen: a file, a command's output, another tool's
/// results, or the user's or the assistant's messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Place {
    File(String),
    Command(String),
    Tool(String),
    User,
    Assistant,
}

/// A file and what happened to it.
#[derive(Debug, Clone, Default)]
struct FileEntry {
    reads: usize,
    edits: usize,
    writes: usize,
    last_action: &'static str,
    last_error: Option<String>,
    score: f64,
    /// Where its latest exchange is (see [`Detail`]).
    detail: Detail,
}

/// A command and its last outcome.
#[derive(Debug, Clone, Default)]
struct CommandEntry {
    runs: usize,
    status: &'static str,
    error: Option<String>,
    score: f64,
    /// Where its latest run is (see [`Detail`]).
    detail: Detail,
}

/// The messages of a file's or command's latest call and result (by id),
/// and the recall handle a line gives them when the run archives them
/// ([`Ledger::set_line_handles`]).
#[derive(Debug, Clone, Default)]
struct Detail {
    ids: Vec<MessageId>,
    handle: Option<ctxpress_core::handle::Handle>,
}

/// A name, where it was seen most and how much it counts.
#[derive(Debug, Clone, Default)]
struct TermEntry {
    score: f64,
    /// Weight by place; the heaviest names the line it goes in.
    places: Vec<(Place, f64, bool)>,
    /// Message count it was last seen in (to count a message once).
    last_msg: usize,
}

/// A call waiting for its result.
struct Pending {
    op: Option<dialect::Operation>,
    place: Option<Place>,
    plan_add: Option<String>,
    /// The message that made the call.
    call_msg: Option<MessageId>,
}

/// The ledger of the messages it was given (see the module docs).
#[derive(Default)]
pub struct Ledger {
    messages: usize,
    roles: [usize; 3],
    first_request: Option<String>,
    latest_request: Option<String>,
    files: HashMap<String, FileEntry>,
    commands: HashMap<String, CommandEntry>,
    errors: Vec<(String, String)>,
    open: Vec<String>,
    decisions: Vec<String>,
    terms: HashMap<String, TermEntry>,
    carried: Vec<String>,
    pending: HashMap<String, Pending>,
    /// Names the reader already sees elsewhere: not listed again.
    visible: HashSet<String>,
    /// The recall handle of the messages the note stands for, when the run
    /// archives them (see [`ctxpress_core::handle`]).
    handle: Option<ctxpress_core::handle::Handle>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("messages", &self.messages)
            .field("files", &self.files.len())
            .field("terms", &self.terms.len())
            .finish_non_exhaustive()
    }
}

/// Weight of a use at message `pos` (later counts more).
fn recency(pos: usize) -> f64 {
    // Grows slowly and without bound, so the newest uses rank first among
    // names used as often.
    1.0 + (pos as f64 + 1.0).ln() * 0.25
}

/// Move `s` to the end of `v` (added when missing): the newest last.
pub fn push_unique(v: &mut Vec<String>, s: &str) {
    if let Some(p) = v.iter().position(|x| x == s) {
        v.remove(p);
    }
    v.push(s.to_string());
}

/// Set `k` to `val` in `v`, moved to the end: the newest last.
pub fn set_pair(v: &mut Vec<(String, String)>, k: &str, val: &str) {
    v.retain(|(x, _)| x != k);
    v.push((k.to_string(), val.to_string()));
}

/// The line of a failed result worth quoting: the first that names an
/// error, else the first non-empty one.
fn error_line(text: &str) -> String {
    let payload = result_payload(text);
    let pick = payload
        .lines()
        .find(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("error")
                || l.contains("fail")
                || l.contains("exception")
                || l.contains("panic")
        })
        .or_else(|| payload.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("failed");
    clip_line(pick, VALUE_CHARS)
}

impl Ledger {
    /// An empty ledger that leaves out the names in `visible` (text the
    /// reader sees anyway: the messages that stay).
    pub fn new<'a>(visible: impl IntoIterator<Item = &'a str>) -> Ledger {
        let mut l = Ledger::default();
        for t in visible {
            for m in TERM.find_iter(t) {
                l.visible.insert(m.as_str().to_string());
            }
        }
        l
    }

    /// Name the recall handle of the messages the note stands for: its
    /// first line then says `moved to the archive as #h...; recall #h...
    /// gives them back` instead of pointing at `ctxpress expand`.
    pub fn set_handle(&mut self, handle: Option<ctxpress_core::handle::Handle>) {
        self.handle = handle;
    }

    /// Give each file and command line the recall handle of its latest call
    /// and result (`handle_of` the messages' ids; `None` gives the line
    /// none), written at the line's end: a model recalls the detail of one
    /// line without the whole run. For the notes of a run that archives
    /// what they stand for.
    pub fn set_line_handles(
        &mut self,
        handle_of: impl Fn(&[MessageId]) -> Option<ctxpress_core::handle::Handle>,
    ) {
        let details = self
            .files
            .values_mut()
            .map(|e| &mut e.detail)
            .chain(self.commands.values_mut().map(|e| &mut e.detail));
        for d in details {
            if !d.ids.is_empty() {
                d.handle = handle_of(&d.ids);
            }
        }
    }

    /// The line handles ([`Ledger::set_line_handles`]) with the messages
    /// each stands for: those a rendered note holds are to be registered
    /// (`markers::mark`) on its message.
    pub fn line_handles(
        &self,
    ) -> impl Iterator<Item = (&ctxpress_core::handle::Handle, &[MessageId])> {
        self.files
            .values()
            .map(|e| &e.detail)
            .chain(self.commands.values().map(|e| &e.detail))
            .filter_map(|d| Some((d.handle.as_ref()?, d.ids.as_slice())))
    }

    /// Messages read so far.
    pub fn messages(&self) -> usize {
        self.messages
    }

    fn term(&mut self, t: &str, place: &Place, weight: f64, changed: bool) {
        let t = t.trim_end_matches(['.', ',', ':', ';']);
        if t.len() < 3 || t.len() > 120 || self.visible.contains(t) {
            return;
        }
        if let Place::File(p) = place
            && p.ends_with(t)
        {
            return;
        }
        if self.terms.len() >= MAX_TERMS && !self.terms.contains_key(t) {
            return;
        }
        let pos = self.messages;
        let e = self.terms.entry(t.to_string()).or_default();
        if e.last_msg == pos + 1 && !changed {
            return;
        }
        e.last_msg = pos + 1;
        e.score += weight * recency(pos);
        match e.places.iter_mut().find(|(p, _, _)| p == place) {
            Some(x) => {
                x.1 += weight;
                x.2 |= changed;
            }
            None => e.places.push((place.clone(), weight, changed)),
        }
    }

    fn terms_of(&mut self, text: &str, place: &Place, weight: f64, changed: bool) {
        let mut seen: HashSet<&str> = HashSet::new();
        for m in TERM.find_iter(text) {
            if seen.insert(m.as_str()) {
                self.term(m.as_str(), place, weight, changed);
            }
        }
    }

    fn file(&mut self, p: &str) -> &mut FileEntry {
        self.files.entry(p.to_string()).or_default()
    }

    /// Read one more message (messages in conversation order).
    pub fn add(&mut self, m: &Message) {
        let pos = self.messages;
        self.messages += 1;
        let text = m.text();
        match written(&text) {
            Some(Written::Ledger) => return self.carry(&text, pos),
            Some(Written::ContextSummary) => return self.read_clip(&text, pos),
            _ => {}
        }
        let role = m.role();
        if m.is_tool_result() {
            self.roles[2] += 1;
        } else if role == Role::User {
            self.roles[0] += 1;
        } else {
            self.roles[1] += 1;
        }
        if role == Role::User && !m.is_tool_result_carrier() {
            // Agents that answer tools in user text (Cline, Roo Code:
            // `[read_file for 'src/a.ts'] Result:` then the output).
            let results = dialect::text_results(m);
            if !results.is_empty() {
                self.roles[0] -= 1;
                self.roles[2] += 1;
                for r in &results {
                    let body = dialect::text_results::part_text(m, r.part)
                        .and_then(|t| t.get(r.body.clone()))
                        .unwrap_or("");
                    let op = r.operation(dialect::builtin(), None);
                    let place = self.register(op.as_ref(), &r.tool, pos);
                    if !is_generated(body) {
                        let status = status_of(op.as_ref(), body, None);
                        self.outcome(&place, op.as_ref(), status, body);
                    }
                    self.terms_of(body, &place, 1.0, false);
                }
                return;
            }
            let text = dialect::strip_environment(&text);
            let t = text.trim();
            // ctxpress's own notes and references (a dedup reference that
            // took a message's place) are not requests.
            if !t.is_empty() && !is_generated_note(t) && !is_generated(t) {
                let r = clip_line(t, REQUEST_CHARS);
                if self.first_request.is_none() {
                    self.first_request = Some(r.clone());
                }
                self.latest_request = Some(r);
                self.terms_of(t, &Place::User, 4.0, false);
            }
        } else if role == Role::Assistant && !text.trim().is_empty() {
            self.terms_of(&text, &Place::Assistant, 2.0, false);
            for s in text.split_inclusive(['.', '\n']) {
                let s = ctxpress_core::handle::without(s);
                let s = s.trim().trim_start_matches("[summary: ");
                if s.len() > 24 && DECISION.is_match(s) && !s.contains("```") {
                    push_unique(&mut self.decisions, &clip_line(s, VALUE_CHARS * 2));
                }
            }
            let n = self.decisions.len();
            if n > MAX_DECISIONS {
                self.decisions.drain(..n - MAX_DECISIONS);
            }
        }
        for c in m.tool_calls() {
            let args = c.args();
            if is_plan_tool(&c.name) {
                let mut plan_add = None;
                match plan_op(&args) {
                    PlanOp::Replace(items) => self.open = items,
                    PlanOp::Add(t) => plan_add = Some(t),
                    PlanOp::Close(id) => {
                        let prefix = format!("#{id} ");
                        self.open.retain(|o| !o.starts_with(&prefix));
                    }
                    PlanOp::None => {}
                }
                self.pending.insert(
                    c.id.to_string(),
                    Pending {
                        op: None,
                        place: None,
                        plan_add,
                        call_msg: None,
                    },
                );
                continue;
            }
            let op = dialect::extract(&c);
            let place = self.register(op.as_ref(), &c.name, pos);
            // Names the call writes (edits, new file content) were changed.
            let changes = matches!(
                op.as_ref().map(|o| o.kind),
                Some(OpKind::Edit | OpKind::Write)
            );
            let mut strings = Vec::new();
            collect_strings(&args, &mut strings, 0);
            for s in strings {
                self.terms_of(s, &place, if changes { 3.0 } else { 2.0 }, changes);
            }
            self.pending.insert(
                c.id.to_string(),
                Pending {
                    op,
                    place: Some(place),
                    plan_add: None,
                    call_msg: Some(m.id().clone()),
                },
            );
        }
        if m.is_tool_result() {
            for r in m.tool_results() {
                let Some(p) = self.pending.remove(r.call_id.as_ref()) else {
                    continue;
                };
                if let Some(t) = p.plan_add {
                    let item = match created_id(&r.text) {
                        Some(id) => format!("#{id} {t}"),
                        None => t,
                    };
                    push_unique(&mut self.open, &item);
                    continue;
                }
                let Some(place) = p.place else { continue };
                // A result an earlier stage already replaced with its own
                // text (a summary, a reference) says nothing of the outcome;
                // its first line is that stage's header.
                let generated = is_generated(&r.text);
                let status = if generated {
                    Status::Unknown
                } else {
                    status_of(p.op.as_ref(), &r.text, r.is_error)
                };
                self.outcome(&place, p.op.as_ref(), status, &r.text);
                if let Some(call) = p.call_msg {
                    let mut ids = vec![call];
                    if ids[0] != *m.id() {
                        ids.push(m.id().clone());
                    }
                    let detail = match &place {
                        Place::File(f) => self.files.get_mut(f).map(|e| &mut e.detail),
                        Place::Command(c) => self.commands.get_mut(c).map(|e| &mut e.detail),
                        _ => None,
                    };
                    if let Some(d) = detail {
                        d.ids = ids;
                    }
                }
                let body = if generated {
                    r.text.split_once('\n').map_or("", |(_, b)| b)
                } else {
                    &r.text
                };
                self.terms_of(body, &place, 1.0, false);
            }
        }
    }

    /// Record a call's operation on its files and command; the place its
    /// result's names belong to.
    fn register(&mut self, op: Option<&dialect::Operation>, name: &str, pos: usize) -> Place {
        let place = match op {
            Some(op) if op.kind == OpKind::Command => {
                Place::Command(clip_line(op.command.as_deref().unwrap_or(""), VALUE_CHARS))
            }
            Some(op) if !op.paths.is_empty() => Place::File(op.paths[0].clone()),
            _ => Place::Tool(name.to_string()),
        };
        let w = recency(pos);
        if let Some(op) = op {
            for p in &op.paths {
                let f = self.file(p);
                f.score += 3.0 * w;
                match op.kind {
                    OpKind::Read => {
                        f.reads += 1;
                        f.last_action = "read";
                    }
                    OpKind::Edit => {
                        f.edits += 1;
                        f.last_action = "edited";
                    }
                    OpKind::Write => {
                        f.writes += 1;
                        f.last_action = "written";
                    }
                    OpKind::Search => f.last_action = "searched",
                    OpKind::Command => f.last_action = "used by a command",
                }
            }
            for p in &op.writes {
                let f = self.file(p);
                f.score += 3.0 * w;
                f.writes += 1;
                f.last_action = "changed by a command";
            }
            if let Place::Command(cmd) = &place {
                let e = self.commands.entry(cmd.clone()).or_default();
                e.runs += 1;
                e.score += 3.0 * w;
                e.status = "no result yet";
            }
        }
        place
    }

    fn outcome(
        &mut self,
        place: &Place,
        op: Option<&dialect::Operation>,
        status: Status,
        text: &str,
    ) {
        let (key, word) = match place {
            Place::Command(c) => (format!("command `{c}`"), None),
            Place::File(p) => (format!("file {p}"), Some(p.clone())),
            Place::Tool(t) => (format!("tool {t}"), None),
            _ => return,
        };
        if let Place::Command(c) = place
            && let Some(e) = self.commands.get_mut(c)
        {
            e.status = match status {
                Status::Success => "ok",
                Status::Failure => "failed",
                Status::Unknown => "ran",
            };
            e.error = (status == Status::Failure).then(|| error_line(text));
        }
        match status {
            Status::Failure => {
                let line = error_line(text);
                if let Some(p) = &word {
                    self.file(p).last_error = Some(line.clone());
                }
                set_pair(&mut self.errors, &key, &line);
            }
            Status::Success => {
                self.errors.retain(|(k, _)| k != &key);
                if let Some(op) = op {
                    for p in op.modified_paths() {
                        let k = format!("file {p}");
                        self.errors.retain(|(x, _)| x != &k);
                    }
                }
            }
            Status::Unknown => {}
        }
    }
}

/// The outcome of a call's result. A file read, edit or write fails only
/// when the tool says so (its error flag, `<tool_use_error>`, a first line
/// that starts with `Error`, Cline's `The tool execution failed`, a missing
/// file; else it is unknown, as [`dialect::result_status`] has it): what
/// the file holds, or a path with `Exception` in it, says nothing of the
/// outcome. Other calls are judged by
/// [`dialect::result_status`].
fn status_of(op: Option<&dialect::Operation>, text: &str, is_error: Option<bool>) -> Status {
    let exit = op.map(|o| o.exit).unwrap_or_default();
    if !op.is_some_and(|o| matches!(o.kind, OpKind::Read | OpKind::Edit | OpKind::Write)) {
        return result_status(exit, text, is_error);
    }
    if is_error == Some(true) {
        return Status::Failure;
    }
    let first = result_payload(text)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_start();
    let head = first
        .get(..first.len().min(120))
        .unwrap_or(first)
        .to_ascii_lowercase();
    let failed = first.starts_with("<tool_use_error>")
        || head.starts_with("error")
        || head.starts_with("the tool execution failed")
        || (first.len() < 300
            && ["no such file", "does not exist", "enoent", "file not found"]
                .iter()
                .any(|w| head.contains(w)));
    if failed {
        Status::Failure
    } else if is_error == Some(false) {
        Status::Success
    } else {
        Status::Unknown
    }
}

/// The static word of a file's last action as the note prints it.
fn action_word(s: &str) -> Option<&'static str> {
    [
        "read",
        "edited",
        "written",
        "searched",
        "used by a command",
        "changed by a command",
    ]
    .into_iter()
    .find(|w| *w == s)
}

/// True for the user-role notes ctxpress writes in place of what it moved
/// out (an evict note, a compaction's `[Context Summary`, the ledger, a
/// compactor's `[ctxpress: ` note): they are not the user's requests, so
/// the "last user message" rule looks past them.
pub fn is_generated_note(text: &str) -> bool {
    matches!(
        written(text),
        Some(Written::ContextSummary | Written::Ledger | Written::Evicted | Written::Note)
    )
}

/// True for a text an earlier stage wrote in place of a result: a summary
/// (`[summary`), a note (`[ctxpress: `) or a reference (`[LABEL:dup of `),
/// with or without a recall handle.
fn is_generated(text: &str) -> bool {
    matches!(
        written(text),
        Some(Written::Summary | Written::Note | Written::Reference)
    )
}

/// The strings in a JSON value (keys left out), depth-bounded.
fn collect_strings<'v>(v: &'v Value, out: &mut Vec<&'v str>, depth: usize) {
    if depth > 32 {
        return;
    }
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out, depth + 1)),
        Value::Object(o) => o.values().for_each(|x| collect_strings(x, out, depth + 1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_core::Conversation;
    use ctxpress_core::tokens::Heuristic;
    use serde_json::json;

    /// A short coding session: a request, a read, a failing test run, an
    /// edit, a passing run, a todo list and a decision.
    fn session() -> Conversation {
        let call = |id: &str, name: &str, args: Value| {
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]})
        };
        let result =
            |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
        let msgs = json!([
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "The parser in src/parse.rs rejects empty arrays; fix it and add a test."},
            call("c1", "Read", json!({"file_path": "/repo/src/parse.rs"})),
            result("c1", "pub fn parse_array(input: &str) -> Result<Vec<Value>, ParseError> {\n    if input.is_empty() { return Err(ParseError::Empty) }\n}\nconst MAX_DEPTH: usize = 64;"),
            {"role": "assistant", "content": "The bug is that parse_array treats `[]` as empty input. I'll check the tests first."},
            call("c2", "Bash", json!({"command": "cargo test -p parser"})),
            result("c2", "running 3 tests\ntest parse_empty_array ... FAILED\nerror: test failed, to rerun pass `-p parser --lib`\nParseError::Empty at src/parse.rs:2\nexit code: 101"),
            call("c3", "Edit", json!({"file_path": "/repo/src/parse.rs", "old_string": "if input.is_empty()", "new_string": "if input.trim().is_empty() && !input.starts_with('[')"})),
            result("c3", "The file /repo/src/parse.rs has been updated."),
            call("c4", "TodoWrite", json!({"todos": [
                {"content": "fix parse_array", "status": "completed"},
                {"content": "add a regression test for empty arrays", "status": "pending"}]})),
            result("c4", "Todos updated"),
            call("c5", "Bash", json!({"command": "cargo test -p parser"})),
            result("c5", "running 3 tests\ntest result: ok. 3 passed; 0 failed; finished in 0.42s\nexit code: 0"),
            {"role": "user", "content": "Good. Now bump the crate to version 0.4.1 in Cargo.toml."}
        ]);
        Conversation::parse(&msgs.to_string()).unwrap()
    }

    fn ledger_of_all(c: &Conversation) -> Ledger {
        let mut l = Ledger::new(std::iter::empty::<&str>());
        c.messages.iter().for_each(|m| l.add(m));
        l
    }

    fn ledger_of(c: &Conversation) -> Ledger {
        let mut l = Ledger::new(std::iter::empty::<&str>());
        for m in &c.messages[1..] {
            l.add(m);
        }
        l
    }

    /// With line handles, each file and command line ends with the handle
    /// of its latest call and result, the header says so, and a note moved
    /// out again is read back without them.
    #[test]
    fn lines_carry_the_handle_of_their_latest_exchange() {
        let c = session();
        let mut l = ledger_of_all(&c);
        l.set_line_handles(|ids| Some(ctxpress_core::markers::handle_of(&c, ids)));
        l.set_handle(Some(ctxpress_core::markers::handle_of(
            &c,
            &[c.messages[0].id().clone()],
        )));
        let (text, _) = l.render_within(usize::MAX, &Heuristic);
        assert!(
            text.contains("a line's own handle its latest call and result"),
            "{text}"
        );
        let lines: Vec<(&ctxpress_core::handle::Handle, &[MessageId])> = l.line_handles().collect();
        assert!(!lines.is_empty());
        for (h, ids) in &lines {
            // Each stands for a call and the message with its result.
            assert_eq!(ids.len(), 2);
            let line = text
                .lines()
                .find(|x| x.ends_with(&format!(" {h}")))
                .unwrap_or_else(|| panic!("no line ends with {h}: {text}"));
            assert!(line.starts_with("- "), "{line}");
        }
        let mut again = Ledger::new(std::iter::empty::<&str>());
        again.add(&Message::text_message(MessageId::new("n"), "user", &text));
        let (back, _) = again.render_within(usize::MAX, &Heuristic);
        assert!(ctxpress_core::handle::find_all(&back).is_empty(), "{back}");
        let plain = ledger_of_all(&c).render_within(usize::MAX, &Heuristic).0;
        let files = |t: &str| t.lines().filter(|x| x.contains(".rs:")).count();
        assert_eq!(files(&back), files(&plain), "{back}");
    }

    #[test]
    fn golden_ledger_of_a_short_session() {
        let (text, _) = ledger_of(&session()).render_within(usize::MAX, &Heuristic);
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/ledger.txt");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        let want = std::fs::read_to_string(path).expect("golden file (UPDATE_GOLDEN=1 writes it)");
        assert_eq!(
            text, want,
            "the ledger format changed: check it, then UPDATE_GOLDEN=1"
        );
    }

    #[test]
    fn the_ledger_shrinks_by_dropping_lines_not_by_clipping() {
        let l = ledger_of(&session());
        let (full, t_full) = l.render_within(usize::MAX, &Heuristic);
        let (small, t_small) = l.render_within(t_full / 2, &Heuristic);
        assert!(t_small <= t_full / 2, "{t_small} > {}", t_full / 2);
        assert!(small.starts_with(HEAD) && small.ends_with(END), "{small}");
        // Every line of the short note is a line of the full one (names
        // may be fewer), and the task is always there.
        assert!(small.contains("first request: \"The parser in src/parse.rs"));
        for line in small.lines() {
            let head = line.split("; names in").next().unwrap_or(line);
            assert!(full.contains(head), "{line} not in\n{full}");
        }
        // Tighter limits never give a longer note.
        let mut last = t_full;
        for limit in (0..t_full).rev().step_by(7) {
            let (_, t) = l.render_within(limit, &Heuristic);
            assert!(t <= last, "{limit}: {t} > {last}");
            last = t;
        }
    }

    #[test]
    fn names_already_visible_are_left_out_and_notes_are_carried() {
        let c = session();
        let mut l = Ledger::new(["MAX_DEPTH stays as it is"]);
        for m in &c.messages[1..] {
            l.add(m);
        }
        let (text, _) = l.render_within(usize::MAX, &Heuristic);
        assert!(!text.contains("`MAX_DEPTH`"), "{text}");
        assert!(text.contains("`parse_array`"), "{text}");
        // A ledger moved out again is carried into the next one.
        let note = Message::text_message(ctxpress_core::MessageId::new("n"), "user", &text);
        let mut again = Ledger::new(std::iter::empty::<&str>());
        again.add(&note);
        again.add(&c.messages[13]);
        let (next, _) = again.render_within(usize::MAX, &Heuristic);
        assert!(
            next.contains("first request: \"The parser in src/parse.rs"),
            "{next}"
        );
        assert!(next.contains("latest request: \"Good. Now bump"), "{next}");
        assert!(next.contains("/repo/src/parse.rs: edited"), "{next}");
    }

    #[test]
    fn a_note_moved_out_again_is_read_back_into_its_items() {
        let c = session();
        // Up to the failed test run: the error is open.
        let mut l = Ledger::new(std::iter::empty::<&str>());
        for m in &c.messages[1..7] {
            l.add(m);
        }
        let (text, _) = l.render_within(usize::MAX, &Heuristic);
        assert!(text.contains("`cargo test -p parser`: failed"), "{text}");
        let note = Message::text_message(ctxpress_core::MessageId::new("n"), "user", &text);
        // Read back alone, the note renders as itself: nothing lost, nothing
        // moved to a catch-all section.
        let mut back = Ledger::new(std::iter::empty::<&str>());
        back.add(&note);
        let (same, _) = back.render_within(usize::MAX, &Heuristic);
        assert_eq!(same, text);
        // The anchored update: the later messages update the carried items.
        for m in &c.messages[7..] {
            back.add(m);
        }
        let (next, _) = back.render_within(usize::MAX, &Heuristic);
        assert!(
            next.starts_with(&format!(
                "{HEAD} 13 earlier messages (2 user, 6 assistant, 5 tool results)"
            )),
            "{next}"
        );
        assert!(
            next.contains("`cargo test -p parser`: ok (last of 2 runs)"),
            "{next}"
        );
        assert!(
            next.contains("/repo/src/parse.rs: edited, read (last edited)"),
            "{next}"
        );
        assert!(!next.contains("from an earlier ledger"), "{next}");
        assert!(!next.contains("unresolved"), "{next}");
        assert!(
            next.contains("add a regression test for empty arrays"),
            "{next}"
        );
    }

    #[test]
    fn a_file_operation_fails_only_when_the_tool_says_so() {
        let call = |id: &str, name: &str, args: Value| {
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]})
        };
        let result =
            |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
        let path = "/r/src/exception/RestExceptionHandler.java";
        let msgs = json!([
            {"role": "user", "content": "Add the handler."},
            call("c1", "Read", json!({"file_path": path})),
            result("c1", "1\tpackage com.example.exception;\n2\timport java.util.List;"),
            call("c2", "Write", json!({"file_path": path, "content": "class RestExceptionHandler {}"})),
            result("c2", &format!("The file {path} has been updated successfully.")),
            call("c3", "Edit", json!({"file_path": "/r/src/Gone.java", "old_string": "a", "new_string": "b"})),
            result("c3", "<tool_use_error>File does not exist.</tool_use_error>"),
            call("c4", "Bash", json!({"command": "mvn test"})),
            result("c4", "Exit code 1\n[ERROR] Tests run: 3, Failures: 1\njava.lang.IllegalStateException: boom")
        ]);
        let c = Conversation::parse(&msgs.to_string()).unwrap();
        let (text, _) = ledger_of_all(&c).render_within(usize::MAX, &Heuristic);
        let line = text
            .lines()
            .find(|l| l.contains("RestExceptionHandler.java:"))
            .unwrap();
        assert!(!line.contains("unresolved error"), "{text}");
        assert!(
            text.contains("/r/src/Gone.java: edited; unresolved error: <tool_use_error>"),
            "{text}"
        );
        assert!(text.contains("`mvn test`: failed"), "{text}");
    }

    #[test]
    fn results_sent_as_user_text_are_read_as_results() {
        let env =
            "<environment_details>\n# VSCode Open Tabs\nsrc/tabs_only.ts\n</environment_details>";
        let msgs = json!([
            {"role": "system", "content": "You are Cline."},
            {"role": "user", "content": format!("<task>Fix the login bug</task>\n{env}")},
            {"role": "assistant", "content": "<read_file>\n<path>src/auth/login.ts</path>\n</read_file>"},
            {"role": "user", "content": [
                {"type": "text", "text": "[read_file for 'src/auth/login.ts'] Result:"},
                {"type": "text", "text": "export function checkSession(req: Request) {}"},
                {"type": "text", "text": env}]},
            {"role": "user", "content": "Now fix the session check."}
        ]);
        let c = Conversation::parse(&msgs.to_string()).unwrap();
        let (text, _) = ledger_of(&c).render_within(usize::MAX, &Heuristic);
        assert!(
            text.contains("first request: \"<task>Fix the login bug</task>\""),
            "{text}"
        );
        assert!(
            text.contains("src/auth/login.ts: read; names in it: `checkSession`"),
            "{text}"
        );
        assert!(
            text.contains("latest request: \"Now fix the session check.\""),
            "{text}"
        );
        assert!(!text.contains("tabs_only"), "{text}");
    }

    #[test]
    fn a_compaction_clip_moved_out_gives_its_task_state() {
        let clip = "[Context Summary: 40 earlier messages of conversation c in 2 batches, a to b]\n\
            [depth:0 | 2026-01-01 | 40 messages]\nThe agent fixed parse_array in the parser.\n\
            [task state]\nfirst request: Fix the parser\nlatest request: Now the lexer\n\
            read: src/lexer.rs\nmodified: src/parse.rs\ncommand: failed: cargo test -p lexer\n\
            error: command cargo test -p lexer\tthread 'lex_unicode' panicked\n\
            open: #3 handle CRLF\nkeep: \"token ghp_abcdefghijklmnopqrstuvwxyz0123456789\"\n[/task state]";
        let mut l = Ledger::new(std::iter::empty::<&str>());
        l.add(&Message::text_message(
            ctxpress_core::MessageId::new("c"),
            "user",
            clip,
        ));
        l.add(&Message::text_message(
            ctxpress_core::MessageId::new("u"),
            "user",
            "And run the benches.",
        ));
        let (text, _) = l.render_within(usize::MAX, &Heuristic);
        for want in [
            "first request: \"Fix the parser\"",
            "latest request: \"And run the benches.\"",
            "src/parse.rs: edited",
            "src/lexer.rs: read",
            "cargo test -p lexer",
            "lex_unicode",
            "#3 handle CRLF",
            "`parse_array`",
        ] {
            assert!(text.contains(want), "{want} not in {text}");
        }
        assert!(!text.contains("ghp_"), "{text}");
    }

    #[test]
    fn secrets_are_not_listed() {
        let m = Message::text_message(
            ctxpress_core::MessageId::new("u"),
            "user",
            "use the key ghp_abcdefghijklmnopqrstuvwxyz0123456789 with api_client",
        );
        let mut l = Ledger::new(std::iter::empty::<&str>());
        l.add(&Message::text_message(
            ctxpress_core::MessageId::new("a"),
            "assistant",
            "ok then",
        ));
        l.add(&m);
        let (text, _) = l.render_within(usize::MAX, &Heuristic);
        assert!(text.contains("`api_client`"), "{text}");
        assert!(
            !text.contains("`ghp_abcdefghijklmnopqrstuvwxyz0123456789`"),
            "{text}"
        );
    }
}
