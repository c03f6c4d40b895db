//! A conversation: its messages, the envelope they came in, and the annotations
//! stages attach to them.
//!
//! Parsing keeps the exact source text around the messages array (the envelope)
//! and of every message, so an unchanged conversation is written back
//! byte-identical and `expand` can restore inputs byte for byte.
//!
//! [`Conversation::parse`] takes a JSON array of messages or an object with a
//! `messages` array, keeping the envelope's prefix, suffix and separators. The
//! provider format is detected from what only one dialect has: Anthropic
//! content blocks, OpenAI's own roles and fields, the tool definitions' shape,
//! an Anthropic top-level `system` (a `role: "system"` message says nothing:
//! both take one); a caller that knows it uses [`Conversation::parse_as`].
//! Messages without an id of their own get `m{pos}-{hash}`, and a stage's new
//! message a [`Conversation::fresh_id`]. [`Conversation::cache`] holds one
//! value per type beside the messages, shared by clones and never serialized:
//! where crates built on core keep what they derive from the messages (the
//! tool-traffic index of `ctxpress-dialect`).

use crate::annotate::Annotations;
use crate::message::{Message, MessageId, Role};
use serde::ser::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex};

/// Provider shape of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// OpenAI Chat Completions messages.
    OpenAi,
    /// Anthropic Messages (content blocks, top-level `system`).
    Anthropic,
}

/// How the document around the messages looked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A bare JSON array of messages.
    Array,
    /// An object with a `messages` array (plus any other fields).
    Object,
}

/// JSON separator style, detected from the input so that rewritten messages look
/// like their neighbours (`", "`/`": "` as Python writes, or compact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    /// `", "` and `": "` instead of `","` and `":"`.
    pub spaced: bool,
}

/// Everything of the document except the messages.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// Array or object.
    pub shape: Shape,
    /// Top-level fields other than `messages` (object shape only), in order.
    pub fields: Map<String, Value>,
    /// Source text before the first message (or up to `[` when there are none).
    pub prefix: String,
    /// Source text after the last message.
    pub suffix: String,
    /// Source text between two messages (e.g. `", "`).
    pub sep: String,
    /// False when the input used different separators between messages.
    pub uniform: bool,
    /// When the separators differ: for each message after the first, the id
    /// of the message before it and the source text between them, so that
    /// two messages still adjacent are written with the separator they had
    /// (others get `sep`). Empty when the separators are uniform.
    pub gaps: HashMap<MessageId, (MessageId, String)>,
    /// Separator style for rewritten messages.
    pub style: Style,
}

impl Envelope {
    /// An envelope for a bare array written compactly.
    pub fn array() -> Self {
        Envelope {
            shape: Shape::Array,
            fields: Map::new(),
            prefix: "[".into(),
            suffix: "]".into(),
            sep: ",".into(),
            uniform: true,
            gaps: HashMap::new(),
            style: Style::default(),
        }
    }
}

/// The annotations of a conversation's messages, by id (foldhash: stages
/// look them up for every message, and SipHash's strength buys nothing for
/// ids the input cannot use to attack a map it never iterates).
pub type AnnotationMap = foldhash::HashMap<MessageId, Annotations>;

/// The caches behind [`Conversation::cache`], one per type.
#[derive(Clone, Default)]
struct Caches(Arc<Mutex<Vec<Arc<dyn Any + Send + Sync>>>>);

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |c| c.len());
        write!(f, "Caches({n})")
    }
}

/// A conversation being compressed.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// The document around them.
    pub envelope: Envelope,
    /// Detected provider shape.
    pub format: Format,
    annotations: AnnotationMap,
    next_id: u64,
    /// Caches of crates built on core, one per type; clones share them.
    caches: Caches,
}

/// Where and why a document failed to parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
#[non_exhaustive]
pub struct ParseError {
    /// 1-based line inside the document.
    pub line: usize,
    /// 1-based column inside the line.
    pub column: usize,
    /// What was wrong.
    pub message: String,
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |p| before.len() - p - 1)
        + 1;
    (line, col)
}

fn offset_in(outer: &str, inner: &str) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

fn shape_error(text: &str, offset: usize, message: impl Into<String>) -> ParseError {
    let (line, column) = line_col(text, offset);
    ParseError {
        line,
        column,
        message: message.into(),
    }
}

fn json_error(text: &str, base: usize, e: &serde_json::Error) -> ParseError {
    // serde_json positions are relative to the slice it parsed, which starts at `base`.
    let (bl, bc) = line_col(text, base);
    let (line, column) = if e.line() <= 1 {
        (bl, bc + e.column().saturating_sub(1))
    } else {
        (bl + e.line() - 1, e.column())
    };
    ParseError {
        line,
        column,
        message: strip_position(&e.to_string()),
    }
}

fn strip_position(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(p) => s[..p].to_string(),
        None => s.to_string(),
    }
}

fn detect_style(raw: &str) -> Style {
    // Look at what follows the first object key: `": "` means Python-style spacing.
    let b = raw.as_bytes();
    let mut i = match raw.find('"') {
        Some(i) => i + 1,
        None => return Style::default(),
    };
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => {
                return Style {
                    spaced: raw[i + 1..].starts_with(": "),
                };
            }
            _ => i += 1,
        }
    }
    Style::default()
}

impl Conversation {
    /// Build a conversation from messages with a fresh array envelope.
    pub fn new(messages: Vec<Message>) -> Self {
        let format = detect_format(&messages, &Map::new());
        let next_id = messages.len() as u64;
        Conversation {
            messages,
            envelope: Envelope::array(),
            format,
            annotations: AnnotationMap::default(),
            next_id,
            caches: Default::default(),
        }
    }

    /// Parse one document: a JSON array of messages or an object with a
    /// `messages` array. Unknown fields are kept verbatim, in order.
    ///
    /// A lone surrogate escape in a string (`"\ud800"`, which Python's
    /// `json.dumps` writes for one) is accepted: the message keeps its
    /// source text, so it is written back byte for byte while unchanged,
    /// and its fields read the escape as U+FFFD (what stages analyse, and
    /// what a changed message is written with).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        match lossy_surrogates(text) {
            None => Self::parse_read(text, text),
            Some(read) => Self::parse_read(&read, text),
        }
    }

    /// [`Conversation::parse`] for a document whose provider shape is known
    /// (a proxy knows it from the request path): `format` is taken as
    /// given, not detected.
    pub fn parse_as(text: &str, format: Format) -> Result<Self, ParseError> {
        let mut c = Self::parse(text)?;
        c.format = format;
        Ok(c)
    }

    /// [`Conversation::parse`] of `text`, read through `read`: the same text
    /// but for lone surrogate escapes, as long, so every offset is the same
    /// in both. Values come from `read`, source texts from `text`.
    fn parse_read(read: &str, source: &str) -> Result<Self, ParseError> {
        let text = read;
        let start = text.len() - text.trim_start().len();
        let (shape, fields, arr_raw): (Shape, Map<String, Value>, &str) = match text.as_bytes()
            [start..]
            .first()
        {
            Some(b'[') => (Shape::Array, Map::new(), text.trim()),
            Some(b'{') => {
                let top: Vec<(String, &RawValue)> =
                    parse_object_raw(text).map_err(|e| json_error(text, 0, &e))?;
                let mut fields = Map::new();
                let mut arr = None;
                for (k, v) in top {
                    if k == "messages" {
                        arr = Some(v.get());
                    } else {
                        let val: Value = serde_json::from_str(v.get())
                            .map_err(|e| json_error(text, offset_in(text, v.get()), &e))?;
                        fields.insert(k, val);
                    }
                }
                let arr = arr.ok_or_else(|| {
                    shape_error(
                        text,
                        start,
                        "expected an object with a `messages` array, found no `messages` field",
                    )
                })?;
                if !arr.starts_with('[') {
                    return Err(shape_error(
                        text,
                        offset_in(text, arr),
                        "`messages` must be an array of message objects",
                    ));
                }
                (Shape::Object, fields, arr)
            }
            Some(_) => {
                return Err(shape_error(
                    text,
                    start,
                    "expected a JSON array of messages or an object with a `messages` array",
                ));
            }
            None => {
                return Err(shape_error(
                    text,
                    0,
                    "empty input: expected a JSON array of messages or an object with a `messages` array",
                ));
            }
        };
        let arr_off = offset_in(text, arr_raw);
        let items: Vec<&RawValue> =
            serde_json::from_str(arr_raw).map_err(|e| json_error(text, arr_off, &e))?;
        let mut messages = Vec::with_capacity(items.len());
        let mut seen_ids: HashSet<String> = HashSet::new();
        for (i, item) in items.iter().enumerate() {
            let raw = item.get();
            let off = offset_in(text, raw);
            if !raw.starts_with('{') {
                return Err(shape_error(
                    text,
                    off,
                    format!("messages[{i}]: expected a message object"),
                ));
            }
            let obj: Map<String, Value> =
                serde_json::from_str(raw).map_err(|e| json_error(text, off, &e))?;
            if obj.get("role").is_some_and(|r| !r.is_string()) {
                return Err(shape_error(
                    text,
                    off,
                    format!("messages[{i}]: `role` must be a string"),
                ));
            }
            let own = match obj.get("id") {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            let id = match own {
                Some(s) if seen_ids.insert(s.clone()) => s,
                _ => derive_id(i, raw),
            };
            messages.push(Message::from_raw(
                MessageId::new(id),
                obj,
                source[off..off + raw.len()].into(),
            ));
        }
        let envelope = if items.is_empty() {
            let open = arr_off + 1;
            Envelope {
                shape,
                fields,
                prefix: source[..open].into(),
                suffix: source[open..].into(),
                sep: ",".into(),
                uniform: true,
                gaps: HashMap::new(),
                style: Style::default(),
            }
        } else {
            let first = offset_in(text, items[0].get());
            let last = items[items.len() - 1].get();
            let end = offset_in(text, last) + last.len();
            let mut seps = items.windows(2).map(|w| {
                let a = offset_in(text, w[0].get()) + w[0].get().len();
                &text[a..offset_in(text, w[1].get())]
            });
            let style = detect_style(items[0].get());
            let sep = seps.next().map(str::to_string).unwrap_or_else(|| {
                if style.spaced {
                    ", ".into()
                } else {
                    ",".into()
                }
            });
            let uniform = seps.all(|s| s == sep);
            let mut gaps = HashMap::new();
            if !uniform {
                for (i, w) in items.windows(2).enumerate() {
                    let a = offset_in(text, w[0].get()) + w[0].get().len();
                    let gap = &text[a..offset_in(text, w[1].get())];
                    gaps.insert(
                        messages[i + 1].id().clone(),
                        (messages[i].id().clone(), gap.to_string()),
                    );
                }
            }
            Envelope {
                shape,
                fields,
                prefix: source[..first].into(),
                suffix: source[end..].into(),
                sep,
                uniform,
                gaps,
                style,
            }
        };
        let format = detect_format(&messages, &envelope.fields);
        let next_id = messages.len() as u64;
        Ok(Conversation {
            messages,
            envelope,
            format,
            annotations: AnnotationMap::default(),
            next_id,
            caches: Default::default(),
        })
    }

    /// The conversation's own id (`id` field of the envelope), if any.
    pub fn id(&self) -> Option<String> {
        match self.envelope.fields.get("id") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    }

    /// Serialize one message: its source text when unchanged, else JSON in the
    /// envelope's style.
    pub fn message_json(&self, m: &Message) -> String {
        match m.raw() {
            Some(r) => r.to_string(),
            None => to_json_styled(m.fields(), self.envelope.style),
        }
    }

    /// The text written between message `i - 1` and message `i`: the
    /// separator they had in the input when they were adjacent there, else
    /// the envelope's.
    pub fn gap_before(&self, i: usize) -> &str {
        if i > 0
            && let Some((prev, gap)) = self.envelope.gaps.get(self.messages[i].id())
            && prev == self.messages[i - 1].id()
        {
            return gap;
        }
        &self.envelope.sep
    }

    /// Write the whole document.
    pub fn write_to(&self, out: &mut impl io::Write) -> io::Result<()> {
        out.write_all(self.envelope.prefix.as_bytes())?;
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.write_all(self.gap_before(i).as_bytes())?;
            }
            match m.raw() {
                Some(r) => out.write_all(r.as_bytes())?,
                None => {
                    out.write_all(to_json_styled(m.fields(), self.envelope.style).as_bytes())?
                }
            }
        }
        out.write_all(self.envelope.suffix.as_bytes())
    }

    /// The whole document as a string.
    pub fn to_json_string(&self) -> String {
        let mut v = Vec::new();
        self.write_to(&mut v).expect("writing to a Vec cannot fail");
        String::from_utf8(v).expect("serialized JSON is UTF-8")
    }

    /// The messages as a JSON array value (for tests and library users).
    pub fn to_value(&self) -> Value {
        Value::Array(
            self.messages
                .iter()
                .map(|m| Value::Object(m.fields().clone()))
                .collect(),
        )
    }

    /// Annotations of a message, if any were written.
    pub fn ann(&self, id: &MessageId) -> Option<&Annotations> {
        self.annotations.get(id)
    }

    /// Mutable annotations of a message, created empty on first use.
    pub fn ann_mut(&mut self, id: &MessageId) -> &mut Annotations {
        self.annotations.entry(id.clone()).or_default()
    }

    /// All annotations (for snapshots).
    pub fn annotations(&self) -> &AnnotationMap {
        &self.annotations
    }

    /// Replace all annotations (restoring a snapshot).
    pub fn set_annotations(&mut self, a: AnnotationMap) {
        self.annotations = a;
    }

    /// True when the message at `i` is annotated `protected` (stages leave
    /// it alone; the pipeline reverts a stage that changes it).
    pub fn is_protected(&self, i: usize) -> bool {
        self.messages
            .get(i)
            .is_some_and(|m| self.ann(m.id()).is_some_and(|a| a.protected))
    }

    /// The conversation's cache of type `T`, made with `T::default()` the
    /// first time it is asked for, shared by the conversation's clones and
    /// never serialized: where a crate built on core keeps what it derived
    /// from the messages (the tool-traffic index keeps its parsed calls
    /// here). The cache must key its entries by what they were derived from
    /// ([`Message::share_key`]), since the messages may change between two
    /// asks.
    pub fn cache<T: Any + Send + Sync + Default>(&self) -> Arc<T> {
        let mut all = self.caches.0.lock().unwrap_or_else(|e| e.into_inner());
        for c in all.iter() {
            if let Ok(t) = Arc::clone(c).downcast::<T>() {
                return t;
            }
        }
        let t = Arc::new(T::default());
        all.push(t.clone());
        t
    }

    /// A fresh id for a message a stage creates, unique in this conversation.
    pub fn fresh_id(&mut self, prefix: &str) -> MessageId {
        loop {
            self.next_id += 1;
            let id = MessageId::new(format!("{prefix}-{}", self.next_id));
            if !self.messages.iter().any(|m| m.id() == &id) {
                return id;
            }
        }
    }

    /// Total size (see [`Message::size`]).
    pub fn size(&self) -> usize {
        self.messages.iter().map(Message::size).sum()
    }

    /// Tool exchanges: each assistant message with tool calls and the messages
    /// holding its results, which together form one atomic unit.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let mut out = Vec::new();
        let n = self.messages.len();
        let mut i = 0;
        while i < n {
            let m = &self.messages[i];
            if m.role() == Role::Assistant && m.has_tool_calls() {
                let call_ids: Vec<String> =
                    m.tool_calls().iter().map(|c| c.id.to_string()).collect();
                let results = exchange_results(&self.messages, i);
                let j = results.end;
                out.push(Exchange {
                    call: i,
                    results: results.collect(),
                    call_ids,
                });
                i = j;
            } else {
                i += 1;
            }
        }
        out
    }
}

/// An assistant message with tool calls plus the messages answering it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// Index of the assistant message.
    pub call: usize,
    /// Indices of the result messages (tool messages, or one Anthropic user message).
    pub results: Vec<usize>,
    /// Call ids, in order.
    pub call_ids: Vec<String>,
}

/// `text` with each lone surrogate escape (`\uD800`-`\uDFFF` not in a
/// high-low pair, which serde_json refuses) replaced by `\uFFFD`, the same
/// length; `None` when there is none (the usual case: nothing is copied).
/// Escapes are found by walking backslashes, so an escaped backslash
/// followed by `ud800` is left alone.
fn lossy_surrogates(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let unit = |i: usize| -> Option<u32> {
        let h = b.get(i..i + 6)?;
        if h[0] != b'\\' || h[1] != b'u' || !h[2..].iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(&h[2..]).ok()?, 16).ok()
    };
    let mut lone = Vec::new();
    let mut i = 0;
    while let Some(p) = b.get(i..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        i += p;
        match unit(i) {
            Some(0xD800..=0xDBFF) => {
                if unit(i + 6).is_some_and(|l| (0xDC00..=0xDFFF).contains(&l)) {
                    i += 12;
                } else {
                    lone.push(i);
                    i += 6;
                }
            }
            Some(0xDC00..=0xDFFF) => {
                lone.push(i);
                i += 6;
            }
            Some(_) => i += 6,
            // Any other escape is two bytes (`\\` included).
            None => i += 2,
        }
    }
    if lone.is_empty() {
        return None;
    }
    let mut out = b.to_vec();
    for at in lone {
        out[at..at + 6].copy_from_slice(b"\\ufffd");
    }
    // Only ASCII bytes were replaced by ASCII bytes.
    String::from_utf8(out).ok()
}

fn derive_id(pos: usize, raw: &str) -> String {
    format!(
        "m{pos}-{:08x}",
        xxhash_rust::xxh3::xxh3_64(raw.as_bytes()) as u32
    )
}

/// The provider shape, from what only one of them has: Anthropic content
/// blocks (`tool_use`, `tool_result`, thinking), then OpenAI's own roles
/// (`tool`, `function`, `developer`) and fields (`tool_calls`,
/// `tool_call_id`, `function_call`), then OpenAI tool definitions
/// (`{"type": "function", "function": ...}`), then an Anthropic top-level
/// `system` or tool definitions with an `input_schema`. A `role: "system"`
/// message says nothing: both take one (Claude Code sends its environment
/// as one inside `messages`), so its first request, before any tool was
/// called, is Anthropic by its top-level `system` and its tools. With none
/// of these, OpenAI.
fn detect_format(messages: &[Message], envelope: &Map<String, Value>) -> Format {
    let blocky = messages.iter().any(|m| match m.content() {
        Some(Value::Array(b)) => b.iter().any(|b| {
            matches!(
                b.get("type").and_then(Value::as_str),
                Some("tool_use")
                    | Some("tool_result")
                    | Some("thinking")
                    | Some("redacted_thinking")
            )
        }),
        _ => false,
    });
    if blocky {
        return Format::Anthropic;
    }
    let openai_messages = messages.iter().any(|m| {
        matches!(m.role_ref(), Role::Tool | Role::Function | Role::Developer)
            || ["tool_calls", "tool_call_id", "function_call"]
                .iter()
                .any(|k| m.fields().contains_key(*k))
    });
    let tools = envelope.get("tools").and_then(Value::as_array);
    let tools_have = |key: &str| tools.is_some_and(|t| t.iter().any(|t| t.get(key).is_some()));
    if openai_messages || tools_have("function") {
        Format::OpenAi
    } else if envelope.contains_key("system") || tools_have("input_schema") {
        Format::Anthropic
    } else {
        Format::OpenAi
    }
}

/// Parse a JSON object into its entries, in order, without parsing the values.
fn parse_object_raw(text: &str) -> Result<Vec<(String, &RawValue)>, serde_json::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<(String, &'de RawValue)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                out.push((k, v));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let v = serde::de::Deserializer::deserialize_map(&mut de, V)?;
    de.end()?;
    Ok(v)
}

struct StyledFormatter;

impl serde_json::ser::Formatter for StyledFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// Serialize fields in a style.
pub fn to_json_styled(fields: &Map<String, Value>, style: Style) -> String {
    if !style.spaced {
        return serde_json::to_string(fields).expect("a JSON map always serializes");
    }
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, StyledFormatter);
    fields
        .serialize(&mut ser)
        .expect("a JSON map always serializes");
    String::from_utf8(buf).expect("serialized JSON is UTF-8")
}

/// The indices of the messages holding the results of the exchange whose
/// calls are in message `i` of `msgs` (the one rule of
/// [`Conversation::exchanges`] and the traffic index's walk): the next
/// message when it is a user message carrying tool results, else the run
/// of tool (or function) messages after `i`.
pub fn exchange_results(msgs: &[Message], i: usize) -> std::ops::Range<usize> {
    let start = i + 1;
    let mut j = start;
    if msgs
        .get(j)
        .is_some_and(|m| *m.role_ref() == Role::User && m.is_tool_result())
    {
        j += 1;
    } else {
        while msgs
            .get(j)
            .is_some_and(|m| matches!(m.role_ref(), Role::Tool | Role::Function))
        {
            j += 1;
        }
    }
    start..j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_byte_identical() {
        for doc in [
            r#"[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "x": [1, 2.50, {"b": 1, "a": 2}]}]"#,
            "  {\"id\": \"c1\", \"messages\": [\n  {\"role\":\"user\",\"content\":\"é\\u00e9\"}\n ], \"meta\": {\"z\": 1, \"a\": 2}}\n",
            "[]",
            "{\"messages\": [ ], \"id\": 3}",
        ] {
            let c = Conversation::parse(doc).unwrap();
            assert_eq!(c.to_json_string(), doc);
        }
    }

    /// Lone surrogate escapes (Python's `json.dumps` writes them) are read
    /// as U+FFFD and written back as they were (issue #33).
    #[test]
    fn lone_surrogates_are_accepted_and_written_back_as_they_were() {
        let doc = r#"{"id": "c\ud800", "t\udfff": "\uDBFF x", "messages": [{"role": "user", "content": "a \ud800 b \udc00\u00e9"}, {"role": "assistant", "content": "pair \ud83d\ude00, escaped \\ud800, end \ud83d"}]}"#;
        let c = Conversation::parse(doc).unwrap();
        assert_eq!(c.to_json_string(), doc);
        assert_eq!(c.messages[0].text(), "a \u{fffd} b \u{fffd}é");
        assert_eq!(
            c.messages[1].text(),
            "pair 😀, escaped \\ud800, end \u{fffd}"
        );
        assert_eq!(c.id().as_deref(), Some("c\u{fffd}"));
        assert_eq!(c.envelope.fields["t\u{fffd}"], "\u{fffd} x");
        // A changed message is written from its fields.
        let mut c = c;
        c.messages[0].set_text("short");
        assert!(c.to_json_string().contains(r#""content": "short""#));
        assert!(c.to_json_string().ends_with(r#"end \ud83d"}]}"#));
        // Valid pairs, escaped backslashes and a trailing backslash: nothing
        // to replace.
        for t in [r#"["\ud83d\ude00"]"#, r#"["\\ud800"]"#, "\\", "\\u12"] {
            assert_eq!(lossy_surrogates(t), None, "{t}");
        }
        assert_eq!(
            lossy_surrogates(r#"["\ud800\ud800\udc00"]"#).as_deref(),
            Some(r#"["\ufffd\ud800\udc00"]"#)
        );
    }

    #[test]
    fn rewritten_messages_follow_the_input_style() {
        let mut c = Conversation::parse(
            r#"[{"role": "user", "content": "hi"}, {"role": "user", "content": "x"}]"#,
        )
        .unwrap();
        c.messages[1].set_text("y");
        assert_eq!(
            c.to_json_string(),
            r#"[{"role": "user", "content": "hi"}, {"role": "user", "content": "y"}]"#
        );
        let mut c = Conversation::parse(r#"[{"role":"user","content":"x"}]"#).unwrap();
        c.messages[0].set_text("y");
        assert_eq!(c.to_json_string(), r#"[{"role":"user","content":"y"}]"#);
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = Conversation::parse("[\n {\"role\": \"user\",, }]").unwrap_err();
        assert_eq!((e.line, e.column), (2, 18), "{e}");
        let e = Conversation::parse("{\"id\": 1}").unwrap_err();
        assert!(e.message.contains("messages"), "{e}");
        let e = Conversation::parse("[1]").unwrap_err();
        assert!(e.message.contains("messages[0]"), "{e}");
        let e = Conversation::parse("   ").unwrap_err();
        assert!(e.message.contains("empty"), "{e}");
        let e = Conversation::parse("\"x\"").unwrap_err();
        assert!(e.message.contains("expected a JSON array"), "{e}");
    }

    #[test]
    fn ids_kept_derived_and_disambiguated() {
        let c = Conversation::parse(r#"[{"role":"user","content":"a","id":"u1"},{"role":"user","content":"b","id":"u1"},{"role":"user","content":"c"}]"#).unwrap();
        assert_eq!(c.messages[0].id().as_str(), "u1");
        assert!(c.messages[1].id().as_str().starts_with("m1-"));
        assert!(c.messages[2].id().as_str().starts_with("m2-"));
    }

    #[test]
    fn format_detection_and_exchanges() {
        let c = Conversation::parse(r#"{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]},{"role":"assistant","content":"done"}]}"#).unwrap();
        assert_eq!(c.format, Format::Anthropic);
        assert_eq!(
            c.exchanges(),
            vec![Exchange {
                call: 1,
                results: vec![2],
                call_ids: vec!["t".into()]
            }]
        );
        let o = Conversation::parse(r#"[{"role":"assistant","content":"","tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}},{"id":"b","function":{"name":"x","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"1"},{"role":"tool","tool_call_id":"b","content":"2"}]"#).unwrap();
        assert_eq!(o.format, Format::OpenAi);
        assert_eq!(o.exchanges()[0].results, vec![1, 2]);
    }

    /// Claude Code's first request: no tool called yet, a top-level
    /// `system`, `tools` with `input_schema`, one user message of text
    /// blocks and its environment as a `role: "system"` message. It was
    /// taken for OpenAI: any system-role message counted against the
    /// top-level `system` (issue #33).
    #[test]
    fn a_claude_code_first_request_is_anthropic() {
        let fmt = |doc: &str| Conversation::parse(doc).unwrap().format;
        let tools =
            r#""tools":[{"name":"Bash","description":"Run","input_schema":{"type":"object"}}]"#;
        let first = format!(
            r#"{{"model":"claude","system":[{{"type":"text","text":"You are Claude Code."}}],{tools},"messages":[{{"role":"user","content":[{{"type":"text","text":"Run the tests."}}]}},{{"role":"system","content":[{{"type":"text","text":"Environment: /repo"}}]}}],"max_tokens":100}}"#
        );
        assert_eq!(fmt(&first), Format::Anthropic);
        // One user message of string content and the top-level system.
        assert_eq!(
            fmt(r#"{"system":"s","messages":[{"role":"user","content":"q"}]}"#),
            Format::Anthropic
        );
        // Anthropic tool definitions alone.
        assert_eq!(
            fmt(&format!(
                r#"{{{tools},"messages":[{{"role":"user","content":"q"}}]}}"#
            )),
            Format::Anthropic
        );
        // OpenAI's own roles, fields and tool definitions win over a stray
        // top-level `system`; nothing either way is OpenAI.
        for doc in [
            r#"{"system":"s","messages":[{"role":"developer","content":"d"},{"role":"user","content":"q"}]}"#,
            r#"{"system":"s","messages":[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"a","content":"r"}]}"#,
            r#"{"system":"s","messages":[{"role":"assistant","content":null,"tool_calls":[]}]}"#,
            r#"{"system":"s","tools":[{"type":"function","function":{"name":"x"}}],"messages":[{"role":"user","content":"q"}]}"#,
            r#"[{"role":"system","content":"s"},{"role":"user","content":"q"}]"#,
        ] {
            assert_eq!(fmt(doc), Format::OpenAi, "{doc}");
        }
        // A known shape is taken as given.
        let doc = r#"{"system":"s","messages":[{"role":"user","content":"q"}]}"#;
        assert_eq!(
            Conversation::parse_as(doc, Format::OpenAi).unwrap().format,
            Format::OpenAi
        );
        assert_eq!(
            Conversation::parse_as(&first, Format::Anthropic)
                .unwrap()
                .to_json_string(),
            first
        );
    }
}
