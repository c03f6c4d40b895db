//! Criterion comparison across presets and strategies on a sample of
//! `../shared/corpus/coding_agent_sessions.jsonl` (every 6th session, at most
//! 6; `CTXPRESS_BENCH_SESSIONS=N` takes N instead): each preset, then each
//! registered strategy alone with its default parameters, compressing the
//! sample (parsed once; each iteration compresses fresh clones, which are cheap:
//! messages are copy-on-write). Throughput
//! is in input bytes. Without the corpus the bench prints why and measures
//! nothing.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ctxpress::{Compressor, Conversation, PRESETS, PipelineConfig};
use ctxpress_tests::corpus;
use std::hint::black_box;

const FILE: &str = "coding_agent_sessions.jsonl";

/// The parsed sample and its size in bytes, or `None` (with a message)
/// when the corpus is missing.
fn sample() -> Option<(Vec<Conversation>, u64)> {
    let path = match corpus::try_file(FILE) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ctxpress-benches: skipping, {e}");
            return None;
        }
    };
    let take = std::env::var("CTXPRESS_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let lines = corpus::sample(&path, 6, take);
    let bytes = lines.iter().map(|l| l.text.len() as u64).sum();
    let convs = lines
        .iter()
        .map(|l| Conversation::parse(&l.text).unwrap_or_else(|e| panic!("{}: {e}", l.at)))
        .collect();
    Some((convs, bytes))
}

/// Compress every conversation of `sample` with `c` (fresh clones).
fn run(c: &Compressor, sample: &[Conversation]) {
    for conv in sample {
        let mut out = conv.clone();
        black_box(c.compress(&mut out).expect("compress"));
    }
}

fn bench(c: &mut Criterion) {
    let Some((sample, bytes)) = sample() else {
        return;
    };
    eprintln!(
        "ctxpress-benches: {} sessions of {FILE}, {bytes} bytes",
        sample.len()
    );
    let mut g = c.benchmark_group("presets");
    g.sample_size(10).throughput(Throughput::Bytes(bytes));
    for p in PRESETS {
        let comp = Compressor::preset(p.name).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        if comp.needs_async() {
            eprintln!("ctxpress-benches: preset {} needs async, skipped", p.name);
            continue;
        }
        g.bench_function(p.name, |b| b.iter(|| run(&comp, &sample)));
    }
    g.finish();

    let mut g = c.benchmark_group("strategies");
    g.sample_size(10).throughput(Throughput::Bytes(bytes));
    for f in ctxpress::core::registry::strategies().expect("registry") {
        let toml = format!("version = 1\n[[stages]]\ntype = \"{}\"\n", f.name);
        let comp = PipelineConfig::from_toml(&toml)
            .and_then(|cfg| Compressor::from_config(&cfg))
            .ok()
            .filter(|c| !c.needs_async());
        let Some(comp) = comp else {
            eprintln!(
                "ctxpress-benches: strategy {} does not run alone with defaults, skipped",
                f.name
            );
            continue;
        };
        g.bench_function(f.name, |b| b.iter(|| run(&comp, &sample)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
