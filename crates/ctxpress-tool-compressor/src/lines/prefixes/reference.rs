//! Reference implementations for the tests of the line-number prefixes
//! (the slow or plain forms the faster code is compared with):
//! [`number_prefix`] (`number_prefix_after` with its own leading white
//! space, the form the tests use), and the one-by-one forms of
//! [`super::leading_space`] and [`super::split_numbered`].

use super::*;

/// [`number_prefix_after`], counting the leading white space itself.
pub(super) fn number_prefix(l: &str) -> Option<(Option<u64>, usize)> {
    let ws = l.bytes().take_while(|c| ascii_space(*c)).count();
    number_prefix_after(l, ws)
}

/// The count of ASCII white space bytes `b` starts with, one by one (the
/// reference of [`leading_space`]).
pub(super) fn leading_space_reference(b: &[u8]) -> usize {
    b.iter().take_while(|c| ascii_space(**c)).count()
}

/// The two-pass [`split_numbered`] it replaced (the reference of the tests).
pub(super) fn split_numbered_reference(text: &str) -> Vec<Line<'_>> {
    let mut lines: Vec<Line<'_>> = Vec::with_capacity(text.len() / 32 + 1);
    // The end of each line's number prefix (0: none), its number in `lines`.
    let mut ends: Vec<usize> = Vec::with_capacity(text.len() / 32 + 1);
    let mut hits = 0usize;
    let mut nonempty = 0usize;
    let mut last: Option<u64> = None;
    for l in ctxpress_text::lines::lines(text) {
        // The leading white space, counted once for `is_blank` and the
        // number prefix.
        let ws = l.bytes().take_while(|c| ascii_space(*c)).count();
        let blank = match l.as_bytes().get(ws) {
            None => true,
            Some(c) if c.is_ascii() => false,
            Some(_) => l.trim().is_empty(),
        };
        let (number, end) = if blank {
            (None, 0)
        } else {
            nonempty += 1;
            match number_prefix_after(l, ws) {
                Some((number, end)) => {
                    if let Some(n) = number
                        && last.is_none_or(|p| n > p)
                    {
                        hits += 1;
                        last = Some(n);
                    }
                    (number, end)
                }
                None => (None, 0),
            }
        };
        lines.push(Line { number, body: l });
        ends.push(end);
    }
    let numbered = nonempty > 0 && hits * 5 >= nonempty * 4;
    for (line, &end) in lines.iter_mut().zip(&ends) {
        if !numbered {
            line.number = None;
        } else if end > 0 {
            line.body = line.body.get(end..).unwrap_or("");
        }
    }
    lines
}
