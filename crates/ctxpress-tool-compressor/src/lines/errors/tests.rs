//! Tests of error, diagnostic and count lines and their prefilters.

use super::*;
use crate::lines::outline::HEADING;
use crate::lines::tests::xorshift;
use crate::lines::{is_heading, split_numbered, trim};

#[test]
fn error_lines_are_the_two_regexes() {
    let old = |l: &str| ERROR_LINE.is_match(l) && !ZERO_FAIL.is_match(l);
    let cases = [
        "error: build failed",
        "0 failed, 3 passed",
        "Tests: 0 failures",
        "errors: 0",
        "FAILED (errors=0)",
        "failed 10",
        "failures: 00",
        "0\u{a0}failed",
        "ERRORS:\t0",
        "error\u{2003}0 error",
        "TypeError: x is 0",
    ];
    for l in cases
        .into_iter()
        .chain(include_str!("../mod.rs").lines())
        .chain(include_str!("../prefixes.rs").lines())
        .chain(include_str!("../outline.rs").lines())
        .chain(include_str!("../errors.rs").lines())
        .chain(include_str!("../references.rs").lines())
        .chain(include_str!("../terms.rs").lines())
        .chain(include_str!("../../summary.rs").lines())
    {
        assert_eq!(is_error_line(l), old(l), "{l:?}");
    }
}

proptest::proptest! {
    #[test]
    fn error_lines_on_random_texts(
        l in "(0|1|failed|Failures|error|ERRORS|s|:|=|\\(| |\t|\u{a0}|x){0,12}",
    ) {
        proptest::prop_assert_eq!(
            is_error_line(&l),
            ERROR_LINE.is_match(&l) && !ZERO_FAIL.is_match(&l)
        );
    }
}

#[test]
fn error_and_count_lines() {
    assert!(is_error_line("TypeError: x is undefined"));
    assert!(is_error_line("error[E0308]: mismatched types"));
    assert!(is_error_line("--- FAIL: TestLogin (0.01s)"));
    assert!(!is_error_line("Tests: 0 failed, 12 passed"));
    assert!(!is_error_line("compiled fine"));
    assert!(is_count_line("Tests:       12 passed, 12 total"));
    assert!(is_count_line(
        "ok  \tcampus-portal/internal/handlers\t1.459s"
    ));
    assert!(is_count_line("===== 3 passed in 0.12s ====="));
    assert!(!is_count_line("hello world"));
    assert!(is_diagnostic(
        "internal/handler/audit.go:5:2: \"database/sql\" imported and not used"
    ));
    assert!(is_diagnostic(
        "src/api/routes.ts(72,57): error TS2322: Type"
    ));
    assert!(!is_diagnostic("Compiling app v0.1.0"));
    assert!(is_count_line(
        "agentId: a4f441da0e38d5fcc (use SendMessage to continue)"
    ));
    assert!(is_error_line(
        "  x  10 [chromium] › tests/03.spec.ts:17:7 › loads (5.7s)"
    ));
}

/// Random lines of the words and marks the error and heading patterns
/// look for: each cheap condition lets through every line its regex
/// matches, in a text of numbered lines too.
#[test]
fn line_prefilters_pass_random_lines() {
    const TOKENS: &[&str] = &[
        "error",
        "Error",
        "ERROR",
        "TypeError",
        "errors",
        "FAILED",
        "FAIL",
        "failed",
        "failures",
        "panic",
        "Panic",
        "Traceback",
        "Exception",
        "exception",
        "fatal",
        "FATAL",
        "Segmentation fault",
        "command not found",
        "No such file",
        "Permission denied",
        "✗",
        "✘",
        "✖",
        "x",
        "×",
        "X",
        "0",
        "3",
        "12",
        "٣",
        "passed",
        "tests",
        "test",
        "test suites",
        "specs",
        "warnings",
        "matches",
        "files",
        "lines",
        "rows",
        "modules",
        "vulnerabilities",
        "assertions",
        "ok",
        "Ok",
        "PASS",
        "pass",
        "---",
        "--",
        "===",
        "=",
        "duration",
        "time",
        "Time",
        "ran",
        "exit",
        "exited",
        "EXIT",
        "with",
        "code",
        "status",
        "build",
        "Build",
        "succeeded",
        "compiled",
        "successfully",
        "agent",
        "session",
        "task",
        "taſk",
        "Kelvin\u{212a}",
        "request",
        "run",
        "chunk",
        "id",
        "ID",
        "_id",
        "-id",
        "Id",
        "idx",
        ":",
        ";",
        ",",
        ".",
        "#",
        "##",
        "a",
        "plain",
        "words",
        "é",
    ];
    const SPACES: &[&str] = &[" ", " ", "", "\t", "  ", "\u{a0}", "\u{2003}"];
    let mut next = xorshift(0x853c_49e6_748f_ea9b);
    let mut matched = [0usize; 2];
    for _ in 0..400 {
        let mut text = String::new();
        let numbered = next(2) == 0;
        for n in 1..=40 {
            if numbered {
                text.push_str(&format!("{n:>6}\t"));
            }
            for _ in 0..next(3) {
                text.push_str(SPACES[next(SPACES.len())]);
            }
            for k in 0..next(8) {
                if k > 0 {
                    text.push_str(SPACES[next(SPACES.len())]);
                }
                text.push_str(TOKENS[next(TOKENS.len())]);
            }
            text.push_str(if next(5) == 0 { "\r\n" } else { "\n" });
        }
        let lines = split_numbered(&text);
        let maybe_error = error_line_candidates(&text, &lines);
        assert_eq!(maybe_error.len(), lines.len());
        for (l, maybe) in lines.iter().zip(maybe_error) {
            let body = l.body;
            if ERROR_LINE.is_match(body) {
                matched[0] += 1;
                assert!(maybe, "{body:?}");
            }
            assert_eq!(is_heading(body), HEADING.is_match(body), "{body:?}");
            // The outline's prefilter of Markdown headings (on the
            // trimmed line).
            assert!(
                trim(body).starts_with('#') || !HEADING.is_match(body),
                "{body:?}"
            );
            matched[1] += usize::from(HEADING.is_match(body));
        }
    }
    assert!(matched.iter().all(|n| *n > 100), "{matched:?}");
}
