//! Messages as text: the chunk a summarizer reads, and the deterministic
//! digest that stands in for a summary when there is no backend or it fails.

use ctxpress_core::{Message, Role};

use crate::state;

const MSG_CHARS: usize = 2000;

/// The messages of a chunk as text for a summarizer: one block a message.
pub fn render_messages(msgs: &[Message]) -> String {
    let mut out = String::new();
    for m in msgs {
        let t = m.text();
        let t = t.trim();
        if m.is_tool_result() {
            for r in m.tool_results() {
                out.push_str(&format!("tool result: {}\n", result_head(&r.text)));
            }
            if m.role() == Role::User && !t.is_empty() {
                out.push_str(&format!("user: {}\n", clip_chars(t, MSG_CHARS)));
            }
            continue;
        }
        if !t.is_empty() {
            out.push_str(&format!("{}: {}\n", m.role_str(), clip_chars(t, MSG_CHARS)));
        }
        for c in m.tool_calls() {
            out.push_str(&format!(
                "{} called {}({})\n",
                m.role_str(),
                c.name,
                clip_chars(&c.arguments, 300)
            ));
        }
    }
    out
}

/// Lines of a tool result a summarizer sees, and characters.
const RESULT_LINES: usize = 5;
const RESULT_CHARS: usize = 400;

/// The head of a tool result: its first lines, with the count of the rest.
fn result_head(text: &str) -> String {
    let t = text.trim();
    let total = t.lines().count();
    let head: Vec<&str> = t.lines().take(RESULT_LINES).collect();
    let mut out = clip_chars(&head.join("\n"), RESULT_CHARS);
    if total > head.len() {
        out.push_str(&format!("\n[… {} more lines]", total - head.len()));
    }
    out
}

fn clip_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut o: String = s.chars().take(max).collect();
    o.push('…');
    o
}

/// Whole lines of `text` up to `max` characters (a clipped first line when
/// even it is longer).
pub(crate) fn clip_lines(text: &str, max: usize) -> String {
    let mut out = String::new();
    for l in text.lines() {
        let need = l.chars().count() + usize::from(!out.is_empty());
        if out.chars().count() + need > max {
            if out.is_empty() {
                out = state::clip_line(l, max.max(2));
            }
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(l);
    }
    out
}

/// The deterministic summary of a chunk: one line a message (requests and
/// prose clipped, tool calls as name and path or command, results as status
/// and first line), within `max` characters.
pub fn digest(msgs: &[Message], max: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for m in msgs {
        if m.is_tool_result() {
            for r in m.tool_results() {
                let st = ctxpress_dialect::result_status(
                    ctxpress_dialect::ExitReport::Unknown,
                    &r.text,
                    r.is_error,
                );
                let first = r.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                let word = match st {
                    ctxpress_dialect::Status::Failure => "failed",
                    _ => "result",
                };
                lines.push(format!("- {word}: {}", state::clip_line(first, 100)));
            }
            continue;
        }
        let t = m.text();
        if !t.trim().is_empty() && !state::is_clip_text(&t) {
            let n = if m.role() == Role::User { 200 } else { 160 };
            lines.push(format!("- {}: {}", m.role_str(), state::clip_line(&t, n)));
        }
        for c in m.tool_calls() {
            let what = match ctxpress_dialect::extract(&c) {
                Some(op) => op.command.clone().unwrap_or_else(|| op.paths.join(", ")),
                None => c.arguments.to_string(),
            };
            lines.push(format!(
                "- call {} {}",
                c.name,
                state::clip_line(&what, 100)
            ));
        }
    }
    clip_lines(&lines.join("\n"), max.max(16))
}
