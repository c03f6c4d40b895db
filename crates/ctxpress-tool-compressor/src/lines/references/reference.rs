//! Reference implementations for the tests of the reference search:
//! [`reference_search_start`], the search for where a reference may start,
//! without a hint.

use super::*;

/// Where to search for the next match of [`REF`] at or after `at` of `b`:
/// the start of the white-space-free run that holds the first of what
/// every match holds, or `None` when `b` holds none after `at` (then no
/// match starts there). A match holds no white space, and a URL holds
/// `://`, a path a separator with a `.` after it, an error name `Error`
/// or `Exception`; so the first match starting at or after `at` starts in
/// or after that run. (The search itself is
/// [`reference_search_start_from`]; this is its form without a hint, which
/// the tests use.)
pub(super) fn reference_search_start(b: &[u8], at: usize) -> Option<usize> {
    reference_search_start_from(b, at, at)
}
