//! Recognizers of entities in running text: URLs, paths, file names,
//! versions and compound identifiers, each an iterator over the byte spans
//! of its matches in order. Word boundaries are ASCII ones (`\b` between
//! `[A-Za-z0-9_]` and anything else).
//!
//! [`ascii_regex`] compiles a built-in pattern with `\b` as an ASCII word
//! boundary (faster, and never a fallback on non-ASCII input).

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

/// Compile a built-in pattern whose `\b` means an ASCII word boundary
/// (faster, and never falls back on non-ASCII input).
///
/// # Panics
///
/// When `pattern` is not a valid regex: patterns are constants of the
/// program, so that is a programming error every test hits.
pub fn ascii_regex(pattern: &str) -> Regex {
    let p = pattern.replace(r"\b", r"(?-u:\b)");
    #[allow(clippy::expect_used)]
    Regex::new(&p).expect("static pattern compiles")
}

static CAMEL: LazyLock<Regex> =
    LazyLock::new(|| ascii_regex(r"\b[a-z][a-z0-9]*[A-Z][a-zA-Z0-9]*\b"));
static PASCAL: LazyLock<Regex> =
    LazyLock::new(|| ascii_regex(r"\b[A-Z][a-z0-9]+[A-Z][a-zA-Z0-9]*\b"));
static SNAKE: LazyLock<Regex> =
    LazyLock::new(|| ascii_regex(r"\b[a-zA-Z][a-zA-Z0-9]*(?:_[a-zA-Z0-9]+)+\b"));
static URL: LazyLock<Regex> = LazyLock::new(|| ascii_regex(r#"https?://[^\s<>"'`\])]+"#));
static PATH: LazyLock<Regex> =
    LazyLock::new(|| ascii_regex(r"(?:~|\.{1,2})?/?[A-Za-z0-9_@.-]+(?:/[A-Za-z0-9_@.-]+)+/?"));
static FILE_NAME: LazyLock<Regex> = LazyLock::new(|| {
    ascii_regex(
        r"\b[A-Za-z0-9_-]+\.(?:rs|ts|tsx|js|jsx|mjs|py|go|java|c|h|cc|cpp|hpp|md|json|toml|yaml|yml|txt|sh|html|css|scss|sql|rb|php|cs|swift|kt|lock|cfg|ini|xml|csv|log|env|vue|svelte)\b",
    )
});
static VERSION: LazyLock<Regex> =
    LazyLock::new(|| ascii_regex(r"\bv?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.]+)?\b|\bv\d+\.\d+\b"));

/// The spans of the matches of `re` in `text`.
fn spans<'t>(re: &'static Regex, text: &'t str) -> impl Iterator<Item = Range<usize>> + 't {
    re.find_iter(text).map(|m| m.range())
}

/// camelCase words: a lower-case letter first, a capital later (`fetchUser`).
pub fn camel_case(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    spans(&CAMEL, text)
}

/// PascalCase words with two humps or more (`WebSocket`, `UserSession`).
pub fn pascal_case(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    spans(&PASCAL, text)
}

/// snake_case words: a letter, then parts joined by single underscores
/// (`token_ttl`, `MAX_SIZE`).
pub fn snake_case(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    spans(&SNAKE, text)
}

/// `http://` and `https://` URLs, up to white space, a quote, `<`, `>`, `]`
/// or `)`.
pub fn urls(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    spans(&URL, text)
}

/// Slash-separated paths (`src/auth/jwt.ts`, `~/x/y`, `/etc/hosts`) that are
/// plausibly paths: rooted (`/`, `./`, `../`, `~/`) and longer than two
/// bytes, or with two or more slashes, or ending in a name with an
/// extension (so `and/or`, `3/4` and `I/O` are not). A span may end in
/// sentence punctuation (`.`, `,`, `:`, `;`) the caller trims.
pub fn paths(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    PATH.find_iter(text)
        .filter(|m| plausible_path(m.as_str()))
        .map(|m| m.range())
}

/// Bare file names with a known source, config or document extension
/// (`README.md`, `main.rs`).
pub fn file_names(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    spans(&FILE_NAME, text)
}

/// Versions: `1.2.3` or `v1.2.3` with an optional pre-release or build
/// suffix (`-rc.1`, `+build`), or `v1.2`.
pub fn versions(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    spans(&VERSION, text)
}

/// The test of [`paths`] on one candidate.
fn plausible_path(p: &str) -> bool {
    let p = p.trim_end_matches(['.', ',', ':', ';']);
    if p.starts_with('/') || p.starts_with("./") || p.starts_with("../") || p.starts_with("~/") {
        return p.len() > 2;
    }
    let last = p.rsplit('/').next().unwrap_or("");
    let has_ext = last
        .rsplit_once('.')
        .is_some_and(|(a, e)| !a.is_empty() && (1..=6).contains(&e.len()));
    let slashes = p.matches('/').count();
    // "and/or", "3/4", "I/O" are not paths.
    (has_ext
        && !p
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'/' || b == b'.'))
        || slashes >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found<I: Iterator<Item = Range<usize>>>(text: &str, it: I) -> Vec<&str> {
        it.map(|r| &text[r]).collect()
    }

    #[test]
    fn each_recognizer() {
        let t = "see src/auth/jwt.ts, and/or 3/4 I/O ~/x/y.md. https://example.com/a?b=1) \
                 README.md v2.1.0 1.2.3-rc.1 v1.2 fetchUser WebSocket token_ttl MAX_SIZE";
        assert_eq!(
            found(t, paths(t)),
            vec!["src/auth/jwt.ts", "~/x/y.md.", "/example.com/a"]
        );
        assert_eq!(found(t, urls(t)), vec!["https://example.com/a?b=1"]);
        assert_eq!(found(t, file_names(t)), vec!["jwt.ts", "y.md", "README.md"]);
        assert_eq!(found(t, versions(t)), vec!["v2.1.0", "1.2.3-rc.1", "v1.2"]);
        assert_eq!(found(t, camel_case(t)), vec!["fetchUser"]);
        assert_eq!(found(t, pascal_case(t)), vec!["WebSocket"]);
        assert_eq!(found(t, snake_case(t)), vec!["token_ttl", "MAX_SIZE"]);
    }
}
