//! Recall: what a handle in a compressed history stands for.
//!
//! Every marker ctxpress writes for text it took out of the context carries
//! a handle (`[summary#h7f3a2c91d0: ...]`, see [`crate::core::handle`]).
//! [`recall`] reads the archived originals behind one, exactly as they were
//! given (JSON texts of messages), and [`Recalled`] renders them as a JSON
//! array or as plain text a model reads. The command `ctxpress recall` and
//! the MCP server's `recall` tool are this function.

use crate::core::archive::{Archive, ArchiveError};
use crate::core::handle::Handle;
use crate::core::message::{Message, MessageId};
use serde_json::{Map, Value};

/// The originals behind a handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recalled {
    /// The handle asked for.
    pub handle: Handle,
    /// Each original message's JSON text, exactly as archived, in order.
    pub messages: Vec<String>,
}

/// The originals `handle` stands for in `archive`; `None` when the archive
/// does not hold it.
pub fn recall(archive: &dyn Archive, handle: &Handle) -> Result<Option<Recalled>, ArchiveError> {
    Ok(archive.recall(handle)?.map(|messages| Recalled {
        handle: handle.clone(),
        messages,
    }))
}

impl Recalled {
    /// The messages as one JSON array, each written exactly as archived.
    pub fn to_json(&self) -> String {
        let mut out = String::from("[");
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(m);
        }
        out.push(']');
        out
    }

    /// The messages as text: a `[N] role` line before each one, then its
    /// text, its tool calls (`tool call NAME ARGUMENTS`) and tool results
    /// (`tool result for CALL_ID:` and the text). A message that is not a
    /// JSON object is shown as it is.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            match serde_json::from_str::<Map<String, Value>>(m) {
                Ok(fields) => {
                    let msg = Message::from_fields(MessageId::new("recalled"), fields);
                    out.push_str(&format!("[{}] {}\n", i + 1, msg.role_str()));
                    let text = msg.text();
                    if !text.trim().is_empty() {
                        out.push_str(text.trim_end());
                        out.push('\n');
                    }
                    for c in msg.tool_calls() {
                        out.push_str(&format!("tool call {} {}\n", c.name, c.arguments));
                    }
                    for r in msg.tool_results() {
                        let flag = if r.is_error == Some(true) {
                            " (error)"
                        } else {
                            ""
                        };
                        out.push_str(&format!("tool result for {}{flag}:\n", r.call_id));
                        out.push_str(r.text.trim_end());
                        out.push('\n');
                    }
                }
                Err(_) => {
                    out.push_str(&format!("[{}]\n{}\n", i + 1, m.trim_end()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::archive::{MemoryArchive, Record};

    #[test]
    fn a_handle_recalls_its_originals_as_json_and_text() {
        let a = MemoryArchive::new();
        let h = Handle::of(["x"]);
        let msgs = vec![
            r#"{"role":"user","content":"fix  the bug"}"#.to_string(),
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.rs\"}"}}]}"#.to_string(),
            r#"{"role":"tool","tool_call_id":"c1","content":"fn main() {}"}"#.to_string(),
        ];
        a.put(&[Record {
            key: h.record_key(),
            originals: msgs.clone(),
        }])
        .unwrap();
        let r = recall(&a, &h).unwrap().unwrap();
        assert_eq!(r.to_json(), format!("[{}]", msgs.join(",")));
        let parsed: Vec<Value> = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(parsed.len(), 3);
        let text = r.to_text();
        assert!(text.starts_with("[1] user\nfix  the bug\n"), "{text}");
        assert!(
            text.contains("tool call read {\"path\":\"a.rs\"}"),
            "{text}"
        );
        assert!(text.contains("tool result for c1:\nfn main() {}"), "{text}");
        assert_eq!(recall(&a, &Handle::of(["y"])).unwrap(), None);
    }
}
