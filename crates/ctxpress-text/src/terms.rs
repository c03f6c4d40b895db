//! Information-bearing terms of a text: paths with an extension, compound
//! identifiers (camelCase, PascalCase, snake_case, which covers error
//! names), versions and hex ids of 7 to 64 digits (commit hashes,
//! addresses), found by one scan over the runs of term bytes
//! ([`super::bytes::is_term_byte`]) and the token tests of [`super::ident`].
//! Plain words, short numbers and sizes are left out: in tool output they are
//! mostly prose, progress and timing noise. The summarizer's information
//! check on summarized tool results (`chars_per_lost_term`) counts them.

use std::collections::HashMap;
use std::ops::Range;

use super::bytes::{is_term_byte, is_term_edge};
use super::ident::{is_compound_identifier, is_hex_id, is_path, is_version};

/// Call `f` with each term of `text`, in order (see the module docs).
pub fn for_each_term<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes.get(i).copied().is_some_and(is_term_byte) {
            i += 1;
            continue;
        }
        let start = i;
        let (mut mark, mut upper, mut digit, mut dot) = (false, false, false, false);
        while let Some(&c) = bytes.get(i) {
            if !is_term_byte(c) {
                break;
            }
            mark |= c == b'_' || c == b'/';
            upper |= i > start && c.is_ascii_uppercase();
            digit |= c.is_ascii_digit();
            dot |= c == b'.';
            i += 1;
        }
        // Plain words (and plain numbers) hold no term: skipped unsplit.
        if !(mark || upper || dot) {
            if let Some(run) = text.get(start..i)
                && is_hex_id(run)
            {
                f(run);
            }
            continue;
        }
        let (mut a, mut e) = (start, i);
        while a < e && bytes.get(a).copied().is_some_and(is_term_edge) {
            a += 1;
        }
        while e > a && bytes.get(e - 1).copied().is_some_and(is_term_edge) {
            e -= 1;
        }
        // Token bytes are ASCII, so these are char boundaries.
        let Some(run) = text.get(a..e) else {
            continue;
        };
        if dot && is_path(run) {
            f(run);
        }
        if !(mark || upper || (digit && dot)) {
            continue;
        }
        for seg in run.split(['/', '-']) {
            if digit && is_version(seg) {
                f(seg);
            } else {
                for w in seg.split('.') {
                    if is_compound_identifier(w) || is_hex_id(w) {
                        f(w);
                    }
                }
            }
        }
    }
}

/// The terms of `text` with their occurrence counts.
pub fn term_counts(text: &str) -> HashMap<&str, u32> {
    let mut m: HashMap<&str, u32> = HashMap::new();
    for_each_term(text, |t| *m.entry(t).or_default() += 1);
    m
}

/// The spans of the terms of `text` (see [`for_each_term`]), in order.
pub fn term_spans(text: &str) -> Vec<Range<usize>> {
    let base = text.as_ptr() as usize;
    let mut out = Vec::new();
    for_each_term(text, |t| {
        let start = t.as_ptr() as usize - base;
        out.push(start..start + t.len());
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(t: &str) -> Vec<&str> {
        let mut v = Vec::new();
        for_each_term(t, |x| v.push(x));
        v
    }

    #[test]
    fn finds_paths_identifiers_versions() {
        assert_eq!(
            terms(
                "Read src/lib/api.js and call fetchUser from user_store, see README.md. \
                 Bump to v1.2.3 (ValueError) at 4f2a9c1. Plain words, 42, 3.5 s, \
                 deadbeef and 12ab are not terms."
            ),
            vec![
                "src/lib/api.js",
                "fetchUser",
                "user_store",
                "README.md",
                "v1.2.3",
                "ValueError",
                "4f2a9c1",
            ]
        );
    }

    #[test]
    fn rejects_noise() {
        assert!(terms("a__b _x x_ 12.5 ... -- / e.g. i.e. __init__").is_empty());
        assert_eq!(terms("snake_case."), vec!["snake_case"]);
        assert_eq!(term_counts("fooBar fooBar x_y").get("fooBar"), Some(&2));
    }
}
