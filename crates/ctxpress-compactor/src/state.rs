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
//! open: <item>                      (open plan/todo items; `#N <item>` for
//!                                    a task created with id N)
//! keep: "<secret with its context>" (a credential seen in the folded
//!                                    messages, verbatim, as a JSON string)
//! [/task state]
//! ```
//!
//! Values are single lines (white space collapsed), so the block parses back
//! exactly. The `key` of an error is `command <command>` or `file <path>` (a
//! later success of the same command or on the same path resolves it) or
//! `tool <name>`.
//!
//! Open items follow the plan tools: a whole list (TodoWrite, update_plan,
//! write_todos) replaces them with its items not completed; a created task
//! (TaskCreate) is added with the id its result reports; an update of that
//! id to completed (TaskUpdate) closes it.

use ctxpress_budget::ledger::{PlanOp, created_id, plan_op, push_unique, set_pair};
/// The plan-tool test and the line clip the task state shares with the
/// session ledger (`ctxpress_budget::ledger`).
pub use ctxpress_budget::ledger::{clip_line, is_plan_tool};
use ctxpress_core::{Message, Role};
use ctxpress_dialect::{
    self as dialect, ExitReport, OpKind, Status, result_payload, result_status,
};
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
const MAX_KEPT: usize = 32;

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
    /// Open plan/todo items; a task created with an id (`Task #3 created`)
    /// starts with `#3 `, so a later update of that id can close it.
    pub open: Vec<String>,
    /// Secrets in the folded messages, each with the text around it that
    /// makes it usable (`DB_PASSWORD=...`, a whole URL, a PEM block), kept
    /// verbatim: a summary must not lose a credential the agent was given
    /// (it stays in the output, on `keep:` lines written as JSON strings).
    pub kept: Vec<String>,
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Success => "ok",
        Status::Failure => "failed",
        Status::Unknown => "unknown",
    }
}

/// True for the text of a clip-archive message.
pub fn is_clip_text(t: &str) -> bool {
    ctxpress_core::markers::written(t) == Some(ctxpress_core::markers::Written::ContextSummary)
}

impl TaskState {
    /// Build the state of `msgs` (in order) from the messages themselves.
    pub fn build(msgs: &[Message]) -> TaskState {
        TaskState::default().update(msgs)
    }

    /// The anchored update: this state carried forward through newer
    /// messages, applied in order. The first request stays; the latest is
    /// the newest; paths and commands accumulate (a modified file leaves the
    /// read list); an error stays until a later success of the same command
    /// or on the same path; a whole plan list replaces the open items, a
    /// created task is added, a task updated to completed (by id) is closed.
    pub fn update(&self, msgs: &[Message]) -> TaskState {
        let mut s = self.clone();
        struct Pending {
            key: String,
            exit: ExitReport,
            op: Option<dialect::Operation>,
        }
        let mut pending: HashMap<String, Pending> = HashMap::new();
        let mut pending_tasks: Vec<(String, String)> = Vec::new();
        for m in msgs {
            s.keep_secrets(m);
            if m.role() == Role::User
                && !m.is_tool_result_carrier()
                && !dialect::text_results::is_text_result_carrier(m)
            {
                let t = m.text();
                let t = t.trim();
                if !t.is_empty()
                    && !is_clip_text(t)
                    && !ctxpress_budget::ledger::is_generated_note(t)
                {
                    let r = clip_line(t, REQUEST_CHARS);
                    if s.first_request.is_none() {
                        s.first_request = Some(r.clone());
                    }
                    s.latest_request = Some(r);
                }
            }
            for c in m.tool_calls() {
                if is_plan_tool(&c.name) {
                    match plan_op(&c.args()) {
                        PlanOp::Replace(items) => s.open = items,
                        PlanOp::Add(t) => pending_tasks.push((c.id.to_string(), t)),
                        PlanOp::Close(id) => {
                            let prefix = format!("#{id} ");
                            s.open.retain(|o| !o.starts_with(&prefix));
                        }
                        PlanOp::None => {}
                    }
                    continue;
                }
                let op = dialect::extract(&c);
                let key = match &op {
                    Some(op) if op.kind == OpKind::Command => {
                        format!("command {}", op.command.clone().unwrap_or_default())
                    }
                    Some(op) if !op.paths.is_empty() => format!("file {}", op.paths[0]),
                    _ => format!("tool {}", c.name),
                };
                let exit = op.as_ref().map(|o| o.exit).unwrap_or_default();
                pending.insert(c.id.to_string(), Pending { key, exit, op });
            }
            for r in m.tool_results() {
                if let Some(i) = pending_tasks
                    .iter()
                    .position(|(id, _)| id == r.call_id.as_ref())
                {
                    let (_, t) = pending_tasks.remove(i);
                    let item = match created_id(&r.text) {
                        Some(id) => format!("#{id} {t}"),
                        None => t,
                    };
                    push_unique(&mut s.open, &item);
                    continue;
                }
                let Some(p) = pending.remove(r.call_id.as_ref()) else {
                    continue;
                };
                let status = result_status(p.exit, &r.text, r.is_error);
                s.record(&p.key, p.op.as_ref(), status, &r.text);
            }
        }
        for (_, t) in pending_tasks {
            push_unique(&mut s.open, &t);
        }
        // Calls without a result (yet): what they touch, status unknown.
        let mut rest: Vec<Pending> = pending.into_values().collect();
        rest.sort_by(|a, b| a.key.cmp(&b.key));
        for p in rest {
            s.record(&p.key, p.op.as_ref(), Status::Unknown, "");
        }
        s
    }

    /// Add the secrets of every text of `m` a model reads (its text, tool
    /// results, tool-call arguments) with their context.
    fn keep_secrets(&mut self, m: &Message) {
        let mut texts: Vec<String> = vec![m.text().into_owned()];
        if m.is_tool_result() && !matches!(m.role(), Role::Tool | Role::Function) {
            texts.extend(m.tool_results().into_iter().map(|r| r.text.to_string()));
        }
        texts.extend(m.tool_calls().into_iter().map(|c| c.arguments.to_string()));
        for t in &texts {
            for sp in ctxpress_text::secrets::find_sensitive(t) {
                if let Some(ctx) = t.get(sp.context_start..sp.context_end) {
                    push_unique(&mut self.kept, ctx);
                }
            }
        }
    }

    fn record(&mut self, key: &str, op: Option<&dialect::Operation>, status: Status, text: &str) {
        if let Some(op) = op {
            if status != Status::Failure {
                for p in op.modified_paths() {
                    push_unique(&mut self.modified, p);
                }
                self.read.retain(|p| !self.modified.contains(p));
                if op.kind == OpKind::Read {
                    for p in &op.paths {
                        if !self.modified.contains(p) {
                            push_unique(&mut self.read, p);
                        }
                    }
                }
            }
            if op.kind == OpKind::Command
                && let Some(cmd) = &op.command
            {
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
            }
            Status::Success => self.errors.retain(|(k, _)| k != &key),
            Status::Unknown => {}
        }
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
        for k in &self.kept[last(self.kept.len(), MAX_KEPT)..] {
            line("keep", &Value::String(k.clone()).to_string());
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
                "open" => s.open.push(v.to_string()),
                "keep" => {
                    if let Ok(k) = serde_json::from_str::<String>(v) {
                        s.kept.push(k);
                    }
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
            open: vec!["#2 write docs".into()],
            kept: vec![
                "DB_PASSWORD=hunter2x9".into(),
                "-----BEGIN KEY-----\nx\n-----END KEY-----".into(),
            ],
        };
        let text = format!("summary\n\n{}", s.render());
        assert_eq!(TaskState::parse(&text).unwrap(), s);
        assert_eq!(TaskState::strip(&text), "summary");
    }

    #[test]
    fn secrets_of_folded_messages_are_kept_across_updates() {
        let m = |role: &str, text: &str| {
            Message::text_message(ctxpress_core::MessageId::new(text), role, text)
        };
        let s = TaskState::build(&[
            m("user", "deploy with DB_PASSWORD=hunter2x9 please"),
            m(
                "assistant",
                "connecting to postgres://app:s3cr3tpw@db.internal/prod now",
            ),
        ]);
        assert!(
            s.kept.iter().any(|k| k.contains("DB_PASSWORD=hunter2x9")),
            "{:?}",
            s.kept
        );
        assert!(
            s.kept.iter().any(|k| k.contains("s3cr3tpw")),
            "{:?}",
            s.kept
        );
        // Rendered, parsed back and carried through a later update.
        let again = TaskState::parse(&s.render())
            .unwrap()
            .update(&[m("user", "and now?")]);
        assert_eq!(again.kept, s.kept);
    }

    #[test]
    fn clip_line_collapses_and_clips() {
        assert_eq!(clip_line(" a\n b ", 10), "a b");
        assert_eq!(clip_line("abcdef", 4), "abc…");
    }

    #[test]
    fn plan_calls() {
        let args = serde_json::json!({"todos": [
            {"content": "a", "status": "completed"},
            {"content": "b", "status": "in_progress"},
            {"content": "c", "status": "pending"}]});
        assert_eq!(
            plan_op(&args),
            PlanOp::Replace(vec!["b".into(), "c".into()])
        );
        let plan = serde_json::json!({"plan": [{"step": "x", "status": "done"}, {"step": "y", "status": "pending"}]});
        assert_eq!(plan_op(&plan), PlanOp::Replace(vec!["y".into()]));
        let one = serde_json::json!({"subject": "ship it", "description": "d"});
        assert_eq!(plan_op(&one), PlanOp::Add("ship it".into()));
        let done = serde_json::json!({"taskId": "3", "status": "completed"});
        assert_eq!(plan_op(&done), PlanOp::Close("3".into()));
        let busy = serde_json::json!({"taskId": 3, "status": "in_progress"});
        assert_eq!(plan_op(&busy), PlanOp::None);
        assert_eq!(
            created_id("Task #12 created successfully: x"),
            Some("12".into())
        );
        assert!(is_plan_tool("TodoWrite") && is_plan_tool("update_plan"));
        assert!(is_plan_tool("TaskCreate") && is_plan_tool("TaskUpdate") && !is_plan_tool("Read"));
    }
}
