//! The slow reference the tests hold `normalize_ws` to (tests only).

/// [`normalize_ws`] as written before [`ws_break`] (a fast-path check,
/// then a byte-by-byte walk): the reference the tests hold it to.
pub(super) fn normalize_ws_reference(s: &str) -> String {
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
