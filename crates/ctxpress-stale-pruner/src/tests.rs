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
