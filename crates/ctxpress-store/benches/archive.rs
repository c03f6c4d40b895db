//! Archive throughput on real conversations: storing the records of one
//! compressed conversation, and expanding it back, in a WAL file.
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{Criterion, criterion_group, criterion_main};
use ctxpress_core::archive::{expand, records};
use ctxpress_core::{Archive, Conversation};
use ctxpress_store::SqliteArchive;
use std::path::PathBuf;

fn compressed(input: &Conversation) -> Conversation {
    let mut out = input.clone();
    let drop: Vec<usize> = out
        .exchanges()
        .iter()
        .step_by(2)
        .flat_map(|e| std::iter::once(e.call).chain(e.results.clone()))
        .collect();
    let mut i = 0;
    out.messages.retain(|_| {
        i += 1;
        !drop.contains(&(i - 1))
    });
    out
}

fn bench(c: &mut Criterion) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/swe_agent_trajs.jsonl");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipping: {} is absent", path.display());
        return;
    };
    let pairs: Vec<(Conversation, Conversation)> = text
        .lines()
        .filter_map(|l| Conversation::parse(l).ok())
        .map(|i| {
            let o = compressed(&i);
            (i, o)
        })
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteArchive::open(dir.path().join("bench.db")).expect("archive");
    let recs: Vec<_> = pairs.iter().map(|(i, o)| records(i, o)).collect();
    c.bench_function("put all swe_agent records (13 batches)", |b| {
        b.iter(|| {
            for r in &recs {
                store.put(r).expect("put");
            }
        })
    });
    c.bench_function("expand all swe_agent outputs", |b| {
        b.iter(|| {
            for (_, o) in &pairs {
                expand(o, &store).expect("expand");
            }
        })
    });
    let keys: Vec<String> = recs.iter().flatten().map(|r| r.key.clone()).collect();
    c.bench_function("get every record key", |b| {
        b.iter(|| {
            for k in &keys {
                store.get(k).expect("get");
            }
        })
    });
    eprintln!(
        "{} records, {} keys; {:?}",
        recs.len(),
        keys.len(),
        store.stats()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
