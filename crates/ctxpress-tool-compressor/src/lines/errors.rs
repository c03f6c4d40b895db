//! Error, diagnostic and count lines of command output: lines that say
//! something failed ([`is_error_line`], with a one-search prefilter over a
//! whole text), compiler-style `file:line: message` locations
//! ([`is_diagnostic`]) and lines that count (test summaries, match counts:
//! [`is_count_line`]).

use super::Line;
use super::re;
use regex::Regex;
use std::sync::LazyLock;

static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?:(?-u:\b)error(?-u:\b)|(?-u:\b)Error(?-u:\b)|ERROR|FAILED|(?-u:\b)FAIL(?-u:\b)|(?-u:\b)failed(?-u:\b)|[Pp]anic|Traceback|[A-Z]\w*(?:Error|Exception)(?-u:\b)|(?-u:\b)exception(?-u:\b)|(?-u:\b)fatal(?-u:\b)|FATAL|Segmentation fault|command not found|No such file|[Pp]ermission denied|✗|✘|✖|^\s*(?:x|×)\s+\d+\s)",
    )
});
static ZERO_FAIL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)0\s+(?:failed|errors?|failures?)(?-u:\b)|(?-u:\b)(?:failed|errors?|failures?)\W{0,2}\s*0(?-u:\b)",
    )
});

/// True when the line reports an error (and not "0 failed" / "errors: 0").
/// Both alternatives of `ZERO_FAIL` hold the literal `0` (which case
/// folding maps to nothing else): a line without one is not searched.
pub fn is_error_line(line: &str) -> bool {
    ERROR_LINE.is_match(line)
        && !(memchr::memchr(b'0', line.as_bytes()).is_some() && ZERO_FAIL.is_match(line))
}

/// What every alternative of [`ERROR_LINE`] holds but its first-column
/// `x` one: a literal (a whole-text search for them is fast, a per-line
/// regex is not).
static ERROR_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        "rror|RROR|FAIL|ailed|anic|Traceback|xception|atal|ATAL|Segmentation fault|command not found|No such file|ermission denied|✗|✘|✖",
    )
});

/// For each of `lines` (cut from `text` by [`split_numbered`](super::split_numbered)), false when
/// [`is_error_line`] is false for it: the line holds none of the literals
/// of `ERROR_WORDS` (found in one search of `text`; none spans a line break,
/// nor a line-number prefix and the line after it) and does not start
/// with `x` or `×` after white space.
pub fn error_line_candidates(text: &str, lines: &[Line<'_>]) -> Vec<bool> {
    let base = text.as_ptr() as usize;
    let mut hits = ERROR_WORDS.find_iter(text).map(|m| m.start()).peekable();
    lines
        .iter()
        .map(|l| {
            let Some(start) = (l.body.as_ptr() as usize)
                .checked_sub(base)
                .filter(|s| s + l.body.len() <= text.len())
            else {
                return true;
            };
            while hits.next_if(|h| *h < start).is_some() {}
            let t = l.body.trim_start();
            hits.peek().is_some_and(|h| *h < start + l.body.len())
                || t.starts_with('x')
                || t.starts_with('×')
        })
        .collect()
}

static COUNT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:(?-u:\b)\d+\s+(?:passed|failed|tests?|specs?|errors?|warnings?|matches|files?|lines|skipped|pending|suites?|examples?|assertions?|failures?|succeeded|changed|insertions?|deletions?|packages?|vulnerabilit(?:y|ies)|problems?|modules?|rows?)(?-u:\b)|^\s*(?:tests?|test suites|test files|duration|time|ran)\s*:|^(?:ok|FAIL|PASS|---\s*(?:PASS|FAIL))\s|(?-u:\b)ran\s+\d+\s+tests?|^=+\s.*\s=+$|(?-u:\b)exit(?:ed)?\s+(?:with\s+)?(?:code|status)(?-u:\b)|(?-u:\b)build\s+(?:succeeded|failed|successful)(?-u:\b)|(?-u:\b)compiled\s+successfully(?-u:\b)|(?i:(?-u:\b)(?:agent|session|task|job|process|container|request|run|build|chunk)[ _-]?id(?-u:\b)))",
    )
});

static DIAGNOSTIC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:[A-Za-z]:)?[^\s:]+\.\w{1,6}(?::\d+){1,2}:?\s|^\s*(?:[A-Za-z]:)?[^\s:(]+\.\w{1,6}\(\d+,\d+\):\s",
    )
});

/// True for a compiler-style location line (`src/a.go:5:2: ...`,
/// `src/a.ts(72,57): ...`): in the output of a failed command, a diagnostic.
pub fn is_diagnostic(line: &str) -> bool {
    DIAGNOSTIC.is_match(line)
}

/// True for a line that states counts or an outcome (test summaries, match
/// counts, exit status).
pub fn is_count_line(line: &str) -> bool {
    COUNT_LINE.is_match(line)
}

#[cfg(test)]
mod tests;
