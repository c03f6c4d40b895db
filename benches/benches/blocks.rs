//! One message with many content blocks (issue #33): an Anthropic turn of N
//! parallel `tool_use` calls and the message with their N `tool_result`
//! blocks ([`many_blocks`]), through the `agent` preset and through
//! `validate`, for N from 1,000 to 16,000. Throughput is in blocks: it stays
//! flat while the work is linear in N (a lookup of each result by a scan of
//! the blocks made it fall as 1/N). No corpus needed.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ctxpress::core::fixtures::many_blocks;
use ctxpress::{Compressor, validate};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let agent = Compressor::preset("agent").expect("agent preset");
    let mut g = c.benchmark_group("many_blocks");
    g.sample_size(10);
    for n in [1_000, 4_000, 16_000] {
        let conv = many_blocks(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("agent", n), &conv, |b, conv| {
            b.iter(|| {
                let mut out = conv.clone();
                black_box(agent.compress(&mut out).expect("compress"));
            });
        });
        g.bench_with_input(BenchmarkId::new("validate", n), &conv, |b, conv| {
            b.iter(|| black_box(validate(conv)));
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
