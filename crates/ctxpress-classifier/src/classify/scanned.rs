//! What the shared scan learned about a text ([`Scan`]), the line gates
//! the detectors read it through, and the buffers handed from one text to
//! the next: written by [`super::scan`] and its helpers, read by the detectors.

use super::lines::LineStats;
use super::present::Present;
use super::sql::SqlKeywords;

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

pub(super) const GATES: usize = 2;

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
