//! Stack traces of Python, Java/Kotlin, Rust, Node and Go: a header, or
//! two frame lines.

use regex::Regex;
use std::sync::LazyLock;

use super::re;

pub(crate) static TRACE_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?m)Traceback \(most recent call last\):",
        r#"|Exception in thread "[^"\n]*" "#,
        r"|thread '[^'\n]*' panicked at ",
        r"|panicked at [^\n]*\.rs:[0-9]+:[0-9]+",
        r"|^goroutine [0-9]+ \[[a-z ]+\]:",
        r"|^[[A-Za-z0-9_].$]*(?:Error|Exception)(?::[^\n]*)?\r?\n[ \t]+at [^\n]+(?:\.(?:java|kt|scala|groovy):[0-9]+\)|:[0-9]+:[0-9]+\)?)",
    ))
});

pub(crate) static TRACE_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?m)^[ \t]+at [^\n]*?(?:\.(?:java|kt|scala|groovy):[0-9]+\)|\(Native Method\)|\(Unknown Source\)|:[0-9]+:[0-9]+\)?)\r?$",
        r#"|^[ \t]*File "[^"\n]+", line [0-9]+"#,
        r"|^[ \t]+[0-9]+: [[A-Za-z0-9_]:<>${}\[\] ]+?::[[A-Za-z0-9_]:<>${}\[\] ]+\r?$",
    ))
});

/// Python, Java/Kotlin, Rust, Node and Go stack traces: a header, or two
/// frame lines. `frame_like` says whether some line starts like a frame (the
/// scan's gate for the patterns without a literal), `literal` whether a
/// header literal occurs ([`LowerWords`](super::keywords::LowerWords)).
pub(super) fn has_traceback(text: &str, frame_like: bool, literal: bool) -> bool {
    (frame_like || literal)
        && (TRACE_HEADER.is_match(text) || TRACE_FRAME.find_iter(text).nth(1).is_some())
}

/// A line that starts like a stack frame: `File "`, or indented `at ` or
/// `12: ` (the Java header alternative has such a line too).
pub(super) fn frame_like_line(lb: &[u8]) -> bool {
    let k = lb.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
    let rest = lb.get(k..).unwrap_or(&[]);
    if rest.starts_with(b"File \"") {
        return true;
    }
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    k > 0
        && (rest.starts_with(b"at ")
            || (digits > 0 && rest.get(digits..).is_some_and(|r| r.starts_with(b": "))))
}
