//! Property tests: random operation sequences in both provider shapes, run
//! through the core pipeline, never introduce a pairing violation, never remove
//! a user message, and `expand` restores the input byte for byte.
#![allow(missing_docs)]

use ctxpress_core::archive::archive;
use ctxpress_core::{
    Conversation, MemoryArchive, Pipeline, Role, StageContext, StageStatus, expand, validate,
};
use ctxpress_dialect::Turns;
use ctxpress_stale_pruner::{PartialEdits, StalePruner, StalePrunerConfig};
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
enum Step {
    Op {
        kind: u8,
        path: u8,
        fail: bool,
        text: bool,
    },
    User,
    Parallel(u8, u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u8..6, 0u8..3, any::<bool>(), any::<bool>())
            .prop_map(|(kind, path, fail, text)| Step::Op { kind, path, fail, text }),
        1 => Just(Step::User),
        1 => (0u8..3, 0u8..3).prop_map(|(a, b)| Step::Parallel(a, b)),
    ]
}

fn call_of(kind: u8, path: u8) -> (&'static str, Value) {
    let p = format!("/r/f{path}.rs");
    match kind {
        0 => ("Read", json!({"file_path": p})),
        1 => (
            "Write",
            json!({"file_path": p, "content": format!("body of {path}\n").repeat(8)}),
        ),
        2 => (
            "Edit",
            json!({"file_path": p, "old_string": "a", "new_string": "b"}),
        ),
        3 => ("Bash", json!({"command": format!("cargo test -p c{path}")})),
        4 => (
            "apply_patch",
            json!({"input": format!("*** Begin Patch\n*** Update File: {p}\n*** End Patch")}),
        ),
        _ => (
            "exec_command",
            json!({"cmd": format!("sed -n '1,80p' {p}"), "workdir": "/r"}),
        ),
    }
}

fn result_of(kind: u8, path: u8, fail: bool) -> String {
    if fail {
        return "Exit code 1\nerror: it broke".into();
    }
    match kind {
        0 | 5 => format!("body of {path}\n").repeat(8),
        _ => "ok".into(),
    }
}

fn build(steps: &[Step], anthropic: bool, unanswered_last: bool) -> Conversation {
    let mut msgs: Vec<Value> = vec![json!({"role": "user", "content": "start"})];
    let mut n = 0usize;
    let mut push_exchange = |msgs: &mut Vec<Value>, calls: Vec<(u8, u8, bool, bool)>| {
        let mut tc = Vec::new();
        let mut results = Vec::new();
        let mut text = false;
        for (kind, path, fail, t) in calls {
            let (name, args) = call_of(kind, path);
            let id = format!("c{n}");
            n += 1;
            text |= t;
            tc.push((id.clone(), name, args));
            results.push((id, result_of(kind, path, fail)));
        }
        if anthropic {
            let mut content = Vec::new();
            if text {
                content.push(json!({"type": "text", "text": "working on it"}));
            }
            for (id, name, args) in &tc {
                content.push(json!({"type": "tool_use", "id": id, "name": name, "input": args}));
            }
            msgs.push(json!({"role": "assistant", "content": content}));
            let blocks: Vec<Value> = results
                .iter()
                .map(|(id, r)| json!({"type": "tool_result", "tool_use_id": id, "content": r}))
                .collect();
            msgs.push(json!({"role": "user", "content": blocks}));
        } else {
            let calls: Vec<Value> = tc
                .iter()
                .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
                .collect();
            msgs.push(json!({"role": "assistant", "content": if text { "working on it" } else { "" }, "tool_calls": calls}));
            for (id, r) in results {
                msgs.push(json!({"role": "tool", "tool_call_id": id, "content": r}));
            }
        }
    };
    for (i, s) in steps.iter().enumerate() {
        match s {
            Step::Op {
                kind,
                path,
                fail,
                text,
            } => push_exchange(&mut msgs, vec![(*kind, *path, *fail, *text)]),
            Step::User => msgs.push(json!({"role": "user", "content": format!("user says {i}")})),
            Step::Parallel(a, b) => push_exchange(
                &mut msgs,
                vec![(0, *a, false, false), (2, *b, false, false)],
            ),
        }
    }
    if unanswered_last {
        let (name, args) = call_of(1, 0);
        if anthropic {
            msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "dangling", "name": name, "input": args}]}));
        } else {
            msgs.push(json!({"role": "assistant", "content": "", "tool_calls": [{"id": "dangling", "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}));
        }
    }
    let doc = if anthropic {
        json!({"system": "be brief", "messages": msgs})
    } else {
        Value::Array(msgs)
    };
    Conversation::parse(&doc.to_string()).expect("generated document parses")
}

fn user_texts(c: &Conversation) -> Vec<String> {
    c.messages
        .iter()
        .filter(|m| m.role() == Role::User && !m.is_tool_result_carrier())
        .map(|m| m.text().to_string())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn pruning_is_safe_and_reversible(
        steps in proptest::collection::vec(step(), 0..40),
        anthropic in any::<bool>(),
        unanswered in any::<bool>(),
        keep_last in any::<bool>(),
        tail in 0usize..6,
    ) {
        let input = build(&steps, anthropic, unanswered);
        let before = validate(&input);
        let mut out = input.clone();
        let mut p = Pipeline::default();
        p.push(Box::new(StalePruner::new(StalePrunerConfig {
            protected_tail: tail,
            partial_edits: if keep_last { PartialEdits::KeepLast } else { PartialEdits::Keep },
            ..Default::default()
        })));
        let report = p.run(&mut out, &StageContext::default());
        // The pipeline would revert a violating stage; it must never have to.
        prop_assert_eq!(&report.stages[0].status, &StageStatus::Applied);
        prop_assert!(validate(&out).len() <= before.len(), "{:?}", validate(&out));
        prop_assert_eq!(user_texts(&out), user_texts(&input));
        // The protected tail is byte-identical.
        let t_in = input.tail_start(tail);
        let t_out = out.tail_start(tail);
        let tail_in: Vec<String> = input.messages[t_in..].iter().map(|m| input.message_json(m)).collect();
        let tail_out: Vec<String> = out.messages[t_out..].iter().map(|m| out.message_json(m)).collect();
        prop_assert_eq!(tail_in, tail_out);
        let mem = MemoryArchive::new();
        archive(&input, &out, &mem).unwrap();
        let back = expand(&out, &mem).unwrap();
        prop_assert_eq!(back.to_json_string(), input.to_json_string());
    }
}

#[test]
fn generator_produces_prunable_sessions() {
    // Guard against a generator that never exercises the rules.
    let steps = vec![
        Step::Op {
            kind: 0,
            path: 0,
            fail: false,
            text: false,
        },
        Step::Op {
            kind: 2,
            path: 0,
            fail: false,
            text: true,
        },
        Step::Op {
            kind: 3,
            path: 1,
            fail: false,
            text: false,
        },
        Step::Op {
            kind: 3,
            path: 1,
            fail: true,
            text: false,
        },
    ];
    for anthropic in [false, true] {
        let input = build(&steps, anthropic, false);
        let mut out = input.clone();
        let n = StalePruner::new(StalePrunerConfig {
            protected_tail: 0,
            ..Default::default()
        })
        .prune(&mut out);
        assert_eq!((n.stale_reads, n.stale_commands), (1, 1));
        assert!(out.messages.len() < input.messages.len());
    }
}
