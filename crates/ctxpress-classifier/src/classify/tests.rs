//! Tests of the fast classifier: its parts, and agreement with
//! `crate::reference` on the corpus and on random texts and lines.

use super::classify;
use super::fences::prose_chars;
use super::lines::trim_start;
use super::scan::{MASKS, count_words, scan_with};
use super::scanned::Scan;
use super::tokens::long_token_runs;
use ctxpress_core::Reason;

fn scan(text: &str) -> Scan {
    MASKS.with_borrow_mut(|m| scan_with(text, m))
}

#[test]
fn long_token_runs_are_the_maximal_runs_of_20() {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..3000 {
        // dense words (three draws or-ed) make long runs and runs across words
        let words: Vec<u64> = (0..next() % 5)
            .map(|_| match next() % 4 {
                0 => u64::MAX,
                1 => next(),
                _ => next() | next() | next(),
            })
            .collect();
        let set = |i: usize| words[i / 64] >> (i % 64) & 1 == 1;
        let mut naive = Vec::new();
        let mut i = 0;
        while i < 64 * words.len() {
            let e = (i..64 * words.len())
                .find(|&j| !set(j))
                .unwrap_or(64 * words.len());
            if e - i >= 20 {
                naive.push((i, e));
            }
            i = e + 1;
        }
        assert_eq!(long_token_runs(&words), naive, "{words:x?}");
    }
}

#[test]
fn trim_start_is_the_std_trim() {
    for t in [
        "",
        "   ",
        "a",
        " a ",
        "\t\r\n x",
        "\u{b} x",
        " \u{a0}x",
        "\t\u{3000}y",
        "\u{1c}z",
        "é",
    ] {
        assert_eq!(trim_start(t), t.trim_start(), "{t:?}");
    }
}

#[test]
fn prose_chars_counts_outside_fences() {
    assert_eq!(prose_chars("ab\n```\nxxxxxxxx\n```\n cd "), 4);
    assert_eq!(prose_chars(""), 0);
}

#[test]
fn word_counts_cjk() {
    assert_eq!(count_words("one two  three", usize::MAX), 3);
    assert_eq!(count_words("日本語です", usize::MAX), 5);
    assert_eq!(count_words("", usize::MAX), 0);
    assert_eq!(count_words(" a\tb\n\nc ", usize::MAX), 3);
    assert_eq!(count_words(&"w ".repeat(100), 20), 20);
    assert_eq!(count_words("é a", usize::MAX), 2);
}

#[test]
fn special_ratio_ignores_markdown_emphasis() {
    let s = scan("# Title\n* **Bold**: text");
    assert_eq!(s.special, 1);
}

#[test]
fn line_variance_needs_more_than_three_lines() {
    let t = format!("a\n{}\nb", "x".repeat(500));
    assert!(!scan(&t).lines.high_variance());
    let t = format!("a\nb\nc\nd\ne\n{}", "x".repeat(500));
    assert!(scan(&t).lines.high_variance());
}

/// Every text of every message of the shared corpus: string contents and
/// the text of content blocks (empty when `../shared` is absent).
fn corpus_texts() -> Vec<String> {
    fn collect(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) if !s.is_empty() => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            serde_json::Value::Object(o) => {
                for k in ["text", "content"] {
                    if let Some(x) = o.get(k) {
                        collect(x, out);
                    }
                }
            }
            _ => {}
        }
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.filter_map(Result::ok) {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        for line in std::fs::read_to_string(&p).unwrap_or_default().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            for m in v["messages"].as_array().into_iter().flatten() {
                collect(&m["content"], &mut out);
            }
        }
    }
    out
}

#[test]
fn agrees_with_reference_on_the_corpus() {
    let texts = corpus_texts();
    let mut differ = Vec::new();
    for t in &texts {
        let (fast, slow) = (classify(t), crate::reference::classify(t));
        if fast != slow {
            differ.push(format!(
                "{:?}\n  fast {fast:?}\n  ref  {slow:?}",
                t.chars().take(160).collect::<String>()
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} texts differ:\n{}",
        differ.len(),
        texts.len(),
        differ
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Pieces that trigger (or nearly trigger) every detector and gate.
const PIECES: &[&str] = &[
    " ",
    " ",
    " ",
    "\n",
    "\n",
    "\r\n",
    "\t",
    "    ",
    "\u{b}",
    "\u{a0}",
    "\u{3000}",
    "word",
    "the",
    "Light",
    "I",
    "é",
    "日本",
    "≥",
    "∑",
    "→",
    ".",
    ",",
    ":",
    ";",
    "=",
    "-",
    "_",
    "/",
    "\\",
    "$",
    "$$",
    "\"",
    "'",
    "`",
    "```",
    "~~~",
    "~",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    "@",
    "#",
    "# ",
    "* ",
    "+ ",
    "- ",
    "*",
    "**",
    "***",
    "1",
    "42",
    "2024",
    "3.",
    "1.2",
    "1.2.3",
    "v1.2",
    "192.168.0.1",
    "555-123-4567",
    "(555) 123-4567",
    "+44 20 7946 0958",
    "+44-20-7946-0958",
    "+49.30.1234.5678",
    "+1(555) 123-4567",
    "+1",
    "(",
    ")",
    "3ms",
    "10 MB",
    "5 µs",
    "20°C",
    "7s",
    "/usr/bin/env",
    "src/main.rs",
    "~/a/b",
    "./x/y",
    "a@b.com",
    "https://x.io/a",
    "\"key\": ",
    "\"a quoted sentence here\"",
    "“a curly quoted text”",
    "shall",
    "Pursuant to",
    "hereby",
    "SELECT",
    "select * from t",
    "GROUP BY",
    "NOT NULL",
    "WHERE",
    "JOIN",
    "FROM",
    "update t set x =",
    "delete from t where ",
    "AKIAIOSFODNN7EXAMPLE",
    "AUTO_INCREMENT",
    "XSELECT",
    "SELECTED",
    "MAX_SIZE",
    "INTO",
    "VARCHAR(20)",
    "selec",
    "Traceback",
    "goroutine 1 [running]:",
    "panicked at ",
    "selecTraceback (most recent call last):",
    "updatException in thread \"main\" ",
    "thereof",
    "whereas",
    "herein",
    "indemnify",
    "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "token_9fK2mQ7xR4tB8wN1pL6vC3jH5d",
    "3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
    "abcdefghijklmnopqrstuvwxyz_0123456789",
    "\\frac{a}{b}",
    "\\(x\\)",
    "\\[x\\]",
    "$x^2$",
    "$a$",
    "$é$",
    "$ab$",
    "$a b+c$",
    "\\begin{align*}",
    "\\begin{equation}",
    "\\begin{foo}",
    "\\sum_",
    "\\alpha",
    "\\integral",
    "\\n",
    "$HOME",
    "@@ -1,2 +1,2 @@",
    "$ ls",
    "key: value",
    "[section]",
    "a = b",
    "Traceback (most recent call last):",
    "  File \"x.py\", line 3",
    "\tat Foo.bar(Foo.java:12)",
    "panicked at src/a.rs:1:2",
    "{\"a\": 1}",
    "[1, 2]",
    "«",
    "»",
    "“",
    "”",
    "https://",
    "http://[",
    "xhttps://a",
    "\"k\"",
    "\"$k-1.x\"",
    "«un texte entre guillemets»",
    "a/b.tar.gz",
    "x/y_z.c_d",
    "(src/a.rs)",
    "=./p/q",
    "..",
    ":/a/b",
    "5 seconds",
    "3 files",
    "1.5ms",
    "10 MiB",
    "2kHz",
    "3em",
    "3 em",
    "2 h",
    "5µs",
    "µ",
    "4KiB",
    "9 secondsx",
    "7sx",
    "°F",
    "12345678901",
    "````",
    "   ```",
    "    ```",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
    #[test]
    fn agrees_with_reference_on_random_texts(
        picks in proptest::collection::vec(0..PIECES.len(), 0..80)
    ) {
        let t: String = picks.iter().filter_map(|&i| PIECES.get(i).copied()).collect();
        proptest::prop_assert_eq!(classify(&t), crate::reference::classify(&t), "{:?}", t);
    }

    #[test]
    fn agrees_with_reference_on_random_lines(
        picks in proptest::collection::vec(0..LINES.len(), 0..14)
    ) {
        let t = picks.iter().filter_map(|&i| LINES.get(i).copied()).collect::<Vec<_>>().join("\n");
        proptest::prop_assert_eq!(classify(&t), crate::reference::classify(&t), "{:?}", t);
    }
}

/// Whole lines for the line-to-line state: verse, YAML, indented code,
/// prompts, frames, and lines that break each run.
const LINES: &[&str] = &[
    "The woods are lovely, dark and deep",
    "But I have promises to keep",
    "And miles to go before I sleep",
    "And Miles To Go Before I Sleep",
    "Whose woods these are I think I know.",
    "Short",
    "ALL CAPS LINE here again",
    "A line with = sign inside it",
    "",
    "   ",
    "name: ctxpress",
    "version: 1",
    "- item: one",
    "- plain item",
    "key = value",
    "[section]",
    "    let x = f(y);",
    "    return x;",
    "\tindented()",
    "$ ls -la",
    "@@ -1,2 +1,3 @@",
    "  File \"a.py\", line 3, in f",
    "    at Foo.bar(Foo.java:12)",
    "  12: core::panicking::panic",
    "Traceback (most recent call last):",
    "ordinary lower-case prose line here",
    "Ünïcödé Line With Accents In It",
    "\u{b}Vertical tab line starts here",
    "key:\t",
    "key:   ",
    "key:\u{a0}",
    "key:value",
    "https://example.com/path",
    "key =  ",
    "key = =x",
    "key =\u{3000}v",
    "[section]  \t",
    "- [a]",
    "-  ",
    "\u{c} at Foo.bar(Foo.java:12)",
    "\u{c}File \"a.py\", line 3",
    "File \"a.py\", line 3, in f",
    "at the start of a line",
    "12: not indented",
    "\t3: tab indented",
    "1984 was a year",
    "+ bullet",
    "## Heading",
    "#hashtag",
    "Whose woods these are I think I know.\u{b}",
    "Whose woods these are I think I know.\u{a0}",
    "Whose woods these are I think I know. ",
];

/// The mask buffers only grow, and the scan's buffers (gate spans, long
/// runs, statement words) pass from text to text: a text classified after a
/// longer one (whose words stay in the buffers past its own) gets the
/// classification it gets alone, as the reference does.
#[test]
fn shorter_text_after_longer_sees_no_stale_words() {
    let long = format!(
        "{}\nSELECT * FROM t WHERE a = 1\nv1.2.3 192.168.0.1 +1 555-123-4567\nsk-{}\n",
        "Traceback (most recent call last): key: value 10 MB /usr/lib/x.so\n".repeat(40),
        "A1b2C3d4E5f6G7h8I9j0K1l2M3n4".repeat(2)
    );
    let shorts = [
        "",
        "x",
        "plain words only here",
        "A short note\nwith two lines",
        "“Ein Zitat, das lang genug ist”",
        "«un texte entre guillemets»",
        "update users set name = 'x' where id = 1",
        "call +44 20 7946 0958 or see v2.0.1",
    ];
    for s in shorts {
        let _ = classify(&long);
        assert_eq!(classify(s), crate::reference::classify(s), "{s:?}");
        let _ = classify(&long[..long.len() / 2]);
        assert_eq!(classify(s), crate::reference::classify(s), "{s:?}");
    }
}

/// Curly quotes and guillemets in short texts (where the presence pass
/// gates their searches by their lead bytes) and in long ones.
#[test]
fn direct_quotes_behind_their_lead_bytes() {
    let pad = "word ".repeat(60);
    for (t, want) in [
        ("“a quotation of enough length”", true),
        ("«une citation assez longue»", true),
        ("“short”", false),
        ("«court»", false),
        ("ascii only \"a quotation of enough\"", true),
        ("dash — and ° but “no close", false),
        ("« and “ unclosed for a while", false),
    ] {
        for text in [t.to_string(), format!("{pad}{t}")] {
            let got = classify(&text);
            assert_eq!(got, crate::reference::classify(&text), "{text:?}");
            assert_eq!(got.soft.contains(&Reason::DirectQuote), want, "{text:?}");
        }
    }
}
