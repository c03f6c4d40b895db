//! Token counter throughput on corpus text.
#![allow(missing_docs)]
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ctxpress_core::TokenCounter;

fn corpus_text() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/swe_agent_trajs.jsonl"
    );
    let raw = std::fs::read_to_string(path)
        .unwrap_or_else(|_| "hello world, this is some text ".repeat(30_000));
    raw.chars().take(1 << 20).collect()
}

fn bench(c: &mut Criterion) {
    let text = corpus_text();
    let mut g = c.benchmark_group("tokens");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.sample_size(10);
    g.bench_function("heuristic", |b| {
        b.iter(|| ctxpress_core::tokens::Heuristic.count(std::hint::black_box(&text)))
    });
    for enc in ["o200k_base", "cl100k_base"] {
        let bpe = ctxpress_core::tokens::Bpe::new(enc).unwrap();
        g.bench_function(enc, |b| b.iter(|| bpe.count(std::hint::black_box(&text))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
