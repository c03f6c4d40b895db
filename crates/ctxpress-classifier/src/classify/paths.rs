//! The `file_path` pattern, matched by hand at each `/`.

use crate::masks;

use super::numbers::ends_word;

/// The `file_path` pattern through the `/` at `p` (`tok_mask` is the token
/// mask of `b`): `[~|.|..]/seg/seg` after a delimiter, or `seg/seg[/seg...]`
/// ending in `.ext` (1-8 letters or digits).
pub(super) fn path_at(b: &[u8], tok_mask: &[u64], p: usize) -> bool {
    let tok = |i: usize| masks::bit(tok_mask, i);
    let seg_end = |i: usize| {
        if tok(i) {
            masks::run_end(tok_mask, i)
        } else {
            i
        }
    };
    let after_delim = |q: usize, delims: &[u8]| {
        q == 0
            || b.get(q - 1)
                .is_some_and(|c| *c == b'\n' || delims.contains(c))
    };
    let byte = |i: Option<usize>| i.and_then(|i| b.get(i)).copied();
    // `(?:~|\.{1,2})?/seg(/seg)+` after `^` or one of ` \t(['`=,:`
    let e1 = seg_end(p + 1);
    if e1 > p + 1 && b.get(e1) == Some(&b'/') && tok(e1 + 1) {
        const D1: &[u8] = b" \t(['`=,:";
        let prev = byte(p.checked_sub(1));
        let prev2 = byte(p.checked_sub(2));
        if after_delim(p, D1)
            || (matches!(prev, Some(b'~' | b'.')) && after_delim(p - 1, D1))
            || (prev == Some(b'.') && prev2 == Some(b'.') && after_delim(p - 2, D1))
        {
            return true;
        }
    }
    // `seg(/seg)+\.ext\b` after `^` or one of ` \t(['`=,`
    let s = if p > 0 && tok(p - 1) {
        masks::run_start(tok_mask, p - 1)
    } else {
        p
    };
    if s == p || !after_delim(s, b" \t(['`=,") {
        return false;
    }
    let mut i = p;
    while b.get(i) == Some(&b'/') {
        let (start, end) = (i + 1, seg_end(i + 1));
        if end == start {
            return false;
        }
        let ext = (start + 1..end).any(|d| {
            b.get(d) == Some(&b'.') && {
                let n = b.get(d + 1..).map_or(0, |r| {
                    r.iter().take_while(|c| c.is_ascii_alphanumeric()).count()
                });
                (1..=8).contains(&n) && ends_word(b, d + 1 + n)
            }
        });
        if ext {
            return true;
        }
        i = end;
    }
    false
}
