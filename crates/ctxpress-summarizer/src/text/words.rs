//! The word patterns of scoring and entities in one pass over the bytes.
//!
//! camelCase, PascalCase and snake_case identifiers, vowelless
//! abbreviations and status words are all patterns bounded by ASCII word
//! boundaries (`\b` between `[A-Za-z0-9_]` and anything else) on both sides
//! and made of word bytes only, so each of their matches is a whole ASCII
//! word: a maximal run of `[A-Za-z0-9_]`. Classifying every such word once
//! gives the matches of all five patterns, in order, without running them.

/// camelCase: `\b[a-z][a-z0-9]*[A-Z][a-zA-Z0-9]*\b`.
pub(crate) const CAMEL: u8 = 1;
/// PascalCase: `\b[A-Z][a-z0-9]+[A-Z][a-zA-Z0-9]*\b`.
pub(crate) const PASCAL: u8 = 2;
/// snake_case: `\b[a-zA-Z][a-zA-Z0-9]*(?:_[a-zA-Z0-9]+)+\b`.
pub(crate) const SNAKE: u8 = 4;
/// Vowelless: `\b[bcdfghjklmnpqrstvwxzBCDFGHJKLMNPQRSTVWXZ]{3,}\b`.
pub(crate) const VOWELLESS: u8 = 8;
/// Status word: `\b(?:PASS(?:ED)?|FAIL(?:ED|URE)?|ERROR|WARN(?:ING)?)\b`.
pub(crate) const STATUS: u8 = 16;
/// An upper-case code: `\b[A-Z][A-Z0-9]*[0-9][A-Z0-9]*\b|\b[A-Z]{2,5}\b`.
pub(crate) const CODE: u8 = 32;
/// A capitalized word: `\b[A-Z][a-z]{2,}\b`.
pub(crate) const PROPER: u8 = 64;
/// An identifier of any of the three kinds.
pub(crate) const IDENT: u8 = CAMEL | PASCAL | SNAKE;

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_consonant(b: u8) -> bool {
    b.is_ascii_alphabetic()
        && !matches!(
            b.to_ascii_lowercase(),
            b'a' | b'e' | b'i' | b'o' | b'u' | b'y'
        )
}

/// The patterns (bits above) a whole ASCII word matches.
pub(crate) fn kinds(w: &[u8]) -> u8 {
    let Some((&first, rest)) = w.split_first() else {
        return 0;
    };
    if w.contains(&b'_') {
        let snake = first.is_ascii_alphabetic()
            && w.last() != Some(&b'_')
            && !w.windows(2).any(|p| p == b"__");
        return if snake { SNAKE } else { 0 };
    }
    let mut k = 0;
    if first.is_ascii_lowercase() && rest.iter().any(u8::is_ascii_uppercase) {
        k |= CAMEL;
    }
    if first.is_ascii_uppercase() {
        if rest.first().is_some_and(|b| !b.is_ascii_uppercase())
            && rest
                .get(1..)
                .unwrap_or(&[])
                .iter()
                .any(u8::is_ascii_uppercase)
        {
            k |= PASCAL;
        }
        let no_lower = !rest.iter().any(u8::is_ascii_lowercase);
        if no_lower && ((2..=5).contains(&w.len()) || rest.iter().any(u8::is_ascii_digit)) {
            k |= CODE;
        }
        if w.len() >= 3 && rest.iter().all(u8::is_ascii_lowercase) {
            k |= PROPER;
        }
    }
    if w.len() >= 3 && w.iter().all(|&b| is_consonant(b)) {
        k |= VOWELLESS;
    }
    if matches!(
        w,
        b"PASS" | b"PASSED" | b"FAIL" | b"FAILED" | b"FAILURE" | b"ERROR" | b"WARN" | b"WARNING"
    ) {
        k |= STATUS;
    }
    k
}

/// Every ASCII word of `text` that matches one of the patterns, in order:
/// `f(start, end, kinds)`.
pub(crate) fn for_each_word(text: &str, mut f: impl FnMut(usize, usize, u8)) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !b.get(i).copied().is_some_and(is_word_byte) {
            i += 1;
            continue;
        }
        let start = i;
        while b.get(i).copied().is_some_and(is_word_byte) {
            i += 1;
        }
        let k = kinds(b.get(start..i).unwrap_or(&[]));
        if k != 0 {
            f(start, i, k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_text::entities as rec;
    use std::ops::Range;

    fn by_scan(text: &str, bit: u8) -> Vec<Range<usize>> {
        let mut v = Vec::new();
        for_each_word(text, |s, e, k| {
            if k & bit != 0 {
                v.push(s..e);
            }
        });
        v
    }

    /// The spans each pattern's regex finds, bit by bit.
    fn by_regex(text: &str) -> Vec<Vec<Range<usize>>> {
        let re = |r: &regex::Regex| r.find_iter(text).map(|m| m.range()).collect::<Vec<_>>();
        vec![
            rec::camel_case(text).collect(),
            rec::pascal_case(text).collect(),
            rec::snake_case(text).collect(),
            re(&super::super::scoring::VOWELLESS),
            re(&super::super::scoring::STATUS),
            re(&regex_of(
                r"\b[A-Z][A-Z0-9]*[0-9][A-Z0-9]*\b|\b[A-Z]{2,5}\b",
            )),
            re(&regex_of(r"\b[A-Z][a-z]{2,}\b")),
        ]
    }

    fn regex_of(p: &str) -> regex::Regex {
        ctxpress_text::ascii_regex(p)
    }

    fn check(text: &str) {
        let got: Vec<Vec<Range<usize>>> = [CAMEL, PASCAL, SNAKE, VOWELLESS, STATUS, CODE, PROPER]
            .iter()
            .map(|&b| by_scan(text, b))
            .collect();
        assert_eq!(got, by_regex(text), "{text:?}");
    }

    #[test]
    fn scan_equals_the_patterns() {
        for t in [
            "",
            "fetchUser WebSocket my_var MAX_SIZE npm ssh PASS FAILED FAILURE ERRORS WARN",
            "a_ _a a__b a_b_ a1_b2 1_a Ab AbC ABc aB a1B xYz fooBar_baz",
            "éfooBar fooBaré npm\u{e9} PASS_ PASSé WARNING WARNINGS TSX BCD bcdy",
            "x.fooBar/baz-QuxQux:npm,ssh;PASS!FAIL?",
            "A1 AB ABCDE ABCDEF A1B2C3 1AB AB_ Abc Ab Abcd AbcD Éabc Abcé HTTP2 X",
        ] {
            check(t);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        #[test]
        fn scan_equals_the_patterns_on_any_text(
            t in "([a-zA-Z0-9_ .é\u{212a}\u{17f}/-]|[A-Z]{1,6}|[A-Z][a-z]{1,4}|PASS|FAIL|ERROR|WARN|ED|ING|URE|npm|_){0,40}"
        ) {
            check(&t);
        }

        #[test]
        fn scan_equals_the_patterns_on_any_string(t in "\\PC{0,40}") {
            check(&t);
        }
    }
}
