//! Tool traffic carried in user text: agents without native tool calls
//! (Cline, Roo Code and their forks) write a call as an XML tag in assistant
//! prose and send its output back in the next user message, after a header
//! line `[TOOL for 'ARG'] Result:`, often as the header in one text block and
//! the output in the next. They also append an `<environment_details>` block
//! (open tabs, time, a file listing) to every user turn, which only the
//! newest one keeps current.
//!
//! [`text_results`] finds the results of one message and where each output
//! lies (the text part and the byte range of the output within it), so a
//! stage can replace an output and keep the header that says what it is;
//! [`environment_blocks`] finds the environment blocks of a text.
//!
//! [`TextResult::operation`] reads a result's header through the dialect table;
//! [`is_text_result_carrier`] tells a user message that only carries results
//! (not a user turn); [`has_text_call`] finds an XML call in assistant text,
//! which stages leave as written, like a native call.

use super::{DialectTable, Operation, ToolKind};
use ctxpress_core::message::{Message, Role};
use ctxpress_text::entities::ascii_regex;
use regex::Regex;
use serde_json::Value;
use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

/// Opening tag of an environment block.
pub const ENV_OPEN: &str = "<environment_details>";
/// Closing tag of an environment block.
pub const ENV_CLOSE: &str = "</environment_details>";

/// A result header at a line start: `[TOOL for 'ARG'] Result:`.
static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    ascii_regex(
        r"(?m)^[ \t]*\[([A-Za-z_][A-Za-z0-9_]*) for '([^'\n]{0,300})'\] Result:[ \t]*\r?\n?",
    )
});

/// One tool result sent as user text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextResult {
    /// The tool named by the header (`read_file`).
    pub tool: String,
    /// The argument the header quotes (a path, a command).
    pub arg: String,
    /// The text part holding the output: `None` for string content, else
    /// the index of a text block in the content array.
    pub part: Option<usize>,
    /// The output's byte range within that part's text (environment blocks
    /// and the next result's header excluded; may be empty).
    pub body: Range<usize>,
}

impl TextResult {
    /// The operation the header stands for under `table`: its quoted
    /// argument read as the tool's first command argument (shells,
    /// searches, patches) or first path argument (the rest); `None` for a
    /// tool the table does not know.
    pub fn operation(&self, table: &DialectTable, cwd: Option<&str>) -> Option<Operation> {
        let spec = table.find(&self.tool)?;
        let key = match spec.kind {
            ToolKind::Shell | ToolKind::Search | ToolKind::Patch => spec.command_args.first(),
            _ => spec.path_args.first(),
        }?;
        let mut args = serde_json::Map::new();
        args.insert(key.clone(), Value::String(self.arg.clone()));
        table.extract_args(&self.tool, &Value::Object(args), cwd)
    }
}

/// The text parts of `m`: its string content as part `None`, or each
/// `text` block of its content array with its index.
pub fn text_parts(m: &Message) -> Vec<(Option<usize>, &str)> {
    match m.content() {
        Some(Value::String(s)) => vec![(None, s.as_str())],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|(i, b)| Some((Some(i), b.get("text")?.as_str()?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Byte ranges of the `<environment_details>` blocks of `text` (an
/// unclosed one runs to the end).
pub fn environment_blocks(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(a) = text.get(from..).and_then(|r| r.find(ENV_OPEN)) {
        let start = from + a;
        let end = text[start..]
            .find(ENV_CLOSE)
            .map_or(text.len(), |b| start + b + ENV_CLOSE.len());
        out.push(start..end);
        from = end;
    }
    out
}

/// `text` without its environment blocks.
pub fn strip_environment(text: &str) -> Cow<'_, str> {
    let blocks = environment_blocks(text);
    if blocks.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in blocks {
        out.push_str(&text[at..r.start]);
        at = r.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// Where an output starting at `from` in `text` ends: at the next result
/// header or environment block, else at the end.
fn body_end(text: &str, from: usize) -> usize {
    let rest = &text[from..];
    let next_header = HEADER.find(rest).map(|m| m.start());
    let next_env = rest.find(ENV_OPEN);
    from + next_header
        .into_iter()
        .chain(next_env)
        .min()
        .unwrap_or(rest.len())
}

/// The tool results `m` carries as user text, in order (none unless it is a
/// user message).
pub fn text_results(m: &Message) -> Vec<TextResult> {
    if m.role() != Role::User {
        return Vec::new();
    }
    let parts = text_parts(m);
    // Most messages hold no header: a substring search, not the regex.
    if !parts.iter().any(|(_, t)| t.contains("] Result:")) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (k, &(part, text)) in parts.iter().enumerate() {
        for c in HEADER.captures_iter(text) {
            let (Some(all), Some(tool), Some(arg)) = (c.get(0), c.get(1), c.get(2)) else {
                continue;
            };
            let start = all.end();
            let end = body_end(text, start);
            let mut r = TextResult {
                tool: tool.as_str().to_string(),
                arg: arg.as_str().to_string(),
                part,
                body: start..end,
            };
            // A header alone at the end of its part: the output is the next
            // text part, unless that starts another result or is an
            // environment block.
            if text[start..].trim().is_empty()
                && let Some(&(next, t)) = parts.get(k + 1)
                && !t.trim_start().starts_with(ENV_OPEN)
                && HEADER
                    .find(t)
                    .is_none_or(|h| !t[..h.start()].trim().is_empty())
            {
                r.part = next;
                r.body = 0..body_end(t, 0);
            }
            out.push(r);
        }
    }
    out
}

/// True for a user message that only answers tools in text: every part is
/// text, and outside its result headers, outputs and environment blocks
/// there is only white space. Such a message does not start a user turn.
pub fn is_text_result_carrier(m: &Message) -> bool {
    if m.role() != Role::User {
        return false;
    }
    if let Some(Value::Array(b)) = m.content()
        && b.iter()
            .any(|b| b.get("type").and_then(Value::as_str) != Some("text"))
    {
        return false;
    }
    let results = text_results(m);
    if results.is_empty() {
        return false;
    }
    text_parts(m).iter().all(|&(part, text)| {
        // What is left of the part once outputs and environment blocks go.
        let mut covered: Vec<Range<usize>> = results
            .iter()
            .filter(|r| r.part == part)
            .map(|r| r.body.clone())
            .chain(environment_blocks(text))
            .chain(HEADER.find_iter(text).map(|h| h.range()))
            .collect();
        covered.sort_by_key(|r| r.start);
        let mut at = 0;
        for r in covered {
            if r.start > at && !text[at..r.start].trim().is_empty() {
                return false;
            }
            at = at.max(r.end);
        }
        text[at.min(text.len())..].trim().is_empty()
    })
}

/// An XML tool call at a line start: `<read_file>`, `<execute_command>`
/// (snake_case names, as Cline's and Roo Code's tools have; `<thinking>`
/// and `<task>` are not calls).
static CALL_OPEN: LazyLock<Regex> =
    LazyLock::new(|| ascii_regex(r"(?m)^[ \t]*<([a-z][a-z0-9]*(?:_[a-z0-9]+)+)>[ \t]*\r?$"));

/// True for an assistant message that calls a tool in its text (an XML tag
/// at a line start, closed later at a line start): the call is the agent's
/// protocol, which stages leave as written, as they leave native tool calls.
pub fn has_text_call(m: &Message) -> bool {
    if m.role() != Role::Assistant {
        return false;
    }
    text_parts(m).iter().any(|(_, t)| {
        t.contains('_')
            && CALL_OPEN.captures_iter(t).any(|c| {
                let close = format!("</{}>", &c[1]);
                c.get(0)
                    .is_some_and(|o| t[o.end()..].lines().any(|l| l.trim() == close))
            })
    })
}

/// The text of part `part` of `m` (as [`text_parts`] numbers them).
pub fn part_text(m: &Message, part: Option<usize>) -> Option<&str> {
    match (part, m.content()) {
        (None, Some(Value::String(s))) => Some(s),
        (Some(i), Some(Value::Array(b))) => b.get(i)?.get("text")?.as_str(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_core::Conversation;
    use serde_json::json;

    fn msg(content: Value) -> Message {
        let c = Conversation::parse(&json!([{"role": "user", "content": content}]).to_string())
            .unwrap();
        c.messages[0].clone()
    }

    #[test]
    fn a_header_block_takes_the_next_block_as_its_output() {
        let m = msg(json!([
            {"type": "text", "text": "[read_file for 'src/a.ts'] Result:"},
            {"type": "text", "text": "export const a = 1;\n"},
            {"type": "text", "text": "<environment_details>\n# Open Tabs\n</environment_details>"}
        ]));
        let r = text_results(&m);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].tool.as_str(), r[0].arg.as_str()),
            ("read_file", "src/a.ts")
        );
        assert_eq!(r[0].part, Some(1));
        let t = part_text(&m, r[0].part).unwrap();
        assert_eq!(&t[r[0].body.clone()], "export const a = 1;\n");
        let op = r[0].operation(crate::builtin(), None).unwrap();
        assert_eq!(op.kind, crate::OpKind::Read);
        assert_eq!(op.paths, ["src/a.ts"]);
    }

    #[test]
    fn results_in_one_string_end_at_the_next_header_or_environment() {
        let text = "[execute_command for 'npm test'] Result:\nCommand executed.\nOutput:\n1 failed\n\
                    [read_file for 'b.py'] Result:\nx = 1\n\n<environment_details>\nnow\n</environment_details>";
        let m = msg(json!(text));
        let r = text_results(&m);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].part, None);
        assert_eq!(
            &text[r[0].body.clone()],
            "Command executed.\nOutput:\n1 failed\n"
        );
        assert_eq!(&text[r[1].body.clone()], "x = 1\n\n");
        assert_eq!(environment_blocks(text).len(), 1);
        assert_eq!(strip_environment(text).matches("environment").count(), 0);
    }

    #[test]
    fn a_message_of_results_only_is_a_carrier() {
        let m = msg(json!([
            {"type": "text", "text": "[read_file for 'src/a.ts'] Result:"},
            {"type": "text", "text": "export const a = 1;\n"},
            {"type": "text", "text": "<environment_details>\nx\n</environment_details>"}
        ]));
        assert!(is_text_result_carrier(&m));
        let m = msg(json!([
            {"type": "text", "text": "[read_file for 'src/a.ts'] Result:"},
            {"type": "text", "text": "export const a = 1;\n"},
            {"type": "text", "text": "<feedback>\nuse b instead\n</feedback>"}
        ]));
        // The output runs to the end: the feedback block is read as output
        // only when it shares the output's part.
        assert!(!is_text_result_carrier(&m));
        assert!(!is_text_result_carrier(&msg(json!(
            "<task>\nFix it\n</task>"
        ))));
    }

    #[test]
    fn assistant_text_calls_are_found() {
        let c = Conversation::parse(
            &json!([
                {"role": "assistant", "content": "<thinking>\nread it\n</thinking>\n<read_file>\n<path>a.ts</path>\n</read_file>"},
                {"role": "assistant", "content": "<thinking>\nonly thinking\n</thinking>"},
                {"role": "assistant", "content": "Use <read_file> to read."},
                {"role": "user", "content": "<read_file>\n<path>a.ts</path>\n</read_file>"}
            ])
            .to_string(),
        )
        .unwrap();
        let found: Vec<bool> = c.messages.iter().map(has_text_call).collect();
        assert_eq!(found, [true, false, false, false]);
    }

    #[test]
    fn prose_and_other_roles_have_none() {
        assert!(text_results(&msg(json!("Please read [x for 'y'] Result: inline"))).is_empty());
        let c = Conversation::parse(
            &json!([{"role": "assistant", "content": "[read_file for 'a'] Result:\nx"}])
                .to_string(),
        )
        .unwrap();
        assert!(text_results(&c.messages[0]).is_empty());
    }
}
