//! `ctxpress compact`: compact now into a SQLite archive, then `expand` and
//! `search` over it.
#![allow(missing_docs)]

use crate::common;

use common::{bin, data};
use ctxpress::Conversation;
use ctxpress::core::{Message, MessageId};
use predicates::prelude::*;
use std::path::Path;

/// Tokens of a conversation (the heuristic counter).
fn tokens(c: &Conversation) -> usize {
    let h = ctxpress::core::Heuristic;
    c.messages
        .iter()
        .map(|m| ctxpress::core::tokens::count_message(&h, m))
        .sum()
}

/// The message after the leading system prompt (and an agent's protected
/// task right after it): the clip-archive message when the conversation was
/// compacted.
fn after_system(c: &Conversation) -> String {
    let i = ctxpress::compactor::clip_position(c, 5);
    c.messages
        .get(i)
        .map(|m| m.text().into_owned())
        .unwrap_or_default()
}

#[test]
fn compacts_a_batch_that_expands_back_and_is_searchable() {
    let dir = tempfile::tempdir().unwrap();
    let (db, out, back) = (
        dir.path().join("a.db"),
        dir.path().join("out.jsonl"),
        dir.path().join("back.jsonl"),
    );
    let input = data("swe_agent.jsonl");
    bin()
        .arg("compact")
        .arg(&input)
        .arg("--archive")
        .arg(&db)
        .arg("-o")
        .arg(&out)
        .arg("--stats")
        .assert()
        .success()
        .stderr(
            predicate::str::contains("sweagent-dcb4fae88692")
                .and(predicate::str::contains("depth"))
                .and(predicate::str::contains("total: 13 conversations")),
        );

    let (a, b) = (
        std::fs::read_to_string(&input).unwrap(),
        std::fs::read_to_string(&out).unwrap(),
    );
    let (mut before, mut after, mut compacted) = (0, 0, Vec::new());
    assert_eq!(a.lines().count(), b.lines().count());
    for (x, y) in a.lines().zip(b.lines()) {
        let (x, y) = (
            Conversation::parse(x).unwrap(),
            Conversation::parse(y).unwrap(),
        );
        assert_eq!(x.id(), y.id());
        // No new pairing violation.
        assert!(!ctxpress::core::validate::introduces_violations(
            &ctxpress::validate(&x),
            &ctxpress::validate(&y)
        ));
        before += tokens(&x);
        after += tokens(&y);
        if x.messages.len() != y.messages.len() || after_system(&x) != after_system(&y) {
            assert!(
                after_system(&y).starts_with("[Context Summary"),
                "{:?}: {}",
                y.id(),
                after_system(&y)
            );
            assert!(tokens(&y) < tokens(&x), "{:?}", y.id());
            compacted.push(y.id().unwrap());
        }
    }
    assert!(!compacted.is_empty(), "some conversation was compacted");
    assert!(after < before, "{after} < {before}");

    // expand restores the input byte for byte.
    bin()
        .arg("expand")
        .arg(&out)
        .arg("--archive")
        .arg(&db)
        .arg("-o")
        .arg(&back)
        .assert()
        .success();
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(&input).unwrap()
    );

    // Each clip carries a recall handle; `recall` gives the folded
    // originals: input messages, in input order.
    for (x, y) in a.lines().zip(b.lines()) {
        let y = Conversation::parse(y).unwrap();
        if !compacted.contains(&y.id().unwrap()) {
            continue;
        }
        let clip = after_system(&y);
        assert!(clip.starts_with("[Context Summary#h"), "{clip:.120}");
        let h = ctxpress::core::handle::find_all(&clip)[0].to_string();
        let o = bin()
            .args(["recall", &h, "--archive"])
            .arg(&db)
            .assert()
            .success();
        let got: Vec<serde_json::Value> = serde_json::from_slice(&o.get_output().stdout).unwrap();
        let input: serde_json::Value = serde_json::from_str(x).unwrap();
        let msgs = input["messages"].as_array().unwrap();
        assert!(!got.is_empty());
        let mut from = 0;
        for m in &got {
            let k = msgs[from..]
                .iter()
                .position(|x| x == m)
                .expect("an input message, in order");
            from += k + 1;
        }
    }

    // A word of a batch summary is found, with kind `batch`.
    let archive = ctxpress::store::SqliteArchive::open(&db).unwrap();
    let conv = &compacted[0];
    let batches = ctxpress::core::compaction::BatchArchive::batches(&archive, conv).unwrap();
    assert!(!batches.is_empty());
    let word = batches[0]
        .body()
        .split(|c: char| !c.is_ascii_alphabetic())
        .find(|w| w.len() >= 7)
        .unwrap()
        .to_string();
    drop(archive);
    let o = bin()
        .args(["search", &word, "--json", "--limit", "100", "--archive"])
        .arg(&db)
        .args(["--conversation", conv])
        .assert()
        .success();
    let text = String::from_utf8(o.get_output().stdout.clone()).unwrap();
    let hits: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        hits.iter().any(|h| h["kind"] == "batch"
            && h["key"]
                .as_str()
                .unwrap()
                .starts_with(&format!("compaction-batch-{conv}-"))),
        "{word}: {text}"
    );
}

#[test]
fn a_second_compaction_after_appending_expands_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    // One conversation with several user turns, as a single document.
    let line = std::fs::read_to_string(data("taubench_airline.jsonl"))
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    std::fs::write(p("in.json"), &line).unwrap();
    let id = Conversation::parse(&line).unwrap().id().unwrap();

    let compact = |input: &Path, out: &Path| {
        bin()
            .arg("compact")
            .arg(input)
            .arg("--archive")
            .arg(p("a.db"))
            .arg("-o")
            .arg(out)
            .assert()
            .success();
    };
    let expand = |input: &Path, out: &Path| {
        bin()
            .arg("expand")
            .arg(input)
            .arg("--archive")
            .arg(p("a.db"))
            .arg("-o")
            .arg(out)
            .assert()
            .success();
        std::fs::read_to_string(out).unwrap()
    };

    compact(&p("in.json"), &p("out1.json"));
    let out1 = Conversation::parse(&std::fs::read_to_string(p("out1.json")).unwrap()).unwrap();
    assert!(after_system(&out1).starts_with("[Context Summary"));
    assert_eq!(expand(&p("out1.json"), &p("back1.json")), line);

    // The agent goes on: a pasted log (long enough to be worth folding
    // next time) and a few short turns, appended to the compacted history.
    let log: Vec<String> = (0..60)
        .map(|i| {
            format!(
                "line {i}: warning in module_{i}.py: retry {} of the booking sync",
                i * 7
            )
        })
        .collect();
    let turns = [
        ("user", format!("Here is the sync log:\n{}", log.join("\n"))),
        (
            "assistant",
            "Noted, the sync retried but finished.".to_string(),
        ),
        (
            "user",
            "Please also add a checked bag to the reservation.".to_string(),
        ),
        (
            "assistant",
            "Done: one checked bag added, no extra charge.".to_string(),
        ),
        ("user", "Thanks.".to_string()),
        ("assistant", "You're welcome.".to_string()),
    ];
    let append = |c: &mut Conversation, n: usize| {
        for (i, (role, text)) in turns.iter().enumerate() {
            c.messages.push(Message::text_message(
                MessageId::new(format!("more{n}-{i}")),
                role,
                text,
            ));
        }
    };
    let mut next = out1.clone();
    append(&mut next, 0);
    std::fs::write(p("in2.json"), next.to_json_string()).unwrap();
    compact(&p("in2.json"), &p("out2.json"));
    let out2 = Conversation::parse(&std::fs::read_to_string(p("out2.json")).unwrap()).unwrap();
    assert!(after_system(&out2).starts_with("[Context Summary"));
    assert_eq!(
        out2.messages
            .iter()
            .filter(|m| m.text().starts_with("[Context Summary"))
            .count(),
        1,
        "one clip-archive message"
    );

    // Expanding undoes both rounds: the original input, then what was appended.
    let mut want = Conversation::parse(&line).unwrap();
    append(&mut want, 0);
    let got = Conversation::parse(&expand(&p("out2.json"), &p("back2.json"))).unwrap();
    let texts = |c: &Conversation| -> Vec<String> {
        c.messages.iter().map(|m| c.message_json(m)).collect()
    };
    assert_eq!(texts(&got), texts(&want));
    assert_eq!(got.to_json_string(), want.to_json_string());
    // The batches of both runs are in the archive, under the document's id.
    let archive = ctxpress::store::SqliteArchive::open(p("a.db")).unwrap();
    let batches = ctxpress::core::compaction::BatchArchive::batches(&archive, &id).unwrap();
    assert!(batches.len() >= 2, "{}", batches.len());
    drop(archive);

    // The uncompacted input again: its batches would follow the stored ones.
    bin()
        .arg("compact")
        .arg(p("in.json"))
        .arg("--archive")
        .arg(p("a.db"))
        .arg("-o")
        .arg(p("out3.json"))
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "already holds 2 batches of conversation `taubench-airline-gpt4o-t2-r0` but this input has no [Context Summary] message",
        ));
}

/// With a real model (the local server `.ci/run` starts:
/// `scripts/llm-server.sh start PORT`, then `CTXPRESS_LLM_URL=$(scripts/llm-server.sh url)`).
#[test]
#[ignore = "needs the local model server (CTXPRESS_LLM_URL)"]
fn compacts_with_a_real_model() {
    let url = std::env::var("CTXPRESS_LLM_URL").expect("CTXPRESS_LLM_URL");
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let line = std::fs::read_to_string(data("taubench_airline.jsonl"))
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    std::fs::write(p("in.json"), &line).unwrap();
    bin()
        .arg("compact")
        .arg(p("in.json"))
        .arg("--archive")
        .arg(p("a.db"))
        .args(["--llm-url", &url, "--llm-model", "smollm2", "--stats", "-o"])
        .arg(p("out.json"))
        .assert()
        .success()
        .stderr(predicate::str::contains("1 compacted"));
    let out = Conversation::parse(&std::fs::read_to_string(p("out.json")).unwrap()).unwrap();
    let input = Conversation::parse(&line).unwrap();
    assert!(after_system(&out).starts_with("[Context Summary"));
    assert!(tokens(&out) < tokens(&input));
    bin()
        .arg("expand")
        .arg(p("out.json"))
        .arg("--archive")
        .arg(p("a.db"))
        .arg("-o")
        .arg(p("back.json"))
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(p("back.json")).unwrap(), line);
}

#[test]
fn a_bad_archive_path_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    for db in [
        dir.path().join("missing/a.db"),
        // A directory cannot be opened as a database; a path under a file
        // cannot be created.
        dir.path().to_path_buf(),
        file.join("a.db"),
    ] {
        bin()
            .arg("compact")
            .arg(data("swe_agent.jsonl"))
            .arg("--archive")
            .arg(&db)
            .arg("-o")
            .arg(&out)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("cannot open archive"));
        assert!(!out.exists(), "{}: no output", db.display());
    }
}

#[test]
fn conversation_flag_is_for_single_documents() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    bin()
        .arg("compact")
        .arg(data("swe_agent.jsonl"))
        .arg("--archive")
        .arg(&db)
        .args(["--conversation", "x"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "--conversation is for a single document",
        ));

    // A document takes the name given (its batches are labelled with it).
    let line = std::fs::read_to_string(data("taubench_airline.jsonl"))
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    let input = dir.path().join("doc.json");
    std::fs::write(&input, &line).unwrap();
    bin()
        .arg("compact")
        .arg(&input)
        .arg("--archive")
        .arg(&db)
        .args(["--conversation", "session-7", "-o"])
        .arg(dir.path().join("o.json"))
        .assert()
        .success();
    let archive = ctxpress::store::SqliteArchive::open(&db).unwrap();
    let b = ctxpress::core::compaction::BatchArchive::batches(&archive, "session-7").unwrap();
    assert!(!b.is_empty());
    assert!(b[0].label.starts_with("compaction-batch-session-7-"));
}

/// A JSONL batch of `n` timed agent sessions of about 1.1 MB each: twenty
/// short exchanges the compactor folds, then a long recent tail it keeps.
fn long_sessions(path: &Path, n: usize) -> usize {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut size = 0;
    for i in 0..n {
        let mut msgs =
            vec![serde_json::json!({"role": "system", "content": "You are a coding agent."})];
        for j in 0..20 {
            let t = format!(
                "conversation {i} turn {j}: we looked at how the queue hands work from the \
                 primary loop to the secondary loop."
            );
            msgs.push(serde_json::json!({"role": "user", "content": t}));
            msgs.push(serde_json::json!({"role": "assistant", "content": t}));
        }
        for k in 0..6 {
            let role = if k % 2 == 0 { "user" } else { "assistant" };
            let long = format!("conversation {i} recent line {k} of the log that stays verbatim\n")
                .repeat(3000);
            msgs.push(serde_json::json!({"role": role, "content": long}));
        }
        for (t, m) in msgs.iter_mut().enumerate() {
            m["timestamp"] = format!("2025-01-01T10:{:02}:00Z", t).into();
        }
        let line = serde_json::json!({"id": format!("c{i}"), "messages": msgs}).to_string();
        size += line.len() + 1;
        writeln!(f, "{line}").unwrap();
    }
    f.flush().unwrap();
    size
}

/// Peak RSS in bytes of `ctxpress compact INPUT --archive DB -o OUT`: its
/// `VmHWM` (which only grows), read from /proc every few milliseconds
/// until it exits.
#[cfg(target_os = "linux")]
fn compact_peak(dir: &Path, input: &Path) -> u64 {
    let db = dir.join("peak.db");
    let _ = std::fs::remove_file(&db);
    let mut child = std::process::Command::new(common::BIN)
        .arg("compact")
        .arg(input)
        .arg("--archive")
        .arg(&db)
        .arg("-o")
        .arg(dir.join("peak.out.jsonl"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Some(kb) = std::fs::read_to_string(&status).ok().and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            l.trim_start_matches("VmHWM:")
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        }) {
            peak = peak.max(kb << 10);
        }
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "{s:?}");
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    peak
}

/// `compact` streams a JSONL batch as `compress` does: on a 16 MB batch its
/// peak RSS stays under a quarter of the batch plus 24 MiB over its peak on
/// one conversation of it (the bound of `compress`'s streaming tests).
/// Before, it read the whole input and held every archive write until the
/// end: about five times the batch.
#[cfg(target_os = "linux")]
#[test]
fn compact_streams_a_batch_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let big = d.join("big.jsonl");
    let size = long_sessions(&big, 15) as u64;
    let one = d.join("one.jsonl");
    long_sessions(&one, 1);
    let base = compact_peak(d, &one);
    let bound = base + size / 4 + (24 << 20);
    let peak = compact_peak(d, &big);
    assert!(
        peak < bound,
        "peak RSS {} MB on a {} MB batch (one conversation: {} MB; bound {} MB)",
        peak >> 20,
        size >> 20,
        base >> 20,
        bound >> 20
    );
    // What it wrote is a whole compaction of every conversation.
    let out = std::fs::read_to_string(d.join("peak.out.jsonl")).unwrap();
    assert_eq!(out.lines().count(), 15);
    assert!(out.len() < size as usize);
}

/// Two `compact` processes on one archive and one batch at once, each
/// continuing conversations whose batches they both re-summarize (issue
/// #33): both succeed (the one whose batches the other replaced first
/// starts that conversation again), neither reports "archive data is
/// corrupt", and each output expands back to the input.
#[test]
fn two_concurrent_compacts_on_one_archive_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = d.join("cfg.toml");
    std::fs::write(
        &cfg,
        "chunk_tokens = 300\nclip_window = 1\nbuffer = 0\nprotected_tail = 2\n",
    )
    .unwrap();
    let input = data("taubench_airline.jsonl");
    let base = d.join("base.db");
    let first = d.join("first.jsonl");
    bin()
        .args(["compact", "--config"])
        .arg(&cfg)
        .arg("--archive")
        .arg(&base)
        .arg("-o")
        .arg(&first)
        .arg(&input)
        .assert()
        .success();
    // Each compacted conversation, continued with its user and assistant
    // prose again: compacting it re-summarizes the stored batches.
    let originals = std::fs::read_to_string(&input).unwrap();
    let mut more = String::new();
    for (c, o) in std::fs::read_to_string(&first)
        .unwrap()
        .lines()
        .zip(originals.lines())
    {
        let mut c: serde_json::Value = serde_json::from_str(c).unwrap();
        let o: serde_json::Value = serde_json::from_str(o).unwrap();
        let prose: Vec<serde_json::Value> = o["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| {
                (m["role"] == "user" || m["role"] == "assistant")
                    && m["content"].is_string()
                    && m.get("tool_calls").is_none()
            })
            .cloned()
            .collect();
        let msgs = c["messages"].as_array_mut().unwrap();
        msgs.extend(prose.iter().cloned());
        msgs.extend(prose);
        more.push_str(&c.to_string());
        more.push('\n');
    }
    let next = d.join("next.jsonl");
    std::fs::write(&next, &more).unwrap();
    for round in 0..3 {
        let db = d.join(format!("r{round}.db"));
        std::fs::copy(&base, &db).unwrap();
        let spawn = |out: &Path| {
            std::process::Command::new(common::BIN)
                .args(["compact", "--config"])
                .arg(&cfg)
                .arg("--archive")
                .arg(&db)
                .arg("-o")
                .arg(out)
                .arg(&next)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let outs = [d.join("o1.jsonl"), d.join("o2.jsonl")];
        let children = [spawn(&outs[0]), spawn(&outs[1])];
        let expand = |f: &Path| {
            let back = bin()
                .args(["expand", "--archive"])
                .arg(&db)
                .arg(f)
                .output()
                .unwrap();
            assert!(
                back.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&back.stderr)
            );
            back.stdout
        };
        for child in children {
            let o = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "round {round}: {err}");
            assert!(!err.contains("corrupt"), "round {round}: {err}");
        }
        // Both outputs expand to what the input expands to (its own
        // compacted part included): the originals.
        let want = expand(&next);
        assert!(want.len() > more.len());
        for out in &outs {
            assert!(expand(out) == want, "round {round}: {}", out.display());
        }
    }
}
