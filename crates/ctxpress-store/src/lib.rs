//! SQLite archive of originals for ctxpress.
//!
//! [`SqliteArchive`] implements [`ctxpress_core::Archive`] on one SQLite file
//! (or an in-memory database for tests):
//!
//! * `blobs`: content-addressed message texts (`hash` = [`content_hash`] of the
//!   text), so a text shared by many records or conversations is stored once;
//! * `records` + `record_blobs`: a chain key and the ordered list of blob hashes
//!   it stands for (an empty list is a valid record);
//! * `cache`: summarizer results by cache key;
//! * `search_fts` + `search_docs`: an FTS5 index of every archived message
//!   (see [`search`](mod@search)), written in the same transaction as the records,
//!   queried with [`SqliteArchive::search`]; the recall handles archived for
//!   a conversation are listed from it by [`SqliteArchive::handles`];
//! * `batches`: compaction summary batches
//!   ([`BatchArchive`](ctxpress_core::compaction::BatchArchive)), one row per
//!   label with its originals, kept in order per conversation; their
//!   summaries are indexed in `search_fts` with kind `batch` in the same
//!   transaction;
//! * `runs` + `run_batches`: runs that write batches before their output is
//!   committed, with the batches each touched conversation had before (see
//!   [`SqliteArchive::undo_run`]).
//!
//! The file runs in WAL mode with `synchronous = NORMAL` and a busy timeout, so
//! several processes (or several [`SqliteArchive`] values) can read while one
//! writes. Every [`Archive::put`] is one transaction: a batch is stored whole or
//! not at all. The schema version lives in `PRAGMA user_version`; a file written
//! by a newer ctxpress is refused rather than misread; one written before the
//! search index (version 1) gets it, filled from the stored texts, on open, and
//! one written before the batch archive (versions 1 and 2) gets the empty
//! `batches` table, and every older one the tables added since (`messages` in
//! version 4, `runs` in version 5).
//!
//! WAL handling: every commit is checkpointed into the file at once
//! (`wal_autocheckpoint = 1`), and a new archive's schema is folded into the
//! file before it is used (opening fails when it cannot be), so a write that
//! fails on a full disk leaves no `-wal` / `-shm` files behind unless a commit
//! already in the WAL could not be folded. A file that is refused (not an
//! archive, a newer schema) is left as it was, and so is a WAL beside it, which
//! may belong to another database: it is never checkpointed into a file that is
//! not known to be an archive. The current schema version is
//! [`SCHEMA_VERSION`].

use ctxpress_core::archive::{Archive, ArchiveError, Record, content_hash};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

mod batches;
mod handles;
pub use handles::HandleEntry;
mod persist;
mod runs;
pub use runs::PendingRun;
pub mod search;
pub use search::{Hit, HitKind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Schema version this crate writes and reads (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 5;

/// Schema version of archives written before the search index (upgraded on open).
const SCHEMA_VERSION_NO_SEARCH: i64 = 1;

/// Schema version of archives written before the batch archive (upgraded on open).
const SCHEMA_VERSION_NO_BATCHES: i64 = 2;

/// Schema version of archives written before the messages table (upgraded on open).
const SCHEMA_VERSION_NO_MESSAGES: i64 = 3;

/// Schema version of archives written before the runs table (upgraded on open).
const SCHEMA_VERSION_NO_RUNS: i64 = 4;

/// Busy timeout used by [`SqliteArchive::open`].
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

// Blobs and cache values can be large, so those tables keep their rowid; the
// small key tables are clustered on their primary key.
const SCHEMA: &str = "
CREATE TABLE blobs (
    hash TEXT PRIMARY KEY NOT NULL,
    text TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE records (
    key TEXT PRIMARY KEY NOT NULL,
    len INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE record_blobs (
    key TEXT NOT NULL REFERENCES records(key) ON DELETE CASCADE,
    pos INTEGER NOT NULL,
    hash TEXT NOT NULL REFERENCES blobs(hash),
    PRIMARY KEY (key, pos)
) WITHOUT ROWID;
CREATE INDEX record_blobs_hash ON record_blobs(hash);
CREATE TABLE cache (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
";

/// Failure to open or maintain an archive file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file could not be opened or set up as an archive.
    #[error("cannot open archive {}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// What SQLite reported.
        source: rusqlite::Error,
    },
    /// The file was written by a newer ctxpress.
    #[error(
        "archive {} has schema version {found}, newer than the supported version {supported}; \
         use a newer ctxpress to read it",
        path.display()
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// Version found in the file.
        found: i64,
        /// Highest version this build understands.
        supported: i64,
    },
    /// The file holds an SQLite database that is not a ctxpress archive, or
    /// an archive with a schema version this build does not know.
    #[error("{} is not a ctxpress archive: {reason}", path.display())]
    NotAnArchive {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A query failed.
    #[error("archive query failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Stored records could not be read back.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
}

impl From<StoreError> for ArchiveError {
    fn from(e: StoreError) -> Self {
        ArchiveError::Backend(e.to_string())
    }
}

fn backend(e: rusqlite::Error) -> ArchiveError {
    ArchiveError::Backend(format!("sqlite: {e}"))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Row counts of an archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveStats {
    /// Records (chain keys).
    pub records: u64,
    /// Distinct stored texts.
    pub blobs: u64,
    /// Total bytes of the stored texts.
    pub blob_bytes: u64,
    /// Summarizer cache entries.
    pub cache_entries: u64,
}

/// An [`Archive`] stored in SQLite. Safe to share between threads; several
/// values (or processes) may open the same file.
#[derive(Debug)]
pub struct SqliteArchive {
    conn: Mutex<Connection>,
    path: Option<PathBuf>,
    journal_mode: String,
}

impl SqliteArchive {
    /// Open (creating if needed) the archive file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with_timeout(path, DEFAULT_BUSY_TIMEOUT)
    }

    /// Open with a chosen busy timeout (how long to wait for another writer).
    pub fn open_with_timeout(
        path: impl AsRef<Path>,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source,
        };
        let wal = {
            let mut w = path.clone().into_os_string();
            w.push("-wal");
            PathBuf::from(w)
        };
        let wal_beside = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
        let conn = Connection::open(&path).map_err(open_err)?;
        if wal_beside {
            // Until the file is known to be an archive, closing the
            // connection must not checkpoint: a WAL file beside it that
            // belongs to another database (SQLite cannot tell) would be
            // copied into the file we refuse. So a refused file and its WAL
            // are left as they were. (Without a WAL there is nothing to
            // copy, and the close removes the empty WAL it made.)
            conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
                .map_err(open_err)?;
        }
        Self::init(conn, timeout, path.clone(), Some(path))
    }

    /// A private in-memory archive (for tests and one-shot runs).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open {
            path: path.clone(),
            source,
        })?;
        Self::init(conn, DEFAULT_BUSY_TIMEOUT, path, None)
    }

    fn init(
        mut conn: Connection,
        timeout: Duration,
        shown: PathBuf,
        path: Option<PathBuf>,
    ) -> Result<Self, StoreError> {
        let open_err = |source| StoreError::Open {
            path: shown.clone(),
            source,
        };
        conn.busy_timeout(timeout).map_err(open_err)?;
        // Schema first, so a file we refuse is left as it was.
        let created = migrate(&mut conn, &shown)?;
        // An archive: checkpoint on close again (see `open_with_timeout`).
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, false)
            .map_err(open_err)?;
        let journal_mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        // Each commit is checkpointed into the file at once, so the WAL never
        // holds committed pages for long: when a write fails because the
        // disk is full, the WAL holds only the failed transaction's pages,
        // and closing (which checkpoints) removes the WAL and shared-memory
        // files. (A checkpoint of pages committed earlier would need the
        // file to grow on a full disk, and they would stay in the WAL.)
        conn.pragma_update(None, "wal_autocheckpoint", 1)
            .map_err(open_err)?;
        if created && path.is_some() {
            // A new archive's schema must reach the file: on a disk too
            // full for that, opening fails (and the caller may remove what
            // it made) instead of leaving the schema in a WAL that no
            // checkpoint can fold.
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(open_err)?;
        }
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(open_err)?;
        Ok(SqliteArchive {
            conn: Mutex::new(conn),
            path,
            journal_mode,
        })
    }

    /// The file, or `None` for an in-memory archive.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The journal mode SQLite accepted (`wal` for files, `memory` in memory).
    pub fn journal_mode(&self) -> &str {
        &self.journal_mode
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a transaction open (the
        // transaction guard rolls back on drop), so the connection stays usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Row counts.
    pub fn stats(&self) -> Result<ArchiveStats, StoreError> {
        let conn = self.lock();
        let count = |sql: &str| -> Result<u64, rusqlite::Error> {
            let n: i64 = conn.query_row(sql, [], |r| r.get(0))?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(ArchiveStats {
            records: count("SELECT count(*) FROM records")?,
            blobs: count("SELECT count(*) FROM blobs")?,
            blob_bytes: count("SELECT coalesce(sum(length(CAST(text AS BLOB))), 0) FROM blobs")?,
            cache_entries: count("SELECT count(*) FROM cache")?,
        })
    }

    /// Search the archived messages and the summaries of stored batches (of
    /// one conversation, or of all) for `query`, best first by bm25, at most
    /// `limit` hits; a batch hit has kind [`HitKind::Batch`] and its label as
    /// [`Hit::key`]. The query is plain
    /// words, all of which must occur (any string is accepted: FTS5 syntax in
    /// it means nothing; one with no letter or digit finds nothing).
    pub fn search(
        &self,
        query: &str,
        conversation: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Hit>, StoreError> {
        Ok(search::search(&self.lock(), query, conversation, limit)?)
    }

    /// The originals recorded under `key` (a [`Hit::key`]: a chain key, a
    /// `doc:` key, or a batch label), in order. The whole batch of a label is
    /// [`BatchArchive::read`](ctxpress_core::compaction::BatchArchive::read).
    pub fn read(&self, key: &str) -> Result<Option<Vec<String>>, StoreError> {
        let conn = self.lock();
        match get_record(&conn, key)? {
            Some(originals) => Ok(Some(originals)),
            None => Ok(batches::read(&conn, key)?.map(|b| b.originals)),
        }
    }

    /// Delete texts no record refers to any more (left by overwritten keys);
    /// returns how many were removed.
    pub fn prune_blobs(&self) -> Result<usize, StoreError> {
        let conn = self.lock();
        Ok(conn.execute(
            "DELETE FROM blobs WHERE NOT EXISTS \
             (SELECT 1 FROM record_blobs rb WHERE rb.hash = blobs.hash)",
            [],
        )?)
    }
}

/// Set up or upgrade the schema; `true` when this call created it (a new
/// archive).
fn migrate(conn: &mut Connection, path: &Path) -> Result<bool, StoreError> {
    let open_err = |source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    };
    let version = |c: &Connection| -> Result<i64, rusqlite::Error> {
        c.query_row("PRAGMA user_version", [], |r| r.get(0))
    };
    // Some(v): an archive of version v (current or upgradable); None: no
    // schema yet.
    let check = |v: i64| -> Result<Option<i64>, StoreError> {
        match v {
            SCHEMA_VERSION
            | SCHEMA_VERSION_NO_RUNS
            | SCHEMA_VERSION_NO_MESSAGES
            | SCHEMA_VERSION_NO_BATCHES
            | SCHEMA_VERSION_NO_SEARCH => Ok(Some(v)),
            0 => Ok(None),
            v if v > SCHEMA_VERSION => Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: v,
                supported: SCHEMA_VERSION,
            }),
            v => Err(StoreError::NotAnArchive {
                path: path.to_path_buf(),
                reason: format!("unknown schema version {v}"),
            }),
        }
    };
    if check(version(conn).map_err(open_err)?)? == Some(SCHEMA_VERSION) {
        return Ok(false);
    }
    // New or old file (or one being set up by another process right now):
    // create or upgrade the schema under the write lock and look again once
    // we hold it.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(open_err)?;
    match check(version(&tx).map_err(open_err)?)? {
        Some(SCHEMA_VERSION) => return Ok(false),
        Some(v) => {
            // Each step upgrades one version; all in this one transaction.
            if v < SCHEMA_VERSION_NO_BATCHES {
                tx.execute_batch(search::SCHEMA).map_err(open_err)?;
                search::backfill(&tx).map_err(open_err)?;
            }
            if v < SCHEMA_VERSION_NO_MESSAGES {
                tx.execute_batch(batches::SCHEMA).map_err(open_err)?;
            }
            if v < SCHEMA_VERSION_NO_RUNS {
                tx.execute_batch(persist::SCHEMA).map_err(open_err)?;
            }
            tx.execute_batch(runs::SCHEMA).map_err(open_err)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(open_err)?;
            return tx.commit().map(|()| false).map_err(open_err);
        }
        None => {}
    }
    let foreign: Option<String> = tx
        .query_row(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(open_err)?;
    if let Some(name) = foreign {
        return Err(StoreError::NotAnArchive {
            path: path.to_path_buf(),
            reason: format!("it already holds `{name}` and no ctxpress schema version"),
        });
    }
    tx.execute_batch(SCHEMA).map_err(open_err)?;
    tx.execute_batch(search::SCHEMA).map_err(open_err)?;
    tx.execute_batch(batches::SCHEMA).map_err(open_err)?;
    tx.execute_batch(persist::SCHEMA).map_err(open_err)?;
    tx.execute_batch(runs::SCHEMA).map_err(open_err)?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(open_err)?;
    tx.commit().map(|()| true).map_err(open_err)
}

fn put_batch(
    conn: &mut Connection,
    conversation: Option<&str>,
    records: &[Record],
) -> Result<(), ArchiveError> {
    let hashed: Vec<Vec<String>> = records
        .iter()
        .map(|r| r.originals.iter().map(|t| content_hash(t)).collect())
        .collect();
    let at = now();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend)?;
    {
        let mut clear = tx
            .prepare_cached("DELETE FROM record_blobs WHERE key = ?1")
            .map_err(backend)?;
        let mut record = tx
            .prepare_cached(
                "INSERT INTO records (key, len, created_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (key) DO UPDATE SET len = excluded.len, created_at = excluded.created_at",
            )
            .map_err(backend)?;
        let mut blob = tx
            .prepare_cached(
                "INSERT INTO blobs (hash, text, created_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (hash) DO NOTHING",
            )
            .map_err(backend)?;
        let mut same = tx
            .prepare_cached("SELECT text = ?2 FROM blobs WHERE hash = ?1")
            .map_err(backend)?;
        let mut link = tx
            .prepare_cached("INSERT INTO record_blobs (key, pos, hash) VALUES (?1, ?2, ?3)")
            .map_err(backend)?;
        for (r, hashes) in records.iter().zip(&hashed) {
            let len = i64::try_from(r.originals.len())
                .map_err(|_| ArchiveError::Backend("record too long".into()))?;
            clear.execute([&r.key]).map_err(backend)?;
            record.execute(params![r.key, len, at]).map_err(backend)?;
            for (pos, (text, hash)) in r.originals.iter().zip(hashes).enumerate() {
                if blob.execute(params![hash, text, at]).map_err(backend)? == 0 {
                    // Already stored: make sure it is the same text, not a
                    // hash collision that would restore the wrong original.
                    let equal: bool = same
                        .query_row(params![hash, text], |row| row.get(0))
                        .map_err(backend)?;
                    if !equal {
                        return Err(ArchiveError::Corrupt(format!(
                            "two different texts share content hash {hash}"
                        )));
                    }
                }
                let pos = i64::try_from(pos)
                    .map_err(|_| ArchiveError::Backend("record too long".into()))?;
                link.execute(params![r.key, pos, hash]).map_err(backend)?;
            }
        }
    }
    let indexed: Vec<(&str, &[String])> = records
        .iter()
        .map(|r| (r.key.as_str(), r.originals.as_slice()))
        .collect();
    search::index_batch(&tx, HitKind::Original, conversation, &indexed).map_err(backend)?;
    tx.commit().map_err(backend)
}

type Row = (i64, Option<i64>, Option<String>, Option<String>);

fn get_record(conn: &Connection, key: &str) -> Result<Option<Vec<String>>, ArchiveError> {
    // One statement, so the record and its texts come from one snapshot.
    let mut stmt = conn
        .prepare_cached(
            "SELECT r.len, rb.pos, rb.hash, b.text FROM records r \
             LEFT JOIN record_blobs rb ON rb.key = r.key \
             LEFT JOIN blobs b ON b.hash = rb.hash \
             WHERE r.key = ?1 ORDER BY rb.pos",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map([key], |r| -> rusqlite::Result<Row> {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .map_err(backend)?;
    let mut len = None;
    let mut out = Vec::new();
    for row in rows {
        let (n, pos, hash, text) = row.map_err(backend)?;
        len = Some(n);
        let Some(hash) = hash else { continue };
        let corrupt = |what: &str| ArchiveError::Corrupt(format!("record {key}: {what}"));
        if pos != i64::try_from(out.len()).ok() {
            return Err(corrupt("positions are not consecutive"));
        }
        let text = text.ok_or_else(|| corrupt(&format!("text {hash} is missing")))?;
        if content_hash(&text) != hash {
            return Err(corrupt(&format!("text {hash} does not match its hash")));
        }
        out.push(text);
    }
    match len {
        None => Ok(None),
        Some(n) if i64::try_from(out.len()).ok() == Some(n) => Ok(Some(out)),
        Some(n) => Err(ArchiveError::Corrupt(format!(
            "record {key}: {} of {n} texts present",
            out.len()
        ))),
    }
}

impl Archive for SqliteArchive {
    fn put(&self, records: &[Record]) -> Result<(), ArchiveError> {
        self.put_for(None, records)
    }

    fn put_for(&self, conversation: Option<&str>, records: &[Record]) -> Result<(), ArchiveError> {
        if records.is_empty() {
            return Ok(());
        }
        put_batch(&mut self.lock(), conversation, records)
    }

    fn get(&self, key: &str) -> Result<Option<Vec<String>>, ArchiveError> {
        get_record(&self.lock(), key)
    }

    fn cache_get(&self, key: &str) -> Result<Option<String>, ArchiveError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT value FROM cache WHERE key = ?1")
            .map_err(backend)?;
        stmt.query_row([key], |r| r.get(0))
            .optional()
            .map_err(backend)
    }

    fn cache_put(&self, key: &str, value: &str) -> Result<(), ArchiveError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO cache (key, value, created_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
            )
            .map_err(backend)?;
        stmt.execute(params![key, value, now()]).map_err(backend)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod search_tests;

#[cfg(test)]
mod batch_tests;
