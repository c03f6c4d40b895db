//! Invariants: no panic on any UTF-8 (multibyte characters at every boundary),
//! sorted and correctly split reasons, consistent tiers, linear time.
#![allow(missing_docs)]

use ctxpress_classifier::{classify, prose_chars};
use ctxpress_core::Tier;
use ctxpress_text::split_code_and_prose;
use proptest::prelude::*;

/// Fragments that exercise every detector, mixed with multibyte characters.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z ]{0,20}".prop_map(|s| s),
        Just("```".to_string()),
        Just("\n    ".to_string()),
        Just("\n\t".to_string()),
        Just("$$".to_string()),
        Just("$x^".to_string()),
        Just("\\frac".to_string()),
        Just("∑≤∈".to_string()),
        Just("SELECT ".to_string()),
        Just(" WHERE ".to_string()),
        Just("GROUP BY".to_string()),
        Just("sk-".to_string()),
        Just("AKIA".to_string()),
        Just("ghp_".to_string()),
        Just("\"key\": ".to_string()),
        Just("{\"".to_string()),
        Just("[{".to_string()),
        Just("https://".to_string()),
        Just("@ex.com".to_string()),
        Just("v1.2.3".to_string()),
        Just("/usr/lib/".to_string()),
        Just("Traceback (most recent call last):\n".to_string()),
        Just("\n    at f (a.js:1:2)".to_string()),
        Just("key: value\n".to_string()),
        Just("@@ -1 +1 @@".to_string()),
        Just("é".to_string()),
        Just("日本".to_string()),
        Just("😀".to_string()),
        Just("\u{200d}".to_string()),
        Just("°C".to_string()),
        Just("“".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn never_panics_and_is_consistent(parts in prop::collection::vec(fragment(), 0..24)) {
        let text: String = parts.concat();
        let c = classify(&text);
        prop_assert!(c.hard.iter().all(|r| r.is_hard()));
        prop_assert!(c.soft.iter().all(|r| !r.is_hard()));
        prop_assert!(c.hard.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(c.soft.windows(2).all(|w| w[0] < w[1]));
        let reasons = !c.hard.is_empty() || !c.soft.is_empty();
        prop_assert_eq!(c.tier == Tier::T0, reasons);
        // segments tile the text exactly
        let segs = split_code_and_prose(&text);
        prop_assert_eq!(segs.iter().map(|s| s.text).collect::<String>(), text.clone());
        prop_assert!(prose_chars(&text) <= text.chars().count());
        prop_assert_eq!(classify(&text), c);
    }

    #[test]
    fn every_char_boundary_split(s in "\\PC{0,40}", cut in 0usize..64) {
        // classify every prefix/suffix at each char boundary near `cut`
        let bounds: Vec<usize> = s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
        let b = bounds[cut % bounds.len()];
        let (a, z) = s.split_at(b);
        let _ = classify(a);
        let _ = classify(z);
        let _ = ctxpress_text::secrets::redact(&format!("{a}sk-{z}"));
    }
}

#[test]
fn multibyte_at_every_boundary() {
    let base =
        "SELECT a FROM t WHERE x = 1 -- ✓ é 日本 😀 $$a$$ sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z";
    for (i, _) in base.char_indices() {
        for m in ["é", "日", "😀", "\u{301}"] {
            let mut t = String::from(&base[..i]);
            t.push_str(m);
            t.push_str(&base[i..]);
            let _ = classify(&t);
            let _ = classify(&base[i..]);
            let _ = classify(&base[..i]);
        }
    }
}

/// A large message of each adversarial shape, and a 10 MB message, finish (time is measured in the
/// bench; here we only need it not to blow up). Generous bound for debug builds.
#[test]
fn ten_megabytes_classify_in_linear_time() {
    let mb10 = 10 * 1024 * 1024;
    let shapes = [
        "The quick brown fox jumps over the lazy dog. ",
        "sk-a-b-c-d-e-f-g-h-",
        "$a_b $c^d ",
        "\"aaaaaaaaaaaa ",
        "    at x (",
        "SELECT SELECT FROM ",
        "a/b/c/d/e/f/g ",
        "1.2.3.4.5.6.7.8.9.",
        "key: value\n",
    ];
    for shape in shapes {
        // 2.5 MB per adversarial shape keeps the debug run short; the full
        // 10 MB message follows.
        let text = shape.repeat(mb10 / 4 / shape.len() + 1);
        let start = std::time::Instant::now();
        let _ = classify(&text);
        eprintln!("{shape:?}: {:?}", start.elapsed());
        assert!(
            start.elapsed().as_secs() < 30,
            "{shape:?} took {:?}",
            start.elapsed()
        );
    }
    // shapes aimed at the anchors of the scan (fences, quotes, LaTeX, paths,
    // stars, units, SQL statements, frames), 1 MB each, all on one line
    for shape in [
        "x```",
        "\\[\\( ",
        "$ $x",
        "*** * ",
        "\u{201c}open \u{ab}",
        "\"k\"   ",
        "update t set x ",
        "5 ms 7",
        "/a.b/",
        "  File \"",
        "ab_CD-12.ef",
    ] {
        let text = shape.repeat(1024 * 1024 / shape.len() + 1);
        let start = std::time::Instant::now();
        let _ = classify(&text);
        assert!(
            start.elapsed().as_secs() < 30,
            "{shape:?} took {:?}",
            start.elapsed()
        );
    }
    let big = "Lorem ipsum dolor sit amet, ünïcödé 日本語 ✓. ".repeat(mb10 / 50);
    assert!(big.len() >= mb10 - 100);
    let start = std::time::Instant::now();
    let c = classify(&big);
    assert_eq!(c.tier, Tier::T3);
    assert!(start.elapsed().as_secs() < 30);
}
