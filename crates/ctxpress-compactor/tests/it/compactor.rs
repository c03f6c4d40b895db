//! The spec 003 guarantees of the compactor, on small agent sessions.

use ctxpress_compactor::{CompactionConfig, CompactionError, Compactor, TaskState};
use ctxpress_core::archive::{ArchiveError, MemoryArchive, archive, expand};
use ctxpress_core::compaction::{
    BatchArchive, MemoryBatchArchive, SummaryBatch, batch_label, parse_header,
};
use ctxpress_core::summarize::{Summarize, SummarizeError, SummaryRequest};
use ctxpress_core::{Conversation, Pipeline, Role, StageContext, StageStatus, validate};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const T0: i64 = 1_790_000_000; // epoch seconds

fn prose(i: usize) -> String {
    format!(
        "Step {i}: we looked at how the queue hands work from the primary loop to the secondary \
         loop and decided to keep the ring buffer, because it measured well under load."
    )
}

/// An OpenAI agent session with timestamps: a request, reads, an edit, a
/// failing test run, a plan, then `turns` prose turns and a short tail.
fn session(turns: usize) -> Value {
    let mut msgs = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let mut t = T0;
    let mut push = |mut v: Value| {
        t += 60;
        v["timestamp"] = json!(t);
        msgs.push(v);
    };
    push(json!({"role": "user", "content": "Fix the failing parser test in src/parse.rs please."}));
    let call = |id: &str, name: &str, args: Value| {
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": id, "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]})
    };
    let res = |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
    push(call("c1", "Read", json!({"file_path": "/r/src/parse.rs"})));
    push(res("c1", &"fn parse() {}\n".repeat(30)));
    push(call("c2", "Bash", json!({"command": "cargo test"})));
    push(res(
        "c2",
        "error: test parse::tests::empty failed\nExit code 101",
    ));
    push(call(
        "c3",
        "Edit",
        json!({"file_path": "/r/src/parse.rs", "old_string": "a", "new_string": "b"}),
    ));
    push(res("c3", "The file /r/src/parse.rs has been updated."));
    push(call(
        "c4",
        "TodoWrite",
        json!({"todos": [
            {"content": "fix empty input", "status": "completed"},
            {"content": "add a regression test", "status": "in_progress"},
            {"content": "update the changelog", "status": "pending"}]}),
    ));
    push(res("c4", "Todos have been modified successfully."));
    for i in 0..turns {
        push(json!({"role": "user", "content": prose(i)}));
        push(json!({"role": "assistant", "content": prose(i + 100)}));
    }
    for i in 0..3 {
        push(json!({"role": "user", "content": format!("next {i}")}));
        push(json!({"role": "assistant", "content": format!("ok {i}")}));
    }
    json!({"id": "s1", "messages": msgs})
}

fn parse(v: &Value) -> Conversation {
    Conversation::parse(&v.to_string()).unwrap()
}

fn cfg(chunk_tokens: usize) -> CompactionConfig {
    CompactionConfig {
        chunk_tokens,
        ..CompactionConfig::default()
    }
}

fn compactor(chunk_tokens: usize) -> Compactor {
    Compactor::new(cfg(chunk_tokens))
        .unwrap()
        .with_now(T0 * 1000)
}

#[test]
fn batches_have_labels_headers_depth_zero_and_the_originals() {
    let input = parse(&session(6));
    let arch = MemoryBatchArchive::new();
    let r = compactor(300).compress(&input, "s1", &arch);
    assert!(
        r.error.is_none() && r.compacted,
        "{:?} {:?}",
        r.error,
        r.notes
    );
    let batches = arch.batches("s1").unwrap();
    assert!(batches.len() >= 2, "{}", batches.len());
    let mut originals = Vec::new();
    for b in &batches {
        assert_eq!(b.label, batch_label("s1", &b.end));
        assert!(b.label.starts_with("compaction-batch-s1-20"), "{}", b.label);
        assert!(b.end.ends_with('Z') && b.end.len() == 24, "{}", b.end);
        assert_eq!(b.depth, 0);
        let (h, _) = parse_header(&b.summary).expect("header");
        assert_eq!(
            (h.depth, h.count, h.start.as_str(), h.end.as_str()),
            (0, b.count, b.start.as_str(), b.end.as_str())
        );
        assert!(b.summary.starts_with("[depth:0|start:"), "{}", b.summary);
        assert_eq!(b.originals.len(), b.count);
        assert!(b.summary.contains("[task state]"));
        originals.extend(b.originals.iter().cloned());
    }
    // The first batch starts at the first folded message's own timestamp.
    assert_eq!(
        batches[0].start,
        ctxpress_core::compaction::format_iso((T0 + 60) * 1000)
    );
    // Every folded message is archived exactly, and the rest are still there.
    let kept: Vec<String> = r
        .history
        .messages
        .iter()
        .map(|m| r.history.message_json(m))
        .collect();
    for m in &input.messages {
        let j = input.message_json(m);
        assert!(
            originals.contains(&j) ^ kept.contains(&j),
            "message {j} lost or duplicated"
        );
    }
    assert_eq!(r.messages_folded, originals.len());
    assert!(r.tokens_after < r.tokens_before);
}

#[test]
fn clip_archive_message_comes_first_as_a_user_message_in_both_dialects() {
    let input = parse(&session(4));
    let arch = MemoryBatchArchive::new();
    let r = compactor(4000).compress(&input, "s1", &arch);
    let h = &r.history;
    assert_eq!(h.messages[0].role(), Role::System);
    assert_eq!(h.messages[0].text(), "You are a coding agent.");
    // The system messages stay exactly as they were: the clip is a user message.
    assert_eq!(h.messages[1].role(), Role::User);
    assert!(h.messages[1].text().starts_with("[Context Summary"));
    assert!(validate(h).is_empty(), "{:?}", validate(h));
    // The protected tail (last 5 user/assistant messages) is untouched.
    let n = h.messages.len();
    let m = input.messages.len();
    for k in 1..=5 {
        assert_eq!(
            h.message_json(&h.messages[n - k]),
            input.message_json(&input.messages[m - k])
        );
    }

    let anthropic = json!([
        {"role": "user", "content": "Refactor the cache module, please."},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/cache.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1\n".repeat(200)}]},
        {"role": "assistant", "content": prose(1)},
        {"role": "user", "content": prose(2)},
        {"role": "assistant", "content": prose(3)},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "done"}
    ]);
    let input = parse(&anthropic);
    let r = compactor(4000).compress(&input, "a1", &MemoryBatchArchive::new());
    assert!(r.compacted, "{:?}", r.notes);
    assert_eq!(r.history.messages[0].role(), Role::User);
    assert!(r.history.messages[0].text().starts_with("[Context Summary"));
    assert!(validate(&r.history).is_empty());
}

/// Records the order of archive calls; fails `put_batches` on demand.
#[derive(Default)]
struct Recording {
    inner: MemoryBatchArchive,
    calls: Mutex<Vec<String>>,
    fail_put: bool,
}

impl BatchArchive for Recording {
    fn put_batches(&self, b: &[SummaryBatch]) -> Result<(), ArchiveError> {
        self.calls.lock().unwrap().push(format!("put {}", b.len()));
        if self.fail_put {
            return Err(ArchiveError::Backend("disk full".into()));
        }
        self.inner.put_batches(b)
    }
    fn batches(&self, c: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        self.calls.lock().unwrap().push("batches".into());
        self.inner.batches(c)
    }
    fn read(&self, l: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        self.inner.read(l)
    }
    fn replace(&self, c: &str, r: &[String], a: SummaryBatch) -> Result<(), ArchiveError> {
        self.calls.lock().unwrap().push("replace".into());
        self.inner.replace(c, r, a)
    }
}

#[test]
fn archive_is_written_before_the_history_changes_and_a_failure_changes_nothing() {
    let input = parse(&session(6));
    let rec = Recording::default();
    let r = compactor(300).compress(&input, "s1", &rec);
    assert!(r.compacted);
    let calls = rec.calls.lock().unwrap().clone();
    assert_eq!(calls.first().map(String::as_str), Some("batches"));
    assert!(calls.last().unwrap().starts_with("put "), "{calls:?}");

    let failing = Recording {
        fail_put: true,
        ..Recording::default()
    };
    let r = compactor(300).compress(&input, "s1", &failing);
    assert!(!r.compacted);
    assert!(
        matches!(
            r.error,
            Some(CompactionError::Archive(ArchiveError::Backend(_)))
        ),
        "{:?}",
        r.error
    );
    assert_eq!(r.history.to_json_string(), input.to_json_string());
    assert!(failing.inner.is_empty());
}

struct Fixed(Result<&'static str, SummarizeError>);
impl Summarize for Fixed {
    fn summarize(&self, _: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        self.0.clone().map(str::to_string)
    }
}
struct Longer;
impl Summarize for Longer {
    fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        Ok(format!("{} {}", r.text, r.text))
    }
}
struct Panics;
impl Summarize for Panics {
    fn summarize(&self, _: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        panic!("model exploded")
    }
}

#[test]
fn a_bad_backend_takes_the_deterministic_path_never_a_panic() {
    let input = parse(&session(6));
    let backends: Vec<(&str, Arc<dyn Summarize>)> = vec![
        ("error", Arc::new(Fixed(Err(SummarizeError::Timeout(5000))))),
        ("empty", Arc::new(Fixed(Ok("   ")))),
        ("longer", Arc::new(Longer)),
        ("panic", Arc::new(Panics)),
    ];
    for (what, b) in backends {
        let c = Compactor::with_backend(cfg(300), b, false).with_now(T0 * 1000);
        let arch = MemoryBatchArchive::new();
        let r = c.compress(&input, "s1", &arch);
        assert!(r.error.is_none(), "{what}: {:?}", r.error);
        assert!(r.compacted, "{what}");
        assert!(r.fallbacks > 0, "{what}");
        assert!(
            r.notes.iter().any(|n| n.contains("deterministic")),
            "{what}: {:?}",
            r.notes
        );
        assert!(validate(&r.history).is_empty(), "{what}");
    }
    // A good answer is used as is.
    let c = Compactor::with_backend(cfg(300), Arc::new(Fixed(Ok("SHORT SUMMARY"))), true);
    let arch = MemoryBatchArchive::new();
    let r = c.compress(&input, "s1", &arch);
    assert_eq!(r.fallbacks, 0, "{:?}", r.notes);
    assert!(
        arch.batches("s1").unwrap()[0]
            .summary
            .contains("\nSHORT SUMMARY\n")
    );
}

/// Fails on texts longer than `max` characters.
struct Small(usize);
impl Summarize for Small {
    fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        if r.text.chars().count() > self.0 {
            Err(SummarizeError::Http(413))
        } else {
            Ok("ok".into())
        }
    }
}

#[test]
fn a_chunk_too_large_for_the_backend_is_split() {
    let input = parse(&session(6));
    let c = Compactor::with_backend(cfg(100_000), Arc::new(Small(1500)), false);
    let r = c.compress(&input, "s1", &MemoryBatchArchive::new());
    assert!(r.compacted);
    assert!(r.notes.iter().any(|n| n.contains("split")), "{:?}", r.notes);
}

fn state_of(arch: &dyn BatchArchive, id: &str) -> TaskState {
    let b = arch.batches(id).unwrap();
    TaskState::parse(&b.last().unwrap().summary).unwrap()
}

#[test]
fn task_state_block_openai() {
    let input = parse(&session(2));
    let arch = MemoryBatchArchive::new();
    let r = compactor(4000).compress(&input, "s1", &arch);
    assert!(r.compacted);
    let s = state_of(&arch, "s1");
    assert_eq!(
        s.first_request.as_deref(),
        Some("Fix the failing parser test in src/parse.rs please.")
    );
    assert_eq!(s.latest_request.as_deref(), Some("next 0"));
    assert_eq!(s.modified, vec!["/r/src/parse.rs".to_string()]);
    assert!(s.read.is_empty(), "read then modified: {:?}", s.read);
    assert_eq!(
        s.commands,
        vec![("cargo test".to_string(), "failed".to_string())]
    );
    assert_eq!(
        s.errors,
        vec![(
            "command cargo test".to_string(),
            "error: test parse::tests::empty failed".to_string()
        )]
    );
    assert_eq!(
        s.open,
        vec!["add a regression test", "update the changelog"]
    );
    // The clip message shows the session ledger of the same facts, not the
    // block (which the archived batches keep).
    let clip = r.history.messages[1].text().into_owned();
    assert!(!clip.contains("[task state]"), "{clip}");
    for want in [
        "\n[session ledger: 14 earlier messages",
        "- first request: \"Fix the failing parser test in src/parse.rs please.\"",
        "# open todos\n- add a regression test\n- update the changelog\n",
        "- /r/src/parse.rs: edited, read (last edited)",
        "- `cargo test`: failed: error: test parse::tests::empty failed",
    ] {
        assert!(clip.contains(want), "{want} not in {clip}");
    }
}

#[test]
fn task_state_block_anthropic() {
    let doc = json!([
        {"role": "user", "content": "Make the importer skip blank rows."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/imp.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "rows = []\n".repeat(50)}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t2", "name": "Write", "input": {"file_path": "/r/imp.py", "content": "rows = [r for r in rows if r]\n"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "permission denied", "is_error": true}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t3", "name": "Read", "input": {"file_path": "/r/README.md"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": "# importer\n".repeat(40)}]},
        {"role": "assistant", "content": prose(1)},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "done"}
    ]);
    let input = parse(&doc);
    let arch = MemoryBatchArchive::new();
    let r = compactor(4000).compress(&input, "a1", &arch);
    assert!(r.compacted, "{:?}", r.notes);
    assert!(validate(&r.history).is_empty());
    let s = state_of(&arch, "a1");
    assert_eq!(
        s.first_request.as_deref(),
        Some("Make the importer skip blank rows.")
    );
    assert_eq!(s.read, vec!["/r/imp.py", "/r/README.md"]);
    assert!(s.modified.is_empty(), "the write failed: {:?}", s.modified);
    assert_eq!(
        s.errors,
        vec![(
            "file /r/imp.py".to_string(),
            "permission denied".to_string()
        )]
    );
}

#[test]
fn a_second_compaction_updates_the_task_state_and_the_batches() {
    let first = session(2);
    let arch = MemoryBatchArchive::new();
    let c = compactor(4000);
    let r1 = c.compress(&parse(&first), "s1", &arch);
    assert!(r1.compacted);
    let n1 = arch.batches("s1").unwrap().len();
    // Append: a new request, a passing test run, a new read, more turns.
    let mut v: Value = serde_json::from_str(&r1.history.to_json_string()).unwrap();
    let msgs = v["messages"].as_array_mut().unwrap();
    msgs.push(json!({"role": "user", "content": "Now also handle trailing commas."}));
    msgs.push(
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "d1", "type": "function",
        "function": {"name": "Bash", "arguments": "{\"command\":\"cargo test\"}"}}]}),
    );
    msgs.push(json!({"role": "tool", "tool_call_id": "d1", "content": "test result: ok. 12 passed; 0 failed\nExit code 0"}));
    msgs.push(
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "d2", "type": "function",
        "function": {"name": "Read", "arguments": "{\"file_path\":\"/r/src/lex.rs\"}"}}]}),
    );
    msgs.push(json!({"role": "tool", "tool_call_id": "d2", "content": "fn lex() {}\n".repeat(30)}));
    for i in 0..3 {
        msgs.push(json!({"role": "user", "content": prose(200 + i)}));
        msgs.push(json!({"role": "assistant", "content": prose(300 + i)}));
    }
    let second = parse(&v);
    let r2 = c.compress(&second, "s1", &arch);
    assert!(r2.compacted, "{:?}", r2.notes);
    let batches = arch.batches("s1").unwrap();
    assert!(batches.len() > n1);
    // One clip message, which replaced the old one.
    let clips = r2
        .history
        .messages
        .iter()
        .filter(|m| m.text().starts_with("[Context Summary"))
        .count();
    assert_eq!(clips, 1);
    let s = state_of(&arch, "s1");
    assert_eq!(
        s.first_request.as_deref(),
        Some("Fix the failing parser test in src/parse.rs please."),
        "anchored: the first request stays"
    );
    assert_eq!(s.latest_request.as_deref(), Some(prose(200).as_str()));
    assert!(
        s.errors.is_empty(),
        "resolved by the passing run: {:?}",
        s.errors
    );
    assert_eq!(
        s.commands,
        vec![("cargo test".to_string(), "ok".to_string())]
    );
    assert_eq!(s.modified, vec!["/r/src/parse.rs".to_string()]);
    assert_eq!(s.read, vec!["/r/src/lex.rs".to_string()]);
    assert_eq!(
        s.open,
        vec!["add a regression test", "update the changelog"],
        "no new plan: the open items carry over"
    );
    assert!(validate(&r2.history).is_empty());
}

#[test]
fn too_many_batches_are_summarized_again_one_level_deeper() {
    let c = Compactor::new(CompactionConfig {
        chunk_tokens: 120,
        clip_window: 1,
        buffer: 1,
        summary_tokens: 40,
        ..CompactionConfig::default()
    })
    .unwrap()
    .with_now(T0 * 1000);
    let arch = MemoryBatchArchive::new();
    let input = parse(&session(20));
    let r = c.compress(&input, "s1", &arch);
    assert!(r.compacted, "{:?}", r.notes);
    let b = arch.batches("s1").unwrap();
    assert_eq!(b.len(), 3, "2 * clip_window + buffer");
    assert_eq!(b[0].depth, 1);
    assert!(b[0].summary.starts_with("[depth:1|"));
    assert!(b[1..].iter().all(|b| b.depth == 0));
    assert_eq!(b.iter().map(|b| b.count).sum::<usize>(), r.messages_folded);
    let clip = r.history.messages[1].text().into_owned();
    assert!(clip.contains("1 batches omitted"), "{clip}");
    assert!(
        clip.contains(&b[1].label) && clip.contains("ctxpress search"),
        "{clip}"
    );
    // Again, after more messages: the deep batch goes one level deeper.
    let mut v: Value = serde_json::from_str(&r.history.to_json_string()).unwrap();
    let msgs = v["messages"].as_array_mut().unwrap();
    for i in 0..6 {
        msgs.push(json!({"role": "user", "content": prose(500 + i)}));
        msgs.push(json!({"role": "assistant", "content": prose(600 + i)}));
    }
    let r2 = c.compress(&parse(&v), "s1", &arch);
    assert!(r2.compacted, "{:?}", r2.notes);
    assert!(!r2.resummarized.is_empty());
    let b2 = arch.batches("s1").unwrap();
    assert_eq!(b2.len(), 3);
    assert_eq!(b2[0].depth, 2);
    assert_eq!(
        b2.iter().map(|b| b.count).sum::<usize>(),
        r.messages_folded + r2.messages_folded,
        "the previous clip message is regenerated, not archived"
    );
}

#[test]
fn nothing_to_fold_leaves_the_history_as_is() {
    let doc = json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]);
    let input = parse(&doc);
    let r = compactor(4000).compress(&input, "x", &MemoryBatchArchive::new());
    assert!(!r.compacted && r.error.is_none());
    assert_eq!(r.history.to_json_string(), input.to_json_string());
}

fn stage(params: Value) -> Pipeline {
    let built = ctxpress_core::registry::build("compactor", &params).unwrap();
    let mut p = Pipeline::default();
    match built {
        ctxpress_core::BuiltStrategy::Sync(s) => p.push(s),
        ctxpress_core::BuiltStrategy::Async(_) => panic!("the compactor is sync"),
    }
    p
}

#[test]
fn as_a_stage_it_keeps_pairing_and_expands_back_byte_for_byte() {
    let doc = session(6).to_string();
    let input = Conversation::parse(&doc).unwrap();
    let p = stage(json!({"chunk_tokens": 300}));
    let mut conv = input.clone();
    let report = p.run(&mut conv, &StageContext::default());
    assert_eq!(report.stages[0].status, StageStatus::Applied, "{report:?}");
    assert!(report.stages[0].outcome.counters["messages_folded"] > 0);
    assert!(validate(&conv).is_empty());
    assert!(conv.messages[1].text().starts_with("[Context Summary"));
    let originals = MemoryArchive::new();
    archive(&input, &conv, &originals).unwrap();
    let out = Conversation::parse(&conv.to_json_string()).unwrap();
    assert_eq!(expand(&out, &originals).unwrap().to_json_string(), doc);

    // A second round on the written output continues the batches and still
    // expands to the original input.
    let mut v: Value = serde_json::from_str(&out.to_json_string()).unwrap();
    let msgs = v["messages"].as_array_mut().unwrap();
    for i in 0..4 {
        msgs.push(json!({"role": "user", "content": prose(700 + i)}));
        msgs.push(json!({"role": "assistant", "content": prose(800 + i)}));
    }
    let round2_in = parse(&v);
    let mut round2 = round2_in.clone();
    let r = p.run(&mut round2, &StageContext::default());
    assert_eq!(r.stages[0].status, StageStatus::Applied, "{r:?}");
    archive(&round2_in, &round2, &originals).unwrap();
    let out2 = Conversation::parse(&round2.to_json_string()).unwrap();
    let back = expand(&out2, &originals).unwrap();
    assert_eq!(
        back.to_json_string(),
        v.to_string().replace(
            &out.messages
                .iter()
                .map(|m| out.message_json(m))
                .collect::<Vec<_>>()
                .join(","),
            &input
                .messages
                .iter()
                .map(|m| input.message_json(m))
                .collect::<Vec<_>>()
                .join(","),
        )
    );
}

#[test]
fn as_a_stage_with_a_budget_it_folds_only_what_is_needed() {
    let input = parse(&session(40));
    let p = stage(json!({"chunk_tokens": 200}));
    let total = StageContext::default().tokens(&input);
    // Under the budget: nothing.
    let mut same = input.clone();
    let ctx = StageContext {
        budget: Some(total + 10),
        ..StageContext::default()
    };
    p.run(&mut same, &ctx);
    assert_eq!(same.to_json_string(), input.to_json_string());
    // A little over: only the oldest chunks go.
    let mut some = input.clone();
    let ctx = StageContext {
        budget: Some(total - 200),
        ..StageContext::default()
    };
    p.run(&mut some, &ctx);
    assert!(StageContext::default().tokens(&some) <= total - 200);
    let mut all = input.clone();
    p.run(&mut all, &StageContext::default());
    assert!(
        some.messages.len() > all.messages.len(),
        "{} vs {}",
        some.messages.len(),
        all.messages.len()
    );
    assert!(validate(&some).is_empty());
}

#[test]
fn config_errors_name_the_field() {
    let e = ctxpress_core::registry::build("compactor", &json!({"chunk_tokns": 1}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("did you mean `chunk_tokens`"), "{e}");
    let e = ctxpress_core::registry::build("compactor", &json!({"clip_window": 0}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("clip_window"), "{e}");
    let e = ctxpress_core::registry::build("compactor", &json!({"backend": "nope"}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn created_tasks_stay_open_until_updated_across_compactions() {
    let call = |id: &str, name: &str, args: Value| {
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": id, "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]})
    };
    let res = |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
    let mut msgs = vec![json!({"role": "user", "content": "Fix the three audit findings."})];
    for (i, subject) in ["scope bypass", "task listing", "encrypted leak"]
        .iter()
        .enumerate()
    {
        let id = format!("t{i}");
        msgs.push(call(
            &id,
            "TaskCreate",
            json!({"subject": subject, "description": "d"}),
        ));
        msgs.push(res(
            &id,
            &format!("Task #{} created successfully: {subject}", i + 1),
        ));
    }
    msgs.push(call(
        "u1",
        "TaskUpdate",
        json!({"taskId": "1", "status": "completed"}),
    ));
    msgs.push(res("u1", "Updated task #1 status"));
    for i in 0..7 {
        msgs.push(json!({"role": "user", "content": prose(i)}));
        msgs.push(json!({"role": "assistant", "content": prose(i + 50)}));
    }
    let arch = MemoryBatchArchive::new();
    let c = compactor(4000);
    let r1 = c.compress(&parse(&json!(msgs)), "t", &arch);
    assert!(r1.compacted, "{:?}", r1.notes);
    assert_eq!(
        state_of(&arch, "t").open,
        vec!["#2 task listing", "#3 encrypted leak"]
    );
    // Later: task 2 is done; a second compaction closes it in the carried state.
    let mut more = r1.history.clone();
    let extra = [
        call(
            "u2",
            "TaskUpdate",
            json!({"taskId": "2", "status": "completed"}),
        ),
        res("u2", "Updated task #2 status"),
    ];
    for (i, v) in extra.into_iter().enumerate() {
        let fields = v.as_object().unwrap().clone();
        more.messages.push(ctxpress_core::Message::from_fields(
            ctxpress_core::MessageId::new(format!("x{i}")),
            fields,
        ));
    }
    for i in 0..6 {
        more.messages.push(ctxpress_core::Message::text_message(
            ctxpress_core::MessageId::new(format!("p{i}")),
            if i % 2 == 0 { "user" } else { "assistant" },
            &prose(900 + i),
        ));
    }
    let more = parse(&serde_json::from_str::<Value>(&more.to_json_string()).unwrap());
    let r2 = c.compress(&more, "t", &arch);
    assert!(r2.compacted, "{:?}", r2.notes);
    let s = state_of(&arch, "t");
    assert_eq!(s.open, vec!["#3 encrypted leak"]);
    assert_eq!(
        s.first_request.as_deref(),
        Some("Fix the three audit findings.")
    );
}

#[test]
fn a_clip_from_another_run_is_carried_on_not_dropped() {
    // Two stage instances (two processes): the second knows nothing of the
    // first one's batches but rebuilds them from its clip message.
    let input = parse(&session(6));
    let mut once = input.clone();
    stage(json!({"chunk_tokens": 300})).run(&mut once, &StageContext::default());
    let first_clip = once.messages[1].text().into_owned();
    let mut v: Value = serde_json::from_str(&once.to_json_string()).unwrap();
    let msgs = v["messages"].as_array_mut().unwrap();
    for i in 0..4 {
        msgs.push(json!({"role": "user", "content": prose(700 + i)}));
        msgs.push(json!({"role": "assistant", "content": prose(800 + i)}));
    }
    let mut twice = parse(&v);
    let r = stage(json!({"chunk_tokens": 300})).run(&mut twice, &StageContext::default());
    assert_eq!(r.stages[0].status, StageStatus::Applied, "{r:?}");
    assert!(
        r.stages[0]
            .outcome
            .notes
            .iter()
            .any(|n| n.contains("recovered")),
        "{:?}",
        r.stages[0].outcome.notes
    );
    let clip = twice.messages[1].text().into_owned();
    assert_eq!(
        twice
            .messages
            .iter()
            .filter(|m| m.text().starts_with("[Context Summary"))
            .count(),
        1
    );
    // The first run's first batch is still shown, and the ledger carried.
    let first_batch = first_clip
        .split("\n\n")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap();
    assert!(first_batch.starts_with("[depth:0|"), "{first_clip}");
    assert!(clip.contains(first_batch), "{clip}");
    assert_eq!(clip.matches("[session ledger:").count(), 1, "{clip}");
    assert!(
        clip.contains("- first request: \"Fix the failing parser test in src/parse.rs please.\""),
        "{clip}"
    );
    assert!(
        clip.contains("# open todos\n- add a regression test\n- update the changelog\n"),
        "{clip}"
    );
    assert!(validate(&twice).is_empty());
}

/// A future that is pending once.
struct YieldOnce(bool);
impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// An async backend (as an LLM is) that waits once, then answers.
struct Slow;
impl ctxpress_core::SummarizeAsync for Slow {
    fn summarize_async<'a, 'b, 'c, 'f>(
        &'a self,
        _req: &'b SummaryRequest<'c>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<String, SummarizeError>> + Send + 'f>,
    >
    where
        'a: 'f,
        'b: 'f,
        'c: 'f,
        Self: 'f,
    {
        Box::pin(async {
            YieldOnce(false).await;
            Ok("SLOW SUMMARY".to_string())
        })
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn build_slow(_: &Value) -> Result<ctxpress_core::Backend, ctxpress_core::ConfigError> {
    Ok(ctxpress_core::Backend::Async(Arc::new(Slow)))
}

ctxpress_core::inventory::submit! {
    ctxpress_core::BackendFactory {
        name: "test_slow",
        summary: "an async test backend",
        build: build_slow,
    }
}

#[test]
fn an_async_backend_runs_on_the_async_path_and_the_stage_is_async() {
    let input = parse(&session(6));
    let c = Compactor::with_async_backend(cfg(300), Arc::new(Slow), true);
    assert!(c.is_async());
    // The sync entry point cannot wait: unchanged, with the error.
    let r = c.compress(&input, "s1", &MemoryBatchArchive::new());
    assert!(!r.compacted);
    assert!(r.error.unwrap().to_string().contains("async"));
    assert_eq!(r.history.to_json_string(), input.to_json_string());
    let arch = MemoryBatchArchive::new();
    let r = block_on(c.compress_async(&input, "s1", &arch));
    assert!(r.compacted && r.error.is_none(), "{:?}", r.notes);
    assert_eq!(r.fallbacks, 0, "{:?}", r.notes);
    assert!(
        arch.batches("s1").unwrap()[0]
            .summary
            .contains("\nSLOW SUMMARY\n")
    );

    // Through the registry: an async stage.
    let built = ctxpress_core::registry::build(
        "compactor",
        &json!({"backend": "test_slow", "chunk_tokens": 300}),
    )
    .unwrap();
    let ctxpress_core::BuiltStrategy::Async(s) = built else {
        panic!("an async backend makes an async stage");
    };
    let mut p = Pipeline::default();
    p.push_async(s);
    let doc = session(6).to_string();
    let mut conv = Conversation::parse(&doc).unwrap();
    let report = block_on(p.run_async(&mut conv, &StageContext::default()));
    assert_eq!(report.stages[0].status, StageStatus::Applied, "{report:?}");
    assert!(conv.messages[1].text().contains("SLOW SUMMARY"));
    let originals = MemoryArchive::new();
    archive(&Conversation::parse(&doc).unwrap(), &conv, &originals).unwrap();
    assert_eq!(expand(&conv, &originals).unwrap().to_json_string(), doc);
}

/// Lets another compaction of the same conversation run between this run's
/// read of the batches and its first `replace`, as a concurrent process
/// would.
struct Racing<'a> {
    inner: &'a MemoryBatchArchive,
    other: Mutex<Option<Box<dyn FnOnce() + Send + 'a>>>,
    replaces: Mutex<usize>,
}

impl BatchArchive for Racing<'_> {
    fn put_batches(&self, b: &[SummaryBatch]) -> Result<(), ArchiveError> {
        self.inner.put_batches(b)
    }
    fn batches(&self, c: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        self.inner.batches(c)
    }
    fn read(&self, l: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        self.inner.read(l)
    }
    fn replace(&self, c: &str, r: &[String], a: SummaryBatch) -> Result<(), ArchiveError> {
        *self.replaces.lock().unwrap() += 1;
        if let Some(other) = self.other.lock().unwrap().take() {
            other();
        }
        self.inner.replace(c, r, a)
    }
}

/// Two runs on one conversation at once (issue #33): the one whose batches
/// were re-summarized under it started again from the stored batches, and
/// neither reports corrupt data.
#[test]
fn a_run_whose_batches_another_run_replaced_starts_again() {
    let c = Compactor::new(CompactionConfig {
        chunk_tokens: 120,
        clip_window: 1,
        buffer: 1,
        summary_tokens: 40,
        ..CompactionConfig::default()
    })
    .unwrap()
    .with_now(T0 * 1000);
    let arch = MemoryBatchArchive::new();
    let r = c.compress(&parse(&session(20)), "s1", &arch);
    assert!(r.compacted, "{:?}", r.notes);
    let mut v: Value = serde_json::from_str(&r.history.to_json_string()).unwrap();
    let msgs = v["messages"].as_array_mut().unwrap();
    for i in 0..6 {
        msgs.push(json!({"role": "user", "content": prose(500 + i)}));
        msgs.push(json!({"role": "assistant", "content": prose(600 + i)}));
    }
    let next = parse(&v);
    let other = c.clone();
    let racing = Racing {
        inner: &arch,
        other: Mutex::new(Some(Box::new({
            let next = next.clone();
            let arch = &arch;
            move || {
                let r = other.compress(&next, "s1", arch);
                assert!(r.compacted && r.error.is_none(), "{:?}", r.error);
            }
        }))),
        replaces: Mutex::new(0),
    };
    let r2 = c.compress(&next, "s1", &racing);
    assert!(r2.error.is_none(), "{:?}", r2.error);
    assert!(r2.compacted, "{:?}", r2.notes);
    assert_eq!(
        *racing.replaces.lock().unwrap(),
        2,
        "one conflict, one retry"
    );
    // As after one run then the other: at most `2 * clip_window + buffer`.
    assert_eq!(arch.batches("s1").unwrap().len(), 3);
}

/// A system message inside the folded range (Codex writes them mid-session,
/// even between a call and its result) stays where it is: the clip stands
/// for the folded messages before it, a short note after it for those
/// after, so the output keeps the input's order, each recall handle gives
/// back exactly its stretch, and `expand` gives the input back.
#[test]
fn a_system_message_inside_the_fold_stays_in_place_between_two_stretches() {
    use ctxpress_core::Archive;
    use ctxpress_core::handle::find_all;
    use std::sync::Arc;
    let mut v = session(6);
    let msgs = v["messages"].as_array_mut().unwrap();
    // Between the failing run's call (c2) and its result.
    let at = msgs
        .iter()
        .position(|m| m["role"] == "tool" && m["tool_call_id"] == "c2")
        .unwrap();
    msgs.insert(
        at,
        json!({"role": "system", "content": "Approved command prefix saved: cargo test"}),
    );
    let doc = v.to_string();
    let input = Conversation::parse(&doc).unwrap();
    let p = stage(json!({"chunk_tokens": 300}));
    let originals = Arc::new(MemoryArchive::new());
    let ctx = StageContext {
        archive: Some(originals.clone() as Arc<dyn Archive>),
        ..StageContext::default()
    };
    let mut conv = input.clone();
    let report = p.run(&mut conv, &ctx);
    assert_eq!(report.stages[0].status, StageStatus::Applied, "{report:?}");
    let texts: Vec<String> = conv
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    let sys = texts
        .iter()
        .position(|t| t.starts_with("Approved command prefix"))
        .unwrap();
    assert!(texts[sys - 1].starts_with("[Context Summary"), "{texts:?}");
    assert!(
        texts[sys + 1].starts_with("[ctxpress#h") && texts[sys + 1].contains("earlier messages"),
        "{texts:?}"
    );
    archive(&input, &conv, originals.as_ref()).unwrap();
    // Clip, system message, note: their recalls are the input in order.
    let mut rebuilt = input.messages[..sys - 1]
        .iter()
        .map(|m| input.message_json(m))
        .collect::<Vec<_>>();
    for m in &conv.messages[sys - 1..=sys + 1] {
        match find_all(&conv.message_json(m)).first() {
            Some(h) => rebuilt.extend(originals.recall(h).unwrap().expect("recalls")),
            None => rebuilt.push(conv.message_json(m)),
        }
    }
    let next = conv.messages[sys + 2].id().clone();
    let upto = input.messages.iter().position(|m| *m.id() == next).unwrap();
    let want: Vec<String> = input.messages[..upto]
        .iter()
        .map(|m| input.message_json(m))
        .collect();
    assert_eq!(rebuilt, want);
    let out = Conversation::parse(&conv.to_json_string()).unwrap();
    assert_eq!(
        expand(&out, originals.as_ref()).unwrap().to_json_string(),
        doc
    );
}
