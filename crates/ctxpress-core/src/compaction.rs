//! Compaction batches (spec 003): the summary batches a compactor folds old
//! messages into, their label and header formats, and the [`BatchArchive`]
//! they are stored in before the messages leave the history.
//!
//! A batch covers a run of messages of one conversation. Its `summary` starts
//! with the header `[depth:N|start:ISO|end:ISO|count:M]` (so a batch can be
//! rebuilt from its text alone) and its label is
//! `compaction-batch-{conversationId}-{endTime ISO}`. Fresh batches have depth
//! 0; a batch made by summarizing older batches again has the greatest depth
//! among them plus one. Times are UTC, written like JavaScript's
//! `toISOString` (`2026-11-24T21:35:09.000Z`), by the small calendar
//! functions below ([`format_iso`], [`parse_iso`], [`message_time`]).
//!
//! The live history a compactor folds may also be kept by the application:
//! [`Persistence`] is what the compactor deletes from, after the batches that
//! hold the messages are committed to the [`BatchArchive`].
//!
//! [`BatchArchive`]: atomic `put_batches` and `replace`, batches listed oldest
//! first, `read` by label; [`Persistence`]: `load`, `append` and an atomic
//! `fold` (delete the folded messages and insert the clip in their place).
//! [`MemoryBatchArchive`] and [`MemoryPersistence`] implement them in memory;
//! `ctxpress-store` on SQLite.

use crate::archive::ArchiveError;
use crate::message::Message;
use serde_json::Value;
use std::sync::Mutex;

/// One summary batch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SummaryBatch {
    /// `compaction-batch-{conversation}-{end}` (see [`batch_label`]).
    pub label: String,
    /// The conversation id.
    pub conversation: String,
    /// 0 for a batch of messages; one more than the deepest batch it
    /// re-summarizes otherwise.
    pub depth: u32,
    /// Time of the first message covered (ISO-8601 UTC).
    pub start: String,
    /// Time of the last message covered (ISO-8601 UTC).
    pub end: String,
    /// Number of original messages covered.
    pub count: usize,
    /// The summary text, starting with the header (see [`batch_header`]).
    pub summary: String,
    /// Exact JSON source texts of the messages covered, in order.
    pub originals: Vec<String>,
}

impl SummaryBatch {
    /// The summary without its header line.
    pub fn body(&self) -> &str {
        match parse_header(&self.summary) {
            Some((_, rest)) => rest,
            None => &self.summary,
        }
    }
}

/// The label of a batch: `compaction-batch-{conversation}-{end}`.
pub fn batch_label(conversation: &str, end: &str) -> String {
    format!("compaction-batch-{conversation}-{end}")
}

/// The header a batch summary starts with: `[depth:N|start:ISO|end:ISO|count:M]`.
pub fn batch_header(depth: u32, start: &str, end: &str, count: usize) -> String {
    format!("[depth:{depth}|start:{start}|end:{end}|count:{count}]")
}

/// The fields of a header at the start of `text`, and the text after it
/// (one newline after the header skipped).
pub fn parse_header(text: &str) -> Option<(Header, &str)> {
    let rest = text.strip_prefix("[depth:")?;
    let close = rest.find(']')?;
    let inner = &rest[..close];
    let mut parts = inner.split('|');
    let depth = parts.next()?.parse().ok()?;
    let start = parts.next()?.strip_prefix("start:")?.to_string();
    let end = parts.next()?.strip_prefix("end:")?.to_string();
    let count = parts.next()?.strip_prefix("count:")?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    let after = &rest[close + 1..];
    let after = after.strip_prefix('\n').unwrap_or(after);
    Some((
        Header {
            depth,
            start,
            end,
            count,
        },
        after,
    ))
}

/// The fields of a batch header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Depth.
    pub depth: u32,
    /// Start time (ISO).
    pub start: String,
    /// End time (ISO).
    pub end: String,
    /// Messages covered.
    pub count: usize,
}

/// Where summary batches are kept. Implementations store each call
/// atomically (all or nothing); an in-memory one is [`MemoryBatchArchive`],
/// a SQLite one lives in `ctxpress-store`.
pub trait BatchArchive: Send + Sync {
    /// Store batches in one transaction. A batch whose label is already
    /// stored replaces it.
    fn put_batches(&self, batches: &[SummaryBatch]) -> Result<(), ArchiveError>;
    /// The batches of a conversation, oldest first.
    fn batches(&self, conversation: &str) -> Result<Vec<SummaryBatch>, ArchiveError>;
    /// The batch with this label.
    fn read(&self, label: &str) -> Result<Option<SummaryBatch>, ArchiveError>;
    /// Re-summarization, in one transaction: remove `removed` (labels of
    /// `conversation`) and store `added` where the first of them was. When
    /// one of `removed` is not stored (another run replaced it since the
    /// caller read the batches), nothing changes and the error is
    /// [`ArchiveError::Conflict`].
    fn replace(
        &self,
        conversation: &str,
        removed: &[String],
        added: SummaryBatch,
    ) -> Result<(), ArchiveError>;
}

/// An in-memory [`BatchArchive`].
#[derive(Debug, Default)]
pub struct MemoryBatchArchive {
    batches: Mutex<Vec<SummaryBatch>>,
}

impl MemoryBatchArchive {
    /// An empty archive.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of batches stored (all conversations).
    pub fn len(&self) -> usize {
        self.batches.lock().map(|b| b.len()).unwrap_or(0)
    }
    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn poisoned<T>(_: T) -> ArchiveError {
    ArchiveError::Backend("lock poisoned".into())
}

impl BatchArchive for MemoryBatchArchive {
    fn put_batches(&self, batches: &[SummaryBatch]) -> Result<(), ArchiveError> {
        let mut all = self.batches.lock().map_err(poisoned)?;
        for b in batches {
            match all.iter_mut().find(|x| x.label == b.label) {
                Some(x) => *x = b.clone(),
                None => all.push(b.clone()),
            }
        }
        Ok(())
    }

    fn batches(&self, conversation: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        let all = self.batches.lock().map_err(poisoned)?;
        Ok(all
            .iter()
            .filter(|b| b.conversation == conversation)
            .cloned()
            .collect())
    }

    fn read(&self, label: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        let all = self.batches.lock().map_err(poisoned)?;
        Ok(all.iter().find(|b| b.label == label).cloned())
    }

    fn replace(
        &self,
        conversation: &str,
        removed: &[String],
        added: SummaryBatch,
    ) -> Result<(), ArchiveError> {
        let mut all = self.batches.lock().map_err(poisoned)?;
        let found = |l: &String| {
            all.iter()
                .position(|b| &b.label == l && b.conversation == conversation)
        };
        let mut at = None;
        for l in removed {
            match found(l) {
                Some(p) => at = Some(at.map_or(p, |a: usize| a.min(p))),
                None => {
                    return Err(ArchiveError::Conflict(format!(
                        "batch `{l}` of conversation `{conversation}` is no longer stored"
                    )));
                }
            }
        }
        let mut kept: Vec<SummaryBatch> = Vec::with_capacity(all.len() + 1);
        let mut inserted = false;
        for (i, b) in all.drain(..).enumerate() {
            if Some(i) == at {
                kept.push(added.clone());
                inserted = true;
            }
            let gone = b.conversation == conversation && removed.contains(&b.label);
            if !gone && b.label != added.label {
                kept.push(b);
            }
        }
        if !inserted {
            kept.push(added);
        }
        *all = kept;
        Ok(())
    }
}

impl<A: BatchArchive + ?Sized> BatchArchive for std::sync::Arc<A> {
    fn put_batches(&self, batches: &[SummaryBatch]) -> Result<(), ArchiveError> {
        (**self).put_batches(batches)
    }
    fn batches(&self, conversation: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        (**self).batches(conversation)
    }
    fn read(&self, label: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        (**self).read(label)
    }
    fn replace(
        &self,
        conversation: &str,
        removed: &[String],
        added: SummaryBatch,
    ) -> Result<(), ArchiveError> {
        (**self).replace(conversation, removed, added)
    }
}

/// A message a [`Persistence`] keeps: its key (which orders the
/// conversation) and its exact JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Position key: the conversation is its messages by ascending key.
    pub key: i64,
    /// The message's JSON text, as appended.
    pub json: String,
}

/// Where an application keeps the live histories of its conversations (the
/// messages a compactor reads and, after the archive commit, deletes from).
/// [`MemoryPersistence`] keeps them in memory, `ctxpress-store`'s
/// `SqliteArchive` in a `messages` table beside the batches; library users
/// bring their own. Each call is atomic (all or nothing).
pub trait Persistence: Send + Sync {
    /// The messages of a conversation, by ascending key.
    fn load(&self, conversation: &str) -> Result<Vec<StoredMessage>, ArchiveError>;
    /// Append messages after the last one (one transaction); their keys.
    fn append(&self, conversation: &str, messages: &[String]) -> Result<Vec<i64>, ArchiveError>;
    /// One transaction: delete the messages keyed `removed` and store
    /// `insert` in their place, in order, under the smallest removed keys
    /// (so `insert` may not be longer than `removed`). When a key in
    /// `removed` is not stored (another run folded it since the caller
    /// loaded the messages), nothing changes and the error is
    /// [`ArchiveError::Conflict`].
    fn fold(
        &self,
        conversation: &str,
        removed: &[i64],
        insert: &[String],
    ) -> Result<(), ArchiveError>;
}

/// An in-memory [`Persistence`].
#[derive(Debug, Default)]
pub struct MemoryPersistence {
    conversations: Mutex<std::collections::BTreeMap<String, Vec<StoredMessage>>>,
}

impl MemoryPersistence {
    /// Nothing stored.
    pub fn new() -> Self {
        Self::default()
    }
}

/// The keys `insert` gets in [`Persistence::fold`]: the smallest of
/// `removed`, ascending; an error when `insert` is longer.
pub fn fold_keys(removed: &[i64], insert: usize) -> Result<Vec<i64>, ArchiveError> {
    if insert > removed.len() {
        return Err(ArchiveError::Backend(format!(
            "fold: {insert} messages to insert in the place of {} removed",
            removed.len()
        )));
    }
    let mut keys = removed.to_vec();
    keys.sort_unstable();
    keys.dedup();
    keys.truncate(insert);
    Ok(keys)
}

impl Persistence for MemoryPersistence {
    fn load(&self, conversation: &str) -> Result<Vec<StoredMessage>, ArchiveError> {
        let all = self.conversations.lock().map_err(poisoned)?;
        Ok(all.get(conversation).cloned().unwrap_or_default())
    }

    fn append(&self, conversation: &str, messages: &[String]) -> Result<Vec<i64>, ArchiveError> {
        let mut all = self.conversations.lock().map_err(poisoned)?;
        let conv = all.entry(conversation.to_string()).or_default();
        let first = conv.last().map_or(1, |m| m.key + 1);
        let keys: Vec<i64> = (first..).take(messages.len()).collect();
        conv.extend(keys.iter().zip(messages).map(|(&key, json)| StoredMessage {
            key,
            json: json.clone(),
        }));
        Ok(keys)
    }

    fn fold(
        &self,
        conversation: &str,
        removed: &[i64],
        insert: &[String],
    ) -> Result<(), ArchiveError> {
        let keys = fold_keys(removed, insert.len())?;
        let mut all = self.conversations.lock().map_err(poisoned)?;
        let conv = all.entry(conversation.to_string()).or_default();
        if let Some(k) = removed.iter().find(|k| !conv.iter().any(|m| m.key == **k)) {
            return Err(ArchiveError::Conflict(format!(
                "message {k} of conversation `{conversation}` is no longer stored"
            )));
        }
        conv.retain(|m| !removed.contains(&m.key));
        conv.extend(
            keys.into_iter()
                .zip(insert)
                .map(|(key, json)| StoredMessage {
                    key,
                    json: json.clone(),
                }),
        );
        conv.sort_by_key(|m| m.key);
        Ok(())
    }
}

impl<P: Persistence + ?Sized> Persistence for std::sync::Arc<P> {
    fn load(&self, conversation: &str) -> Result<Vec<StoredMessage>, ArchiveError> {
        (**self).load(conversation)
    }
    fn append(&self, conversation: &str, messages: &[String]) -> Result<Vec<i64>, ArchiveError> {
        (**self).append(conversation, messages)
    }
    fn fold(
        &self,
        conversation: &str,
        removed: &[i64],
        insert: &[String],
    ) -> Result<(), ArchiveError> {
        (**self).fold(conversation, removed, insert)
    }
}

// Calendar (proleptic Gregorian, UTC), after H. Hinnant's `days_from_civil`.

/// Days since 1970-01-01 of a civil date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day number since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_iso(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let ms = millis.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, f) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{f:03}Z")
}

/// Parse an RFC 3339 / ISO-8601 date-time (`2026-11-24T21:35:09Z`,
/// `2026-11-24 21:35:09.123456+01:00`, a date alone) to milliseconds since
/// the epoch, UTC. `None` when it is not one.
pub fn parse_iso(s: &str) -> Option<i64> {
    let s = s.trim();
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if t.is_empty() || !t.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let mut ms = days_from_civil(y, mo as u32, d as u32) * 86_400_000;
    if b.len() == 10 {
        return Some(ms);
    }
    if !matches!(b[10], b'T' | b't' | b' ') || b.len() < 19 || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    ms += (h * 3600 + mi * 60 + sec) * 1000;
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        let st = i + 1;
        i = st;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == st {
            return None;
        }
        let frac = &s[st..i.min(st + 3)];
        let mut f: i64 = frac.parse().ok()?;
        for _ in frac.len()..3 {
            f *= 10;
        }
        ms += f;
    }
    match &s[i..] {
        "" | "Z" | "z" => Some(ms),
        off if off.len() == 6 && matches!(off.as_bytes()[0], b'+' | b'-') => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if off.as_bytes()[3] != b':' {
                return None;
            }
            let delta = (oh * 60 + om) * 60_000;
            Some(if off.starts_with('+') {
                ms - delta
            } else {
                ms + delta
            })
        }
        _ => None,
    }
}

/// The current time in milliseconds since the epoch.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A message's own time, in milliseconds since the epoch: its `timestamp`
/// or `created_at` field, an RFC 3339 string or epoch seconds (below 10^11)
/// or milliseconds. `None` when it has none.
pub fn message_time(m: &Message) -> Option<i64> {
    for key in ["timestamp", "created_at"] {
        match m.fields().get(key) {
            Some(Value::String(s)) => {
                if let Some(t) = parse_iso(s) {
                    return Some(t);
                }
                if let Ok(n) = s.trim().parse::<f64>() {
                    return Some(epoch_number(n));
                }
            }
            Some(Value::Number(n)) => {
                if let Some(f) = n.as_f64() {
                    return Some(epoch_number(f));
                }
            }
            _ => {}
        }
    }
    None
}

fn epoch_number(n: f64) -> i64 {
    if n.abs() < 1e11 {
        (n * 1000.0).round() as i64
    } else {
        n.round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_persistence_folds_in_place_and_refuses_unknown_keys() {
        let p = MemoryPersistence::new();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(p.append("a", &s(&["1", "2", "3"])).unwrap(), [1, 2, 3]);
        p.fold("a", &[2, 1], &s(&["c"])).unwrap();
        let got: Vec<(i64, String)> = p
            .load("a")
            .unwrap()
            .into_iter()
            .map(|m| (m.key, m.json))
            .collect();
        assert_eq!(got, [(1, "c".to_string()), (3, "3".to_string())]);
        let e = p.fold("a", &[7], &[]).unwrap_err();
        assert!(matches!(e, ArchiveError::Conflict(_)), "{e}");
        assert!(p.fold("a", &[3], &s(&["x", "y"])).is_err());
        assert_eq!(p.load("a").unwrap().len(), 2);
        assert!(p.load("none").unwrap().is_empty());
    }
    use crate::message::MessageId;

    fn batch(label: &str, conv: &str) -> SummaryBatch {
        SummaryBatch {
            label: label.into(),
            conversation: conv.into(),
            depth: 0,
            start: "s".into(),
            end: "e".into(),
            count: 1,
            summary: format!("{}\nx", batch_header(0, "s", "e", 1)),
            originals: vec!["{}".into()],
        }
    }

    #[test]
    fn calendar_round_trips_and_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        for z in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(format_iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_iso(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_iso(1_795_894_509_000), "2026-11-28T19:35:09.000Z");
    }

    #[test]
    fn iso_parsing() {
        let t = parse_iso("2026-11-24T21:35:09Z").unwrap();
        assert_eq!(format_iso(t), "2026-11-24T21:35:09.000Z");
        assert_eq!(
            format_iso(parse_iso("2026-11-24T22:35:09.5+01:00").unwrap()),
            "2026-11-24T21:35:09.500Z"
        );
        assert_eq!(
            format_iso(parse_iso("2026-11-24 21:35:09.123456").unwrap()),
            "2026-11-24T21:35:09.123Z"
        );
        assert_eq!(
            format_iso(parse_iso("2026-11-24").unwrap()),
            "2026-11-24T00:00:00.000Z"
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-11-24T25:00:00Z",
            "2026-11-24Tx",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
    }

    #[test]
    fn message_times_from_fields() {
        let m = |v: Value| {
            let mut f = serde_json::Map::new();
            f.insert("role".into(), "user".into());
            f.insert("timestamp".into(), v);
            Message::from_fields(MessageId::new("x"), f)
        };
        assert_eq!(
            message_time(&m(Value::from(1_700_000_000))),
            Some(1_700_000_000_000)
        );
        assert_eq!(
            message_time(&m(Value::from(1_700_000_000_123i64))),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            message_time(&m(Value::from("1970-01-01T00:00:01Z"))),
            Some(1000)
        );
        assert_eq!(message_time(&m(Value::from("soon"))), None);
        let plain = Message::text_message(MessageId::new("y"), "user", "hi");
        assert_eq!(message_time(&plain), None);
    }

    #[test]
    fn label_and_header_formats() {
        assert_eq!(
            batch_label("c1", "2026-11-24T21:35:09.000Z"),
            "compaction-batch-c1-2026-11-24T21:35:09.000Z"
        );
        let h = batch_header(2, "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", 7);
        assert_eq!(
            h,
            "[depth:2|start:2026-01-01T00:00:00.000Z|end:2026-01-02T00:00:00.000Z|count:7]"
        );
        let text = format!("{h}\nbody");
        let (p, rest) = parse_header(&text).unwrap();
        assert_eq!((p.depth, p.count, rest), (2, 7, "body"));
        assert_eq!(p.start, "2026-01-01T00:00:00.000Z");
        assert!(parse_header("[depth:x|start:a|end:b|count:1]").is_none());
    }

    #[test]
    fn memory_archive_put_read_replace() {
        let a = MemoryBatchArchive::new();
        a.put_batches(&[batch("a", "c"), batch("b", "c"), batch("z", "other")])
            .unwrap();
        assert_eq!(a.batches("c").unwrap().len(), 2);
        assert_eq!(a.read("z").unwrap().unwrap().conversation, "other");
        let mut merged = batch("b", "c");
        merged.depth = 1;
        a.replace("c", &["a".into(), "b".into()], merged).unwrap();
        let got = a.batches("c").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].label.as_str(), got[0].depth), ("b", 1));
        // Unknown label: nothing changes.
        let e = a
            .replace("c", &["nope".into()], batch("q", "c"))
            .unwrap_err();
        assert!(matches!(e, ArchiveError::Conflict(_)), "{e}");
        assert_eq!(a.len(), 2);
        // Object safe.
        let d: &dyn BatchArchive = &a;
        assert!(d.read("q").unwrap().is_none());
    }
}
