//! The references a text mentions: paths, URLs and `…Error`/`…Exception`
//! names, in the order met. A cheap search for the bytes each kind needs
//! picks where the regex runs; by line too, and in the lines a summary does
//! not show ([`references_outside`]).

use super::Line;
use super::prefixes::ascii_space;
use super::re;
use regex::Regex;
use std::sync::LazyLock;

static REF: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"https?://[^\s)"'<>`\]]+|(?:[A-Za-z]:[\\/]|~?/)?(?:[\w.@-]+[\\/])+[\w.-]+\.[A-Za-z0-9]{1,6}(?-u:\b)|(?-u:\b)[A-Z][A-Za-z]*(?:Error|Exception)(?-u:\b)"#,
    )
});

/// Paths, URLs and error names mentioned in `text`, in order of first
/// appearance, without duplicates, at most `max`.
pub fn references(text: &str, max: usize) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    if max > 0 {
        push_references(text, max, &mut out);
    }
    out
}

/// Where to search for the next match of [`REF`] at or after `at` of `b`
/// (as `reference_search_start` describes it), given `from`: no byte of `b`
/// from `at` up to `from` is a `/`, a `\\` or an `E`, so the search for
/// them starts at `from` (or at `at` when that is later).
fn reference_search_start_from(b: &[u8], at: usize, from: usize) -> Option<usize> {
    let error_name = |k: usize| {
        b.get(k + 1..)
            .is_some_and(|r| r.starts_with(b"rror") || r.starts_with(b"xception"))
    };
    let mut i = from.max(at);
    loop {
        let k = i + find_reference_mark(b.get(i..)?)?;
        let holds = if b.get(k) == Some(&b'E') {
            i = k + 1;
            error_name(k)
        } else {
            // A separator: the rest of its run holds what a match needs
            // (`://`, a `.` after a separator, an error name) or nothing
            // of the run is searched again.
            let mut holds = k > 0 && b.get(k - 1) == Some(&b':');
            let mut j = k + 1;
            while let Some(&c) = b.get(j) {
                if holds || ascii_space(c) {
                    break;
                }
                holds = match c {
                    b'.' => true,
                    b'/' => b.get(j - 1) == Some(&b':'),
                    b'E' => error_name(j),
                    _ => false,
                };
                j += 1;
            }
            i = j;
            holds
        };
        if holds {
            let run = b
                .get(at..k)
                .and_then(|r| r.iter().rposition(|c| ascii_space(*c)))
                .map_or(at, |p| at + p + 1);
            return Some(run);
        }
    }
}

/// The first `/`, `\\` or `E` of `b` (as `memchr3` finds it), a byte at a
/// time when `b` is short (a line's rest: a search call costs more).
#[inline]
fn find_reference_mark(b: &[u8]) -> Option<usize> {
    if b.len() <= 32 {
        b.iter().position(|&c| matches!(c, b'/' | b'\\' | b'E'))
    } else {
        memchr::memchr3(b'/', b'\\', b'E', b)
    }
}

/// [`references`] of the lines `lines` joined by line breaks, without
/// joining them: no reference spans a line break (each alternative of
/// `REF` stops at white space), and a line without a slash, a backslash,
/// `Error` or `Exception` holds none (a URL has `://`, a path a separator,
/// an error name its suffix), so it is not searched.
pub fn references_in_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    if max == 0 {
        return out;
    }
    for l in lines {
        if push_references(l, max, &mut out) {
            break;
        }
    }
    out
}

/// [`references_in_lines`] of the bodies of `lines` but those whose
/// indices `shown` holds (in increasing order), found from `text`, the text
/// [`split_numbered`](super::split_numbered) cut `lines` from: a line without a `/`, a `\` or an
/// `E` holds no reference (the bytes `reference_search_start` (tests) looks for),
/// so the search goes from one such byte of `text` to the next, and only
/// the lines it lands in (not shown) are searched, each once. Lines that
/// are not slices of `text` in increasing order are searched one by one.
pub fn references_outside<'a>(
    text: &str,
    lines: &[Line<'a>],
    shown: &[usize],
    max: usize,
) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    if max == 0 {
        return out;
    }
    let base = text.as_ptr() as usize;
    // Where each line's body starts in `text`, and where it ends.
    let span = |l: &Line<'_>| {
        let start = (l.body.as_ptr() as usize).checked_sub(base)?;
        let end = start + l.body.len();
        (end <= text.len()).then_some((start, end))
    };
    let mut last_end = 0;
    let in_order = lines.iter().all(|l| match span(l) {
        Some((start, end)) if start >= last_end => {
            last_end = end;
            true
        }
        _ => false,
    });
    if !in_order {
        let mut shown = shown.iter().copied().peekable();
        let rest = lines
            .iter()
            .enumerate()
            .filter(move |(i, _)| {
                while shown.next_if(|s| s < i).is_some() {}
                shown.next_if_eq(i).is_none()
            })
            .map(|(_, l)| l.body);
        return references_in_lines(rest, max);
    }
    let b = text.as_bytes();
    let mut shown = shown.iter().copied().peekable();
    let (mut at, mut i) = (0usize, 0usize);
    while let Some(hit) = b
        .get(at..)
        .and_then(|r| memchr::memchr3(b'/', b'\\', b'E', r))
        .map(|k| at + k)
    {
        // The line whose body ends after the hit.
        while lines
            .get(i)
            .and_then(span)
            .is_some_and(|(_, end)| end <= hit)
        {
            i += 1;
        }
        let Some((l, (start, end))) = lines.get(i).and_then(|l| Some((l, span(l)?))) else {
            break;
        };
        if hit < start {
            // Between bodies (a line break, a number prefix).
            at = hit + 1;
            continue;
        }
        at = end;
        while shown.next_if(|s| *s < i).is_some() {}
        if shown.next_if_eq(&i).is_some() {
            continue;
        }
        // No mark before the hit in this body: the search starts there.
        if push_references_from(l.body, hit - start, max, &mut out) {
            break;
        }
    }
    out
}

/// Add the references of `text` to `out` (see [`references`]); true once
/// `out` holds `max`. The matches of [`REF`] in order, each searched from
/// [`reference_search_start_from`] (the regex runs only where a match can
/// be).
fn push_references<'a>(text: &'a str, max: usize, out: &mut Vec<&'a str>) -> bool {
    push_references_from(text, 0, max, out)
}

/// [`push_references`] of `text`, given `first`: no byte of `text` before
/// it is a `/`, a `\\` or an `E` (the first search starts there).
fn push_references_from<'a>(
    text: &'a str,
    first: usize,
    max: usize,
    out: &mut Vec<&'a str>,
) -> bool {
    let mut at = 0;
    while let Some(start) = reference_search_start_from(text.as_bytes(), at, first) {
        let Some(m) = REF.find_at(text, start) else {
            break;
        };
        at = m.end();
        let s = m.as_str().trim_end_matches(['.', ',', ':', ';']);
        if s.len() < 4 || s.len() > 200 || out.contains(&s) {
            continue;
        }
        out.push(s);
        if out.len() >= max {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests;
