//! The secret detector, shared by the classifier (api_key reason), the
//! summarizer (secrets kept next to a summary) and the LLM backends
//! (redaction before any text leaves the process).
//!
//! Two levels:
//!
//! - [`find_secrets`]: self-evident tokens, one run of `[A-Za-z0-9_.-]`
//!   each. Known provider formats (OpenAI, Anthropic, AWS access key ids,
//!   GitHub, Stripe, Slack, SendGrid, GitLab, npm, Google, Hugging Face, JWTs)
//!   are matched by one compiled regex; a generic `prefix-separator-body`
//!   fallback catches other high-entropy tokens and rejects CSS/BEM-style
//!   hyphenated words, identifiers and UUIDs. This is what the classifier's
//!   `api_key` reason looks at.
//! - [`find_sensitive`]: those plus secrets that only their context gives
//!   away: values of `password=` / `passwd:` / `secret=` / `token=` /
//!   `api_key:` ... assignments (env, ini, yaml, json and code styles, quoted
//!   or not; empty values, placeholders such as `<password>`, `***`,
//!   `${VAR}` and code such as `getPassword()` are not secrets), passwords in
//!   URLs (`postgres://user:pass@host`), `Bearer` / `Basic` credentials,
//!   private key PEM blocks, bare AWS secret access keys, Slack and Discord
//!   webhook URLs. [`redact`] replaces all of them.
//!
//! Matching is linear in the length of the text.
//!
//! Users: the classifier (`api_key`), the summarizer and the compactor (each
//! secret a summary or the compactor's task state replaces is kept verbatim on
//! a `keep:` line, so nothing the agent needs is lost), and `ctxpress-llm`,
//! which redacts every request body in one place. [`find_sensitive`] gives each
//! span with the context worth keeping beside it; [`redact`] is idempotent;
//! [`mask_url_credentials`] hides a URL's user information in errors and logs;
//! [`token_runs`], [`token_byte`] and [`run_has_secret`] are the token-run scan
//! the classifier's fast path shares.

use regex::Regex;
use std::sync::LazyLock;

/// A secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSpan {
    /// Byte offset of the start.
    pub start: usize,
    /// Byte offset one past the end.
    pub end: usize,
    /// Which provider or pattern matched, e.g. `openai`, `aws`, `generic`,
    /// `password`, `url_password`, `private_key`.
    pub kind: &'static str,
    /// Start of the smallest stretch worth keeping verbatim around the secret:
    /// the key of a `key = value` assignment, the scheme of a URL, the
    /// `-----BEGIN` line of a PEM block; `start` for a bare token.
    pub context_start: usize,
    /// End of that stretch (a closing quote, the end of the URL or PEM
    /// block); `end` for a bare token.
    pub context_end: usize,
}

impl SecretSpan {
    fn token(start: usize, end: usize, kind: &'static str) -> SecretSpan {
        SecretSpan {
            start,
            end,
            kind,
            context_start: start,
            context_end: end,
        }
    }
}

/// Provider patterns, in priority order (`kind`, regex). The first that matches
/// a token in full names its kind.
const PATTERNS: [(&str, &str); 15] = [
    // header.payload.signature, both JSON objects (`{"` is `eyJ` in base64url)
    (
        "jwt",
        r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}",
    ),
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
    // OAuth access tokens and client secrets
    (
        "google",
        r"ya29\.[0-9A-Za-z_\-]{20,}|GOCSPX-[0-9A-Za-z_\-]{20,}",
    ),
    ("huggingface", r"hf_[A-Za-z0-9]{30,}"),
    // webhook signing secrets
    ("stripe", r"whsec_[A-Za-z0-9]{20,}"),
    // generic: prefix, separator, body
    (
        "generic",
        r"[A-Za-z][A-Za-z0-9]{1,15}[\-_][A-Za-z0-9_\-]{20,}",
    ),
];

/// Tokens longer than this are never secrets (and are not examined further).
const MAX_TOKEN: usize = 512;
/// JWTs carry their claims and can be much longer.
const MAX_JWT: usize = 16 * 1024;

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
        "huggingface" => {
            let body = bytes.get(3..).unwrap_or(&[]);
            body.iter().any(u8::is_ascii_uppercase) && body.iter().any(u8::is_ascii_lowercase)
        }
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
/// Only runs of token bytes at least 20 bytes long (`MIN_TOKEN`) are searched, so
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
const PROVIDER_PREFIXES: [&[u8]; 24] = [
    b"eyJ",
    b"ya29.",
    b"GOCSPX-",
    b"hf_",
    b"whsec_",
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
        if token.len() > MAX_JWT || (token.len() > MAX_TOKEN && !token.starts_with("eyJ")) {
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
            out.push(SecretSpan::token(
                offset + m.start(),
                offset + m.end(),
                kind,
            ));
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

/// Every secret in `text`, in order and non-overlapping: the tokens of
/// [`find_secrets`] plus the secrets their context gives away (assignment
/// values, URL passwords, `Bearer` / `Basic` credentials, private key PEM
/// bodies, bare AWS secret access keys, webhook URLs). Overlapping finds are
/// merged into one span (the earliest one's kind).
pub fn find_sensitive(text: &str) -> Vec<SecretSpan> {
    let mut spans = find_secrets(text);
    pem_blocks(text, &mut spans);
    url_passwords(text, &mut spans);
    assignments(text, &mut spans);
    auth_headers(text, &mut spans);
    aws_secret_keys(text, &mut spans);
    webhooks(text, &mut spans);
    merge(spans)
}

/// True when [`find_sensitive`] finds anything.
pub fn has_sensitive(text: &str) -> bool {
    !find_sensitive(text).is_empty()
}

/// Sort by start (longest first) and merge overlapping spans; a span keeps
/// the kind of the first one pushed among those with its start and end
/// (provider tokens are pushed first).
fn merge(mut spans: Vec<SecretSpan>) -> Vec<SecretSpan> {
    spans.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut out: Vec<SecretSpan> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start < last.end => {
                last.end = last.end.max(s.end);
                last.context_start = last.context_start.min(s.context_start);
                last.context_end = last.context_end.max(s.context_end);
            }
            _ => out.push(s),
        }
    }
    out
}

/// Replace every secret [`find_sensitive`] finds with `[REDACTED:{kind}]`:
/// a token whole, an assignment's value (the key stays), a URL's password
/// (scheme, user and host stay), a PEM block's body (its BEGIN and END lines
/// stay).
pub fn redact(text: &str) -> String {
    let spans = find_sensitive(text);
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

/// `text` with the user information of every URL in it (`scheme://user:pass@`)
/// replaced by `***` (`scheme://***@`): for error messages and logs that
/// show a configured URL.
pub fn mask_url_credentials(text: &str) -> String {
    static SCHEME: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"[A-Za-z][A-Za-z0-9+.\-]{0,30}://").expect("scheme pattern compiles")
    });
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for m in SCHEME.find_iter(text) {
        if m.start() < last {
            continue;
        }
        let rest = bounded(text.get(m.end()..).unwrap_or(""), MAX_SCAN);
        let authority = rest
            .find(|c: char| matches!(c, '/' | '?' | '#') || url_stop(c))
            .map_or(rest, |e| &rest[..e]);
        if let Some(at) = authority.rfind('@') {
            out.push_str(text.get(last..m.end()).unwrap_or(""));
            out.push_str("***");
            last = m.end() + at;
        }
    }
    out.push_str(text.get(last..).unwrap_or(""));
    out
}

/// The longest prefix of `s` of at most `max` bytes (on a character
/// boundary): scans from a match are bounded, so finding stays linear.
fn bounded(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Longest URL authority or assignment value looked at.
const MAX_SCAN: usize = 512;

/// Characters that end a URL written in text.
fn url_stop(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | '\\' | '(' | ')')
}

/// Values that stand for a secret without being one (lower-cased).
const PLACEHOLDERS: &[&str] = &[
    "null",
    "none",
    "nil",
    "undefined",
    "true",
    "false",
    "yes",
    "no",
    "empty",
    "string",
    "str",
    "text",
    "bytes",
    "number",
    "int",
    "integer",
    "bool",
    "boolean",
    "any",
    "object",
    "optional",
    "required",
    "secret",
    "secrets",
    "password",
    "passwd",
    "pass",
    "token",
    "tokens",
    "key",
    "apikey",
    "api_key",
    "value",
    "changeme",
    "change_me",
    "changeit",
    "example",
    "sample",
    "dummy",
    "todo",
    "tbd",
    "redacted",
    "hidden",
    "masked",
    "omitted",
    "removed",
    "n/a",
    "secretstring",
    "securestring",
];

/// True for a value that is a placeholder, a reference or a mask rather than
/// a secret: `<password>`, `${VAR}`, `$VAR`, `{{ .Values.x }}`, `%(pw)s`,
/// `***`, `xxxx`, `...`, `your-token-here`, `[REDACTED:...]`, type names.
fn placeholder(v: &str, key: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    let first = v.chars().next().unwrap_or(' ');
    if matches!(
        first,
        '<' | '$' | '{' | '%' | '[' | '(' | '&' | '*' | '!' | '~' | '/' | '=' | '?' | '|'
    ) || lower.starts_with("your")
        || lower.contains("xxxx")
        || lower.contains("****")
        || lower.ends_with("here")
        || lower.contains("redacted")
        || lower.contains("placeholder")
        || lower.contains("{{")
        || lower.contains("${")
        || PLACEHOLDERS.contains(&lower.as_str())
        || lower == key.to_ascii_lowercase()
    {
        return true;
    }
    // masks: one repeated character, or only mask characters
    let mut chars = v.chars();
    let c0 = chars.next().unwrap_or(' ');
    chars.all(|c| c == c0)
        || v.chars()
            .all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '#' | '-' | '_' | '?' | '•'))
}

/// True for `a.b.c` / `a::b` paths of identifiers (code, not a secret).
fn identifier_path(v: &str) -> bool {
    let ident = |s: &str| {
        let mut c = s.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let v = v.replace("?.", ".");
    (v.contains('.') && v.split('.').all(ident)) || (v.contains("::") && v.split("::").all(ident))
}

/// Letters only (with `-`, `_` or `.` between words) and not random-looking:
/// a word or an identifier, which is a secret only where nothing else can
/// be meant (an env or ini line).
fn word_like(v: &str) -> bool {
    let b = v.as_bytes();
    if !b
        .iter()
        .all(|c| c.is_ascii_alphabetic() || matches!(c, b'-' | b'_' | b'.'))
    {
        return false;
    }
    let changes = b
        .windows(2)
        .filter(|w| {
            w[0].is_ascii_alphabetic()
                && w[1].is_ascii_alphabetic()
                && w[0].is_ascii_uppercase() != w[1].is_ascii_uppercase()
        })
        .count();
    changes * 4 < b.len()
}

/// PascalCase or camelCase words (`SecretString`, `Option`, `rawToken`): a
/// type or variable name.
fn type_name(v: &str) -> bool {
    let b = v.as_bytes();
    b.iter().all(u8::is_ascii_alphabetic)
        && b.iter().any(u8::is_ascii_lowercase)
        && (b.first().is_some_and(u8::is_ascii_uppercase)
            || b.windows(2)
                .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase()))
}

/// Key names whose value is a secret: the key ends with one of these words.
static ASSIGN_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)([A-Za-z0-9_.\-]*(?:passw(?:or)?d|passphrase|pwd|pass|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|auth[_\-]?key|client[_\-]?key|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key))(\\?["'])?[ \t]*(:=|=>|=|:)[ \t]*"#,
    )
    .expect("assignment pattern compiles")
});

/// The kind of an assignment's secret, from its key.
fn assignment_kind(key: &str) -> &'static str {
    let k = key.to_ascii_lowercase();
    if k.contains("aws") && k.contains("secret") {
        "aws_secret"
    } else if k.contains("pass") || k.contains("pwd") {
        "password"
    } else if k.contains("token") {
        "token"
    } else if k.contains("key") {
        "api_key"
    } else {
        "secret"
    }
}

/// Values of assignments to secret-named keys:
/// `DB_PASSWORD=hunter2`, `password: 'Admin1234!'`, `"api_key": "..."`,
/// `aws_secret_access_key = wJalr...`, `--token=...`, `?token=...&`.
fn assignments(text: &str, out: &mut Vec<SecretSpan>) {
    for c in ASSIGN_RE.captures_iter(text) {
        let (Some(all), Some(key), Some(sep)) = (c.get(0), c.get(1), c.get(3)) else {
            continue;
        };
        let k = key.as_str();
        let lower = k.to_ascii_lowercase();
        let before_word = |w: &str| {
            let stem = &lower[..lower.len() - w.len()];
            stem.is_empty() || stem.ends_with(['_', '-', '.'])
        };
        // `pass` and `pwd` only as the last word of a longer key (not
        // `bypass`, `compass`, test output's `PASS: TestLogin`, nor the
        // shell's `PWD` / `OLDPWD`, which hold directories)
        if lower.ends_with("pass") && (lower == "pass" || !before_word("pass")) {
            continue;
        }
        if lower.ends_with("pwd") && (lower == "pwd" || !before_word("pwd")) {
            continue;
        }
        // `user:pass@host` is the URL rule's; `${KEY:-default}` is a shell
        // expansion
        let before = text.get(key.start().saturating_sub(2)..key.start());
        if before == Some("//") || before == Some("${") {
            continue;
        }
        let sep = sep.as_str();
        let p = all.end();
        let rest = bounded(text.get(p..).unwrap_or(""), MAX_SCAN);
        // `==`, `=~`, `::`: comparisons and paths
        if rest.starts_with(['=', '~']) || (sep == ":" && rest.starts_with(':')) {
            continue;
        }
        let kind = assignment_kind(k);
        let (vs, ve, ctx_end, ok) = if let Some(q) = quote_of(rest) {
            let inner = &rest[q.len()..];
            let line = &inner[..inner.find('\n').unwrap_or(inner.len())];
            let Some(close) = line.find(q) else {
                continue;
            };
            let v = &inner[..close];
            let vs = p + q.len();
            let ok = v.chars().count() >= 4
                && !v.chars().any(|c| c.is_whitespace() || c == '\\')
                && !placeholder(v, k);
            (vs, vs + close, vs + close + q.len(), ok)
        } else {
            let len = rest
                .find(|c: char| {
                    c.is_whitespace()
                        || matches!(
                            c,
                            '"' | '\''
                                | '`'
                                | ','
                                | ';'
                                | '&'
                                | '('
                                | ')'
                                | '['
                                | ']'
                                | '}'
                                | '<'
                                | '>'
                                | '\\'
                        )
                })
                .unwrap_or(rest.len());
            if len == rest.len() && rest.len() == MAX_SCAN {
                // a run too long to be one value
                continue;
            }
            let v = &rest[..len];
            let next = rest[len..].chars().next();
            let tight = sep == "="
                && !text[key.end()..p].contains([' ', '\t'])
                && next.is_none_or(|c| c.is_whitespace() || matches!(c, '&' | '"' | '\'' | ';'));
            let strong = tight || line_style(text, key.start(), p + len);
            let ok = v.chars().count() >= 6
                && !matches!(next, Some('(' | '['))
                && !placeholder(v, k)
                && !identifier_path(v)
                && !v.bytes().all(|c| c.is_ascii_digit())
                && (!type_name(v) || tight)
                && (!word_like(v) || strong);
            (p, p + len, p + len, ok)
        };
        if ok && vs < ve {
            out.push(SecretSpan {
                start: vs,
                end: ve,
                kind,
                context_start: key.start(),
                context_end: ctx_end,
            });
        }
    }
}

/// The quote a value starts with: `\"` (JSON-escaped text), `"`, `'` or `` ` ``.
fn quote_of(rest: &str) -> Option<&'static str> {
    if rest.starts_with("\\\"") {
        Some("\\\"")
    } else if rest.starts_with('"') {
        Some("\"")
    } else if rest.starts_with('\'') {
        Some("'")
    } else if rest.starts_with('`') {
        Some("`")
    } else {
        None
    }
}

/// An assignment alone on its line (an env, ini or yaml line): only blanks,
/// a list dash or `export` before the key, only blanks after the value (a
/// `,` or `;` there makes it code: a struct or object literal).
fn line_style(text: &str, key_start: usize, value_end: usize) -> bool {
    // blanks, a dash or `export` fit in a few bytes
    let head = &text[..key_start];
    let mut from = key_start.saturating_sub(64);
    while !head.is_char_boundary(from) {
        from -= 1;
    }
    let window = &head[from..];
    let before = match window.rfind('\n') {
        Some(i) => &window[i + 1..],
        None if from == 0 => window,
        None => return false,
    };
    let before = before.trim();
    let before = before
        .strip_prefix("export")
        .or_else(|| before.strip_prefix('-'))
        .unwrap_or(before)
        .trim();
    let after = bounded(&text[value_end..], 64);
    let after = match after.find('\n') {
        Some(i) => &after[..i],
        None if after.len() == text.len() - value_end => after,
        None => return false,
    };
    before.is_empty() && after.trim().is_empty()
}

/// Passwords in URLs: `postgres://user:pass@host/db` (scheme, user and host
/// stay).
fn url_passwords(text: &str, out: &mut Vec<SecretSpan>) {
    static SCHEME: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"[A-Za-z][A-Za-z0-9+.\-]{0,30}://").expect("scheme pattern compiles")
    });
    if !text.contains("://") {
        return;
    }
    for m in SCHEME.find_iter(text) {
        let head = bounded(&text[m.end()..], MAX_SCAN);
        let authority_len = head
            .find(|c: char| matches!(c, '/' | '?' | '#') || url_stop(c))
            .unwrap_or(head.len());
        let authority = &head[..authority_len];
        let Some(at) = authority.rfind('@') else {
            continue;
        };
        let rest = bounded(&text[m.end()..], 4 * MAX_SCAN);
        let url_len = rest.find(url_stop).unwrap_or(rest.len());
        let userinfo = &authority[..at];
        let Some(colon) = userinfo.find(':') else {
            continue;
        };
        // A redaction marker in the user information: this URL was redacted
        // already (its `:` may be the marker's; the scan window that found
        // no `@` before redaction can reach one now the text is shorter).
        if userinfo.contains("[REDACTED:") {
            continue;
        }
        let user = &userinfo[..colon];
        let pw = &userinfo[colon + 1..];
        if pw.is_empty() || placeholder(pw, "password") || (pw == user && pw.len() < 4) {
            continue;
        }
        let start = m.end() + colon + 1;
        out.push(SecretSpan {
            start,
            end: start + pw.len(),
            kind: "url_password",
            context_start: m.start(),
            context_end: m.end() + url_len,
        });
    }
}

/// `Bearer <token>` anywhere; `Authorization: Basic <base64>` and
/// `Authorization: token <token>`.
fn auth_headers(text: &str, out: &mut Vec<SecretSpan>) {
    static BEARER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/\-]{16,}=*)").expect("bearer compiles")
    });
    static AUTH: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"(?i)\bauthorization\\?["']?[ \t]*[:=][ \t]*(?:\\?["'])?(basic|token)[ \t]+([A-Za-z0-9._~+/\-]{8,}=*)"#,
        )
        .expect("authorization compiles")
    });
    for c in BEARER.captures_iter(text) {
        if let (Some(all), Some(v)) = (c.get(0), c.get(1)) {
            let s = v.as_str();
            let classes = [
                s.bytes().any(|c| c.is_ascii_digit()),
                s.bytes().any(|c| c.is_ascii_uppercase()),
                s.bytes().any(|c| c.is_ascii_lowercase()),
                s.bytes().any(|c| !c.is_ascii_alphanumeric()),
            ];
            if classes.iter().filter(|&&x| x).count() >= 2 && !placeholder(s, "token") {
                out.push(SecretSpan {
                    start: v.start(),
                    end: v.end(),
                    kind: "bearer",
                    context_start: all.start(),
                    context_end: v.end(),
                });
            }
        }
    }
    for c in AUTH.captures_iter(text) {
        if let (Some(all), Some(scheme), Some(v)) = (c.get(0), c.get(1), c.get(2))
            && !placeholder(v.as_str(), "token")
        {
            out.push(SecretSpan {
                start: v.start(),
                end: v.end(),
                kind: if scheme.as_str().eq_ignore_ascii_case("basic") {
                    "basic_auth"
                } else {
                    "token"
                },
                context_start: all.start(),
                context_end: v.end(),
            });
        }
    }
}

/// The body of a private key PEM block (to its END line, or to the end of
/// the text when it was cut off).
fn pem_blocks(text: &str, out: &mut Vec<SecretSpan>) {
    static BEGIN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----").expect("pem compiles")
    });
    if !text.contains("-----BEGIN") {
        return;
    }
    let mut from = 0;
    while let Some(m) = BEGIN.find_at(text, from) {
        let body_start = m.end();
        let (body_end, ctx_end) = match text[body_start..].find("-----END") {
            Some(e) => {
                let e = body_start + e;
                let close = text[e + 8..]
                    .find("-----")
                    .map_or(text.len(), |c| e + 8 + c + 5);
                (e, close)
            }
            None => (text.len(), text.len()),
        };
        let body = &text[body_start..body_end];
        if body
            .bytes()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/'))
            .count()
            >= 16
        {
            out.push(SecretSpan {
                start: body_start,
                end: body_end,
                kind: "private_key",
                context_start: m.start(),
                context_end: ctx_end,
            });
        }
        from = ctx_end.max(body_start);
        if from >= text.len() {
            break;
        }
    }
}

/// Bare AWS secret access keys: exactly 40 characters of `[A-Za-z0-9/+]`
/// with upper and lower case and digits, changing class often (what a random
/// key does and a path or word does not).
fn aws_secret_keys(text: &str, out: &mut Vec<SecretSpan>) {
    static RUN: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"[A-Za-z0-9/+]{40,}").expect("aws run compiles"));
    for m in RUN.find_iter(text) {
        let v = m.as_str().as_bytes();
        if v.len() != 40 || text.as_bytes().get(m.end()) == Some(&b'=') {
            continue;
        }
        if text[..m.start()].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let class = |c: u8| {
            if c.is_ascii_digit() {
                0
            } else if c.is_ascii_uppercase() {
                1
            } else if c.is_ascii_lowercase() {
                2
            } else {
                3
            }
        };
        // class changes between letters and digits, the slashes left out (a
        // path's slashes would count for randomness); a path starts with one
        let alnum: Vec<u8> = v.iter().map(|&c| class(c)).filter(|&k| k < 3).collect();
        let count = |k: u8| alnum.iter().filter(|&&c| c == k).count();
        let changes = alnum.windows(2).filter(|w| w[0] != w[1]).count();
        if v.first() != Some(&b'/')
            && count(0) >= 1
            && count(1) >= 2
            && count(2) >= 2
            && changes * 10 >= alnum.len().saturating_sub(1) * 3
        {
            out.push(SecretSpan::token(m.start(), m.end(), "aws_secret"));
        }
    }
}

/// Slack and Discord webhook URLs: the secret path after the fixed prefix.
fn webhooks(text: &str, out: &mut Vec<SecretSpan>) {
    static HOOK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"hooks\.slack\.com/(?:services|workflows)/([A-Za-z0-9_/\-]{20,})|discord(?:app)?\.com/api/webhooks/([0-9]+/[A-Za-z0-9_\-]{20,})",
        )
        .expect("webhook compiles")
    });
    if !text.contains("hooks") {
        return;
    }
    for c in HOOK.captures_iter(text) {
        let Some(all) = c.get(0) else { continue };
        if let Some(v) = c.get(1).or_else(|| c.get(2)) {
            let kind = if c.get(1).is_some() {
                "slack_webhook"
            } else {
                "discord_webhook"
            };
            out.push(SecretSpan {
                start: v.start(),
                end: v.end(),
                kind,
                context_start: all.start(),
                context_end: v.end(),
            });
        }
    }
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
            "eyJ",
            "eyJhbGciOiJIUzI1NiJ9.",
            "ya29.",
            "GOCSPX-",
            "hf_",
            "whsec_",
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
            (JWT, "jwt"),
            ("ya29.a0AfH6SMBx3kQ7zR9tY2wV5uN8pL1mK4jH6gF", "google"),
            ("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", "google"),
            ("hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh", "huggingface"),
            ("whsec_4eC39HqLyjWDarjtT1zdp7dc9Kq2", "stripe"),
        ];
        for (text, kind) in cases {
            assert_eq!(kinds(text), vec![kind], "{text}");
        }
    }

    const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";

    /// What `redact` leaves of `text`, and the kinds found.
    fn sensitive(text: &str) -> Vec<(&'static str, &str)> {
        find_sensitive(text)
            .into_iter()
            .map(|s| (s.kind, &text[s.start..s.end]))
            .collect()
    }

    #[test]
    fn context_secrets_are_found() {
        let aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let cases: Vec<(String, &str, &str)> = vec![
            (
                format!("aws_secret_access_key = {aws}"),
                "aws_secret",
                aws,
            ),
            (format!("export AWS_SECRET_ACCESS_KEY={aws}"), "aws_secret", aws),
            (format!("the key is {aws} ok"), "aws_secret", aws),
            ("DB_PASSWORD=hunter2".into(), "password", "hunter2"),
            ("password=changeme1\n".into(), "password", "changeme1"),
            ("passwd: s3cr3t-Pa55\n".into(), "password", "s3cr3t-Pa55"),
            ("  password: retail_pass\n  jpa:".into(), "password", "retail_pass"),
            (
                "{\"password\": \"Admin1234!\", \"user\": \"a\"}".into(),
                "password",
                "Admin1234!",
            ),
            (
                "login(username: 'admin', password: 'ValidPass@123')".into(),
                "password",
                "ValidPass@123",
            ),
            (
                "args: {\\\"password\\\": \\\"Tr0ub4dor&3\\\"}".into(),
                "password",
                "Tr0ub4dor&3",
            ),
            ("secret=Zm9vYmFyYmF6cXV4".into(), "secret", "Zm9vYmFyYmF6cXV4"),
            ("client_secret: \"abcd1234efgh\"".into(), "secret", "abcd1234efgh"),
            ("GITHUB_TOKEN=abc123def456ghi".into(), "token", "abc123def456ghi"),
            (
                "GET /cb?code=1&token=q8Zt2Lx9Vb4n&state=x".into(),
                "token",
                "q8Zt2Lx9Vb4n",
            ),
            ("DB_PASS=Qw3rty!9".into(), "password", "Qw3rty!9"),
            ("x-api-key: 9f8e7d6c5b4a3f2e1d0c".into(), "api_key", "9f8e7d6c5b4a3f2e1d0c"),
            ("api_key := \"k3y-V4lue-99\"".into(), "api_key", "k3y-V4lue-99"),
            (
                "connect postgres://app:S3cretPw@db.internal:5432/prod now".into(),
                "url_password",
                "S3cretPw",
            ),
            (
                "DATABASE_URL=postgres://proctorworks:proctorworks@127.0.0.1:25432/pw".into(),
                "url_password",
                "proctorworks",
            ),
            ("redis://:p4ss@cache:6379/0".into(), "url_password", "p4ss"),
            (
                "https://user:p@ss:w0rd@example.com/x".into(),
                "url_password",
                "p@ss:w0rd",
            ),
            (
                "Authorization: Bearer abc.DEF123_ghi-456jkl".into(),
                "bearer",
                "abc.DEF123_ghi-456jkl",
            ),
            (
                "Authorization: Basic dXNlcjpwYXNzd29yZA==".into(),
                "basic_auth",
                "dXNlcjpwYXNzd29yZA==",
            ),
            (format!("jwt {JWT} end"), "jwt", JWT),
            ("AKIAIOSFODNN7EXAMPLE".into(), "aws", "AKIAIOSFODNN7EXAMPLE"),
            (
                "post to https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx".into(),
                "slack_webhook",
                "T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx",
            ),
        ];
        for (text, kind, value) in &cases {
            assert_eq!(sensitive(text), vec![(*kind, *value)], "{text}");
            let r = redact(text);
            if text.matches(value).count() == 1 {
                assert!(!r.contains(value), "{r}");
            }
            assert!(find_sensitive(&r).is_empty(), "{r}");
            assert!(r.contains(&format!("[REDACTED:{kind}]")), "{r}");
        }
    }

    #[test]
    fn private_key_bodies_are_redacted_between_their_lines() {
        let pem = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HcBqn\nQ2kZ9a0WnG4fM5u1HkL0pZ3Qv8=\n-----END RSA PRIVATE KEY-----\ndone";
        let spans = find_sensitive(pem);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].kind, "private_key");
        let r = redact(pem);
        assert!(!r.contains("MIIEpAIBAAKCAQEA"), "{r}");
        assert!(r.contains("-----BEGIN RSA PRIVATE KEY-----"));
        assert!(r.contains("-----END RSA PRIVATE KEY-----\ndone"));
        let ctx = &pem[spans[0].context_start..spans[0].context_end];
        assert!(
            ctx.starts_with("-----BEGIN") && ctx.ends_with("KEY-----"),
            "{ctx}"
        );
        // cut off before its END line: redacted to the end
        let cut = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ";
        assert!(!redact(cut).contains("b3BlbnNzaC1rZXkt"));
        // a public key or a docs stub is not a secret
        assert!(find_sensitive("-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A\n-----END PUBLIC KEY-----").is_empty());
        assert!(
            find_sensitive("-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----")
                .is_empty()
        );
    }

    #[test]
    fn placeholders_code_and_prose_are_not_secrets() {
        for text in [
            "password=",
            "password = ",
            "password: <password>",
            "password=<your-password>",
            "password: ***",
            "PASSWORD=********",
            "password=${DB_PASSWORD}",
            "password: \"${DB_PASSWORD}\"",
            "password=$DB_PASSWORD",
            "password: {{ .Values.db.password }}",
            "token: \"\"",
            "api_key=xxxxxxxxxxxx",
            "api_key: YOUR_API_KEY_HERE",
            "secret: null",
            "secret: true",
            "password: string,",
            "  password: String,",
            "password: SecretString,",
            "let token: string;",
            "token := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)",
            "token := hex.EncodeToString(b)",
            "const token = header.slice(7);",
            "let new_password = req.new_password.clone();",
            "secret: process.env.JWT_SECRET ?? 'x'",
            "'password' => $this->password,",
            "password: z.string().min(12, 'Password must be long')",
            "auth_service.validate_csrf(token=token, client_id=g.client_id)",
            "f(password=new_password)",
            "if password == \"\": return",
            "max_tokens = 256",
            "tokenizer = \"o200k_base\"",
            "token_type: bearer",
            "PWD=/home/user/project",
            "OLDPWD=/tmp",
            "bypass: enabled-for-now",
            "DB_PASSWORD_FILE=/run/secrets/db",
            "--- PASS: TestLogin_WrongPassword (0.01s)",
            "PASS: TestHashAndVerifyPassword",
            "key: ${AES_MASTER_KEY:-0123456789abcdef} x",
            "FIELD_ENCRYPTION_KEY:?FIELD_ENCRYPTION_KEY",
            "  AESMasterKey:  aesKey,",
            "  refreshToken: rawRefreshToken,",
            "const token = request.cookies?.petmed_session;",
            "buyerToken = |financeToken",
            "\"plaintext_token\": \"rc_xxxxxxxxxxxxxxxxxxxx\"",
            "\"access_token\":\"\\([^\"",
            "cd /Users/hana/eglepoint/w2t71/repo/phpunit && ls",
            "2/fullstack/backend/test/auth/authRoutes",
            "password: [REDACTED:password]",
            "Password: make sure it is strong",
            "The token: reset-required before login.",
            "The secret: keep it simple.",
            "My password is long and the token expired yesterday.",
            "Use a bearer token in the Authorization header.",
            "Authorization: Bearer <token>",
            "Authorization: Bearer $TOKEN",
            "postgres://user@localhost/db",
            "postgres://user:${DB_PASS}@postgres:5432/app",
            "https://example.com/a:b@c",
            "git@github.com:org/repo.git",
            "see https://docs.rs/regex/1.10.2/regex/ for more",
            "a git sha 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
            "src/components/button/index/file/path/ab",
            "uuid 550e8400-e29b-41d4-a716-446655440000",
            "",
        ] {
            assert!(
                find_sensitive(text).is_empty(),
                "{text}: {:?}",
                sensitive(text)
            );
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn contexts_cover_key_and_value() {
        let t = "cfg: DB_PASSWORD=hunter2 and \"api_key\": \"k3y-V4lue-99\" via postgres://u:pw12@h/db.";
        let ctx: Vec<&str> = find_sensitive(t)
            .iter()
            .map(|s| &t[s.context_start..s.context_end])
            .collect();
        assert_eq!(
            ctx,
            vec![
                "DB_PASSWORD=hunter2",
                "api_key\": \"k3y-V4lue-99\"",
                "postgres://u:pw12@h/db."
            ]
        );
        // a provider key inside an assignment: one span, the provider's kind
        let t = "OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z";
        let s = find_sensitive(t);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].kind, "openai");
        assert_eq!(&t[s[0].context_start..s[0].context_end], t);
    }

    #[test]
    fn redaction_is_idempotent_and_keeps_the_rest() {
        let t = "use DB_PASSWORD=hunter2, aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY \
                 and postgres://app:S3cretPw@db:5432/prod with sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z";
        let r = redact(t);
        assert_eq!(
            r,
            "use DB_PASSWORD=[REDACTED:password], aws_secret_access_key = [REDACTED:aws_secret] \
                 and postgres://app:[REDACTED:url_password]@db:5432/prod with [REDACTED:openai]"
        );
        assert_eq!(redact(&r), r);
        assert!(find_sensitive(&r).is_empty());
    }

    #[test]
    fn url_credentials_are_masked() {
        assert_eq!(
            mask_url_credentials(
                "error for url (https://user:pa55@llm.example.com/v1/chat) at http://h/x"
            ),
            "error for url (https://***@llm.example.com/v1/chat) at http://h/x"
        );
        assert_eq!(
            mask_url_credentials("http://tok@127.0.0.1:8080/v1 and ftp://a:b@c"),
            "http://***@127.0.0.1:8080/v1 and ftp://***@c"
        );
        assert_eq!(mask_url_credentials("no url here"), "no url here");
        assert_eq!(mask_url_credentials("mail a@b.c"), "mail a@b.c");
    }

    #[test]
    fn sensitive_is_linear_on_large_input() {
        let t = "password=".repeat(20_000) + &"a://b:c@".repeat(20_000) + &"Bearer ".repeat(20_000);
        let start = std::time::Instant::now();
        let _ = find_sensitive(&t);
        let _ = find_sensitive(&"-----BEGIN PRIVATE KEY-----".repeat(20_000));
        let _ = find_sensitive(&"token: 'a".repeat(20_000));
        assert!(start.elapsed().as_secs() < 20);
    }

    #[test]
    fn spans_never_split_characters() {
        for t in [
            "password=héllo-wörld1 ü",
            "passwd: 'ünïcødé99' x",
            "postgres://ü:pä55@höst/db",
            "Bearer ééééééééééééééééé1",
        ] {
            for s in find_sensitive(t) {
                assert!(
                    t.is_char_boundary(s.start) && t.is_char_boundary(s.end),
                    "{t}"
                );
                assert!(t.is_char_boundary(s.context_start) && t.is_char_boundary(s.context_end));
            }
            let _ = redact(t);
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
