//! The full archive flow on real conversations (SWE-agent trajectories, MIT):
//! compress by removing, summarizing and rewriting messages, archive through an
//! SQLite file, expand back byte for byte, over several rounds, with messages
//! appended afterwards and with concurrent writers.

use ctxpress_core::archive::{archive, chain_keys, expand, records};
use ctxpress_core::validate::introduces_violations;
use ctxpress_core::{Archive, Conversation, Message, MessageId, Role, validate};
use ctxpress_store::SqliteArchive;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

fn corpus() -> Option<Vec<String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/swe_agent_trajs.jsonl");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect(),
        ),
        Err(e) => {
            eprintln!("skipping: cannot read {}: {e}", path.display());
            None
        }
    }
}

/// Round 1: replace the first tool exchange by a summary message, drop every
/// other later exchange whole (call and results), shorten long user messages.
fn compress_round1(input: &Conversation) -> Conversation {
    let mut out = input.clone();
    let exchanges = out.exchanges();
    let mut drop: HashSet<usize> = HashSet::new();
    for (n, ex) in exchanges.iter().enumerate().skip(1) {
        // Keep the last exchange so the conversation keeps its tail.
        if n % 2 == 1 && n + 1 < exchanges.len() {
            drop.insert(ex.call);
            drop.extend(&ex.results);
        }
    }
    for m in &mut out.messages {
        if m.role() == Role::User && m.text().chars().count() > 2000 {
            let short: String = m.text().chars().take(200).collect();
            m.set_text(format!("{short} [trimmed]"));
        }
    }
    let summary = exchanges.first().map(|ex| {
        let sid = out.fresh_id("sum");
        let mut ids = vec![out.messages[ex.call].id().clone()];
        ids.extend(ex.results.iter().map(|&i| out.messages[i].id().clone()));
        out.ann_mut(&sid).replaces = ids;
        let first = ex.call;
        drop.insert(first);
        drop.extend(&ex.results);
        (
            first,
            Message::text_message(sid, "user", "[summary: the agent looked around]"),
        )
    });
    let mut kept = Vec::with_capacity(out.messages.len());
    for (i, m) in out.messages.iter().enumerate() {
        if let Some((at, s)) = &summary
            && *at == i
        {
            kept.push(s.clone());
        }
        if !drop.contains(&i) {
            kept.push(m.clone());
        }
    }
    out.messages = kept;
    out
}

/// Round 2: shorten every tool result, drop the last-but-one remaining exchange.
fn compress_round2(input: &Conversation) -> Conversation {
    let mut out = input.clone();
    for m in &mut out.messages {
        let results: Vec<(String, usize)> = m
            .tool_results()
            .iter()
            .map(|r| (r.call_id.to_string(), r.text.chars().count()))
            .collect();
        for (id, len) in results {
            if len > 100 {
                assert!(m.set_tool_result_text(&id, "[output elided]"));
            }
        }
    }
    let ex = out.exchanges();
    if ex.len() >= 2 {
        let e = &ex[ex.len() - 2];
        let drop: HashSet<usize> = std::iter::once(e.call).chain(e.results.clone()).collect();
        let mut i = 0;
        out.messages.retain(|_| {
            i += 1;
            !drop.contains(&(i - 1))
        });
    }
    out
}

fn reparse(c: &Conversation) -> Conversation {
    Conversation::parse(&c.to_json_string()).unwrap()
}

#[test]
fn two_rounds_through_a_file_expand_exactly() {
    let Some(lines) = corpus() else { return };
    assert!(lines.len() >= 5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("archive.db");
    let mut seconds = Vec::new();
    let mut total_texts = 0;
    for line in &lines {
        let input = Conversation::parse(line).unwrap();
        assert_eq!(&input.to_json_string(), line);
        let out1 = compress_round1(&input);
        // No new pairing violation (some inputs end with an unanswered call).
        let before = validate(&input);
        assert!(!introduces_violations(&before, &validate(&out1)));
        assert!(out1.messages.len() < input.messages.len());
        let store = SqliteArchive::open(&path).unwrap();
        let recs = records(&input, &out1);
        assert!(recs.len() >= 2, "a doc record and per-position records");
        total_texts += recs.iter().map(|r| r.originals.len()).sum::<usize>();
        store.put(&recs).unwrap();
        // Expansion from the serialized output, as a caller would hold it.
        let r1 = reparse(&out1);
        assert_eq!(&expand(&r1, &store).unwrap().to_json_string(), line);
        let out2 = compress_round2(&r1);
        assert!(!introduces_violations(&before, &validate(&out2)));
        assert_ne!(out2.to_json_string(), r1.to_json_string());
        let recs = records(&r1, &out2);
        total_texts += recs.iter().map(|r| r.originals.len()).sum::<usize>();
        store.put(&recs).unwrap();
        seconds.push((line.clone(), out2.to_json_string()));
    }
    // A fresh process: reopen and undo both rounds.
    let store = SqliteArchive::open(&path).unwrap();
    for (line, out2) in &seconds {
        let c = Conversation::parse(out2).unwrap();
        assert_eq!(&expand(&c, &store).unwrap().to_json_string(), line);
    }
    // Texts repeated across records, rounds and conversations are stored once.
    let s = store.stats().unwrap();
    eprintln!("{total_texts} texts archived, {s:?}");
    assert!(s.blobs > 0 && (s.blobs as usize) * 2 < total_texts, "{s:?}");
}

fn extra() -> [Message; 2] {
    [
        Message::text_message(MessageId::new("x1"), "user", "and one more thing ✓"),
        Message::text_message(MessageId::new("x2"), "assistant", "sure"),
    ]
}

fn appended(c: &Conversation) -> Conversation {
    let mut later = reparse(c);
    later.messages.extend(extra());
    later
}

#[test]
fn appended_messages_survive_expansion_after_one_round() {
    let Some(lines) = corpus() else { return };
    let store = SqliteArchive::open_in_memory().unwrap();
    for line in &lines {
        let input = Conversation::parse(line).unwrap();
        let out1 = compress_round1(&input);
        archive(&input, &out1, &store).unwrap();
        let mut expected = input.clone();
        expected.messages.extend(extra());
        let back = expand(&appended(&out1), &store).unwrap();
        assert_eq!(back.messages.len(), input.messages.len() + 2);
        assert_eq!(back.to_json_string(), expected.to_json_string());
    }
}

/// Restore the longest prefix of `conv` that is a whole archived output (its
/// `doc:` record), keep what follows, and repeat: a sketch of how multi-round
/// expansion of an extended conversation can stay exact.
fn expand_by_doc_prefix(conv: &Conversation, store: &dyn Archive) -> Conversation {
    let mut cur = conv.clone();
    for _ in 0..64 {
        let mut found = None;
        for len in (1..=cur.messages.len()).rev() {
            let mut prefix = cur.clone();
            prefix.messages.truncate(len);
            let keys = chain_keys(&prefix);
            let end = keys.last().unwrap();
            if let Some(orig) = store.get(&format!("doc:{end}")).unwrap() {
                found = Some((len, orig));
                break;
            }
        }
        let Some((len, mut texts)) = found else {
            return cur;
        };
        texts.extend(cur.messages[len..].iter().map(|m| cur.message_json(m)));
        let env = &cur.envelope;
        let doc = format!("{}{}{}", env.prefix, texts.join(&env.sep), env.suffix);
        cur = Conversation::parse(&doc).unwrap();
    }
    panic!("expansion did not converge");
}

fn two_rounds_then_append(store: &dyn Archive, line: &str) -> (Conversation, Conversation) {
    let input = Conversation::parse(line).unwrap();
    let out1 = compress_round1(&input);
    archive(&input, &out1, store).unwrap();
    let r1 = reparse(&out1);
    let out2 = compress_round2(&r1);
    archive(&r1, &out2, store).unwrap();
    let mut expected = input;
    expected.messages.extend(extra());
    (appended(&out2), expected)
}

#[test]
fn appended_messages_after_two_rounds_expand_by_doc_prefix() {
    let Some(lines) = corpus() else { return };
    let store = SqliteArchive::open_in_memory().unwrap();
    for line in &lines {
        let (later, expected) = two_rounds_then_append(&store, line);
        let back = expand_by_doc_prefix(&later, &store);
        assert_eq!(back.to_json_string(), expected.to_json_string());
    }
}

/// `ctxpress_core::expand` mixes rounds in one pass: round-1 keys of the
/// unchanged prefix match the round-2 output too, get expanded together with
/// the round-2 records, and the round-1 keys further on can no longer match.
#[test]

fn appended_messages_after_two_rounds_expand_with_core() {
    let Some(lines) = corpus() else { return };
    let store = SqliteArchive::open_in_memory().unwrap();
    for line in &lines {
        let (later, expected) = two_rounds_then_append(&store, line);
        let back = expand(&later, &store).unwrap();
        assert_eq!(back.messages.len(), expected.messages.len());
        assert_eq!(back.to_json_string(), expected.to_json_string());
    }
}

#[test]
fn concurrent_writers_on_one_file() {
    let Some(lines) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("shared.db"));
    drop(SqliteArchive::open(path.as_ref()).unwrap());
    let half = lines.len() / 2;
    let parts = [lines[..half].to_vec(), lines[half..].to_vec()];
    let handles: Vec<_> = parts
        .into_iter()
        .map(|part| {
            let path = path.clone();
            std::thread::spawn(move || {
                // Each thread has its own connection to the same file.
                let store = SqliteArchive::open(path.as_ref()).unwrap();
                part.iter()
                    .map(|line| {
                        let input = Conversation::parse(line).unwrap();
                        let out = compress_round1(&input);
                        archive(&input, &out, &store).unwrap();
                        (line.clone(), out.to_json_string())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<(String, String)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(results.len(), lines.len());
    let store = SqliteArchive::open(path.as_ref()).unwrap();
    for (line, out) in &results {
        let c = Conversation::parse(out).unwrap();
        assert_eq!(&expand(&c, &store).unwrap().to_json_string(), line);
    }
}

#[test]
fn reader_never_sees_half_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rw.db");
    drop(SqliteArchive::open(&path).unwrap());
    const N: usize = 150;
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            let store = SqliteArchive::open(&path).unwrap();
            for i in 0..N {
                let recs: Vec<ctxpress_core::Record> = ["a", "b", "c"]
                    .iter()
                    .map(|p| ctxpress_core::Record {
                        key: format!("{p}{i}"),
                        originals: vec![format!("text {p} {i}"), "common".into()],
                    })
                    .collect();
                store.put(&recs).unwrap();
            }
        })
    };
    let reader = std::thread::spawn(move || {
        let store = SqliteArchive::open(&path).unwrap();
        let mut seen_complete = 0;
        let start = std::time::Instant::now();
        while seen_complete < N && start.elapsed().as_secs() < 30 {
            seen_complete = 0;
            for i in 0..N {
                // The last record of the batch first: once it is visible, the
                // earlier ones of the same transaction must be too.
                let c = store.get(&format!("c{i}")).unwrap();
                let a = store.get(&format!("a{i}")).unwrap();
                if let Some(c) = c {
                    assert_eq!(c, vec![format!("text c {i}"), "common".to_string()]);
                    assert!(a.is_some(), "batch {i} is half visible");
                    seen_complete += 1;
                }
            }
        }
        seen_complete
    });
    writer.join().unwrap();
    assert_eq!(reader.join().unwrap(), N);
}
