use super::reference::{plan_refs_by_path, plan_refs_every_hash};
use super::*;
use serde_json::{Value, json};

/// A user message, one tool exchange per `(tool, args, result)`, then `tail`
/// plain turns.
fn openai(ops: &[(&str, Value, &str)], tail: usize) -> Conversation {
    ctxpress_core::fixtures::tool_session(None, ops, tail)
}

fn call_ids(conv: &Conversation) -> Vec<String> {
    conv.messages
        .iter()
        .flat_map(|m| m.tool_calls().into_iter().map(|c| c.id.to_string()))
        .collect()
}

fn run(conv: &mut Conversation, cfg: StalePrunerConfig) -> Counts {
    StalePruner::new(cfg).prune(conv)
}

const BIG: &str = "fn main() {\n    println!(\"hello world, this is a long enough file\");\n}\n";

#[test]
fn stale_read_removed_with_its_result() {
    let mut c = openai(
        &[
            ("Read", json!({"file_path": "/r/a.rs"}), BIG),
            (
                "Edit",
                json!({"file_path": "/r/a.rs", "old_string": "a", "new_string": "b"}),
                "ok",
            ),
            ("Read", json!({"file_path": "/r/b.rs"}), BIG),
        ],
        3,
    );
    let n = run(&mut c, StalePrunerConfig::default());
    assert_eq!(n.stale_reads, 1);
    assert_eq!(call_ids(&c), vec!["c1", "c2"]);
    assert!(ctxpress_core::validate(&c).is_empty());
    // Rule off: nothing goes.
    let mut c2 = openai(
        &[
            ("Read", json!({"file_path": "/r/a.rs"}), BIG),
            (
                "Write",
                json!({"file_path": "/r/a.rs", "content": "x"}),
                "ok",
            ),
        ],
        3,
    );
    let cfg = StalePrunerConfig {
        stale_reads: false,
        ..Default::default()
    };
    assert_eq!(run(&mut c2, cfg), Counts::default());
    assert_eq!(call_ids(&c2).len(), 2);
}

#[test]
fn failed_edit_does_not_make_reads_stale() {
    let mut c = openai(
        &[
            ("Read", json!({"file_path": "/r/a.rs"}), BIG),
            (
                "Edit",
                json!({"file_path": "/r/a.rs", "old_string": "a", "new_string": "b"}),
                "<tool_use_error>String to replace not found in file.</tool_use_error>",
            ),
        ],
        3,
    );
    assert_eq!(run(&mut c, StalePrunerConfig::default()).stale_reads, 0);
}

#[test]
fn superseded_writes_and_partial_edit_modes() {
    let ops = [
        (
            "Write",
            json!({"file_path": "/r/a.rs", "content": "v1"}),
            "ok",
        ),
        (
            "Edit",
            json!({"file_path": "/r/a.rs", "old_string": "1", "new_string": "2"}),
            "ok",
        ),
        (
            "Write",
            json!({"file_path": "/r/a.rs", "content": "v3"}),
            "ok",
        ),
        (
            "Edit",
            json!({"file_path": "/r/a.rs", "old_string": "3", "new_string": "4"}),
            "ok",
        ),
    ];
    let mut keep = openai(&ops, 3);
    let n = run(&mut keep, StalePrunerConfig::default());
    assert_eq!(n.superseded_edits, 1);
    assert_eq!(call_ids(&keep), vec!["c1", "c2", "c3"]);
    let mut last = openai(&ops, 3);
    let cfg = StalePrunerConfig {
        partial_edits: PartialEdits::KeepLast,
        ..Default::default()
    };
    let n = run(&mut last, cfg);
    // The last full write stays as the base of the final edit.
    assert_eq!(n.superseded_edits, 2);
    assert_eq!(call_ids(&last), vec!["c2", "c3"]);
}

#[test]
fn stale_and_failed_commands() {
    let mut c = openai(
        &[
            ("Bash", json!({"command": "ls  -la"}), "a\nb"),
            (
                "Bash",
                json!({"command": "npx jest foo"}),
                "Exit code 1\nFAIL foo",
            ),
            (
                "Bash",
                json!({"command": "npx jest foo --verbose"}),
                "PASS foo",
            ),
            ("Bash", json!({"command": "ls -la"}), "a\nb\nc"),
            (
                "Bash",
                json!({"command": "cargo build"}),
                "Exit code 101\nerror: x",
            ),
        ],
        3,
    );
    let n = run(&mut c, StalePrunerConfig::default());
    assert_eq!((n.stale_commands, n.failed_commands), (1, 1));
    // The unresolved cargo failure stays: the agent still needs it.
    assert_eq!(call_ids(&c), vec!["c2", "c3", "c4"]);
}

#[test]
fn commands_in_different_directories_differ() {
    let mut c = openai(
        &[
            (
                "shell_command",
                json!({"command": "npm test", "workdir": "/a"}),
                "Exit code: 0\nOutput:\nok",
            ),
            (
                "shell_command",
                json!({"command": "npm test", "workdir": "/b"}),
                "Exit code: 0\nOutput:\nok",
            ),
        ],
        3,
    );
    assert_eq!(run(&mut c, StalePrunerConfig::default()).stale_commands, 0);
}

#[test]
fn protected_tail_and_unanswered_calls_are_untouched() {
    let mut c = openai(
        &[
            ("Read", json!({"file_path": "/r/a.rs"}), BIG),
            (
                "Edit",
                json!({"file_path": "/r/a.rs", "old_string": "a", "new_string": "b"}),
                "ok",
            ),
        ],
        0,
    );
    // The whole conversation is within the tail of 5.
    assert_eq!(run(&mut c, StalePrunerConfig::default()), Counts::default());
    // A call without a result is never removed, nor does it make reads stale.
    let doc = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "r", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\":\"/x\"}"}}]},
        {"role": "tool", "tool_call_id": "r", "content": BIG},
        {"role": "user", "content": "1"}, {"role": "assistant", "content": "1"},
        {"role": "user", "content": "2"}, {"role": "assistant", "content": "2"},
        {"role": "user", "content": "3"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "w", "type": "function", "function": {"name": "Write", "arguments": "{\"file_path\":\"/x\",\"content\":\"z\"}"}}]}
    ]);
    let mut c = Conversation::parse(&doc.to_string()).unwrap();
    let cfg = StalePrunerConfig {
        protected_tail: 1,
        ..Default::default()
    };
    assert_eq!(run(&mut c, cfg), Counts::default());
}

#[test]
fn read_references_point_at_kept_content() {
    let big = BIG.repeat(4);
    let numbered: String = big
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{}\t{l}\n", i + 1))
        .collect();
    let mut c = openai(
        &[
            (
                "Write",
                json!({"file_path": "/r/a.rs", "content": big}),
                "File created",
            ),
            ("Read", json!({"file_path": "/r/a.rs"}), numbered.as_str()),
            ("Read", json!({"file_path": "/r/b.rs"}), big.as_str()),
            ("Read", json!({"file_path": "/r/b.rs"}), big.as_str()),
        ],
        3,
    );
    let n = run(&mut c, StalePrunerConfig::default());
    assert_eq!(n.read_references, 2);
    let texts: Vec<String> = c
        .messages
        .iter()
        .filter(|m| m.role() == Role::Tool)
        .map(|m| m.text().to_string())
        .collect();
    assert!(texts[1].contains("written by call c0"), "{texts:?}");
    assert_eq!(texts[2], big);
    assert!(texts[3].contains("returned by call c2"), "{texts:?}");
}

#[test]
fn anthropic_carriers_and_shared_messages() {
    let doc = json!({"system": "s", "messages": [
        {"role": "user", "content": "fix"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/a.rs"}},
            {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/r/b.rs"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": BIG},
            {"type": "tool_result", "tool_use_id": "t2", "content": BIG}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t3", "name": "Write", "input": {"file_path": "/r/a.rs", "content": "new"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": "ok"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t4", "name": "Bash", "input": {"command": "make"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t4", "content": "built"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t5", "name": "Bash", "input": {"command": "make"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t5", "content": "built"}]},
        {"role": "user", "content": "1"}, {"role": "assistant", "content": "1"},
        {"role": "user", "content": "2"}, {"role": "assistant", "content": "2"},
        {"role": "user", "content": "3"}
    ]});
    let mut c = Conversation::parse(&doc.to_string()).unwrap();
    let n = run(&mut c, StalePrunerConfig::default());
    assert_eq!((n.stale_reads, n.stale_commands), (1, 1));
    assert!(
        ctxpress_core::validate(&c).is_empty(),
        "{:?}",
        ctxpress_core::validate(&c)
    );
    assert_eq!(call_ids(&c), vec!["t2", "t3", "t5"]);
    // The assistant text that accompanied the removed call stays.
    assert_eq!(c.messages[1].text(), "reading");
    assert_eq!(c.messages.len(), 12);
}

#[test]
fn swe_agent_edits_apply_to_the_open_file() {
    let mut c = openai(
        &[
            ("bash", json!({"command": "open tests/m.py"}), BIG),
            (
                "bash",
                json!({"command": "edit 4:4\ndef f():\nend_of_edit"}),
                "[File: /w/tests/m.py]",
            ),
            ("bash", json!({"command": "python tests/m.py"}), "8.2"),
        ],
        3,
    );
    let n = run(&mut c, StalePrunerConfig::default());
    assert_eq!(n.stale_reads, 1);
    assert_eq!(call_ids(&c), vec!["c1", "c2"]);
}

#[test]
fn config_is_typed_and_registered() {
    let b = ctxpress_core::registry::build(
        "stale_pruner",
        &json!({"partial_edits": "keep_last", "protected_tail": 2}),
    );
    assert!(b.is_ok());
    let e =
        ctxpress_core::registry::build("stale_pruner", &json!({"stale_read": false})).unwrap_err();
    assert!(e.to_string().contains("stale_reads"), "{e}");
    let e = ctxpress_core::registry::build("stale_pruner", &json!({"partial_edits": "sometimes"}))
        .unwrap_err();
    assert!(e.to_string().contains("partial_edits"), "{e}");
    let with_tool =
        json!({"dialect": {"tools": [{"name": "peek", "kind": "read", "path_args": ["p"]}]}});
    let cfg: StalePrunerConfig = ctxpress_core::parse_params("stale_pruner", &with_tool).unwrap();
    let mut c = openai(
        &[
            ("peek", json!({"p": "/r/a"}), BIG),
            ("Write", json!({"file_path": "/r/a", "content": "x"}), "ok"),
        ],
        3,
    );
    assert_eq!(run(&mut c, cfg).stale_reads, 1);
}

#[test]
fn outcome_reports_counts_and_summary() {
    let mut c = openai(
        &[
            ("Read", json!({"file_path": "/r/a.rs"}), BIG),
            (
                "Write",
                json!({"file_path": "/r/a.rs", "content": "x"}),
                "ok",
            ),
        ],
        3,
    );
    let o = StalePruner::default()
        .apply(&mut c, &StageContext::default())
        .unwrap();
    assert_eq!(o.counters["stale_reads"], 1);
    assert_eq!(o.counters["failed_commands"], 0);
    assert!(
        o.notes[0]
            .starts_with("Removed: 1 stale reads, 0 stale edits, 0 stale bash, 0 failed bash"),
        "{}",
        o.notes[0]
    );
    assert!(o.notes[0].contains("messages 11 -> 9"), "{}", o.notes[0]);
}

fn display_cfg() -> StalePrunerConfig {
    StalePrunerConfig {
        display_only: true,
        ..Default::default()
    }
}

fn roles(c: &Conversation) -> Vec<String> {
    c.messages
        .iter()
        .map(|m| m.role_str().to_string())
        .collect()
}

/// An OpenAI session with both forms of UI-only message, one of them in the
/// protected tail, and one display-only message that carries a tool call.
fn openai_display_doc() -> String {
    json!([
        {"role": "system", "content": "s"},
        {"role": "user", "content": "fix the build"},
        {"role": "display_only_data", "content": "[ui] spinner: thinking..."},
        {"role": "assistant", "content": "", "display_only": true, "tool_calls": [
            {"id": "k", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\":\"make\"}"}}]},
        {"role": "tool", "tool_call_id": "k", "content": "built"},
        {"role": "assistant", "content": "Build done.", "display_only": true},
        {"role": "assistant", "content": "It builds now.", "display_only": false},
        {"role": "user", "content": "thanks"},
        {"role": "display_only_data", "content": {"kind": "toast", "text": "saved"}},
        {"role": "assistant", "content": "welcome"}
    ])
    .to_string()
}

#[test]
fn display_only_messages_are_dropped_in_openai_sessions() {
    let doc = openai_display_doc();
    let mut c = Conversation::parse(&doc).unwrap();
    let n = run(&mut c, display_cfg());
    assert_eq!(n.display_data_deleted, 3);
    assert_eq!(
        roles(&c),
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ]
    );
    // The display-only call and its result stay, for the pairing.
    assert_eq!(call_ids(&c), vec!["k"]);
    assert_eq!(c.messages[4].text(), "It builds now.");
    assert!(ctxpress_core::validate(&c).is_empty());
    // Off by default: nothing goes.
    let mut c = Conversation::parse(&doc).unwrap();
    assert_eq!(run(&mut c, StalePrunerConfig::default()), Counts::default());
    assert_eq!(c.messages.len(), 10);
}

#[test]
fn display_only_messages_are_dropped_in_anthropic_sessions() {
    let doc = json!({"system": "s", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "fix"}]},
        {"role": "assistant", "display_only": true, "content": [
            {"type": "text", "text": "Rendering the diff view..."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/a.rs"}}]},
        {"role": "user", "display_only": true, "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": BIG}]},
        {"role": "display_only_data", "content": [{"type": "text", "text": "[ui] 1 file read"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "display_only": true, "content": [{"type": "text", "text": "(typing)"}]},
        {"role": "user", "content": "1"}
    ]})
    .to_string();
    let mut c = Conversation::parse(&doc).unwrap();
    let before = ctxpress_core::validate(&c);
    let n = run(&mut c, display_cfg());
    assert_eq!(n.display_data_deleted, 3);
    // The tool-result carrier stays even though it is marked display-only.
    assert_eq!(call_ids(&c), vec!["t1"]);
    assert_eq!(c.messages.len(), 5);
    assert!(c.messages.iter().all(|m| m.text() != "(typing)"));
    assert!(!ctxpress_core::validate::introduces_violations(
        &before,
        &ctxpress_core::validate(&c)
    ));
}

#[test]
fn protected_annotations_are_never_touched() {
    let mut c = Conversation::parse(&openai_display_doc()).unwrap();
    let id = c.messages[2].id().clone();
    c.ann_mut(&id).protected = true;
    let n = run(&mut c, display_cfg());
    assert_eq!(n.display_data_deleted, 2);
    assert_eq!(c.messages[2].role_str(), "display_only_data");
    // The pruning rules leave protected calls and results alone too.
    let ops = [
        ("Read", json!({"file_path": "/r/a.rs"}), BIG),
        (
            "Write",
            json!({"file_path": "/r/a.rs", "content": "x"}),
            "ok",
        ),
    ];
    for protect in [1, 2] {
        let mut c = openai(&ops, 3);
        let id = c.messages[protect].id().clone();
        c.ann_mut(&id).protected = true;
        assert_eq!(run(&mut c, display_cfg()), Counts::default());
        assert_eq!(call_ids(&c), vec!["c0", "c1"]);
    }
}

#[test]
fn deleted_display_only_messages_expand_back() {
    use ctxpress_core::archive::{MemoryArchive, archive, expand};
    for doc in [
        openai_display_doc(),
        // Trailing display-only data (recorded under the end key).
        json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
               {"role": "display_only_data", "content": "c"}])
        .to_string(),
    ] {
        let input = Conversation::parse(&doc).unwrap();
        let mut out = input.clone();
        let o = StalePruner::new(display_cfg())
            .apply(&mut out, &StageContext::default())
            .unwrap();
        assert!(o.counters["display_data_deleted"] >= 1);
        let arch = MemoryArchive::new();
        assert!(archive(&input, &out, &arch).unwrap() >= 1);
        let written = Conversation::parse(&out.to_json_string()).unwrap();
        assert_eq!(expand(&written, &arch).unwrap().to_json_string(), doc);
    }
}

#[test]
fn display_only_counter_only_when_enabled() {
    let mut c = Conversation::parse(&openai_display_doc()).unwrap();
    let o = StalePruner::default()
        .apply(&mut c, &StageContext::default())
        .unwrap();
    assert!(!o.counters.contains_key("display_data_deleted"));
    assert!(!o.notes[0].contains("display-only"));
    let cfg: StalePrunerConfig =
        ctxpress_core::parse_params("stale_pruner", &json!({"display_only": true})).unwrap();
    let o = StalePruner::new(cfg)
        .apply(&mut c, &StageContext::default())
        .unwrap();
    assert_eq!(o.counters["display_data_deleted"], 3);
    assert!(
        o.notes[0].contains("3 display-only messages deleted"),
        "{}",
        o.notes[0]
    );
}

/// References planned: (op index, reference text).
type Plan = Vec<(usize, String)>;

/// An op as (path, read, mutable).
type OpSpec = (usize, bool, bool);

/// `plan_refs` and its reference on `ops` given as (path, read, mutable),
/// with fingerprints `hashes` (`None`: none) and `worth` per op.
fn both_plans(
    ops: &[OpSpec],
    hashes: &[Option<u64>],
    worth: &[bool],
) -> (Plan, Plan, usize, usize) {
    let paths = ["/r/a.rs", "/r/b.rs", "/r/c.rs"];
    let ids: Vec<String> = (0..ops.len()).map(|k| format!("c{k}")).collect();
    let ops: Vec<RefOp<'_>> = ops
        .iter()
        .zip(&ids)
        .map(|(&(p, read, mutable), id)| RefOp {
            path: paths[p % paths.len()],
            read,
            mutable,
            call_id: id,
        })
        .collect();
    let (mut fast_calls, mut every_calls) = (0, 0);
    let hash = |calls: &mut usize, k: usize| {
        *calls += 1;
        hashes
            .get(k)
            .copied()
            .flatten()
            .map(|h| (h, worth.get(k).copied().unwrap_or(true)))
    };
    // Line counts as fingerprints have them: equal for equal fingerprints,
    // shared by some different ones.
    let lines = |k: usize| hashes.get(k).copied().flatten().map(|h| (h % 2) as usize);
    let fast = plan_refs(&ops, lines, |k| hash(&mut fast_calls, k), |w, _| *w);
    let every = plan_refs_every_hash(&ops, |k| hash(&mut every_calls, k), |w, _| *w);
    let mut by_path_calls = 0;
    let by_path = plan_refs_by_path(&ops, |k| hash(&mut by_path_calls, k), |w, _| *w);
    assert_eq!(by_path, every, "{ops:?} {hashes:?}");
    assert!(fast_calls <= by_path_calls && by_path_calls <= every_calls);
    (fast, every, fast_calls, every_calls)
}

#[test]
fn read_references_fingerprint_only_what_can_match() {
    // (path, read, mutable)
    let r = |p| (p, true, true);
    let w = |p| (p, false, true);
    let cases: Vec<(Vec<OpSpec>, Vec<Option<u64>>)> = vec![
        // read, read again: the second becomes a reference
        (vec![r(0), r(0)], vec![Some(1), Some(1)]),
        // write then read of the same content
        (vec![w(0), r(0)], vec![Some(7), Some(7)]),
        // read then write: nothing to look up, nothing fingerprinted
        (vec![r(0), w(0)], vec![Some(7), Some(7)]),
        // changed content in between
        (
            vec![r(0), w(0), r(0), r(0)],
            vec![Some(1), Some(2), Some(1), Some(2)],
        ),
        // a read without a fingerprint
        (vec![r(0), r(0), r(0)], vec![Some(1), None, Some(1)]),
        // interleaved paths, a path with one op
        (
            vec![r(0), r(1), r(2), w(1), r(0), r(1)],
            vec![Some(1), Some(2), Some(3), Some(4), Some(1), Some(4)],
        ),
        // a kept read that may not be rewritten still answers later ones
        (
            vec![r(0), (0, true, false), r(0)],
            vec![Some(5), Some(5), Some(5)],
        ),
    ];
    for (ops, hashes) in cases {
        let worth = vec![true; ops.len()];
        let (fast, every, fast_calls, every_calls) = both_plans(&ops, &hashes, &worth);
        assert_eq!(fast, every, "{ops:?} {hashes:?}");
        assert!(fast_calls <= every_calls);
    }
    // Read then write of a path: neither is fingerprinted.
    let (_, _, calls, _) = both_plans(&[r(0), w(0)], &[Some(1), Some(1)], &[true, true]);
    assert_eq!(calls, 0);
    // Reads whose line counts differ from every other op's on their path
    // are not fingerprinted.
    let (_, _, calls, _) = both_plans(
        &[r(0), r(0), r(0)],
        &[Some(1), Some(2), Some(4)],
        &[true; 3],
    );
    assert_eq!(calls, 2);
    let (_, _, calls, _) = both_plans(&[w(0), r(0)], &[Some(1), Some(2)], &[true, true]);
    assert_eq!(calls, 0);
    let (refs, ..) = both_plans(&[w(0), r(0)], &[Some(7), Some(7)], &[true, true]);
    assert_eq!(
        refs,
        vec![(
            1,
            "[ctxpress: /r/a.rs unchanged: same content as written by call c0]".to_string()
        )]
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    #[test]
    fn lazy_fingerprints_plan_the_same_references(
        ops in proptest::collection::vec((0usize..3, proptest::bool::ANY, proptest::bool::ANY), 0..14),
        hashes in proptest::collection::vec(proptest::option::weighted(0.9, 0u64..3), 14),
        worth in proptest::collection::vec(proptest::bool::weighted(0.8), 14),
    ) {
        let (fast, every, fast_calls, every_calls) = both_plans(&ops, &hashes, &worth);
        proptest::prop_assert_eq!(fast, every);
        proptest::prop_assert!(fast_calls <= every_calls);
    }
}

/// `decide` (statuses worked out when asked for) and `decide_eager` (every
/// status first) on the session `ops` under `cfg`.
fn lazy_and_eager_decisions(
    ops: &[(&str, Value, &str)],
    cfg: StalePrunerConfig,
) -> (Vec<Option<Rule>>, Vec<Option<Rule>>) {
    let conv = openai(ops, 1);
    let p = StalePruner::new(cfg);
    let traffic = Traffic::of(&conv, &p.table, p.cfg.cwd.as_deref());
    let lazy = p.decide(&conv, &p.collect(&conv, &traffic));
    let eager = p.decide_eager(&conv, &p.collect(&conv, &traffic));
    (lazy, eager)
}

/// Configurations whose rules read statuses differently.
fn decision_configs() -> Vec<StalePrunerConfig> {
    let base = StalePrunerConfig {
        protected_tail: 0,
        ..StalePrunerConfig::default()
    };
    vec![
        base.clone(),
        StalePrunerConfig {
            partial_edits: PartialEdits::KeepLast,
            ..base.clone()
        },
        StalePrunerConfig {
            failed_commands: false,
            stale_searches: false,
            ..base.clone()
        },
        StalePrunerConfig {
            stale_reads: false,
            superseded_edits: false,
            ..base
        },
        StalePrunerConfig::default(),
    ]
}

/// A random operation: (tool, arguments, result) from small sets, so paths,
/// commands and outcomes repeat.
fn decision_op(tool: usize, arg: usize, result: usize) -> (&'static str, Value, &'static str) {
    const PATHS: [&str; 2] = ["/r/a.rs", "/r/b.rs"];
    const COMMANDS: [&str; 5] = [
        "cargo test",
        "ls",
        "rm /r/a.rs",
        "echo x > /r/b.rs",
        "npx jest a",
    ];
    const RESULTS: [&str; 5] = [
        "ok",
        "Exit code 1\nerror: boom",
        "Error: failed",
        BIG,
        "<tool_use_error>x",
    ];
    let path = PATHS[arg % PATHS.len()];
    let (tool, args) = match tool % 5 {
        0 => ("Read", json!({"file_path": path})),
        1 => ("Write", json!({"file_path": path, "content": BIG})),
        2 => (
            "Edit",
            json!({"file_path": path, "old_string": "a", "new_string": "b"}),
        ),
        3 => ("Grep", json!({"pattern": path})),
        _ => ("Bash", json!({"command": COMMANDS[arg % COMMANDS.len()]})),
    };
    (tool, args, RESULTS[result % RESULTS.len()])
}

#[test]
fn lazy_statuses_decide_as_eager_ones_on_fixed_sessions() {
    let sessions: Vec<Vec<(usize, usize, usize)>> = vec![
        vec![(0, 0, 3), (2, 0, 0), (0, 0, 3)],
        vec![(1, 0, 0), (1, 0, 1), (1, 0, 0), (0, 0, 3)],
        vec![(4, 0, 1), (4, 4, 1), (4, 0, 0), (4, 4, 2)],
        vec![(0, 0, 3), (4, 2, 0), (0, 0, 3), (4, 2, 4), (2, 0, 2)],
    ];
    for s in sessions {
        let ops: Vec<_> = s.iter().map(|&(t, a, r)| decision_op(t, a, r)).collect();
        for cfg in decision_configs() {
            let (lazy, eager) = lazy_and_eager_decisions(&ops, cfg);
            assert_eq!(lazy, eager, "{s:?}");
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    #[test]
    fn lazy_statuses_decide_as_eager_ones(
        s in proptest::collection::vec((0usize..5, 0usize..5, 0usize..5), 0..12),
    ) {
        let ops: Vec<_> = s.iter().map(|&(t, a, r)| decision_op(t, a, r)).collect();
        for cfg in decision_configs() {
            let (lazy, eager) = lazy_and_eager_decisions(&ops, cfg);
            proptest::prop_assert_eq!(lazy, eager);
        }
    }
}

#[test]
fn superseded_environment_blocks_are_shortened() {
    let env = |t: &str| {
        format!(
            "<environment_details>\n# Current Time\n{t}\n# Files\nsrc/a.ts\nsrc/b.ts\n</environment_details>"
        )
    };
    let msgs = json!([
        {"role": "user", "content": [
            {"type": "text", "text": "<task>\nFix it\n</task>"},
            {"type": "text", "text": env("9:00")}]},
        {"role": "assistant", "content": "<read_file>\n<path>src/a.ts</path>\n</read_file>"},
        {"role": "user", "content": format!("[read_file for 'src/a.ts'] Result:\nconst a = 1;\n\n{}", env("9:01"))},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": [{"type": "text", "text": env("9:02")}]},
    ]);
    let mut c = Conversation::parse(&msgs.to_string()).unwrap();
    let before = c.clone();
    let cfg = StalePrunerConfig {
        protected_tail: 0,
        ..StalePrunerConfig::default()
    };
    let n = run(&mut c, cfg.clone());
    assert_eq!(n.stale_environments, 2);
    assert_eq!(
        c.messages[0].content().unwrap()[0]["text"],
        "<task>\nFix it\n</task>"
    );
    assert_eq!(
        c.messages[0].content().unwrap()[1]["text"],
        STALE_ENVIRONMENT
    );
    assert_eq!(
        c.messages[2].text(),
        format!("[read_file for 'src/a.ts'] Result:\nconst a = 1;\n\n{STALE_ENVIRONMENT}")
    );
    // The newest block is current and stays.
    assert!(ctxpress_core::Message::same(
        &c.messages[4],
        &before.messages[4]
    ));
    // Off: nothing changes.
    let mut c = before.clone();
    let n = run(
        &mut c,
        StalePrunerConfig {
            environments: false,
            ..cfg
        },
    );
    assert_eq!(n.stale_environments, 0);
    assert!(
        c.messages
            .iter()
            .zip(&before.messages)
            .all(|(a, b)| ctxpress_core::Message::same(a, b))
    );
}

/// With an archive, each run of removed messages becomes one assistant
/// note that names what went and carries the recall handle of exactly those
/// messages; expand gives the input back. Without one, nothing is added.
#[test]
fn removals_leave_a_recallable_note_when_there_is_an_archive() {
    use ctxpress_core::archive::{MemoryArchive, expand};
    use ctxpress_core::handle::find_all;
    use ctxpress_core::{Archive, Pipeline};
    use std::sync::Arc;
    let ops = [
        ("Read", json!({"file_path": "/r/a.rs"}), BIG),
        (
            "Bash",
            json!({"command": "cargo test"}),
            "test result: FAILED. 1 failed",
        ),
        (
            "Edit",
            json!({"file_path": "/r/a.rs", "old_string": "a", "new_string": "b"}),
            "ok",
        ),
        (
            "Bash",
            json!({"command": "cargo test"}),
            "test result: ok. 1 passed",
        ),
    ];
    let input = openai(&ops, 3);
    let mut pipeline = Pipeline::new(Vec::new());
    pipeline.push(Box::new(StalePruner::default()));

    let mut plain = input.clone();
    pipeline.run(&mut plain, &StageContext::default());
    assert_eq!(call_ids(&plain), vec!["c2", "c3"]);
    assert!(!plain.to_json_string().contains("[ctxpress"));

    let archive = Arc::new(MemoryArchive::new());
    let ctx = StageContext {
        archive: Some(archive.clone() as Arc<dyn Archive>),
        ..StageContext::default()
    };
    let mut out = input.clone();
    pipeline.run(&mut out, &ctx);
    assert!(ctxpress_core::validate(&out).is_empty());
    assert_eq!(call_ids(&out), vec!["c2", "c3"]);
    // One note for the read and the failed run: they are one run of
    // messages (call, result, call, result).
    let notes: Vec<String> = out
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .filter(|t| t.starts_with("[ctxpress#h"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = &notes[0];
    assert!(note.contains("removed 2 stale operations"), "{note}");
    assert!(note.contains("a read of /r/a.rs (changed later)"), "{note}");
    assert!(note.contains("`cargo test` (run again later)"), "{note}");
    assert!(out.size() < input.size());

    // The handle recalls the four removed messages, as they were.
    ctxpress_core::archive::archive(&input, &out, archive.as_ref()).unwrap();
    let h = find_all(note).pop().unwrap();
    let recalled = archive
        .recall(&h)
        .unwrap()
        .expect("the note's handle recalls");
    let want: Vec<String> = input.messages[1..5]
        .iter()
        .map(|m| input.message_json(m))
        .collect();
    assert_eq!(recalled, want);
    let written = Conversation::parse(&out.to_json_string()).unwrap();
    assert_eq!(
        expand(&written, archive.as_ref()).unwrap().to_json_string(),
        input.to_json_string()
    );
}

/// With an archive, a stale call among parallel calls stays, its result
/// cut to a stub and a superseded write's content in its call cut too:
/// every rewritten message carries a handle that recalls it as it was, so
/// the handles rebuild the input, and nothing is removed without one.
/// Without an archive the calls go.
#[test]
fn parallel_removals_leave_recallable_stubs_when_there_is_an_archive() {
    use ctxpress_core::archive::{MemoryArchive, archive, expand};
    use ctxpress_core::handle::find_all;
    use ctxpress_core::{Archive, Pipeline};
    use std::sync::Arc;
    let long =
        "fn main() {\n    println!(\"the first version of this file, long enough to cut\");\n}\n";
    let call = |id: &str, name: &str, args: Value| {
        json!({"id": id, "type": "function",
               "function": {"name": name, "arguments": args.to_string()}})
    };
    let result =
        |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
    let input = Conversation::parse(
        &json!([
            {"role": "user", "content": "fix both files"},
            {"role": "assistant", "content": null, "tool_calls": [
                call("c1", "Read", json!({"file_path": "/r/a.rs"})),
                call("c2", "Write", json!({"file_path": "/r/w.rs", "content": long})),
                call("c3", "Read", json!({"file_path": "/r/b.rs"}))]},
            result("c1", &format!("{long}{BIG}")),
            result("c2", "The file /r/w.rs has been written successfully, 3 lines."),
            result("c3", BIG),
            {"role": "assistant", "content": null, "tool_calls": [
                call("c4", "Write", json!({"file_path": "/r/a.rs", "content": "fn a() {}\n"})),
                call("c5", "Write", json!({"file_path": "/r/w.rs", "content": "fn w() {}\n"}))]},
            result("c4", "ok"),
            result("c5", "ok"),
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "bye"},
            {"role": "assistant", "content": "bye"},
            {"role": "user", "content": "."},
            {"role": "assistant", "content": "."},
        ])
        .to_string(),
    )
    .unwrap();
    let mut pipeline = Pipeline::new(Vec::new());
    pipeline.push(Box::new(StalePruner::default()));

    let mut plain = input.clone();
    pipeline.run(&mut plain, &StageContext::default());
    assert_eq!(call_ids(&plain), vec!["c3", "c4", "c5"]);

    let archive_db = Arc::new(MemoryArchive::new());
    let ctx = StageContext {
        archive: Some(archive_db.clone() as Arc<dyn Archive>),
        ..StageContext::default()
    };
    let mut out = input.clone();
    pipeline.run(&mut out, &ctx);
    assert!(ctxpress_core::validate(&out).is_empty());
    assert_eq!(call_ids(&out), vec!["c1", "c2", "c3", "c4", "c5"]);
    assert_eq!(out.messages.len(), input.messages.len());
    assert!(out.size() < input.size());
    let text = out.to_json_string();
    assert!(
        text.contains("stale read, the file changed later"),
        "{text}"
    );
    assert!(!text.contains("first version"), "{text}");
    assert!(
        text.contains("superseded, the file was written again later"),
        "{text}"
    );

    // Each message with a handle recalls exactly itself as it was; the
    // rest are the input's own.
    archive(&input, &out, archive_db.as_ref()).unwrap();
    let mut handles = 0;
    for (o, i) in out.messages.iter().zip(&input.messages) {
        let hs = find_all(&out.message_json(o));
        match hs.first() {
            None => assert!(ctxpress_core::Message::same(o, i)),
            Some(h) => {
                handles += 1;
                let recalled = archive_db.recall(h).unwrap().expect("recalls");
                assert_eq!(recalled, vec![input.message_json(i)]);
            }
        }
    }
    // The assistant message with the write and the cut read (the write's
    // result is shorter than a stub: it stays as it was).
    assert_eq!(handles, 2);
    let written = Conversation::parse(&out.to_json_string()).unwrap();
    assert_eq!(
        expand(&written, archive_db.as_ref())
            .unwrap()
            .to_json_string(),
        input.to_json_string()
    );
}
