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

/// One alternation; each branch is a capture group whose index maps to a kind in
/// [`KINDS`]. ASCII word boundaries keep the automaton a DFA on any input.
static SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    let b = r"(?-u:\b)";
    let pattern = [
        // 1 anthropic
        r"(sk-ant-[A-Za-z0-9_\-]{20,})".to_string(),
        // 2 openai
        r"(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})".to_string(),
        // 3 aws
        r"((?:AKIA|ASIA)[0-9A-Z]{16})".to_string(),
        // 4 github
        r"(gh[oprstu]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})".to_string(),
        // 5 stripe
        r"((?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})".to_string(),
        // 6 slack
        r"(xox[bpars]-[A-Za-z0-9\-]{10,})".to_string(),
        // 7 sendgrid
        r"(SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,})".to_string(),
        // 8 gitlab
        r"(glpat-[A-Za-z0-9_\-]{20,})".to_string(),
        // 9 npm
        r"(npm_[A-Za-z0-9]{36,})".to_string(),
        // 10 google
        r"(AIza[0-9A-Za-z_\-]{35})".to_string(),
        // 11 generic: prefix, separator, body
        r"([A-Za-z][A-Za-z0-9]{1,15}[\-_][A-Za-z0-9_\-]{20,})".to_string(),
    ]
    .iter()
    .map(|p| format!("{b}{p}"))
    .collect::<Vec<_>>()
    .join("|");
    // The pattern is a constant; failing to compile is a programming error
    // caught by every test.
    Regex::new(&format!("(?:{pattern})(?-u:\\b)")).expect("secret pattern compiles")
});

const KINDS: [&str; 11] = [
    "anthropic",
    "openai",
    "aws",
    "github",
    "stripe",
    "slack",
    "sendgrid",
    "gitlab",
    "npm",
    "google",
    "generic",
];

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

/// Find secrets (API keys, tokens) in `text`, in order, non-overlapping.
pub fn find_secrets(text: &str) -> Vec<SecretSpan> {
    let mut out = Vec::new();
    for caps in SECRET_RE.captures_iter(text) {
        let Some((i, m)) = caps
            .iter()
            .enumerate()
            .skip(1)
            .find_map(|(i, g)| g.map(|g| (i, g)))
        else {
            continue;
        };
        let Some(&kind) = KINDS.get(i - 1) else {
            continue;
        };
        if accept(kind, m.as_str()) {
            out.push(SecretSpan {
                start: m.start(),
                end: m.end(),
                kind,
            });
        }
    }
    out
}

/// True when `text` contains at least one secret (cheaper than
/// [`find_secrets`] when nothing matches, which is the common case).
pub fn has_secret(text: &str) -> bool {
    SECRET_RE.is_match(text) && !find_secrets(text).is_empty()
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
    }
}
