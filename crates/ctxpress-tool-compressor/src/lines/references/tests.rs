//! Tests of the reference search, by text, by line and outside shown lines.

use super::reference::*;
use super::*;
use crate::lines::split_numbered;

#[test]
fn references_by_line_agree_with_the_joined_text() {
    let sources = [
        include_str!("../mod.rs"),
        include_str!("../prefixes.rs"),
        include_str!("../outline.rs"),
        include_str!("../errors.rs"),
        include_str!("../references.rs"),
        include_str!("../terms.rs"),
        include_str!("../../summary.rs"),
        include_str!("../../lib.rs"),
        "see https://example.com/a/b.html and C:\\dir\\x.txt\nValueError: at ~/src/app.py\n\
         x/y.rs:3 FooException, http://h/p?q=1\nplain line\nBarError.\n",
    ];
    for text in sources {
        let lines: Vec<&str> = text.lines().collect();
        let joined = lines.join("\n");
        for max in [0, 1, 3, 12, 1000] {
            assert_eq!(
                references_in_lines(lines.iter().copied(), max),
                references(&joined, max),
                "max {max}"
            );
        }
    }
}

/// [`references_outside`] of the lines of `text` against
/// [`references_in_lines`] of the lines not shown, for a few sets of
/// shown lines (none, every third, the first and last, out of range).
fn assert_refs_outside_as_by_line(text: &str) {
    let lines = split_numbered(text);
    let n = lines.len();
    let every_third: Vec<usize> = (0..n).filter(|i| i % 3 == 1).collect();
    let ends: Vec<usize> = vec![0, n.saturating_sub(1), n + 2];
    let twice: Vec<usize> = vec![1, 1, 2];
    for shown in [&[][..], &every_third, &ends, &twice] {
        let rest = || {
            lines
                .iter()
                .enumerate()
                .filter(|(i, _)| !shown.contains(i))
                .map(|(_, l)| l.body)
        };
        for max in [0, 1, 2, 3, 12, 1000] {
            assert_eq!(
                references_outside(text, &lines, shown, max),
                references_in_lines(rest(), max),
                "max {max} shown {shown:?} {text:?}"
            );
        }
    }
    // Lines that are not slices of `text`: searched one by one.
    let copy = text.to_string();
    let other = split_numbered(&copy);
    assert_eq!(
        references_outside(text, &other, &every_third, 12),
        references_in_lines(
            other
                .iter()
                .enumerate()
                .filter(|(i, _)| !every_third.contains(i))
                .map(|(_, l)| l.body),
            12
        ),
    );
}

#[test]
fn references_outside_shown_lines_are_those_of_the_other_lines() {
    for text in [
        include_str!("../mod.rs"),
        include_str!("../prefixes.rs"),
        include_str!("../outline.rs"),
        include_str!("../errors.rs"),
        include_str!("../references.rs"),
        include_str!("../terms.rs"),
        include_str!("../../summary.rs"),
        include_str!("../../lib.rs"),
        "",
        "\n\n",
        "E",
        "see https://example.com/a/b.html and C:\\dir\\x.txt\nValueError: at ~/src/app.py\n\
         x/y.rs:3 FooException, http://h/p?q=1\nplain line\nBarError.\n",
        "     1\tuse a/b.rs;\n     2\t\n     3\tE\n     4\tan Error: x/y.zz\n",
        "1→a/b.rs\r\n2→\r\n3→c\\d.txt TypeError\r\n",
    ] {
        assert_refs_outside_as_by_line(text);
    }
}

proptest::proptest! {
    #[test]
    fn references_outside_on_random_texts(
        text in "([ 0-9]{0,3}(\t|→|:)?(a|é|/|\\\\|E|rror|xception|\\.|:|rs| |-|Ab)*(\n|\r\n))*",
    ) {
        assert_refs_outside_as_by_line(&text);
    }
}

#[test]
fn reference_marks_are_found_as_by_memchr3() {
    for text in [
        "",
        "E",
        "a/",
        "\\",
        "abc",
        "x".repeat(32).as_str(),
        "x".repeat(33).as_str(),
    ] {
        let b = text.as_bytes();
        assert_eq!(
            find_reference_mark(b),
            memchr::memchr3(b'/', b'\\', b'E', b)
        );
    }
}

proptest::proptest! {
    #[test]
    fn reference_marks_on_random_texts(text in "(a|é|/|\\\\|E|e| ){0,70}") {
        // Each suffix: lengths on both sides of the short search.
        let b = text.as_bytes();
        for k in 0..=b.len() {
            let r = b.get(k..).unwrap_or(&[]);
            proptest::prop_assert_eq!(find_reference_mark(r), memchr::memchr3(b'/', b'\\', b'E', r));
        }
    }

    #[test]
    fn references_from_the_first_mark_are_the_references(text in "(a|é|/|\\\\|E|rror|xception|\\.|:|rs| |Ab|http|://){0,30}", max in 1usize..6) {
        // The search told where the first mark is finds what the
        // search from the start finds.
        let first = find_reference_mark(text.as_bytes()).unwrap_or(text.len());
        let (mut hinted, mut plain) = (Vec::new(), Vec::new());
        let full_hinted = push_references_from(&text, first, max, &mut hinted);
        let full_plain = push_references(&text, max, &mut plain);
        proptest::prop_assert_eq!(hinted, plain);
        proptest::prop_assert_eq!(full_hinted, full_plain);
    }
}

#[test]
fn reference_search_finds_what_the_plain_search_finds() {
    let plain = |text: &str| -> Vec<(usize, usize)> {
        REF.find_iter(text).map(|m| (m.start(), m.end())).collect()
    };
    let jumps = |text: &str| -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(start) = reference_search_start(text.as_bytes(), at) {
            let Some(m) = REF.find_at(text, start) else {
                break;
            };
            out.push((m.start(), m.end()));
            at = m.end();
        }
        out
    };
    let mut texts: Vec<String> = [
        "",
        "a/b",
        "a\\b",
        "Error",
        "xError",
        "E",
        "Erro",
        "Exceptio",
        "EException",
        "EEError",
        "no refs here",
        "TypeError: x",
        "my Exception.",
        "ERROR",
        "error/",
        "see https://example.com/a/b.html and C:\\dir\\x.txt",
        "http://localhost:3000 x/y.rs:3 FooException, http://h/p?q=1",
        "a/b c.d e/f.g ~/h.i /j/k.l m\u{a0}n/o.p ValueError.",
        "x/y/z.rs.bak src/a.ts: (src/b.ts) 'src/c.ts' `d/e.md`",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    texts.extend(
        [
            include_str!("../mod.rs"),
            include_str!("../prefixes.rs"),
            include_str!("../outline.rs"),
            include_str!("../errors.rs"),
            include_str!("../references.rs"),
            include_str!("../terms.rs"),
            include_str!("../../summary.rs"),
        ]
        .map(String::from),
    );
    // Random runs of the marks and words references are made of.
    const PARTS: &[&str] = &[
        "/",
        "\\",
        ".",
        ":",
        "://",
        "http",
        "https",
        "a",
        "B",
        "é",
        "rs",
        "Error",
        "Exception",
        "x",
        " ",
        "\t",
        "\u{a0}",
        "~",
        "@",
        "-",
        "C:",
        "1",
        ")",
        "\"",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        let mut t = String::new();
        for _ in 0..seed % 14 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            t.push_str(PARTS[(seed % PARTS.len() as u64) as usize]);
        }
        seed = seed.wrapping_add(1);
        texts.push(t);
    }
    for t in &texts {
        assert_eq!(jumps(t), plain(t), "{t:?}");
    }
}
