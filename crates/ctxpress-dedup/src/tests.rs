//! Unit tests for the rules of spec 000 section 2 and issue 4.

use super::*;
use ctxpress_core::{Message, Role};
use serde_json::json;

fn file(n: usize, tag: &str) -> String {
    (0..n)
        .map(|i| format!("    let value_{i} = compute_{tag}({i}, \"some argument\");"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn conv(msgs: Vec<(&str, String)>) -> Conversation {
    Conversation::new(
        msgs.into_iter()
            .enumerate()
            .map(|(i, (role, text))| {
                Message::text_message(MessageId::new(format!("m{i}")), role, &text)
            })
            .collect(),
    )
}

fn filler(n: usize) -> Vec<(&'static str, String)> {
    (0..n)
        .map(|i| {
            (
                if i % 2 == 0 { "user" } else { "assistant" },
                format!("ok {i}"),
            )
        })
        .collect()
}

/// How a reference names message `i` of `c` (its role and first words).
fn r(c: &Conversation, i: usize) -> String {
    ctxpress_text::message_ref(c.messages[i].role_str(), &c.messages[i].text())
}

fn dedup(cfg: DedupConfig) -> Dedup {
    Dedup::new(cfg).unwrap()
}

fn run(d: &Dedup, c: &mut Conversation) -> StageOutcome {
    d.apply(c, &StageContext::default()).unwrap()
}

#[test]
fn djb2_is_the_classic_hash() {
    assert_eq!(djb2(""), 5381);
    assert_eq!(djb2("a"), 5381 * 33 + 97);
    // "Ab" and "BA" collide under djb2: 33*65+98 == 33*66+65
    assert_eq!(djb2("xAby"), djb2("xBAy"));
}

#[test]
fn exact_duplicate_references_latest_copy() {
    let body = file(8, "a");
    let mut msgs = vec![("user", body.clone()), ("assistant", "sure".into())];
    msgs.push(("user", body.clone()));
    msgs.extend(filler(4));
    let mut c = conv(msgs);
    let out = run(&dedup(DedupConfig::default()), &mut c);
    let n = body.chars().count();
    assert_eq!(
        c.messages[0].text(),
        format!("[cce:dup of {} — {n} chars]", r(&c, 2))
    );
    assert_eq!(c.messages[2].text(), body);
    assert_eq!(out.counters["exact_dups"], 1);
    let mark = c.ann(&MessageId::new("m0")).unwrap().dup.clone().unwrap();
    assert_eq!(mark.keep, MessageId::new("m2"));
    assert_eq!(mark.similarity, 1.0);
    assert!(c.ann(&MessageId::new("m2")).is_none_or(|a| a.dup.is_none()));
}

#[test]
fn configurable_prefix_and_min_chars() {
    let body = "x".repeat(150);
    let mut msgs = vec![("user", body.clone()), ("user", body.clone())];
    msgs.extend(filler(4));
    let mut c = conv(msgs.clone());
    run(&dedup(DedupConfig::default()), &mut c);
    assert_eq!(c.messages[0].text(), body, "150 chars is below min_chars");
    let mut c = conv(msgs);
    run(
        &dedup(DedupConfig {
            min_chars: 100,
            prefix: "ctx".into(),
            ..DedupConfig::default()
        }),
        &mut c,
    );
    assert_eq!(
        c.messages[0].text(),
        format!("[ctx:dup of {} — 150 chars]", r(&c, 1))
    );
}

#[test]
fn identical_content_in_two_roles_is_deduped_by_content() {
    let body = file(8, "r");
    let mut msgs = vec![("user", body.clone()), ("assistant", body.clone())];
    msgs.extend(filler(4));
    let mut c = conv(msgs);
    run(&dedup(DedupConfig::default()), &mut c);
    assert!(
        c.messages[0]
            .text()
            .starts_with(&format!("[cce:dup of {} ", r(&c, 1)))
    );
    assert_eq!(c.messages[0].role(), Role::User, "role is kept");
    assert_eq!(c.messages[1].text(), body);
}

#[test]
fn system_and_protected_messages_are_never_touched_nor_kept() {
    let body = file(8, "s");
    let mut msgs = vec![
        ("system", body.clone()),
        ("user", body.clone()),
        ("user", "between".into()),
        ("user", body.clone()),
    ];
    msgs.extend(filler(4));
    let mut c = conv(msgs);
    c.ann_mut(&MessageId::new("m3")).protected = true;
    let out = run(&dedup(DedupConfig::default()), &mut c);
    assert_eq!(c.messages[0].text(), body);
    assert_eq!(c.messages[1].text(), body, "only copy left is protected");
    assert_eq!(c.messages[3].text(), body);
    assert!(!out.counters.contains_key("exact_dups"));
}

#[test]
fn duplicate_inside_recency_window_is_the_keep_target() {
    let body = file(8, "w");
    // m0 and m1 outside, m3 and m5 inside the window of 4 (m2..m5)
    let msgs = vec![
        ("user", body.clone()),
        ("assistant", body.clone()),
        ("user", "x".into()),
        ("assistant", body.clone()),
        ("user", "y".into()),
        ("assistant", body.clone()),
    ];
    let mut c = conv(msgs);
    run(&dedup(DedupConfig::default()), &mut c);
    let n = body.chars().count();
    assert_eq!(
        c.messages[0].text(),
        format!("[cce:dup of {} — {n} chars]", r(&c, 3))
    );
    assert_eq!(
        c.messages[1].text(),
        format!("[cce:dup of {} — {n} chars]", r(&c, 3))
    );
    assert_eq!(c.messages[3].text(), body, "in window: kept");
    assert_eq!(c.messages[5].text(), body, "in window: never replaced");
}

#[test]
fn recency_window_zero_allows_the_last_message() {
    let body = file(8, "z");
    let mut c = conv(vec![("user", body.clone()), ("user", body.clone())]);
    run(
        &dedup(DedupConfig {
            recency_window: 0,
            ..DedupConfig::default()
        }),
        &mut c,
    );
    assert!(
        c.messages[0]
            .text()
            .starts_with(&format!("[cce:dup of {}", r(&c, 1)))
    );
    assert_eq!(c.messages[1].text(), body);
}

#[test]
fn already_compressed_content_is_left_alone() {
    for head in [
        "[summary: ",
        "[summary#cce_sum_1: ",
        "[truncated — 900 chars: ",
        "[cce:near-dup of m9 — 900 chars, ~90% match; diff:\n",
    ] {
        let body = format!("{head}{}]", file(8, "c"));
        let mut msgs = vec![("user", body.clone()), ("user", body.clone())];
        msgs.extend(filler(4));
        let mut c = conv(msgs);
        run(&dedup(DedupConfig::default()), &mut c);
        assert_eq!(c.messages[0].text(), body, "{head}");
    }
}

fn collide(_: &str) -> u32 {
    7
}

#[test]
fn hash_collision_never_merges_different_texts() {
    // A forced collision (every text hashes alike) ...
    let (a, b) = (file(8, "a"), file(8, "b"));
    let mut msgs = vec![
        ("user", a.clone()),
        ("user", b.clone()),
        ("user", a.clone()),
    ];
    msgs.extend(filler(4));
    let mut c = conv(msgs.clone());
    let d = dedup(DedupConfig::default()).with_hash(collide);
    run(&d, &mut c);
    assert!(
        c.messages[0]
            .text()
            .starts_with(&format!("[cce:dup of {} ", r(&c, 2)))
    );
    assert_eq!(c.messages[1].text(), b);
    // ... and a real djb2 collision.
    let pad = file(8, "p");
    let (x, y) = (format!("{pad}Ab"), format!("{pad}BA"));
    assert_eq!(djb2(&x), djb2(&y));
    let mut msgs = vec![("user", x.clone()), ("user", y.clone())];
    msgs.extend(filler(4));
    let mut c = conv(msgs);
    let spec = dedup(DedupConfig::default()).with_hash(djb2);
    let an = spec.analyze(&c);
    assert!(an.replacements.is_empty());
    assert!(an.string_compares >= 1);
    run(&spec, &mut c);
    assert_eq!(c.messages[0].text(), x);
}

#[test]
fn the_default_hash_groups_as_the_spec_djb2_does() {
    let (a, b) = (file(8, "a"), file(8, "b"));
    let pad = file(8, "p");
    let mut msgs = vec![
        ("user", a.clone()),
        ("user", format!("{pad}Ab")),
        ("user", b.clone()),
        ("user", format!("{pad}BA")),
        ("user", a.clone()),
        ("user", b.replace("value_3", "value_x")),
        ("user", b),
    ];
    msgs.extend(filler(4));
    for cfg in [
        DedupConfig::default(),
        DedupConfig {
            fuzzy: true,
            delta: true,
            ..DedupConfig::default()
        },
    ] {
        let (mut x, mut y) = (conv(msgs.clone()), conv(msgs.clone()));
        run(&dedup(cfg.clone()), &mut x);
        run(&dedup(cfg).with_hash(djb2), &mut y);
        assert_eq!(x.to_json_string(), y.to_json_string());
        assert_ne!(x.to_json_string(), conv(msgs.clone()).to_json_string());
    }
}

fn reread(delta: bool, fuzzy: bool) -> (Conversation, String, String) {
    let v1 = file(10, "f");
    let v2 = v1.replace("value_6 = compute_f(6,", "value_6 = compute_g(6,");
    let mut msgs = vec![("user", v1.clone()), ("assistant", "edited".into())];
    msgs.push(("user", v2.clone()));
    msgs.extend(filler(4));
    let mut c = conv(msgs);
    run(
        &dedup(DedupConfig {
            fuzzy,
            delta,
            ..DedupConfig::default()
        }),
        &mut c,
    );
    (c, v1, v2)
}

#[test]
fn reread_file_with_one_changed_line_is_below_default_threshold() {
    let j = fuzzy::jaccard(
        &fuzzy::line_set(&file(10, "f")),
        &fuzzy::line_set(&file(10, "f").replace("compute_f(6,", "compute_g(6,")),
    );
    assert!((j - 9.0 / 11.0).abs() < 1e-12);
    let (c, v1, _) = reread(false, true);
    assert_eq!(c.messages[0].text(), v1, "0.82 < 0.85: not a near-dup");
    // with a lower threshold it is one
    let v1 = file(10, "f");
    let mut msgs = vec![
        ("user", v1.clone()),
        ("user", v1.replace("compute_f(6,", "compute_g(6,")),
    ];
    msgs.extend(filler(4));
    let mut c = conv(msgs);
    run(
        &dedup(DedupConfig {
            fuzzy: true,
            threshold: 0.8,
            ..DedupConfig::default()
        }),
        &mut c,
    );
    let n = v1.chars().count();
    assert_eq!(
        c.messages[0].text(),
        format!("[cce:near-dup of {} — {n} chars, ~82% match]", r(&c, 1))
    );
    let mark = c.ann(&MessageId::new("m0")).unwrap().dup.clone().unwrap();
    assert!((mark.similarity - 9.0 / 11.0).abs() < 1e-12);
}

#[test]
fn reread_file_with_delta_keeps_the_difference() {
    let (c, v1, v2) = reread(true, false);
    let t = c.messages[0].text().into_owned();
    let n = v1.chars().count();
    // `-` numbers lines of the keep target (v2), `+` lines of this text (v1)
    let old = v2.lines().nth(6).unwrap();
    let new = v1.lines().nth(6).unwrap();
    assert_eq!(
        t,
        format!(
            "[cce:near-dup of {} — {n} chars, ~82% match; diff:\n-7: {old}\n+7: {new}]",
            r(&c, 2)
        )
    );
    assert!(t.chars().count() < n);
    // the diff rebuilds the original exactly from the keep target
    let edits = delta::line_diff(&v2, &v1, 40).unwrap();
    assert_eq!(delta::apply(&v2, &edits), v1);
    let (c2, _, _) = reread(true, true);
    assert_eq!(c2.messages[0].text(), t, "fuzzy + delta gives the delta");
}

#[test]
fn delta_never_longer_than_the_original() {
    // every line differs but similarity still passes: diff would be longer
    let v1 = file(10, "d");
    let v2: String = v1
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i < 3 {
                l.replace("compute", "COMPUTE!")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut msgs = vec![("user", v1.clone()), ("user", v2.clone())];
    msgs.extend(filler(4));
    let d = dedup(DedupConfig {
        delta: true,
        delta_max_lines: 2,
        ..DedupConfig::default()
    });
    let mut c = conv(msgs);
    let out = run(&d, &mut c);
    assert_eq!(
        c.messages[0].text(),
        v1,
        "diff over the line cap: left alone"
    );
    assert!(!out.counters.contains_key("delta_refs"));
}

#[test]
fn transitive_near_dup_groups_share_one_keep() {
    let base = file(20, "t");
    let v2 = base.replace("value_3 =", "value_3b =");
    let v3 = v2.replace("value_15 =", "value_15b =");
    let mut msgs = vec![("user", base), ("user", v2), ("user", v3.clone())];
    msgs.extend(filler(4));
    let mut c = conv(msgs);
    run(
        &dedup(DedupConfig {
            fuzzy: true,
            threshold: 0.85,
            ..DedupConfig::default()
        }),
        &mut c,
    );
    // m0 ~ m2 directly is 18/22 = 0.82, below the threshold: joined through m1
    assert!(
        c.messages[0].text().ends_with("chars, ~82% match]"),
        "{}",
        c.messages[0].text()
    );
    assert!(
        c.messages[0]
            .text()
            .starts_with(&format!("[cce:near-dup of {} ", r(&c, 2)))
    );
    assert!(
        c.messages[1]
            .text()
            .starts_with(&format!("[cce:near-dup of {} ", r(&c, 2)))
    );
    assert_eq!(c.messages[2].text(), v3);
}

#[test]
fn tool_results_keep_message_and_pairing() {
    let body = file(8, "tool");
    let doc = json!([
        {"role":"user","content":"go"},
        {"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"Read","arguments":"{\"path\":\"a.rs\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content": body},
        {"role":"assistant","content":"","tool_calls":[{"id":"c2","type":"function","function":{"name":"Read","arguments":"{\"path\":\"a.rs\"}"}}]},
        {"role":"tool","tool_call_id":"c2","content": body},
        {"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"role":"user","content":"d"}
    ]);
    let mut c = Conversation::parse(&doc.to_string()).unwrap();
    run(&dedup(DedupConfig::default()), &mut c);
    let n = body.chars().count();
    assert_eq!(c.messages[2].text(), format!("[cce:dup of c2 — {n} chars]"));
    assert_eq!(c.messages[2].tool_results()[0].call_id, "c1");
    assert!(ctxpress_core::validate(&c).is_empty());
}

#[test]
fn anthropic_carrier_dedups_each_result_separately() {
    let (a, b) = (file(8, "ra"), file(8, "rb"));
    let doc = json!({"messages":[
        {"role":"user","content":"go"},
        {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}},{"type":"tool_use","id":"t2","name":"Read","input":{}}]},
        {"role":"user","content":[
            {"type":"tool_result","tool_use_id":"t1","content":a},
            {"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":b}]}]},
        {"role":"assistant","content":[{"type":"tool_use","id":"t3","name":"Read","input":{}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":a}]},
        {"role":"assistant","content":[{"type":"tool_use","id":"t4","name":"Read","input":{}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"t4","content":[{"type":"text","text":b},{"type":"image","source":{}}]}]},
        {"role":"assistant","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"},{"role":"user","content":"d"}
    ]});
    let mut c = Conversation::parse(&doc.to_string()).unwrap();
    run(&dedup(DedupConfig::default()), &mut c);
    let r = c.messages[2].tool_results();
    assert_eq!(r[0].call_id, "t1");
    assert_eq!(
        r[0].text,
        format!("[cce:dup of t3 — {} chars]", a.chars().count())
    );
    assert_eq!(
        r[1].text, b,
        "its only copy carries an image: not a candidate"
    );
    assert_eq!(c.messages[4].tool_results()[0].text, a);
    assert!(ctxpress_core::validate(&c).is_empty());
}

#[test]
fn messages_with_tool_calls_are_not_eligible() {
    let body = file(8, "tc");
    let doc = json!([
        {"role":"assistant","content": body,"tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"r"},
        {"role":"assistant","content": body},
        {"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"role":"user","content":"d"}
    ]);
    let mut c = Conversation::parse(&doc.to_string()).unwrap();
    run(&dedup(DedupConfig::default()), &mut c);
    assert_eq!(c.messages[0].text(), body);
}

#[test]
fn comparisons_are_not_quadratic() {
    // 2,000 texts, 30% near-duplicates of earlier ones.
    let mut msgs = Vec::new();
    let mut originals: Vec<String> = Vec::new();
    for i in 0..2000usize {
        let t = if i > 5 && i % 10 < 3 {
            let k = (i * 7919) % originals.len();
            originals[k].replace("arg 3", &format!("changed {i}"))
        } else {
            let t = (0..12)
                .map(|l| format!("item {i} line {l} arg {l} tail text"))
                .collect::<Vec<_>>()
                .join("\n");
            originals.push(t.clone());
            t
        };
        msgs.push(("user", t));
    }
    let c = conv(msgs);
    let an = dedup(DedupConfig {
        fuzzy: true,
        threshold: 0.8,
        ..DedupConfig::default()
    })
    .analyze(&c);
    let all_pairs = 2000u64 * 1999 / 2;
    assert!(
        an.comparisons < 10 * 2000,
        "{} comparisons (all pairs: {all_pairs})",
        an.comparisons
    );
    let near = an
        .replacements
        .iter()
        .filter(|r| r.kind == Kind::Near)
        .count();
    assert!(near >= 550, "found {near} near-dups");
}

#[test]
fn common_lines_are_capped() {
    // Every text shares 30 boilerplate lines plus 3 unique ones: Jaccard 30/36
    // between any two, so everything is a candidate of everything.
    let boiler: String = (0..30)
        .map(|l| format!("common boilerplate {l}\n"))
        .collect();
    let msgs: Vec<(&str, String)> = (0..600)
        .map(|i| ("user", format!("{boiler}u{i}a\nu{i}b\nu{i}c")))
        .collect();
    let c = conv(msgs);
    let d = dedup(DedupConfig {
        fuzzy: true,
        threshold: 0.8,
        ..DedupConfig::default()
    });
    let an = d.analyze(&c);
    assert!(
        an.comparisons <= 600 * (d.config().max_candidates as u64 + 1),
        "{}",
        an.comparisons
    );
}

#[test]
fn registered_and_built_from_params() {
    let built = ctxpress_core::registry::build("dedup", &json!({"fuzzy": true})).unwrap();
    assert_eq!(built.name(), "dedup");
    let e = ctxpress_core::registry::build("dedup", &json!({"fuzz": true})).unwrap_err();
    assert!(e.to_string().contains("fuzzy"), "{e}");
    assert!(ctxpress_core::registry::build("dedup", &json!({"threshold": 0})).is_err());
}

#[test]
fn a_near_dup_whose_diff_is_too_long_stays_unless_bare_references_are_allowed() {
    // 3 of 30 lines differ: ~90% similar, a 6-line diff over a 2-line cap.
    let v1 = file(30, "n");
    let v2: String = v1
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i < 3 {
                l.replace("compute", "COMPUTE")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let cfg = DedupConfig {
        fuzzy: true,
        delta: true,
        delta_max_lines: 2,
        threshold: 0.8,
        ..DedupConfig::default()
    };
    let msgs = || {
        let mut m = vec![("user", v1.clone()), ("user", v2.clone())];
        m.extend(filler(4));
        m
    };
    let mut c = conv(msgs());
    run(&dedup(cfg.clone()), &mut c);
    assert!(
        c.messages[0].text().contains("near-dup of"),
        "the default: a bare reference"
    );
    let mut c = conv(msgs());
    run(
        &dedup(DedupConfig {
            near_without_diff: false,
            ..cfg
        }),
        &mut c,
    );
    assert_eq!(
        c.messages[0].text(),
        v1,
        "no reference that hides the lines that differ"
    );
}

/// Grouping as first written: a map from root to the units under it, the
/// groups sorted by their first unit.
fn reference_groups(class_of: &[usize], root: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
    for (u, &c) in class_of.iter().enumerate() {
        groups.entry(root(c)).or_default().push(u);
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
    groups.sort_by_key(|g| g.first().copied());
    groups
}

proptest::proptest! {
    #[test]
    fn group_units_match_the_reference(
        class_of in proptest::collection::vec(0usize..12, 0..40),
        roots in proptest::collection::vec(0usize..12, 12),
    ) {
        let root = |c: usize| roots[c];
        let (starts, members) = group_units(&class_of, 12, root);
        let got: Vec<Vec<usize>> = starts
            .windows(2)
            .map(|w| members[w[0]..w[1]].to_vec())
            .collect();
        proptest::prop_assert_eq!(got, reference_groups(&class_of, root));
    }

    #[test]
    fn exact_classes_do_not_depend_on_the_hash(
        picks in proptest::collection::vec((0usize..5, 0usize..3), 2..24),
    ) {
        // Few distinct texts, some near each other; one hash puts them all
        // in one bucket chain, another splits by length only.
        let texts: Vec<String> = picks
            .iter()
            .map(|&(t, v)| format!("{}{}", file(12, &format!("t{t}")), "x".repeat(v)))
            .collect();
        let msgs: Vec<(&str, String)> = texts.iter().map(|t| ("user", t.clone())).collect();
        let cfg = DedupConfig {
            recency_window: 0,
            fuzzy: true,
            delta: true,
            ..DedupConfig::default()
        };
        let c = conv(msgs);
        let plain = dedup(cfg.clone()).analyze(&c);
        for hash in [(|_: &str| 7u32) as fn(&str) -> u32, |t: &str| t.len() as u32, djb2] {
            let other = dedup(cfg.clone()).with_hash(hash).analyze(&c);
            proptest::prop_assert_eq!(other.units, plain.units);
            proptest::prop_assert_eq!(other.comparisons, plain.comparisons);
            let key = |a: &Analysis| -> Vec<(usize, String, String)> {
                a.replacements
                    .iter()
                    .map(|r| (r.index, r.keep.to_string(), r.text.clone()))
                    .collect()
            };
            proptest::prop_assert_eq!(key(&other), key(&plain));
        }
    }
}

/// Texts of one length with the same head and tail that differ only in the
/// middle (a repeated command's output with a different timing, say) land
/// in different buckets: the grouping hash reads the whole text, so they
/// are not compared with each other one by one (which would grow with the
/// square of their number).
#[test]
fn same_length_texts_differing_inside_are_not_compared_pairwise() {
    let head = file(20, "head");
    let tail = file(20, "tail");
    let msgs: Vec<(&str, String)> = (0..400)
        .map(|i| ("user", format!("{head}\nrun took {i:06} ms\n{tail}")))
        .chain(filler(4))
        .collect();
    let c = conv(msgs);
    let an = dedup(DedupConfig::default()).analyze(&c);
    assert!(an.replacements.is_empty());
    assert!(an.string_compares < 10, "{} compares", an.string_compares);
}

/// A reference names its keep target as the reader sees it (a model sees
/// roles and texts, not ctxpress's message ids): a text by its message's
/// role and first words, a tool result by its call id.
#[test]
fn references_name_what_the_reader_sees() {
    let body = format!("Fix the failing test in src/app.py\n{}", file(8, "q"));
    let mut msgs = vec![
        ("user", body.clone()),
        ("assistant", "sure".into()),
        ("user", body.clone()),
    ];
    msgs.extend(filler(4));
    let mut c = conv(msgs);
    run(&dedup(DedupConfig::default()), &mut c);
    let n = body.chars().count();
    assert_eq!(
        c.messages[0].text(),
        format!("[cce:dup of the user message \"Fix the failing test in src/app.py\" — {n} chars]")
    );
}
