//! The session table: the key a request's conversation is kept under, the
//! sessions by key with their memory and idle accounting, and the archive as
//! one session sees it.

use axum::http::HeaderMap;
use ctxpress::session::{content_read_hash, read_hash};
use ctxpress::store::SqliteArchive;
use ctxpress::{Conversation, Session};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::{SESSION_HEADER, Shared};

/// Sessions by key, least recently used first; what each is estimated to
/// hold and when it was last used.
#[derive(Default)]
pub(crate) struct Sessions {
    pub(crate) map: HashMap<String, Arc<tokio::sync::Mutex<Session>>>,
    order: VecDeque<String>,
    bytes: HashMap<String, usize>,
    used: HashMap<String, Instant>,
    pub(crate) total: usize,
}

impl Sessions {
    /// Drop `key`'s accounting (it left the table).
    fn forget(&mut self, key: &str) {
        if let Some(b) = self.bytes.remove(key) {
            self.total -= b;
        }
        self.used.remove(key);
    }

    /// Drop the accounting of keys no longer in the table (the count cap
    /// drops sessions without it).
    fn sync(&mut self) {
        if self.bytes.len() > self.map.len() {
            let gone: Vec<String> = self
                .bytes
                .keys()
                .filter(|k| !self.map.contains_key(*k))
                .cloned()
                .collect();
            for k in gone {
                self.forget(&k);
            }
        }
    }

    /// Drop the least recently used session; false when there is none.
    fn drop_oldest(&mut self) -> bool {
        let Some(old) = self.order.pop_front() else {
            return false;
        };
        self.map.remove(&old);
        self.forget(&old);
        true
    }

    /// Drop the sessions unused for `idle` (the oldest are first in line);
    /// how many went.
    fn expire(&mut self, idle: Duration, now: Instant) -> u64 {
        let mut n = 0;
        while let Some(k) = self.order.front() {
            // A session not yet accounted is being made: used now.
            let used = self.used.get(k).copied().unwrap_or(now);
            if now.saturating_duration_since(used) < idle {
                break;
            }
            self.drop_oldest();
            n += 1;
        }
        n
    }
}

/// Headers that carry the client's credential.
const CREDENTIALS: &[&str] = &["authorization", "x-api-key", "api-key", "x-goog-api-key"];

/// Body fields by which a client names its user or conversation, the same
/// on every turn: Anthropic `metadata.user_id` (Claude Code's holds its
/// session id), OpenAI `prompt_cache_key`, `safety_identifier`, `user`.
fn client_ids(conv: &Conversation) -> [Option<&serde_json::Value>; 4] {
    let f = &conv.envelope.fields;
    [
        f.get("metadata").and_then(|m| m.get("user_id")),
        f.get("prompt_cache_key"),
        f.get("safety_identifier"),
        f.get("user"),
    ]
}

/// The session key: the client (a hash of its credential, salted per
/// process so that the logged key tells nothing about it) and the
/// conversation: the `x-ctxpress-session` header when sent, else the system
/// prompt, the first user message and the ids the client gives in the body.
/// What is hashed is what the provider reads of them (cache markers left
/// out), so the key is the same from the first request on while the client
/// moves its markers (a first user message is the newest one, marked, in
/// the first request only).
pub(crate) fn session_key(salt: &RandomState, headers: &HeaderMap, conv: &Conversation) -> String {
    let mut h = salt.build_hasher();
    for name in CREDENTIALS {
        if let Some(v) = headers.get(*name) {
            name.hash(&mut h);
            v.as_bytes().hash(&mut h);
        }
    }
    if let Some(v) = headers.get(SESSION_HEADER) {
        v.as_bytes().hash(&mut h);
        return format!("x{:016x}", h.finish());
    }
    let system = match conv.envelope.fields.get("system") {
        Some(v) => Some(content_read_hash(v)),
        None => conv
            .messages
            .iter()
            .find(|m| matches!(m.role_str(), "system" | "developer"))
            .map(read_hash),
    };
    system.hash(&mut h);
    conv.messages
        .iter()
        .find(|m| m.role_str() == "user")
        .map(read_hash)
        .hash(&mut h);
    for id in client_ids(conv) {
        id.map(|v| v.to_string()).hash(&mut h);
    }
    format!("h{:016x}", h.finish())
}

pub(crate) fn session_for(
    s: &Shared,
    key: &str,
) -> Result<Arc<tokio::sync::Mutex<Session>>, String> {
    let mut g = s.sessions.lock().map_err(|_| "session table poisoned")?;
    if let Some(x) = g.map.get(key).cloned() {
        if let Some(p) = g.order.iter().position(|k| k == key) {
            g.order.remove(p);
        }
        g.order.push_back(key.to_string());
        return Ok(x);
    }
    let session = Session::new(&s.cfg.pipeline)
        .map_err(|e| e.to_string())?
        .with_archive(s.archive.clone().map(|a| a as Arc<dyn ctxpress::Archive>));
    let x = Arc::new(tokio::sync::Mutex::new(session));
    g.map.insert(key.to_string(), x.clone());
    g.order.push_back(key.to_string());
    while g.map.len() > s.cfg.max_sessions.max(1) {
        let Some(old) = g.order.pop_front() else {
            break;
        };
        g.map.remove(&old);
    }
    Ok(x)
}

/// The archive as one session sees it: every record filed under the
/// session's conversation id, so search can answer for that conversation
/// alone.
pub(crate) struct Filed {
    pub(crate) archive: Arc<SqliteArchive>,
    pub(crate) conversation: String,
}

impl ctxpress::core::Archive for Filed {
    fn put(
        &self,
        records: &[ctxpress::core::archive::Record],
    ) -> Result<(), ctxpress::core::archive::ArchiveError> {
        self.archive.put_for(Some(&self.conversation), records)
    }
    fn get(&self, key: &str) -> Result<Option<Vec<String>>, ctxpress::core::archive::ArchiveError> {
        self.archive.get(key)
    }
    fn put_for(
        &self,
        _conversation: Option<&str>,
        records: &[ctxpress::core::archive::Record],
    ) -> Result<(), ctxpress::core::archive::ArchiveError> {
        self.archive.put_for(Some(&self.conversation), records)
    }
    fn cache_get(
        &self,
        key: &str,
    ) -> Result<Option<String>, ctxpress::core::archive::ArchiveError> {
        self.archive.cache_get(key)
    }
    fn cache_put(
        &self,
        key: &str,
        value: &str,
    ) -> Result<(), ctxpress::core::archive::ArchiveError> {
        self.archive.cache_put(key, value)
    }
}

/// Note what session `key` holds now, then drop sessions, least recently
/// used first, until the table is within the memory budget, and those
/// unused for the idle time.
pub(crate) fn settle(s: &Shared, key: &str, bytes: usize) {
    let Ok(mut g) = s.sessions.lock() else {
        return;
    };
    g.sync();
    let now = Instant::now();
    if g.map.contains_key(key) {
        let bytes = bytes + 2 * key.len() + 128;
        let old = g.bytes.insert(key.to_string(), bytes).unwrap_or(0);
        g.total = g.total - old + bytes;
        g.used.insert(key.to_string(), now);
    }
    let mut dropped = g.expire(s.cfg.session_idle, now);
    while g.total > s.cfg.session_memory && g.drop_oldest() {
        dropped += 1;
    }
    s.metrics
        .sessions_dropped
        .fetch_add(dropped, Ordering::Relaxed);
}

/// Drop the sessions unused for the idle time.
pub(crate) fn expire(s: &Shared) {
    if let Ok(mut g) = s.sessions.lock() {
        g.sync();
        let n = g.expire(s.cfg.session_idle, Instant::now());
        s.metrics.sessions_dropped.fetch_add(n, Ordering::Relaxed);
    }
}
