//! The shared scan every detector reads: the mask pass, the line
//! statistics, special characters net of Markdown formatting, the line
//! gates, and the word count of the T2/T3 split.

use crate::masks;
use crate::masks::Masks;

use super::lines::{LineState, LineStats};
use super::numbers::digit_runs;
use super::paths::path_at;
use super::present::{P_SLASH, P_STAR, Present};
use super::scanned::{Scan, Spare};
use super::sql::{SqlKeywords, sql_keywords};
use super::tokens::long_token_runs_into;

thread_local! {
    /// Reused class masks and lower-cased copy.
    pub(super) static MASKS: std::cell::RefCell<Masks> = std::cell::RefCell::new(Masks::default());
    /// The buffers of the last text's [`Scan`] and keywords, for the next
    /// text (a `Vec` per text was an allocation and a free each).
    pub(super) static SPARE: std::cell::RefCell<Spare> = std::cell::RefCell::new(Spare::default());
}

/// `scan_with` (tests), with buffers for the [`Scan`] (see [`Spare`]).
pub(super) fn scan_reusing(text: &str, m: &mut Masks, spare: Spare) -> Scan {
    let Spare {
        mut spans,
        mut long_runs,
        ..
    } = spare;
    for v in &mut spans {
        v.clear();
    }
    let b = text.as_bytes();
    m.fill(b);
    let cont = m.cont_count;
    // every non-ASCII character of valid UTF-8 has a continuation byte
    let ascii = cont == 0;
    let mut s = Scan {
        chars: b.len() - cont,
        special: m.special,
        lines: LineStats::default(),
        spans,
        units: false,
        path: false,
        ascii,
        long_runs: Vec::new(),
        sql: SqlKeywords::default(),
        present: Present::of(b),
    };
    let stars = if s.present.may(P_STAR) {
        markdown_stars(b)
    } else {
        0
    };
    let markdown = line_pass(text, m, &mut s.lines, ascii) + stars;
    s.special -= markdown.min(s.special);
    digit_runs(b, m, &mut s);
    s.path = s.present.may(P_SLASH)
        && memchr::memchr_iter(b'/', b)
            .any(|p| masks::bit(m.tok(), p + 1) && path_at(b, m.tok(), p));
    long_token_runs_into(m.tok(), &mut long_runs);
    s.long_runs = long_runs;
    s.sql = sql_keywords(b, m.upper());
    s
}

/// Runs the line statistics over every line; returns the Markdown heading and
/// bullet marks found (special characters that are formatting).
fn line_pass(text: &str, m: &mut Masks, stats: &mut LineStats, ascii: bool) -> usize {
    let mut markdown = 0usize;
    // a YAML run needs 3 lines and verse 4: shorter texts skip those checks
    let lines = 1 + m.nl_count;
    stats.yaml_possible = lines >= 3;
    stats.verse_possible = lines >= 4;
    let mut ls = LineState::default();
    let mut start = 0usize;
    let mut ends = std::mem::take(&mut m.line_ends);
    masks::positions(m.nl(), &mut ends);
    ends.push(text.len());
    for &end in &ends {
        let cont = if ascii {
            0
        } else {
            masks::count_in(m.cont(), start, end)
        };
        markdown += ls.line(stats, text, (start, end), cont, m.tok());
        start = end + 1;
    }
    m.line_ends = ends;
    markdown
}

/// `**` emphasis pairs and `* ` bullets: special characters that are formatting.
fn markdown_stars(b: &[u8]) -> usize {
    let mut markdown = 0usize;
    let mut k = 0;
    while let Some(p) = b.get(k..).and_then(|r| memchr::memchr(b'*', r)) {
        let at = k + p;
        let run = b
            .get(at..)
            .map_or(0, |r| r.iter().take_while(|&&c| c == b'*').count());
        markdown += 2 * (run / 2);
        if run == 1 && b.get(at + 1) == Some(&b' ') && starts_line(b, at) {
            markdown += 1;
        }
        k = at + run.max(1);
    }
    markdown
}

/// True when only ASCII whitespace precedes byte `p` on its line.
fn starts_line(b: &[u8], p: usize) -> bool {
    b.get(..p)
        .unwrap_or(&[])
        .iter()
        .rev()
        .find(|c| !(c.is_ascii_whitespace() && **c != b'\n'))
        .is_none_or(|&c| c == b'\n')
}

/// Words for the T2/T3 split, counted up to `limit`: runs of non-whitespace,
/// where each CJK ideograph or kana counts as one word.
pub(super) fn count_words(text: &str, limit: usize) -> usize {
    if text.is_ascii() {
        return masks::ascii_words(text.as_bytes(), limit);
    }
    let mut words = 0;
    let mut in_word = false;
    for &c in text.as_bytes() {
        if c.is_ascii_whitespace() {
            in_word = false;
        } else if c & 0xC0 == 0x80 {
            // continuation byte: the state of its lead byte holds
        } else if (0xE3..=0xE9).contains(&c) {
            // U+3000..U+9FFF: kana and CJK ideographs, written without spaces.
            words += 1;
            in_word = false;
        } else {
            words += usize::from(!in_word);
            in_word = true;
        }
        if words >= limit {
            break;
        }
    }
    words
}

#[cfg(test)]
mod reference;
#[cfg(test)]
pub(super) use reference::scan_with;
