//! Tests of the term scan: the block scan against the byte walk and the
//! reference scan, the identifier automaton against its patterns, and
//! JSON-escaped text.

use super::reference::*;
use super::*;
use crate::lines::tests::xorshift;

/// The terms of `text` read as escaped JSON (`escaped`) or plain.
fn terms_of(text: &str, escaped: bool) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_term(text, escaped, |t| out.push(t));
    out
}

/// The span [`traffic::Args::string_span`] gives for member `key` of
/// the arguments text `json` (what the information check reads).
fn member_string_span(json: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let text = serde_json::json!([{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "x", "arguments": json}}]}])
    .to_string();
    let conv = ctxpress_core::Conversation::parse(&text).expect("a conversation");
    let calls = ctxpress_dialect::traffic::parse_calls(conv.messages.first()?);
    calls.first()?.args.string_span(key)
}

#[test]
fn member_string_span_finds_the_raw_member() {
    let content = "line \"one\"\n\tfoo_bar(x) é \u{1F600} \\ src/a.rs\u{1b}";
    let v = serde_json::json!({"file_path": "/r/a.rs", "n": [1, {"k": "v\\"}], "content": content, "z": null});
    let json = serde_json::to_string(&v).expect("json");
    let pretty = serde_json::to_string_pretty(&v).expect("json");
    for j in [json.as_str(), pretty.as_str()] {
        let span = member_string_span(j, "content").expect("found");
        let raw = &j[span];
        assert!(decodes_to_same_terms(raw, content), "{raw}");
        assert_eq!(terms_of(raw, true), terms_of(content, false));
        assert_eq!(
            member_string_span(j, "file_path").map(|r| &j[r]),
            Some("/r/a.rs")
        );
        assert_eq!(member_string_span(j, "n"), None);
        assert_eq!(member_string_span(j, "missing"), None);
    }
    for bad in [
        r#"{"content": "a", "content": "b"}"#,
        r#"{"content": "a\q"}"#,
        r#"{"content": "a"} x"#,
        r#"{"con\u0074ent": "a"}"#,
        r#"{"a": \x, "content": "b"}"#,
        r#"["content", "a"]"#,
        r#"{"content": "a""#,
        "{}",
        "",
    ] {
        assert_eq!(member_string_span(bad, "content"), None, "{bad}");
    }
    assert!(!decodes_to_same_terms(r"a\/b", "a/b"));
    assert!(!decodes_to_same_terms(r"a\u0041b", "aAb"));
    assert!(!decodes_to_same_terms(r"ab", "abc"));
    assert!(!decodes_to_same_terms(r"a\ud83d", "a"));
    assert!(decodes_to_same_terms(
        r"a\u00e9\ud83d\ude00\u0022",
        "aé\u{1F600}\""
    ));
}

proptest::proptest! {
    #[test]
    fn serialized_strings_keep_their_terms(text in "[a-cA-C0-9_./\\\\\"\n\t\u{1}é\u{1F600} -]{0,40}") {
        let json = serde_json::to_string(&serde_json::json!({"k": 1, "content": text})).expect("json");
        let span = member_string_span(&json, "content");
        proptest::prop_assert!(span.is_some());
        let raw = &json[span.unwrap_or(0..0)];
        proptest::prop_assert!(decodes_to_same_terms(raw, &text));
        proptest::prop_assert_eq!(terms_of(raw, true), terms_of(&text, false));
    }

    #[test]
    fn accepted_escapes_keep_the_terms(parts in proptest::collection::vec("[a-cA-C0-9_./ -]{0,6}|\\\\u00[0-7][0-9a-f]|\\\\[nt/\\\\\"]|\\\\u00e9", 0..12)) {
        let raw: String = parts.concat();
        if let Ok(text) = serde_json::from_str::<String>(&format!("\"{raw}\""))
            && decodes_to_same_terms(&raw, &text)
        {
            proptest::prop_assert_eq!(terms_of(&raw, true), terms_of(&text, false));
        }
    }
}

/// The terms the scan finds in `text` and those the reference scan finds
/// (after checking that the scan finds those [`scan_terms_walk`], the
/// scan it replaced, finds, with and without the plain-word short cut).
fn scans(text: &str, escaped: bool) -> (Vec<&str>, Vec<&str>) {
    let (mut new, mut old) = (Vec::new(), Vec::new());
    if escaped {
        scan_terms_reference::<true, true>(text, |t| old.push(t));
    } else {
        scan_terms_reference::<false, true>(text, |t| old.push(t));
    }
    new.extend(block_scan(text, escaped, true));
    assert_eq!(new, walks(text, escaped, true), "{text:?}");
    assert_eq!(
        block_scan(text, escaped, false),
        walks(text, escaped, false),
        "{text:?}"
    );
    (new, old)
}

/// The terms [`scan_terms_walk`] finds in `text` (`fast`: with the
/// plain-word short cut).
fn walks(text: &str, escaped: bool, fast: bool) -> Vec<&str> {
    let mut out = Vec::new();
    match (escaped, fast) {
        (true, true) => scan_terms_walk::<true, true>(text, |t| out.push(t)),
        (true, false) => scan_terms_walk::<true, false>(text, |t| out.push(t)),
        (false, true) => scan_terms_walk::<false, true>(text, |t| out.push(t)),
        (false, false) => scan_terms_walk::<false, false>(text, |t| out.push(t)),
    }
    out
}

/// The terms the block scan finds in `text` (`fast`: with the
/// plain-word short cut).
fn block_scan(text: &str, escaped: bool, fast: bool) -> Vec<&str> {
    let mut out = Vec::new();
    match (escaped, fast) {
        (true, true) => scan_terms::<true, true>(text, |t| out.push(t)),
        (true, false) => scan_terms::<true, false>(text, |t| out.push(t)),
        (false, true) => scan_terms::<false, true>(text, |t| out.push(t)),
        (false, false) => scan_terms::<false, false>(text, |t| out.push(t)),
    }
    out
}

/// The classes of `w` as [`Block`] bits (its first 64 bytes).
fn block_of(w: &[u8]) -> Block {
    let mut buf = w.to_vec();
    buf.truncate(64);
    Block::of::<true>(&buf, 0)
}

#[test]
fn the_block_scan_reads_runs_at_every_block_edge() {
    // A term, a plain word, a long run and an escape at every offset
    // about one, two and three block edges.
    let pieces = [
        "foo_bar",
        "src/a_b.rs",
        "v1.2.3",
        "fooBar.Baz-x/y.Zq",
        "\\u00e9a_b",
        "\\nFooBar",
        "a_",
        "plain",
        "x_y_z_w_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "dir/sub_dir/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/file.rs",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ];
    for piece in pieces {
        for pad in 0..200 {
            for filler in [" ", "x", "é"] {
                let text = format!("{}{piece} {piece}", filler.repeat(pad));
                for escaped in [false, true] {
                    for fast in [false, true] {
                        assert_eq!(
                            block_scan(&text, escaped, fast),
                            walks(&text, escaped, fast),
                            "{text:?} {escaped} {fast}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn block_lanes_are_the_bytes() {
    let mut next = xorshift(0x5e);
    let alphabet = b"azAZ09_/.-\\ \n:@[`{\0\xc3\xa9";
    for _ in 0..20_000 {
        let n = next(140);
        let text: Vec<u8> = (0..n).map(|_| alphabet[next(alphabet.len())]).collect();
        for at in [0, 1, 17, 64, n] {
            let (simd, bytes) = (
                Block::of::<true>(&text, at),
                Block::of_bytes::<true>(&text, at),
            );
            let fields = |b: Block| {
                [
                    b.lower, b.upper, b.digit, b.under, b.slash, b.dot, b.tok, b.escape,
                ]
            };
            assert_eq!(fields(simd), fields(bytes), "{text:?} {at}");
            let plain = Block::of::<false>(&text, at);
            assert_eq!(plain.escape, 0);
            assert_eq!(fields(plain)[..7], fields(bytes)[..7]);
        }
    }
}

#[test]
fn identifier_bits_are_the_automaton() {
    let mut next = xorshift(0x1d);
    let alphabet = b"abzAZ09_";
    for _ in 0..200_000 {
        let most = if next(4) == 0 { 64 } else { 8 };
        let n = 1 + next(most);
        let w: Vec<u8> = (0..n).map(|_| alphabet[next(alphabet.len())]).collect();
        let b = block_of(&w);
        assert_eq!(
            is_identifier_bits(b.lower, b.upper, b.digit, b.under, n),
            is_identifier(&w),
            "{:?}",
            String::from_utf8_lossy(&w)
        );
    }
}

proptest::proptest! {
    #[test]
    fn the_block_scan_is_the_walk(parts in proptest::collection::vec("[a-cA-C0-9uv_./\\ \n-]{0,9}|[a-bA-B0-9_]{50,140}|[a-b/._-]{20,80}| {1,70}|é", 0..24), escaped in proptest::bool::ANY, fast in proptest::bool::ANY) {
        let text: String = parts.concat();
        proptest::prop_assert_eq!(block_scan(&text, escaped, fast), walks(&text, escaped, fast));
    }

    #[test]
    fn is_identifier_bits_is_the_automaton(w in "[a-cA-C0-9_]{1,64}") {
        let b = block_of(w.as_bytes());
        proptest::prop_assert_eq!(
            is_identifier_bits(b.lower, b.upper, b.digit, b.under, w.len()),
            is_identifier(w.as_bytes())
        );
    }

    #[test]
    fn is_path_bits_is_is_path(run in "[a-cA-C0-9_./-]{1,64}") {
        let r = run.as_bytes();
        let b = block_of(r);
        let split = |c: &u8| matches!(c, b'.' | b'-' | b'/');
        let a = r.iter().take_while(|c| split(c)).count();
        let e = (r.len() - r.iter().rev().take_while(|c| split(c)).count()).max(a);
        proptest::prop_assert_eq!(
            is_path_bits(b.lower | b.upper | b.digit, b.lower | b.upper, b.slash, b.dot, a, e),
            is_path(&r[a..e])
        );
    }
}

#[test]
fn the_scan_finds_what_the_reference_scan_finds() {
    let texts = [
        include_str!("../mod.rs"),
        include_str!("../prefixes.rs"),
        include_str!("../outline.rs"),
        include_str!("../errors.rs"),
        include_str!("../references.rs"),
        include_str!("../terms.rs"),
        include_str!("../../summary.rs"),
        include_str!("../../lib.rs"),
        include_str!("../../../../ctxpress-core/src/message.rs"),
        "src/app_main.py:12 v1.2.3 FooError foo_bar-baz x/y.rs a.b_c camelCase\\nsnake_case",
        "--flag_name ./path/to_file.rs. ..dots_. HTTPServer getX __init__ a_ _b a--b_c x/.y_z",
        r#"{"content": "import x\nconst fooBar = \"a_b\";\u00e9camelCase\u", "p": "a/b.rs\\"}"#,
    ];
    for text in texts {
        for escaped in [false, true] {
            let (new, old) = scans(text, escaped);
            assert_eq!(new, old);
        }
    }
}

#[test]
fn triggers_anywhere_in_a_run_find_the_same_terms() {
    // Triggers at a run's first byte, deep inside it, after an escape,
    // at the text's start and end.
    for text in [
        "_a a_ __init__ x_y_z abc_def fooBar FooBar aB Ab1Cd2 HTTPServer getX",
        "a/b.rs /x/y.rs x/ 1.2.3 v1.2.3 a1.b2 9.Foo a.B_c very_long_name_indeed.rs",
        "\\nfooBar \\u00e9snake_case \\\"Quoted_x\\n9.1.2 é_x xé_y $a_b",
        "_",
        "aB",
        "end_",
    ] {
        for escaped in [false, true] {
            let (new, old) = scans(text, escaped);
            assert_eq!(new, old, "{text:?}");
        }
    }
}

#[test]
fn the_plain_word_short_cut_finds_the_same_terms() {
    let texts = [
        include_str!("../mod.rs"),
        include_str!("../prefixes.rs"),
        include_str!("../outline.rs"),
        include_str!("../errors.rs"),
        include_str!("../references.rs"),
        include_str!("../terms.rs"),
        include_str!("../../summary.rs"),
        include_str!("../../lib.rs"),
        "src/app_main.py:12 v1.2.3 FooError foo_bar-baz x/y.rs a.b_c camelCase\\nsnake_case",
        "--flag_name ./path/to_file.rs. ..dots_. HTTPServer getX __init__ a_ _b",
    ];
    for text in texts {
        for escaped in [false, true] {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            if escaped {
                scan_terms::<true, true>(text, |t| fast.push(t));
                scan_terms::<true, false>(text, |t| slow.push(t));
            } else {
                scan_terms::<false, true>(text, |t| fast.push(t));
                scan_terms::<false, false>(text, |t| slow.push(t));
            }
            assert_eq!(fast, slow);
        }
    }
}

/// The terms [`split_run`] and [`split_run_reference`] report for `run`.
fn splits(run: &str, identifiers: bool) -> (Vec<&str>, Vec<&str>) {
    let (mut new, mut old) = (Vec::new(), Vec::new());
    split_run(run.as_bytes(), run, identifiers, &mut |t| new.push(t));
    split_run_reference(run.as_bytes(), run, identifiers, &mut |t| old.push(t));
    (new, old)
}

#[test]
fn the_identifier_automaton_is_the_three_patterns() {
    let words = [
        "",
        "a",
        "A",
        "_",
        "a_b",
        "a__b",
        "a_",
        "_a",
        "a1_b2",
        "a_1",
        "ab1c_d",
        "a1B",
        "fooBar",
        "fooBAR",
        "foo1Bar",
        "fooBar1",
        "fooB",
        "FooBar",
        "Foo",
        "FOO",
        "FooB",
        "F1B2",
        "F1Bar",
        "HTTPServer",
        "getX",
        "getXml",
        "x_Y",
        "snake_Case",
        "fooBar_baz",
        "é",
        "aé_b",
        "a-b",
        "a.b",
        "v1",
        "123",
        "Ab1Cd2",
    ];
    for w in words {
        assert_eq!(is_identifier(w.as_bytes()), identifier(w.as_bytes()), "{w}");
    }
    for run in [
        "src/app_main.py",
        "v1.2.3",
        "v1.2.3-beta_one",
        "1.2.3.4",
        "a.b_c/fooBar-v2.0.1/x_y.Z_w",
        "fooBar.bazQux.snake_case",
        "a//b--c..d_e",
        "vFoo.barBaz/v1.2.x",
        "1.2.3/4.5.6",
    ] {
        for identifiers in [false, true] {
            let (new, old) = splits(run, identifiers);
            assert_eq!(new, old, "{run}");
        }
    }
}

proptest::proptest! {
    #[test]
    fn is_identifier_is_the_reference(w in "[a-cA-C0-9_é]{0,12}") {
        proptest::prop_assert_eq!(is_identifier(w.as_bytes()), identifier(w.as_bytes()));
    }

    #[test]
    fn split_run_is_the_reference(run in "[a-cvA-C0-9_]{0,4}([./-][a-cvA-C0-9_]{1,5}){0,6}", identifiers in proptest::bool::ANY) {
        let (new, old) = splits(&run, identifiers);
        proptest::prop_assert_eq!(new, old);
    }

    #[test]
    fn the_trigger_lanes_agree_on_long_texts(text in "[a-bzA-BZ09_./\\\\ :@é-]{0,200}", from in 0usize..210) {
        let b = text.as_bytes();
        proptest::prop_assert_eq!(next_trigger::<false>(b, from), next_trigger_bytes::<false>(b, from));
        proptest::prop_assert_eq!(next_trigger::<true>(b, from), next_trigger_bytes::<true>(b, from));
    }
}

proptest::proptest! {
    #[test]
    fn is_snake_is_the_pattern(w in "[a-z0-9_A]{0,12}") {
        let b = w.as_bytes();
        let pattern = b.first().is_some_and(u8::is_ascii_lowercase)
            && b.contains(&b'_')
            && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
            && b.split(|c| *c == b'_').all(|p| !p.is_empty());
        proptest::prop_assert_eq!(is_snake(b), pattern);
    }

    #[test]
    fn the_scan_agrees_with_the_reference(text in "[a-cA-C0-9uv_./\\\\ \n-]{0,60}", escaped in proptest::bool::ANY) {
        let (new, old) = scans(&text, escaped);
        proptest::prop_assert_eq!(new, old);
    }

    #[test]
    fn the_trigger_search_agrees_at_every_class_edge(text in "[a-buzA-BZ09_./\\\\ :@\\[`{é\u{1F600}-]{0,100}", escaped in proptest::bool::ANY) {
        // The bytes either side of each range `next_trigger` tests, over
        // several eight-byte words.
        let (new, old) = scans(&text, escaped);
        proptest::prop_assert_eq!(new, old);
    }

    #[test]
    fn the_trigger_lanes_agree_with_the_bytes(text in "[a-bzA-BZ09_./\\\\ :@\\[`{é-]{0,70}", from in 0usize..72) {
        let b = text.as_bytes();
        proptest::prop_assert_eq!(next_trigger::<false>(b, from), next_trigger_bytes::<false>(b, from));
        proptest::prop_assert_eq!(next_trigger::<true>(b, from), next_trigger_bytes::<true>(b, from));
    }

    #[test]
    fn the_short_cut_agrees_on_any_text(text in "[a-zA-Z0-9_./\\\\ -]{0,80}") {
        let (mut fast, mut slow) = (Vec::new(), Vec::new());
        scan_terms::<false, true>(&text, |t| fast.push(t));
        scan_terms::<false, false>(&text, |t| slow.push(t));
        proptest::prop_assert_eq!(fast, slow);
    }
}
