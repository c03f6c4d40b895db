//! The secret detector, shared by the classifier (api_key reason) and the
//! summarizer (redaction before text leaves the machine).
//!
//! Known provider formats (OpenAI, Anthropic, AWS, GitHub, Stripe, Slack,
//! SendGrid, GitLab, npm, Google) are matched by one compiled regex; a generic
//! `prefix-separator-body` fallback catches other high-entropy tokens and
//! rejects CSS/BEM-style hyphenated words, identifiers and UUIDs. Matching is
//! linear in the length of the text.

use regex::Regex;
use std::sync::LazyLock;

/// A secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSpan {
    /// Byte offset of the start.
    pub start: usize,
    /// Byte offset one past the end.
    pub end: usize,
    /// Which provider or pattern matched, e.g. `openai`, `aws`, `generic`.
    pub kind: &'static str,
}

/// Provider patterns, in priority order (`kind`, regex). The first that matches
/// a token in full names its kind.
const PATTERNS: [(&str, &str); 11] = [
    ("anthropic", r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    (
        "openai",
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    ),
    ("aws", r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    (
        "github",
        r"gh[oprstu]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}",
    ),
    ("stripe", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("slack", r"xox[bpars]-[A-Za-z0-9\-]{10,}"),
    ("sendgrid", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("gitlab", r"glpat-[A-Za-z0-9_\-]{20,}"),
    ("npm", r"npm_[A-Za-z0-9]{36,}"),
    ("google", r"AIza[0-9A-Za-z_\-]{35}"),
    // generic: prefix, separator, body
    (
        "generic",
        r"[A-Za-z][A-Za-z0-9]{1,15}[\-_][A-Za-z0-9_\-]{20,}",
    ),
];

/// Tokens longer than this are never secrets (and are not examined further).
const MAX_TOKEN: usize = 512;

// The patterns are constants; failing to compile is a programming error caught
// by every test.
/// All patterns as one alternation between ASCII word boundaries (a DFA on any
/// input; matching never needs captures).
static SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    let alt = PATTERNS
        .iter()
        .map(|(_, p)| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    Regex::new(&format!("(?-u:\\b)(?:{alt})(?-u:\\b)")).expect("secret pattern compiles")
});

/// Each pattern anchored, to name the kind of a matched token.
static KIND_RES: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    PATTERNS
        .iter()
        .map(|&(k, p)| {
            (
                k,
                Regex::new(&format!("^(?:{p})$")).expect("secret pattern compiles"),
            )
        })
        .collect()
});

/// Prefixes of well-known non-secret identifiers (API object ids) that the
/// generic rule would otherwise flag.
const ID_PREFIXES: [&str; 18] = [
    "toolu", "call", "msg", "req", "chatcmpl", "run", "thread", "asst", "file", "batch", "evt",
    "cus", "resp", "step", "vs", "srvtoolu", "ft", "item",
];

/// True when `s` (ASCII alphanumerics) looks random rather than like an
/// identifier: all three character classes, digits in at least two groups and
/// frequent class changes.
fn looks_random(s: &[u8]) -> bool {
    fn class(b: u8) -> u8 {
        if b.is_ascii_digit() {
            0
        } else if b.is_ascii_uppercase() {
            1
        } else {
            2
        }
    }
    let (mut upper, mut lower, mut digit_groups) = (0usize, 0usize, 0usize);
    let mut changes = 0usize;
    let mut prev: Option<u8> = None;
    for &b in s {
        let c = class(b);
        match c {
            0 if prev != Some(0) => digit_groups += 1,
            1 => upper += 1,
            2 => lower += 1,
            _ => {}
        }
        if prev.is_some_and(|p| p != c) {
            changes += 1;
        }
        prev = Some(c);
    }
    let len = s.len().max(2);
    upper > 0 && lower > 0 && digit_groups >= 2 && changes * 10 >= (len - 1) * 4
}

/// Longest run of ASCII alphanumerics.
fn longest_alnum_run(s: &[u8]) -> &[u8] {
    s.split(|b| !b.is_ascii_alphanumeric())
        .max_by_key(|r| r.len())
        .unwrap_or(&[])
}

/// Extra checks per kind; `m` is the matched token.
fn accept(kind: &str, m: &str) -> bool {
    let bytes = m.as_bytes();
    match kind {
        "openai" | "anthropic" | "gitlab" | "slack" => {
            // Reject hyphenated words such as `sk-something-long-and-wordy`.
            let body = bytes
                .iter()
                .position(|&b| b == b'-')
                .map_or(bytes, |p| bytes.get(p + 1..).unwrap_or(&[]));
            let run = longest_alnum_run(body);
            run.len() >= 10 && body.iter().any(u8::is_ascii_digit)
        }
        "generic" => {
            let sep = bytes
                .iter()
                .position(|&b| b == b'-' || b == b'_')
                .unwrap_or(bytes.len());
            let prefix = m.get(..sep).unwrap_or("");
            if ID_PREFIXES.iter().any(|p| prefix.eq_ignore_ascii_case(p)) {
                return false;
            }
            let body = bytes.get(sep + 1..).unwrap_or(&[]);
            let run = longest_alnum_run(body);
            run.len() >= 20 && looks_random(run)
        }
        _ => true,
    }
}

/// Bytes that can occur inside a token (`[A-Za-z0-9_.-]`): a secret lies
/// within one run of them.
pub fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Shortest token any pattern accepts (`AKIA` + 16).
const MIN_TOKEN: usize = 20;

/// Maximal runs of token bytes (`[A-Za-z0-9_.-]`) at least `min` bytes long,
/// as byte ranges in order: the only places a secret (or a hash) can be.
///
/// Skips ahead `min` bytes at a time: a probe that lands on a non-token byte
/// rules out every run through the bytes before it, so ordinary prose costs
/// about one look per word.
pub fn token_runs(text: &str, min: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = text.as_bytes();
    let min = min.max(1);
    // invariant: `i == 0` or `b[i - 1]` is not a token byte
    let mut i = 0usize;
    std::iter::from_fn(move || {
        loop {
            let probe = i + min - 1;
            let &c = b.get(probe)?;
            if !token_byte(c) {
                i = probe + 1;
                continue;
            }
            let mut start = probe;
            while start > i && b.get(start - 1).is_some_and(|&c| token_byte(c)) {
                start -= 1;
            }
            if start > i {
                // a non-token byte at `start - 1`: the run from `start` is shorter
                // than `min` so far; probe again from there
                i = start;
                continue;
            }
            let mut end = probe + 1;
            while b.get(end).is_some_and(|&c| token_byte(c)) {
                end += 1;
            }
            i = end;
            return Some((start, end));
        }
    })
}

/// Find secrets (API keys, tokens) in `text`, in order, non-overlapping.
///
/// Only runs of token bytes at least [`MIN_TOKEN`] long are searched, so
/// ordinary prose costs a look per word.
pub fn find_secrets(text: &str) -> Vec<SecretSpan> {
    let mut out = Vec::new();
    for (start, end) in token_runs(text, MIN_TOKEN) {
        if let Some(run) = text.get(start..end) {
            scan_run(run, start, &mut out);
        }
    }
    out
}

/// Literal starts of the provider patterns.
const PROVIDER_PREFIXES: [&[u8]; 19] = [
    b"sk-",
    b"AKIA",
    b"ASIA",
    b"gho_",
    b"ghp_",
    b"ghr_",
    b"ghs_",
    b"ght_",
    b"ghu_",
    b"github_pat_",
    b"sk_live_",
    b"sk_test_",
    b"rk_live_",
    b"rk_test_",
    b"xox",
    b"SG.",
    b"glpat-",
    b"npm_",
    b"AIza",
];

/// Cheap necessary condition for a secret in a token run: a provider prefix
/// where a match can start (the run's start, or after `.` or `-`), or a
/// stretch of 20+ letters and digits that [`looks_random`] (what the generic
/// rule needs of the longest stretch of its body).
///
/// One branch-free table pass finds whether both are possible at all; the
/// exact checks run only then.
fn maybe_secret(run: &[u8]) -> bool {
    // the run's start counts as following a separator
    let (mut prev, mut seen, mut prefix_byte) = (B_SEP, 0u8, 0u8);
    for &c in run {
        let t = BYTE_BITS[c as usize];
        prefix_byte |= (prev << 1) & t;
        seen |= t;
        prev = t;
    }
    (prefix_byte & B_PREFIX != 0 && provider_prefix(run))
        || (seen & B_CLASSES == B_CLASSES
            && run
                .split(|c| !c.is_ascii_alphanumeric())
                .any(|s| s.len() >= 20 && looks_random(s)))
}

/// A [`PROVIDER_PREFIXES`] entry starts the run or follows a `.` or `-` in it.
fn provider_prefix(run: &[u8]) -> bool {
    let mut after_sep = true;
    for (i, pair) in run.windows(2).enumerate() {
        if after_sep
            && PREFIX_PAIRS.contains(&[pair[0], pair[1]])
            && run
                .get(i..)
                .is_some_and(|r| PROVIDER_PREFIXES.iter().any(|p| r.starts_with(p)))
        {
            return true;
        }
        after_sep = matches!(pair[0], b'.' | b'-');
    }
    false
}

/// The first two bytes of each [`PROVIDER_PREFIXES`] entry (some repeat).
static PREFIX_PAIRS: [[u8; 2]; PROVIDER_PREFIXES.len()] = {
    let mut t = [[0u8; 2]; PROVIDER_PREFIXES.len()];
    let mut i = 0;
    while i < PROVIDER_PREFIXES.len() {
        t[i] = [PROVIDER_PREFIXES[i][0], PROVIDER_PREFIXES[i][1]];
        i += 1;
    }
    t
};

/// [`BYTE_BITS`]: `.` or `-`, where a provider prefix may follow.
const B_SEP: u8 = 1;
/// [`BYTE_BITS`]: a byte a provider prefix starts with (one bit above
/// [`B_SEP`], so `prev << 1 & this` marks a prefix byte after a separator).
const B_PREFIX: u8 = 2;
/// [`BYTE_BITS`]: upper case, lower case, digit, and all three.
const B_UPPER: u8 = 4;
const B_LOWER: u8 = 8;
const B_DIGIT: u8 = 16;
const B_CLASSES: u8 = B_UPPER | B_LOWER | B_DIGIT;

/// Per byte: [`B_SEP`], [`B_PREFIX`] and its class bit.
static BYTE_BITS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'.' as usize] = B_SEP;
    t[b'-' as usize] = B_SEP;
    let mut i = 0;
    while i < PROVIDER_PREFIXES.len() {
        t[PROVIDER_PREFIXES[i][0] as usize] |= B_PREFIX;
        i += 1;
    }
    let mut c = 0;
    while c < 128 {
        let b = c as u8;
        t[c] |= if b.is_ascii_uppercase() {
            B_UPPER
        } else if b.is_ascii_lowercase() {
            B_LOWER
        } else if b.is_ascii_digit() {
            B_DIGIT
        } else {
            0
        };
        c += 1;
    }
    t
};

fn scan_run(run: &str, offset: usize, out: &mut Vec<SecretSpan>) {
    if maybe_secret(run.as_bytes()) {
        scan_matches(run, offset, out);
    }
}

/// The secrets of one token run, found by the patterns alone.
fn scan_matches(run: &str, offset: usize, out: &mut Vec<SecretSpan>) {
    for m in SECRET_RE.find_iter(run) {
        let token = m.as_str();
        if token.len() > MAX_TOKEN {
            continue;
        }
        let Some(kind) = KIND_RES
            .iter()
            .find(|(_, re)| re.is_match(token))
            .map(|&(k, _)| k)
        else {
            continue;
        };
        if accept(kind, token) {
            out.push(SecretSpan {
                start: offset + m.start(),
                end: offset + m.end(),
                kind,
            });
        }
    }
}

/// True when `text` contains at least one secret (cheaper than
/// [`find_secrets`] when nothing matches, which is the common case).
pub fn has_secret(text: &str) -> bool {
    !find_secrets(text).is_empty()
}

/// True when `run`, one of the [`token_runs`] of a text, holds a secret
/// (what [`has_secret`] checks per run, without finding the runs again).
pub fn run_has_secret(run: &str) -> bool {
    let mut found = Vec::new();
    scan_run(run, 0, &mut found);
    !found.is_empty()
}

/// Replace every secret with `[REDACTED:{kind}]`.
pub fn redact(text: &str) -> String {
    let spans = find_secrets(text);
    if spans.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for s in spans {
        out.push_str(text.get(last..s.start).unwrap_or(""));
        out.push_str("[REDACTED:");
        out.push_str(s.kind);
        out.push(']');
        last = s.end;
    }
    out.push_str(text.get(last..).unwrap_or(""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `maybe_secret` only skips runs the patterns find nothing in: random
    /// runs built from provider prefixes, separators and random stretches.
    #[test]
    fn prefilter_skips_only_runs_without_secrets() {
        const PARTS: &[&str] = &[
            "sk-",
            "sk-ant-",
            "AKIA",
            "ghp_",
            "github_pat_",
            "sk_live_",
            "xoxb-",
            "SG.",
            "glpat-",
            "npm_",
            "AIza",
            "api_",
            "token-",
            "a",
            "Z",
            "7",
            ".",
            "-",
            "_",
            "x9Kq2LmN8pQ4rT6v",
            "abcdefghijklmnopqrstuvwxyz",
            "ABCDEFGHIJ0123456789",
            "0123456789",
            "Q1w2E3r4T5y6U7i8",
        ];
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let (mut found, mut runs) = (0, 0);
        for _ in 0..20_000 {
            let mut t = String::new();
            let n = 1 + (state % 8) as usize;
            for _ in 0..n {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                t.push_str(PARTS[(state % PARTS.len() as u64) as usize]);
            }
            for (a, e) in token_runs(&t, 1) {
                let run = &t[a..e];
                let (mut fast, mut all) = (Vec::new(), Vec::new());
                scan_run(run, 0, &mut fast);
                scan_matches(run, 0, &mut all);
                assert_eq!(fast, all, "{run:?}");
                found += usize::from(!all.is_empty());
                runs += 1;
            }
        }
        // the generator reaches both outcomes often
        assert!(found > 1000 && found < runs - 1000, "{found} of {runs}");
    }

    fn kinds(text: &str) -> Vec<&'static str> {
        find_secrets(text).into_iter().map(|s| s.kind).collect()
    }

    #[test]
    fn known_providers() {
        let cases = [
            ("key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "openai"),
            ("sk-4fG7hJ2kL9mN3pQ6rS8tV1wX5yZ0aB7c", "openai"),
            (
                "ANTHROPIC_API_KEY=sk-ant-api03-Xy7Zq2Wv9Ut4Sr1Qp6On3Ml8Kj5Ih0Gf",
                "anthropic",
            ),
            ("aws AKIAIOSFODNN7EXAMPLE here", "aws"),
            ("ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r", "github"),
            ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "github"),
            ("ghs_16C7e42F292c6912E7710c838347Ae178B4a", "github"),
            ("ghr_16C7e42F292c6912E7710c838347Ae178B4a", "github"),
            ("ght_16C7e42F292c6912E7710c838347Ae178B4a", "github"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789",
                "github",
            ),
            ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe"),
            ("sk_test_4eC39HqLyjWDarjtT1zdp7dc", "stripe"),
            ("rk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe"),
            ("rk_test_4eC39HqLyjWDarjtT1zdp7dc", "stripe"),
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                "slack",
            ),
            ("xoxp-123456789012-1234567890123-AbCdEfGhIjKl", "slack"),
            (
                "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",
                "sendgrid",
            ),
            ("glpat-xY7zQ2wV9uT4sR1qP6oN", "gitlab"),
            ("npm_AbCdEf0123456789GhIjKl0123456789MnOp", "npm"),
            ("AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", "google"),
            ("token: zk_9fK2mQ7xR4tB8wN1pL6vC3jH5d", "generic"),
        ];
        for (text, kind) in cases {
            assert_eq!(kinds(text), vec![kind], "{text}");
        }
    }

    #[test]
    fn near_misses_are_not_secrets() {
        for text in [
            "the task-based approach works",
            "sk-learn is a nickname for scikit-learn",
            "sk-this-is-not-a-real-key-at-all-really",
            "btn-primary--large__icon-wrapper-element",
            "nav-item__link--active-state-highlighted",
            "uuid 550e8400-e29b-41d4-a716-446655440000",
            "my_VeryLongFunctionNameForTesting2024",
            "toolu_01D7FLrfh4GqXx9kQz2Wv8Yb",
            "call_9hK2mQ7xR4tB8wN1pL6vC3jH",
            "AKIA is the AWS prefix",
            "ghp_short",
            "a git sha 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
            "risk-averse desk-bound folks",
            "",
        ] {
            assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
            assert!(!has_secret(text));
        }
    }

    #[test]
    fn redacts_in_place() {
        let t = "use AKIAIOSFODNN7EXAMPLE and ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r now";
        assert_eq!(redact(t), "use [REDACTED:aws] and [REDACTED:github] now");
        assert_eq!(redact("nothing here"), "nothing here");
    }

    #[test]
    fn spans_are_ordered_and_on_boundaries() {
        let t = "é sk_live_4eC39HqLyjWDarjtT1zdp7dc ü AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI";
        let spans = find_secrets(t);
        assert_eq!(spans.len(), 2);
        assert!(spans[0].end <= spans[1].start);
        for s in spans {
            assert!(t.is_char_boundary(s.start) && t.is_char_boundary(s.end));
        }
    }

    #[test]
    fn linear_on_large_input() {
        let t = "sk-".repeat(200_000) + &"a-".repeat(200_000);
        assert!(find_secrets(&t).is_empty());
        let t = "sk-a-b-c-d-e-f-g-h-".repeat(100_000);
        let start = std::time::Instant::now();
        assert!(find_secrets(&t).is_empty());
        assert!(start.elapsed().as_secs() < 10);
    }

    #[test]
    fn token_runs_finds_exactly_the_long_runs() {
        let naive = |t: &str, min: usize| {
            let b = t.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < b.len() {
                if !token_byte(b[i]) {
                    i += 1;
                    continue;
                }
                let s = i;
                while i < b.len() && token_byte(b[i]) {
                    i += 1;
                }
                if i - s >= min {
                    out.push((s, i));
                }
            }
            out
        };
        let pieces = [
            "a",
            "bb",
            "é",
            " ",
            "-",
            "x".repeat(19).leak(),
            "y".repeat(20).leak(),
            "/",
            "_",
        ];
        let mut seed = 7u64;
        for _ in 0..2000 {
            let mut t = String::new();
            for _ in 0..(seed % 40) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                t.push_str(pieces[(seed >> 33) as usize % pieces.len()]);
            }
            for min in [1, 3, 20] {
                assert_eq!(
                    token_runs(&t, min).collect::<Vec<_>>(),
                    naive(&t, min),
                    "{t:?} {min}"
                );
            }
        }
    }
}
