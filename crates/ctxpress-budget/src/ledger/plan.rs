//! The plan-tool rules (TodoWrite, update_plan, write_todos, TaskCreate,
//! ...): which tools keep a plan, what a call does to it, which items are
//! still open. The ledger's todo lines and the compactor's task state read
//! them.

use super::clip_line;
use serde_json::Value;

/// Normalized tool name: lower case, letters and digits only.
fn norm(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// True for plan/todo tools (TodoWrite, update_plan, write_todos,
/// TaskCreate, TaskUpdate, ...).
pub fn is_plan_tool(name: &str) -> bool {
    let n = norm(name);
    n.contains("todo") || n == "updateplan" || n == "plan" || n == "taskcreate" || n == "taskupdate"
}

const DONE: &[&str] = &[
    "completed",
    "complete",
    "done",
    "cancelled",
    "canceled",
    "deleted",
];

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

/// What a plan/todo call does to the open items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanOp {
    /// A whole list (TodoWrite, update_plan): its open items replace the old.
    Replace(Vec<String>),
    /// One new open task (TaskCreate); its id comes with the result.
    Add(String),
    /// A task closed by id (TaskUpdate to completed or deleted).
    Close(String),
    /// Nothing to do.
    None,
}

/// What the arguments of a plan/todo call do to the open items.
pub fn plan_op(args: &Value) -> PlanOp {
    for key in ["todos", "plan", "tasks", "items", "steps"] {
        if let Some(Value::Array(a)) = args.get(key) {
            let open = a
                .iter()
                .filter(|v| item_open(v))
                .filter_map(item_text)
                .map(|t| clip_line(&t, 200))
                .filter(|t| !t.is_empty())
                .collect();
            return PlanOp::Replace(open);
        }
    }
    let id = ["taskId", "task_id", "id"]
        .iter()
        .find_map(|k| match args.get(*k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        });
    if let Some(id) = id {
        return if item_open(args) {
            PlanOp::None
        } else {
            PlanOp::Close(id)
        };
    }
    match item_text(args) {
        Some(t) if item_open(args) => PlanOp::Add(clip_line(&t, 200)),
        _ => PlanOp::None,
    }
}

/// The id a task-creating tool's result reports (`Task #3 created ...`).
pub fn created_id(result: &str) -> Option<String> {
    let p = result.find('#')?;
    let digits: String = result[p + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then_some(digits)
}
