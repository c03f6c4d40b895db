//! Property tests: random agent sessions in both provider shapes, with random
//! result texts and settings, run through the core pipeline. The stage is
//! never reverted, adds no violation, never makes a message longer, keeps
//! ids, roles and order, changes nothing but tool-result text outside the
//! protected tail, and `expand` restores the input byte for byte. The
//! summary builders never panic on any text.
#![allow(missing_docs)]

use ctxpress_core::archive::archive;
use ctxpress_core::{
    Conversation, MemoryArchive, Pipeline, StageContext, StageStatus, expand, validate,
};
use ctxpress_dialect::Turns;
use ctxpress_tool_compressor::{Kind, Limits, Subject, ToolCompressor, ToolCompressorConfig};
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
enum Step {
    Op { kind: u8, path: u8, body: Body },
    User,
    Parallel(u8, u8),
}

#[derive(Debug, Clone)]
enum Body {
    /// A numbered source file of n lines.
    Source(u16),
    /// Log lines with errors and counts.
    Log(u16, bool),
    /// Any text.
    Free(String),
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        3 => (1u16..120).prop_map(Body::Source),
        3 => (1u16..120, any::<bool>()).prop_map(|(n, f)| Body::Log(n, f)),
        2 => "(?s).{0,900}".prop_map(Body::Free),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u8..7, 0u8..3, body()).prop_map(|(kind, path, body)| Step::Op { kind, path, body }),
        1 => Just(Step::User),
        1 => (0u8..3, 0u8..3).prop_map(|(a, b)| Step::Parallel(a, b)),
    ]
}

fn text_of(b: &Body) -> String {
    match b {
        Body::Source(n) => (1..=*n)
            .map(|i| {
                if i % 7 == 1 {
                    format!("{i}\tpub fn handler_{i}(req: &Request) -> Response {{")
                } else {
                    format!("{i}\t    let value_{i} = compute(req) + {i};")
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Body::Log(n, fail) => {
            let mut s: String = (0..*n)
                .map(|i| format!("   Compiling crate{i} v0.{i}.0 (12.{i}MB)\n"))
                .collect();
            if *fail {
                s.push_str("error[E0425]: cannot find value `x` in src/main.rs\nExit code 1\n");
            } else {
                s.push_str("test result: ok. 12 passed; 0 failed\n");
            }
            s
        }
        Body::Free(t) => t.clone(),
    }
}

/// The call of `kind` on file `path`; a write carries `body` as its content.
fn call_of(kind: u8, path: u8, body: &str) -> (&'static str, Value) {
    let p = format!("/r/src/f{path}.rs");
    match kind {
        0 => ("Read", json!({"file_path": p})),
        1 => (
            "Edit",
            json!({"file_path": p, "old_string": "a", "new_string": "b"}),
        ),
        2 => ("Bash", json!({"command": format!("cargo test -p c{path}")})),
        3 => ("Grep", json!({"pattern": "handler", "path": "/r/src"})),
        4 => (
            "exec_command",
            json!({"cmd": format!("sed -n '1,80p' {p}"), "workdir": "/r"}),
        ),
        5 => ("Write", json!({"file_path": p, "content": body})),
        _ => ("mcp__docs__query", json!({"q": "handler"})),
    }
}

fn build(steps: &[Step], anthropic: bool, unanswered_last: bool) -> Conversation {
    let mut msgs: Vec<Value> = vec![json!({"role": "user", "content": "start"})];
    let mut n = 0usize;
    let mut push_exchange = |msgs: &mut Vec<Value>, calls: Vec<(u8, u8, String)>| {
        let mut tc = Vec::new();
        let mut results = Vec::new();
        for (kind, path, text) in calls {
            let (name, args) = call_of(kind, path, &text);
            let id = format!("c{n}");
            n += 1;
            tc.push((id.clone(), name, args));
            results.push((id, text));
        }
        if anthropic {
            let content: Vec<Value> = tc
                .iter()
                .map(|(id, name, args)| json!({"type": "tool_use", "id": id, "name": name, "input": args}))
                .collect();
            msgs.push(json!({"role": "assistant", "content": content}));
            let blocks: Vec<Value> = results
                .iter()
                .enumerate()
                .map(|(i, (id, r))| {
                    if i % 2 == 0 {
                        json!({"type": "tool_result", "tool_use_id": id, "content": r})
                    } else {
                        json!({"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": r}]})
                    }
                })
                .collect();
            msgs.push(json!({"role": "user", "content": blocks}));
        } else {
            let calls: Vec<Value> = tc
                .iter()
                .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
                .collect();
            msgs.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
            for (id, r) in results {
                msgs.push(json!({"role": "tool", "tool_call_id": id, "content": r}));
            }
        }
    };
    for (i, s) in steps.iter().enumerate() {
        match s {
            Step::Op { kind, path, body } => {
                push_exchange(&mut msgs, vec![(*kind, *path, text_of(body))])
            }
            Step::User => msgs.push(json!({"role": "user", "content": format!("user says {i}")})),
            Step::Parallel(a, b) => push_exchange(
                &mut msgs,
                vec![
                    (0, *a, text_of(&Body::Source(60))),
                    (2, *b, text_of(&Body::Log(30, false))),
                ],
            ),
        }
    }
    if unanswered_last {
        let (name, args) = call_of(0, 0, "");
        if anthropic {
            msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "dangling", "name": name, "input": args}]}));
        } else {
            msgs.push(json!({"role": "assistant", "content": "", "tool_calls": [{"id": "dangling", "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}));
        }
    }
    let doc = if anthropic {
        json!({"system": "be brief", "messages": msgs})
    } else {
        let mut all = vec![json!({"role": "system", "content": "be brief"})];
        all.extend(msgs);
        Value::Array(all)
    };
    Conversation::parse(&doc.to_string()).expect("generated document parses")
}

fn ids(c: &Conversation) -> Vec<(String, Vec<String>, Vec<String>)> {
    c.messages
        .iter()
        .map(|m| {
            (
                m.role_str().to_string(),
                m.tool_calls().iter().map(|x| x.id.to_string()).collect(),
                m.tool_results()
                    .iter()
                    .map(|r| r.call_id.to_string())
                    .collect(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn compression_is_safe_and_reversible(
        steps in proptest::collection::vec(step(), 0..30),
        anthropic in any::<bool>(),
        unanswered in any::<bool>(),
        tail in 0usize..5,
        keep_last in 0usize..4,
        min_chars in prop_oneof![Just(0usize), Just(100), Just(400)],
        check in prop_oneof![Just(0usize), Just(800)],
        budget in proptest::option::of(0usize..6000),
        inputs in any::<bool>(),
    ) {
        let input = build(&steps, anthropic, unanswered);
        let before = validate(&input);
        let mut out = input.clone();
        let mut p = Pipeline::default();
        p.push(Box::new(ToolCompressor::new(ToolCompressorConfig {
            protected_tail: tail,
            keep_last,
            min_chars,
            chars_per_lost_term: check,
            budget_tokens: budget,
            inputs,
            ..Default::default()
        })));
        let report = p.run(&mut out, &StageContext::default());
        // The pipeline would revert a stage that breaks an invariant; it must never have to.
        prop_assert_eq!(&report.stages[0].status, &StageStatus::Applied);
        prop_assert!(validate(&out).len() <= before.len(), "{:?}", validate(&out));
        prop_assert_eq!(ids(&out), ids(&input));
        prop_assert!(out.size() <= input.size());
        let t = input.tail_start(tail);
        for (i, (a, b)) in input.messages.iter().zip(&out.messages).enumerate() {
            prop_assert!(b.size() <= a.size());
            let changed = input.message_json(a) != out.message_json(b);
            if changed && !a.is_tool_result() {
                // A write call outside the protected tail: only its content
                // argument changes, to a summary.
                prop_assert!(inputs && i < t, "message {} changed", i);
                for (x, y) in a.tool_calls().iter().zip(b.tool_calls()) {
                    let (xa, ya) = (x.args(), y.args());
                    if xa == ya {
                        continue;
                    }
                    prop_assert_eq!(&x.name, "Write");
                    prop_assert_eq!(&xa["file_path"], &ya["file_path"]);
                    let summary = ya["content"].as_str().unwrap_or_default();
                    prop_assert!(summary.starts_with("[summary: tool Write input: "), "{}", summary);
                }
            } else if changed {
                // Only tool-result carriers outside the protected tail change.
                prop_assert!(i < t && a.is_tool_result(), "message {} changed", i);
                for r in b.tool_results() {
                    let was = a.tool_results().into_iter().find(|x| x.call_id == r.call_id);
                    let was = was.map(|x| x.text.to_string()).unwrap_or_default();
                    prop_assert!(r.text == was || r.text.starts_with("[summary: tool "));
                }
            }
        }
        prop_assert_eq!(&input.envelope.prefix, &out.envelope.prefix);
        let mem = MemoryArchive::new();
        archive(&input, &out, &mem).unwrap();
        let back = expand(&out, &mem).unwrap();
        prop_assert_eq!(back.to_json_string(), input.to_json_string());
    }

    #[test]
    fn summaries_never_panic(
        text in "(?s).{0,2000}",
        kind in 0u8..6,
        path in "[a-zA-Z0-9_./\\\\:-]{0,40}",
        exit in proptest::option::of(-2i64..3),
    ) {
        let kind = match kind {
            0 => Kind::Read,
            1 => Kind::Write,
            2 => Kind::Edit,
            3 => Kind::Command,
            4 => Kind::Search,
            _ => Kind::Other,
        };
        let subject = Subject {
            tool: "T".into(),
            paths: vec![path.clone()],
            command: Some(path),
            exit,
        };
        let s = ctxpress_tool_compressor::summarize(kind, &subject, &text, &Limits::default());
        prop_assert!(s.starts_with("[summary: tool T"));
    }
}

#[test]
fn generator_produces_compressible_sessions() {
    let steps = vec![
        Step::Op {
            kind: 5,
            path: 2,
            body: Body::Source(80),
        },
        Step::Op {
            kind: 0,
            path: 0,
            body: Body::Source(80),
        },
        Step::Op {
            kind: 2,
            path: 1,
            body: Body::Log(60, false),
        },
        Step::User,
    ];
    for anthropic in [false, true] {
        let input = build(&steps, anthropic, false);
        let mut out = input.clone();
        let n = ToolCompressor::new(ToolCompressorConfig {
            protected_tail: 0,
            keep_last: 0,
            chars_per_lost_term: 0,
            inputs: true,
            ..Default::default()
        })
        .compress(&mut out, &StageContext::default());
        assert_eq!(
            (n.reads, n.commands, n.inputs),
            (1, 1, 1),
            "anthropic={anthropic}"
        );
        assert!(out.size() < input.size());
    }
}
