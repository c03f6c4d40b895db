//! The soft T0 reasons (spec 001): each pattern looked for only where its
//! anchor or gate says it can be; URLs, quoted keys and quotations matched
//! by hand.

use ctxpress_core::Reason;
use ctxpress_text::bytes::is_word_byte;
use regex::Regex;
use std::sync::LazyLock;
use std::sync::OnceLock;

use super::keywords::LowerWords;
use super::present::{P_AT, P_C2, P_COLON, P_E2, P_QUOTE, Present, has};
use super::re;
use super::scanned::{Gate, Scan};
use super::tokens::TokenRuns;

/// Substring searchers built once (building one costs more than searching a
/// short text).
struct Finders {
    scheme: memchr::memmem::Finder<'static>,
    quotes: [(
        memchr::memmem::Finder<'static>,
        memchr::memmem::Finder<'static>,
    ); 3],
}

static FINDERS: LazyLock<Finders> = LazyLock::new(|| {
    let f = |s: &[u8]| memchr::memmem::Finder::new(s).into_owned();
    Finders {
        scheme: f(b"://"),
        quotes: [
            (f(b"\""), f(b"\"")),
            (f("\u{201c}".as_bytes()), f("\u{201d}".as_bytes())),
            (f("\u{ab}".as_bytes()), f("\u{bb}".as_bytes())),
        ],
    }
});

/// Candidate patterns, one per soft reason, in [`SOFT_REASONS`] order.
pub(crate) const SOFT_PATTERNS: &[&str] = &[
    // url
    r"(?-u:\b)https?://[A-Za-z0-9\[]",
    // email
    r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}(?-u:\b)",
    // phone
    r"(?:(?:\+[0-9]{1,3}[ .\-]?)?(?:\([0-9]{3}\) ?|(?-u:\b)[0-9]{3}[ .\-])[0-9]{3}[ .\-][0-9]{4}|\+[0-9]{1,3}[ .\-][0-9]{1,4}(?:[ .\-][0-9]{2,4}){2,3})(?-u:\b)",
    // version_number
    r"(?-u:\b)(?:v[0-9]+(?:\.[0-9]+){1,3}|[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?)(?-u:\b)",
    // hash_or_sha
    r"(?-u:\b)[0-9a-fA-F]{40,64}(?-u:\b)",
    // file_path
    r"(?m)(?:^|[ \t(\['`=,:])(?:~|\.{1,2})?/[[A-Za-z0-9_].\-]+(?:/[[A-Za-z0-9_].\-]+)+|(?:^|[ \t(\['`=,])[[A-Za-z0-9_].\-]+(?:/[[A-Za-z0-9_].\-]+)+\.[A-Za-z0-9]{1,8}(?-u:\b)",
    // ip_or_semver
    r"(?-u:\b)[0-9]+(?:\.[0-9]+){2,}(?-u:\b)",
    // quoted_key
    r#""[A-Za-z_$][[A-Za-z0-9_]$.\-]*"[ \t\r\n]*:"#,
    // legal_term
    r"(?i-u:(?-u:\b)(?:shall|notwithstanding|whereas|hereinafter|hereby|herein|hereto|thereof|pursuant[ \t\r\n]+to|indemnif(?:y|ies|ied|ication)|in[ \t\r\n]+witness[ \t\r\n]+whereof)(?-u:\b))",
    // direct_quote
    "\"[^\"\n]{11,}\"|\u{201c}[^\u{201d}\n]{11,}\u{201d}|\u{ab}[^\u{bb}\n]{11,}\u{bb}",
    // numeric_with_units
    r"(?-u:\b)[0-9]+(?:\.[0-9]+)?(?:[ ]?(?:ms|ns|µs|sec|secs|seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|[KMGTP]i?B|kB|bytes?|[kMG]?Hz|km|cm|mm|kg|mg|kW|mV|mA|°[CF]|px|rem|fps|rpm|[KMG]bps)|(?:s|h|m|g|V|W|A|K|B|em))(?-u:\b)",
];

pub(crate) const SOFT_REASONS: &[Reason] = &[
    Reason::Url,
    Reason::Email,
    Reason::Phone,
    Reason::VersionNumber,
    Reason::HashOrSha,
    Reason::FilePath,
    Reason::IpOrSemver,
    Reason::QuotedKey,
    Reason::LegalTerm,
    Reason::DirectQuote,
    Reason::NumericWithUnits,
];

/// The [`SOFT_PATTERNS`] compiled on first use: several reasons are matched
/// by hand and never need theirs.
static SOFT_RES: [OnceLock<Regex>; SOFT_PATTERNS.len()] =
    [const { OnceLock::new() }; SOFT_PATTERNS.len()];

const _: () = assert!(SOFT_PATTERNS.len() == SOFT_REASONS.len());

/// The compiled pattern of the soft reason at index `reason` (< the number of
/// soft reasons).
fn soft_re(reason: usize) -> &'static Regex {
    SOFT_RES[reason].get_or_init(|| re(SOFT_PATTERNS[reason]))
}

/// Index of a soft reason in [`SOFT_REASONS`] (for use in `const` blocks).
const fn soft_index(r: Reason) -> usize {
    let mut i = 0;
    while i < SOFT_REASONS.len() {
        if SOFT_REASONS[i] as u8 == r as u8 {
            return i;
        }
        i += 1;
    }
    panic!("not a soft reason")
}

/// The soft reasons of `text`, each looked for only where its anchor or gate
/// says it can be. Written out one by one, not as a loop over the reasons: a
/// `match` per reason was an indirect jump that mispredicted most calls.
pub(super) fn soft_reasons(
    text: &str,
    s: &Scan,
    runs: &TokenRuns,
    words: &LowerWords,
    out: &mut Vec<Reason>,
) {
    let b = text.as_bytes();
    let quote = s.present.may(P_QUOTE) && has(b, b'"');
    let found = [
        (Reason::Url, s.present.may(P_COLON) && has_url(b)),
        (
            Reason::Email,
            s.present.may(P_AT)
                && has(b, b'@')
                && soft_re(const { soft_index(Reason::Email) }).is_match(text),
        ),
        (
            Reason::Phone,
            s.any(Gate::Phone, text, |t| {
                soft_re(const { soft_index(Reason::Phone) }).is_match(t)
            }),
        ),
        (
            Reason::VersionNumber,
            s.any(Gate::DotNum, text, |t| {
                soft_re(const { soft_index(Reason::VersionNumber) })
                    .find_iter(t)
                    .any(|m| {
                        m.as_str().starts_with('v') || !inside_longer_dotted(t, m.start(), m.end())
                    })
            }),
        ),
        (Reason::HashOrSha, runs.hash),
        (Reason::FilePath, s.path),
        (
            Reason::IpOrSemver,
            s.any(Gate::DotNum, text, |t| {
                soft_re(const { soft_index(Reason::IpOrSemver) }).is_match(t)
            }),
        ),
        (Reason::QuotedKey, quote && has_quoted_key(b)),
        (
            Reason::LegalTerm,
            words.legal && soft_re(const { soft_index(Reason::LegalTerm) }).is_match(text),
        ),
        (
            Reason::DirectQuote,
            has_direct_quote(b, quote, s.ascii, s.present),
        ),
        (Reason::NumericWithUnits, s.units),
    ];
    out.extend(found.iter().filter(|f| f.1).map(|f| f.0));
}

/// `http://` or `https://` at a word start, then a letter, digit or `[`.
fn has_url(b: &[u8]) -> bool {
    FINDERS.scheme.find_iter(b).any(|p| {
        let host = b
            .get(p + 3)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'[');
        let scheme = |n: usize, s: &[u8]| {
            p >= n
                && b.get(p - n..p) == Some(s)
                && (p == n || b.get(p - n - 1).is_none_or(|&c| !is_word_byte(c)))
        };
        host && (scheme(4, b"http") || scheme(5, b"https"))
    })
}

/// `"key":` (JSON-style quoted key, whitespace allowed before the colon).
fn has_quoted_key(b: &[u8]) -> bool {
    memchr::memchr_iter(b'"', b).any(|q| {
        if !b
            .get(q + 1)
            .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_' || c == b'$')
        {
            return false;
        }
        let mut j = q + 2;
        while b
            .get(j)
            .is_some_and(|&c| is_word_byte(c) || matches!(c, b'$' | b'.' | b'-'))
        {
            j += 1;
        }
        if b.get(j) != Some(&b'"') {
            return false;
        }
        j += 1;
        while b
            .get(j)
            .is_some_and(|&c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        {
            j += 1;
        }
        b.get(j) == Some(&b':')
    })
}

/// A quotation of 11+ characters on one line: `"..."`, curly or guillemets.
/// Curly quotes are searched for only where a `0xE2` byte may occur, and
/// guillemets where a `0xC2` byte may (their lead bytes; `present`).
fn has_direct_quote(b: &[u8], quote: bool, ascii: bool, present: Present) -> bool {
    let [plain, curly, guillemets] = &FINDERS.quotes;
    (quote && quoted(b, plain))
        || (!ascii
            && ((present.may(P_E2) && quoted(b, curly))
                || (present.may(P_C2) && quoted(b, guillemets))))
}

/// Some `open`, then 11+ characters without `close` or a newline, then
/// `close`. The next close and newline are found once per stretch between
/// them, so many openers before one close stay linear.
fn quoted(
    b: &[u8],
    (open, close_finder): &(
        memchr::memmem::Finder<'static>,
        memchr::memmem::Finder<'static>,
    ),
) -> bool {
    let (mut next_close, mut next_nl) = (None::<usize>, None::<usize>);
    open.find_iter(b).any(|q| {
        let start = q + open.needle().len();
        if next_close.is_none_or(|c| c < start) {
            next_close = Some(
                b.get(start..)
                    .and_then(|r| close_finder.find(r))
                    .map_or(usize::MAX, |c| start + c),
            );
        }
        if next_nl.is_none_or(|n| n < start) {
            next_nl = Some(
                b.get(start..)
                    .and_then(|r| memchr::memchr(b'\n', r))
                    .map_or(usize::MAX, |n| start + n),
            );
        }
        let (c, n) = (
            next_close.unwrap_or(usize::MAX),
            next_nl.unwrap_or(usize::MAX),
        );
        c < n
            && c != usize::MAX
            && b.get(start..c).is_some_and(|inner| {
                inner.len() >= 44 || inner.iter().filter(|&&x| x & 0xC0 != 0x80).count() >= 11
            })
    })
}

/// True when `start..end` continues a longer dotted number (`192.168.1` in
/// `192.168.1.1`).
pub(crate) fn inside_longer_dotted(text: &str, start: usize, end: usize) -> bool {
    let b = text.as_bytes();
    let after = b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit);
    let before = start >= 2
        && b.get(start - 1) == Some(&b'.')
        && b.get(start - 2).is_some_and(u8::is_ascii_digit);
    after || before
}
