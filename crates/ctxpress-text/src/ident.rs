//! Recognizers of single tokens: whether one word or term run is a path with
//! an extension, a dotted version, a compound identifier or a hex id. They
//! take the token already cut out (see [`super::terms`] for a scan that cuts
//! them); [`super::entities`] finds the same kinds of things in running text.

/// `a/b.ext`, `name.ext`: a name with a dot and a 1-6 character alphanumeric
/// extension holding a letter, after a slash, or with a stem of two or more
/// characters holding a letter (so `e.g` is not one).
pub fn is_path(run: &str) -> bool {
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
pub fn is_version(seg: &str) -> bool {
    let s = seg.strip_prefix('v').unwrap_or(seg);
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() >= 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
}

/// A hex id: 7 to 64 lower-case hex digits, at least one a decimal digit.
pub fn is_hex_id(run: &str) -> bool {
    (7..=64).contains(&run.len())
        && run.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        && run.bytes().any(|c| c.is_ascii_digit())
}

/// A compound identifier: snake_case (letters, digits and inner
/// underscores, starting with a letter), or camelCase / PascalCase (letters
/// and digits with a capital after a lower-case letter).
pub fn is_compound_identifier(w: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        for p in ["src/a.rs", "README.md", "a/b.tar.gz", "x/y.c"] {
            assert!(is_path(p), "{p}");
        }
        for p in ["e.g", "3.5", "a.b", "src/lib", "x.123", "name.toolongext"] {
            assert!(!is_path(p), "{p}");
        }
        assert!(is_version("1.2.3") && is_version("v1.2.3") && is_version("1.2.3.4"));
        assert!(!is_version("1.2") && !is_version("1..2") && !is_version("v1.2.x"));
        assert!(is_hex_id("4f2a9c1") && !is_hex_id("deadbeef") && !is_hex_id("12ab"));
        for w in [
            "fetchUser",
            "user_store",
            "ValueError",
            "HTTPServerGo",
            "a_1",
        ] {
            assert!(is_compound_identifier(w), "{w}");
        }
        for w in ["plain", "Plain", "ABC", "a__b", "_x", "x_", "A_B", "1abC"] {
            assert!(!is_compound_identifier(w), "{w}");
        }
    }
}
