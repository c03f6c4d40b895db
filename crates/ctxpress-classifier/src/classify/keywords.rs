//! Keywords found in one `aho-corasick` pass over the lower-cased copy of a
//! text: SQL statement words and legal terms in any case, traceback header
//! literals as written.

use aho_corasick::AhoCorasick;
use aho_corasick::AhoCorasickBuilder;
use aho_corasick::AhoCorasickKind;
use aho_corasick::MatchKind;
use std::sync::LazyLock;

/// Keywords found in one pass over an ASCII-lower-cased copy: SQL statement
/// words and legal terms in any case, traceback header literals as written.
pub(super) struct LowerWords {
    /// Starts of SQL statement words.
    pub(super) statements: Vec<usize>,
    pub(super) legal: bool,
    /// A literal of a traceback header that needs no frame line.
    pub(super) trace: bool,
}

/// What a [`LOWER_WORDS`] entry is evidence of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keyword {
    /// An SQL statement word (`select`, ...), in any case.
    Statement,
    /// A literal one of which every `legal_term` match contains, in any case.
    Legal,
    /// A literal of [`TRACE_HEADER`](super::traceback::TRACE_HEADER), exactly as written.
    Trace,
}

/// The keywords: each word, the lower-case part searched for and its offset
/// in the word (`indemnif` is found by `demnif`).
const LOWER_WORDS: &[(Keyword, &str, &str, usize)] = &[
    (Keyword::Statement, "select", "select", 0),
    (Keyword::Statement, "insert", "insert", 0),
    (Keyword::Statement, "create", "create", 0),
    (Keyword::Statement, "delete", "delete", 0),
    (Keyword::Statement, "update", "update", 0),
    (Keyword::Legal, "shall", "shall", 0),
    (Keyword::Legal, "notwithstanding", "notwith", 0),
    (Keyword::Legal, "whereas", "whereas", 0),
    (Keyword::Legal, "herein", "herein", 0),
    (Keyword::Legal, "hereby", "hereby", 0),
    (Keyword::Legal, "hereto", "hereto", 0),
    (Keyword::Legal, "thereof", "thereof", 0),
    (Keyword::Legal, "pursuant", "pursuant", 0),
    (Keyword::Legal, "indemnif", "demnif", 2),
    (Keyword::Legal, "witness", "witness", 0),
    (
        Keyword::Trace,
        "Traceback (most recent call last):",
        "traceback (most recent call last):",
        0,
    ),
    (
        Keyword::Trace,
        "Exception in thread \"",
        "exception in thread \"",
        0,
    ),
    (Keyword::Trace, "panicked at ", "panicked at ", 0),
    (Keyword::Trace, "goroutine ", "goroutine ", 0),
];

static LOWER_AC: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasickBuilder::new()
        .kind(Some(AhoCorasickKind::DFA))
        .match_kind(MatchKind::LeftmostFirst)
        .build(LOWER_WORDS.iter().map(|w| w.2))
        .expect("keywords compile")
});

/// True when a traceback literal starts at `p` of `text`, as written.
fn trace_literal_at(text: &[u8], p: usize) -> bool {
    let rest = text.get(p..).unwrap_or(&[]);
    LOWER_WORDS
        .iter()
        .any(|&(kind, word, _, _)| kind == Keyword::Trace && rest.starts_with(word.as_bytes()))
}

impl LowerWords {
    /// The keywords of `text`, given its lower-cased copy; `statements` is
    /// a buffer to reuse (cleared first).
    pub(super) fn find_in(text: &[u8], lower: &[u8], mut statements: Vec<usize>) -> LowerWords {
        statements.clear();
        let mut w = LowerWords {
            statements,
            legal: false,
            trace: false,
        };
        for m in LOWER_AC.find_iter(lower) {
            let Some(&(kind, word, _, offset)) = LOWER_WORDS.get(m.pattern().as_usize()) else {
                continue;
            };
            // a match hides the ones that start inside it: for the statement
            // and legal words that is harmless (each needs a word start), but
            // a keyword can end where a traceback literal begins
            // (`selecTraceback`)
            w.trace = w.trace || (m.start() + 1..m.end()).any(|q| trace_literal_at(text, q));
            let start = m.start().wrapping_sub(offset);
            let haystack = if kind == Keyword::Trace { text } else { lower };
            if m.start() < offset
                || haystack.get(start..start + word.len()) != Some(word.as_bytes())
            {
                continue;
            }
            match kind {
                Keyword::Statement => w.statements.push(start),
                Keyword::Legal => w.legal = true,
                Keyword::Trace => w.trace = true,
            }
        }
        w
    }
}
