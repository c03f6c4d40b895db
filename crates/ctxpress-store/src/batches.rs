//! The batch archive: [`BatchArchive`] on the `batches` table (schema
//! version 3).
//!
//! One row per label. `seq` orders the batches: a new label gets one more
//! than the greatest stored, a rewritten label keeps its place, and the batch
//! that [`BatchArchive::replace`] adds takes the place of the first batch it
//! replaces, so `ORDER BY seq` within a conversation is oldest first. Each
//! batch's summary is indexed in the search tables (kind `batch`, key = the
//! label, position 0) in the same transaction as the row; removing a batch
//! removes its index rows.

use crate::search::{self, HitKind};
use crate::{SqliteArchive, backend};
use ctxpress_core::archive::ArchiveError;
use ctxpress_core::compaction::{BatchArchive, SummaryBatch};
use rusqlite::{Connection, OptionalExtension, Row, Transaction, TransactionBehavior, params};

/// The batch table (added in schema version 3).
pub(crate) const SCHEMA: &str = "
CREATE TABLE batches (
    label TEXT PRIMARY KEY NOT NULL,
    seq INTEGER NOT NULL UNIQUE,
    conversation TEXT NOT NULL,
    depth INTEGER NOT NULL,
    start TEXT NOT NULL,
    end TEXT NOT NULL,
    count INTEGER NOT NULL,
    summary TEXT NOT NULL,
    originals TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX batches_conversation ON batches(conversation, seq);
";

const COLUMNS: &str = "label, conversation, depth, start, end, count, summary, originals";

fn int(n: usize) -> Result<i64, ArchiveError> {
    i64::try_from(n).map_err(|_| ArchiveError::Backend("batch count too large".into()))
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<(SummaryBatch, String)> {
    let depth: i64 = r.get(2)?;
    let count: i64 = r.get(5)?;
    Ok((
        SummaryBatch {
            label: r.get(0)?,
            conversation: r.get(1)?,
            depth: u32::try_from(depth).unwrap_or(u32::MAX),
            start: r.get(3)?,
            end: r.get(4)?,
            count: usize::try_from(count).unwrap_or(0),
            summary: r.get(6)?,
            originals: Vec::new(),
        },
        r.get(7)?,
    ))
}

fn decode((mut b, originals): (SummaryBatch, String)) -> Result<SummaryBatch, ArchiveError> {
    b.originals = serde_json::from_str(&originals).map_err(|e| {
        ArchiveError::Corrupt(format!(
            "batch {}: originals are not a JSON list: {e}",
            b.label
        ))
    })?;
    Ok(b)
}

/// The batch with this label.
pub(crate) fn read(conn: &Connection, label: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM batches WHERE label = ?1"))
        .map_err(backend)?;
    stmt.query_row([label], from_row)
        .optional()
        .map_err(backend)?
        .map(decode)
        .transpose()
}

pub(crate) fn list(
    conn: &Connection,
    conversation: &str,
) -> Result<Vec<SummaryBatch>, ArchiveError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM batches WHERE conversation = ?1 ORDER BY seq"
        ))
        .map_err(backend)?;
    let rows = stmt.query_map([conversation], from_row).map_err(backend)?;
    rows.map(|r| decode(r.map_err(backend)?)).collect()
}

/// Store one batch at `seq` (or, when `None`, at its stored place if the label
/// exists, else after every other batch) and index its summary.
pub(crate) fn write(
    tx: &Transaction<'_>,
    b: &SummaryBatch,
    seq: Option<i64>,
) -> Result<(), ArchiveError> {
    let originals = serde_json::to_string(&b.originals)
        .map_err(|e| ArchiveError::Backend(format!("batch {}: {e}", b.label)))?;
    let seq = match seq {
        Some(s) => s,
        None => tx
            .prepare_cached(
                "SELECT coalesce((SELECT seq FROM batches WHERE label = ?1), \
                 (SELECT coalesce(max(seq), 0) + 1 FROM batches))",
            )
            .map_err(backend)?
            .query_row([&b.label], |r| r.get(0))
            .map_err(backend)?,
    };
    tx.prepare_cached(
        "INSERT INTO batches (label, seq, conversation, depth, start, end, count, summary, \
         originals, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
         ON CONFLICT (label) DO UPDATE SET seq = excluded.seq, \
         conversation = excluded.conversation, depth = excluded.depth, start = excluded.start, \
         end = excluded.end, count = excluded.count, summary = excluded.summary, \
         originals = excluded.originals, created_at = excluded.created_at",
    )
    .map_err(backend)?
    .execute(params![
        b.label,
        seq,
        b.conversation,
        i64::from(b.depth),
        b.start,
        b.end,
        int(b.count)?,
        b.summary,
        originals,
        crate::now(),
    ])
    .map_err(backend)?;
    // Rewrites the label's index rows (clears the old ones first).
    search::index_batch(
        tx,
        HitKind::Batch,
        Some(&b.conversation),
        &[(b.label.as_str(), std::slice::from_ref(&b.summary))],
    )
    .map_err(backend)?;
    search::index_batch_originals(tx, &b.conversation, &b.label, &b.originals).map_err(backend)
}

pub(crate) fn remove(tx: &Transaction<'_>, label: &str) -> Result<(), ArchiveError> {
    tx.prepare_cached("DELETE FROM batches WHERE label = ?1")
        .map_err(backend)?
        .execute([label])
        .map_err(backend)?;
    search::clear_key(tx, label).map_err(backend)
}

fn begin(conn: &mut Connection) -> Result<Transaction<'_>, ArchiveError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend)
}

impl BatchArchive for SqliteArchive {
    fn put_batches(&self, batches: &[SummaryBatch]) -> Result<(), ArchiveError> {
        if batches.is_empty() {
            return Ok(());
        }
        let mut conn = self.lock();
        let tx = begin(&mut conn)?;
        for b in batches {
            write(&tx, b, None)?;
        }
        tx.commit().map_err(backend)
    }

    fn batches(&self, conversation: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        list(&self.lock(), conversation)
    }

    fn read(&self, label: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        read(&self.lock(), label)
    }

    fn replace(
        &self,
        conversation: &str,
        removed: &[String],
        added: SummaryBatch,
    ) -> Result<(), ArchiveError> {
        let mut conn = self.lock();
        let tx = begin(&mut conn)?;
        let mut at: Option<i64> = None;
        for l in removed {
            let seq: Option<i64> = tx
                .prepare_cached("SELECT seq FROM batches WHERE label = ?1 AND conversation = ?2")
                .map_err(backend)?
                .query_row(params![l, conversation], |r| r.get(0))
                .optional()
                .map_err(backend)?;
            match seq {
                Some(s) => at = Some(at.map_or(s, |a| a.min(s))),
                // Another run replaced it since the caller read the
                // batches (a label is only ever removed by a replace or an
                // undo). Dropping the transaction rolls back: nothing
                // changed.
                None => {
                    return Err(ArchiveError::Conflict(format!(
                        "batch `{l}` of conversation `{conversation}` is no longer stored"
                    )));
                }
            }
        }
        for l in removed {
            remove(&tx, l)?;
        }
        // The added label is stored once, at the place of the first batch
        // replaced (or last when nothing is replaced).
        remove(&tx, &added.label)?;
        write(&tx, &added, at)?;
        tx.commit().map_err(backend)
    }
}
