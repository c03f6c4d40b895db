//! Paths and the session's working directory: normalization, detection.

use crate::conversation::Conversation;
use crate::message::Role;
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// Collapse runs of whitespace to one space and trim.
pub fn normalize_ws(s: &str) -> String {
    // Already normalized (ASCII, single spaces between words, none at the
    // ends): as it is. Non-ASCII text takes the general path, which knows
    // Unicode white space.
    let b = s.as_bytes();
    if s.is_ascii()
        && b.first() != Some(&b' ')
        && b.last() != Some(&b' ')
        && !b
            .iter()
            .any(|c| matches!(c, b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
        && memchr::memmem::find(b, b"  ").is_none()
    {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut push = |w: &str| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    };
    if s.is_ascii() {
        // The words between runs of ASCII white space (what
        // `split_whitespace` finds in ASCII text), found by byte, copied a
        // run at a time: a run is words with single spaces between them,
        // which the output keeps as they are.
        let blank = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r');
        let n = b.len();
        let mut i = 0;
        loop {
            while i < n && blank(b[i]) {
                i += 1;
            }
            if i == n {
                break;
            }
            let start = i;
            loop {
                while i < n && !blank(b[i]) {
                    i += 1;
                }
                if i + 1 < n && b[i] == b' ' && !blank(b[i + 1]) {
                    i += 1;
                } else {
                    break;
                }
            }
            push(s.get(start..i).unwrap_or(""));
        }
    } else {
        s.split_whitespace().for_each(push);
    }
    out
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
    !rest.is_empty()
        && rest
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
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
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        if is_clean_absolute(&s) {
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
        assert!(is_plain_clean_absolute("/a/b.rs"));
        assert!(!is_plain_clean_absolute("/a/b/"));
        assert!(!is_plain_clean_absolute("/a/b "));
    }

    proptest! {
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
        }

        #[test]
        fn normalize_ws_joins_split_whitespace_in_ascii(s in "([a-c]{0,3}[ \t\n\r\x0b\x0c]{0,3}){0,10}") {
            prop_assert_eq!(normalize_ws(&s), s.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
}
