//! The reference implementation [`super::push_clip_one_line`] is held to
//! (tests only).

/// `s` on one line: its words joined by single spaces (the reference of
/// [`super::push_clip_one_line`]).
pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
