//! Structure-aware summaries of tool results that are data, not prose: JSON
//! (a value, or JSON lines), CSV/TSV tables and timestamped logs. A data
//! result keeps its shape: every value shown is labeled by its key (objects
//! as `path: key=value, ...` with paths like `data.items[3]`), arrays of
//! records sharing keys fold into a table (`items[0..49] {id, name}:` then
//! one row per record, columns equal in every record written once as
//! `key=value` in the header), lists of scalars into their distinct values
//! with counts, long strings are clipped, numbers kept as written.
//!
//! A summary is rendered at the most detailed of a few levels (clip width,
//! rows, items, columns, depth) that fits its room; the room is a sixth of
//! the text, capped by the outline limits (`max_outline` lines of
//! `max_line_chars`), and a summary is never longer than its text. The work
//! is bounded: each level renders at most a fixed number of rows and items
//! per array, columns and keys per object, down to a fixed depth, and stops
//! as soon as it is over its room; serde_json's recursion limit bounds the
//! parse. Only texts whose first and last bytes look like JSON are parsed.

use crate::lines::{is_blank, is_error_line, push_clip, shape, trim};
use crate::subject::{Kind, Limits, Subject};
use ctxpress_text::bytes::char_count;
use foldhash::{HashMap, HashMapExt};
use serde_json::{Map, Value};
use std::fmt::Write as _;

mod csv;
mod log;
mod yaml;

use csv::csv;
use log::log;
use yaml::yaml_body;

/// Texts longer than this are not parsed as data (the line summary is
/// cheaper and says as much).
const MAX_BYTES: usize = 8 << 20;

/// Characters of an id or a name (a value whose key says it is one) at
/// every level.
const ID_CLIP: usize = 64;

/// Bytes a nested value may take written inline (on its parent's line, in
/// a table cell), at every level: the same values are inline at each.
const INLINE_MAX: usize = 80;

/// Columns of a table, keys of an object: at most this many are looked at.
const MAX_KEYS: usize = 64;

/// How much one rendering shows.
#[derive(Debug, Clone, Copy)]
struct Level {
    /// Characters of one string value.
    clip: usize,
    /// Rows of a table, items of an array of records.
    rows: usize,
    /// Distinct values of an array of scalars.
    items: usize,
    /// Columns of a table, scalar keys of an object.
    cols: usize,
    /// Nesting shown; deeper values are counted.
    depth: usize,
}

const LEVELS: [Level; 4] = [
    Level {
        clip: 80,
        rows: 30,
        items: 24,
        cols: 16,
        depth: 12,
    },
    Level {
        clip: 40,
        rows: 10,
        items: 12,
        cols: 12,
        depth: 10,
    },
    Level {
        clip: 24,
        rows: 4,
        items: 6,
        cols: 8,
        depth: 8,
    },
    Level {
        clip: 16,
        rows: 2,
        items: 3,
        cols: 5,
        depth: 6,
    },
];

/// The room of a summary's body for a text of `chars` characters: a sixth
/// of it (and a little), at most `max_outline` lines of half
/// `max_line_chars`.
fn room(chars: usize, limits: &Limits) -> usize {
    let cap = limits
        .max_outline
        .max(4)
        .saturating_mul(limits.max_line_chars.max(8))
        / 2;
    (chars / 6 + 120).min(cap)
}

/// The structured summary of `text` when it is JSON (its first and last
/// bytes say so, and it parses): `None` for anything else, or when the
/// summary would not be shorter.
pub(crate) fn summarize_json(
    kind: Kind,
    subject: &Subject,
    text: &str,
    limits: &Limits,
) -> Option<String> {
    let t = text.trim();
    let (first, last) = (*t.as_bytes().first()?, *t.as_bytes().last()?);
    if t.len() < 2
        || t.len() > MAX_BYTES
        || !matches!(first, b'{' | b'[')
        || !matches!(last, b'}' | b']')
    {
        return None;
    }
    let chars = char_count(text);
    finish(kind, subject, json(t, room(chars, limits), limits)?, chars)
}

/// The structured summary of `text` when it is a CSV/TSV table or (for
/// commands and other tools) a log: `None` for anything else, or when the
/// summary would not be shorter.
pub(crate) fn summarize_rest(
    kind: Kind,
    subject: &Subject,
    text: &str,
    limits: &Limits,
) -> Option<String> {
    let t = text.trim();
    if t.len() > MAX_BYTES || memchr::memchr(b'\n', t.as_bytes()).is_none() {
        return None;
    }
    let chars = char_count(text);
    let room = room(chars, limits);
    let body = match csv(t, room, limits).or_else(|| yaml_body(t, room, limits)) {
        Some(b) => b,
        None if matches!(kind, Kind::Command | Kind::Other) => log(t, room, limits)?,
        None => return None,
    };
    finish(kind, subject, body, chars)
}

/// The summary: the head, then `body`; `None` when not shorter than the
/// text's `chars`.
fn finish(kind: Kind, subject: &Subject, body: String, chars: usize) -> Option<String> {
    let mut out = subject_head(kind, subject);
    out.push_str(&body);
    (char_count(&out) < chars).then_some(out)
}

/// The head of a summary, without its closing `]` (the body's first line
/// ends it).
fn subject_head(kind: Kind, subject: &Subject) -> String {
    let mut h = crate::subject::head_of(kind, subject);
    h.push_str(": ");
    h
}

// ---------------------------------------------------------------- JSON

/// The body of a JSON text's summary: `JSON ...]` then the value's lines.
fn json(t: &str, room: usize, limits: &Limits) -> Option<String> {
    let (value, lines) = match serde_json::from_str::<Value>(t) {
        Ok(v) => (v, false),
        Err(_) => {
            // JSON lines: one value a line (a stream of values).
            let mut items = Vec::new();
            for v in serde_json::Deserializer::from_str(t).into_iter::<Value>() {
                items.push(v.ok()?);
            }
            if items.len() < 2 {
                return None;
            }
            (Value::Array(items), true)
        }
    };
    let mut head = String::from(if lines { "JSON lines" } else { "JSON" });
    match &value {
        Value::Object(m) => {
            head.push_str(" object, ");
            head.push_str(&plural(m.len(), "key", "keys"));
        }
        Value::Array(a) => {
            head.push_str(if lines { ", " } else { " array, " });
            head.push_str(&plural(a.len(), "item", "items"));
        }
        _ => return None,
    }
    head.push(']');
    Some(render_levels(&head, room, limits, |r| r.value(&value, 0)))
}

/// `head` and the body `draw` renders at the most detailed level that fits
/// `room`; at the least detailed, cut to `room` at a line end.
fn render_levels(
    head: &str,
    room: usize,
    limits: &Limits,
    mut draw: impl FnMut(&mut Render),
) -> String {
    for (k, level) in LEVELS.iter().enumerate() {
        let last = k + 1 == LEVELS.len();
        let mut r = Render {
            out: String::with_capacity(room.min(1 << 16) + 64),
            path: String::new(),
            level: *level,
            room: if last { usize::MAX } else { room },
            line_chars: limits.max_line_chars.max(40),
            over: false,
        };
        r.out.push_str(head);
        draw(&mut r);
        if !r.over && (last || r.out.len() <= room + head.len()) {
            if last && r.out.len() > room + head.len() {
                cut_lines(&mut r.out, room + head.len());
            }
            return r.out;
        }
    }
    head.to_string()
}

/// Cut `out` at the last line end at or before byte `max`, noting the lines
/// dropped.
fn cut_lines(out: &mut String, max: usize) {
    let mut at = max.min(out.len());
    while !out.is_char_boundary(at) {
        at -= 1;
    }
    let cut = out.get(..at).and_then(|s| s.rfind('\n')).unwrap_or(at);
    let dropped = out
        .get(cut..)
        .map_or(0, |rest| rest.matches('\n').count().max(1));
    out.truncate(cut);
    out.push_str("\n[… ");
    out.push_str(&plural(dropped, "more line", "more lines"));
    out.push(']');
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One rendering of a value at one level.
struct Render {
    out: String,
    /// The path of the value being rendered (`data.items[3]`).
    path: String,
    level: Level,
    /// Bytes the body may take; past them the rendering stops (`over`).
    room: usize,
    /// Width at which an object's `key=value` line wraps.
    line_chars: usize,
    over: bool,
}

/// True for keys that name or identify a record: shown first.
fn key_rank(k: &str) -> u8 {
    let l = k.to_ascii_lowercase();
    let l = l.trim_start_matches('_');
    if l == "id" || l.ends_with("_id") || l.ends_with("id") && k.ends_with("Id") || l == "uuid" {
        0
    } else if matches!(
        l,
        "name" | "title" | "key" | "path" | "file" | "filename" | "url" | "email" | "type" | "kind"
    ) || l.ends_with("_name")
        || l.ends_with("_number")
        || l.ends_with("name") && k.ends_with("Name")
        || l == "status"
        || l == "code"
    {
        1
    } else {
        2
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

impl Render {
    fn full(&mut self) -> bool {
        if self.out.len() > self.room {
            self.over = true;
        }
        self.over
    }

    fn line(&mut self) {
        self.out.push('\n');
    }

    /// Append a scalar: numbers, booleans and null as written, a string bare
    /// when it reads unambiguously, else quoted; clipped to the level's
    /// width.
    fn scalar(&mut self, v: &Value) {
        let clip = self.level.clip;
        match v {
            Value::String(s) => push_string(&mut self.out, s, clip),
            Value::Null => self.out.push_str("null"),
            Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => {
                let _ = write!(self.out, "{n}");
            }
            Value::Array(_) | Value::Object(_) => {
                push_inline(&mut self.out, v, clip, usize::MAX, 0);
            }
        }
    }

    /// Append the scalar `v` of key `k`: ids and names clipped no shorter
    /// than [`ID_CLIP`].
    fn keyed_scalar(&mut self, k: &str, v: &Value) {
        if key_rank(leaf(k)) < 2 && self.level.clip < ID_CLIP {
            let clip = self.level.clip;
            self.level.clip = ID_CLIP;
            self.scalar(v);
            self.level.clip = clip;
        } else {
            self.scalar(v);
        }
    }

    /// Bytes a nested value may take written inline (on its parent's line,
    /// in a table cell).
    fn inline_max(&self) -> usize {
        INLINE_MAX
    }

    /// Append the path, or `(root)` for a scalar at the root.
    fn push_path(&mut self) {
        self.out.push_str(&self.path);
    }

    /// Append the path of a scalar, `(root)` at the root.
    fn push_scalar_path(&mut self) {
        if self.path.is_empty() {
            self.out.push_str("(root)");
        } else {
            self.out.push_str(&self.path);
        }
    }

    /// Render `v` at `self.path`.
    fn value(&mut self, v: &Value, depth: usize) {
        if self.full() {
            return;
        }
        match v {
            Value::Object(m) => self.object(m, depth),
            Value::Array(a) => self.array(a, depth),
            _ => {
                self.line();
                self.push_scalar_path();
                self.out.push_str(": ");
                self.scalar(v);
            }
        }
    }

    fn object(&mut self, m: &Map<String, Value>, depth: usize) {
        if m.is_empty() {
            self.line();
            self.push_scalar_path();
            self.out.push_str(": {}");
            return;
        }
        // Scalars (and short lists of scalars) on the object's own line(s),
        // names and ids first.
        let max = self.inline_max();
        let mut scratch = String::new();
        let inline: Vec<bool> = m
            .values()
            .take(MAX_KEYS)
            .map(|v| fits_inline(v, self.level.clip, max, &mut scratch))
            .collect();
        let mut scalars: Vec<(&String, &Value)> = m
            .iter()
            .take(MAX_KEYS)
            .zip(&inline)
            .filter(|(_, i)| **i)
            .map(|(kv, _)| kv)
            .collect();
        scalars.sort_by_key(|(k, _)| key_rank(k));
        let more_keys = m.len().saturating_sub(MAX_KEYS);
        if !scalars.is_empty() {
            let shown = scalars.len().min(self.level.cols * 2);
            self.line();
            let mut line_start = self.out.len();
            if !self.path.is_empty() {
                self.out.push_str(&self.path);
                self.out.push_str(": ");
            }
            for (i, (k, v)) in scalars.iter().take(shown).enumerate() {
                if i > 0 {
                    if self.out.len() - line_start > self.line_chars {
                        self.out.push_str(",\n  ");
                        line_start = self.out.len() - 2;
                    } else {
                        self.out.push_str(", ");
                    }
                }
                push_key(&mut self.out, k);
                self.out.push('=');
                self.keyed_scalar(k, v);
            }
            if shown < scalars.len() {
                self.out.push_str(" (+");
                self.out
                    .push_str(&plural(scalars.len() - shown, "key", "keys"));
                self.out.push_str(": ");
                for (i, (k, _)) in scalars.iter().skip(shown).take(12).enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    push_key(&mut self.out, k);
                }
                if scalars.len() - shown > 12 {
                    self.out.push_str(", …");
                }
                self.out.push(')');
            }
        }
        if self.full() {
            return;
        }
        let base = self.path.len();
        for ((k, v), is_inline) in m.iter().take(MAX_KEYS).zip(inline) {
            if is_inline {
                continue;
            }
            if !self.path.is_empty() {
                self.path.push('.');
            }
            push_key(&mut self.path, k);
            if self.child(v, depth, base, true) {
                return;
            }
        }
        if more_keys > 0 {
            self.line();
            self.push_path();
            self.out.push_str(": (+");
            self.out
                .push_str(&plural(more_keys, "more key", "more keys"));
            self.out.push(')');
        }
    }

    fn array(&mut self, a: &[Value], depth: usize) {
        let n = a.len();
        if n == 0 {
            self.line();
            self.push_scalar_path();
            self.out.push_str(": []");
            return;
        }
        if a.iter().all(is_scalar) {
            self.scalar_list(a);
            return;
        }
        if n >= 2 && self.table(a) {
            return;
        }
        // Item by item: the first rows, then the last.
        let base = self.path.len();
        let shown = self.level.rows.max(2);
        for (i, v) in a.iter().enumerate() {
            if n > shown && i == shown - 1 {
                self.line();
                self.out.push_str("[… ");
                self.out
                    .push_str(&plural(n - shown, "more item", "more items"));
                self.out.push(']');
            }
            if n > shown && i >= shown - 1 && i + 1 < n {
                continue;
            }
            let _ = write!(self.path, "[{i}]");
            if self.child(v, depth, base, false) {
                return;
            }
        }
    }

    /// One member or item `v` of a value at `depth`, its path already
    /// pushed: past the depth limit only its count (a scalar too when
    /// `count_scalars`), else the value itself; the path is cut back to
    /// `base`. True when the summary is full.
    fn child(&mut self, v: &Value, depth: usize, base: usize, count_scalars: bool) -> bool {
        if depth + 1 >= self.level.depth && (count_scalars || !is_scalar(v)) {
            self.line();
            self.push_path();
            self.out.push_str(": ");
            self.out.push_str(&count_of(v));
        } else {
            self.value(v, depth + 1);
        }
        self.path.truncate(base);
        self.full()
    }

    /// An array of scalars: its distinct values in order with their counts.
    fn scalar_list(&mut self, a: &[Value]) {
        let n = a.len();
        self.line();
        self.push_path();
        if n == 1 {
            self.out.push_str("[0]: ");
            if let Some(v) = a.first() {
                self.scalar(v);
            }
            return;
        }
        let _ = write!(self.out, "[0..{}]: ", n - 1);
        // Distinct values in order of first appearance, with counts.
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut distinct: Vec<(String, usize)> = Vec::new();
        for v in a {
            let mut s = String::new();
            let clip = self.level.clip;
            match v {
                Value::String(x) => push_string(&mut s, x, clip),
                _ => {
                    let _ = write!(s, "{v}");
                }
            }
            match index.get(&s) {
                Some(&k) => {
                    if let Some(d) = distinct.get_mut(k) {
                        d.1 += 1;
                    }
                }
                None => {
                    index.insert(s.clone(), distinct.len());
                    distinct.push((s, 1));
                }
            }
        }
        let shown = distinct.len().min(self.level.items);
        for (i, (s, c)) in distinct.iter().take(shown).enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.out.push_str(s);
            if *c > 1 {
                let _ = write!(self.out, " ×{c}");
            }
        }
        if distinct.len() > shown {
            let _ = write!(self.out, ", … (+{} distinct)", distinct.len() - shown);
        }
        if distinct.len() < n && distinct.len() > 1 {
            let _ = write!(self.out, " ({} distinct)", distinct.len());
        }
    }

    /// An array of records sharing their keys, as a table: `path[0..n]
    /// {cols, const=value}:` then one row per record (runs of equal rows
    /// folded), the first and last rows when there are too many. False
    /// (nothing written) when the items are not such records.
    fn table(&mut self, a: &[Value]) -> bool {
        // Columns: the keys of the records, nested objects of scalars
        // flattened one level (`prices.economy`).
        let mut cols: Vec<String> = Vec::new();
        // The length of each column's prefix (`prices` of `prices.economy`),
        // 0 for none.
        let mut splits: Vec<usize> = Vec::new();
        let mut col_index: HashMap<String, usize> = HashMap::new();
        let mut rows: Vec<Vec<Option<&Value>>> = Vec::with_capacity(a.len());
        let max = self.inline_max();
        let mut scratch = String::new();
        for item in a {
            let Value::Object(m) = item else {
                return false;
            };
            // The item's cells, by column name.
            let mut cells: Vec<(String, usize, &Value)> = Vec::with_capacity(m.len());
            for (k, v) in m.iter().take(MAX_KEYS) {
                match v {
                    Value::Object(inner) if !inner.is_empty() && inner.values().all(is_scalar) => {
                        for (ik, iv) in inner.iter().take(MAX_KEYS) {
                            let mut name = String::with_capacity(k.len() + ik.len() + 1);
                            push_key(&mut name, k);
                            let split = name.len();
                            name.push('.');
                            push_key(&mut name, ik);
                            cells.push((name, split, iv));
                        }
                    }
                    _ if fits_inline(v, self.level.clip, max, &mut scratch) => {
                        let mut name = String::with_capacity(k.len());
                        push_key(&mut name, k);
                        cells.push((name, 0, v));
                    }
                    _ => return false,
                }
            }
            let mut row: Vec<Option<&Value>> = vec![None; cols.len()];
            for (name, split, v) in cells {
                let k = match col_index.get(&name) {
                    Some(&k) => k,
                    None => {
                        if cols.len() >= MAX_KEYS {
                            return false;
                        }
                        col_index.insert(name.clone(), cols.len());
                        splits.push(split);
                        cols.push(name);
                        cols.len() - 1
                    }
                };
                if row.len() <= k {
                    row.resize(k + 1, None);
                }
                if let Some(slot) = row.get_mut(k) {
                    *slot = Some(v);
                }
            }
            rows.push(row);
        }
        let ncols = cols.len();
        if ncols == 0 {
            return false;
        }
        // Shared keys: most columns are in most rows.
        let present: Vec<usize> = (0..ncols)
            .map(|c| {
                rows.iter()
                    .filter(|r| r.get(c).copied().flatten().is_some())
                    .count()
            })
            .collect();
        let common = present.iter().filter(|&&p| p * 2 >= rows.len()).count();
        if common * 2 < ncols {
            return false;
        }
        // Columns equal in every record go to the header as `key=value`.
        let constant: Vec<bool> = (0..ncols)
            .map(|c| {
                rows.len() >= 3
                    && present.get(c) == Some(&rows.len())
                    && rows
                        .windows(2)
                        .all(|w| w[0].get(c).copied().flatten() == w[1].get(c).copied().flatten())
            })
            .collect();
        // The varying columns shown: names and ids first, then the
        // others in order, up to the level's count.
        let mut varying: Vec<usize> = (0..ncols)
            .filter(|&c| !constant.get(c).copied().unwrap_or(false))
            .collect();
        varying.sort_by_key(|&c| cols.get(c).map_or(2, |k| key_rank(leaf(k))));
        let dropped: Vec<usize> = varying.split_off(varying.len().min(self.level.cols));
        varying.sort_unstable();
        let n = rows.len();
        self.line();
        self.push_path();
        let _ = write!(self.out, "[0..{}] {{", n - 1);
        let mut first = true;
        // The prefix of the group of columns open (`prices.{`).
        let mut group: Option<&str> = None;
        let header: Vec<usize> = (0..ncols)
            .filter(|c| constant.get(*c).copied().unwrap_or(false) || varying.contains(c))
            .collect();
        let prefix_of = |c: usize| {
            let name = cols.get(c).map_or("", String::as_str);
            name.get(..splits.get(c).copied().unwrap_or(0))
                .filter(|p| !p.is_empty())
        };
        for (h, &c) in header.iter().enumerate() {
            let is_const = constant.get(c).copied().unwrap_or(false);
            let name = cols.get(c).map_or("", String::as_str);
            let split = splits.get(c).copied().unwrap_or(0);
            // A prefix shared with a neighbour opens a group.
            let prefix = prefix_of(c).filter(|p| {
                let same = |k: Option<&usize>| k.is_some_and(|&k| prefix_of(k) == Some(*p));
                same(header.get(h + 1)) || (h > 0 && same(header.get(h - 1)))
            });
            if group.is_some() && group != prefix {
                self.out.push('}');
                group = None;
            }
            if !first {
                self.out.push_str(", ");
            }
            first = false;
            match prefix {
                Some(p) if group == Some(p) => self.out.push_str(leaf_at(name, split)),
                Some(p) => {
                    self.out.push_str(p);
                    self.out.push_str(".{");
                    self.out.push_str(leaf_at(name, split));
                    group = Some(p);
                }
                None => self.out.push_str(name),
            }
            if is_const {
                self.out.push('=');
                if let Some(v) = rows.first().and_then(|r| r.get(c).copied().flatten()) {
                    self.keyed_scalar(name, v);
                }
            }
        }
        if group.is_some() {
            self.out.push('}');
        }
        self.out.push('}');
        if !dropped.is_empty() {
            self.out.push_str(" (+");
            self.out
                .push_str(&plural(dropped.len(), "column", "columns"));
            self.out.push_str(": ");
            for (i, &c) in dropped.iter().take(12).enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.out.push_str(cols.get(c).map_or("", String::as_str));
            }
            if dropped.len() > 12 {
                self.out.push_str(", …");
            }
            self.out.push(')');
        }
        self.out.push(':');
        if varying.is_empty() {
            let _ = write!(self.out, " {n} equal items");
            return true;
        }
        let shown = self.level.rows.max(2);
        let mut i = 0;
        while i < n {
            if n > shown && i == shown - 1 && i + 1 < n {
                self.line();
                self.out.push_str("[… ");
                self.out
                    .push_str(&plural(n - shown, "more row", "more rows"));
                self.out.push(']');
                i = n - 1;
                continue;
            }
            let Some(row) = rows.get(i) else { break };
            // A run of equal rows.
            let mut run = 1;
            while rows.get(i + run).is_some_and(|r| {
                varying
                    .iter()
                    .all(|&c| r.get(c).copied().flatten() == row.get(c).copied().flatten())
            }) {
                run += 1;
            }
            self.line();
            for (k, &c) in varying.iter().enumerate() {
                if k > 0 {
                    self.out.push_str(" | ");
                }
                match row.get(c).copied().flatten() {
                    Some(v) => self.keyed_scalar(cols.get(c).map_or("", String::as_str), v),
                    None => self.out.push('-'),
                }
            }
            if run > 1 {
                let _ = write!(self.out, " (×{run})");
            }
            i += run;
            if self.full() {
                return true;
            }
        }
        if n > shown {
            self.column_values(&rows, &cols, &varying);
        }
        true
    }

    /// For a table with rows left out: the values of each shown column that
    /// takes few distinct ones, with their counts (`status: active ×30,
    /// invited ×12`).
    fn column_values(&mut self, rows: &[Vec<Option<&Value>>], cols: &[String], varying: &[usize]) {
        let n = rows.len();
        let max = 8.min(n / 3);
        for &c in varying {
            let mut distinct: Vec<(&Value, usize)> = Vec::new();
            let mut few = true;
            for r in rows {
                let Some(v) = r.get(c).copied().flatten() else {
                    continue;
                };
                if let Some(d) = distinct.iter_mut().find(|(d, _)| *d == v) {
                    d.1 += 1;
                } else if distinct.len() < max {
                    distinct.push((v, 1));
                } else {
                    few = false;
                    break;
                }
            }
            if !few || distinct.len() < 2 {
                continue;
            }
            self.line();
            self.push_path();
            self.out.push_str("[*].");
            self.out.push_str(cols.get(c).map_or("", String::as_str));
            self.out.push_str(": ");
            for (i, (v, k)) in distinct.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.scalar(v);
                let _ = write!(self.out, " ×{k}");
            }
        }
    }
}

/// Append `v` on one line: `{key=value, ...}`, `[a, b]`, scalars as
/// [`push_string`] writes them. False (what was written left for the
/// caller to cut) once `out` grew by more than `max` bytes or the value
/// nests deeper than 4.
fn push_inline(out: &mut String, v: &Value, clip: usize, max: usize, depth: usize) -> bool {
    let start = out.len();
    let ok = match v {
        Value::String(s) => {
            push_string(out, s, clip);
            true
        }
        Value::Null => {
            out.push_str("null");
            true
        }
        Value::Bool(b) => {
            out.push_str(if *b { "true" } else { "false" });
            true
        }
        Value::Number(n) => {
            let _ = write!(out, "{n}");
            true
        }
        _ if depth >= 4 => false,
        Value::Array(a) => {
            out.push('[');
            let mut ok = true;
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let left = max.saturating_sub(out.len() - start);
                if left == 0 || !push_inline(out, x, clip, left, depth + 1) {
                    ok = false;
                    break;
                }
            }
            out.push(']');
            ok
        }
        Value::Object(m) => {
            out.push('{');
            let mut ok = true;
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_key(out, k);
                out.push('=');
                let left = max.saturating_sub(out.len() - start);
                if left == 0 || !push_inline(out, x, clip, left, depth + 1) {
                    ok = false;
                    break;
                }
            }
            out.push('}');
            ok
        }
    };
    ok && out.len() - start <= max
}

/// True when `v` is a scalar or written inline in at most `max` bytes.
fn fits_inline(v: &Value, clip: usize, max: usize, scratch: &mut String) -> bool {
    if is_scalar(v) {
        return true;
    }
    scratch.clear();
    push_inline(scratch, v, clip, max, 0)
}

/// The last segment of a column name (`prices.economy` → `economy`).
fn leaf(k: &str) -> &str {
    k.rsplit('.').next().unwrap_or(k)
}

/// The part of column `name` after its prefix of `split` bytes and the dot.
fn leaf_at(name: &str, split: usize) -> &str {
    name.get(split + 1..).unwrap_or(name)
}

/// `{N keys}` or `[N items]`.
fn count_of(v: &Value) -> String {
    match v {
        Value::Object(m) => format!("{{{}}}", plural(m.len(), "key", "keys")),
        Value::Array(a) => format!("[{}]", plural(a.len(), "item", "items")),
        _ => String::new(),
    }
}

/// Append a key: bare when it is a plain name, else quoted.
fn push_key(out: &mut String, k: &str) {
    let plain = !k.is_empty()
        && k.len() <= 64
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'$' | b'@' | b'/'));
    if plain {
        out.push_str(k);
    } else {
        let mut s = String::new();
        push_clip(&mut s, k, 64);
        out.push_str(&Value::String(s).to_string());
    }
}

/// Append a string value, clipped to `clip` characters: bare when it reads
/// unambiguously (no separators, quotes or line breaks, not a number or
/// keyword), else as a JSON string.
fn push_string(out: &mut String, s: &str, clip: usize) {
    // One token (a path, URL, id, version) is clipped no shorter than an id.
    let clip = if s.len() <= 4 * ID_CLIP && !s.bytes().any(|b| b.is_ascii_whitespace()) {
        clip.max(ID_CLIP)
    } else {
        clip
    };
    let bare = !s.is_empty()
        && s.len() <= 4 * clip
        && trim(s).len() == s.len()
        && !s.bytes().any(|b| {
            matches!(
                b,
                b',' | b'|' | b'=' | b'"' | b'{' | b'}' | b'[' | b']' | b'\\'
            ) || b < 0x20
        })
        && !matches!(s, "true" | "false" | "null" | "-")
        && s.parse::<f64>().is_err();
    if bare {
        push_clip(out, s, clip);
    } else {
        let mut c = String::new();
        push_clip(&mut c, s, clip);
        out.push_str(&Value::String(c).to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::log::timestamp;
    use super::*;

    fn other() -> Subject {
        Subject {
            tool: "api".into(),
            ..Subject::default()
        }
    }

    fn json_summary(text: &str) -> Option<String> {
        summarize_json(Kind::Other, &other(), text, &Limits::default())
    }

    #[test]
    fn deep_nesting_is_bounded() {
        // Past serde_json's recursion limit: not parsed, no summary.
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(json_summary(&deep), None);
        // Within it: rendered down to the level's depth, then counted.
        let mut v = String::from("{\"leaf\": 1, \"pad\": \"");
        v.push_str(&"x".repeat(2000));
        v.push_str("\"}");
        for i in 0..100 {
            v = format!("{{\"k{i}\": {v}, \"n{i}\": {i}}}");
        }
        let s = json_summary(&v).expect("a summary");
        assert!(s.len() < v.len() / 2, "{s}");
        assert!(s.contains("n99=99"), "{s}");
    }

    #[test]
    fn huge_arrays_stay_within_the_room() {
        let items: Vec<String> = (0..100_000)
            .map(|i| format!("{{\"id\": {i}, \"name\": \"item{i}\", \"ok\": true}}"))
            .collect();
        let text = format!("[{}]", items.join(","));
        let s = json_summary(&text).expect("a summary");
        let limits = Limits::default();
        assert!(
            s.len() <= room(text.len(), &limits) + 200,
            "{} bytes",
            s.len()
        );
        assert!(s.contains("[0..99999] {id, name, ok=true}:"), "{s}");
        assert!(s.contains("99999 | item99999"), "{s}");
        // Scalars: distinct values with counts.
        let text = format!("[{}]", vec!["\"a\", \"b\", \"a\""; 300].join(","));
        let s = json_summary(&text).expect("a summary");
        assert!(
            s.ends_with("\n[0..899]: a ×600, b ×300 (2 distinct)"),
            "{s}"
        );
    }

    #[test]
    fn json_lines_are_records() {
        let text: String = (0..20)
            .map(|i| format!("{{\"event\": \"login\", \"user_id\": {i}}}\n"))
            .collect();
        let s = json_summary(&text).expect("a summary");
        assert!(
            s.starts_with(
                "[summary: tool api: JSON lines, 20 items]\n[0..19] {event=login, user_id}:\n0\n1\n"
            ),
            "{s}"
        );
    }

    #[test]
    fn never_longer_and_not_for_other_texts() {
        for text in [
            "{}",
            "[]",
            "[1]",
            "{\"a\": 1}",
            "{not json}",
            "[1, 2",
            "{\"a\": \"é\"}",
            "[\"a,b\", \"c|d\", \"\", \"true\", \"12\", \"x\\ny\"]",
        ] {
            if let Some(s) = json_summary(text) {
                assert!(s.chars().count() < text.chars().count(), "{text}: {s}");
            }
        }
        let strings = format!(
            "[\"a,b\", \"c|d\", \"\", \"true\", \"12\", \"x\\ny\"{}]",
            ", 1".repeat(200)
        );
        let s = json_summary(&strings).expect("a summary");
        assert!(
            s.contains("[0..205]: \"a,b\", \"c|d\", \"\", \"true\", \"12\", \"x\\ny\", 1 ×200"),
            "{s}"
        );
        // Prose with commas and go test output are not tables; build
        // output is not a log.
        let prose = "Hello, world, again\nthis, is, prose\nmore, words, here\nand, more, words\n";
        assert_eq!(
            summarize_rest(Kind::Other, &other(), prose, &Limits::default())
                .map(|s| s.contains("CSV")),
            None
        );
        let go = "?   \tcampus/cmd\t[no test files]\nok  \tcampus/auth\t6.351s\nok  \tcampus/db\t1.3s\nok  \tcampus/x\t1.3s\n";
        assert_eq!(
            summarize_rest(Kind::Command, &other(), go, &Limits::default()),
            None
        );
        let mvn: String = (0..20).map(|i| format!("[INFO] step {i}\n")).collect();
        assert_eq!(
            summarize_rest(Kind::Command, &other(), &mvn, &Limits::default()),
            None
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(timestamp("2025-03-12 10:00:00,000 INFO x"), Some(23));
        assert_eq!(timestamp("2025-03-12T10:00:00Z x"), Some(20));
        assert_eq!(timestamp("[2025/03/12 10:00:00] x"), Some(21));
        assert_eq!(timestamp("12:13:58.507 [main] INFO"), Some(12));
        assert_eq!(timestamp("2025-03 x"), None);
        assert_eq!(timestamp("[INFO] x"), None);
        assert_eq!(timestamp("1234-5"), None);
    }
}
