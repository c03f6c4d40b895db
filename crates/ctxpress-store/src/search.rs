//! Full-text search over an archive (SQLite FTS5, ranked by bm25).
//!
//! Every archived original message gets one row per batch that stores it:
//! its searchable text (the string values of its JSON: text content,
//! tool-call names and arguments, tool results; not ids, types, signatures or
//! inline images) in the FTS5 table `search_fts`, and what it is in
//! `search_docs` (same rowid): `kind` (`original`, or `batch` for a compaction
//! summary batch), the conversation id when the writer knew it, the record
//! key (for a batch: its label) and position, and the message's role.
//!
//! A summary batch (see [`BatchArchive`](ctxpress_core::compaction::BatchArchive))
//! gets one row for its summary text (kind `batch`, key = its label, position
//! 0, no role) and one row per original message it holds (kind `original`,
//! key = its label, position in the batch). A search shows a message indexed
//! twice (a record and a batch) once.
//!
//! Within one batch a text is indexed once: first under the per-position
//! record that stands for it (what left the context), else under the batch's
//! whole-document (`doc:`) record. Rewriting a key replaces its rows.

use ctxpress_core::archive::content_hash;
use rusqlite::{Connection, Transaction, params};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Marker put before each matched term in [`Hit::snippet`].
pub const SNIPPET_OPEN: &str = "«";
/// Marker put after each matched term in [`Hit::snippet`].
pub const SNIPPET_CLOSE: &str = "»";

/// The search tables (added in schema version 2).
pub(crate) const SCHEMA: &str = "
CREATE TABLE search_docs (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    conversation TEXT,
    key TEXT NOT NULL,
    pos INTEGER NOT NULL,
    role TEXT
);
CREATE INDEX search_docs_key ON search_docs(key);
CREATE INDEX search_docs_conversation ON search_docs(conversation);
CREATE VIRTUAL TABLE search_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
";

/// What a search hit was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HitKind {
    /// An archived original message (its record is a chain key).
    Original,
    /// A compaction summary batch (its record is the batch label).
    Batch,
}

impl HitKind {
    /// The value stored in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            HitKind::Original => "original",
            HitKind::Batch => "batch",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "original" => Some(HitKind::Original),
            "batch" => Some(HitKind::Batch),
            _ => None,
        }
    }
}

/// One ranked search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// What was matched.
    pub kind: HitKind,
    /// The conversation's id, when the writer knew it.
    pub conversation: Option<String>,
    /// The record key (chain key, `doc:` key, or batch label):
    /// [`SqliteArchive::read`](crate::SqliteArchive::read) returns its originals.
    pub key: String,
    /// Position of the matched message among the record's originals.
    pub pos: usize,
    /// The matched message's role (`None` when its JSON has none).
    pub role: Option<String>,
    /// FTS5 `snippet()` of the text around the match, each matched term
    /// between [`SNIPPET_OPEN`] and [`SNIPPET_CLOSE`].
    pub snippet: String,
    /// Relevance: the negated bm25 (higher is better; hits come best first).
    pub score: f64,
}

impl Hit {
    /// The recall handle whose originals hold the matched message, when the
    /// output that archived it carries one (see `ctxpress_core::handle`).
    pub fn handle(&self) -> Option<ctxpress_core::handle::Handle> {
        self.key
            .strip_prefix("h:")
            .and_then(ctxpress_core::handle::Handle::parse)
    }

    /// The hit as `ctxpress search --json` and the proxy's
    /// `/ctxpress/search` give it: conversation, key, handle (or null), pos,
    /// role, kind, snippet, score.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "conversation": self.conversation,
            "key": self.key,
            "handle": self.handle().map(|x| x.to_string()),
            "pos": self.pos,
            "role": self.role,
            "kind": self.kind.as_str(),
            "snippet": self.snippet,
            "score": self.score,
        })
    }
}

/// Keys whose string values are never worth searching.
const SKIP: &[&str] = &[
    "role",
    "type",
    "id",
    "tool_call_id",
    "tool_use_id",
    "signature",
    "cache_control",
    "media_type",
    "data",
];

/// The searchable text of one archived message and its role: the strings of
/// its JSON, one a line. A text that is not JSON is searched as it is.
pub fn searchable(source: &str) -> (String, Option<String>) {
    match serde_json::from_str::<Value>(source) {
        Ok(v) => {
            let role = v.get("role").and_then(Value::as_str).map(str::to_string);
            let mut out = String::new();
            flatten(&v, &mut out);
            (out, role)
        }
        Err(_) => (source.to_string(), None),
    }
}

fn flatten(v: &Value, out: &mut String) {
    match v {
        Value::String(s) if !s.starts_with("data:") && !s.is_empty() => {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(s);
        }
        Value::Array(a) => a.iter().for_each(|x| flatten(x, out)),
        Value::Object(o) => {
            for (k, x) in o {
                if !SKIP.contains(&k.as_str()) {
                    flatten(x, out);
                }
            }
        }
        _ => {}
    }
}

/// An FTS5 query that searches `query` as plain terms, all of which must
/// occur: each whitespace-separated word becomes a quoted phrase (so `-`, `:`,
/// `*`, parentheses, `AND`/`OR`/`NEAR` and quotes mean nothing), and words
/// with no letter or digit are dropped. `None` when nothing is left.
pub fn fts_query(query: &str) -> Option<String> {
    let terms: Vec<String> = query
        .split_whitespace()
        .filter(|t| t.chars().any(char::is_alphanumeric))
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// Index the originals of a batch of records (last write of a key wins):
/// recall-handle (`h:`) records first, so that a hit names the handle a
/// marker in the output carries, then per-position records, then `doc:`
/// records for the texts not yet indexed. Every `h:` record gets a row for
/// each of its texts, even one another handle holds too, so that the rows
/// of a conversation list all its handles
/// ([`SqliteArchive::handles`](crate::SqliteArchive::handles)); they are
/// written in the order of the conversation (by the first of their texts in
/// the batch's `doc:` record). Called inside the batch's write transaction.
pub(crate) fn index_batch(
    tx: &Transaction<'_>,
    kind: HitKind,
    conversation: Option<&str>,
    records: &[(&str, &[String])],
) -> rusqlite::Result<()> {
    // Last write of a key wins, as in the records table.
    let mut last: Vec<(&str, &[String])> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        if !records[i + 1..].iter().any(|s| s.0 == r.0) {
            last.push(*r);
        }
    }
    // Where each text first is in the conversation (the whole document).
    let mut at: HashMap<String, usize> = HashMap::new();
    if last
        .iter()
        .filter(|r| r.0.starts_with("h:"))
        .nth(1)
        .is_some()
        && let Some((_, doc)) = last.iter().find(|r| r.0.starts_with("doc:"))
    {
        for (i, text) in doc.iter().enumerate() {
            at.entry(content_hash(text)).or_insert(i);
        }
    }
    let first_at = |originals: &[String]| {
        originals
            .iter()
            .filter_map(|t| at.get(&content_hash(t)).copied())
            .min()
            .unwrap_or(usize::MAX)
    };
    last.sort_by_cached_key(|r| {
        let handle = r.0.starts_with("h:");
        let place = if handle && !at.is_empty() {
            first_at(r.1)
        } else {
            0
        };
        (!handle, r.0.starts_with("doc:"), place)
    });
    let mut seen = HashSet::new();
    for (key, originals) in last {
        clear_key(tx, key)?;
        // The separators of a document (core::archive) are not messages,
        // and a marker's output text (`n:`) is no original.
        if key.starts_with("gaps:") || key.starts_with("n:") {
            continue;
        }
        let handle = key.starts_with("h:");
        let mut own = HashSet::new();
        for (pos, text) in originals.iter().enumerate() {
            let hash = content_hash(text);
            let fresh = if handle {
                seen.insert(hash.clone());
                own.insert(hash)
            } else {
                seen.insert(hash)
            };
            if fresh {
                index_one(tx, kind, conversation, key, pos, text)?;
            }
        }
    }
    Ok(())
}

/// Index the originals a summary batch holds under its label (kind
/// `original`, positions as in the batch), after its summary row; each text
/// once.
pub(crate) fn index_batch_originals(
    tx: &Transaction<'_>,
    conversation: &str,
    label: &str,
    originals: &[String],
) -> rusqlite::Result<()> {
    let mut seen = HashSet::new();
    for (pos, text) in originals.iter().enumerate() {
        if seen.insert(content_hash(text)) {
            index_one(tx, HitKind::Original, Some(conversation), label, pos, text)?;
        }
    }
    Ok(())
}

pub(crate) fn clear_key(tx: &Connection, key: &str) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "DELETE FROM search_fts WHERE rowid IN (SELECT id FROM search_docs WHERE key = ?1)",
    )?
    .execute([key])?;
    tx.prepare_cached("DELETE FROM search_docs WHERE key = ?1")?
        .execute([key])?;
    Ok(())
}

fn index_one(
    tx: &Connection,
    kind: HitKind,
    conversation: Option<&str>,
    key: &str,
    pos: usize,
    source: &str,
) -> rusqlite::Result<()> {
    let (text, role) = searchable(source);
    let pos = i64::try_from(pos).unwrap_or(i64::MAX);
    tx.prepare_cached(
        "INSERT INTO search_docs (kind, conversation, key, pos, role) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![kind.as_str(), conversation, key, pos, role])?;
    let id = tx.last_insert_rowid();
    tx.prepare_cached("INSERT INTO search_fts (rowid, text) VALUES (?1, ?2)")?
        .execute(params![id, text])?;
    Ok(())
}

/// Index every record already in the archive (an archive written before the
/// index existed; conversations unknown).
pub(crate) fn backfill(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare(
        "SELECT rb.key, rb.pos, rb.hash, b.text FROM record_blobs rb \
         JOIN blobs b ON b.hash = rb.hash \
         ORDER BY rb.key NOT LIKE 'h:%', rb.key LIKE 'doc:%', rb.key, rb.pos",
    )?;
    let mut rows = stmt.query([])?;
    let mut seen = HashSet::new();
    while let Some(row) = rows.next()? {
        let (key, pos, hash, text): (String, i64, String, String) =
            (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?);
        if seen.insert(hash) {
            let pos = usize::try_from(pos).unwrap_or(0);
            index_one(tx, HitKind::Original, None, &key, pos, &text)?;
        }
    }
    Ok(())
}

/// Run a search (see [`SqliteArchive::search`](crate::SqliteArchive::search)).
pub(crate) fn search(
    conn: &Connection,
    query: &str,
    conversation: Option<&str>,
    limit: usize,
) -> rusqlite::Result<Vec<Hit>> {
    let Some(q) = fts_query(query) else {
        return Ok(Vec::new());
    };
    if limit == 0 {
        return Ok(Vec::new());
    }
    // The same message may be indexed twice (as a record `compress
    // --archive` or `compact` wrote, and inside a summary batch): one hit
    // is shown, so a few more rows are read than asked for.
    let wanted = limit;
    let limit = i64::try_from(limit.saturating_mul(2).saturating_add(16)).unwrap_or(i64::MAX);
    let sql = format!(
        "SELECT d.kind, d.conversation, d.key, d.pos, d.role, \
         snippet(search_fts, 0, '{SNIPPET_OPEN}', '{SNIPPET_CLOSE}', '…', 16), bm25(search_fts) \
         FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid \
         WHERE search_fts MATCH ?1 AND (?2 IS NULL OR d.conversation = ?2) \
         ORDER BY bm25(search_fts), d.id LIMIT ?3"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![q, conversation, limit], |r| {
        let kind: String = r.get(0)?;
        let pos: i64 = r.get(3)?;
        let bm25: f64 = r.get(6)?;
        Ok(Hit {
            kind: HitKind::parse(&kind).unwrap_or(HitKind::Original),
            conversation: r.get(1)?,
            key: r.get(2)?,
            pos: usize::try_from(pos).unwrap_or(0),
            role: r.get(4)?,
            snippet: r.get(5)?,
            score: -bm25,
        })
    })?;
    let mut seen = HashSet::new();
    let mut hits = Vec::new();
    for h in rows {
        let h = h?;
        let same = (
            h.kind,
            h.conversation.clone(),
            h.role.clone(),
            h.snippet.clone(),
        );
        if h.kind == HitKind::Original && !seen.insert(same) {
            continue;
        }
        hits.push(h);
        if hits.len() == wanted {
            break;
        }
    }
    Ok(hits)
}
