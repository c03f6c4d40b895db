//! Line-number prefixes: the `12→`, `  7\t`, `3:` or `4|` a read tool puts
//! before each line of a file, the split of a read's text into numbered
//! [`Line`]s ([`split_numbered`]), and the byte-level white-space trims the
//! other line helpers use.

use super::re;
use regex::Regex;
use std::sync::LazyLock;

/// One line of a file as a read returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// The line number the tool printed, when it numbered its lines.
    pub number: Option<u64>,
    /// The line without its number prefix.
    pub body: &'a str,
}

static NUMBERED: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(\d{1,7})(?:\t|→|:|\|)"));

/// True for the bytes [`char::is_whitespace`] is true for among ASCII.
pub(super) fn ascii_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The line number of a [`NUMBERED`] prefix of `l` (`None` when its digits
/// are not ASCII ones `u64` parses) and the end of the prefix: what
/// [`NUMBERED`] finds, the digits parsed. `ws` is the count of ASCII white
/// space bytes `l` starts with. Plain ASCII is read byte by byte; a
/// non-ASCII character where it matters (leading white space, after the
/// digits) goes the long way.
fn number_prefix_after(l: &str, ws: usize) -> Option<(Option<u64>, usize)> {
    let b = l.as_bytes();
    let mut n = 0usize;
    let mut value = 0u64;
    while n < 8 {
        match b.get(ws + n) {
            Some(c) if c.is_ascii_digit() => {
                value = value * 10 + u64::from(c - b'0');
                n += 1;
            }
            _ => break,
        }
    }
    let next = b.get(ws + n).copied();
    if b.get(ws).is_some_and(|c| !c.is_ascii()) || next.is_some_and(|c| !c.is_ascii()) {
        return number_prefix_slow(l);
    }
    if n == 0 || n > 7 {
        return None;
    }
    match next? {
        b'\t' | b':' | b'|' => Some((Some(value), ws + n + 1)),
        _ => None,
    }
}

/// [`number_prefix_after`] for any text: Unicode white space, `→`, non-ASCII
/// digits (through the regex).
fn number_prefix_slow(l: &str) -> Option<(Option<u64>, usize)> {
    let t = l.trim_start();
    let ws = l.len() - t.len();
    let b = t.as_bytes();
    let n = b.iter().take(8).take_while(|c| c.is_ascii_digit()).count();
    let next = t.get(n..).and_then(|r| r.chars().next());
    if next.is_some_and(|c| !c.is_ascii() && c.is_numeric()) {
        let c = NUMBERED.captures(l)?;
        return Some((c.get(1)?.as_str().parse().ok(), c.get(0)?.end()));
    }
    if n == 0 || n > 7 {
        return None;
    }
    let sep = match next? {
        '\t' | ':' | '|' => 1,
        '→' => '→'.len_utf8(),
        _ => return None,
    };
    Some((t.get(..n)?.parse().ok(), ws + n + sep))
}

/// The count of ASCII white space bytes `b` starts with
/// (`b.iter().take_while(|c| ascii_space(**c)).count()`), eight spaces at
/// a time over an indentation of spaces.
pub(super) fn leading_space(b: &[u8]) -> usize {
    const SPACES: u64 = u64::from_ne_bytes(*b"        ");
    let mut n = 0;
    while let Some(chunk) = b.get(n..n + 8).and_then(|c| <[u8; 8]>::try_from(c).ok()) {
        if u64::from_ne_bytes(chunk) != SPACES {
            break;
        }
        n += 8;
    }
    n + b
        .get(n..)
        .map_or(0, |r| r.iter().take_while(|c| ascii_space(**c)).count())
}

/// `s.trim()`, reading ASCII ends byte by byte.
pub(crate) fn trim(s: &str) -> &str {
    trim_after(s, leading_space(s.as_bytes()))
}

/// [`trim`] of `s`, given `start`: the count of ASCII white space bytes
/// `s` starts with ([`leading_space`]).
pub(super) fn trim_after(s: &str, start: usize) -> &str {
    let b = s.as_bytes();
    let end = b.len() - b.iter().rev().take_while(|c| ascii_space(**c)).count();
    if start >= end {
        // Every byte is ASCII white space.
        return "";
    }
    match (b.get(start), b.get(end - 1)) {
        (Some(a), Some(z)) if a.is_ascii() && z.is_ascii() => s.get(start..end).unwrap_or(""),
        _ => s.trim(),
    }
}

/// True when `s` is empty or white space only (`s.trim().is_empty()`).
pub(crate) fn is_blank(s: &str) -> bool {
    match s.bytes().find(|c| !ascii_space(*c)) {
        None => true,
        Some(c) if c.is_ascii() => false,
        Some(_) => s.trim().is_empty(),
    }
}

/// Split a read's text into lines, removing line-number prefixes (`12\t`,
/// `    12→`, `12:`) when at least four in five non-empty lines carry one with
/// increasing numbers (Claude Code, OpenHands, `cat -n`, SWE-agent).
///
/// Each line is pushed as it is if the text is numbered (prefix cut, number
/// kept): a numbered text, and a text none of whose lines has a prefix (a
/// line without one has no number either way), take one pass; only a text
/// with prefixes that is not numbered has its lines put back as they were.
pub fn split_numbered(text: &str) -> Vec<Line<'_>> {
    let mut lines: Vec<Line<'_>> = Vec::with_capacity(text.len() / 32 + 1);
    // Whether a line had a prefix.
    let mut prefixed = false;
    let mut hits = 0usize;
    let mut nonempty = 0usize;
    let mut last: Option<u64> = None;
    for l in ctxpress_text::lines::lines(text) {
        // The leading white space, counted once for `is_blank` and the
        // number prefix.
        let ws = leading_space(l.as_bytes());
        let blank = match l.as_bytes().get(ws) {
            None => true,
            Some(c) if c.is_ascii() => false,
            Some(_) => l.trim().is_empty(),
        };
        let mut line = Line {
            number: None,
            body: l,
        };
        if !blank {
            nonempty += 1;
            if let Some((number, end)) = number_prefix_after(l, ws) {
                if let Some(n) = number
                    && last.is_none_or(|p| n > p)
                {
                    hits += 1;
                    last = Some(n);
                }
                prefixed = true;
                line = Line {
                    number,
                    body: l.get(end..).unwrap_or(""),
                };
            }
        }
        lines.push(line);
    }
    let numbered = nonempty > 0 && hits * 5 >= nonempty * 4;
    if prefixed && !numbered {
        for (line, l) in lines.iter_mut().zip(ctxpress_text::lines::lines(text)) {
            *line = Line {
                number: None,
                body: l,
            };
        }
    }
    lines
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests;
