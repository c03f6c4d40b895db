//! Runs in progress: the `runs` and `run_batches` tables (schema version 5).
//!
//! A program that writes batches for an output it has not committed yet
//! (`ctxpress compact`) marks the run first ([`SqliteArchive::begin_run`]),
//! saves the batches of each conversation before it first changes them
//! ([`SqliteArchive::save_batches`]), and drops the mark once its output is
//! committed ([`SqliteArchive::finish_run`]). A run that failed, or was
//! killed, before its output appeared is undone
//! ([`SqliteArchive::undo_run`]): each conversation it touched gets back the
//! batches it had, in their order, in one transaction. The mark's `note` is
//! the caller's (what it needs to tell, later, whether the output appeared).

use crate::{SqliteArchive, backend, batches};
use ctxpress_core::archive::ArchiveError;
use ctxpress_core::compaction::SummaryBatch;
use rusqlite::{OptionalExtension, TransactionBehavior, params};

/// The run tables (added in schema version 5).
pub(crate) const SCHEMA: &str = "
CREATE TABLE runs (
    token TEXT PRIMARY KEY NOT NULL,
    note TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE run_batches (
    token TEXT NOT NULL REFERENCES runs(token) ON DELETE CASCADE,
    conversation TEXT NOT NULL,
    batches TEXT NOT NULL,
    PRIMARY KEY (token, conversation)
) WITHOUT ROWID;
";

/// A run marked by [`SqliteArchive::begin_run`] and not finished or undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRun {
    /// The run's token.
    pub token: String,
    /// What the run wrote about itself (last [`SqliteArchive::note_run`]).
    pub note: String,
}

impl SqliteArchive {
    /// Mark a run `token` (unique, e.g. from the process id and the time)
    /// with `note`.
    pub fn begin_run(&self, token: &str, note: &str) -> Result<(), ArchiveError> {
        self.lock()
            .execute(
                "INSERT INTO runs (token, note, created_at) VALUES (?1, ?2, ?3)",
                params![token, note, crate::now()],
            )
            .map_err(backend)?;
        Ok(())
    }

    /// Replace the note of run `token`.
    pub fn note_run(&self, token: &str, note: &str) -> Result<(), ArchiveError> {
        let n = self
            .lock()
            .execute(
                "UPDATE runs SET note = ?2 WHERE token = ?1",
                params![token, note],
            )
            .map_err(backend)?;
        if n == 0 {
            return Err(ArchiveError::Backend(format!("run {token} is not marked")));
        }
        Ok(())
    }

    /// Save the batches `conversation` has now for run `token`, unless
    /// saved for it already: [`SqliteArchive::undo_run`] puts them back.
    /// Call it before the run first changes the conversation's batches.
    pub fn save_batches(&self, token: &str, conversation: &str) -> Result<(), ArchiveError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend)?;
        let saved: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM run_batches WHERE token = ?1 AND conversation = ?2",
                params![token, conversation],
                |r| r.get(0),
            )
            .optional()
            .map_err(backend)?;
        if saved.is_some() {
            return Ok(());
        }
        let now = batches::list(&tx, conversation)?;
        let text = serde_json::to_string(&now)
            .map_err(|e| ArchiveError::Backend(format!("saving batches: {e}")))?;
        tx.execute(
            "INSERT INTO run_batches (token, conversation, batches) VALUES (?1, ?2, ?3)",
            params![token, conversation, text],
        )
        .map_err(backend)?;
        tx.commit().map_err(backend)
    }

    /// The runs marked and not finished or undone, oldest first.
    pub fn pending_runs(&self) -> Result<Vec<PendingRun>, ArchiveError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare("SELECT token, note FROM runs ORDER BY created_at, token")
            .map_err(backend)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(PendingRun {
                    token: r.get(0)?,
                    note: r.get(1)?,
                })
            })
            .map_err(backend)?;
        rows.map(|r| r.map_err(backend)).collect()
    }

    /// Drop the mark of run `token`: what it wrote stays.
    pub fn finish_run(&self, token: &str) -> Result<(), ArchiveError> {
        self.lock()
            .execute("DELETE FROM runs WHERE token = ?1", [token])
            .map_err(backend)?;
        Ok(())
    }

    /// Undo run `token`, in one transaction: every conversation it saved
    /// gets back the batches it had then (in their order; the batches the
    /// run added or re-summarized are removed, with their index rows), and
    /// the mark is dropped. Records of originals it wrote stay: they are
    /// keyed by content, so a rerun writes the same ones.
    pub fn undo_run(&self, token: &str) -> Result<(), ArchiveError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend)?;
        let saved: Vec<(String, String)> = {
            let mut stmt = tx
                .prepare("SELECT conversation, batches FROM run_batches WHERE token = ?1")
                .map_err(backend)?;
            let rows = stmt
                .query_map([token], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(backend)?;
            rows.collect::<Result<_, _>>().map_err(backend)?
        };
        for (conversation, text) in saved {
            let before: Vec<SummaryBatch> = serde_json::from_str(&text).map_err(|e| {
                ArchiveError::Corrupt(format!(
                    "run {token}: the saved batches of {conversation} do not read: {e}"
                ))
            })?;
            for b in batches::list(&tx, &conversation)? {
                batches::remove(&tx, &b.label)?;
            }
            for b in &before {
                batches::write(&tx, b, None)?;
            }
        }
        tx.execute("DELETE FROM runs WHERE token = ?1", [token])
            .map_err(backend)?;
        tx.commit().map_err(backend)
    }
}
