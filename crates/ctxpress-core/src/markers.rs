//! Writing recall handles into markers (see [`crate::handle`] for what a
//! handle is): [`tag_markers`], which the pipeline runs after each stage
//! when the run has an archive, gives every marker a stage wrote without a
//! handle one, standing for the message itself when the stage rewrote it in
//! place or for the messages it `replaces` when the stage made it, and never
//! when that would make the message longer than what it stands for; code
//! that writes a marker outside a stage (the budget's evict note) computes
//! its handle with [`handle_of`] and registers it with [`mark`].
//!
//! [`written`] tells what kind of marker a text starts with ([`Written`]):
//! the one answer to "did ctxpress write this?" that the strategies, the
//! budget, the tagger and `expand`'s check of what it could not restore
//! share, each asking for the kinds it means.
//!
//! (These were `core::handle::{tag_markers, mark, handle_of}` before
//! session 30; they moved here so the handle's name and the conversation
//! do not import each other.)

use crate::conversation::Conversation;
use crate::handle::{Handle, HandleMark, is_word};
use crate::message::{Message, MessageId};

/// Where a handle goes in `text` when it starts (after blanks) with a
/// marker that has none: the byte offset right after the marker's word.
fn marker_slot(text: &str) -> Option<usize> {
    let lead = text.len() - text.trim_start().len();
    word_end(&text[lead..]).map(|w| lead + w)
}

/// Every place a handle goes in `text`: markers without one at its start or
/// at the start of a line or right after a `>` (a note inside a tag, as in
/// `<environment_details>[ctxpress: ...]`), in order.
fn marker_slots(text: &str) -> Vec<usize> {
    let mut out: Vec<usize> = marker_slot(text).into_iter().collect();
    let b = text.as_bytes();
    for p in memchr::memchr_iter(b'[', b) {
        if p > 0
            && matches!(b[p - 1], b'\n' | b'>')
            && let Some(w) = word_end(&text[p..])
            && !out.contains(&(p + w))
        {
            out.push(p + w);
        }
    }
    out.sort_unstable();
    out
}

/// The kinds of text ctxpress writes in place of what it moved out or cut,
/// told apart by how they start: see [`written`]. Every "is this ours?"
/// test in the workspace asks this one function for the kinds it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Written {
    /// `[summary: …]` or `[summary#ID: …]`: a stage's summary of a
    /// message, a tool result or an argument.
    Summary,
    /// `[truncated …`: a text cut short.
    Truncated,
    /// `[ctxpress: …]`: a note in place of what a stage dropped.
    Note,
    /// `[LABEL:dup of …` or `[LABEL:near-dup of …`: dedup's reference to
    /// an earlier copy (`LABEL` is the stage's prefix, `dup` or `cce`).
    Reference,
    /// `[Context Summary: …` or `[Context Summary]`: a compaction's summary.
    ContextSummary,
    /// `[session ledger: …`: the budget's session ledger.
    Ledger,
    /// `[N earlier messages archived: …` or `[N earlier messages moved to
    /// the archive…`: the budget's note where it evicted messages.
    Evicted,
}

/// What `text` is when ctxpress wrote it, read from how it starts (after
/// blanks; recall handles such as `[summary#h0123456789: ` are read as if
/// absent); `None` for any other text. Reads at most the first 200 bytes.
pub fn written(text: &str) -> Option<Written> {
    let mut cut = text.len().min(200);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = &text[..cut];
    let head = crate::handle::without(head);
    let t = head.trim_start();
    let (kind, _) = marker_word(t)?;
    // A person may write `[summary] …` or `[summary of …`: only the tagger,
    // which reads just what a stage wrote, takes those for markers.
    (kind != Written::Summary || t.starts_with("[summary:") || t.starts_with("[summary#"))
        .then_some(kind)
}

/// For a text starting with a marker that has no handle, the offset right
/// after the marker's word (`[summary` | `: ...`), where a handle goes.
fn word_end(t: &str) -> Option<usize> {
    marker_word(t)?.1
}

/// The marker `t` starts with, and the offset right after its word when a
/// handle goes there: not when it has one or an id already (`[summary#`),
/// nor for the ledger and the evict note, which carry theirs elsewhere.
fn marker_word(t: &str) -> Option<(Written, Option<usize>)> {
    let rest = t.strip_prefix('[')?;
    let at = |word: &str| Some(1 + word.len());
    let found = if let Some(r) = rest.strip_prefix("summary") {
        // `[summary: `, `[summary]`, `[summary of`; `[summary#id: ` (no slot).
        if r.starts_with('#') {
            (Written::Summary, None)
        } else if r.starts_with([':', ']', ' ']) {
            (Written::Summary, at("summary"))
        } else {
            return None;
        }
    } else if rest.starts_with("ctxpress:") {
        (Written::Note, at("ctxpress"))
    } else if let Some(r) = rest.strip_prefix("Context Summary") {
        if !r.starts_with([':', ']']) {
            return None;
        }
        (Written::ContextSummary, at("Context Summary"))
    } else if let Some(r) = rest.strip_prefix("truncated") {
        (
            Written::Truncated,
            if r.starts_with('#') {
                None
            } else {
                at("truncated")
            },
        )
    } else if rest.starts_with("session ledger:") {
        (Written::Ledger, None)
    } else if is_evict_note(rest) {
        (Written::Evicted, None)
    } else {
        // Dedup's references: `[PREFIX:dup of ` and `[PREFIX:near-dup of `.
        let colon = rest.find(':')?;
        let prefix = &rest[..colon];
        if prefix.is_empty() || prefix.len() > 32 || !prefix.bytes().all(is_word) {
            return None;
        }
        let r = &rest[colon + 1..];
        let end = if r.starts_with("dup of ") {
            colon + 1 + "dup".len()
        } else if r.starts_with("near-dup of ") {
            colon + 1 + "near-dup".len()
        } else {
            return None;
        };
        (Written::Reference, Some(1 + end))
    };
    Some(found)
}

/// `N earlier messages archived: ` or `N earlier messages moved to the
/// archive` at the start of `rest`.
fn is_evict_note(rest: &str) -> bool {
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && (rest[digits..].starts_with(" earlier messages archived: ")
            || rest[digits..].starts_with(" earlier messages moved to the archive"))
}

/// Write `handle` into every marker without one among the strings of `v`
/// (JSON text inside a string, as in tool-call arguments, too); true when
/// something was written.
fn tag_value(v: &mut serde_json::Value, handle: &Handle, depth: usize) -> bool {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            let slots = marker_slots(s);
            if !slots.is_empty() {
                let h = handle.to_string();
                for at in slots.into_iter().rev() {
                    s.insert_str(at, &h);
                }
                return true;
            }
            let t = s.trim_start();
            if depth < 3
                && (t.starts_with('{') || t.starts_with('['))
                && s.contains('[')
                && let Ok(mut inner) = serde_json::from_str::<Value>(s)
                && tag_value(&mut inner, handle, depth + 1)
            {
                *s = inner.to_string();
                return true;
            }
            false
        }
        Value::Array(a) => {
            let mut any = false;
            for x in a {
                any |= tag_value(x, handle, depth);
            }
            any
        }
        Value::Object(o) => {
            let mut any = false;
            for (_, x) in o.iter_mut() {
                any |= tag_value(x, handle, depth);
            }
            any
        }
        _ => false,
    }
}

/// True when some string of `v` starts with a marker that has no handle.
fn has_untagged(v: &serde_json::Value, depth: usize) -> bool {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            !marker_slots(s).is_empty()
                || (depth < 3
                    && s.trim_start().starts_with(['{', '['])
                    && s.contains('[')
                    && serde_json::from_str::<Value>(s).is_ok_and(|x| has_untagged(&x, depth + 1)))
        }
        Value::Array(a) => a.iter().any(|x| has_untagged(x, depth)),
        Value::Object(o) => o.values().any(|x| has_untagged(x, depth)),
        _ => false,
    }
}

/// After a stage: write a handle into each marker the stage wrote without
/// one, in every message it changed (`before` is the conversation before the
/// stage). A message rewritten in place stands for itself as it was before;
/// a message the stage made stands for the messages it `replaces` (one that
/// replaces nothing gets no handle). When a handle would make its message
/// longer than what it stands for, in characters or in `counter`'s tokens
/// (nothing is ever longer), a message
/// rewritten in place goes back to what it was before the stage (its tool
/// calls and results unchanged), and one the stage made keeps its marker
/// without a handle. Returns how many messages got a handle.
pub fn tag_markers(
    before: &Conversation,
    conv: &mut Conversation,
    counter: &dyn crate::tokens::TokenCounter,
) -> usize {
    let old: foldhash::HashMap<&MessageId, &Message> =
        before.messages.iter().map(|m| (m.id(), m)).collect();
    let mut tagged = 0;
    for i in 0..conv.messages.len() {
        let m = &conv.messages[i];
        let was = old.get(m.id()).copied();
        if was.is_some_and(|o| Message::same(o, m)) {
            continue;
        }
        if !m.fields().values().any(|v| has_untagged(v, 0)) {
            continue;
        }
        let id = m.id().clone();
        let stands_for: Vec<MessageId> = match was {
            Some(_) => vec![id.clone()],
            None => conv
                .ann(&id)
                .map(|a| a.replaces.clone())
                .unwrap_or_default(),
        };
        if stands_for.is_empty() {
            continue;
        }
        let olds: Vec<&Message> = stands_for
            .iter()
            .filter_map(|s| old.get(s).copied())
            .collect();
        let room: usize = olds.iter().map(|o| o.size()).sum();
        let room_tokens: usize = olds
            .iter()
            .map(|o| crate::tokens::count_message(counter, o))
            .sum();
        let handle = of_parts(stands_for.iter().map(|s| match old.get(s) {
            Some(o) => Part::Message(before.message_json(o)),
            None => Part::Gone(s),
        }));
        let mut edited = conv.messages[i].clone();
        let mut wrote = false;
        for v in edited.fields_mut().values_mut() {
            wrote |= tag_value(v, &handle, 0);
        }
        let longer = !olds.is_empty()
            && (edited.size() > room
                || crate::tokens::count_message(counter, &edited) > room_tokens);
        if !wrote || longer {
            // No room for the handle: a message rewritten in place (its
            // tool calls and results the same) goes back to what it was,
            // so nothing stands in the output that nothing recalls.
            if let Some(o) = was
                && o.tool_call_ids().eq(conv.messages[i].tool_call_ids())
                && o.tool_result_ids().eq(conv.messages[i].tool_result_ids())
            {
                conv.messages[i] = o.clone();
            }
            continue;
        }
        conv.messages[i] = edited;
        mark(conv, &id, handle, stands_for);
        tagged += 1;
    }
    tagged
}

/// Register `handle`, written in a marker of message `carrier`, as standing
/// for `stands_for` (ids that resolve to input messages through
/// `replaces`): archiving the result stores their originals under it.
pub fn mark(
    conv: &mut Conversation,
    carrier: &MessageId,
    handle: Handle,
    stands_for: Vec<MessageId>,
) {
    let marks = &mut conv.ann_mut(carrier).handles;
    if !marks.iter().any(|x| x.handle == handle) {
        marks.push(HandleMark { handle, stands_for });
    }
}

/// What a handle hashes for one message it stands for.
enum Part<'a> {
    /// The message's JSON (hashed by meaning: [`crate::canonical::digest`]).
    Message(String),
    /// A message no longer in the conversation: its id.
    Gone(&'a MessageId),
}

/// The handle of these parts, in order.
fn of_parts<'a>(parts: impl IntoIterator<Item = Part<'a>>) -> Handle {
    let texts: Vec<String> = parts
        .into_iter()
        .map(|p| match p {
            Part::Message(json) => format!("{:032x}", crate::canonical::digest(&json)),
            Part::Gone(id) => format!("id:{}", id.as_str()),
        })
        .collect();
    Handle::of(texts.iter().map(String::as_str))
}

/// The handle of `ids` as they are in `conv`: each message's meaning
/// ([`crate::canonical::digest`] of its JSON), or its id when it is not
/// there.
pub fn handle_of(conv: &Conversation, ids: &[MessageId]) -> Handle {
    let at: foldhash::HashMap<&MessageId, &Message> =
        conv.messages.iter().map(|m| (m.id(), m)).collect();
    of_parts(ids.iter().map(|id| match at.get(id) {
        Some(m) => Part::Message(conv.message_json(m)),
        None => Part::Gone(id),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::without;

    #[test]
    fn written_names_each_kind_handle_or_not() {
        use Written::*;
        for (text, kind) in [
            ("[summary: tool bash `ls`: 3 lines]", Summary),
            ("  [summary#h0123456789: a.rs, 40 lines]", Summary),
            ("[summary#sum_1: t | entities: a]", Summary),
            ("[truncated 1,200 chars]", Truncated),
            ("[ctxpress: a.rs unchanged since the Read above]", Note),
            (
                "[ctxpress#h0123456789: 4 earlier messages moved to the archive]",
                Note,
            ),
            ("[cce:dup of call_7 — 345 chars]", Reference),
            (
                "[dup#h0123456789:near-dup of m1 — 12 chars, ~82% match]",
                Reference,
            ),
            ("[Context Summary: 9 earlier messages]", ContextSummary),
            ("[Context Summary]\nwhat happened", ContextSummary),
            ("[session ledger: 12 earlier messages moved", Ledger),
            ("[16 earlier messages archived: 8 assistant; ...]", Evicted),
            (
                "[3 earlier messages moved to the archive as #h0123456789; ...]",
                Evicted,
            ),
        ] {
            assert_eq!(written(text), Some(kind), "{text}");
        }
        for text in [
            "[WIP] fix the parser",
            "[summary] of the meeting",
            "[summary of the call]",
            "[1, 2, 3]",
            "[x:dupe of y]",
            "plain [summary: x]",
            "[Context Summary of the week",
            "[earlier messages archived: none]",
            "",
        ] {
            assert_eq!(written(text), None, "{text}");
        }
        // Only the head is read, cut on a character boundary.
        let long = format!("{}[summary: x]", "é".repeat(150));
        assert_eq!(written(&long), None);
    }

    fn conv(v: serde_json::Value) -> Conversation {
        Conversation::parse(&v.to_string()).unwrap()
    }

    #[test]
    fn a_stage_s_markers_get_handles_standing_for_what_they_replace() {
        let long = "the quick brown fox jumps over the lazy dog, ".repeat(12);
        let before = conv(serde_json::json!([
            {"role": "user", "content": format!("first {long}")},
            {"role": "assistant", "content": format!("second {long}")},
            {"role": "user", "content": format!("third {long}")},
            {"role": "assistant", "content": format!("fourth {long}")},
        ]));
        let mut after = before.clone();
        // In place: message 0 summarized.
        after.messages[0].set_text("[summary: the first]");
        // Made: one message for messages 1 and 2.
        let id = after.fresh_id("sum");
        let (a, b) = (
            after.messages[1].id().clone(),
            after.messages[2].id().clone(),
        );
        after.ann_mut(&id).replaces = vec![a.clone(), b.clone()];
        after.messages.splice(
            1..3,
            [Message::text_message(
                id.clone(),
                "assistant",
                "[cce:dup of the user message \"x\" — 9 chars]",
            )],
        );
        assert_eq!(
            tag_markers(&before, &mut after, &crate::tokens::Heuristic),
            1 + 1
        );
        let first = after.messages[0].text().into_owned();
        let h0 = handle_of(&before, &[before.messages[0].id().clone()]);
        assert_eq!(first, format!("[summary{h0}: the first]"));
        assert_eq!(without(&first), "[summary: the first]");
        let made = after.messages[1].text().into_owned();
        let h1 = handle_of(&before, &[a.clone(), b.clone()]);
        assert_eq!(
            made,
            format!("[cce:dup{h1} of the user message \"x\" — 9 chars]")
        );
        assert_eq!(
            after.ann(&id).unwrap().handles,
            vec![HandleMark {
                handle: h1,
                stands_for: vec![a, b]
            }]
        );
        // Written once: a second pass finds nothing to tag.
        let again = after.clone();
        assert_eq!(
            tag_markers(&before, &mut after, &crate::tokens::Heuristic),
            0
        );
        assert_eq!(after.messages[0].text(), again.messages[0].text());
    }

    #[test]
    fn no_handle_makes_a_message_longer_and_unmarked_text_is_left_alone() {
        let before = conv(serde_json::json!([
            {"role": "user", "content": "short words"},
            {"role": "assistant", "content": "a reply that is long enough to be summarized by anything"},
        ]));
        let mut after = before.clone();
        after.messages[0].set_text("[summary: sw]");
        after.messages[1].set_text("a plain rewrite, not a marker");
        assert_eq!(
            tag_markers(&before, &mut after, &crate::tokens::Heuristic),
            0
        );
        // Back to what it was: no marker stands without a handle.
        assert_eq!(after.messages[0].text(), "short words");
        assert_eq!(after.messages[1].text(), "a plain rewrite, not a marker");
    }

    #[test]
    fn markers_inside_tool_call_arguments_get_handles() {
        let content = "line\n".repeat(200);
        let before = conv(serde_json::json!([
            {"role": "user", "content": "write it"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "write", "arguments": serde_json::json!({"path": "a.txt", "content": content}).to_string()}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]));
        let mut after = before.clone();
        after.messages[1].set_tool_call_arg("c1", "content", "[summary: 200 lines]");
        assert_eq!(
            tag_markers(&before, &mut after, &crate::tokens::Heuristic),
            1
        );
        let args = after.messages[1].tool_calls()[0].args();
        let h = handle_of(&before, &[before.messages[1].id().clone()]);
        assert_eq!(args["content"], format!("[summary{h}: 200 lines]"));
        assert_eq!(args["path"], "a.txt");
    }

    #[test]
    fn marker_words_are_found_where_markers_start() {
        for (text, slot) in [
            ("[summary: x]", Some(8)),
            ("  [summary]", Some(10)),
            ("[ctxpress: a.rs unchanged]", Some(9)),
            ("[Context Summary: 3 earlier]", Some(16)),
            ("[truncated 40 lines]", Some(10)),
            ("[cce:dup of m1 — 3 chars]", Some(8)),
            ("[cce:near-dup of m1]", Some(13)),
            ("[summary#h0123456789: x]", None),
            ("[summary#sum_1: x]", None),
            ("[summarysomething]", None),
            ("[x y:dup of z]", None),
            ("text [summary: x]", None),
        ] {
            assert_eq!(marker_slot(text), slot, "{text}");
        }
    }

    #[test]
    fn notes_inside_tags_and_on_their_own_lines_are_found_too() {
        let t = "look\n<environment_details>[ctxpress: superseded]</environment_details>\n[summary: y] and [summary: not this]";
        let slots = marker_slots(t);
        assert_eq!(slots.len(), 2, "{slots:?}");
        assert_eq!(&t[..slots[0]], "look\n<environment_details>[ctxpress");
    }
}
