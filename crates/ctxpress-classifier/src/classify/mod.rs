//! Text classification: tier plus hard and soft T0 reasons (spec 001).
//!
//! The work is arranged so that each byte is looked at by few, cheap passes:
//!
//! - `scan_with` (tests, `scan/reference.rs`): one SIMD pass over 64-byte blocks ([`crate::masks`])
//!   builds bit masks of digits, token bytes, capitals, newlines,
//!   continuation bytes and the bytes worth a look after a number, counts
//!   special characters, and makes the lower-cased copy. Lines (from the
//!   newline mask) feed the line statistics: length moments, indented code,
//!   key-value runs, verse, frame-like lines. Digit runs followed by a
//!   `num_next` byte are where numbers with units, phones, versions and IPs
//!   can be; runs of 20+ token bytes (shift-and over the mask) are where
//!   secrets and hashes can be; slashes are where paths can be; runs of
//!   three or more capitals are where upper-case SQL keywords can be.
//! - Patterns with a literal anchor (URLs, quoted keys, quotations, fences,
//!   LaTeX, SQL statement words, legal terms, traceback headers) are found
//!   through that literal (`memchr`, `memmem`, one `aho-corasick` Teddy pass
//!   over the lower-cased copy) and checked by hand or by an anchored regex
//!   there.
//! - The remaining regexes (phone, version, IP, email, legal term, traceback)
//!   run only over the lines or texts their gate lets through.
//!
//! A gate only ever skips text in which its pattern cannot match, and the hand
//! matchers implement the same patterns, so the result equals running every
//! pattern over the whole text: `crate::reference` (test-only) is that
//! straightforward implementation, and tests check both agree on the whole
//! corpus and on random texts. Every step is linear in the text.
//!
//! The modules, around the shared scan:
//!
//! - the scan: [`scan`] (masks, line pass, gates, word count), [`scanned`]
//!   (what it found: [`scanned::Scan`], which `numbers` and `tokens` fill
//!   in), [`present`] (anchor bytes of short texts), [`lines`] (line
//!   statistics, indented code, key-value runs), [`numbers`] (digit runs
//!   and units),
//!   [`tokens`] (long token runs), [`keywords`] (the lower-case keyword
//!   pass);
//! - the hard-reason detectors: [`fences`] (prose around code fences; the
//!   fence rule is [`ctxpress_text::fence`]'s), [`json`], [`math`],
//!   [`sql`], [`verse`], [`traceback`];
//! - the soft reasons: [`soft`], with [`paths`] (the `file_path` pattern).

mod fences;
pub(crate) mod json;
mod keywords;
pub(crate) mod lines;
pub(crate) mod math;
mod numbers;
mod paths;
mod present;
mod scan;
mod scanned;
pub(crate) mod soft;
pub(crate) mod sql;
#[cfg(test)]
mod tests;
mod tokens;
pub(crate) mod traceback;
pub(crate) mod verse;

pub use self::fences::prose_chars;
pub use self::json::is_valid_json;

use ctxpress_core::Classification;
use ctxpress_core::Reason;
use ctxpress_core::Tier;
use ctxpress_text::has_code_fence;
use regex::Regex;

use self::json::is_json_structure;
use self::keywords::LowerWords;
use self::math::{has_latex, has_unicode_math};
use self::present::{P_E2, P_FENCE, P_MATH};
use self::scan::{MASKS, SPARE, count_words, scan_reusing};
use self::scanned::Spare;
use self::soft::soft_reasons;
use self::sql::is_sql;
use self::tokens::TokenRuns;
use self::traceback::has_traceback;

/// Prose with fewer words than this is T2, otherwise T3.
pub const T3_MIN_WORDS: usize = 20;

/// Special-character ratio above which text is `high_special_char_ratio`.
const SPECIAL_RATIO: f64 = 0.15;
/// Coefficient of variation above which line lengths are `high_line_length_variance`.
const LINE_CV: f64 = 1.2;

pub(crate) fn re(p: &str) -> Regex {
    // Patterns are constants: a failure is a programming error every test hits.
    Regex::new(p).expect("classifier pattern compiles")
}

/// Classify one text: its tier and the hard and soft T0 reasons it carries.
pub fn classify(text: &str) -> Classification {
    let mut hard = Vec::new();
    let mut soft = Vec::new();
    let b = text.as_bytes();
    let mut spare = SPARE.take();
    let statements = std::mem::take(&mut spare.statements);
    let (s, words) = MASKS.with_borrow_mut(|m| {
        let s = scan_reusing(text, m, spare);
        (s, LowerWords::find_in(b, m.lower(), statements))
    });
    let runs = TokenRuns::find(text, &s);

    let present = s.present;
    if present.may(P_FENCE) && memchr::memchr2(b'`', b'~', b).is_some() && has_code_fence(text) {
        hard.push(Reason::CodeFence);
    }
    if s.lines.indented_code {
        hard.push(Reason::IndentedCode);
    }
    if is_json_structure(text) {
        hard.push(Reason::JsonStructure);
    }
    if s.lines.yaml {
        hard.push(Reason::YamlStructure);
    }
    if s.chars > 0 && s.special as f64 / s.chars as f64 > SPECIAL_RATIO {
        hard.push(Reason::HighSpecialCharRatio);
    }
    if s.lines.high_variance() {
        hard.push(Reason::HighLineLengthVariance);
    }
    if runs.secret {
        hard.push(Reason::ApiKey);
    }
    // both start by searching their anchor bytes (`$` `\`, 0xE2): no separate check first
    if present.may(P_MATH) && has_latex(text) {
        hard.push(Reason::LatexMath);
    }
    if !s.ascii && present.may(P_E2) && has_unicode_math(text) {
        hard.push(Reason::UnicodeMath);
    }
    if is_sql(text, &words, &s.sql) {
        hard.push(Reason::SqlContent);
    }
    if s.lines.verse {
        hard.push(Reason::VersePattern);
    }
    if has_traceback(text, s.lines.frame_like, words.trace) {
        hard.push(Reason::ErrorTraceback);
    }
    soft_reasons(text, &s, &runs, &words, &mut soft);
    // the buffers go to the next text
    SPARE.set(Spare {
        spans: s.spans,
        long_runs: s.long_runs,
        statements: words.statements,
    });

    hard.sort();
    soft.sort();
    let tier = if !hard.is_empty() || !soft.is_empty() {
        Tier::T0
    } else if count_words(text, T3_MIN_WORDS) < T3_MIN_WORDS {
        Tier::T2
    } else {
        Tier::T3
    };
    Classification { tier, hard, soft }
}
