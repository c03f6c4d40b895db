//! Paragraph and sentence splitting (spec 000 section 3): paragraphs at
//! blank lines, sentences at terminal punctuation followed by white space,
//! except after abbreviations, initials and list numbers.
//!
//! The split walks the bytes of the text; the first splitter, over a vector of
//! its characters, is kept in the tests as the reference it must agree with.

use regex::Regex;
use std::sync::LazyLock;

use ctxpress_text::ascii_regex as re;

/// A bullet or numbered list marker opening a line.
pub(super) static BULLET: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(?:[-*+•]|\d+[.)])\s"));

/// Words that end in a period without ending a sentence.
const ABBREVIATIONS: &[&str] = &[
    "e.g", "i.e", "etc", "vs", "cf", "al", "approx", "fig", "dr", "mr", "mrs", "ms", "prof", "sr",
    "jr", "st", "inc", "ltd", "co", "corp", "dept", "est", "ca", "pp", "vol", "eq", "incl", "esp",
    "misc", "u.s", "a.m", "p.m", "ph.d", "no", "nos", "resp", "viz", "mt", "ave",
];

/// One sentence of a text, with where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sentence<'a> {
    /// The sentence, trimmed.
    pub text: &'a str,
    /// Byte offset of the sentence in the whole text.
    pub start: usize,
    /// Index of its paragraph.
    pub paragraph: usize,
}

/// Split a text into paragraphs at blank lines. Returns (byte offset, paragraph)
/// pairs; paragraphs are trimmed and never empty.
pub fn split_paragraphs(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let blank = line.trim().is_empty();
        if blank {
            if let Some(s) = start.take() {
                push_trimmed(&mut out, text, s, end);
            }
        } else {
            if start.is_none() {
                start = Some(pos);
            }
            end = pos + line.len();
        }
        pos += line.len();
    }
    if let Some(s) = start {
        push_trimmed(&mut out, text, s, end);
    }
    out
}

fn push_trimmed<'a>(out: &mut Vec<(usize, &'a str)>, text: &'a str, s: usize, e: usize) {
    if let Some(raw) = text.get(s..e) {
        let lead = raw.len() - raw.trim_start().len();
        let t = raw.trim();
        if !t.is_empty() {
            out.push((s + lead, t));
        }
    }
}

/// True when the period at byte `dot` of `p` ends an abbreviation, an initial or
/// a list number rather than a sentence.
fn non_terminal_period(p: &str, dot: usize) -> bool {
    let before = p.get(..dot).unwrap_or("");
    let tok_start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || *c == '.')
        .last()
        .map_or(dot, |(i, _)| i);
    let token = before
        .get(tok_start..)
        .unwrap_or("")
        .trim_start_matches('.');
    if token.is_empty() {
        return false;
    }
    if is_abbreviation(token) {
        return true;
    }
    let mut chars = token.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && c.is_alphabetic()
    {
        return true;
    }
    if token.len() <= 2 && token.bytes().all(|b| b.is_ascii_digit()) {
        // "1. First item" at the start of a line is a list marker.
        let line_start = before.get(..tok_start).unwrap_or("");
        let line_prefix = line_start.rsplit('\n').next().unwrap_or("");
        return line_prefix.trim().is_empty();
    }
    false
}

/// True when `token` lower-cased is one of [`ABBREVIATIONS`]. An ASCII
/// token is compared without lower-casing a copy; any other one is
/// lower-cased (some non-ASCII letters lower-case to ASCII ones).
fn is_abbreviation(token: &str) -> bool {
    if token.is_ascii() {
        return ABBREVIATIONS.iter().any(|a| a.eq_ignore_ascii_case(token));
    }
    ABBREVIATIONS.contains(&token.to_lowercase().as_str())
}

/// True when the text after a newline starts a list item or heading.
fn starts_item(rest: &str) -> bool {
    let t = rest.trim_start_matches([' ', '\t']);
    if t.starts_with('#') || t.starts_with('|') || t.starts_with('>') {
        return true;
    }
    may_be_bullet(t) && BULLET.is_match(t)
}

/// False only when [`BULLET`] cannot match `t`: after the ASCII white space
/// its `^\s*` skips, the first character is an ASCII one that opens no
/// marker (`-`, `*`, `+`, a digit). A non-ASCII one (other white space, or
/// `•`) is left to the pattern.
fn may_be_bullet(t: &str) -> bool {
    let rest = t.trim_start_matches(['\t', '\n', '\u{b}', '\u{c}', '\r', ' ']);
    match rest.as_bytes().first() {
        None => false,
        Some(&b) if b.is_ascii() => matches!(b, b'-' | b'*' | b'+' | b'0'..=b'9'),
        Some(_) => true,
    }
}

/// Split one paragraph into sentences. A sentence ends at `.`, `!` or `?`
/// (plus closing quotes and brackets) followed by whitespace, except after an
/// abbreviation (`e.g.`), an initial or a list number; dotted identifiers,
/// paths, versions, URLs and decimals never end one since no whitespace
/// follows their dots. A line that starts a list item or heading also starts a
/// new sentence. Returns (byte offset, sentence) pairs, trimmed, non-empty.
pub fn split_sentences(p: &str) -> Vec<(usize, &str)> {
    // Byte by byte: the bytes acted on (`.`, `!`, `?`, newline) are ASCII,
    // which in UTF-8 never occur inside another character.
    let b = p.as_bytes();
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut k = 0usize;
    while let Some(&c) = b.get(k) {
        if matches!(c, b'.' | b'!' | b'?') {
            let mut e = k + 1;
            let mut next = p.get(e..).and_then(|r| r.chars().next());
            while let Some(n) = next.filter(|&n| is_closer(n)) {
                e += n.len_utf8();
                next = p.get(e..).and_then(|r| r.chars().next());
            }
            if next.is_some_and(|n| !n.is_whitespace()) {
                k = e;
                continue;
            }
            if c == b'.' && e == k + 1 && non_terminal_period(p, k) {
                k = e;
                continue;
            }
            // `e` is where the next character (white space) starts, or the end
            push_trimmed(&mut out, p, start, e);
            start = e;
            k = e;
            continue;
        }
        if c == b'\n' && starts_item(p.get(k + 1..).unwrap_or("")) {
            push_trimmed(&mut out, p, start, k);
            start = k + 1;
        }
        k += 1;
    }
    push_trimmed(&mut out, p, start, p.len());
    out
}

/// What may follow a sentence's terminal punctuation before the white
/// space that ends it.
fn is_closer(n: char) -> bool {
    matches!(
        n,
        '.' | '!' | '?' | '"' | '\'' | ')' | ']' | '\u{201d}' | '\u{2019}' | '*' | '_' | '`'
    )
}

/// Paragraphs, then sentences, of a whole text.
pub fn sentences(text: &str) -> Vec<Sentence<'_>> {
    let mut out = Vec::new();
    for (pi, (poff, p)) in split_paragraphs(text).into_iter().enumerate() {
        for (soff, s) in split_sentences(p) {
            out.push(Sentence {
                text: s,
                start: poff + soff,
                paragraph: pi,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;

    fn split(t: &str) -> Vec<&str> {
        sentences(t).into_iter().map(|s| s.text).collect()
    }

    #[test]
    fn splitter_keeps_dotted_tokens_whole() {
        let t = "Call jwt.verify on req.user before routing. The handler lives in src/a.ts and \
                 needs v1.2.3 of the lib. It takes 3.5 s on average, e.g. for cold starts. \
                 See https://example.com/docs/a.b?x=1. Done!";
        assert_eq!(
            split(t),
            vec![
                "Call jwt.verify on req.user before routing.",
                "The handler lives in src/a.ts and needs v1.2.3 of the lib.",
                "It takes 3.5 s on average, e.g. for cold starts.",
                "See https://example.com/docs/a.b?x=1.",
                "Done!",
            ]
        );
    }

    #[test]
    fn splitter_abbreviations_initials_lists() {
        assert_eq!(
            split("Ask Dr. Smith, i.e. the owner, etc. Then J. R. Tolkien wrote it. Why? Because."),
            vec![
                "Ask Dr. Smith, i.e. the owner, etc. Then J. R. Tolkien wrote it.",
                "Why?",
                "Because."
            ]
        );
        assert_eq!(
            split("Steps:\n1. Build it.\n2. Test it\n- bullet one\n- bullet two"),
            vec![
                "Steps:",
                "1. Build it.",
                "2. Test it",
                "- bullet one",
                "- bullet two"
            ]
        );
        assert_eq!(
            split("He said \"stop.\" Then left.) Next"),
            vec!["He said \"stop.\"", "Then left.)", "Next"]
        );
    }

    /// The splitter as it was, over a vector of the characters.
    #[allow(clippy::indexing_slicing)]
    fn split_sentences_reference(p: &str) -> Vec<(usize, &str)> {
        let cs: Vec<(usize, char)> = p.char_indices().collect();
        let mut out = Vec::new();
        let mut start = 0usize;
        let mut k = 0usize;
        while let Some(&(b, c)) = cs.get(k) {
            if matches!(c, '.' | '!' | '?') {
                let mut e = k + 1;
                while let Some(&(_, n)) = cs.get(e) {
                    if matches!(
                        n,
                        '.' | '!' | '?' | '"' | '\'' | ')' | ']' | '”' | '’' | '*' | '_' | '`'
                    ) {
                        e += 1;
                    } else {
                        break;
                    }
                }
                let next = cs.get(e);
                if next.is_some_and(|(_, n)| !n.is_whitespace()) {
                    k = e;
                    continue;
                }
                if c == '.' && e == k + 1 && non_terminal_period(p, b) {
                    k = e;
                    continue;
                }
                let end = next.map_or(p.len(), |(i, _)| *i);
                push_trimmed(&mut out, p, start, end);
                start = end;
                k = e;
                continue;
            }
            if c == '\n' && starts_item(p.get(b + 1..).unwrap_or("")) {
                push_trimmed(&mut out, p, start, b);
                start = b + 1;
            }
            k += 1;
        }
        push_trimmed(&mut out, p, start, p.len());
        out
    }

    #[test]
    fn byte_splitter_equals_the_char_splitter() {
        for t in [
            "",
            "a. b",
            "He said \"stop.\" Then left.) Next",
            "x.\u{201d} y",
            "e.g. z. Dr. A",
            "1. one\n2. two\n- three",
            "end.",
            "end.\u{a0}next",
            "a.é b",
            "ü. b! c? d",
            "a.\u{2019}\u{2019}\tb",
            "a..b. c",
            "Why?! Yes.",
        ] {
            assert_eq!(split_sentences(t), split_sentences_reference(t), "{t:?}");
        }
    }

    #[test]
    fn prefilters_are_necessary_conditions() {
        for t in [
            "- a",
            "  * b",
            "\t+ c",
            "12. d",
            "3) e",
            "\u{a0}- f",
            "• g",
            "\u{2003}1. h",
            "x",
            "",
        ] {
            if BULLET.is_match(t) {
                assert!(may_be_bullet(t), "{t:?}");
            }
        }
        for a in ABBREVIATIONS {
            assert!(is_abbreviation(a) && is_abbreviation(&a.to_uppercase()));
        }
        assert!(!is_abbreviation("eg") && !is_abbreviation("approxx"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        #[test]
        fn bullet_prefilter_is_a_necessary_condition(t in "[ \t\r\u{b}\u{c}\u{a0}\u{2003}]{0,3}[-*+•0-9a-z.)\u{212a} ]{0,4}\\PC{0,3}") {
            if BULLET.is_match(&t) {
                proptest::prop_assert!(may_be_bullet(&t), "{:?}", t);
            }
        }

        #[test]
        fn byte_splitter_equals_the_char_splitter_on_any_text(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    "[a-zA-Z0-9 ]{0,6}",
                    proptest::sample::select(vec![
                        ".", "!", "?", "\"", "'", ")", "]", "\u{201d}", "\u{2019}", "*", "_", "`",
                        " ", "\n", "\t", "\u{a0}", "\u{2003}", "é", "e.g", "Dr", "J", "12",
                        "\n- ", "\n1. ", "\n# ", "\n> ", "\n| ", "\n• ", "...",
                    ])
                    .prop_map(str::to_string),
                    "\\PC{0,3}",
                ],
                0..30,
            )
        ) {
            let t = parts.concat();
            proptest::prop_assert_eq!(split_sentences(&t), split_sentences_reference(&t));
        }

        #[test]
        fn abbreviation_check_equals_lower_casing(t in "[a-zA-Z.\u{212a}\u{130}\u{17f}\u{c9}]{0,7}") {
            proptest::prop_assert_eq!(
                is_abbreviation(&t),
                ABBREVIATIONS.contains(&t.to_lowercase().as_str())
            );
        }
    }

    #[test]
    fn paragraphs_and_offsets() {
        let t = "  First para. Two.\n\n \n Second para\ncontinues here.\n";
        let s = sentences(t);
        assert_eq!(s.len(), 3);
        for x in &s {
            assert_eq!(&t[x.start..x.start + x.text.len()], x.text);
        }
        assert_eq!(
            s.iter().map(|x| x.paragraph).collect::<Vec<_>>(),
            vec![0, 0, 1]
        );
        assert_eq!(s[2].text, "Second para\ncontinues here.");
    }
}
