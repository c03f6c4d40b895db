//! The task state block: what the agent was asked, touched, ran and still
//! has to do, built deterministically from the messages (never by a model)
//! and carried forward across compactions by an anchored update.
//!
//! The block is line-oriented, one fact a line, between two marker lines:
//!
//! ```text
//! [task state]
//! first request: <the first user request, verbatim, clipped>
//! latest request: <the latest user request, verbatim, clipped>
//! read: <path>                      (one line per file read, not modified)
//! modified: <path>                  (one line per file written or edited)
//! command: <ok|failed|unknown>: <command>   (last status of each command)
//! error: <key>\t<first line of the error>   (failures not yet resolved)
//! open: <item>                      (open items of the last plan/todo call)
//! [/task state]
//! ```
//!
//! Values are single lines (white space collapsed), so the block parses back
//! exactly. The `key` of an error is `command <command>` or `file <path>` (a
//! later success of the same command or on the same path resolves it) or
//! `tool <name>`.

use ctxpress_core::dialect::{self, ExitReport, OpKind, Status, result_payload, result_status};
use ctxpress_core::{Message, Role};
use serde_json::Value;
use std::collections::HashMap;

/// First marker line.
pub const BEGIN: &str = "[task state]";
/// Last marker line.
pub const END: &str = "[/task state]";
/// Characters a request is clipped to.
pub const REQUEST_CHARS: usize = 300;
/// Characters any other value is clipped to.
const VALUE_CHARS: usize = 200;
/// Most lines of each list kept (the most recent).
const MAX_PATHS: usize = 40;
const MAX_COMMANDS: usize = 20;
const MAX_ERRORS: usize = 10;
const MAX_OPEN: usize = 20;

/// The task state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskState {
    /// The first user request.
    pub first_request: Option<String>,
    /// The latest user request.
    pub latest_request: Option<String>,
    /// Files read (and not modified).
    pub read: Vec<String>,
    /// Files written or edited.
    pub modified: Vec<String>,
    /// Commands with their last status (`ok`, `failed`, `unknown`), oldest first.
    pub commands: Vec<(String, String)>,
    /// Unresolved errors: key and first line.
    pub errors: Vec<(String, String)>,
    /// Open plan/todo items.
    pub open: Vec<String>,
    /// Keys that succeeded in the material (resolve earlier errors); not rendered.
    succeeded: Vec<String>,
    /// True when the material held a plan/todo call; not rendered.
    plan_seen: bool,
}

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

fn push_unique(v: &mut Vec<String>, s: &str) {
    if let Some(p) = v.iter().position(|x| x == s) {
        v.remove(p);
    }
    v.push(s.to_string());
}

fn set_pair(v: &mut Vec<(String, String)>, k: &str, val: &str) {
    v.retain(|(x, _)| x != k);
    v.push((k.to_string(), val.to_string()));
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Success => "ok",
        Status::Failure => "failed",
        Status::Unknown => "unknown",
    }
}

/// Normalized tool name: lower case, letters and digits only.
fn norm(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// True for plan/todo tools (TodoWrite, update_plan, TaskCreate, write_todos, ...).
pub fn is_plan_tool(name: &str) -> bool {
    let n = norm(name);
    n.contains("todo") || n == "updateplan" || n == "plan" || n == "taskcreate"
}

const DONE: &[&str] = &["completed", "complete", "done", "cancelled", "canceled"];

fn item_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => [
            "content",
            "text",
            "title",
            "step",
            "subject",
            "task",
            "description",
        ]
        .iter()
        .find_map(|k| o.get(*k).and_then(Value::as_str))
        .map(str::to_string),
        _ => None,
    }
}

fn item_open(v: &Value) -> bool {
    let st = v
        .get("status")
        .or_else(|| v.get("state"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let done_flag = v.get("done").and_then(Value::as_bool) == Some(true)
        || v.get("completed").and_then(Value::as_bool) == Some(true);
    !done_flag && !DONE.contains(&st.to_ascii_lowercase().as_str())
}

/// The open items of a plan/todo call's arguments, and whether the call
/// replaces the list (a whole list) or adds to it (one task).
fn plan_items(args: &Value) -> (Vec<String>, bool) {
    for key in ["todos", "plan", "tasks", "items", "steps"] {
        if let Some(Value::Array(a)) = args.get(key) {
            let open = a
                .iter()
                .filter(|v| item_open(v))
                .filter_map(item_text)
                .map(|t| clip_line(&t, VALUE_CHARS))
                .filter(|t| !t.is_empty())
                .collect();
            return (open, true);
        }
    }
    match item_text(args) {
        Some(t) if item_open(args) => (vec![clip_line(&t, VALUE_CHARS)], false),
        _ => (Vec::new(), false),
    }
}

/// True for the text of a clip-archive message.
pub fn is_clip_text(t: &str) -> bool {
    t.trim_start().starts_with("[Context Summary")
}

impl TaskState {
    /// Build the state of `msgs` (in order) from the messages themselves.
    pub fn build(msgs: &[Message]) -> TaskState {
        let mut s = TaskState::default();
        // call id -> (error key, what it records)
        struct Pending {
            key: String,
            exit: ExitReport,
            op: Option<dialect::Operation>,
        }
        let mut pending: HashMap<String, Pending> = HashMap::new();
        for m in msgs {
            if m.role() == Role::User && !m.is_tool_result_carrier() {
                let t = m.text();
                let t = t.trim();
                if !t.is_empty() && !is_clip_text(t) {
                    let r = clip_line(t, REQUEST_CHARS);
                    if s.first_request.is_none() {
                        s.first_request = Some(r.clone());
                    }
                    s.latest_request = Some(r);
                }
            }
            for c in m.tool_calls() {
                if is_plan_tool(&c.name) {
                    let (items, replace) = plan_items(&c.args());
                    if replace || !s.plan_seen {
                        s.open.clear();
                    }
                    s.plan_seen = true;
                    for i in items {
                        push_unique(&mut s.open, &i);
                    }
                    continue;
                }
                let op = dialect::extract(&c);
                let key = match &op {
                    Some(op) if op.kind == OpKind::Command || op.is_shell() => {
                        format!("command {}", op.command.clone().unwrap_or_default())
                    }
                    Some(op) if !op.paths.is_empty() => format!("file {}", op.paths[0]),
                    _ => format!("tool {}", c.name),
                };
                let exit = op.as_ref().map(|o| o.exit).unwrap_or_default();
                pending.insert(c.id.to_string(), Pending { key, exit, op });
            }
            for r in m.tool_results() {
                let Some(p) = pending.remove(r.call_id.as_ref()) else {
                    continue;
                };
                let status = result_status(p.exit, &r.text, r.is_error);
                s.record(&p.key, p.op.as_ref(), status, &r.text);
            }
        }
        // Calls without a result (yet): what they touch, status unknown.
        let mut rest: Vec<Pending> = pending.into_values().collect();
        rest.sort_by(|a, b| a.key.cmp(&b.key));
        for p in rest {
            s.record(&p.key, p.op.as_ref(), Status::Unknown, "");
        }
        s
    }

    fn record(&mut self, key: &str, op: Option<&dialect::Operation>, status: Status, text: &str) {
        if let Some(op) = op {
            if status != Status::Failure {
                for p in op.modified_paths() {
                    push_unique(&mut self.modified, p);
                }
                if op.kind == OpKind::Read {
                    for p in &op.paths {
                        if !self.modified.contains(p) {
                            push_unique(&mut self.read, p);
                        }
                    }
                }
            }
            if let Some(cmd) = &op.command {
                set_pair(
                    &mut self.commands,
                    &clip_line(cmd, VALUE_CHARS),
                    status_word(status),
                );
            }
        }
        let key = clip_line(key, VALUE_CHARS);
        match status {
            Status::Failure => {
                let payload = result_payload(text);
                let first = payload
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("failed");
                set_pair(&mut self.errors, &key, &clip_line(first, VALUE_CHARS));
                self.succeeded.retain(|k| k != &key);
            }
            Status::Success => {
                self.errors.retain(|(k, _)| k != &key);
                push_unique(&mut self.succeeded, &key);
            }
            Status::Unknown => {}
        }
    }

    /// The anchored update: this (earlier) state carried forward with the
    /// state of newer material. The first request stays, the latest one is
    /// the newer one's when it has one; paths and commands are merged (newer
    /// last); earlier errors stay unless the newer material succeeded at the
    /// same command or path; the open items are the newer plan's when it has
    /// one, else the earlier ones.
    pub fn merge(&self, newer: &TaskState) -> TaskState {
        let mut s = self.clone();
        if s.first_request.is_none() {
            s.first_request = newer.first_request.clone();
        }
        if newer.latest_request.is_some() {
            s.latest_request = newer.latest_request.clone();
        }
        for p in &newer.modified {
            push_unique(&mut s.modified, p);
        }
        for p in &newer.read {
            push_unique(&mut s.read, p);
        }
        s.read.retain(|p| !s.modified.contains(p));
        for (c, st) in &newer.commands {
            set_pair(&mut s.commands, c, st);
        }
        s.errors.retain(|(k, _)| !newer.succeeded.contains(k));
        for (k, e) in &newer.errors {
            set_pair(&mut s.errors, k, e);
        }
        for k in &newer.succeeded {
            push_unique(&mut s.succeeded, k);
        }
        if newer.plan_seen {
            s.open = newer.open.clone();
            s.plan_seen = true;
        }
        s
    }

    /// The block (see the module docs), ending with a newline.
    pub fn render(&self) -> String {
        let mut out = String::from(BEGIN);
        out.push('\n');
        let mut line = |k: &str, v: &str| {
            out.push_str(k);
            out.push_str(": ");
            out.push_str(v);
            out.push('\n');
        };
        if let Some(r) = &self.first_request {
            line("first request", r);
        }
        if let Some(r) = &self.latest_request {
            line("latest request", r);
        }
        let last = |n: usize, max: usize| n.saturating_sub(max);
        for p in &self.read[last(self.read.len(), MAX_PATHS)..] {
            line("read", p);
        }
        for p in &self.modified[last(self.modified.len(), MAX_PATHS)..] {
            line("modified", p);
        }
        for (c, st) in &self.commands[last(self.commands.len(), MAX_COMMANDS)..] {
            line("command", &format!("{st}: {c}"));
        }
        for (k, e) in &self.errors[last(self.errors.len(), MAX_ERRORS)..] {
            line("error", &format!("{k}\t{e}"));
        }
        for o in &self.open[..self.open.len().min(MAX_OPEN)] {
            line("open", o);
        }
        out.push_str(END);
        out.push('\n');
        out
    }

    /// Parse the last block found in `text` (`None` when there is none).
    /// A parsed state keeps its open items as the current plan.
    pub fn parse(text: &str) -> Option<TaskState> {
        let b = text.rfind(BEGIN)?;
        let rest = &text[b + BEGIN.len()..];
        let e = rest.find(END)?;
        let mut s = TaskState::default();
        for l in rest[..e].lines() {
            let Some((k, v)) = l.split_once(": ") else {
                continue;
            };
            match k {
                "first request" => s.first_request = Some(v.to_string()),
                "latest request" => s.latest_request = Some(v.to_string()),
                "read" => s.read.push(v.to_string()),
                "modified" => s.modified.push(v.to_string()),
                "command" => {
                    if let Some((st, c)) = v.split_once(": ") {
                        s.commands.push((c.to_string(), st.to_string()));
                    }
                }
                "error" => {
                    if let Some((key, e)) = v.split_once('\t') {
                        s.errors.push((key.to_string(), e.to_string()));
                    }
                }
                "open" => {
                    s.open.push(v.to_string());
                    s.plan_seen = true;
                }
                _ => {}
            }
        }
        Some(s)
    }

    /// `text` without its task state block(s).
    pub fn strip(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(b) = rest.find(BEGIN) {
            out.push_str(&rest[..b]);
            match rest[b..].find(END) {
                Some(e) => rest = &rest[b + e + END.len()..],
                None => {
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        out.trim_end().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_parse_round_trip() {
        let s = TaskState {
            first_request: Some("fix the bug".into()),
            latest_request: Some("now add tests".into()),
            read: vec!["/r/a.rs".into()],
            modified: vec!["/r/b.rs".into()],
            commands: vec![("cargo test | tail -5".into(), "failed".into())],
            errors: vec![("command cargo test".into(), "error: x: y".into())],
            open: vec!["write docs".into()],
            ..TaskState::default()
        };
        let text = format!("summary\n\n{}", s.render());
        let mut back = TaskState::parse(&text).unwrap();
        back.plan_seen = false;
        assert_eq!(back, s);
        assert_eq!(TaskState::strip(&text), "summary");
    }

    #[test]
    fn clip_line_collapses_and_clips() {
        assert_eq!(clip_line(" a\n b ", 10), "a b");
        assert_eq!(clip_line("abcdef", 4), "abc…");
    }

    #[test]
    fn plan_items_open_only() {
        let args = serde_json::json!({"todos": [
            {"content": "a", "status": "completed"},
            {"content": "b", "status": "in_progress"},
            {"content": "c", "status": "pending"}]});
        assert_eq!(plan_items(&args), (vec!["b".into(), "c".into()], true));
        let plan = serde_json::json!({"plan": [{"step": "x", "status": "done"}, {"step": "y", "status": "pending"}]});
        assert_eq!(plan_items(&plan).0, vec!["y".to_string()]);
        let one = serde_json::json!({"subject": "ship it", "description": "d"});
        assert_eq!(plan_items(&one), (vec!["ship it".into()], false));
        assert!(is_plan_tool("TodoWrite") && is_plan_tool("update_plan"));
        assert!(is_plan_tool("TaskCreate") && !is_plan_tool("Read"));
    }
}
