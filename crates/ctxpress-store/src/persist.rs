//! The live histories: [`Persistence`] on the `messages` table (schema
//! version 4).
//!
//! One row per message: the conversation, its position key `seq` and its
//! exact JSON text. A compactor deletes folded messages from here only after
//! the batches holding them are committed (see
//! [`BatchArchive`](ctxpress_core::compaction::BatchArchive)); each call is
//! one transaction.

use crate::{SqliteArchive, backend};
use ctxpress_core::archive::ArchiveError;
use ctxpress_core::compaction::{Persistence, StoredMessage, fold_keys};
use rusqlite::{TransactionBehavior, params};

/// The messages table (added in schema version 4).
pub(crate) const SCHEMA: &str = "
CREATE TABLE messages (
    conversation TEXT NOT NULL,
    seq INTEGER NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (conversation, seq)
) WITHOUT ROWID;
";

impl Persistence for SqliteArchive {
    fn load(&self, conversation: &str) -> Result<Vec<StoredMessage>, ArchiveError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT seq, json FROM messages WHERE conversation = ?1 ORDER BY seq")
            .map_err(backend)?;
        let rows = stmt
            .query_map([conversation], |r| {
                Ok(StoredMessage {
                    key: r.get(0)?,
                    json: r.get(1)?,
                })
            })
            .map_err(backend)?;
        rows.map(|r| r.map_err(backend)).collect()
    }

    fn append(&self, conversation: &str, messages: &[String]) -> Result<Vec<i64>, ArchiveError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend)?;
        let last: i64 = tx
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM messages WHERE conversation = ?1")
            .map_err(backend)?
            .query_row([conversation], |r| r.get(0))
            .map_err(backend)?;
        let mut keys = Vec::with_capacity(messages.len());
        {
            let mut ins = tx
                .prepare_cached(
                    "INSERT INTO messages (conversation, seq, json) VALUES (?1, ?2, ?3)",
                )
                .map_err(backend)?;
            let mut key = last;
            for json in messages {
                key += 1;
                ins.execute(params![conversation, key, json])
                    .map_err(backend)?;
                keys.push(key);
            }
        }
        tx.commit().map_err(backend)?;
        Ok(keys)
    }

    fn fold(
        &self,
        conversation: &str,
        removed: &[i64],
        insert: &[String],
    ) -> Result<(), ArchiveError> {
        let keys = fold_keys(removed, insert.len())?;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend)?;
        {
            let mut del = tx
                .prepare_cached("DELETE FROM messages WHERE conversation = ?1 AND seq = ?2")
                .map_err(backend)?;
            let mut unique = removed.to_vec();
            unique.sort_unstable();
            unique.dedup();
            for k in unique {
                if del.execute(params![conversation, k]).map_err(backend)? == 0 {
                    // Another run folded it since the caller loaded the
                    // messages (a message is only ever removed by a fold).
                    // Dropping the transaction rolls back: nothing changed.
                    return Err(ArchiveError::Conflict(format!(
                        "message {k} of conversation `{conversation}` is no longer stored"
                    )));
                }
            }
            let mut ins = tx
                .prepare_cached(
                    "INSERT INTO messages (conversation, seq, json) VALUES (?1, ?2, ?3)",
                )
                .map_err(backend)?;
            for (key, json) in keys.iter().zip(insert) {
                ins.execute(params![conversation, key, json])
                    .map_err(backend)?;
            }
        }
        tx.commit().map_err(backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jsons(p: &SqliteArchive, c: &str) -> Vec<String> {
        p.load(c).unwrap().into_iter().map(|m| m.json).collect()
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn append_load_fold_per_conversation() {
        let p = SqliteArchive::open_in_memory().unwrap();
        assert_eq!(
            p.append("a", &s(&["1", "2", "3", "4"])).unwrap(),
            [1, 2, 3, 4]
        );
        assert_eq!(p.append("b", &s(&["x"])).unwrap(), [1]);
        assert_eq!(p.append("a", &s(&["5"])).unwrap(), [5]);
        // 2..=4 become one message in the place of 2.
        p.fold("a", &[3, 2, 4], &s(&["c"])).unwrap();
        assert_eq!(jsons(&p, "a"), ["1", "c", "5"]);
        let keys: Vec<i64> = p.load("a").unwrap().iter().map(|m| m.key).collect();
        assert_eq!(keys, [1, 2, 5]);
        assert_eq!(jsons(&p, "b"), ["x"]);
        // Appending goes on after the greatest key.
        assert_eq!(p.append("a", &s(&["6"])).unwrap(), [6]);
    }

    #[test]
    fn a_fold_that_fails_changes_nothing() {
        let p = SqliteArchive::open_in_memory().unwrap();
        p.append("a", &s(&["1", "2"])).unwrap();
        let e = p.fold("a", &[1, 9], &s(&["c"])).unwrap_err();
        assert!(matches!(e, ArchiveError::Conflict(_)), "{e}");
        assert!(e.to_string().contains("message 9"), "{e}");
        let e = p.fold("a", &[1], &s(&["c", "d"])).unwrap_err();
        assert!(e.to_string().contains("2 messages"), "{e}");
        assert_eq!(jsons(&p, "a"), ["1", "2"]);
    }

    /// A handle that loaded the messages before another folded them (two
    /// `compact` processes on one file): its fold is told the messages
    /// changed under it (`Conflict`, which the compactor answers by loading
    /// again), never that the file is corrupt, and changes nothing.
    #[test]
    fn a_fold_of_messages_another_handle_folded_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.db");
        let (a, b) = (
            SqliteArchive::open(&path).unwrap(),
            SqliteArchive::open(&path).unwrap(),
        );
        a.append("c", &s(&["1", "2", "3", "4"])).unwrap();
        let stale: Vec<i64> = b.load("c").unwrap().iter().map(|m| m.key).collect();
        a.fold("c", &stale[1..3], &s(&["x"])).unwrap();
        let e = b.fold("c", &stale[..3], &s(&["y"])).unwrap_err();
        assert!(matches!(e, ArchiveError::Conflict(_)), "{e}");
        assert_eq!(jsons(&b, "c"), ["1", "x", "4"]);
    }

    /// Two handles fold the same loaded messages at once: one wins, the
    /// other gets `Conflict`, and the file holds the winner's fold whole.
    #[test]
    fn two_handles_folding_the_same_messages_at_once_conflict_not_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.db");
        SqliteArchive::open(&path)
            .unwrap()
            .append("c", &s(&["1", "2", "3", "4"]))
            .unwrap();
        let loaded = std::sync::Barrier::new(2);
        let results: Vec<Result<(), ArchiveError>> = std::thread::scope(|sc| {
            let handles: Vec<_> = ["x", "y"]
                .into_iter()
                .map(|clip| {
                    let (path, loaded) = (&path, &loaded);
                    sc.spawn(move || {
                        let h = SqliteArchive::open(path).unwrap();
                        let keys: Vec<i64> = h.load("c").unwrap().iter().map(|m| m.key).collect();
                        loaded.wait();
                        h.fold("c", &keys[..3], &s(&[clip]))
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
        let left = jsons(&SqliteArchive::open(&path).unwrap(), "c");
        assert!(left == ["x", "4"] || left == ["y", "4"], "{left:?}");
    }
}
