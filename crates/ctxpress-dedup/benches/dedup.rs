//! Dedup on 10,000 synthetic messages of which 30% are near-duplicates.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{Criterion, criterion_group, criterion_main};
use ctxpress_core::{Conversation, Message, MessageId, StageContext, Strategy};
use ctxpress_dedup::{Dedup, DedupConfig};
use std::hint::black_box;

fn corpus(n: usize) -> Conversation {
    // Simple LCG so the bench needs no RNG crate.
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        s >> 33
    };
    let mut originals: Vec<String> = Vec::new();
    let mut msgs = Vec::with_capacity(n);
    for i in 0..n {
        let text = if i > 10 && next() % 10 < 3 {
            // near-duplicate of an earlier original: change one line
            let k = (next() as usize) % originals.len();
            let mut lines: Vec<String> = originals[k].lines().map(str::to_string).collect();
            let l = (next() as usize) % lines.len();
            lines[l] = format!("changed line {i}");
            lines.join("\n")
        } else {
            let t = (0..12)
                .map(|l| format!("fn item_{i}_{l}() {{ compute({}, {l}); }}", next() % 1000))
                .collect::<Vec<_>>()
                .join("\n");
            originals.push(t.clone());
            t
        };
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        msgs.push(Message::text_message(
            MessageId::new(format!("m{i}")),
            role,
            &text,
        ));
    }
    Conversation::new(msgs)
}

fn bench(c: &mut Criterion) {
    let conv = corpus(10_000);
    let ctx = StageContext::default();
    for (name, fuzzy, delta) in [
        ("exact", false, false),
        ("fuzzy", true, false),
        ("delta", true, true),
    ] {
        let d = Dedup::new(DedupConfig {
            fuzzy,
            delta,
            ..DedupConfig::default()
        })
        .expect("valid config");
        c.bench_function(&format!("dedup_10k_30pct_near_{name}"), |b| {
            b.iter(|| {
                let mut cv = conv.clone();
                black_box(d.apply(&mut cv, &ctx).expect("dedup runs"))
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
