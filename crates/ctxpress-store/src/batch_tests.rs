//! Tests of the batch archive: the `BatchArchive` contract (memory and SQLite), batch search,
//! atomic writes, schema upgrades, two handles on one file.
use super::*;
use crate::search_tests::check_integrity;
use ctxpress_core::compaction::{BatchArchive, MemoryBatchArchive, SummaryBatch, batch_header};

fn batch(conv: &str, end: &str, words: &str) -> SummaryBatch {
    let start = "2026-11-24T20:00:00.000Z";
    let originals = vec![
        serde_json::json!({"role": "user", "content": format!("original of {end}")}).to_string(),
        serde_json::json!({"role": "assistant", "content": "ok"}).to_string(),
    ];
    SummaryBatch {
        label: ctxpress_core::compaction::batch_label(conv, end),
        conversation: conv.into(),
        depth: 0,
        start: start.into(),
        end: end.into(),
        count: originals.len(),
        summary: format!("{}\n{words}", batch_header(0, start, end, 2)),
        originals,
    }
}

fn labels(a: &dyn BatchArchive, conv: &str) -> Vec<String> {
    a.batches(conv)
        .unwrap()
        .into_iter()
        .map(|b| b.label)
        .collect()
}

const T1: &str = "2026-11-24T20:01:00.000Z";
const T2: &str = "2026-11-24T20:02:00.000Z";
const T3: &str = "2026-11-24T20:03:00.000Z";
const T4: &str = "2026-11-24T20:04:00.000Z";

/// The [`BatchArchive`] contract, for any implementation.
fn contract(a: &dyn BatchArchive) {
    let (b1, b2, b3) = (
        batch("c1", T1, "parsed the lexer"),
        batch("c1", T2, "fixed the parser"),
        batch("c1", T3, "wrote the tests"),
    );
    let other = batch("c2", T1, "another conversation");
    assert!(a.batches("c1").unwrap().is_empty());
    assert_eq!(a.read(&b1.label).unwrap(), None);
    a.put_batches(&[b1.clone(), b2.clone()]).unwrap();
    a.put_batches(std::slice::from_ref(&other)).unwrap();
    a.put_batches(&[]).unwrap();
    a.put_batches(std::slice::from_ref(&b3)).unwrap();

    // Oldest first, per conversation; read by label returns the whole batch.
    assert_eq!(
        a.batches("c1").unwrap(),
        vec![b1.clone(), b2.clone(), b3.clone()]
    );
    assert_eq!(a.batches("c2").unwrap(), vec![other.clone()]);
    assert!(a.batches("nope").unwrap().is_empty());
    assert_eq!(a.read(&b2.label).unwrap(), Some(b2.clone()));
    assert_eq!(a.read(&other.label).unwrap(), Some(other.clone()));

    // Putting a stored label again rewrites it in place.
    let mut b2x = b2.clone();
    b2x.summary.push_str(" again");
    a.put_batches(std::slice::from_ref(&b2x)).unwrap();
    assert_eq!(
        a.batches("c1").unwrap(),
        vec![b1.clone(), b2x.clone(), b3.clone()]
    );

    // A replace naming a batch that is not stored (or of another
    // conversation) fails and changes nothing.
    let mut merged = batch("c1", T2, "merged lexer and parser work");
    merged.label = ctxpress_core::compaction::batch_label("c1", "merged");
    merged.depth = 1;
    for bad in [
        vec![b1.label.clone(), "compaction-batch-c1-missing".into()],
        vec![b1.label.clone(), other.label.clone()],
    ] {
        assert!(a.replace("c1", &bad, merged.clone()).is_err());
        assert_eq!(
            a.batches("c1").unwrap(),
            vec![b1.clone(), b2x.clone(), b3.clone()]
        );
        assert_eq!(a.read(&merged.label).unwrap(), None);
        assert_eq!(a.batches("c2").unwrap(), vec![other.clone()]);
    }

    // Replace: the added batch takes the place of the first one removed.
    a.replace("c1", &[b2x.label.clone(), b1.label.clone()], merged.clone())
        .unwrap();
    assert_eq!(a.batches("c1").unwrap(), vec![merged.clone(), b3.clone()]);
    assert_eq!(a.read(&b1.label).unwrap(), None);
    assert_eq!(a.read(&b2.label).unwrap(), None);
    assert_eq!(a.read(&merged.label).unwrap(), Some(merged.clone()));
    assert_eq!(a.batches("c2").unwrap(), vec![other.clone()]);

    // Later batches come after; a replace with nothing removed appends.
    let b4 = batch("c1", T4, "released");
    a.put_batches(std::slice::from_ref(&b4)).unwrap();
    let mut deeper = batch("c1", T3, "everything so far");
    deeper.label = ctxpress_core::compaction::batch_label("c1", "deeper");
    deeper.depth = 2;
    a.replace(
        "c1",
        &[merged.label.clone(), b3.label.clone()],
        deeper.clone(),
    )
    .unwrap();
    assert_eq!(
        labels(a, "c1"),
        vec![deeper.label.clone(), b4.label.clone()]
    );
    let extra = batch("c1", "2026-11-24T20:05:00.000Z", "extra");
    a.replace("c1", &[], extra.clone()).unwrap();
    assert_eq!(
        labels(a, "c1"),
        vec![deeper.label.clone(), b4.label.clone(), extra.label.clone()]
    );
    assert_eq!(a.batches("c2").unwrap(), vec![other]);
}

#[test]
fn memory_batch_archive_meets_the_contract() {
    contract(&MemoryBatchArchive::new());
}

#[test]
fn sqlite_batch_archive_meets_the_contract() {
    let a = SqliteArchive::open_in_memory().unwrap();
    contract(&a);
    check_integrity(&a);
}

#[test]
fn sqlite_batch_archive_file_meets_the_contract_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let a = SqliteArchive::open(&path).unwrap();
    assert_eq!(a.journal_mode(), "wal");
    contract(&a);
    check_integrity(&a);
    let before = a.batches("c1").unwrap();
    drop(a);
    let a = SqliteArchive::open(&path).unwrap();
    assert_eq!(a.batches("c1").unwrap(), before);
    check_integrity(&a);
}

#[test]
fn batch_summaries_are_searchable_by_label() {
    let a = SqliteArchive::open_in_memory().unwrap();
    let b1 = batch("c1", T1, "the walrus migration finished");
    let b2 = batch("c2", T1, "a walrus elsewhere");
    a.put_batches(&[b1.clone(), b2.clone()]).unwrap();
    let hits = a.search("walrus migration", None, 10).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    let h = &hits[0];
    assert_eq!(h.kind, HitKind::Batch);
    assert_eq!(h.key, b1.label);
    assert_eq!(h.conversation.as_deref(), Some("c1"));
    assert_eq!((h.pos, h.role.as_deref()), (0, None));
    assert!(h.snippet.contains("«walrus»"), "{}", h.snippet);
    // The conversation filter applies to batches too.
    let hits = a.search("walrus", Some("c2"), 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].key, b2.label);
    // A hit's key reads back: the batch's originals (inherent read) and the
    // whole batch (BatchArchive::read).
    assert_eq!(a.read(&b1.label).unwrap(), Some(b1.originals.clone()));
    assert_eq!(BatchArchive::read(&a, &b1.label).unwrap(), Some(b1.clone()));
    // The original messages a batch holds are found as originals under its
    // label, at their position in the batch.
    let hits = a.search("original", Some("c1"), 10).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(
        (
            hits[0].kind,
            hits[0].key.as_str(),
            hits[0].pos,
            hits[0].role.as_deref()
        ),
        (HitKind::Original, b1.label.as_str(), 0, Some("user"))
    );
    // A message also archived as a record (as `ctxpress compact` does) is
    // shown once.
    a.put_for(
        Some("c1"),
        &[ctxpress_core::archive::Record {
            key: "k1".into(),
            originals: vec![b1.originals[0].clone()],
        }],
    )
    .unwrap();
    assert_eq!(a.search("original", Some("c1"), 10).unwrap().len(), 1);
    check_integrity(&a);

    // Rewriting a label replaces its index rows.
    let mut b1x = b1.clone();
    b1x.summary = b1x.summary.replace("walrus", "narwhal");
    a.put_batches(std::slice::from_ref(&b1x)).unwrap();
    assert!(a.search("migration walrus", None, 10).unwrap().is_empty());
    assert_eq!(a.search("narwhal", None, 10).unwrap()[0].key, b1.label);

    // Replace removes the replaced batches' rows and indexes the new one.
    let mut merged = batch("c1", T2, "the merged penguin summary");
    merged.depth = 1;
    a.replace("c1", std::slice::from_ref(&b1.label), merged.clone())
        .unwrap();
    assert!(a.search("narwhal", None, 10).unwrap().is_empty());
    let hits = a.search("penguin", None, 10).unwrap();
    assert_eq!(
        (hits.len(), hits[0].kind, hits[0].key.as_str()),
        (1, HitKind::Batch, merged.label.as_str())
    );
    // A failed replace leaves the index as it was.
    assert!(
        a.replace("c1", &["missing".into()], batch("c1", T3, "ghost"))
            .is_err()
    );
    assert!(a.search("ghost", None, 10).unwrap().is_empty());
    assert_eq!(a.search("penguin", None, 10).unwrap().len(), 1);
    check_integrity(&a);
}

#[test]
fn originals_and_batches_are_searched_together() {
    let a = SqliteArchive::open_in_memory().unwrap();
    a.put_for(
        Some("c1"),
        &[Record {
            key: "k1".into(),
            originals: vec![
                serde_json::json!({"role": "tool", "content": "kiwi crashed"}).to_string(),
            ],
        }],
    )
    .unwrap();
    a.put_batches(&[batch("c1", T1, "kiwi fixed")]).unwrap();
    let mut kinds: Vec<HitKind> = a
        .search("kiwi", Some("c1"), 10)
        .unwrap()
        .iter()
        .map(|h| h.kind)
        .collect();
    kinds.sort_by_key(|k| k.as_str());
    assert_eq!(kinds, vec![HitKind::Batch, HitKind::Original]);
    check_integrity(&a);
}

#[test]
fn failing_put_batches_stores_nothing() {
    let a = SqliteArchive::open_in_memory().unwrap();
    let good = batch("c1", T1, "stored apricot");
    a.put_batches(std::slice::from_ref(&good)).unwrap();
    a.lock()
        .execute_batch(
            "CREATE TEMP TRIGGER fail BEFORE INSERT ON batches \
             WHEN NEW.conversation = 'bad' BEGIN SELECT RAISE(ABORT, 'boom'); END;",
        )
        .unwrap();
    let mut rewritten = good.clone();
    rewritten.summary = rewritten.summary.replace("apricot", "banana");
    let err = a
        .put_batches(&[
            rewritten,
            batch("c1", T2, "cherry"),
            batch("bad", T1, "damson"),
        ])
        .unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
    assert_eq!(a.batches("c1").unwrap(), vec![good.clone()]);
    for word in ["banana", "cherry", "damson"] {
        assert!(a.search(word, None, 10).unwrap().is_empty(), "{word}");
    }
    assert_eq!(a.search("apricot", None, 10).unwrap()[0].key, good.label);
    check_integrity(&a);
}

/// Make the file at `path` look as schema `version` wrote it (1: no search
/// and no batch tables; 2: no batch table; 3: no messages table; 4: no runs
/// tables).
fn downgrade(path: &Path, version: i64) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("DROP TABLE run_batches; DROP TABLE runs;")
        .unwrap();
    if version < 4 {
        conn.execute_batch("DROP TABLE messages;").unwrap();
    }
    if version < 3 {
        conn.execute_batch("DROP TABLE batches;").unwrap();
    }
    if version < 2 {
        conn.execute_batch("DROP TABLE search_fts; DROP TABLE search_docs;")
            .unwrap();
    }
    conn.pragma_update(None, "user_version", version).unwrap();
}

#[test]
fn versions_1_to_4_are_upgraded_and_keep_working() {
    for version in [1, 2, 3, 4] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let a = SqliteArchive::open(&path).unwrap();
            a.put_for(
                Some("c1"),
                &[Record {
                    key: "k1".into(),
                    originals: vec![
                        serde_json::json!({"role": "tool", "content": "the quokka log"})
                            .to_string(),
                    ],
                }],
            )
            .unwrap();
            a.cache_put("ck", "cv").unwrap();
        }
        downgrade(&path, version);
        let a = SqliteArchive::open(&path).unwrap();
        let v: i64 = a
            .lock()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        assert_eq!(SCHEMA_VERSION, 5);
        // What was stored is still there and searchable.
        assert_eq!(a.get("k1").unwrap().unwrap().len(), 1);
        assert_eq!(a.cache_get("ck").unwrap().as_deref(), Some("cv"));
        let hits = a.search("quokka", None, 10).unwrap();
        assert_eq!(hits.len(), 1, "v{version}: {hits:?}");
        assert_eq!(hits[0].kind, HitKind::Original);
        // The batch archive works on the upgraded file.
        contract(&a);
        a.put_batches(&[batch("c9", T1, "upgraded wombat")])
            .unwrap();
        assert_eq!(
            a.search("wombat", None, 10).unwrap()[0].kind,
            HitKind::Batch
        );
        // So does the messages table.
        let p: &dyn ctxpress_core::compaction::Persistence = &a;
        assert_eq!(p.append("c9", &["{}".into()]).unwrap(), [1]);
        // And the runs tables.
        a.begin_run("r", "{}").unwrap();
        a.save_batches("r", "c9").unwrap();
        a.undo_run("r").unwrap();
        assert_eq!(labels(&a, "c9").len(), 1);
        check_integrity(&a);
        drop(a);
        // Opening again changes nothing.
        let a = SqliteArchive::open(&path).unwrap();
        assert_eq!(a.search("quokka", None, 10).unwrap().len(), 1);
        assert_eq!(labels(&a, "c9").len(), 1);
        check_integrity(&a);
    }
}

#[test]
fn two_handles_on_one_file_share_the_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let (a, b) = (
        SqliteArchive::open(&path).unwrap(),
        SqliteArchive::open(&path).unwrap(),
    );
    let times = [T1, T2, T3, T4];
    for (i, t) in times.iter().enumerate() {
        let h = if i % 2 == 0 { &a } else { &b };
        h.put_batches(&[batch("c1", t, "alternating writers")])
            .unwrap();
    }
    let want: Vec<String> = times
        .iter()
        .map(|t| ctxpress_core::compaction::batch_label("c1", t))
        .collect();
    assert_eq!(labels(&a, "c1"), want);
    assert_eq!(labels(&b, "c1"), want);
    assert_eq!(b.search("alternating", Some("c1"), 10).unwrap().len(), 4);
    check_integrity(&a);
}

/// Two handles (as two `compact` processes) read a conversation's batches
/// and then both re-summarize them, at once: one replace wins, the other is
/// told its batches changed under it (`Conflict`, which the compactor
/// answers by starting again), never that the archive is corrupt (issue
/// #33), and the file holds the winner's batches whole.
#[test]
fn two_handles_replacing_the_same_batches_at_once_conflict_not_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    SqliteArchive::open(&path)
        .unwrap()
        .put_batches(&[batch("c1", T1, "one"), batch("c1", T2, "two")])
        .unwrap();
    let read = std::sync::Barrier::new(2);
    let results: Vec<Result<(), ArchiveError>> = std::thread::scope(|s| {
        let handles: Vec<_> = [T3, T4]
            .into_iter()
            .map(|t| {
                let (path, read) = (&path, &read);
                s.spawn(move || {
                    let h = SqliteArchive::open(path).unwrap();
                    let removed: Vec<String> = h
                        .batches("c1")
                        .unwrap()
                        .into_iter()
                        .map(|b| b.label)
                        .collect();
                    read.wait();
                    let mut merged = batch("c1", t, "merged");
                    merged.depth = 1;
                    h.replace("c1", &removed, merged)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| matches!(r, Err(ArchiveError::Conflict(_)))),
        "{results:?}"
    );
    let a = SqliteArchive::open(&path).unwrap();
    let left = a.batches("c1").unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].depth, 1);
    check_integrity(&a);
}

/// A run's batches are undone: each conversation it touched gets back the
/// batches it had (added ones gone, replaced ones back in their order, the
/// index as before); another conversation's batches stay; a finished run
/// keeps what it wrote.
#[test]
fn an_undone_run_gives_back_the_batches_it_changed() {
    let a = SqliteArchive::open_in_memory().unwrap();
    a.put_batches(&[batch("c1", T1, "first aardvark"), batch("c1", T2, "second")])
        .unwrap();
    let before = a.batches("c1").unwrap();
    assert!(a.pending_runs().unwrap().is_empty());
    a.begin_run("run-1", "note one").unwrap();
    a.note_run("run-1", "note two").unwrap();
    a.save_batches("run-1", "c1").unwrap();
    a.put_batches(&[batch("c1", T3, "third")]).unwrap();
    // Saved once: the first saving is what comes back.
    a.save_batches("run-1", "c1").unwrap();
    let first = before[0].label.clone();
    a.replace(
        "c1",
        std::slice::from_ref(&first),
        batch("c1", T1, "resummarized zebra"),
    )
    .unwrap();
    a.put_batches(&[batch("c2", T1, "another conversation")])
        .unwrap();
    assert_eq!(
        a.pending_runs().unwrap(),
        [PendingRun {
            token: "run-1".into(),
            note: "note two".into()
        }]
    );
    a.undo_run("run-1").unwrap();
    assert_eq!(a.batches("c1").unwrap(), before);
    assert_eq!(labels(&a, "c2").len(), 1);
    assert!(a.search("zebra", None, 10).unwrap().is_empty());
    assert_eq!(a.search("aardvark", None, 10).unwrap().len(), 1);
    assert!(a.pending_runs().unwrap().is_empty());
    check_integrity(&a);
    // Finished: what it wrote stays.
    a.begin_run("run-2", "").unwrap();
    a.save_batches("run-2", "c1").unwrap();
    a.put_batches(&[batch("c1", T3, "third")]).unwrap();
    a.finish_run("run-2").unwrap();
    assert!(a.pending_runs().unwrap().is_empty());
    assert_eq!(a.batches("c1").unwrap().len(), 3);
    assert!(a.note_run("run-2", "gone").is_err());
    check_integrity(&a);
}
