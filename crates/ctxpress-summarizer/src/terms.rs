//! Information-bearing terms of a text, for the information check on
//! summarized tool results (`chars_per_lost_term`): paths with an extension,
//! compound identifiers (camelCase, PascalCase, snake_case, which covers error
//! names), versions and hex ids of 7 to 64 digits (commit hashes, addresses).
//! Plain words, short numbers and sizes are left out: in tool output they are
//! mostly prose, progress and timing noise.

use std::collections::HashMap;

fn token_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'/')
}

fn is_edge(c: u8) -> bool {
    matches!(c, b'.' | b'-' | b'/')
}

/// `a/b.ext`, `name.ext`: a name with a dot and a 1-6 character alphanumeric
/// extension holding a letter, after a slash, or with a stem of two or more
/// characters holding a letter (so `e.g` is not one).
fn is_path(run: &str) -> bool {
    let name = run.rsplit('/').next().unwrap_or(run);
    match name.rfind('.') {
        Some(dot) if dot > 0 => {
            let ext = name.get(dot + 1..).unwrap_or("");
            let stem = name.get(..dot).unwrap_or("");
            (1..=6).contains(&ext.len())
                && ext.bytes().all(|c| c.is_ascii_alphanumeric())
                && ext.bytes().any(|c| c.is_ascii_alphabetic())
                && (run.contains('/')
                    || (stem.len() >= 2 && stem.bytes().any(|c| c.is_ascii_alphabetic())))
        }
        _ => false,
    }
}

/// `1.2.3`, `v1.2.3`, `1.2.3.4`: two or more dots between digit runs.
fn is_version(seg: &str) -> bool {
    let s = seg.strip_prefix('v').unwrap_or(seg);
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() >= 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
}

/// A hex id: 7 to 64 lower-case hex digits, at least one a decimal digit.
fn is_hex_id(run: &str) -> bool {
    (7..=64).contains(&run.len())
        && run.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        && run.bytes().any(|c| c.is_ascii_digit())
}

/// A compound identifier: snake_case (letters, digits and inner
/// underscores, starting with a letter), or camelCase / PascalCase (letters
/// and digits with a capital after a lower-case letter).
fn is_identifier(w: &str) -> bool {
    let b = w.as_bytes();
    let Some(&first) = b.first() else {
        return false;
    };
    if !first.is_ascii_alphabetic() {
        return false;
    }
    if w.contains('_') {
        return !w.ends_with('_')
            && !w.contains("__")
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
            && b.iter().any(u8::is_ascii_lowercase);
    }
    b.iter().all(u8::is_ascii_alphanumeric)
        && b.windows(2)
            .any(|p| matches!(p, [x, y] if x.is_ascii_lowercase() && y.is_ascii_uppercase()))
}

/// Call `f` with each term of `text`, in order (see the module docs).
pub fn for_each_term<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes.get(i).copied().is_some_and(token_byte) {
            i += 1;
            continue;
        }
        let start = i;
        let (mut mark, mut upper, mut digit, mut dot) = (false, false, false, false);
        while let Some(&c) = bytes.get(i) {
            if !token_byte(c) {
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
        while a < e && bytes.get(a).copied().is_some_and(is_edge) {
            a += 1;
        }
        while e > a && bytes.get(e - 1).copied().is_some_and(is_edge) {
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
                    if is_identifier(w) || is_hex_id(w) {
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
