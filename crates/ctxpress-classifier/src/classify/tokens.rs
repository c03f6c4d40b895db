//! Long token runs (20 or more token bytes, from the token mask): the only
//! places an API key or a hash can be.

use crate::masks;

use super::scanned::Scan;

/// Long token runs: the only places secrets and hashes can be.
pub(super) struct TokenRuns {
    pub(super) secret: bool,
    pub(super) hash: bool,
}

impl TokenRuns {
    pub(super) fn find(text: &str, s: &Scan) -> TokenRuns {
        let mut r = TokenRuns {
            secret: false,
            hash: false,
        };
        for &(a, e) in &s.long_runs {
            let Some(run) = text.get(a..e) else {
                continue;
            };
            r.secret = r.secret || ctxpress_text::secrets::run_has_secret(run);
            r.hash = r.hash || (e - a >= 40 && is_hash(run));
            if r.secret && r.hash {
                break;
            }
        }
        r
    }
}

/// A word of 40 to 64 hex digits with at least one digit and one letter
/// (inside a token run, words end at `.` and `-`).
fn is_hash(run: &str) -> bool {
    run.split(['.', '-']).any(|w| {
        (40..=64).contains(&w.len())
            && w.bytes().all(|c| c.is_ascii_hexdigit())
            && w.bytes().any(|c| c.is_ascii_digit())
            && w.bytes().any(|c| c.is_ascii_alphabetic())
    })
}

/// Bit `i` set when bits `i..i + 20` of `lo` (continued by `hi`) are all set.
fn runs_of_20(lo: u64, hi: u64) -> u64 {
    let v = u128::from(lo) | (u128::from(hi) << 64);
    let a = v & (v >> 1);
    let b = a & (a >> 2);
    let c = b & (b >> 4);
    let d = c & (c >> 8);
    (d & (d >> 4)) as u64
}

/// `long_token_runs` (tests) into `out` (cleared first; a reused buffer).
pub(super) fn long_token_runs_into(tok: &[u64], out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut from = 0usize;
    let mut w = 0usize;
    while let Some(&x) = tok.get(w) {
        let lo = x & (u64::MAX << (from.saturating_sub(w * 64) & 63));
        let long = runs_of_20(lo, tok.get(w + 1).copied().unwrap_or(0));
        if long == 0 {
            w += 1;
            continue;
        }
        let p = w * 64 + long.trailing_zeros() as usize;
        let (start, end) = (masks::run_start(tok, p), masks::run_end(tok, p));
        out.push((start, end));
        from = end;
        w = end / 64;
    }
}

#[cfg(test)]
mod reference;
#[cfg(test)]
pub(super) use reference::long_token_runs;
