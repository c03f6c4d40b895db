//! Building the tool-traffic index (`dialect::traffic`) on the coding-agent
//! sessions of the shared corpus: cold (every call parsed and its operation
//! extracted) and warm (the conversation's cache already holds every
//! message, as for the second stage of a run), against the walk the stages
//! did before (arguments parsed per call with `DialectTable::extract`).
#![allow(missing_docs)]
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ctxpress_core::Conversation;
use ctxpress_dialect as dialect;
use ctxpress_dialect::traffic::Traffic;

fn conversations() -> (Vec<Conversation>, usize) {
    let dir = std::env::var("CTXPRESS_CORPUS")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus").into());
    let path = format!("{dir}/coding_agent_sessions.jsonl");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}; benchmarking a small synthetic session instead");
            let calls: String = (0..200)
                .map(|i| {
                    format!(
                        r#"{{"role":"assistant","content":"","tool_calls":[{{"id":"c{i}","type":"function","function":{{"name":"Read","arguments":"{{\"file_path\":\"src/m{i}.rs\"}}"}}}}]}},{{"role":"tool","tool_call_id":"c{i}","content":"fn f() {{}}"}},"#
                    )
                })
                .collect();
            format!(
                r#"[{{"role":"user","content":"go"}},{calls}{{"role":"user","content":"done"}}]"#
            )
        }
    };
    let convs: Vec<Conversation> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Conversation::parse(l).expect("corpus parses"))
        .collect();
    (convs, text.len())
}

fn bench(c: &mut Criterion) {
    let (convs, bytes) = conversations();
    let table = dialect::builtin();
    let mut g = c.benchmark_group("traffic");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.sample_size(10);
    g.bench_function("index_cold", |b| {
        b.iter_batched_ref(
            // Fresh copies: an empty cache each (made and dropped untimed).
            || {
                convs
                    .iter()
                    .map(|c| Conversation::parse(&c.to_json_string()).expect("parses"))
                    .collect::<Vec<_>>()
            },
            |fresh| {
                for conv in fresh.iter() {
                    std::hint::black_box(Traffic::of(conv, table, None));
                }
            },
            criterion::BatchSize::LargeInput,
        )
    });
    for conv in &convs {
        Traffic::of(conv, table, None);
    }
    g.bench_function("index_warm", |b| {
        b.iter(|| {
            for conv in &convs {
                std::hint::black_box(Traffic::of(conv, table, None));
            }
        })
    });
    g.bench_function("per_call_extract", |b| {
        b.iter(|| {
            for conv in &convs {
                let cwd = dialect::detect_cwd(conv);
                for ex in conv.exchanges() {
                    for call in conv.messages[ex.call].tool_calls() {
                        std::hint::black_box(table.extract(&call, cwd.as_deref()));
                    }
                }
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
