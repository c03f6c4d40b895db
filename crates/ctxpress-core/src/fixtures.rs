//! Conversation builders for tests (feature `fixtures`).

use crate::conversation::Conversation;
use serde_json::{Value, json};

/// An OpenAI agent session: an optional system prompt, the user message
/// `please fix it`, one assistant tool call and its result per
/// `(tool, arguments, result)` (call ids `c0`, `c1`, ...), then `tail` plain
/// user/assistant turns.
///
/// # Panics
/// Never for these inputs: the built JSON is always a valid conversation.
pub fn tool_session<R: AsRef<str>>(
    system: Option<&str>,
    ops: &[(&str, Value, R)],
    tail: usize,
) -> Conversation {
    let mut msgs: Vec<Value> = system
        .map(|s| json!({"role": "system", "content": s}))
        .into_iter()
        .collect();
    msgs.push(json!({"role": "user", "content": "please fix it"}));
    for (i, (name, args, result)) in ops.iter().enumerate() {
        msgs.push(json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": format!("c{i}"), "type": "function",
             "function": {"name": name, "arguments": args.to_string()}}]}));
        msgs.push(
            json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": result.as_ref()}),
        );
    }
    for i in 0..tail {
        msgs.push(json!({"role": "user", "content": format!("next {i}")}));
        msgs.push(json!({"role": "assistant", "content": format!("ok {i}")}));
    }
    Conversation::parse(&Value::Array(msgs).to_string())
        .expect("a built tool session is a valid conversation")
}

/// An Anthropic agent turn of `n` parallel tool calls: a user request, one
/// assistant message with `n` `tool_use` blocks (Bash `ls`, ids
/// `toolu_000000`, ...), one user message with their `n` `tool_result`
/// blocks, and a closing assistant message (issue #33: a stage that looks
/// each result up by a scan of the blocks costs n²).
///
/// # Panics
/// Never: the built JSON is always a valid conversation.
pub fn many_blocks(n: usize) -> Conversation {
    let calls: Vec<Value> = std::iter::once(json!({"type": "text", "text": "Running them."}))
        .chain((0..n).map(|i| {
            json!({"type": "tool_use", "id": format!("toolu_{i:06}"), "name": "Bash",
                "input": {"command": format!("ls /tmp/dir{i}")}})
        }))
        .collect();
    let results: Vec<Value> = (0..n)
        .map(|i| {
            json!({"type": "tool_result", "tool_use_id": format!("toolu_{i:06}"),
                "content": format!("file{i}.txt\nother{i}.txt")})
        })
        .collect();
    let doc = json!({"system": "You are an agent.", "messages": [
        {"role": "user", "content": "Run all the checks."},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
        {"role": "assistant", "content": "Done."},
    ]});
    Conversation::parse(&doc.to_string()).expect("a valid conversation")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_each_call_with_its_result() {
        let c = tool_session(Some("sys"), &[("Read", json!({"file_path": "a"}), "x")], 1);
        let roles: Vec<&str> = c.messages.iter().map(|m| m.role_str()).collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "tool", "user", "assistant"]
        );
        assert!(crate::validate::validate(&c).is_empty());
    }
}
