//! Summary speed: one summary per kind over typical result texts, and a whole
//! compression of a synthetic 800-message session (with the information check).
#![allow(missing_docs)]

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use ctxpress_core::{Conversation, StageContext};
use ctxpress_tool_compressor::{Kind, Limits, Subject, ToolCompressor, summarize};
use serde_json::{Value, json};

fn source(n: usize) -> String {
    (1..=n)
        .map(|i| match i % 9 {
            1 => format!("{i}\texport async function loadUser{i}(id: number): Promise<User> {{"),
            2 => format!(
                "{i}\t  const row = await db.query('SELECT * FROM users WHERE id = $1', [id]);"
            ),
            5 => format!("{i}\t  private cacheKey{i}: string = 'user:' + id;"),
            _ => format!("{i}\t    if (!row) {{ throw new NotFoundError('user ' + id); }}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn log(n: usize) -> String {
    let mut s: String = (0..n)
        .map(|i| format!(" bfb0a9f61bdf Downloading {i}.{}MB / 80MB\n", i % 10))
        .collect();
    s.push_str("error: failed to solve: process \"/bin/sh -c npm ci\" did not complete successfully: exit code: 1\n");
    s.push_str("Tests: 3 failed, 120 passed, 123 total\n");
    s
}

fn grep(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "src/modules/m{}/service.ts:{i}:  return loadUser(id);",
                i % 23
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn session(n: usize) -> Conversation {
    let mut msgs = vec![json!({"role": "user", "content": "go"})];
    for i in 0..n {
        let (name, args, result) = match i % 3 {
            0 => (
                "Read",
                json!({"file_path": format!("/r/src/f{}.ts", i % 7)}),
                source(300),
            ),
            1 => (
                "Bash",
                json!({"command": format!("npm test -- {}", i % 5)}),
                log(200),
            ),
            _ => ("Grep", json!({"pattern": "loadUser"}), grep(150)),
        };
        msgs.push(json!({"role": "assistant", "content": "", "tool_calls": [{"id": format!("c{i}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}));
        msgs.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": result}));
    }
    Conversation::parse(&Value::Array(msgs).to_string()).expect("valid")
}

fn bench(c: &mut Criterion) {
    let limits = Limits::default();
    let subject = Subject {
        tool: "Read".into(),
        paths: vec!["/r/src/users.ts".into()],
        command: Some("npm test".into()),
        exit: Some(1),
    };
    let cases = [
        ("read_outline_600_lines", Kind::Read, source(600)),
        ("command_log_400_lines", Kind::Command, log(400)),
        ("search_300_matches", Kind::Search, grep(300)),
    ];
    let mut g = c.benchmark_group("summary");
    for (name, kind, text) in &cases {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| black_box(summarize(*kind, &subject, black_box(text), &limits)))
        });
    }
    g.finish();
    let conv = session(400);
    let tc = ToolCompressor::default();
    let ctx = StageContext::default();
    let mut g = c.benchmark_group("compress");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(conv.to_json_string().len() as u64));
    g.bench_function("session_800_messages", |b| {
        b.iter(|| {
            let mut c = conv.clone();
            black_box(tc.compress(&mut c, &ctx))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
