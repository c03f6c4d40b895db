//! Paths and the session's working directory: normalization, detection.
//!
//! [`normalize_path`] resolves a path against the working directory so the same
//! file is named alike by every tool; [`detect_cwd`] finds the working
//! directory a conversation states.

use ctxpress_core::conversation::Conversation;
use ctxpress_core::message::Role;
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// Collapse runs of whitespace to one space and trim.
pub fn normalize_ws(s: &str) -> String {
    if !s.is_ascii() {
        // Unicode white space: the general split.
        let mut out = String::with_capacity(s.len());
        for w in s.split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
        }
        return out;
    }
    // ASCII: runs of words with single spaces between them are copied as
    // they are, each up to the next break ([`ws_break`]); an already
    // normalized text is one run.
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = skip_ascii_blanks(b, 0);
    while i < b.len() {
        let j = ws_break(b, i + 1);
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(s.get(i..j).unwrap_or(""));
        i = skip_ascii_blanks(b, j);
    }
    out
}

/// ASCII white space as `split_whitespace` knows it.
fn ascii_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// The first index at or after `i` whose byte is not ASCII white space.
fn skip_ascii_blanks(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|&c| ascii_blank(c)) {
        i += 1;
    }
    i
}

/// The first index at or after `i` where a run of words with single
/// spaces between them ends: white space other than a space, or a space
/// followed by white space or ending the text; `b.len()` when there is
/// none. Sixteen bytes at a time (SSE2), each lane compared with the lane
/// one byte on for the byte after a space.
fn ws_break(b: &[u8], mut i: usize) -> usize {
    use ctxpress_text::sse2::{eq, in_range};
    use safe_arch::{load_unaligned_m128i, move_mask_i8_m128i};
    let lane = |at: usize| {
        b.get(at..at + 16)
            .and_then(|c| <&[u8; 16]>::try_from(c).ok())
    };
    while let (Some(here), Some(next)) = (lane(i), lane(i + 1)) {
        let v = load_unaligned_m128i(here);
        let w = load_unaligned_m128i(next);
        // \t \n \x0b \x0c \r are 9..=13.
        let other_blank = in_range(v, b'\t', 5);
        let next_blank = in_range(w, b'\t', 5) | eq(w, b' ');
        let bits = move_mask_i8_m128i(other_blank | (eq(v, b' ') & next_blank));
        if bits != 0 {
            return i + bits.trailing_zeros() as usize;
        }
        i += 16;
    }
    while let Some(&c) = b.get(i) {
        if c != b' ' && ascii_blank(c) {
            return i;
        }
        if c == b' ' && b.get(i + 1).is_none_or(|&d| ascii_blank(d)) {
            return i;
        }
        i += 1;
    }
    b.len().max(i)
}

fn is_drive(b: &[u8]) -> bool {
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

/// Normalize a path: quotes and whitespace trimmed, backslashes to slashes,
/// Windows drive paths lower-cased (their file systems ignore case), relative paths joined to `cwd` when known, `.` and `..`
/// resolved lexically, repeated and trailing slashes removed.
pub fn normalize_path(p: &str, cwd: Option<&str>) -> String {
    if is_plain_clean_absolute(p) {
        return p.to_string();
    }
    normalize_general(p, cwd)
}

/// [`normalize_path`] without the shortcut for paths already normalized.
fn normalize_general(p: &str, cwd: Option<&str>) -> String {
    let t = p
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`')
        .trim();
    let mut s = t.replace('\\', "/");
    if let Some(rest) = s.strip_prefix("file://") {
        s = rest.to_string();
    }
    let absolute = s.starts_with('/') || is_drive(s.as_bytes()) || s.starts_with('~');
    if !absolute
        && let Some(c) = cwd
        && !c.trim().is_empty()
    {
        let base = normalize_general(c, None);
        let mut joined = String::with_capacity(base.len() + 1 + s.len());
        joined.push_str(&base);
        joined.push('/');
        joined.push_str(&s);
        s = joined;
    }
    let windows = is_drive(s.as_bytes());
    if windows {
        if s.is_ascii() {
            s.make_ascii_lowercase();
        } else {
            s = s.to_lowercase();
        }
    }
    if is_clean_absolute(&s) {
        return s;
    }
    resolve(&s, windows, t.is_empty())
}

/// `.` and `..` of the joined, slash-separated path `s` resolved lexically,
/// repeated and trailing slashes dropped; `windows` for a drive path,
/// `empty` when the path given was empty.
fn resolve(s: &str, windows: bool, empty: bool) -> String {
    let lead = if s.starts_with('/') { "/" } else { "" };
    let mut parts: Vec<&str> = Vec::new();
    for seg in s.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if matches!(parts.last(), Some(l) if *l != ".." && !is_drive(l.as_bytes())) {
                    parts.pop();
                } else if lead.is_empty() && !windows {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let mut out = format!("{lead}{}", parts.join("/"));
    if windows && out.len() == 2 {
        out.push('/');
    }
    if out.is_empty() && !empty {
        out = if lead.is_empty() {
            ".".into()
        } else {
            "/".into()
        };
    }
    out
}

/// True for a path given as [`normalize_path`] would give it back, found
/// without copying it: from `/`, no backslash, nothing the trims would take
/// off its end (its start is the `/`), and clean ([`is_clean_absolute`]).
/// Absolute POSIX paths (and the working directory itself) nearly always
/// are.
fn is_plain_clean_absolute(p: &str) -> bool {
    p.starts_with('/')
        && p.chars()
            .next_back()
            .is_some_and(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | '`'))
        && memchr::memchr(b'\\', p.as_bytes()).is_none()
        && is_clean_absolute(p)
}

/// True for a path [`normalize_path`] leaves as it is: absolute (from `/`
/// or a drive's `c:/`, lower-cased by then), and every segment after the
/// root neither empty (no repeated or trailing slash) nor `.` or `..`.
fn is_clean_absolute(s: &str) -> bool {
    // After the root: `/` or a drive's `c:/`.
    let rest = match s.strip_prefix('/') {
        Some(rest) => rest,
        None if is_drive(s.as_bytes()) => match s.get(2..).and_then(|r| r.strip_prefix('/')) {
            Some(rest) => rest,
            None => return false,
        },
        None => return false,
    };
    // The segments between slashes, found by byte (a `split` costs a
    // search call a segment).
    let b = rest.as_bytes();
    let ok = |seg: &[u8]| !matches!(seg, b"" | b"." | b"..");
    let mut seg = 0;
    for (i, &c) in b.iter().enumerate() {
        if c == b'/' {
            if !ok(b.get(seg..i).unwrap_or(&[])) {
                return false;
            }
            seg = i + 1;
        }
    }
    !b.is_empty() && ok(b.get(seg..).unwrap_or(&[]))
}

/// False when `t` holds none of the literals a working-directory statement
/// of [`detect_cwd`] needs (`<cwd>`, `cwd:`, `orking directory:`): its
/// regex cannot match there, and a literal search is several times cheaper
/// than the regex's scan of a long system prompt that states none.
fn may_state_cwd(t: &str) -> bool {
    use memchr::memmem::Finder;
    static NEEDLES: LazyLock<[Finder<'static>; 3]> = LazyLock::new(|| {
        [
            Finder::new("<cwd>"),
            Finder::new("cwd:"),
            Finder::new("orking directory:"),
        ]
    });
    NEEDLES.iter().any(|f| f.find(t.as_bytes()).is_some())
}

/// The session's working directory, when the conversation states it (Codex
/// `<cwd>...</cwd>` in its environment context, or `Working directory: ...` in
/// a system prompt). Looks at the first messages only.
pub fn detect_cwd(conv: &Conversation) -> Option<String> {
    static CWD: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"<cwd>([^<\n]+)</cwd>|(?m)^\s*(?:Working directory|Primary working directory|cwd):\s*(\S[^\n]*)$")
            .expect("valid regex")
    });
    for m in conv.messages.iter().take(8) {
        if !matches!(m.role(), Role::System | Role::Developer | Role::User) {
            continue;
        }
        let t = m.text();
        if !may_state_cwd(&t) {
            continue;
        }
        if let Some(c) = CWD.captures(&t) {
            let v = c.get(1).or_else(|| c.get(2))?.as_str().trim();
            if !v.is_empty() {
                return Some(normalize_path(v, None));
            }
        }
    }
    if let Some(Value::String(c)) = conv.envelope.fields.get("cwd") {
        return Some(normalize_path(c, None));
    }
    None
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::reference::normalize_ws_reference;
    use super::*;
    use proptest::prelude::*;

    /// [`is_clean_absolute`] as first written (segments by `split`).
    fn is_clean_absolute_reference(s: &str) -> bool {
        let rest = match s.strip_prefix('/') {
            Some(rest) => rest,
            None if is_drive(s.as_bytes()) => match s.get(2..).and_then(|r| r.strip_prefix('/')) {
                Some(rest) => rest,
                None => return false,
            },
            None => return false,
        };
        !rest.is_empty()
            && rest
                .split('/')
                .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
    }

    /// [`normalize_path`] as first written (no shortcut, `str::replace`).
    fn reference(p: &str, cwd: Option<&str>) -> String {
        let t = p
            .trim()
            .trim_matches(|c| c == '"' || c == '\'' || c == '`')
            .trim();
        let mut s = t.replace('\\', "/");
        if let Some(rest) = s.strip_prefix("file://") {
            s = rest.to_string();
        }
        let absolute = s.starts_with('/') || is_drive(s.as_bytes()) || s.starts_with('~');
        if !absolute
            && let Some(c) = cwd
            && !c.trim().is_empty()
        {
            let base = reference(c, None);
            s = format!("{base}/{s}");
        }
        let windows = is_drive(s.as_bytes());
        if windows {
            if s.is_ascii() {
                s.make_ascii_lowercase();
            } else {
                s = s.to_lowercase();
            }
        }
        if is_clean_absolute_reference(&s) {
            return s;
        }
        resolve(&s, windows, t.is_empty())
    }

    #[test]
    fn clean_paths_come_back_as_given() {
        for p in [
            "/a/b.rs",
            "/work/main/src",
            "/a/b ",
            "/a/b\"",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/a/",
            "/",
            "/a\\b",
            "/a/b\u{a0}",
            "/é/ü",
        ] {
            for cwd in [None, Some("/w"), Some("C:\\W"), Some("w/")] {
                assert_eq!(normalize_path(p, cwd), reference(p, cwd), "{p:?} {cwd:?}");
            }
        }
        for p in [
            "", "/", "//", "/a", "/a/", "/.", "/..", "/...", "/a/./b", "/a/../b", "/a/.b",
            "/a/..b", "/a//b", "c:", "c:/", "c:/a", "C:/a/", "c:a", "~/a", "/é/.", "/a/b/c.d",
        ] {
            assert_eq!(
                is_clean_absolute(p),
                is_clean_absolute_reference(p),
                "{p:?}"
            );
        }
        assert!(is_plain_clean_absolute("/a/b.rs"));
        assert!(!is_plain_clean_absolute("/a/b/"));
        assert!(!is_plain_clean_absolute("/a/b "));
    }

    /// [`detect_cwd`] as first written (the regex on every message looked
    /// at, no literal prefilter).
    fn detect_cwd_reference(conv: &Conversation) -> Option<String> {
        static CWD: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"<cwd>([^<\n]+)</cwd>|(?m)^\s*(?:Working directory|Primary working directory|cwd):\s*(\S[^\n]*)$")
                .expect("valid regex")
        });
        for m in conv.messages.iter().take(8) {
            if !matches!(m.role(), Role::System | Role::Developer | Role::User) {
                continue;
            }
            let t = m.text();
            if let Some(c) = CWD.captures(&t) {
                let v = c.get(1).or_else(|| c.get(2))?.as_str().trim();
                if !v.is_empty() {
                    return Some(normalize_path(v, None));
                }
            }
        }
        if let Some(Value::String(c)) = conv.envelope.fields.get("cwd") {
            return Some(normalize_path(c, None));
        }
        None
    }

    fn conv_of(texts: &[(&str, &str)]) -> Conversation {
        let msgs: Vec<Value> = texts
            .iter()
            .map(|(role, t)| serde_json::json!({"role": role, "content": t}))
            .collect();
        Conversation::parse(&Value::Array(msgs).to_string()).expect("a conversation")
    }

    #[test]
    fn stated_working_directories_are_found_as_before() {
        let cases: &[&[(&str, &str)]] = &[
            &[("system", "Working directory: /repo")],
            &[("system", "x\n  Primary working directory: /a/b \nmore")],
            &[("user", "<env><cwd>/w/x</cwd></env>")],
            &[("user", "cwd: C:\\Users\\me")],
            &[("user", "the cwd: is /x"), ("system", "cwd:\n/y")],
            &[("system", "working directory: /lower")],
            &[("assistant", "Working directory: /a"), ("user", "no")],
            &[("user", "<cwd></cwd> Working directory:  ")],
            &[("user", "plain text")],
        ];
        for c in cases {
            let conv = conv_of(c);
            assert_eq!(detect_cwd(&conv), detect_cwd_reference(&conv), "{c:?}");
        }
    }

    proptest! {
        #[test]
        fn working_directories_are_found_as_before(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("<cwd>".to_string()),
                    Just("</cwd>".to_string()),
                    Just("cwd:".to_string()),
                    Just("Working directory:".to_string()),
                    Just("Primary working directory:".to_string()),
                    Just("orking directory:".to_string()),
                    "[ \n\t/a-c<>:]{0,6}",
                ],
                0..8,
            ),
            role in proptest::sample::select(vec!["system", "user", "developer", "assistant"]),
        ) {
            let t = parts.concat();
            let conv = conv_of(&[(role, t.as_str())]);
            prop_assert_eq!(detect_cwd(&conv), detect_cwd_reference(&conv));
        }

        #[test]
        fn clean_absolute_paths_are_found_as_by_split(p in "(/|[cC]:/?|~)?([a-c.é]{0,3}/{0,2}){0,5}") {
            prop_assert_eq!(is_clean_absolute(&p), is_clean_absolute_reference(&p));
        }

        #[test]
        fn a_clean_path_is_what_resolving_it_gives(p in "(/|[cC]:[/\\\\]|~)?([a-c.]{0,3}[/\\\\]){0,4}[a-cé.]{0,3}") {
            let s = p.replace('\\', "/").to_ascii_lowercase();
            if is_clean_absolute(&s) {
                prop_assert_eq!(resolve(&s, is_drive(s.as_bytes()), s.is_empty()), s);
            }
        }

        #[test]
        fn the_clean_path_shortcut_changes_nothing(
            p in "[ \"'`]?(/|[cC]:[/\\\\]|~|file:///)?([a-cA-C.é ]{0,3}[/\\\\]){0,4}[a-cA-Cé. ]{0,3}[ \"'`\u{a0}]?",
            cwd in proptest::option::of("[ ]?(/|[cC]:[/\\\\])?([a-cA-C.]{0,3}[/\\\\]){0,3}[a-cA-C.]{0,2}[/ ]?"),
        ) {
            prop_assert_eq!(normalize_path(&p, cwd.as_deref()), reference(&p, cwd.as_deref()));
            prop_assert_eq!(normalize_path(&p, None), reference(&p, None));
        }

        #[test]
        fn normalize_ws_joins_split_whitespace(s in "[ab \t\n\r\x0b\x0c\u{a0}\u{2003}é]{0,30}") {
            prop_assert_eq!(normalize_ws(&s), s.split_whitespace().collect::<Vec<_>>().join(" "));
            prop_assert_eq!(normalize_ws(&s), normalize_ws_reference(&s));
        }

        #[test]
        fn normalize_ws_joins_split_whitespace_in_ascii(s in "([a-c]{0,3}[ \t\n\r\x0b\x0c\x1f!]{0,3}){0,20}") {
            prop_assert_eq!(normalize_ws(&s), s.split_whitespace().collect::<Vec<_>>().join(" "));
            prop_assert_eq!(normalize_ws(&s), normalize_ws_reference(&s));
        }
    }
}
