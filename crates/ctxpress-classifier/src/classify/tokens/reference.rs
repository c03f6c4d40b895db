//! The plain form of the token-run search the tests call:
//! [`long_token_runs`], into a new vector.

use super::long_token_runs_into;

/// Maximal runs of 20+ token bytes, from the token mask.
pub(in crate::classify) fn long_token_runs(tok: &[u64]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    long_token_runs_into(tok, &mut out);
    out
}
