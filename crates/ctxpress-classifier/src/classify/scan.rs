//! The shared scan every detector reads: the mask pass, the line
//! statistics, special characters net of Markdown formatting, the line
//! gates, and the word count of the T2/T3 split.

use crate::masks;
use crate::masks::Masks;

use super::lines::{LineState, LineStats};
use super::numbers::digit_runs;
use super::paths::path_at;
use super::present::{P_SLASH, P_STAR, Present};
use super::sql::{SqlKeywords, sql_keywords};
use super::tokens::long_token_runs_into;

thread_local! {
    /// Reused class masks and lower-cased copy.
    pub(super) static MASKS: std::cell::RefCell<Masks> = std::cell::RefCell::new(Masks::default());
    /// The buffers of the last text's [`Scan`] and keywords, for the next
    /// text (a `Vec` per text was an allocation and a free each).
    pub(super) static SPARE: std::cell::RefCell<Spare> = std::cell::RefCell::new(Spare::default());
}

/// Buffers handed from one classification to the next (their contents are
/// stale: each user clears its own).
#[derive(Default)]
pub(super) struct Spare {
    pub(super) spans: [Vec<(usize, usize)>; GATES],
    pub(super) long_runs: Vec<(usize, usize)>,
    pub(super) statements: Vec<usize>,
}

/// Line gates: which lines a single-line pattern must look at.
#[derive(Clone, Copy)]
pub(super) enum Gate {
    /// A 3-digit group, a separator and a digit, or `+` and a digit: phones.
    Phone,
    /// `v1.2` or `1.2.3`: version numbers, IPs and semvers.
    DotNum,
}

const GATES: usize = 2;

/// What the scan learned about a text.
pub(super) struct Scan {
    pub(super) chars: usize,
    pub(super) special: usize,
    pub(super) lines: LineStats,
    /// Per gate: byte ranges of consecutive lines that passed it.
    pub(super) spans: [Vec<(usize, usize)>; GATES],
    /// A number with a unit (`numeric_with_units`).
    pub(super) units: bool,
    /// A file path (`file_path`).
    pub(super) path: bool,
    /// The text is all ASCII.
    pub(super) ascii: bool,
    /// Maximal runs of 20+ token bytes (`[A-Za-z0-9_.-]`): where secrets and
    /// hashes can be.
    pub(super) long_runs: Vec<(usize, usize)>,
    /// Upper-case SQL keywords.
    pub(super) sql: SqlKeywords,
    /// Which anchor bytes occur.
    pub(super) present: Present,
}

impl Scan {
    /// True when `f` holds for one of the line runs of `gate`.
    pub(super) fn any(&self, gate: Gate, text: &str, f: impl Fn(&str) -> bool) -> bool {
        self.spans[gate as usize]
            .iter()
            .any(|&(a, b)| text.get(a..b).is_some_and(&f))
    }
}

/// Records the line around byte `p` for `gate` (positions arrive in order).
pub(super) fn mark_line(spans: &mut Vec<(usize, usize)>, b: &[u8], p: usize) {
    if spans.last().is_some_and(|l| p < l.1) {
        return;
    }
    let start = memchr::memrchr(b'\n', b.get(..p).unwrap_or(&[])).map_or(0, |q| q + 1);
    let end = memchr::memchr(b'\n', b.get(p..).unwrap_or(&[])).map_or(b.len(), |q| p + q);
    match spans.last_mut() {
        Some(last) if last.1 + 1 == start => last.1 = end,
        _ => spans.push((start, end)),
    }
}

/// Line statistics, special characters net of Markdown formatting, and the
/// lines each gate passes (filling `m` for the text on the way).
#[cfg(test)]
pub(super) fn scan_with(text: &str, m: &mut Masks) -> Scan {
    scan_reusing(text, m, Spare::default())
}

/// [`scan_with`], with buffers for the [`Scan`] (see [`Spare`]).
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
