use super::*;
use serde_json::json;

/// A system prompt, a user message, one tool exchange per `(tool, args,
/// result)`, then `tail` plain turns.
fn openai(ops: &[(&str, Value, String)], tail: usize) -> Conversation {
    ctxpress_core::fixtures::tool_session(Some("You are a coding agent."), ops, tail)
}

/// A source file of `n` lines, numbered like Claude Code's Read.
fn source(n: usize) -> String {
    let mut s = String::new();
    for i in 1..=n {
        let body = if i % 10 == 1 {
            format!("export function handler{i}(req) {{")
        } else {
            "  const value = compute(req) + 1;".to_string()
        };
        s.push_str(&format!("{i}\t{body}\n"));
    }
    s
}

fn cfg() -> ToolCompressorConfig {
    ToolCompressorConfig {
        keep_last: 0,
        protected_tail: 0,
        chars_per_lost_term: 0,
        ..Default::default()
    }
}

fn run(conv: &mut Conversation, cfg: ToolCompressorConfig) -> Counts {
    ToolCompressor::new(cfg).compress(conv, &StageContext::default())
}

fn result_text(conv: &Conversation, id: &str) -> String {
    conv.messages
        .iter()
        .flat_map(|m| m.tool_results())
        .find(|r| r.call_id == id)
        .map(|r| r.text.to_string())
        .unwrap_or_default()
}

fn shape_of(conv: &Conversation) -> Vec<(String, Vec<String>, Vec<String>)> {
    conv.messages
        .iter()
        .map(|m| {
            (
                m.role_str().to_string(),
                m.tool_calls().iter().map(|c| c.id.to_string()).collect(),
                m.tool_results()
                    .iter()
                    .map(|r| r.call_id.to_string())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn read_result_becomes_an_outline_and_nothing_else_changes() {
    let ops = vec![
        ("Read", json!({"file_path": "/r/src/api.js"}), source(60)),
        ("Bash", json!({"command": "ls"}), "a\nb".to_string()),
    ];
    let input = openai(&ops, 1);
    let mut c = input.clone();
    let n = run(&mut c, cfg());
    assert_eq!(n.reads, 1);
    assert_eq!(shape_of(&c), shape_of(&input));
    let s = result_text(&c, "c0");
    assert!(
        s.starts_with("[summary: tool Read /r/src/api.js: 60 lines; outline: 6 declarations]\n1: export function handler1(req) {"),
        "{s}"
    );
    assert!(s.chars().count() < source(60).chars().count() / 3);
    // Every other message is untouched (same source bytes).
    for (a, b) in input.messages.iter().zip(&c.messages) {
        if a.tool_results().first().is_some_and(|r| r.call_id == "c0") {
            continue;
        }
        assert_eq!(input.message_json(a), c.message_json(b));
    }
    assert!(ctxpress_core::validate(&c).is_empty());
}

#[test]
fn anthropic_tool_result_blocks_string_and_list_content() {
    let big = source(50);
    let doc = json!({"system": "be brief", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/a.ts"}},
            {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/r/b.ts"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": big},
            {"type": "tool_result", "tool_use_id": "t2", "is_error": false,
             "content": [{"type": "text", "text": big}]}]},
        {"role": "assistant", "content": "done"}
    ]});
    let input = Conversation::parse(&doc.to_string()).unwrap();
    let mut c = input.clone();
    let n = run(&mut c, cfg());
    assert_eq!(n.reads, 2);
    assert_eq!(shape_of(&c), shape_of(&input));
    assert!(result_text(&c, "t1").starts_with("[summary: tool Read /r/a.ts: 50 lines"));
    assert!(result_text(&c, "t2").starts_with("[summary: tool Read /r/b.ts: 50 lines"));
    // The is_error flag stays.
    let blocks = c.messages[2].content().cloned().unwrap();
    assert_eq!(blocks[1]["is_error"], json!(false));
    assert!(ctxpress_core::validate(&c).is_empty());
}

#[test]
fn images_in_results_are_left_alone() {
    let big = source(50);
    let doc = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/a.png"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": big},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]},
        {"role": "assistant", "content": "done"}
    ]);
    let input = Conversation::parse(&doc.to_string()).unwrap();
    let mut c = input.clone();
    assert_eq!(run(&mut c, cfg()), Counts::default());
    assert_eq!(c.to_json_string(), input.to_json_string());
}

#[test]
fn protected_tail_keep_last_and_short_results_stay() {
    let ops: Vec<(&str, Value, String)> = (0..4)
        .map(|i| {
            (
                "Read",
                json!({"file_path": format!("/r/f{i}.js")}),
                source(40),
            )
        })
        .chain(std::iter::once((
            "Read",
            json!({"file_path": "/r/short.js"}),
            "1\tshort".to_string(),
        )))
        .collect();
    let input = openai(&ops, 0);
    // keep_last 2: c3 and c4 stay; c4 is short anyway.
    let mut c = input.clone();
    let n = run(
        &mut c,
        ToolCompressorConfig {
            keep_last: 2,
            ..cfg()
        },
    );
    assert_eq!(n.reads, 3);
    assert_eq!(result_text(&c, "c3"), source(40));
    // Protected tail of 2 user/assistant messages: the last exchange's call
    // (c4) and everything after it stay; c3's result is before it.
    let mut c = input.clone();
    let n = run(
        &mut c,
        ToolCompressorConfig {
            protected_tail: 2,
            ..cfg()
        },
    );
    assert_eq!(n.reads, 3);
    assert_eq!(result_text(&c, "c3"), source(40));
    assert!(result_text(&c, "c2").starts_with(PREFIX));
    // The system message never changes.
    assert_eq!(
        input.message_json(&input.messages[0]),
        c.message_json(&c.messages[0])
    );
}

#[test]
fn unresolved_failures_stay_until_acted_on() {
    let mut log = String::from("Compiling app\n");
    for i in 0..40 {
        log.push_str(&format!("   Compiling dep{i} v0.1.{i}\n"));
    }
    log.push_str(
        "error[E0425]: cannot find value `x`\nerror: could not compile `app`\nExit code 101\n",
    );
    let ops = vec![
        ("Bash", json!({"command": "cargo build"}), log.clone()),
        ("Read", json!({"file_path": "/r/src/main.rs"}), source(30)),
    ];
    // Nothing acted on the failed build: it stays.
    let mut c = openai(&ops, 0);
    let n = run(&mut c, cfg());
    assert_eq!((n.commands, n.unresolved_errors_kept), (0, 1));
    assert_eq!(result_text(&c, "c0"), log);
    // A later build acted on it: it is summarized, errors kept.
    let mut ops2 = ops.clone();
    ops2.push((
        "Bash",
        json!({"command": "cargo build --release"}),
        "Finished".into(),
    ));
    let mut c = openai(&ops2, 0);
    let n = run(&mut c, cfg());
    assert_eq!((n.commands, n.unresolved_errors_kept), (1, 0));
    let s = result_text(&c, "c0");
    assert!(
        s.starts_with("[summary: tool Bash `cargo build`, exit 101: 44 lines"),
        "{s}"
    );
    assert!(s.contains("error[E0425]: cannot find value `x`"), "{s}");
    // With the rule off, the lone failure is summarized too.
    let mut c = openai(&ops, 0);
    let n = run(
        &mut c,
        ToolCompressorConfig {
            keep_unresolved_errors: false,
            ..cfg()
        },
    );
    assert_eq!(n.commands, 1);
}

#[test]
fn budget_compresses_oldest_first_and_stops() {
    let ops: Vec<(&str, Value, String)> = (0..6)
        .map(|i| {
            (
                "Read",
                json!({"file_path": format!("/r/f{i}.js")}),
                source(80),
            )
        })
        .collect();
    let input = openai(&ops, 0);
    let ctx = StageContext::default();
    let full = ctx.tokens(&input);
    // Already under budget: nothing changes.
    let mut c = input.clone();
    let n = ToolCompressor::new(ToolCompressorConfig {
        budget_tokens: Some(full),
        ..cfg()
    })
    .compress(&mut c, &ctx);
    assert_eq!(n.reads, 0);
    // A budget a little under the total: only the oldest result goes.
    let mut c = input.clone();
    let n = ToolCompressor::new(ToolCompressorConfig {
        budget_tokens: Some(full - 10),
        ..cfg()
    })
    .compress(&mut c, &ctx);
    assert_eq!(n.reads, 1);
    assert!(result_text(&c, "c0").starts_with(PREFIX));
    assert_eq!(result_text(&c, "c1"), source(80));
    // The run's budget is used when the stage has none.
    let mut c = input.clone();
    let run_ctx = StageContext {
        budget: Some(full - 10),
        ..StageContext::default()
    };
    let n = ToolCompressor::new(cfg()).compress(&mut c, &run_ctx);
    assert_eq!(n.reads, 1);
    // Without a budget, every eligible result.
    let mut c = input.clone();
    assert_eq!(run(&mut c, cfg()).reads, 6);
}

#[test]
fn second_run_changes_nothing_and_summaries_are_never_longer() {
    let ops = vec![
        ("Read", json!({"file_path": "/r/a.js"}), source(60)),
        ("Bash", json!({"command": "npm test"}), "x".repeat(500)),
    ];
    let mut c = openai(&ops, 0);
    let n = run(&mut c, cfg());
    // One line of 500 characters: its summary (clipped line) saves enough.
    assert_eq!((n.reads, n.commands), (1, 1));
    let once = c.to_json_string();
    assert_eq!(run(&mut c, cfg()), Counts::default());
    assert_eq!(c.to_json_string(), once);
    // A result whose summary would not save `min_saving` stays.
    let dense: String = (1..=36).map(|i| format!("{i}\tfn f{i}() {{}}\n")).collect();
    let mut c = openai(
        &[("Read", json!({"file_path": "/r/d.rs"}), dense.clone())],
        0,
    );
    let n = run(&mut c, cfg());
    assert_eq!(n.reads, 0);
    assert_eq!(result_text(&c, "c0"), dense);
}

#[test]
fn dense_results_stay_when_the_summary_drops_unique_terms() {
    // Every line names a different identifier found nowhere else.
    let text: String = (1..=40)
        .map(|i| format!("{i}\t  total += lookupValue{i}(row_{i}_value);\n"))
        .collect();
    let ops = vec![("Read", json!({"file_path": "/r/calc.js"}), text.clone())];
    let mut c = openai(&ops, 0);
    let n = run(
        &mut c,
        ToolCompressorConfig {
            chars_per_lost_term: 300,
            ..cfg()
        },
    );
    assert_eq!((n.reads, n.dense_kept), (0, 1));
    assert_eq!(result_text(&c, "c0"), text);
    // When the same terms are in the conversation already (the agent wrote
    // the file), the read adds nothing new and is summarized.
    let plain: String = text
        .lines()
        .map(|l| l.split_once('\t').map_or(l, |(_, b)| b))
        .collect::<Vec<_>>()
        .join("\n");
    let ops = vec![
        (
            "Write",
            json!({"file_path": "/r/calc.js", "content": plain}),
            "File created successfully".to_string(),
        ),
        ("Read", json!({"file_path": "/r/calc.js"}), text),
    ];
    let mut c = openai(&ops, 0);
    let n = run(
        &mut c,
        ToolCompressorConfig {
            chars_per_lost_term: 300,
            ..cfg()
        },
    );
    assert_eq!((n.reads, n.dense_kept), (1, 0));
}

#[test]
fn kinds_switches_and_skip_tools() {
    let ops = vec![
        ("Read", json!({"file_path": "/r/a.js"}), source(60)),
        ("Grep", json!({"pattern": "handler"}), {
            (0..60)
                .map(|i| format!("src/f{}.js:{i}:export function handler{i}(req) {{", i % 7))
                .collect::<Vec<_>>()
                .join("\n")
        }),
        (
            "mcp__docs__query",
            json!({"q": "x"}),
            "some docs line\n".repeat(60),
        ),
    ];
    let mut c = openai(&ops, 0);
    let n = run(&mut c, cfg());
    assert_eq!((n.reads, n.searches, n.other), (1, 1, 1));
    let s = result_text(&c, "c1");
    assert!(
        s.starts_with("[summary: tool Grep `handler`: 60 matches in 7 files]\nsrc/f0.js (9)"),
        "{s}"
    );
    let mut c = openai(&ops, 0);
    let n = run(
        &mut c,
        ToolCompressorConfig {
            reads: false,
            skip_tools: vec!["MCP__DOCS__QUERY".into()],
            ..cfg()
        },
    );
    assert_eq!((n.reads, n.searches, n.other), (0, 1, 0));
}

#[test]
fn config_errors_name_the_field() {
    let e = ctxpress_core::registry::build("tool_compressor", &json!({"keep_lst": 3}))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("keep_lst") && e.contains("keep_last"), "{e}");
    let e = ctxpress_core::registry::build("tool_compressor", &json!({"min_saving": 1.5}))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("min_saving"), "{e}");
    let e = ctxpress_core::registry::build("tool_compressor", &json!({"min_chars": "x"}))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("min_chars"), "{e}");
    assert!(
        ctxpress_core::registry::build("tool_compressor", &json!({"budget_tokens": 1000})).is_ok()
    );
}

#[test]
fn strategy_reports_counters() {
    let ops = vec![("Read", json!({"file_path": "/r/a.js"}), source(60))];
    let mut c = openai(&ops, 0);
    let out = ToolCompressor::new(cfg())
        .apply(&mut c, &StageContext::default())
        .unwrap();
    assert_eq!(out.counters.get("reads"), Some(&1));
    assert!(out.counters.get("chars_saved").is_some_and(|n| *n > 0));
    assert!(out.notes[0].starts_with("Summarized: 1 reads"));
}

#[test]
fn budget_takes_dense_results_last() {
    // c0 is dense (unique identifiers on every line), c1 is plain.
    let dense: String = (1..=40)
        .map(|i| format!("{i}\t  total += lookupValue{i}(row_{i}_value);\n"))
        .collect();
    let ops = vec![
        ("Read", json!({"file_path": "/r/calc.js"}), dense.clone()),
        ("Read", json!({"file_path": "/r/plain.js"}), source(80)),
    ];
    let input = openai(&ops, 0);
    let ctx = StageContext::default();
    let full = ctx.tokens(&input);
    let strict = |budget| ToolCompressorConfig {
        budget_tokens: Some(budget),
        chars_per_lost_term: 300,
        ..cfg()
    };
    // A small cut: the plain result (newer) goes first, the dense one stays.
    let mut c = input.clone();
    let n = ToolCompressor::new(strict(full - 10)).compress(&mut c, &ctx);
    assert_eq!((n.reads, n.dense_kept), (1, 1));
    assert_eq!(result_text(&c, "c0"), dense);
    // A budget nothing but everything meets: the dense one goes too.
    let mut c = input.clone();
    let n = ToolCompressor::new(strict(10)).compress(&mut c, &ctx);
    assert_eq!((n.reads, n.dense_kept), (2, 0));
    assert!(result_text(&c, "c0").starts_with(PREFIX));
}

#[test]
fn names_line_lists_the_terms_only_the_result_holds() {
    // Plain lines plus three identifiers; `shared_helper` is also in a later
    // command, so only the other two are the result's own.
    let mut text = source(60);
    text.push_str("61\t  total += load_settings(parseFlags(shared_helper));\n");
    let ops = vec![
        ("Read", json!({"file_path": "/r/a.js"}), text.clone()),
        (
            "Bash",
            json!({"command": "node run.js shared_helper"}),
            "ok".to_string(),
        ),
    ];
    let check = |max_names| ToolCompressorConfig {
        chars_per_lost_term: 1500,
        max_names,
        ..cfg()
    };
    let mut c = openai(&ops, 0);
    let n = run(&mut c, check(40));
    assert_eq!((n.reads, n.dense_kept), (1, 0));
    let s = result_text(&c, "c0");
    assert!(s.ends_with("\nnames: load_settings, parseFlags"), "{s}");
    // Without the line, both count as lost: 3,000 characters of saving are
    // asked for and this summary saves less, so the result stays.
    let mut c = openai(&ops, 0);
    let n = run(&mut c, check(0));
    assert_eq!((n.reads, n.dense_kept), (0, 1));
    assert_eq!(result_text(&c, "c0"), text);
    // With the check off there is no line.
    let mut c = openai(&ops, 0);
    run(&mut c, cfg());
    assert!(!result_text(&c, "c0").contains("names:"));
}

/// The file content a source of `n` lines is written with (no line numbers).
fn written(n: usize) -> String {
    source(n)
        .lines()
        .map(|l| l.split_once('\t').map_or(l, |(_, b)| b))
        .collect::<Vec<_>>()
        .join("\n")
}

fn call_args(conv: &Conversation, id: &str) -> Value {
    conv.messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .find(|c| c.id == id)
        .map(|c| c.args())
        .unwrap_or_default()
}

#[test]
fn old_write_inputs_become_outlines() {
    let content = written(60);
    let ops = vec![
        (
            "Write",
            json!({"file_path": "/r/src/a.js", "content": content, "mode": "create"}),
            "File created successfully at: /r/src/a.js".to_string(),
        ),
        ("Bash", json!({"command": "npm test"}), "ok".to_string()),
    ];
    let inputs = ToolCompressorConfig {
        inputs: true,
        ..cfg()
    };
    // Off by default.
    let mut c = openai(&ops, 0);
    assert_eq!(run(&mut c, cfg()).inputs, 0);
    assert_eq!(call_args(&c, "c0")["content"], content.as_str());

    let input = openai(&ops, 0);
    let mut c = input.clone();
    let n = run(&mut c, inputs.clone());
    assert_eq!(n.inputs, 1);
    let args = call_args(&c, "c0");
    assert_eq!(args["file_path"], "/r/src/a.js");
    assert_eq!(args["mode"], "create");
    let s = args["content"].as_str().unwrap();
    assert!(
        s.starts_with(
            "[summary: tool Write input: 60 lines; outline: 6 declarations]\n1: export function handler1(req) {\n11: export function handler11(req) {"
        ),
        "{s}"
    );
    assert_eq!(shape_of(&c), shape_of(&input));
    assert!(c.size() < input.size());
    // Once summarized, a second run leaves it.
    assert_eq!(run(&mut c, inputs.clone()).inputs, 0);

    // Kept: inside the protected tail or the last `keep_last` calls, when a
    // recent call touches the file, and when the write failed.
    for cfg in [
        ToolCompressorConfig {
            protected_tail: 3,
            ..inputs.clone()
        },
        ToolCompressorConfig {
            keep_last: 2,
            ..inputs.clone()
        },
    ] {
        let mut c = openai(&ops, 0);
        assert_eq!(run(&mut c, cfg).inputs, 0);
    }
    let mut touched = ops.clone();
    touched.push(("Read", json!({"file_path": "/r/src/a.js"}), source(60)));
    let mut c = openai(&touched, 0);
    let n = run(
        &mut c,
        ToolCompressorConfig {
            keep_last: 1,
            ..inputs.clone()
        },
    );
    assert_eq!(n.inputs, 0);
    let mut failed = ops.clone();
    failed[0].2 = "Error: EACCES: permission denied, open '/r/src/a.js'".to_string();
    let mut c = openai(&failed, 0);
    assert_eq!(run(&mut c, inputs).inputs, 0);
}

#[test]
fn write_inputs_in_anthropic_tool_use_blocks() {
    let content = written(60);
    let doc = json!({"system": "s", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "writing"},
            {"type": "tool_use", "id": "t1", "name": "Write",
             "input": {"file_path": "/r/a.js", "content": content}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "File created successfully"}]},
        {"role": "assistant", "content": "done"}
    ]});
    let input = Conversation::parse(&doc.to_string()).unwrap();
    let mut c = input.clone();
    let n = run(
        &mut c,
        ToolCompressorConfig {
            inputs: true,
            ..cfg()
        },
    );
    assert_eq!(n.inputs, 1);
    let args = call_args(&c, "t1");
    assert_eq!(args["file_path"], "/r/a.js");
    assert!(args["content"].as_str().unwrap().starts_with(PREFIX));
    assert_eq!(c.messages[1].text(), "writing");
    assert!(c.size() < input.size());
}

#[test]
fn char_count_is_the_number_of_chars() {
    for text in [
        "",
        "a",
        "é",
        "ascii only, longer than sixteen bytes",
        "héllo wörld, ünïcödé ☃ and 😀 past a lane: ééééééééééééééééééé",
        include_str!("lib.rs"),
    ] {
        assert_eq!(char_count(text), text.chars().count(), "{text:?}");
    }
}

/// The candidates, write inputs and kept failures of `c` under `cfg`, by
/// [`ToolCompressor::candidates`] and by its eager reference, as text.
fn both_candidates(c: &Conversation, cfg: &ToolCompressorConfig) -> (String, String) {
    let t = ToolCompressor::new(cfg.clone());
    (
        format!("{:?}", t.candidates(c)),
        format!("{:?}", t.candidates_reference(c)),
    )
}

/// Configurations that switch each test of the candidate search.
fn candidate_configs() -> Vec<ToolCompressorConfig> {
    let base = ToolCompressorConfig {
        inputs: true,
        ..cfg()
    };
    vec![
        base.clone(),
        ToolCompressorConfig {
            keep_last: 2,
            protected_tail: 1,
            ..base.clone()
        },
        ToolCompressorConfig {
            keep_unresolved_errors: false,
            min_chars: 10,
            ..base.clone()
        },
        ToolCompressorConfig {
            skip_tools: vec!["bash".into()],
            inputs: false,
            ..base.clone()
        },
        ToolCompressorConfig {
            searches: false,
            writes: false,
            keep_last: 1,
            ..base
        },
        ToolCompressorConfig::default(),
    ]
}

/// One random tool exchange: (tool, arguments, result).
fn random_op(
    tool: usize,
    path: usize,
    long: bool,
    failed: bool,
    done: bool,
) -> (&'static str, Value, String) {
    let path = format!("/r/src/f{path}.rs");
    let body = if long { source(25) } else { "ok".into() };
    let body = if done {
        format!("[summary: earlier] {body}")
    } else {
        body
    };
    match tool {
        0 => ("Read", json!({ "file_path": path }), body),
        1 => (
            "Write",
            json!({ "file_path": path, "content": body }),
            "File written".into(),
        ),
        2 => (
            "Bash",
            json!({ "command": format!("cargo test -p f{}", path.len() % 3), "cwd": "/r" }),
            if failed {
                format!("{body}error: test failed\nExit code 1\n")
            } else {
                body
            },
        ),
        3 => ("Grep", json!({ "pattern": "fn", "path": path }), body),
        4 => (
            "Edit",
            json!({ "file_path": path, "old_string": "a", "new_string": "b" }),
            body,
        ),
        _ => ("Mystery", json!({ "x": path }), body),
    }
}

#[test]
fn candidates_answer_as_the_reference_on_fixed_sessions() {
    let ops = vec![
        random_op(2, 1, true, true, false),
        random_op(0, 1, true, false, false),
        random_op(1, 2, true, false, false),
        random_op(1, 2, true, false, true),
        random_op(3, 3, true, false, false),
        random_op(2, 4, true, true, false),
        random_op(4, 1, true, false, false),
        random_op(5, 5, true, false, false),
        random_op(1, 6, true, false, false),
        random_op(0, 6, false, false, false),
    ];
    let (c, base) = (openai(&ops, 0), &candidate_configs()[0]);
    let (found, inputs, kept) = ToolCompressor::new(base.clone()).candidates(&c);
    assert!(
        found.len() > 3 && !inputs.is_empty() && kept == 1,
        "{found:?} {inputs:?}"
    );
    for tail in [0, 2] {
        let c = openai(&ops, tail);
        for cfg in candidate_configs() {
            let (fast, reference) = both_candidates(&c, &cfg);
            assert_eq!(fast, reference, "{cfg:?}");
        }
    }
}

proptest::proptest! {
    #[test]
    fn char_count_on_random_texts(text in "[a-c é☃😀\u{80}-\u{7ff}]{0,70}") {
        proptest::prop_assert_eq!(char_count(&text), text.chars().count());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
    #[test]
    fn candidates_answer_as_the_reference(
        picks in proptest::collection::vec(
            (0usize..6, 0usize..5, proptest::bool::ANY, proptest::bool::ANY, 0u8..8),
            0..14,
        ),
        tail in 0usize..3,
    ) {
        let ops: Vec<_> = picks
            .iter()
            .map(|&(tool, path, long, failed, d)| random_op(tool, path, long, failed, d == 0))
            .collect();
        let c = openai(&ops, tail);
        for cfg in candidate_configs() {
            let (fast, reference) = both_candidates(&c, &cfg);
            proptest::prop_assert_eq!(fast, reference);
        }
    }
}

/// A Cline session: calls as XML tags in assistant text, results sent back
/// as user text blocks, an environment block in every user turn.
fn cline_session() -> Conversation {
    let env = "<environment_details>\n# VSCode Open Tabs\nsrc/app.ts\n</environment_details>";
    let mut msgs = vec![
        json!({"role": "system", "content": "You are Cline."}),
        json!({"role": "user", "content": [
            {"type": "text", "text": "<task>\nFix the handler bug\n</task>"},
            {"type": "text", "text": env}]}),
    ];
    let test_out: String = (1..=40)
        .map(|i| format!("  ✓ handler case {i} (3 ms)\n"))
        .collect::<String>()
        + "Tests: 1 failed, 40 passed\n";
    let steps = [
        ("read_file", "src/app.ts", source(120)),
        (
            "execute_command",
            "npm test",
            format!("Command executed.\nOutput:\n{test_out}"),
        ),
        ("read_file", "src/app.ts", source(90)),
    ];
    for (tool, arg, out) in steps {
        let tag = if tool == "read_file" {
            "path"
        } else {
            "command"
        };
        msgs.push(json!({"role": "assistant", "content": [{"type": "text",
            "text": format!("<{tool}>\n<{tag}>{arg}</{tag}>\n</{tool}>")}]}));
        msgs.push(json!({"role": "user", "content": [
            {"type": "text", "text": format!("[{tool} for '{arg}'] Result:")},
            {"type": "text", "text": out},
            {"type": "text", "text": env}]}));
    }
    Conversation::parse(&Value::Array(msgs).to_string()).unwrap()
}

#[test]
fn results_sent_as_user_text_are_summarized_in_place() {
    let mut conv = cline_session();
    let before = conv.clone();
    let c = run(
        &mut conv,
        ToolCompressorConfig {
            keep_last: 1,
            ..cfg()
        },
    );
    assert_eq!((c.reads, c.commands), (1, 1), "{c:?}");
    let blocks = |i: usize| -> Vec<String> {
        conv.messages[i]
            .content()
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .map(|b| b["text"].as_str().unwrap().to_string())
            .collect()
    };
    // The read: header and environment block stay, the output is a summary.
    let read = blocks(3);
    assert_eq!(read[0], "[read_file for 'src/app.ts'] Result:");
    assert!(
        read[1].starts_with("[summary: tool read_file"),
        "{}",
        read[1]
    );
    assert!(read[1].contains("src/app.ts"), "{}", read[1]);
    assert!(read[2].starts_with("<environment_details>"));
    // The command's summary keeps its count line.
    let cmd = blocks(5);
    assert!(cmd[1].contains("Tests: 1 failed, 40 passed"), "{}", cmd[1]);
    // The newest result stays whole; roles and message count are unchanged.
    assert!(Message::same(&conv.messages[7], &before.messages[7]));
    assert_eq!(shape_of(&conv), shape_of(&before));
}
