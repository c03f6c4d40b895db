//! The regexes of the first entity extraction, kept for the tests'
//! reference implementation the hand matchers are held to: proper nouns
//! and codes.

use regex::Regex;
use std::sync::LazyLock;

use super::re;

pub(super) static PROPER: LazyLock<Regex> = LazyLock::new(|| re(r"\b[A-Z][a-z]{2,}\b"));
pub(super) static CODE: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b[A-Z][A-Z0-9]*[0-9][A-Z0-9]*\b|\b[A-Z]{2,5}\b"));
