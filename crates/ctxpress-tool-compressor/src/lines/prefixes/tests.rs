//! Tests of line-number prefixes and the numbered split.

use super::reference::*;
use super::*;

fn assert_leading_space(text: &str) {
    let b = text.as_bytes();
    for from in 0..=b.len() + 1 {
        let r = b.get(from..).unwrap_or(&[]);
        assert_eq!(
            leading_space(r),
            leading_space_reference(r),
            "{text:?} {from}"
        );
    }
}

#[test]
fn leading_space_is_the_byte_count() {
    for text in [
        "",
        "a",
        "\n",
        "       ",
        "        ",
        "         x",
        "        x",
        "                \n",
        "       \t        \u{a0}",
        "\u{a0}  ",
        "\x0b\x0c\r\n\t x",
    ] {
        assert_leading_space(text);
    }
}

proptest::proptest! {
    #[test]
    fn leading_space_on_random_texts(text in "( |\t|\n|\r|\x0b|\x0c|a|é|\u{a0}){0,40}") {
        assert_leading_space(&text);
    }
}

proptest::proptest! {
    #[test]
    fn split_numbered_is_the_two_pass_split(
        text in "( {0,2}[0-9]{0,3}(\t|:|\\||→|x)?[a é]{0,2}(\n|\r\n))*[0-9a ]{0,3}",
    ) {
        proptest::prop_assert_eq!(split_numbered(&text), split_numbered_reference(&text));
    }
}

#[test]
fn split_numbered_is_the_two_pass_split_on_sources() {
    for text in [
        include_str!("../mod.rs"),
        include_str!("../prefixes.rs"),
        include_str!("../outline.rs"),
        include_str!("../errors.rs"),
        include_str!("../references.rs"),
        include_str!("../terms.rs"),
        include_str!("../../summary.rs"),
        "",
        "\n\n",
        "1\ta\n2\tb\n",
        "1\ta\n2\tb\nc\n3\td\n4\te\n5\tf\n",
        "1\ta\n2\tb\nc\nd\n3\te\n",
        "     1→use std;\n     2→\n     3→fn main() {}\n",
        "12:30 started\n08:15 done\nno number here\n",
        "3\tx\n2\ty\n1\tz\n",
        "\u{663}\tarabic digit\n2\tb\n",
    ] {
        assert_eq!(
            split_numbered(text),
            split_numbered_reference(text),
            "{text:?}"
        );
    }
}

#[test]
fn number_prefix_agrees_with_the_regex() {
    for l in [
        "12\tx",
        "    12→x",
        "12:x",
        "12|x",
        "  7: y",
        "12345678\tx",
        "1234567\tx",
        "\u{a0}3→z",
        "x12\t",
        "12 x",
        "",
        "   ",
        "٣→x",
        "12٣→x",
        "12",
        "→",
        "0:",
        "\t\t9|",
        "\u{b}4:x",
        "\u{2003}5\t",
        "007|x",
        "9999999:",
        "12é",
    ] {
        assert_eq!(number_prefix(l), regex_prefix(l), "{l:?}");
    }
}

/// What [`NUMBERED`] finds at the start of `l`, the digits parsed.
fn regex_prefix(l: &str) -> Option<(Option<u64>, usize)> {
    NUMBERED
        .captures(l)
        .and_then(|c| Some((c.get(1)?.as_str().parse().ok(), c.get(0)?.end())))
}

#[test]
fn numbered_lines_are_detected_in_every_style() {
    for text in [
        "1\tuse std;\n2\t\n3\tfn main() {}\n",
        "     1→use std;\n     2→\n     3→fn main() {}\n",
        "1:use std;\n2:\n3:fn main() {}\n",
    ] {
        let l = split_numbered(text);
        assert_eq!(l.len(), 3, "{text}");
        assert_eq!(l[0].number, Some(1));
        assert_eq!(l[0].body, "use std;");
        assert_eq!(l[2].body, "fn main() {}");
    }
    // Not numbered: times and ports are not line numbers.
    let l = split_numbered("12:30 started\n08:15 done\nno number here\n");
    assert!(l.iter().all(|x| x.number.is_none()));
}

proptest::proptest! {
    #[test]
    fn number_prefix_is_the_regex(l in "[ \t\u{a0}\u{2003}\u{b}]{0,3}[0-9٣]{0,9}[\t:|→ xé٣]{0,2}[a-z]{0,2}") {
        proptest::prop_assert_eq!(number_prefix(&l), regex_prefix(&l));
    }

    #[test]
    fn trim_and_is_blank_are_std(s in "[ \t\n\r\u{b}\u{c}\u{a0}\u{2003}\u{85}aé]{0,8}") {
        proptest::prop_assert_eq!(trim(&s), s.trim());
        proptest::prop_assert_eq!(is_blank(&s), s.trim().is_empty());
    }
}
