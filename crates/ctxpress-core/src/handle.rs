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
//! [`tag_markers`](crate::markers::tag_markers) writes one into every marker the stage left without one
//! (`[summary`, `[ctxpress`, `[Context Summary`, `[truncated`, and dedup's
//! `[PREFIX:dup of` / `[PREFIX:near-dup of`, where it goes after `dup`),
//! standing for the message itself when the stage rewrote it in place, or
//! for the messages it `replaces` when the stage made it. Code that writes a
//! marker outside a stage (the budget's evict note) computes it with
//! [`handle_of`](crate::markers::handle_of) and registers it with
//! [`mark`](crate::markers::mark) ([`crate::markers`] writes them; this
//! module only names them and finds them in text).
//! Either way the marker's message gets a [`HandleMark`] naming the messages
//! the handle stands for. When the result is archived,
//! [`records`](crate::archive::records) resolves those messages to the input
//! messages they came from and writes them under the key `h:` + handle
//! ([`record_key`]); `Archive::recall` reads them back.
//!
//! Invariants: the same input gives the same handles, and a handle never
//! makes a message longer than what it stands for, in characters or tokens:
//! where it would, [`tag_markers`](crate::markers::tag_markers) puts a message rewritten in place back as
//! it was before the stage and leaves a message the stage made without one.

use crate::message::MessageId;
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

pub(crate) fn is_word(c: u8) -> bool {
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
