//! Recall handles: the short name an elision gives the archived originals it
//! stands for.
//!
//! A marker that replaces text (a summary, a duplicate reference, a fold, an
//! eviction note) carries one handle, written `#h` and 10 lowercase hex
//! digits (`[summary#h7f3a2c91d0: ...]`). The digits hash the texts the
//! marker stands for, as they were when the marker was made, so the same
//! input always gives the same handle and a session's markers keep their
//! handles from one turn to the next. `#h` followed by exactly ten lowercase
//! hex digits and then no letter, digit or `_` is not how a path, a hash or
//! a colour is written, so [`find_all`] does not mistake text for a handle.
//!
//! Handles are written only when the run has an archive to recall from
//! (`StageContext::archive`). The pipeline gives them: after each stage,
//! [`tag_markers`] writes one into every marker the stage left without one
//! (`[summary`, `[ctxpress`, `[Context Summary`, `[truncated`, and dedup's
//! `[PREFIX:dup of` / `[PREFIX:near-dup of`, where it goes after `dup`),
//! standing for the message itself when the stage rewrote it in place, or
//! for the messages it `replaces` when the stage made it. Code that writes a
//! marker outside a stage (the budget's evict note) computes it with
//! [`handle_of`] and registers it with [`mark`].
//! Either way the marker's message gets a [`HandleMark`] naming the messages
//! the handle stands for. When the result is archived,
//! [`records`](crate::archive::records) resolves those messages to the input
//! messages they came from and writes them under the key `h:` + handle
//! ([`record_key`]); `Archive::recall` reads them back.
//!
//! Invariants: the same input gives the same handles, and a handle never
//! makes a message longer than what it stands for, in characters or tokens:
//! where it would, [`tag_markers`] puts a message rewritten in place back as
//! it was before the stage and leaves a message the stage made without one.

use crate::conversation::Conversation;
use crate::message::{Message, MessageId};
use std::fmt;

/// Hex digits in a handle.
pub const DIGITS: usize = 10;

/// A text as long as a handle written in a marker (`#h` and [`DIGITS`]
/// digits): what a stage measures to leave room for the handle the
/// pipeline may write.
pub const PROBE: &str = "#h0123456789";

/// A recall handle: `h` and [`DIGITS`] lowercase hex digits (written with a
/// leading `#` in markers; see [`fmt::Display`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(String);

impl Handle {
    /// The handle of these texts, in order (each message's JSON text).
    pub fn of<'a>(texts: impl IntoIterator<Item = &'a str>) -> Handle {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for t in texts {
            h.update(&(t.len() as u64).to_le_bytes());
            h.update(t.as_bytes());
        }
        let hex = format!("{:032x}", h.digest128());
        Handle(format!("h{}", &hex[..DIGITS]))
    }

    /// Read a handle as a user or a model writes it: `#h7f3a2c91d0`,
    /// `h7f3a2c91d0`, surrounding spaces ignored, hex digits in either case.
    pub fn parse(text: &str) -> Option<Handle> {
        let t = text.trim();
        let t = t.strip_prefix('#').unwrap_or(t);
        let digits = t.strip_prefix('h').or_else(|| t.strip_prefix('H'))?;
        (digits.len() == DIGITS && digits.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Handle(format!("h{}", digits.to_ascii_lowercase())))
    }

    /// `h` and the digits, without the `#`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The archive key its originals are stored under.
    pub fn record_key(&self) -> String {
        record_key(self)
    }
}

impl fmt::Display for Handle {
    /// As written in a marker: `#h7f3a2c91d0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The archive key of a handle's originals: `h:` + the handle without `#`.
pub fn record_key(h: &Handle) -> String {
    format!("h:{}", h.0)
}

/// A marker's handle and the messages it stands for (ids at the time the
/// marker was made; they resolve to input messages through `replaces`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleMark {
    /// The handle written in the marker.
    pub handle: Handle,
    /// The messages the marker stands for, in order.
    pub stands_for: Vec<MessageId>,
}

/// Every handle written in a text (`#h` + ten hex digits, not followed by
/// a letter, digit or `_`; a marker's word may come right before it), in
/// order, repeats kept.
pub fn find_all(text: &str) -> Vec<Handle> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for at in memchr::memmem::find_iter(b, b"#h") {
        let start = at + 2;
        let end = start + DIGITS;
        if end > b.len()
            || !b[start..end]
                .iter()
                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        {
            continue;
        }
        if b.get(end).is_some_and(|&c| is_word(c)) {
            continue;
        }
        out.push(Handle(format!("h{}", &text[start..end])));
    }
    out
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The text with every handle (and the `#` before it) taken out: what a
/// marker said before handles were written into it, for the code that
/// reads markers back (`[Context Summary#h...: ` reads as
/// `[Context Summary: `).
pub fn without(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("#h") {
        return std::borrow::Cow::Borrowed(text);
    }
    let found = find_all(text);
    if found.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for h in found {
        out = out.replacen(&h.to_string(), "", 1);
    }
    std::borrow::Cow::Owned(out)
}

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

/// For a text starting with a marker that has no handle, the offset right
/// after the marker's word (`[summary` | `: ...`).
fn word_end(t: &str) -> Option<usize> {
    let rest = t.strip_prefix('[')?;
    let word = if let Some(r) = rest.strip_prefix("summary") {
        // `[summary: `, `[summary]`, `[summary of`; not `[summary#id: `.
        r.starts_with([':', ']', ' ']).then_some("summary".len())?
    } else if rest.starts_with("ctxpress:") {
        "ctxpress".len()
    } else if let Some(r) = rest.strip_prefix("Context Summary") {
        r.starts_with([':', ']'])
            .then_some("Context Summary".len())?
    } else if let Some(r) = rest.strip_prefix("truncated") {
        (!r.starts_with('#')).then_some("truncated".len())?
    } else {
        // Dedup's references: `[PREFIX:dup of ` and `[PREFIX:near-dup of `.
        let colon = rest.find(':')?;
        let prefix = &rest[..colon];
        if prefix.is_empty() || prefix.len() > 32 || !prefix.bytes().all(is_word) {
            return None;
        }
        let r = &rest[colon + 1..];
        if r.starts_with("dup of ") {
            colon + 1 + "dup".len()
        } else if r.starts_with("near-dup of ") {
            colon + 1 + "near-dup".len()
        } else {
            return None;
        }
    };
    Some(1 + word)
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
        let handle = Handle::of_parts(stands_for.iter().map(|s| match old.get(s) {
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

impl Handle {
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
}

/// The handle of `ids` as they are in `conv`: each message's meaning
/// ([`crate::canonical::digest`] of its JSON), or its id when it is not
/// there.
pub fn handle_of(conv: &Conversation, ids: &[MessageId]) -> Handle {
    let at: foldhash::HashMap<&MessageId, &Message> =
        conv.messages.iter().map(|m| (m.id(), m)).collect();
    Handle::of_parts(ids.iter().map(|id| match at.get(id) {
        Some(m) => Part::Message(conv.message_json(m)),
        None => Part::Gone(id),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_texts_give_the_same_handle_and_others_another() {
        let a = Handle::of(["one", "two"]);
        assert_eq!(a, Handle::of(["one", "two"]));
        assert_ne!(a, Handle::of(["onetwo"]));
        assert_ne!(a, Handle::of(["two", "one"]));
        assert_eq!(a.as_str().len(), 1 + DIGITS);
        assert!(a.to_string().starts_with("#h"));
    }

    #[test]
    fn handles_are_found_in_markers_and_nowhere_else() {
        let h = Handle::of(["x"]);
        let text = format!("[summary{h}: tool Read a.rs] and (details: {h}).");
        assert_eq!(find_all(&text), vec![h.clone(), h.clone()]);
        for not in [
            "#h0123456789a",  // eleven digits
            "#h012345678",    // nine
            "#h012345678g",   // not hex
            "#H0123456789",   // upper case is not written by us
            "#h0123456789_x", // continues as a word
        ] {
            assert!(find_all(not).is_empty(), "{not}");
        }
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

    #[test]
    fn parse_takes_what_people_and_models_type() {
        let h = Handle::of(["x"]);
        for s in [
            h.to_string(),
            h.as_str().to_string(),
            format!("  {}  ", h.to_string().to_uppercase().replacen('H', "h", 1)),
        ] {
            assert_eq!(Handle::parse(&s).as_ref(), Some(&h), "{s}");
        }
        assert_eq!(Handle::parse("h123"), None);
        assert_eq!(Handle::parse("src/h0123456789"), None);
        assert_eq!(record_key(&h), format!("h:{}", h.as_str()));
    }
}
