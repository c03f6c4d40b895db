//! Tool results: the exit status a result states, its payload, and the
//! judgement of success or failure.
//!
//! [`exit_code`] reads the status a result states, [`result_payload`] strips
//! the wrapper around the output, [`result_status`] judges success or failure
//! from both (and the provider's `is_error`); [`ResultFacts::of`] reads all of
//! them in one pass over a result's text, which the traffic index caches
//! (`traffic::result_facts`).

use super::{ExitReport, Status};
use ctxpress_text::lines::next_line;
use regex::Regex;
use std::sync::LazyLock;

static EXIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^exit code|exited with code|exit status|exit code|exit_code)\W{0,3}(-?\d+)")
        .expect("valid regex")
});

/// The exit code a result states in its first eight or last three lines
/// (`Exit code 1`, `Exit code: 0`, `Process exited with code 0`,
/// `[Command finished with exit code 1]`, `"exit_code": 0`).
pub fn exit_code(text: &str) -> Option<i64> {
    let t = text.trim_start();
    if t.starts_with('{') {
        static JSON_RE: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r#""exit_code"\s*:\s*(-?\d+)"#).expect("valid regex"));
        if let Some(c) = JSON_RE.captures(t) {
            return c.get(1).and_then(|m| m.as_str().parse().ok());
        }
    }
    // The first eight lines, then the last three of the rest, without
    // splitting the whole text; the first line stating a code decides.
    let mut from = 0;
    for _ in 0..8 {
        let Some((l, next)) = next_line(t, from) else {
            break;
        };
        from = next;
        if let Some(code) = stated_exit(l) {
            return code;
        }
    }
    let rest = t.get(from..).unwrap_or("");
    let mut tail = [""; 3];
    let mut k = 0;
    for (slot, l) in tail.iter_mut().zip(rest.lines().rev()) {
        *slot = l;
        k += 1;
    }
    tail.get(..k)?.iter().rev().find_map(|l| stated_exit(l))?
}

/// `Some` when the line states an exit code ([`EXIT_RE`] matches it), with
/// the code when it parses.
fn stated_exit(l: &str) -> Option<Option<i64>> {
    if l.len() > 200 || !may_state_exit(l) {
        return None;
    }
    if l.is_ascii() {
        return ascii_stated_exit(l);
    }
    regex_stated_exit(l)
}

/// [`stated_exit`] by [`EXIT_RE`] (lines with a non-ASCII character).
fn regex_stated_exit(l: &str) -> Option<Option<i64>> {
    EXIT_RE
        .captures(l)
        .map(|c| c.get(1).and_then(|m| m.as_str().parse().ok()))
}

/// `b` starts with `p` (ASCII), ignoring ASCII case.
fn starts_ci(b: &[u8], p: &[u8]) -> bool {
    b.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p))
}

/// A word character of an ASCII text (what Unicode `\w` is there).
fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// What [`EXIT_RE`] finds in the ASCII line `l`, without the regex: its
/// match starts at the leftmost `exit` (in any ASCII case, the only case
/// folding an ASCII text allows) that one of its phrases starts at and the
/// code follows (`^exit code` is `exit code` at the start). `\W{0,3}` is
/// greedy and what it takes decides: backing off leaves a non-word byte
/// before the code, which only `-` followed by a digit could start, and a
/// digit there would have stopped the greedy run.
fn ascii_stated_exit(l: &str) -> Option<Option<i64>> {
    let b = l.as_bytes();
    for p in memchr::memchr2_iter(b'x', b'X', b) {
        let Some(s) = p.checked_sub(1) else {
            continue;
        };
        let rest = b.get(s..).unwrap_or(&[]);
        let Some(k) = [
            &b"exited with code"[..],
            b"exit status",
            b"exit code",
            b"exit_code",
        ]
        .into_iter()
        .find(|k| starts_ci(rest, k)) else {
            continue;
        };
        let mut q = s + k.len();
        let mut skipped = 0;
        while skipped < 3 && b.get(q).is_some_and(|&c| !is_word(c)) {
            q += 1;
            skipped += 1;
        }
        let start = q;
        if b.get(q) == Some(&b'-') && b.get(q + 1).is_some_and(u8::is_ascii_digit) {
            q += 1;
        }
        let digits = q;
        while b.get(q).is_some_and(u8::is_ascii_digit) {
            q += 1;
        }
        if q == digits {
            continue;
        }
        return Some(l.get(start..q).and_then(|c| c.parse().ok()));
    }
    None
}

/// False only when [`EXIT_RE`] cannot match `l`: every alternative holds
/// `exit` in some case, and case folding maps no non-ASCII character onto
/// `e`, `x`, `i` or `t` (a test checks all of Unicode), so a match holds
/// those four ASCII bytes even in a line with other characters (which then
/// goes to the regex).
fn may_state_exit(l: &str) -> bool {
    let b = l.as_bytes();
    // An `exit` window is found at its `x`.
    memchr::memchr2_iter(b'x', b'X', b).any(|p| {
        p >= 1
            && b.get(p - 1..p + 3)
                .is_some_and(|w| w.eq_ignore_ascii_case(b"exit"))
    })
}

static FAIL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)error:|\bfailed\b|exception|command not found|permission denied|no such file|cannot|fatal:")
        .expect("valid regex")
});

fn is_footer(l: &str) -> bool {
    let t = l.trim();
    t.starts_with("(Open file:") || t.starts_with("(Current directory:") || t == "bash-$"
}

/// The payload of a tool result: the output after a Codex `Output:` header, or
/// the whole text, with SWE-agent's `(Open file: ...)` footer dropped.
pub fn result_payload(text: &str) -> &str {
    let (start, end) = payload_range(text);
    text.get(start..end).unwrap_or("")
}

/// Where [`result_payload`] lies in `text`: (start, end) byte offsets.
fn payload_range(text: &str) -> (usize, usize) {
    // Codex exec_command / shell_command headers.
    let mut start = 0;
    let mut off = 0;
    for _ in 0..8 {
        let Some((line, next)) = next_line(text, off) else {
            break;
        };
        off = next;
        if line.trim_end() == "Output:" {
            start = off;
            break;
        }
    }
    let t = text.get(start..).unwrap_or("");
    // SWE-agent footer.
    let mut end = t.len();
    for line in t.lines().rev().take(4) {
        if line.trim().is_empty() || is_footer(line) {
            if let Some(p) = t.get(..end).and_then(|s| s.rfind(line)) {
                end = p;
            }
        } else {
            break;
        }
    }
    (start, start + end)
}

/// "0 failed", "failed: 0", "0 errors": a passing summary's counts.
static ZERO_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b0\s+failed\b|\bfailed\W{0,2}\s*0\b|\b0\s+errors?\b").expect("valid regex")
});

/// True when one line matches the spec's error patterns ("0 failed" and
/// "failed: 0" of a passing summary do not count).
pub fn line_looks_failed(line: &str) -> bool {
    match fail_words(line.as_bytes()) {
        FailWords::Other => true,
        FailWords::Failed => !ZERO_RE.is_match(line),
        FailWords::None => false,
        FailWords::Unsure => regex_looks_failed(line),
    }
}

/// [`line_looks_failed`] by [`FAIL_RE`] (what [`fail_words`] cannot
/// decide without it, and the reference its tests hold it to).
fn regex_looks_failed(line: &str) -> bool {
    FAIL_RE.find_iter(line).any(|m| {
        if m.as_str().eq_ignore_ascii_case("failed") {
            !ZERO_RE.is_match(line)
        } else {
            true
        }
    })
}

/// What [`FAIL_RE`] finds in a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailWords {
    /// A pattern other than `failed`.
    Other,
    /// Only `failed` (as a word).
    Failed,
    /// Nothing.
    None,
    /// Only the regex can tell (see [`fail_words`]).
    Unsure,
}

/// The bytes [`fail_words`] stops at: the anchors of the patterns, in
/// either ASCII case, and the lead byte of `ſ`.
static FAIL_ANCHORS: [bool; 256] = {
    let mut t = [false; 256];
    let anchors = *b":xXfFpPcC\xC5";
    let mut k = 0;
    while k < anchors.len() {
        t[anchors[k] as usize] = true;
        k += 1;
    }
    t
};

/// The patterns of [`FAIL_RE`] in the line `b`, without the regex: each is
/// found at one of its letters that text seldom holds (`:` of `error:` and
/// `fatal:`, `x` of `exception`, `f` of `failed`, `command not found` and
/// `no such file`, `p` of `permission denied`, `c` of `cannot`) and
/// compared in any ASCII case. No pattern can overlap `failed`, so the
/// regex's leftmost matches miss nothing this finds: the line matches when
/// any pattern occurs.
///
/// Case folding maps only one non-ASCII character onto a letter of the
/// patterns (`ſ` onto `s`): a line with one is [`FailWords::Unsure`], as is
/// a line whose only `failed` has a non-ASCII neighbour (Unicode `\b`);
/// an ASCII neighbour is a word byte when `[0-9A-Za-z_]`.
fn fail_words(b: &[u8]) -> FailWords {
    let at = |start: Option<usize>, p: &[u8]| {
        start.is_some_and(|s| {
            b.get(s..s + p.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(p))
        })
    };
    let mut failed = false;
    let mut unsure = false;
    let stop = each_anchor(b, |i| {
        let c = *b.get(i)?;
        let other = match c | 0x20 {
            b':' => at(i.checked_sub(5), b"error:") || at(i.checked_sub(5), b"fatal:"),
            b'x' => at(i.checked_sub(1), b"exception"),
            b'f' => {
                if !failed && at(Some(i), b"failed") {
                    let before = i.checked_sub(1).and_then(|k| b.get(k)).copied();
                    let after = b.get(i + 6).copied();
                    if before.is_some_and(|w| !w.is_ascii()) || after.is_some_and(|w| !w.is_ascii())
                    {
                        unsure = true;
                    } else if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
                        failed = true;
                    }
                }
                at(i.checked_sub(12), b"command not found") || at(i.checked_sub(8), b"no such file")
            }
            b'p' => at(Some(i), b"permission denied"),
            b'c' => at(Some(i), b"cannot"),
            _ => {
                // `ſ` (U+017F) folds to `s`.
                if b.get(i + 1) == Some(&0xBF) {
                    return Some(FailWords::Unsure);
                }
                false
            }
        };
        other.then_some(FailWords::Other)
    });
    if let Some(w) = stop {
        w
    } else if failed {
        FailWords::Failed
    } else if unsure {
        FailWords::Unsure
    } else {
        FailWords::None
    }
}

/// Calls `f` with the index of every byte of `b` that [`FAIL_ANCHORS`]
/// holds, in order, until it answers; 16 bytes at a time (a lane with none
/// is passed over at once).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn each_anchor<T>(b: &[u8], mut f: impl FnMut(usize) -> Option<T>) -> Option<T> {
    use ctxpress_text::sse2::{eq, lanes, splat};
    use safe_arch::{bitor_m128i, move_mask_i8_m128i};
    for (base, v) in lanes(b) {
        // ASCII letters lowered (and a few other bytes mapped onto the
        // anchors: the table below is exact).
        let lo = bitor_m128i(v, splat(0x20));
        let m = bitor_m128i(
            bitor_m128i(
                bitor_m128i(eq(lo, b':'), eq(lo, b'x')),
                bitor_m128i(eq(lo, b'f'), eq(lo, b'p')),
            ),
            bitor_m128i(eq(lo, b'c'), eq(v, 0xC5)),
        );
        let mut bits = move_mask_i8_m128i(m) as u32;
        while bits != 0 {
            let i = base + bits.trailing_zeros() as usize;
            if b.get(i).is_some_and(|&c| FAIL_ANCHORS[usize::from(c)])
                && let Some(x) = f(i)
            {
                return Some(x);
            }
            bits &= bits - 1;
        }
    }
    each_anchor_scalar(b, b.len() / 16 * 16, f)
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn each_anchor<T>(b: &[u8], f: impl FnMut(usize) -> Option<T>) -> Option<T> {
    each_anchor_scalar(b, 0, f)
}

/// [`each_anchor`] from `from` on, a byte at a time.
fn each_anchor_scalar<T>(
    b: &[u8],
    from: usize,
    mut f: impl FnMut(usize) -> Option<T>,
) -> Option<T> {
    for (k, &c) in b.get(from..).unwrap_or(&[]).iter().enumerate() {
        if FAIL_ANCHORS[usize::from(c)]
            && let Some(x) = f(from + k)
        {
            return Some(x);
        }
    }
    None
}

/// Judge a tool result: `is_error`, `<tool_use_error>`, a stated exit code,
/// the tool's exit convention, then the error patterns on the first and last
/// non-empty lines of the output (never anywhere in it).
///
/// Stages that judge the same result more than once (or that also need its
/// exit code or payload) work its [`ResultFacts`] out once instead; see
/// [`crate::traffic::result_facts`].
pub fn result_status(exit: ExitReport, text: &str, is_error: Option<bool>) -> Status {
    judge(
        exit,
        text,
        is_error,
        || exit_code(text),
        || payload_edge_failed(result_payload(text)),
    )
}

/// The judgement of [`result_status`], with the text's exit code and the
/// failed-edge test given as functions (called only when the rules reach
/// them), so [`ResultFacts::status`] can answer from its facts.
fn judge(
    exit: ExitReport,
    text: &str,
    is_error: Option<bool>,
    exit_code: impl FnOnce() -> Option<i64>,
    edge_failed: impl FnOnce() -> bool,
) -> Status {
    if is_error == Some(true) {
        return Status::Failure;
    }
    let t = text.trim_start();
    if t.starts_with("<tool_use_error>") || t.starts_with("Error: ") && t.len() < 400 {
        return Status::Failure;
    }
    if let Some(code) = exit_code() {
        return if code == 0 {
            Status::Success
        } else {
            Status::Failure
        };
    }
    if exit == ExitReport::OnFailure {
        return Status::Success;
    }
    if edge_failed() {
        return Status::Failure;
    }
    if is_error == Some(false) {
        Status::Success
    } else {
        Status::Unknown
    }
}

/// The first or last non-empty line of `payload` looks failed.
fn payload_edge_failed(payload: &str) -> bool {
    let mut lines = payload.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next();
    let last = lines.next_back();
    first.is_some_and(line_looks_failed) || last.is_some_and(line_looks_failed)
}

/// What a tool result's text states, independent of the tool that produced
/// it: everything [`result_status`], [`exit_code`] and [`result_payload`]
/// read from the text, worked out in one go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultFacts {
    /// [`exit_code`] of the text.
    pub exit_code: Option<i64>,
    /// Start of [`result_payload`] in the text (a byte offset).
    pub payload_start: usize,
    /// End of [`result_payload`] in the text (a byte offset).
    pub payload_end: usize,
    /// The first or last non-empty line of the payload matches the error
    /// patterns ([`line_looks_failed`]). Only worked out when the text
    /// states no exit code (a stated code decides first).
    pub edge_failed: bool,
}

impl ResultFacts {
    /// The facts of `text`.
    pub fn of(text: &str) -> ResultFacts {
        let exit_code = exit_code(text);
        let (payload_start, payload_end) = payload_range(text);
        let payload = text.get(payload_start..payload_end).unwrap_or("");
        let edge_failed = exit_code.is_none() && payload_edge_failed(payload);
        ResultFacts {
            exit_code,
            payload_start,
            payload_end,
            edge_failed,
        }
    }

    /// [`result_payload`] of `text`, the text these facts are of.
    pub fn payload<'a>(&self, text: &'a str) -> &'a str {
        text.get(self.payload_start..self.payload_end).unwrap_or("")
    }

    /// [`result_status`] of `text`, the text these facts are of.
    pub fn status(&self, exit: ExitReport, text: &str, is_error: Option<bool>) -> Status {
        judge(exit, text, is_error, || self.exit_code, || self.edge_failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn facts_judge_as_result_status_does() {
        let texts = [
            "",
            "ok",
            "Exit code 1\nboom",
            "Exit code: 0\nerror: but the code says ok",
            "<tool_use_error>no</tool_use_error>",
            "Error: short",
            "  Error: indented",
            "bash: foo: command not found",
            "ok\nerror: in the middle\nfine",
            "first line\n\nFAILED tests/x.py::t\n",
            "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\nerror: x\n",
            "Output:\nfine\n(Open file: /a.py)\n(Current directory: /)\nbash-$",
            "{\"output\": \"x\", \"metadata\": {\"exit_code\": 3}}",
            "3 passed, 0 failed",
            "héllo wörld\nexit status 0",
            "\n\n\n",
        ];
        for t in texts {
            let f = ResultFacts::of(t);
            assert_eq!(f.exit_code, exit_code(t), "{t:?}");
            assert_eq!(f.payload(t), result_payload(t), "{t:?}");
            for exit in [
                ExitReport::Unknown,
                ExitReport::Always,
                ExitReport::OnFailure,
            ] {
                for is_error in [None, Some(true), Some(false)] {
                    assert_eq!(
                        f.status(exit, t, is_error),
                        result_status(exit, t, is_error),
                        "{t:?} {exit:?} {is_error:?}"
                    );
                }
            }
        }
    }

    /// Lines made of the patterns' pieces, in any case, with the bytes
    /// around them that decide a match.
    fn pieces() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("exit".to_string()),
            Just("exited with code".to_string()),
            Just("exit status".to_string()),
            Just("exit code".to_string()),
            Just("exit_code".to_string()),
            Just("error:".to_string()),
            Just("failed".to_string()),
            Just("exception".to_string()),
            Just("command not found".to_string()),
            Just("permission denied".to_string()),
            Just("no such file".to_string()),
            Just("cannot".to_string()),
            Just("fatal:".to_string()),
            Just(" 0 ".to_string()),
            Just("errors".to_string()),
            "[-0-9 :_=x\\[\\]\"a-z]{0,4}",
            "[ :=\t-]{1,4}",
            "[ :=\t-]{1,4}-?[0-9]{1,3}",
            "[-0-9]{1,25}",
            "[a-z]{1,5}",
            "canno[a-z]?",
            "[é \u{212a}\u{17f}]{1,2}",
        ];
        prop::collection::vec((piece, any::<u32>()), 0..6).prop_map(|v| {
            v.into_iter()
                .map(|(p, mask)| {
                    p.chars()
                        .enumerate()
                        .map(|(i, c)| {
                            if mask >> (i % 32) & 1 == 1 {
                                c.to_ascii_uppercase()
                            } else {
                                c
                            }
                        })
                        .collect::<String>()
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn exit_codes_are_read_as_by_the_regex(l in pieces()) {
            if l.is_ascii() && may_state_exit(&l) {
                prop_assert_eq!(ascii_stated_exit(&l), regex_stated_exit(&l), "{:?}", l);
            }
            prop_assert_eq!(stated_exit(&l).is_some(), l.len() <= 200 && EXIT_RE.is_match(&l));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn failed_lines_are_judged_as_by_the_regex(l in pieces()) {
            prop_assert_eq!(line_looks_failed(&l), regex_looks_failed(&l), "{:?}", l);
        }
    }

    proptest! {
        /// The lanes find the anchors a byte-at-a-time walk finds.
        #[test]
        fn anchors_are_found_as_byte_by_byte(b in proptest::collection::vec(prop_oneof![
            Just(b':'), Just(b'x'), Just(b'X'), Just(b'f'), Just(b'F'), Just(b'p'), Just(b'C'),
            Just(0xC5u8), Just(0xE5u8), Just(0x1Au8), Just(0x58u8), any::<u8>(),
        ], 0..70)) {
            let mut lanes = Vec::new();
            let none: Option<()> = each_anchor(&b, |i| { lanes.push(i); None });
            prop_assert!(none.is_none());
            let mut bytes = Vec::new();
            let _: Option<()> = each_anchor_scalar(&b, 0, |i| { bytes.push(i); None });
            prop_assert_eq!(&lanes, &bytes);
            let first = each_anchor(&b, Some);
            prop_assert_eq!(first, bytes.first().copied());
        }
    }

    /// `fail_words` knows one non-ASCII character that case folding maps
    /// onto a letter of the patterns: `ſ`. The only other one maps onto
    /// `k`, which no pattern holds.
    #[test]
    fn only_long_s_folds_onto_a_pattern_letter() {
        let letter = Regex::new("(?i)^[a-z]$").expect("valid regex");
        let folding: Vec<char> = (0x80u32..=0x10FFFF)
            .filter_map(char::from_u32)
            .filter(|c| letter.is_match(c.encode_utf8(&mut [0u8; 4])))
            .collect();
        assert_eq!(folding, vec!['\u{17f}', '\u{212a}']);
        // (`may_state_exit` relies on it too: none folds onto e, x, i, t.)
        assert!(!FAIL_RE.as_str().to_ascii_lowercase().contains('k'));
    }

    #[test]
    fn failed_lines_are_judged_as_by_the_regex_on_fixed_lines() {
        let lines = [
            "",
            "error: x",
            "ERROR:",
            "error :",
            "errors:",
            "Fatal: no",
            "fatal",
            "FAILED tests/x.py::t",
            "failed",
            "unfailed",
            "failed_x",
            "x_failed",
            "failed2",
            "(failed)",
            "3 passed, 0 failed",
            "failed: 0",
            "Failed:0",
            "0 errors, failed",
            "0 errors, error: x",
            "Exception in thread",
            "xException",
            "bash: foo: command not found",
            "command not foun",
            "Permission Denied",
            "permission  denied",
            "cat: x: No such file or directory",
            "no such fil",
            "Cannot open",
            "cannnot",
            "it failed, then fatal: x",
            "\x1aerror\x1a",
            "failedfailed failed",
            "héllo failed",
            "éfailed",
            "failedé",
            "é failed é",
            "     1→fn main() {}",
            "     9→error: x",
            "permi\u{17f}\u{17f}ion denied",
            "no \u{17f}uch file",
            "\u{17f} failed",
            "\u{5000}failed",
        ];
        for l in lines {
            assert_eq!(line_looks_failed(l), regex_looks_failed(l), "{l:?}");
        }
        assert!(line_looks_failed("error: x"));
        assert!(!line_looks_failed("3 passed, 0 failed"));
        assert!(line_looks_failed("FAILED tests/x.py::t"));
    }

    #[test]
    fn lines_state_exit_codes_as_the_regex_reads_them() {
        let lines = [
            "Exit code 1",
            "exit code -1",
            "exit code  --5",
            "exit code: - -1",
            "EXIT CODE:   7",
            "x exit code 99999999999999999999999",
            "Process exited with code 0",
            "exit statusx 3, exit status 4",
            "exit_code=12",
            "exit code\t\t\t8",
            "exit code____9",
            "3 passed, 0 failed",
            "failed: 0",
            "FAILED tests/x.py::t",
            "unfailed",
            "failed_x",
            "0 errors, failed",
            "Permission Denied",
            "bash: foo: command not found",
            "fatal: not a git repository",
            "",
        ];
        for l in lines {
            assert_eq!(stated_exit(l), regex_stated_exit(l), "{l:?}");
        }
    }

    #[test]
    fn the_exit_prefilter_passes_every_line_the_regex_matches() {
        let lines = [
            "Exit code 1",
            "EXIT CODE: 2",
            "Process exited with code 0",
            "[Command finished with exit code 127]",
            "\"exit_code\": 3",
            "eXiT sTaTuS 4",
            "exit status -1",
            "ünïcode exit code 5",
            "no code here",
            "",
        ];
        for l in lines {
            if EXIT_RE.is_match(l) {
                assert!(may_state_exit(l), "{l:?}");
            }
        }
        assert!(!may_state_exit("no code here"));
        assert!(!may_state_exit("     1→fn main() {}"));
        assert!(may_state_exit("ünïcode exit code 5"));
        assert!(may_state_exit("Exit"));
    }
}
