//! Deterministic summarizer throughput (MB/s) over the prose of the shared
//! corpus: user and assistant message texts of 120 characters or more,
//! read from `../shared/corpus` at bench time (never copied into the repo).
#![allow(missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ctxpress_summarizer::text::{Budget, extract_entities, summarize_text};
use std::path::PathBuf;

/// Up to `cap` bytes of prose texts from the corpus files.
fn corpus_prose(cap: usize) -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    let per_file = cap / files.len().max(1);
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let mut taken = 0;
        'lines: for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            for m in v["messages"].as_array().into_iter().flatten() {
                let role = m["role"].as_str().unwrap_or("");
                let t = m["content"].as_str().unwrap_or("");
                if matches!(role, "user" | "assistant") && t.chars().count() >= 120 {
                    taken += t.len();
                    out.push(t.to_string());
                    if taken >= per_file {
                        break 'lines;
                    }
                }
            }
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let texts = corpus_prose(4 << 20);
    if texts.is_empty() {
        eprintln!("no corpus found; skipping");
        return;
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    eprintln!(
        "corpus prose: {} texts, {:.2} MB",
        texts.len(),
        bytes as f64 / 1e6
    );
    let budget = Budget::default();
    let mut g = c.benchmark_group("deterministic");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.sample_size(10);
    g.bench_function("summarize_text", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| summarize_text(t, &budget).len())
                .sum::<usize>()
        })
    });
    g.bench_function("summarize_text+entities", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| summarize_text(t, &budget).len() + extract_entities(t, 10).len())
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = bench
}
criterion_main!(benches);
