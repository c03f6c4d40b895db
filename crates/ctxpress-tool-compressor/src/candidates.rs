//! The results and write inputs that may be summarized: what a candidate is,
//! the tests a call must pass to become one, and the later calls that act on a
//! failure.

use ctxpress_core::markers::{Written, written};
use ctxpress_core::{Conversation, Message, Role};
use ctxpress_dialect::Turns;
use ctxpress_dialect::traffic::{self, MessageCalls, Traffic};
use ctxpress_dialect::{self as dialect, DialectTable, OpKind, Operation, Status, command_family};
use ctxpress_text::bytes::fewer_chars_than;
use foldhash::{HashMap, HashSet};
use serde_json::Value;

use crate::summary::{Kind, Subject};
use crate::{ToolCompressor, kind_of};

/// The file content argument of a write call that may be summarized.
#[derive(Debug, Clone)]
pub(crate) struct InputCandidate {
    /// Message index of the call.
    pub(crate) msg: usize,
    /// Position of the call among the message's tool calls.
    pub(crate) slot: usize,
    /// The parsed calls of that message.
    pub(crate) calls: MessageCalls,
    pub(crate) call_id: String,
    /// The argument holding the content.
    pub(crate) key: String,
    pub(crate) subject: Subject,
}

/// One result that may be summarized.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// Message index of the result.
    pub(crate) msg: usize,
    pub(crate) call_id: String,
    pub(crate) kind: Kind,
    pub(crate) subject: Subject,
}

/// A tool result sent back as user text (Cline, Roo Code): the output
/// between its `[TOOL for 'ARG'] Result:` header and what follows it.
pub(crate) struct TextCandidate {
    /// Message index of the user message.
    pub(crate) msg: usize,
    /// The text part holding the output (`dialect::TextResult::part`).
    pub(crate) part: Option<usize>,
    /// The output's byte range in that part.
    pub(crate) body: std::ops::Range<usize>,
    pub(crate) kind: Kind,
    pub(crate) subject: Subject,
}

/// Longer terms are never listed in a summary's `names:` line.
pub(crate) const MAX_NAME_BYTES: usize = 120;

/// Whether `text` is ctxpress's own already (a summary, a truncated text,
/// a note or a dedup reference, handle or not): never compressed again.
pub(crate) fn already_done(text: &str) -> bool {
    matches!(
        written(text),
        Some(Written::Summary | Written::Truncated | Written::Note | Written::Reference)
    )
}

const PATH_KEYS: &[&str] = &[
    "file_path",
    "filePath",
    "path",
    "absolute_path",
    "notebook_path",
    "filename",
    "file",
    "target_file",
    "paths",
];

/// True when the result answering `call_id` in `m` holds text only (no
/// images or other blocks a summary would drop).
fn text_only(m: &Message, call_id: &str) -> bool {
    fn parts_are_text(v: Option<&Value>) -> bool {
        match v {
            None | Some(Value::Null) | Some(Value::String(_)) => true,
            Some(Value::Array(parts)) => parts.iter().all(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str),
                    Some("text") | Some("input_text") | Some("output_text") | None
                ) && p.get("text").is_some_and(Value::is_string)
            }),
            Some(_) => false,
        }
    }
    if matches!(m.role(), Role::Tool | Role::Function) {
        return parts_are_text(m.content());
    }
    match m.content() {
        // Found through the message's result index: asked once per result,
        // a scan of the blocks made a message of N results cost N².
        Some(Value::Array(_)) => m
            .tool_result_blocks(call_id)
            .into_iter()
            .all(|b| parts_are_text(b.get("content"))),
        _ => false,
    }
}

fn display_paths(
    table: &DialectTable,
    name: &str,
    args: &traffic::Args,
    op: Option<&Operation>,
) -> Vec<String> {
    // The paths in argument `k`, when it holds any.
    let paths_in = |k: &str| match args.get(k) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(vec![s.trim().to_string()]),
        Some(Value::Array(a)) => {
            let v: Vec<String> = a
                .iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().to_string())
                .collect();
            (!v.is_empty()).then_some(v)
        }
        _ => None,
    };
    let found = match table.find(name) {
        Some(s) if !s.path_args.is_empty() => s.path_args.iter().find_map(|k| paths_in(k)),
        _ => PATH_KEYS.iter().find_map(|k| paths_in(k)),
    };
    found
        .or_else(|| op.map(|o| o.paths.clone()))
        .unwrap_or_default()
}

/// The command a call runs, with its working directory.
fn command_of(op: Option<&Operation>) -> Option<(&str, &str)> {
    let op = op?;
    Some((op.cwd.as_deref().unwrap_or(""), op.command.as_deref()?))
}

/// Keys a failure is resolved by (a later call sharing one acted on it),
/// but for the command's: its paths, or its tool when it has neither a
/// command nor a path.
fn act_keys(name: &str, op: Option<&Operation>) -> Vec<String> {
    let mut keys: Vec<String> = op
        .into_iter()
        .flat_map(|op| op.paths.iter().chain(op.writes.iter()))
        .map(|p| format!("path\u{1}{p}"))
        .collect();
    if keys.is_empty() && command_of(op).is_none() {
        keys.push(format!("tool\u{1}{}", name.to_lowercase()));
    }
    keys
}

/// The keys of the calls after a point (see [`act_keys`]) and their
/// commands. A command's key (its working directory and command family)
/// is found only when a failure needs it: finding a family parses the
/// command.
#[derive(Default)]
struct LaterKeys<'r> {
    keys: HashSet<String>,
    /// Every command seen, with its working directory.
    commands: HashSet<(&'r str, &'r str)>,
    /// The commands whose key is not in `keys` yet.
    pending: Vec<(&'r str, &'r str)>,
    /// The key of each command whose key was found.
    families: HashMap<(&'r str, &'r str), String>,
}

impl<'r> LaterKeys<'r> {
    fn command_key(&mut self, (cwd, c): (&'r str, &'r str)) -> String {
        self.families
            .entry((cwd, c))
            .or_insert_with(|| format!("cmd\u{1}{cwd}\u{1}{}", command_family(c)))
            .clone()
    }

    /// True when a call seen has the key of `command`.
    fn has_command(&mut self, command: (&'r str, &'r str)) -> bool {
        if self.commands.contains(&command) {
            return true;
        }
        let key = self.command_key(command);
        if self.keys.contains(&key) {
            return true;
        }
        for c in std::mem::take(&mut self.pending) {
            let k = self.command_key(c);
            self.keys.insert(k);
        }
        self.keys.contains(&key)
    }

    fn add(&mut self, keys: Vec<String>, command: Option<(&'r str, &'r str)>) {
        self.keys.extend(keys);
        if let Some(c) = command
            && self.commands.insert(c)
        {
            self.pending.push(c);
        }
    }
}

impl ToolCompressor {
    /// The results that may be summarized, oldest first, the write inputs
    /// that may be, and the number of failures kept because nothing acted on
    /// them.
    ///
    /// Every answered call is judged by its cheap tests first (and whether
    /// it failed, which the failures kept need for every call); what only a
    /// candidate needs (its display paths, a write's content check, which
    /// decodes the content, copies of its id and name) is worked out for the
    /// calls that can still become one. `candidates_reference` (tests, in
    /// `candidates/reference.rs`) is the eager version it answers as.
    pub(crate) fn candidates(
        &self,
        conv: &Conversation,
    ) -> (Vec<Candidate>, Vec<InputCandidate>, u64) {
        let tail = conv.tail_start(self.cfg.protected_tail);
        let traffic = Traffic::of(conv, &self.table, self.cfg.cwd.as_deref());
        // Every answered call, in order, borrowed from the index.
        struct Rec<'t> {
            msg: usize,
            call_msg: usize,
            slot: usize,
            call: &'t traffic::ParsedCall,
            /// Its result, while whether it failed may still be asked.
            res: Option<ctxpress_core::message::ToolResult<'t>>,
            /// May give a write input (all but the content check passed).
            write_input: bool,
            /// Worked out only where it decides something (below).
            failed: bool,
            eligible: bool,
        }
        let mut recs: Vec<Rec<'_>> = Vec::with_capacity(traffic.calls.len());
        for cr in &traffic.calls {
            let call = traffic.call(cr);
            let Some(r) = cr.result else {
                continue;
            };
            let Some(rm) = conv.messages.get(r) else {
                continue;
            };
            let Some(res) = rm.tool_result(&call.id) else {
                continue;
            };
            let op = call.op.as_ref();
            let unique = cr.unique;
            let eligible = unique
                && r < tail
                && !conv.is_protected(r)
                && !already_done(&res.text)
                && !fewer_chars_than(&res.text, self.cfg.min_chars)
                && !self.skipped_tool(&call.name)
                && text_only(rm, &call.id);
            let write_input = self.cfg.inputs
                && unique
                && cr.msg < tail
                && !conv.is_protected(cr.msg)
                && op.is_some_and(|o| o.kind == OpKind::Write)
                && !self.skipped_tool(&call.name);
            recs.push(Rec {
                msg: r,
                call_msg: cr.msg,
                slot: cr.slot,
                call,
                res: (eligible || write_input).then_some(res),
                write_input,
                failed: false,
                eligible,
            });
        }
        // The last `keep_last` results stay.
        let keep_from = recs.len().saturating_sub(self.cfg.keep_last);
        // Whether a call failed decides something only for an older result
        // that may be summarized unless it is an unresolved failure, and for
        // an older write input (kept when it failed); elsewhere it stays
        // false. A failure nothing decides by is never looked up below, and
        // the keys of the calls after a failure that is are all taken, so
        // the failures kept are those of every call's status.
        for r in recs.iter_mut().take(keep_from) {
            let asks = (r.eligible && self.cfg.keep_unresolved_errors) || r.write_input;
            if let (true, Some(res)) = (asks, &r.res) {
                let exit_style = r.call.op.as_ref().map(|o| o.exit).unwrap_or_default();
                let facts = traffic::result_facts(conv, r.msg, &r.call.id, &res.text);
                r.failed = facts.status(exit_style, &res.text, res.is_error) == Status::Failure;
            }
        }
        // Failures nothing acted on stay.
        let mut later = LaterKeys::default();
        let mut unresolved = vec![false; recs.len()];
        // A call's keys are only looked up for the failures before it: the
        // calls before the first failure are skipped.
        let first_failure = recs.iter().position(|r| r.failed).unwrap_or(recs.len());
        for (i, r) in recs.iter().enumerate().skip(first_failure).rev() {
            let op = r.call.op.as_ref();
            let keys = act_keys(&r.call.name, op);
            let command = command_of(op);
            if r.failed
                && !keys.iter().any(|k| later.keys.contains(k))
                && !command.is_some_and(|c| later.has_command(c))
                && let Some(u) = unresolved.get_mut(i)
            {
                *u = true;
            }
            later.add(keys, command);
        }
        // Write inputs: old, successful, of files no recent call touches.
        let mut inputs = Vec::new();
        if self.cfg.inputs {
            let recent: HashSet<&str> = recs
                .iter()
                .skip(keep_from)
                .filter_map(|r| r.call.op.as_ref())
                .flat_map(|o| o.paths.iter().chain(o.writes.iter()))
                .map(String::as_str)
                .collect();
            for r in recs.iter().take(keep_from) {
                let (true, Some(op)) = (r.write_input, r.call.op.as_ref()) else {
                    continue;
                };
                if r.failed || op.paths.iter().any(|p| recent.contains(p.as_str())) {
                    continue;
                }
                let Some(key) = self.content_key(r.call) else {
                    continue;
                };
                inputs.push(InputCandidate {
                    msg: r.call_msg,
                    slot: r.slot,
                    calls: traffic
                        .message_calls(r.call_msg)
                        .cloned()
                        .unwrap_or_else(|| MessageCalls::from(Vec::new())),
                    call_id: r.call.id.clone(),
                    key: key.clone(),
                    subject: Subject {
                        tool: r.call.name.clone(),
                        paths: display_paths(&self.table, &r.call.name, &r.call.args, Some(op)),
                        command: None,
                        exit: None,
                    },
                });
            }
        }
        let mut kept_errors = 0u64;
        let mut out = Vec::new();
        for (i, r) in recs.iter().enumerate().take(keep_from) {
            if !r.eligible {
                continue;
            }
            if self.cfg.keep_unresolved_errors && unresolved.get(i).copied().unwrap_or(false) {
                kept_errors += 1;
                continue;
            }
            let op = r.call.op.as_ref();
            let kind = kind_of(op);
            if !self.enabled(kind) {
                continue;
            }
            let name = &r.call.name;
            let command = op.and_then(|o| o.command.as_deref()).map(|c| {
                // Search keys start with the tool name; the header names it already.
                match c.strip_prefix(name.as_str()) {
                    Some(rest) if kind == Kind::Search => rest.trim().to_string(),
                    _ => c.to_string(),
                }
            });
            out.push(Candidate {
                msg: r.msg,
                call_id: r.call.id.clone(),
                kind,
                subject: Subject {
                    tool: name.clone(),
                    paths: display_paths(&self.table, name, &r.call.args, op),
                    command,
                    exit: None,
                },
            });
        }
        (out, inputs, kept_errors)
    }

    /// The tool results sent as user text that may be summarized, oldest
    /// first: outside the protected tail, not the last `keep_last` of them,
    /// long enough, not summarized already. Failures are not held back:
    /// these agents act on a result in the very next turn, which the
    /// protected tail keeps.
    pub(crate) fn text_candidates(&self, conv: &Conversation) -> Vec<TextCandidate> {
        let tail = conv.tail_start(self.cfg.protected_tail);
        let mut all = Vec::new();
        for (i, m) in conv.messages.iter().enumerate().take(tail) {
            if m.role() != Role::User || conv.is_protected(i) {
                continue;
            }
            for r in dialect::text_results(m) {
                all.push((i, r));
            }
        }
        let keep_from = all.len().saturating_sub(self.cfg.keep_last);
        let mut out = Vec::new();
        for (i, r) in all.into_iter().take(keep_from) {
            let Some(body) = conv
                .messages
                .get(i)
                .and_then(|m| dialect::text_results::part_text(m, r.part))
                .and_then(|t| t.get(r.body.clone()))
            else {
                continue;
            };
            if already_done(body)
                || fewer_chars_than(body, self.cfg.min_chars)
                || self.skipped_tool(&r.tool)
            {
                continue;
            }
            let op = r.operation(&self.table, self.cfg.cwd.as_deref());
            let kind = kind_of(op.as_ref());
            if !self.enabled(kind) {
                continue;
            }
            let paths = match &op {
                Some(o) if !o.paths.is_empty() => o.paths.clone(),
                _ => Vec::new(),
            };
            out.push(TextCandidate {
                msg: i,
                part: r.part,
                body: r.body,
                kind,
                subject: Subject {
                    command: op.and_then(|o| o.command).filter(|_| kind != Kind::Read),
                    tool: r.tool,
                    paths,
                    exit: None,
                },
            });
        }
        out
    }
}

#[cfg(test)]
mod reference;
