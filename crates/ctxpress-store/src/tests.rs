//! Tests of the originals archive: round trips, content addressing, atomic batches, WAL, schema
//! checks, corruption and collisions, pruning, threads.
use super::*;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

fn rec(key: &str, originals: &[&str]) -> Record {
    Record {
        key: key.into(),
        originals: originals.iter().map(|s| s.to_string()).collect(),
    }
}

fn raw(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

#[test]
fn put_get_round_trip() {
    let a = SqliteArchive::open_in_memory().unwrap();
    assert_eq!(a.journal_mode(), "memory");
    assert!(a.path().is_none());
    a.put(&[
        rec("k1", &[r#"{"role":"user","content":"é ✓ 🦀"}"#, "b", "a"]),
        rec("k2", &[]),
        rec("doc:k3", &["x"]),
    ])
    .unwrap();
    assert_eq!(
        a.get("k1").unwrap().unwrap(),
        vec![r#"{"role":"user","content":"é ✓ 🦀"}"#, "b", "a"]
    );
    // An empty record is distinct from a missing one.
    assert_eq!(a.get("k2").unwrap(), Some(vec![]));
    assert_eq!(a.get("doc:k3").unwrap(), Some(vec!["x".to_string()]));
    assert_eq!(a.get("nope").unwrap(), None);
    // Overwriting a key replaces its list (a shorter one too).
    a.put(&[rec("k1", &["z"])]).unwrap();
    assert_eq!(a.get("k1").unwrap(), Some(vec!["z".to_string()]));
    // The last record of a batch wins, as in MemoryArchive.
    a.put(&[rec("k4", &["1"]), rec("k4", &["2", "3"])]).unwrap();
    assert_eq!(a.get("k4").unwrap(), Some(vec!["2".into(), "3".into()]));
    a.put(&[]).unwrap();
    assert_eq!(a.stats().unwrap().records, 4);
}

#[test]
fn identical_texts_are_stored_once() {
    let a = SqliteArchive::open_in_memory().unwrap();
    let big = "x".repeat(10_000);
    a.put(&[rec("k1", &[&big, "a", &big]), rec("k2", &["a", &big])])
        .unwrap();
    a.put(&[rec("k3", &[&big])]).unwrap();
    let s = a.stats().unwrap();
    assert_eq!(s.records, 3);
    assert_eq!(s.blobs, 2);
    assert_eq!(s.blob_bytes, 10_001);
    assert_eq!(a.get("k1").unwrap().unwrap(), vec![&big, "a", &big]);
    // Links: 3 + 2 + 1 rows, all pointing at the two blobs.
    let n: i64 = a
        .lock()
        .query_row("SELECT count(*) FROM record_blobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 6);
}

#[test]
fn cache_get_put_overwrite() {
    let a = SqliteArchive::open_in_memory().unwrap();
    assert_eq!(a.cache_get("c").unwrap(), None);
    a.cache_put("c", "v1").unwrap();
    assert_eq!(a.cache_get("c").unwrap().as_deref(), Some("v1"));
    a.cache_put("c", "v2").unwrap();
    assert_eq!(a.cache_get("c").unwrap().as_deref(), Some("v2"));
    assert_eq!(a.stats().unwrap().cache_entries, 1);
    // The cache and records are separate namespaces.
    assert_eq!(a.get("c").unwrap(), None);
}

#[test]
fn failing_batch_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let a = SqliteArchive::open(&path).unwrap();
    a.put(&[rec("before", &["kept"])]).unwrap();
    // Make the third record of the next batch fail inside the transaction,
    // after two records and their blobs were already written.
    raw(&path)
        .execute_batch(
            "CREATE TRIGGER poison BEFORE INSERT ON records WHEN NEW.key = 'poison' \
             BEGIN SELECT RAISE(ABORT, 'forced failure'); END;",
        )
        .unwrap();
    let err = a
        .put(&[
            rec("k1", &["new text 1"]),
            rec("before", &["overwritten"]),
            rec("poison", &["new text 2"]),
        ])
        .unwrap_err();
    assert!(
        matches!(&err, ArchiveError::Backend(m) if m.contains("forced failure")),
        "{err}"
    );
    assert_eq!(a.get("k1").unwrap(), None);
    assert_eq!(a.get("before").unwrap(), Some(vec!["kept".to_string()]));
    let s = a.stats().unwrap();
    assert_eq!((s.records, s.blobs), (1, 1));
    // The connection is still usable afterwards.
    a.put(&[rec("k1", &["ok"])]).unwrap();
    assert_eq!(a.get("k1").unwrap(), Some(vec!["ok".to_string()]));
}

#[test]
fn reopening_keeps_data_and_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested.db");
    {
        let a = SqliteArchive::open(&path).unwrap();
        assert_eq!(a.journal_mode(), "wal");
        assert_eq!(a.path(), Some(path.as_path()));
        a.put(&[rec("k", &["a", "b"])]).unwrap();
        a.cache_put("c", "v").unwrap();
    }
    let a = SqliteArchive::open(&path).unwrap();
    assert_eq!(a.get("k").unwrap(), Some(vec!["a".into(), "b".into()]));
    assert_eq!(a.cache_get("c").unwrap().as_deref(), Some("v"));
    let c = raw(&path);
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let sync: i64 = a
        .lock()
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sync, 1, "NORMAL");
}

#[test]
fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    drop(SqliteArchive::open(&path).unwrap());
    raw(&path).pragma_update(None, "user_version", 7).unwrap();
    let e = SqliteArchive::open(&path).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::NewerSchema {
                found: 7,
                supported: SCHEMA_VERSION,
                ..
            }
        ),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("schema version 7") && msg.contains("newer"),
        "{msg}"
    );
    raw(&path).pragma_update(None, "user_version", -1).unwrap();
    let e = SqliteArchive::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::NotAnArchive { .. }), "{e}");
}

#[test]
fn foreign_database_and_non_database_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    raw(&path)
        .execute_batch("CREATE TABLE people (name TEXT)")
        .unwrap();
    let e = SqliteArchive::open(&path).unwrap_err();
    assert!(
        matches!(&e, StoreError::NotAnArchive { reason, .. } if reason.contains("people")),
        "{e}"
    );
    // A refused file is left as it was.
    let mode: String = raw(&path)
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    let junk = dir.path().join("junk.db");
    std::fs::write(
        &junk,
        "this is not an sqlite file at all, just text ".repeat(40),
    )
    .unwrap();
    let e = SqliteArchive::open(&junk).unwrap_err();
    assert!(matches!(e, StoreError::Open { .. }), "{e}");
    assert!(e.to_string().contains("junk.db"), "{e}");
    let e = SqliteArchive::open(dir.path().join("missing/dir/a.db")).unwrap_err();
    assert!(matches!(e, StoreError::Open { .. }), "{e}");
    // Store errors map onto the core error type.
    assert!(matches!(ArchiveError::from(e), ArchiveError::Backend(_)));
}

/// A WAL file beside an archive that belongs to another database (an
/// archive restored from a backup next to a newer `-wal`, files copied
/// around): SQLite reads it as the archive's, so the file looks foreign and
/// is refused, and closing the refused connection must not checkpoint that
/// WAL into the archive (it did: the archive was overwritten by the other
/// database's pages). The archive and the WAL are left byte for byte.
#[test]
fn a_foreign_wal_beside_an_archive_is_refused_without_touching_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    {
        let a = SqliteArchive::open(&path).unwrap();
        a.put(&[rec("k", &["kept text"])]).unwrap();
    }
    assert!(!dir.path().join("a.db-wal").exists());
    let other = dir.path().join("other.db");
    let o = raw(&other);
    o.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
         CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('x');",
    )
    .unwrap();
    let wal = std::fs::read(dir.path().join("other.db-wal")).unwrap();
    assert!(!wal.is_empty());
    drop(o);
    std::fs::write(dir.path().join("a.db-wal"), &wal).unwrap();
    let before = std::fs::read(&path).unwrap();
    let e = SqliteArchive::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::NotAnArchive { .. }), "{e}");
    assert!(e.to_string().contains("a.db"), "{e}");
    assert!(
        std::fs::read(&path).unwrap() == before,
        "the archive was rewritten"
    );
    assert_eq!(std::fs::read(dir.path().join("a.db-wal")).unwrap(), wal);
    // Without the stray WAL it is the archive it was.
    std::fs::remove_file(dir.path().join("a.db-wal")).unwrap();
    let _ = std::fs::remove_file(dir.path().join("a.db-shm"));
    let a = SqliteArchive::open(&path).unwrap();
    assert_eq!(a.get("k").unwrap(), Some(vec!["kept text".to_string()]));
    drop(a);
    // A refused file without a WAL leaves none (nor a `-shm`) behind: a
    // truncated archive, its header saying WAL mode.
    let real = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.db");
    std::fs::write(&cut, &real[..100]).unwrap();
    assert!(SqliteArchive::open(&cut).is_err());
    assert_eq!(std::fs::read(&cut).unwrap(), &real[..100]);
    for side in ["cut.db-wal", "cut.db-shm"] {
        assert!(!dir.path().join(side).exists(), "{side} left behind");
    }
}

#[test]
fn tampered_texts_are_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let a = SqliteArchive::open(&path).unwrap();
    a.put(&[rec("k", &["original", "second"]), rec("j", &["other"])])
        .unwrap();
    let c = raw(&path);
    c.execute(
        "UPDATE blobs SET text = 'changed' WHERE text = 'original'",
        [],
    )
    .unwrap();
    assert!(matches!(a.get("k"), Err(ArchiveError::Corrupt(_))));
    c.execute("UPDATE records SET len = 2 WHERE key = 'j'", [])
        .unwrap();
    let e = a.get("j").unwrap_err();
    assert!(e.to_string().contains("1 of 2"), "{e}");
}

#[test]
fn hash_collisions_are_refused() {
    let a = SqliteArchive::open_in_memory().unwrap();
    // Plant a blob under the hash of "a" that holds another text.
    a.lock()
        .execute(
            "INSERT INTO blobs (hash, text, created_at) VALUES (?1, 'b', 0)",
            [content_hash("a")],
        )
        .unwrap();
    let e = a.put(&[rec("k", &["a"])]).unwrap_err();
    assert!(
        matches!(e, ArchiveError::Corrupt(ref m) if m.contains("content hash")),
        "{e}"
    );
    assert_eq!(a.get("k").unwrap(), None);
}

#[test]
fn prune_removes_only_unreferenced_texts() {
    let a = SqliteArchive::open_in_memory().unwrap();
    a.put(&[rec("k1", &["a", "b"]), rec("k2", &["b"])]).unwrap();
    a.put(&[rec("k1", &["c"])]).unwrap();
    assert_eq!(a.stats().unwrap().blobs, 3);
    assert_eq!(a.prune_blobs().unwrap(), 1);
    assert_eq!(a.stats().unwrap().blobs, 2);
    assert_eq!(a.get("k1").unwrap(), Some(vec!["c".into()]));
    assert_eq!(a.get("k2").unwrap(), Some(vec!["b".into()]));
}

#[test]
fn shared_between_threads() {
    let a = std::sync::Arc::new(SqliteArchive::open_in_memory().unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let key = format!("t{t}-{i}");
                    a.put(&[rec(&key, &["shared", &key])]).unwrap();
                    assert_eq!(a.get(&key).unwrap().unwrap()[1], key);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = a.stats().unwrap();
    assert_eq!((s.records, s.blobs), (100, 101));
}

fn batches() -> impl Strategy<Value = Vec<Vec<(u8, Vec<u8>)>>> {
    let record = (0u8..6, proptest::collection::vec(0u8..8, 0..5));
    proptest::collection::vec(proptest::collection::vec(record, 0..4), 1..6)
}

fn text(i: u8) -> String {
    format!("text {i} ✓ {}", "y".repeat(usize::from(i) * 3))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The archive behaves like a map with last-write-wins, and stores each
    /// distinct text once.
    #[test]
    fn behaves_like_a_map(batches in batches()) {
        let a = SqliteArchive::open_in_memory().unwrap();
        let mut model: HashMap<String, Vec<String>> = HashMap::new();
        let mut seen: HashSet<String> = HashSet::new();
        for batch in &batches {
            let records: Vec<Record> = batch
                .iter()
                .map(|(k, ts)| Record {
                    key: format!("k{k}"),
                    originals: ts.iter().map(|&t| text(t)).collect(),
                })
                .collect();
            a.put(&records).unwrap();
            for r in records {
                seen.extend(r.originals.iter().cloned());
                model.insert(r.key, r.originals);
            }
        }
        for k in 0..6 {
            let key = format!("k{k}");
            prop_assert_eq!(a.get(&key).unwrap(), model.get(&key).cloned());
        }
        let s = a.stats().unwrap();
        prop_assert_eq!(s.records as usize, model.len());
        prop_assert_eq!(s.blobs as usize, seen.len());
        a.prune_blobs().unwrap();
        let live: HashSet<&String> = model.values().flatten().collect();
        prop_assert_eq!(a.stats().unwrap().blobs as usize, live.len());
    }
}
