//! Tests of the line helpers together, of [`clip`] and [`shape`], and the
//! random generator the module's randomized tests share.

use super::*;

/// A small deterministic generator for the randomized tests: each call
/// of the returned closure with `n` gives the next xorshift value in
/// `0..n`.
pub(super) fn xorshift(mut seed: u64) -> impl FnMut(usize) -> usize {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    }
}

#[test]
fn clip_and_shape_are_the_char_versions() {
    let old_clip = |s: &str, max: usize| {
        if s.chars().count() <= max {
            return s.to_string();
        }
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    };
    let old_shape = |s: &str| {
        let mut out = String::new();
        let mut in_digits = false;
        for c in s.trim().chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    out.push('#');
                }
                in_digits = true;
            } else {
                in_digits = false;
                out.push(c);
            }
        }
        out
    };
    for s in [
        "",
        "a",
        "ab",
        "abc",
        "é",
        "éé",
        "aé",
        "éa",
        "日本語",
        "12",
        " 1a22b333 ",
        "x9",
        "\u{a0}7é8\u{2003}",
        "9",
        "a1é2日3",
        "  \t ",
    ] {
        assert_eq!(shape(s), old_shape(s), "{s:?}");
        for max in 0..6 {
            assert_eq!(clip(s, max), old_clip(s, max), "{s:?} {max}");
        }
    }
}

#[test]
fn references_and_helpers() {
    let r = references(
        "see src/app/main.ts and https://x.io/a, then ValueError in src/app/main.ts",
        10,
    );
    assert_eq!(r, vec!["src/app/main.ts", "https://x.io/a", "ValueError"]);
    assert_eq!(references("a/b.rs c/d.rs", 1), vec!["a/b.rs"]);
    assert_eq!(references("at `/home/u/x.go`", 5), vec!["/home/u/x.go"]);
    assert_eq!(clip("héllo", 3), "hé…");
    assert_eq!(clip("abc", 3), "abc");
    assert_eq!(shape(" 12.5MB / 20MB "), "#.#MB / #MB");
    let t: Vec<&str> =
        terms("see src/a.rs: fooBar FooBar foo_bar v1.2.3 12MB deadbeef1 TypeError plain");
    assert_eq!(
        t,
        vec![
            "src/a.rs",
            "fooBar",
            "FooBar",
            "foo_bar",
            "v1.2.3",
            "TypeError"
        ]
    );
    assert_eq!(
        terms("./src/user_service.ts, this.loadUser(x). Use pkg@1.2.3-beta"),
        vec!["src/user_service.ts", "user_service", "loadUser", "1.2.3"]
    );
    let mut esc = Vec::new();
    for_each_term(
        r#"{"content": "import x\nconst fooBar = \"a_b\";\u00e9camelCase"}"#,
        true,
        |t| esc.push(t),
    );
    assert_eq!(esc, vec!["fooBar", "a_b", "camelCase"]);
}
