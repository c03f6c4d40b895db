//! Operation extraction speed: built-in dialect table over typical tool calls,
//! and a whole prune of a synthetic session.
#![allow(missing_docs)]

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use ctxpress_core::{Conversation, ToolCall};
use ctxpress_dialect::{DialectTable, parse_shell};
use ctxpress_stale_pruner::StalePruner;
use serde_json::{Value, json};
use std::borrow::Cow;

fn calls() -> Vec<(String, String)> {
    let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: src/b.rs\n+x\n*** End Patch\n";
    vec![
        ("Read".into(), json!({"file_path": "/repo/src/lib.rs"}).to_string()),
        ("Edit".into(), json!({"file_path": "/repo/src/lib.rs", "old_string": "a".repeat(200), "new_string": "b".repeat(200)}).to_string()),
        ("Write".into(), json!({"file_path": "/repo/src/new.rs", "content": "x\n".repeat(500)}).to_string()),
        ("Bash".into(), json!({"command": "cd \"/repo/backend\" && NODE_OPTIONS='--x' npx jest --config jest.config.js 2>&1 | tail -50"}).to_string()),
        ("exec_command".into(), json!({"cmd": "sed -n '1,200p' backend/cmd/server/main.go && echo '---' && sed -n '1,220p' backend/internal/app/app.go", "workdir": "/home/u/proj"}).to_string()),
        ("apply_patch".into(), json!({"input": patch}).to_string()),
        ("str_replace_editor".into(), json!({"command": "view", "path": "/w/a.py"}).to_string()),
        ("TaskCreate".into(), json!({"subject": "x"}).to_string()),
    ]
}

fn session(n: usize) -> Conversation {
    let mut msgs = vec![json!({"role": "user", "content": "go"})];
    for i in 0..n {
        let (name, args) = match i % 4 {
            0 => ("Read", json!({"file_path": format!("/r/f{}.rs", i % 7)})),
            1 => (
                "Edit",
                json!({"file_path": format!("/r/f{}.rs", i % 5), "old_string": "a", "new_string": "b"}),
            ),
            2 => (
                "Bash",
                json!({"command": format!("cargo test -p p{}", i % 3)}),
            ),
            _ => (
                "Write",
                json!({"file_path": format!("/r/f{}.rs", i % 6), "content": "x\n".repeat(40)}),
            ),
        };
        msgs.push(json!({"role": "assistant", "content": "", "tool_calls": [{"id": format!("c{i}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}));
        msgs.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "line\n".repeat(60)}));
    }
    Conversation::parse(&Value::Array(msgs).to_string()).expect("valid")
}

fn bench(c: &mut Criterion) {
    let table = DialectTable::builtin();
    let calls = calls();
    c.bench_function("extract_8_calls", |b| {
        b.iter(|| {
            for (name, args) in &calls {
                let call = ToolCall {
                    id: Cow::Borrowed("c"),
                    name: Cow::Borrowed(name.as_str()),
                    arguments: Cow::Borrowed(args.as_str()),
                };
                black_box(table.extract(&call, Some("/repo")));
            }
        })
    });
    c.bench_function("parse_shell_compound", |b| {
        b.iter(|| {
            black_box(parse_shell(
                black_box("cd /r && cat > out.txt <<'EOF'\nhello\nEOF\nsed -n '1,80p' a.rs | nl && npm test 2>&1 | tail -n 40"),
                Some("/w"),
            ))
        })
    });
    let conv = session(400);
    let pruner = StalePruner::default();
    c.bench_function("prune_800_messages", |b| {
        b.iter(|| {
            let mut c = conv.clone();
            black_box(pruner.prune(&mut c))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
