//! Property tests: on random conversations (both dialects, with tool
//! exchanges, exact and near-duplicate texts) dedup run through the pipeline is
//! never reverted, never breaks pairing, never lengthens anything, and the
//! archive restores the input byte for byte.

use ctxpress_core::archive::{archive, expand};
use ctxpress_core::{Conversation, MemoryArchive, Pipeline, StageContext, StageStatus, validate};
use ctxpress_dedup::{Dedup, DedupConfig};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A text: one of a few long bases, possibly with one line changed.
fn text(pool: &[String], pick: usize, change: Option<usize>, short: bool) -> String {
    if short {
        return format!("short {pick}");
    }
    let base = &pool[pick % pool.len()];
    match change {
        None => base.clone(),
        Some(k) => {
            let mut lines: Vec<&str> = base.split('\n').collect();
            let i = k % lines.len();
            let repl = format!("changed line {k} é");
            lines[i] = &repl;
            lines.join("\n")
        }
    }
}

fn pool() -> Vec<String> {
    (0..4)
        .map(|b| {
            (0..(8 + b * 3))
                .map(|l| format!("base {b} line {l}: let x_{l} = f({b}, {l}); // ü"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Item {
    Text(bool, usize, Option<usize>, bool),
    Tools(Vec<(usize, Option<usize>, bool)>),
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        (
            any::<bool>(),
            0..4usize,
            proptest::option::of(0..20usize),
            proptest::bool::weighted(0.2)
        )
            .prop_map(|(u, p, c, s)| Item::Text(u, p, c, s)),
        proptest::collection::vec(
            (
                0..4usize,
                proptest::option::of(0..20usize),
                proptest::bool::weighted(0.2)
            ),
            1..3
        )
        .prop_map(Item::Tools),
    ]
}

fn build(items: &[Item], anthropic: bool) -> String {
    let pool = pool();
    let mut msgs: Vec<Value> = Vec::new();
    if !anthropic {
        msgs.push(json!({"role": "system", "content": pool[0]}));
    }
    let mut call = 0;
    for it in items {
        match it {
            Item::Text(user, p, c, s) => msgs.push(json!({
                "role": if *user { "user" } else { "assistant" },
                "content": text(&pool, *p, *c, *s),
            })),
            Item::Tools(results) => {
                let ids: Vec<String> = results
                    .iter()
                    .map(|_| {
                        call += 1;
                        format!("call_{call}")
                    })
                    .collect();
                if anthropic {
                    let uses: Vec<Value> = ids
                        .iter()
                        .map(|id| json!({"type": "tool_use", "id": id, "name": "Read", "input": {"p": 1}}))
                        .collect();
                    msgs.push(json!({"role": "assistant", "content": uses}));
                    let res: Vec<Value> = ids
                        .iter()
                        .zip(results)
                        .map(|(id, (p, c, s))| json!({"type": "tool_result", "tool_use_id": id, "content": text(&pool, *p, *c, *s)}))
                        .collect();
                    msgs.push(json!({"role": "user", "content": res}));
                } else {
                    let calls: Vec<Value> = ids
                        .iter()
                        .map(|id| json!({"id": id, "type": "function", "function": {"name": "Read", "arguments": "{}"}}))
                        .collect();
                    msgs.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
                    for (id, (p, c, s)) in ids.iter().zip(results) {
                        msgs.push(json!({"role": "tool", "tool_call_id": id, "content": text(&pool, *p, *c, *s)}));
                    }
                }
            }
        }
    }
    json!({"id": "prop", "messages": msgs}).to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn dedup_is_safe_and_reversible(
        items in proptest::collection::vec(item(), 0..14),
        anthropic in any::<bool>(),
        fuzzy in any::<bool>(),
        delta in any::<bool>(),
        window in 0..5usize,
    ) {
        let doc = build(&items, anthropic);
        let input = Conversation::parse(&doc).unwrap();
        prop_assert!(validate(&input).is_empty());
        let mut p = Pipeline::default();
        p.push(Box::new(Dedup::new(DedupConfig {
            fuzzy,
            delta,
            recency_window: window,
            threshold: 0.7,
            ..DedupConfig::default()
        }).unwrap()));
        let mut out = input.clone();
        let report = p.run(&mut out, &StageContext::default());
        prop_assert_eq!(&report.stages[0].status, &StageStatus::Applied);
        prop_assert!(validate(&out).is_empty());
        prop_assert_eq!(out.messages.len(), input.messages.len());
        for (a, b) in input.messages.iter().zip(&out.messages) {
            prop_assert_eq!(a.id(), b.id());
            prop_assert!(b.size() <= a.size());
            prop_assert_eq!(a.role(), b.role());
        }
        // the last `window` messages are untouched
        let n = input.messages.len();
        for i in n.saturating_sub(window)..n {
            prop_assert_eq!(
                input.message_json(&input.messages[i]),
                out.message_json(&out.messages[i])
            );
        }
        let arch = MemoryArchive::new();
        archive(&input, &out, &arch).unwrap();
        let back = expand(&out, &arch).unwrap();
        prop_assert_eq!(back.to_json_string(), doc);
    }
}
