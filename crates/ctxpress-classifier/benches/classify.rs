//! Throughput of `classify` over the message text of the shared corpus.
#![allow(missing_docs)]
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Every message `content` string of every corpus file (read at bench time).
fn corpus_texts() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec!["The quick brown fox jumps over the lazy dog. ".repeat(200); 500];
    };
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    for p in paths {
        let Ok(raw) = std::fs::read_to_string(&p) else {
            continue;
        };
        for line in raw.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            for m in v["messages"].as_array().into_iter().flatten() {
                if let Some(s) = m["content"].as_str()
                    && !s.is_empty()
                {
                    out.push(s.to_string());
                }
            }
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let texts = corpus_texts();
    let bytes: usize = texts.iter().map(String::len).sum();
    eprintln!(
        "corpus: {} texts, {:.1} MB",
        texts.len(),
        bytes as f64 / 1e6
    );
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.sample_size(10);
    g.bench_function("corpus", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| ctxpress_classifier::classify(t).hard.len())
                .sum::<usize>()
        })
    });
    g.finish();

    // Short texts (most chat turns) measure the fixed cost per call.
    let short: Vec<&String> = texts.iter().filter(|t| t.len() < 512).collect();
    let mut g = c.benchmark_group("classify_short");
    g.throughput(Throughput::Elements(short.len() as u64));
    g.sample_size(10);
    g.bench_function("corpus_under_512_bytes", |b| {
        b.iter(|| {
            short
                .iter()
                .map(|t| ctxpress_classifier::classify(t).hard.len())
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
