//! Which messages of a conversation are ctxpress's own (summaries, dedup
//! references, notes, compaction clips): after `expand`, any left are
//! messages the archive could not restore.

use ctxpress_core::Conversation;
use ctxpress_core::markers::{Written, written};
use serde_json::Value;

/// Positions of the messages ctxpress wrote in place of others: extractive
/// or LLM summaries (`[summary: `, `[summary#`), tool-result summaries,
/// dedup references (`[cce:dup of `, `[cce:near-dup of `), stale-pruner notes
/// (`[ctxpress: `), evict notes (`[N earlier messages archived: `, the
/// session ledger `[session ledger: `, `[N earlier messages moved to the
/// archive`) and
/// compaction clips (`[Context Summary`). Any string of the message counts
/// (content, content blocks, tool results, tool-call arguments, which are
/// JSON inside a string).
pub fn unrestored(c: &Conversation) -> Vec<usize> {
    c.messages
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            serde_json::from_str::<Value>(&c.message_json(m)).is_ok_and(|v| has_generated(&v, 0))
        })
        .map(|(i, _)| i)
        .collect()
}

fn has_generated(v: &Value, depth: usize) -> bool {
    match v {
        Value::String(s) => {
            looks_generated(s)
                || (depth < 4
                    && s.trim_start().starts_with('{')
                    && serde_json::from_str::<Value>(s).is_ok_and(|v| has_generated(&v, depth + 1)))
        }
        Value::Array(a) => a.iter().any(|x| has_generated(x, depth)),
        Value::Object(o) => o.values().any(|x| has_generated(x, depth)),
        _ => false,
    }
}

/// True for a text that starts the way ctxpress's generated texts do
/// ([`written`]: any kind but a truncated text, which still holds the
/// original's start).
pub fn looks_generated(s: &str) -> bool {
    written(s).is_some_and(|k| k != Written::Truncated)
}

#[cfg(test)]
mod tests {
    use super::looks_generated;

    #[test]
    fn generated_texts_are_recognized() {
        for t in [
            "[summary: tool bash `ls`: 3 lines]",
            "[summary#sum_1: t | entities: a]",
            "[cce:dup of call_7 — 345 chars]",
            "[cce:near-dup of m1 — 12 chars, ~82% match]",
            "[ctxpress: a.rs unchanged: same content as Read call c1]",
            "[16 earlier messages archived: 8 assistant; ctxpress expand restores them]",
            "  [Context Summary: 9 earlier messages]",
            "[session ledger: 12 earlier messages (1 user, 6 assistant, 5 tool results) moved to the archive; `ctxpress expand` restores them. What they held, most used first:",
            "[3 earlier messages moved to the archive; the session ledger above lists what they held; `ctxpress expand` restores them]",
        ] {
            assert!(looks_generated(t), "{t}");
        }
        for t in [
            "[WIP] fix the parser",
            "[summary] of the meeting",
            "[1, 2, 3]",
            "[x:dupe of y]",
            "plain [summary: x]",
        ] {
            assert!(!looks_generated(t), "{t}");
        }
    }
}
