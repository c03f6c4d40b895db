//! Provenance and the archive of originals.
//!
//! After compression every output message stands for a run of input messages
//! (itself when unchanged; the messages it summarizes; messages removed just
//! before it). For each output message whose run is not just itself, one
//! [`Record`] maps a *chain key* to the exact source text of the originals. The
//! chain key hashes the conversation's id (when its envelope has one) and
//! every output message up to and including this one, so identical texts in
//! different places or conversations never collide, and messages appended
//! after compression leave earlier keys valid. [`expand`] walks a
//! conversation, swaps each keyed message for its originals, and repeats
//! until nothing matches, undoing several rounds.
//!
//! Keys hash what the messages *mean*, not how they are written
//! ([`crate::canonical`]): an output parsed and written again by
//! another JSON library (keys sorted, `\u2026` for `…`, pretty-printed,
//! fields added around the messages) still expands. The restored originals
//! are the archived bytes. Keys of this kind start with `c:` (`doc:c:`,
//! `gaps:c:`); archives written before them hold *raw* keys (32 hex digits,
//! hashing the source text before the first message and each message's
//! bytes), which [`expand`] still tries first, so an output written back
//! byte-identical expands from an old archive too.
//!
//! [`Archive`] is the store behind it (`put` of a batch of records, `get`, and
//! `recall` of a handle's record); [`MemoryArchive`] keeps it in memory,
//! `ctxpress-store` in SQLite. [`records`] also writes one `h:` record per
//! recall handle in the output (see [`handle`](crate::handle)).

use crate::canonical;
use crate::conversation::Conversation;
use crate::handle::Handle;
use crate::message::MessageId;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Archive failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The storage backend failed.
    #[error("archive backend: {0}")]
    Backend(String),
    /// Stored data could not be read back.
    #[error("archive data is corrupt: {0}")]
    Corrupt(String),
    /// What a write was based on changed since it was read: another run
    /// (process or thread) wrote the same conversation at the same time.
    /// Nothing was written; reading again and redoing the work succeeds.
    #[error("archive changed by another run: {0}")]
    Conflict(String),
}

/// One mapping: the output position identified by `key` stands for `originals`
/// (exact JSON texts of input messages, in order; possibly none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Chain key (32 hex digits).
    pub key: String,
    /// Source texts of the original messages.
    pub originals: Vec<String>,
}

/// Storage for records. Implementations must store a batch atomically.
pub trait Archive: Send + Sync {
    /// Store records (one transaction).
    fn put(&self, records: &[Record]) -> Result<(), ArchiveError>;
    /// The originals recorded under `key`.
    fn get(&self, key: &str) -> Result<Option<Vec<String>>, ArchiveError>;
    /// The originals a recall handle stands for (see [`crate::handle`]),
    /// as archived: exact JSON texts of input messages, in order. `None`
    /// when this archive holds no such handle.
    fn recall(&self, handle: &Handle) -> Result<Option<Vec<String>>, ArchiveError> {
        self.get(&handle.record_key())
    }
    /// Store the records of one conversation (one transaction), with its id
    /// when known, for backends that index by conversation (search). The
    /// default ignores the id.
    fn put_for(&self, conversation: Option<&str>, records: &[Record]) -> Result<(), ArchiveError> {
        let _ = conversation;
        self.put(records)
    }
    /// Cached value of a summarizer call (key is content hash + prompt + model).
    fn cache_get(&self, _key: &str) -> Result<Option<String>, ArchiveError> {
        Ok(None)
    }
    /// Store a summarizer result.
    fn cache_put(&self, _key: &str, _value: &str) -> Result<(), ArchiveError> {
        Ok(())
    }
}

/// An in-memory archive.
#[derive(Debug, Default)]
pub struct MemoryArchive {
    records: Mutex<HashMap<String, Vec<String>>>,
    cache: Mutex<HashMap<String, String>>,
}

impl MemoryArchive {
    /// An empty archive.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.lock().map(|r| r.len()).unwrap_or(0)
    }
    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn poisoned<T>(_: T) -> ArchiveError {
    ArchiveError::Backend("lock poisoned".into())
}

impl Archive for MemoryArchive {
    fn put(&self, records: &[Record]) -> Result<(), ArchiveError> {
        let mut m = self.records.lock().map_err(poisoned)?;
        for r in records {
            m.insert(r.key.clone(), r.originals.clone());
        }
        Ok(())
    }
    fn get(&self, key: &str) -> Result<Option<Vec<String>>, ArchiveError> {
        Ok(self.records.lock().map_err(poisoned)?.get(key).cloned())
    }
    fn cache_get(&self, key: &str) -> Result<Option<String>, ArchiveError> {
        Ok(self.cache.lock().map_err(poisoned)?.get(key).cloned())
    }
    fn cache_put(&self, key: &str, value: &str) -> Result<(), ArchiveError> {
        self.cache
            .lock()
            .map_err(poisoned)?
            .insert(key.into(), value.into());
        Ok(())
    }
}

impl<A: Archive + ?Sized> Archive for std::sync::Arc<A> {
    fn put(&self, records: &[Record]) -> Result<(), ArchiveError> {
        (**self).put(records)
    }
    fn put_for(&self, conversation: Option<&str>, records: &[Record]) -> Result<(), ArchiveError> {
        (**self).put_for(conversation, records)
    }
    fn get(&self, key: &str) -> Result<Option<Vec<String>>, ArchiveError> {
        (**self).get(key)
    }
    fn cache_get(&self, key: &str) -> Result<Option<String>, ArchiveError> {
        (**self).cache_get(key)
    }
    fn cache_put(&self, key: &str, value: &str) -> Result<(), ArchiveError> {
        (**self).cache_put(key, value)
    }
}

/// Content hash used for blobs and cache keys (xxh3-128, hex).
pub fn content_hash(text: &str) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
}

fn chain(prev: u128, text: &str) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&prev.to_le_bytes());
    h.update(text.as_bytes());
    h.digest128()
}

const END: &str = "\u{0}end";

/// Chain keys of a conversation, as [`records`] writes them: one per
/// message, then one for the end.
pub fn chain_keys(conv: &Conversation) -> Vec<String> {
    let (mut keys, mut ends) = prefix_keys(conv, Scheme::Canonical);
    keys.extend(ends.pop());
    keys
}

/// For each output message, the input indices it stands for, plus those of the
/// end slot (messages removed after the last survivor). Uses message ids and
/// the `replaces` annotations. When stages reordered messages, everything is
/// attributed to the first output slot so that expansion stays exact.
pub fn provenance(input: &Conversation, output: &Conversation) -> (Vec<Vec<usize>>, Vec<usize>) {
    let index: HashMap<&MessageId, usize> = input
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id(), i))
        .collect();
    let mut origins: Vec<Vec<usize>> = output
        .messages
        .iter()
        .map(|m| {
            let mut acc = Vec::new();
            let mut seen = HashSet::new();
            resolve(m.id(), output, &index, &mut acc, &mut seen);
            acc.sort_unstable();
            acc.dedup();
            acc
        })
        .collect();
    // An input index claimed by two outputs belongs to the first.
    let mut claimed = HashSet::new();
    for o in &mut origins {
        o.retain(|i| claimed.insert(*i));
    }
    let mut removed: Vec<usize> = (0..input.messages.len())
        .filter(|i| !claimed.contains(i))
        .collect();
    let mut end = Vec::new();
    // Attach each removed index to the first output slot whose first origin follows it.
    let firsts: Vec<Option<usize>> = origins.iter().map(|o| o.first().copied()).collect();
    for r in removed.drain(..) {
        match firsts.iter().position(|f| f.is_some_and(|f| f > r)) {
            Some(p) => origins[p].push(r),
            None => end.push(r),
        }
    }
    for o in &mut origins {
        o.sort_unstable();
    }
    end.sort_unstable();
    let flat: Vec<usize> = origins
        .iter()
        .flatten()
        .chain(end.iter())
        .copied()
        .collect();
    if flat.windows(2).any(|w| w[0] >= w[1]) || flat.len() != input.messages.len() {
        // Not order-preserving: give the whole input to the first slot.
        let all: Vec<usize> = (0..input.messages.len()).collect();
        if origins.is_empty() {
            return (origins, all);
        }
        for o in &mut origins {
            o.clear();
        }
        origins[0] = all;
        end.clear();
    }
    (origins, end)
}

fn resolve(
    id: &MessageId,
    output: &Conversation,
    index: &HashMap<&MessageId, usize>,
    acc: &mut Vec<usize>,
    seen: &mut HashSet<MessageId>,
) {
    if !seen.insert(id.clone()) {
        return;
    }
    if let Some(&i) = index.get(id) {
        acc.push(i);
    }
    if let Some(a) = output.ann(id) {
        for r in &a.replaces {
            resolve(r, output, index, acc, seen);
        }
    }
}

/// The records that let [`expand`] turn `output` back into `input`: one for the
/// whole document (keyed `doc:` + the output's end key), and one per changed
/// output position for conversations that were extended after compression.
/// A per-position record whose first original has the same text as the output
/// message, or whose key closes a prefix the input shares, is left out: after
/// expansion the same key would match again.
pub fn records(input: &Conversation, output: &Conversation) -> Vec<Record> {
    let in_texts: Vec<String> = input
        .messages
        .iter()
        .map(|m| input.message_json(m))
        .collect();
    let out_texts: Vec<String> = output
        .messages
        .iter()
        .map(|m| output.message_json(m))
        .collect();
    if in_texts == out_texts && input.envelope.prefix == output.envelope.prefix {
        return Vec::new();
    }
    let (origins, end) = provenance(input, output);
    let keys = chain_keys(output);
    // A key the input itself produces closes an unchanged prefix: its record
    // would fire again on the restored input (and, after the reordering
    // fallback, delete messages that stand for nothing only in the output).
    let input_keys: HashSet<String> = if canonical_seed(input) == canonical_seed(output) {
        chain_keys(input).into_iter().collect()
    } else {
        HashSet::new()
    };
    let mut out = vec![Record {
        key: format!("doc:{}", keys[keys.len() - 1]),
        originals: in_texts.clone(),
    }];
    if !input.envelope.uniform {
        // The input's separators, when they differ, so expand writes them back.
        out.push(Record {
            key: format!("gaps:{}", keys[keys.len() - 1]),
            originals: (1..input.messages.len())
                .map(|i| input.gap_before(i).to_string())
                .collect(),
        });
    }
    for (i, (own, o)) in out_texts.iter().zip(&origins).enumerate() {
        let originals: Vec<String> = o.iter().map(|&j| in_texts[j].clone()).collect();
        // The same meaning counts as the same text: the key is made of it.
        if originals.first().is_some_and(|f| canonical::same(f, own))
            || input_keys.contains(&keys[i])
        {
            continue;
        }
        out.push(Record {
            key: keys[i].clone(),
            originals,
        });
    }
    if !end.is_empty() && !input_keys.contains(&keys[keys.len() - 1]) {
        out.push(Record {
            key: keys[keys.len() - 1].clone(),
            originals: end.iter().map(|&j| in_texts[j].clone()).collect(),
        });
    }
    out.extend(handle_records(input, output, &in_texts, &out_texts));
    out
}

/// The archive key of the output message whose marker a handle is (what
/// the model saw in the place of the originals: `n:` + the handle without
/// `#`). Not searched; the MCP server's outline shows it.
pub fn note_key(h: &Handle) -> String {
    format!("n:{}", h.as_str())
}

/// One record per recall handle written in the output (`h:` + handle, see
/// [`crate::handle`]): the input messages the marker's messages came from,
/// in input order; and one per marker message, its output text under
/// [`note_key`].
fn handle_records(
    input: &Conversation,
    output: &Conversation,
    in_texts: &[String],
    out_texts: &[String],
) -> Vec<Record> {
    let written: HashSet<Handle> = out_texts
        .iter()
        .flat_map(|t| crate::handle::find_all(t))
        .collect();
    if written.is_empty() {
        return Vec::new();
    }
    let index: HashMap<&MessageId, usize> = input
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id(), i))
        .collect();
    let mut marks: Vec<&crate::handle::HandleMark> = output
        .annotations()
        .values()
        .flat_map(|a| &a.handles)
        .filter(|m| written.contains(&m.handle))
        .collect();
    marks.sort_by(|a, b| a.handle.cmp(&b.handle));
    marks.dedup_by(|a, b| a.handle == b.handle);
    // Each marker message as the output has it, under its first handle
    // (the marker's own); a later handle of its text (a ledger line's) gets
    // the line it ends, as a message of the same role.
    let mut notes: Vec<Record> = Vec::new();
    for (m, t) in output.messages.iter().zip(out_texts) {
        let found = crate::handle::find_all(t);
        let Some(first) = found.first() else {
            continue;
        };
        let text = m.text();
        for h in &found {
            if notes.iter().any(|n| n.key == note_key(h)) || !marks.iter().any(|m| m.handle == *h) {
                continue;
            }
            let note = if h == first {
                t.clone()
            } else {
                let Some(line) = text.lines().find(|l| l.contains(&h.to_string())) else {
                    continue;
                };
                serde_json::json!({"role": m.role_str(), "content": line}).to_string()
            };
            notes.push(Record {
                key: note_key(h),
                originals: vec![note],
            });
        }
    }
    let recalls: Vec<Record> = marks
        .into_iter()
        .filter_map(|m| {
            let mut at = Vec::new();
            let mut seen = HashSet::new();
            for id in &m.stands_for {
                resolve(id, output, &index, &mut at, &mut seen);
            }
            at.sort_unstable();
            at.dedup();
            (!at.is_empty()).then(|| Record {
                key: m.handle.record_key(),
                originals: at.iter().map(|&j| in_texts[j].clone()).collect(),
            })
        })
        .collect();
    // A note only for a handle that recalls something.
    notes.retain(|n| {
        recalls
            .iter()
            .any(|r| r.key.strip_prefix("h:") == n.key.strip_prefix("n:"))
    });
    recalls.into_iter().chain(notes).collect()
}

/// Store the records for `input` → `output`; returns how many were written.
pub fn archive(
    input: &Conversation,
    output: &Conversation,
    archive: &dyn Archive,
) -> Result<usize, ArchiveError> {
    let r = records(input, output);
    if !r.is_empty() {
        archive.put(&r)?;
    }
    Ok(r.len())
}

/// Restore the originals of a compressed conversation, through any number of
/// rounds. Each pass finds the longest leading run of messages that is
/// the output of an archived compression (its end key has a `doc:` record) and
/// swaps it for that compression's input, keeping what follows (messages
/// appended after compression). When no prefix matches, one pass of the
/// per-position records is tried. Messages the archive does not know are kept.
///
/// Messages match by meaning (see the module docs): at each place the raw
/// key of archives written before canonical keys is tried first, then the
/// canonical one.
pub fn expand(conv: &Conversation, archive: &dyn Archive) -> Result<Conversation, ArchiveError> {
    let mut cur = conv.clone();
    let mut seen = HashSet::new();
    for _round in 0..1024 {
        let schemes = [
            prefix_keys(&cur, Scheme::Raw),
            prefix_keys(&cur, Scheme::Canonical),
        ];
        let mut doc = None;
        'find: for k in (0..=cur.messages.len()).rev() {
            for (_, ends) in &schemes {
                // A key used once in this expansion cannot apply again: the input it
                // restored merely starts like that output (e.g. a trailing repeat removed).
                if seen.contains(&ends[k]) {
                    continue;
                }
                if let Some(orig) = archive.get(&format!("doc:{}", ends[k]))? {
                    doc = Some((k, ends[k].clone(), orig));
                    break 'find;
                }
            }
        }
        if let Some((k, end, mut texts)) = doc {
            let gaps = archive.get(&format!("gaps:{end}"))?;
            seen.insert(end);
            let restored = texts.len();
            texts.extend(cur.messages[k..].iter().map(|m| cur.message_json(m)));
            cur = rebuild(&cur, texts, gaps.filter(|g| g.len() + 1 == restored))?;
            continue;
        }
        let mut hit = false;
        let mut texts: Vec<String> = Vec::with_capacity(cur.messages.len());
        for (i, m) in cur.messages.iter().enumerate() {
            match first_hit(archive, schemes.iter().map(|s| &s.0[i]))? {
                Some(orig) => {
                    hit = true;
                    texts.extend(orig);
                }
                None => texts.push(cur.message_json(m)),
            }
        }
        let end = cur.messages.len();
        if let Some(orig) = first_hit(archive, schemes.iter().map(|s| &s.1[end]))? {
            hit = true;
            texts.extend(orig);
        }
        if !hit {
            return Ok(cur);
        }
        cur = rebuild(&cur, texts, None)?;
    }
    Err(ArchiveError::Corrupt(
        "expansion did not converge after 1024 rounds".into(),
    ))
}

/// The originals of the first of `keys` the archive has.
fn first_hit<'a>(
    archive: &dyn Archive,
    keys: impl Iterator<Item = &'a String>,
) -> Result<Option<Vec<String>>, ArchiveError> {
    for k in keys {
        if let Some(o) = archive.get(k)? {
            return Ok(Some(o));
        }
    }
    Ok(None)
}

/// How chain keys are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    /// The source text before the first message and each message's bytes;
    /// 32 hex digits (archives written before canonical keys).
    Raw,
    /// The conversation's id and each message's meaning
    /// ([`canonical::digest`]); `c:` and 32 hex digits.
    Canonical,
}

/// Where the canonical chain starts: the conversation's id, by meaning, when
/// its envelope has one (so equal outputs of different conversations do not
/// share keys); nothing else of the envelope counts.
fn canonical_seed(conv: &Conversation) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(b"ctxpress canonical chain 1");
    if let Some(id) = conv.envelope.fields.get("id") {
        h.update(&canonical::digest(&id.to_string()).to_le_bytes());
    }
    h.digest128()
}

/// Per-message chain keys, and the end key of every prefix (`ends[k]` closes
/// the first `k` messages; `ends[len]` is the whole conversation's end key).
fn prefix_keys(conv: &Conversation, scheme: Scheme) -> (Vec<String>, Vec<String>) {
    let (mut h, tag) = match scheme {
        Scheme::Raw => (
            xxhash_rust::xxh3::xxh3_128(conv.envelope.prefix.as_bytes()),
            "",
        ),
        Scheme::Canonical => (canonical_seed(conv), "c:"),
    };
    let mut keys = Vec::with_capacity(conv.messages.len());
    let mut ends = Vec::with_capacity(conv.messages.len() + 1);
    ends.push(format!("{tag}{:032x}", chain(h, END)));
    for m in &conv.messages {
        let text = conv.message_json(m);
        h = match scheme {
            Scheme::Raw => chain(h, &text),
            Scheme::Canonical => chain_digest(h, canonical::digest(&text)),
        };
        keys.push(format!("{tag}{h:032x}"));
        ends.push(format!("{tag}{:032x}", chain(h, END)));
    }
    (keys, ends)
}

fn chain_digest(prev: u128, digest: u128) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&prev.to_le_bytes());
    h.update(&digest.to_le_bytes());
    h.digest128()
}

/// The document of `texts` in `cur`'s envelope; `gaps` are the separators
/// between the first `gaps.len() + 1` texts (the envelope's elsewhere).
fn rebuild(
    cur: &Conversation,
    texts: Vec<String>,
    gaps: Option<Vec<String>>,
) -> Result<Conversation, ArchiveError> {
    let env = &cur.envelope;
    let gaps = gaps.unwrap_or_default();
    let mut doc = env.prefix.clone();
    for (i, t) in texts.iter().enumerate() {
        if i > 0 {
            doc.push_str(gaps.get(i - 1).map_or(env.sep.as_str(), String::as_str));
        }
        doc.push_str(t);
    }
    doc.push_str(&env.suffix);
    let mut next = Conversation::parse(&doc)
        .map_err(|e| ArchiveError::Corrupt(format!("expanded document does not parse: {e}")))?;
    next.envelope.sep = env.sep.clone();
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    const DOC: &str = r#"{"id": "c", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]}"#;

    #[test]
    fn removal_summary_and_trailing_removal_expand_exactly() {
        let input = Conversation::parse(DOC).unwrap();
        let mut out = input.clone();
        // summarize messages 1-2 into one new message, drop message 4 (trailing).
        let sid = out.fresh_id("sum");
        let summary = Message::text_message(sid.clone(), "user", "[summary: a b]");
        let (m1, m2) = (out.messages[1].id().clone(), out.messages[2].id().clone());
        out.ann_mut(&sid).replaces = vec![m1, m2];
        out.messages.splice(1..3, [summary]);
        out.messages.pop();
        let arch = MemoryArchive::new();
        archive(&input, &out, &arch).unwrap();
        let back = expand(&out, &arch).unwrap();
        assert_eq!(back.to_json_string(), DOC);
    }

    #[test]
    fn two_rounds_and_appended_messages() {
        let input = Conversation::parse(DOC).unwrap();
        let arch = MemoryArchive::new();
        let mut r1 = input.clone();
        r1.messages.remove(1);
        archive(&input, &r1, &arch).unwrap();
        let r1 = Conversation::parse(&r1.to_json_string()).unwrap();
        let mut r2 = r1.clone();
        r2.messages[1].set_text("B");
        archive(&r1, &r2, &arch).unwrap();
        let mut r2 = Conversation::parse(&r2.to_json_string()).unwrap();
        assert_eq!(expand(&r2, &arch).unwrap().to_json_string(), DOC);
        // a message appended after compression survives expansion
        r2.messages
            .push(Message::text_message(MessageId::new("new"), "user", "more"));
        let back = expand(&r2, &arch).unwrap();
        assert_eq!(back.messages.len(), 6);
        assert_eq!(back.messages[5].text(), "more");
    }

    #[test]
    fn two_rounds_then_appended_restores_everything() {
        let input = Conversation::parse(DOC).unwrap();
        let arch = MemoryArchive::new();
        let mut r1 = input.clone();
        r1.messages.remove(3);
        archive(&input, &r1, &arch).unwrap();
        let r1 = Conversation::parse(&r1.to_json_string()).unwrap();
        let mut r2 = r1.clone();
        r2.messages.remove(1);
        archive(&r1, &r2, &arch).unwrap();
        let mut r2 = Conversation::parse(&r2.to_json_string()).unwrap();
        r2.messages
            .push(Message::text_message(MessageId::new("n1"), "user", "more"));
        r2.messages.push(Message::text_message(
            MessageId::new("n2"),
            "assistant",
            "ok",
        ));
        let back = expand(&r2, &arch).unwrap();
        let want: Vec<String> = input
            .messages
            .iter()
            .map(|m| input.message_json(m))
            .collect();
        let got: Vec<String> = back.messages.iter().map(|m| back.message_json(m)).collect();
        assert_eq!(&got[..5], &want[..]);
        assert_eq!(got.len(), 7);
    }

    #[test]
    fn reordering_falls_back_to_whole_input() {
        let input = Conversation::parse(DOC).unwrap();
        let mut out = input.clone();
        out.messages.swap(1, 2);
        let arch = MemoryArchive::new();
        archive(&input, &out, &arch).unwrap();
        assert_eq!(expand(&out, &arch).unwrap().to_json_string(), DOC);
    }

    #[test]
    fn reordering_after_an_unchanged_prefix_keeps_the_prefix() {
        // The fallback gives every input to slot 0; the unchanged messages
        // after it stand for nothing, and a record saying so would delete
        // them again once the whole document is restored.
        let input = Conversation::parse(DOC).unwrap();
        let mut out = input.clone();
        out.messages.swap(3, 4);
        let arch = MemoryArchive::new();
        archive(&input, &out, &arch).unwrap();
        assert_eq!(expand(&out, &arch).unwrap().to_json_string(), DOC);
    }

    #[test]
    fn removed_duplicate_text_does_not_loop() {
        let doc = r#"[{"role":"user","content":"a"},{"role":"user","content":"ok"},{"role":"user","content":"ok"}]"#;
        let input = Conversation::parse(doc).unwrap();
        let mut out = input.clone();
        out.messages.remove(1);
        let arch = MemoryArchive::new();
        archive(&input, &out, &arch).unwrap();
        assert_eq!(expand(&out, &arch).unwrap().to_json_string(), doc);
        let mut more = Conversation::parse(&out.to_json_string()).unwrap();
        more.messages
            .push(Message::text_message(MessageId::new("n"), "user", "ok"));
        // the compressed prefix expands; the appended message stays
        assert_eq!(expand(&more, &arch).unwrap().messages.len(), 4);
    }

    fn message_texts(c: &Conversation) -> Vec<String> {
        c.messages.iter().map(|m| c.message_json(m)).collect()
    }

    /// A document with an id, non-ASCII text and numbers, compressed: one
    /// message summarized, the last dropped.
    fn compressed() -> (Conversation, Conversation) {
        let doc = r#"{"id": "c1", "messages": [{"role": "system", "content": "s…", "n": 1.50}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b é"}, {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]}"#;
        let input = Conversation::parse(doc).unwrap();
        let mut out = input.clone();
        let sid = out.fresh_id("sum");
        let summary = Message::text_message(sid.clone(), "user", "[summary: a … b]");
        let (m1, m2) = (out.messages[1].id().clone(), out.messages[2].id().clone());
        out.ann_mut(&sid).replaces = vec![m1, m2];
        out.messages.splice(1..3, [summary]);
        out.messages.pop();
        (input, out)
    }

    #[test]
    fn an_output_written_again_by_another_json_writer_expands() {
        let (input, out) = compressed();
        let arch = MemoryArchive::new();
        archive(&input, &out, &arch).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out.to_json_string()).unwrap();
        let mut with_field = ctxpress_tests::json::sorted_keys(&v);
        with_field["added_by_a_client"] = serde_json::json!({"x": [1, 2]});
        let ascii = |t: String| {
            t.chars()
                .map(|c| match c {
                    c if c.is_ascii() => c.to_string(),
                    c => c
                        .encode_utf16(&mut [0; 2])
                        .iter()
                        .map(|u| format!("\\u{u:04x}"))
                        .collect(),
                })
                .collect::<String>()
        };
        for text in [
            serde_json::to_string(&ctxpress_tests::json::sorted_keys(&v)).unwrap(),
            serde_json::to_string_pretty(&ctxpress_tests::json::sorted_keys(&v)).unwrap(),
            ascii(serde_json::to_string_pretty(&v).unwrap()),
            serde_json::to_string(&with_field).unwrap(),
            // numbers by value: 1.50 written as 1.5
            out.to_json_string().replace("1.50", "1.5"),
        ] {
            assert_ne!(text, out.to_json_string());
            let written = Conversation::parse(&text).unwrap();
            let back = expand(&written, &arch).unwrap();
            assert_eq!(message_texts(&back), message_texts(&input), "{text}");
        }
        // The meaning still counts: a changed message is not expanded.
        let changed = Conversation::parse(&out.to_json_string().replace("a … b", "a … c")).unwrap();
        let back = expand(&changed, &arch).unwrap();
        assert_eq!(back.messages.len(), out.messages.len());
    }

    #[test]
    fn raw_keys_of_archives_written_before_canonical_keys_still_expand() {
        // What earlier versions wrote: the same records under raw keys.
        let (input, out) = compressed();
        let (mut raw, raw_ends) = prefix_keys(&out, Scheme::Raw);
        raw.extend(raw_ends.last().cloned());
        let canon = chain_keys(&out);
        let legacy: Vec<Record> = records(&input, &out)
            .into_iter()
            .map(|r| {
                let (tag, key) = match r.key.split_once(':') {
                    Some((t, k)) if t == "doc" || t == "gaps" => (format!("{t}:"), k.to_string()),
                    _ => (String::new(), r.key.clone()),
                };
                let i = canon.iter().position(|c| *c == key).unwrap();
                Record {
                    key: format!("{tag}{}", raw[i]),
                    originals: r.originals,
                }
            })
            .collect();
        assert!(
            legacy
                .iter()
                .all(|r| !r.key.starts_with("c:") && !r.key.contains(":c:"))
        );
        let arch = MemoryArchive::new();
        arch.put(&legacy).unwrap();
        let written = Conversation::parse(&out.to_json_string()).unwrap();
        assert_eq!(
            expand(&written, &arch).unwrap().to_json_string(),
            input.to_json_string()
        );
    }

    #[test]
    fn equal_outputs_of_conversations_with_different_ids_keep_their_own_originals() {
        let a = r#"{"id": "a", "messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "one"}]}"#;
        let b = r#"{"id": "b", "messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "two"}]}"#;
        let arch = MemoryArchive::new();
        let mut outs = Vec::new();
        for doc in [a, b] {
            let input = Conversation::parse(doc).unwrap();
            let mut out = input.clone();
            out.messages.pop();
            archive(&input, &out, &arch).unwrap();
            outs.push((doc, out));
        }
        assert_eq!(message_texts(&outs[0].1), message_texts(&outs[1].1));
        for (doc, out) in outs {
            assert_eq!(expand(&out, &arch).unwrap().to_json_string(), doc);
        }
    }

    #[test]
    fn unchanged_writes_nothing() {
        let input = Conversation::parse(DOC).unwrap();
        assert!(records(&input, &input.clone()).is_empty());
    }
}
