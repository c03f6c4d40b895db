//! The message model: one provider message as an ordered JSON object, with typed
//! views for both OpenAI Chat and Anthropic Messages shapes.
//!
//! A message keeps the exact source text it was parsed from until it is changed,
//! so untouched messages are written back byte-identical.
//!
//! A [`Message`] is cheap to clone (one shared allocation, copied on write, so
//! a change to one clone never shows in another; [`Message::share_key`] names
//! the allocation). [`ToolCall`] and [`ToolResult`] are typed views over OpenAI
//! `tool_calls` / `tool` messages and Anthropic `tool_use` / `tool_result`
//! blocks; [`Message::set_tool_call_arg_at`] edits one string argument of a
//! call whose arguments are already parsed, without parsing them again.

use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// Stable identity of a message inside one conversation: the message's own `id`
/// field when it has a unique one, otherwise derived from position and content.
/// Never written into API output.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct MessageId(pub Arc<str>);

impl MessageId {
    /// Wrap a string as an id.
    pub fn new(s: impl Into<Arc<str>>) -> Self {
        MessageId(s.into())
    }
    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Message role.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// `system`.
    System,
    /// `developer` (OpenAI's newer name for system).
    Developer,
    /// `user`.
    User,
    /// `assistant`.
    Assistant,
    /// `tool` (OpenAI tool result).
    Tool,
    /// `function` (legacy OpenAI function result).
    Function,
    /// Anything else, kept as written; a missing role is the empty string.
    Other(String),
}

impl Role {
    /// Parse a role name.
    pub fn parse(s: &str) -> Role {
        match s {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            other => Role::Other(other.to_string()),
        }
    }
    /// The role name as written.
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Function => "function",
            Role::Other(s) => s,
        }
    }
    /// System or developer.
    pub fn is_system(&self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// A tool call as seen through either dialect.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall<'a> {
    /// Call id (`tool_calls[].id` or `tool_use.id`).
    pub id: Cow<'a, str>,
    /// Tool name.
    pub name: Cow<'a, str>,
    /// Arguments as JSON text (OpenAI's string, or Anthropic's `input` serialized).
    pub arguments: Cow<'a, str>,
}

impl ToolCall<'_> {
    /// Arguments parsed as JSON; `Value::Null` when they are not valid JSON.
    pub fn args(&self) -> Value {
        serde_json::from_str(&self.arguments).unwrap_or(Value::Null)
    }
}

/// A tool result as seen through either dialect.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult<'a> {
    /// The call id it answers.
    pub call_id: Cow<'a, str>,
    /// Result text (string content, or text blocks joined by newlines).
    pub text: Cow<'a, str>,
    /// `is_error` when the dialect reports it.
    pub is_error: Option<bool>,
}

#[derive(Clone)]
struct Inner {
    fields: Map<String, Value>,
    raw: Option<Box<str>>,
    id: MessageId,
    /// The parsed role, worked out on first use (every stage and every
    /// validation asks); reset by `fields_mut`.
    role: OnceLock<Role>,
    /// What the invariant checker reads, worked out on first use (the
    /// pipeline validates after every stage; most messages are unchanged);
    /// reset by `fields_mut`.
    shape: OnceLock<Shape>,
    /// Where in `content` the first `tool_result` block answering each call
    /// id is, worked out the first time a message with many result blocks
    /// is asked for one ([`Message::tool_result_block`]); reset by
    /// `fields_mut`. Looking each up by a scan made a message with N
    /// results cost N² (issue #33).
    /// (And how many blocks answer it.)
    results: OnceLock<foldhash::HashMap<Box<str>, (usize, usize)>>,
}

/// Result blocks up to which [`Message::tool_result_block`] scans instead of
/// building an index.
const SCAN_RESULTS: usize = 16;

/// The tool-call pairing facts of a message.
#[derive(Clone, Debug)]
struct Shape {
    /// Ids of [`Message::tool_calls`], in order.
    call_ids: Vec<Box<str>>,
    /// Call ids of [`Message::tool_results`], in order.
    result_ids: Vec<Box<str>>,
    has_tool_calls: bool,
    empty: bool,
}

/// One message. Cloning is cheap (shared until changed).
#[derive(Clone)]
pub struct Message(Arc<Inner>);

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("id", &self.0.id)
            .field("fields", &self.0.fields)
            .finish()
    }
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.fields == other.0.fields
    }
}

/// `map.get(key)`: a scan of the keys for the few-field objects messages
/// and their blocks are made of (cheaper than hashing the key), a lookup
/// for larger ones.
pub fn get_small<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() <= 8 {
        map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        map.get(key)
    }
}

/// `v.get(key)` for an object `v` (see [`get_small`]); `None` otherwise.
pub fn vget<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => get_small(m, key),
        _ => None,
    }
}

fn str_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// Text of a content value: a string, or the text-bearing parts of an array.
pub fn content_text(c: &Value) -> Cow<'_, str> {
    match c {
        Value::String(s) => Cow::Borrowed(s),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| match vget(p, "type").and_then(Value::as_str) {
                    Some("text") | Some("input_text") | Some("output_text") | None => {
                        str_of(vget(p, "text"))
                    }
                    _ => None,
                })
                .collect();
            if texts.len() == 1 {
                Cow::Borrowed(texts[0])
            } else {
                Cow::Owned(texts.join("\n"))
            }
        }
        _ => Cow::Borrowed(""),
    }
}

/// One step of a path into a message's fields.
#[derive(Clone, Copy)]
enum Step<'a> {
    /// An object member.
    Key(&'a str),
    /// An array element.
    Index(usize),
}

/// The value at `path` in `fields`.
fn value_at<'v>(fields: &'v Map<String, Value>, path: &[Step<'_>]) -> Option<&'v Value> {
    let (Step::Key(k), rest) = path.split_first()? else {
        return None;
    };
    rest.iter().try_fold(fields.get(*k)?, |v, step| match step {
        Step::Key(k) => v.get(*k),
        Step::Index(i) => v.get(*i),
    })
}

/// A copy of `fields` with `null` in place of the value at `path` (a plain
/// copy when there is none): only the objects and arrays on the path are
/// rebuilt, everything beside it is cloned.
fn clone_map_without(fields: &Map<String, Value>, path: &[Step<'_>]) -> Map<String, Value> {
    let Some((Step::Key(key), rest)) = path.split_first() else {
        return fields.clone();
    };
    fields
        .iter()
        .map(|(k, v)| {
            let v = if k == key {
                clone_without(v, rest)
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// [`clone_map_without`] for any value: `null` when `path` is empty.
fn clone_without(v: &Value, path: &[Step<'_>]) -> Value {
    match (v, path.split_first()) {
        (_, None) => Value::Null,
        (Value::Object(m), Some((Step::Key(_), _))) => Value::Object(clone_map_without(m, path)),
        (Value::Array(a), Some((Step::Index(i), rest))) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(j, x)| {
                    if j == *i {
                        clone_without(x, rest)
                    } else {
                        x.clone()
                    }
                })
                .collect(),
        ),
        _ => v.clone(),
    }
}

fn block_type(b: &Value) -> Option<&str> {
    vget(b, "type").and_then(Value::as_str)
}

/// A `tool_result` block's call id (empty when it has none).
fn block_result_id(b: &Value) -> &str {
    str_of(vget(b, "tool_use_id")).unwrap_or("")
}

/// A `tool_result` block as a [`ToolResult`].
fn block_result(b: &Value) -> ToolResult<'_> {
    ToolResult {
        call_id: Cow::Borrowed(block_result_id(b)),
        text: vget(b, "content")
            .map(content_text)
            .unwrap_or(Cow::Borrowed("")),
        is_error: vget(b, "is_error").and_then(Value::as_bool),
    }
}

impl Message {
    /// Build a message from fields, with the given id and no source text.
    pub fn from_fields(id: MessageId, fields: Map<String, Value>) -> Self {
        Message(Arc::new(Inner {
            fields,
            raw: None,
            id,
            role: OnceLock::new(),
            shape: OnceLock::new(),
            results: OnceLock::new(),
        }))
    }

    /// Build a message keeping its exact source text.
    pub fn from_raw(id: MessageId, fields: Map<String, Value>, raw: Box<str>) -> Self {
        Message(Arc::new(Inner {
            fields,
            raw: Some(raw),
            id,
            role: OnceLock::new(),
            shape: OnceLock::new(),
            results: OnceLock::new(),
        }))
    }

    /// A simple `{"role": ..., "content": ...}` message.
    pub fn text_message(id: MessageId, role: &str, content: &str) -> Self {
        let mut m = Map::new();
        m.insert("role".into(), Value::String(role.into()));
        m.insert("content".into(), Value::String(content.into()));
        Self::from_fields(id, m)
    }

    /// The stable id.
    pub fn id(&self) -> &MessageId {
        &self.0.id
    }

    /// Replace the stable id (used when disambiguating duplicate ids).
    pub fn set_id(&mut self, id: MessageId) {
        Arc::make_mut(&mut self.0).id = id;
    }

    /// All fields, in source order.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.0.fields
    }

    /// Mutable fields; the message no longer counts as unchanged.
    pub fn fields_mut(&mut self) -> &mut Map<String, Value> {
        let inner = Arc::make_mut(&mut self.0);
        inner.raw = None;
        inner.role = OnceLock::new();
        inner.shape = OnceLock::new();
        inner.results = OnceLock::new();
        &mut inner.fields
    }

    /// [`Message::fields_mut`] for an edit that overwrites the value at
    /// `path`: a message shared with other handles is copied without that
    /// value (a `null` holds its place until the caller writes the new one),
    /// so the text about to be replaced is never copied.
    fn fields_mut_replacing(&mut self, path: &[Step<'_>]) -> &mut Map<String, Value> {
        if Arc::get_mut(&mut self.0).is_none() {
            let old = &self.0;
            self.0 = Arc::new(Inner {
                fields: clone_map_without(&old.fields, path),
                raw: None,
                id: old.id.clone(),
                role: OnceLock::new(),
                shape: OnceLock::new(),
                results: OnceLock::new(),
            });
        }
        self.fields_mut()
    }

    /// The exact source text, while the message is unchanged.
    pub fn raw(&self) -> Option<&str> {
        self.0.raw.as_deref()
    }

    /// Address of the shared message data: equal for clones of one message
    /// until either is changed (a cache key while a clone is kept alive).
    pub fn share_key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// True when both handles point at the same unchanged allocation.
    pub fn same(a: &Message, b: &Message) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// True when `a` and `b` have the same role and the same tool-call
    /// pairing facts: call ids, result ids, whether they carry calls and
    /// whether they are empty. That is all the invariant checker reads of a
    /// message, so messages that keep their shapes keep their violations.
    pub fn same_shape(a: &Message, b: &Message) -> bool {
        if Message::same(a, b) {
            return true;
        }
        let (x, y) = (a.shape(), b.shape());
        a.role_ref() == b.role_ref()
            && x.has_tool_calls == y.has_tool_calls
            && x.empty == y.empty
            && x.call_ids == y.call_ids
            && x.result_ids == y.result_ids
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role_ref().clone()
    }

    /// The parsed role, borrowed: [`Message::role`] without the copy (the
    /// invariant checker asks for every message after every stage).
    pub fn role_ref(&self) -> &Role {
        self.0
            .role
            .get_or_init(|| Role::parse(str_of(get_small(&self.0.fields, "role")).unwrap_or("")))
    }

    /// The role as written (empty when missing).
    pub fn role_str(&self) -> &str {
        str_of(get_small(&self.0.fields, "role")).unwrap_or("")
    }

    /// The raw `content` value.
    pub fn content(&self) -> Option<&Value> {
        get_small(&self.0.fields, "content")
    }

    /// Text of the message: string content, or its text parts joined by newlines.
    /// Tool-result blocks and tool calls are not included.
    pub fn text(&self) -> Cow<'_, str> {
        self.content()
            .map(content_text)
            .unwrap_or(Cow::Borrowed(""))
    }

    /// True when `content` is a plain string.
    pub fn has_string_content(&self) -> bool {
        matches!(self.content(), Some(Value::String(_)))
    }

    /// Tool calls of an assistant message, OpenAI `tool_calls` and Anthropic
    /// `tool_use` blocks alike, in order.
    pub fn tool_calls(&self) -> Vec<ToolCall<'_>> {
        let mut out = Vec::new();
        if let Some(Value::Array(calls)) = get_small(&self.0.fields, "tool_calls") {
            for c in calls {
                let f = vget(c, "function");
                let args = match f.and_then(|f| vget(f, "arguments")) {
                    Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
                    Some(v) => Cow::Owned(v.to_string()),
                    None => Cow::Borrowed(""),
                };
                out.push(ToolCall {
                    id: Cow::Borrowed(str_of(vget(c, "id")).unwrap_or("")),
                    name: Cow::Borrowed(str_of(f.and_then(|f| vget(f, "name"))).unwrap_or("")),
                    arguments: args,
                });
            }
        }
        if let Some(Value::Array(blocks)) = self.content() {
            for b in blocks {
                if block_type(b) == Some("tool_use") {
                    out.push(ToolCall {
                        id: Cow::Borrowed(str_of(vget(b, "id")).unwrap_or("")),
                        name: Cow::Borrowed(str_of(vget(b, "name")).unwrap_or("")),
                        arguments: Cow::Owned(
                            vget(b, "input").map(Value::to_string).unwrap_or_default(),
                        ),
                    });
                }
            }
        }
        out
    }

    fn shape(&self) -> &Shape {
        self.0.shape.get_or_init(|| {
            let has_tool_calls = self.raw_has_tool_calls();
            Shape {
                call_ids: self.raw_tool_call_ids().map(Box::from).collect(),
                result_ids: self.raw_tool_result_ids().map(Box::from).collect(),
                has_tool_calls,
                empty: self.content_empty() && !has_tool_calls,
            }
        })
    }

    /// The ids of [`Message::tool_calls`], in the same order, without
    /// building the calls (an id that is not a string reads as empty).
    pub fn tool_call_ids(&self) -> impl Iterator<Item = &str> + '_ {
        self.shape().call_ids.iter().map(|s| &**s)
    }

    /// The call ids of [`Message::tool_results`], in the same order, without
    /// building the results (no result text is joined).
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> + '_ {
        self.shape().result_ids.iter().map(|s| &**s)
    }

    fn raw_tool_call_ids(&self) -> impl Iterator<Item = &str> + '_ {
        let calls: &[Value] = match get_small(&self.0.fields, "tool_calls") {
            Some(Value::Array(c)) => c,
            _ => &[],
        };
        calls
            .iter()
            .map(|c| str_of(vget(c, "id")).unwrap_or(""))
            .chain(
                self.blocks_of("tool_use")
                    .map(|b| str_of(vget(b, "id")).unwrap_or("")),
            )
    }

    fn raw_tool_result_ids(&self) -> impl Iterator<Item = &str> + '_ {
        let single = matches!(self.role(), Role::Tool | Role::Function);
        let first = single.then(|| self.own_result_id());
        let blocks: &[Value] = match self.content() {
            Some(Value::Array(b)) if !single => b,
            _ => &[],
        };
        first.into_iter().chain(
            blocks
                .iter()
                .filter(|b| block_type(b) == Some("tool_result"))
                .map(block_result_id),
        )
    }

    /// A `tool` or `function` message's one result id: its `tool_call_id`,
    /// else its `name` (empty when it has neither).
    fn own_result_id(&self) -> &str {
        str_of(get_small(&self.0.fields, "tool_call_id"))
            .or_else(|| str_of(get_small(&self.0.fields, "name")))
            .unwrap_or("")
    }

    /// A `tool` or `function` message's one result: its whole text.
    fn own_result(&self) -> ToolResult<'_> {
        ToolResult {
            call_id: Cow::Borrowed(self.own_result_id()),
            text: self.text(),
            is_error: None,
        }
    }

    /// True when the message carries at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.shape().has_tool_calls
    }

    fn raw_has_tool_calls(&self) -> bool {
        matches!(get_small(&self.0.fields, "tool_calls"), Some(Value::Array(a)) if !a.is_empty())
            || self.blocks_of("tool_use").next().is_some()
    }

    fn blocks_of<'s>(&'s self, ty: &'s str) -> impl Iterator<Item = &'s Value> + 's {
        let blocks: &[Value] = match self.content() {
            Some(Value::Array(b)) => b,
            _ => &[],
        };
        blocks.iter().filter(move |b| block_type(b) == Some(ty))
    }

    /// Tool results carried by this message: an OpenAI `tool` message (one result)
    /// or Anthropic `tool_result` blocks.
    pub fn tool_results(&self) -> Vec<ToolResult<'_>> {
        if matches!(self.role(), Role::Tool | Role::Function) {
            return vec![self.own_result()];
        }
        self.blocks_of("tool_result").map(block_result).collect()
    }

    /// The first of [`Message::tool_results`] answering `call_id`, found
    /// without building the others (no vector, no other result's text; in
    /// constant time, see [`Message::tool_result_block`]).
    pub fn tool_result(&self, call_id: &str) -> Option<ToolResult<'_>> {
        if matches!(self.role_ref(), Role::Tool | Role::Function) {
            return (self.own_result_id() == call_id).then(|| self.own_result());
        }
        self.tool_result_block(call_id).map(block_result)
    }

    /// True when the message carries a result answering `call_id` (an
    /// OpenAI `tool` message its own, an Anthropic `tool_result` block).
    pub fn answers(&self, call_id: &str) -> bool {
        if matches!(self.role_ref(), Role::Tool | Role::Function) {
            return self.own_result_id() == call_id;
        }
        self.tool_result_block(call_id).is_some()
    }

    /// The first Anthropic `tool_result` block answering `call_id`. A
    /// message with many result blocks is indexed by call id the first time
    /// it is asked (kept until it changes), so asking for each of its N
    /// results costs N, not N².
    pub fn tool_result_block(&self, call_id: &str) -> Option<&Value> {
        let Some(Value::Array(blocks)) = self.content() else {
            return None;
        };
        match self.result_index() {
            None => self
                .blocks_of("tool_result")
                .find(|b| block_result_id(b) == call_id),
            Some(index) => index.get(call_id).and_then(|&(i, _)| blocks.get(i)),
        }
    }

    /// Every Anthropic `tool_result` block answering `call_id`, in order
    /// (usually one; found as [`Message::tool_result_block`] finds it).
    pub fn tool_result_blocks(&self, call_id: &str) -> Vec<&Value> {
        let Some(Value::Array(blocks)) = self.content() else {
            return Vec::new();
        };
        let from = match self.result_index() {
            None => 0,
            Some(index) => match index.get(call_id) {
                None => return Vec::new(),
                Some(&(i, 1)) => return blocks.get(i).into_iter().collect(),
                Some(&(i, _)) => i,
            },
        };
        blocks[from.min(blocks.len())..]
            .iter()
            .filter(|b| block_type(b) == Some("tool_result") && block_result_id(b) == call_id)
            .collect()
    }

    /// The call-id index of the result blocks (first position, count), for
    /// a message with more than [`SCAN_RESULTS`] of them.
    fn result_index(&self) -> Option<&foldhash::HashMap<Box<str>, (usize, usize)>> {
        if self.shape().result_ids.len() <= SCAN_RESULTS {
            return None;
        }
        let Some(Value::Array(blocks)) = self.content() else {
            return None;
        };
        Some(self.0.results.get_or_init(|| {
            let mut index = foldhash::HashMap::default();
            for (i, b) in blocks.iter().enumerate() {
                if block_type(b) == Some("tool_result") {
                    index
                        .entry(Box::from(block_result_id(b)))
                        .or_insert((i, 0))
                        .1 += 1;
                }
            }
            index
        }))
    }

    /// True when the message carries tool results.
    pub fn is_tool_result(&self) -> bool {
        matches!(self.role(), Role::Tool | Role::Function)
            || self.blocks_of("tool_result").next().is_some()
    }

    /// True for a user message that only carries tool results (Anthropic shape).
    pub fn is_tool_result_carrier(&self) -> bool {
        if self.role() != Role::User {
            return false;
        }
        match self.content() {
            Some(Value::Array(b)) => {
                !b.is_empty() && b.iter().all(|b| block_type(b) == Some("tool_result"))
            }
            _ => false,
        }
    }

    /// Size measure used for "never longer": characters of text content, tool
    /// result text and tool-call arguments (what a model reads).
    pub fn size(&self) -> usize {
        let mut n = 0;
        match self.content() {
            Some(Value::String(s)) => n += s.chars().count(),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    n += block_size(b);
                }
            }
            _ => {}
        }
        if let Some(Value::Array(calls)) = get_small(&self.0.fields, "tool_calls") {
            for c in calls {
                if let Some(f) = vget(c, "function") {
                    n += str_of(vget(f, "name")).map_or(0, |s| s.chars().count());
                    n += match vget(f, "arguments") {
                        Some(Value::String(s)) => s.chars().count(),
                        Some(v) => v.to_string().chars().count(),
                        None => 0,
                    };
                }
            }
        }
        n
    }

    /// Replace the text of the message. String content is replaced; in a parts
    /// array the first text part gets the text and other text parts are dropped,
    /// leaving non-text blocks (images, tool blocks) in place.
    pub fn set_text(&mut self, text: impl Into<String>) {
        let text = text.into();
        if !matches!(self.content(), Some(Value::Array(_))) {
            // The content is replaced whole (in its place, or appended).
            let content = [Step::Key("content")];
            self.fields_mut_replacing(&content)
                .insert("content".into(), Value::String(text));
            return;
        }
        let fields = self.fields_mut();
        match fields.get_mut("content") {
            Some(Value::Array(parts)) => {
                let mut placed = false;
                let mut text = Some(text);
                parts.retain_mut(|p| {
                    let is_text = matches!(
                        block_type(p),
                        Some("text") | Some("input_text") | Some("output_text")
                    );
                    if !is_text {
                        return true;
                    }
                    if placed {
                        return false;
                    }
                    placed = true;
                    if let Some(obj) = p.as_object_mut() {
                        obj.insert(
                            "text".into(),
                            Value::String(text.take().unwrap_or_default()),
                        );
                    }
                    true
                });
                if !placed && let Some(t) = text {
                    let mut blk = Map::new();
                    blk.insert("type".into(), Value::String("text".into()));
                    blk.insert("text".into(), Value::String(t));
                    parts.insert(0, Value::Object(blk));
                }
            }
            _ => {
                fields.insert("content".into(), Value::String(text));
            }
        }
    }

    /// Replace the text of one text part: the string content (`part` None)
    /// or the `text` of content block `part`. Returns false, changing
    /// nothing, when there is no such text part.
    pub fn set_text_part(&mut self, part: Option<usize>, text: impl Into<String>) -> bool {
        match (part, self.content()) {
            (None, Some(Value::String(_))) => {
                self.set_text(text);
                true
            }
            (Some(i), Some(Value::Array(b)))
                if b.get(i).is_some_and(|b| {
                    block_type(b) == Some("text") && vget(b, "text").is_some_and(Value::is_string)
                }) =>
            {
                let path = [Step::Key("content"), Step::Index(i), Step::Key("text")];
                if let Some(Value::Array(b)) = self.fields_mut_replacing(&path).get_mut("content")
                    && let Some(obj) = b.get_mut(i).and_then(Value::as_object_mut)
                {
                    obj.insert("text".into(), Value::String(text.into()));
                }
                true
            }
            _ => false,
        }
    }

    /// Replace the content of the tool result answering `call_id`. Returns false
    /// when the message holds no such result.
    pub fn set_tool_result_text(&mut self, call_id: &str, text: impl Into<String>) -> bool {
        let text = text.into();
        if matches!(self.role(), Role::Tool | Role::Function) {
            if self
                .tool_results()
                .first()
                .is_some_and(|r| r.call_id == call_id)
            {
                self.set_text(text);
                return true;
            }
            return false;
        }
        let has = self
            .blocks_of("tool_result")
            .any(|b| str_of(vget(b, "tool_use_id")) == Some(call_id));
        if !has {
            return false;
        }
        if let Some(Value::Array(blocks)) = self.fields_mut().get_mut("content") {
            for b in blocks.iter_mut() {
                if block_type(b) == Some("tool_result")
                    && str_of(vget(b, "tool_use_id")) == Some(call_id)
                {
                    if let Some(obj) = b.as_object_mut() {
                        obj.insert("content".into(), Value::String(text));
                    }
                    break;
                }
            }
        }
        true
    }

    /// Replace the string argument `key` of the call `call_id` (OpenAI
    /// `function.arguments`, re-serialized, or an Anthropic `tool_use` block's
    /// `input`), keeping the other arguments and their order. Returns false,
    /// changing nothing, when there is no such call or the argument is not a
    /// string.
    pub fn set_tool_call_arg(&mut self, call_id: &str, key: &str, value: &str) -> bool {
        fn set(obj: &mut Value, key: &str, value: &str) -> bool {
            match obj.get_mut(key) {
                Some(v @ Value::String(_)) => {
                    *v = Value::String(value.to_string());
                    true
                }
                _ => false,
            }
        }
        let in_calls = self
            .tool_calls()
            .iter()
            .position(|c| c.id == call_id && c.args().get(key).is_some_and(Value::is_string));
        let Some(pos) = in_calls else {
            return false;
        };
        let is_openai = matches!(
            get_small(&self.0.fields, "tool_calls"),
            Some(Value::Array(a)) if pos < a.len()
        );
        let fields = self.fields_mut();
        if is_openai {
            let Some(f) = fields
                .get_mut("tool_calls")
                .and_then(|c| c.get_mut(pos))
                .and_then(|c| c.get_mut("function"))
            else {
                return false;
            };
            match f.get_mut("arguments") {
                Some(Value::String(a)) => {
                    let Ok(mut args) = serde_json::from_str::<Value>(a) else {
                        return false;
                    };
                    if !set(&mut args, key, value) {
                        return false;
                    }
                    *a = args.to_string();
                    true
                }
                Some(obj @ Value::Object(_)) => set(obj, key, value),
                _ => false,
            }
        } else {
            let Some(Value::Array(blocks)) = fields.get_mut("content") else {
                return false;
            };
            blocks
                .iter_mut()
                .find(|b| {
                    block_type(b) == Some("tool_use") && str_of(vget(b, "id")) == Some(call_id)
                })
                .and_then(|b| b.get_mut("input"))
                .is_some_and(|input| set(input, key, value))
        }
    }

    /// Replace the string argument `key` of the call at position `slot` (in
    /// [`Message::tool_calls`] order) whose parsed arguments are `args` (e.g.
    /// `traffic::ParsedCall::args`), as [`Message::set_tool_call_arg`] does
    /// without parsing them again: OpenAI string arguments are written from
    /// `args` with the one value replaced, in place, keeping the order.
    /// Returns false, changing nothing, when there is no such call or the
    /// argument is not a string.
    pub fn set_tool_call_arg_at(
        &mut self,
        slot: usize,
        key: &str,
        value: &str,
        args: &Value,
    ) -> bool {
        let Value::Object(parsed) = args else {
            return false;
        };
        if !parsed.get(key).is_some_and(Value::is_string) {
            return false;
        }
        let n_openai = match get_small(&self.0.fields, "tool_calls") {
            Some(Value::Array(a)) => a.len(),
            _ => 0,
        };
        let n_blocks = self.blocks_of("tool_use").count();
        if slot >= n_openai + n_blocks {
            return false;
        }
        let set = |v: &mut Value| match v.get_mut(key) {
            Some(v @ Value::String(_)) => {
                *v = Value::String(value.to_string());
                true
            }
            _ => false,
        };
        let arguments = [
            Step::Key("tool_calls"),
            Step::Index(slot),
            Step::Key("function"),
            Step::Key("arguments"),
        ];
        if slot < n_openai && matches!(value_at(&self.0.fields, &arguments), Some(Value::String(_)))
        {
            // String arguments: written anew from `args`, so the old text is
            // not copied (a shared message is copied without it).
            let mut out = Map::with_capacity(parsed.len());
            for (k, v) in parsed {
                let v = if k == key {
                    Value::String(value.to_string())
                } else {
                    v.clone()
                };
                out.insert(k.clone(), v);
            }
            let written = Value::String(Value::Object(out).to_string());
            let fields = self.fields_mut_replacing(&arguments);
            let slot_value = fields
                .get_mut("tool_calls")
                .and_then(|c| c.get_mut(slot))
                .and_then(|c| c.get_mut("function"))
                .and_then(|f| f.get_mut("arguments"));
            return match slot_value {
                Some(a) => {
                    *a = written;
                    true
                }
                None => false,
            };
        }
        let fields = self.fields_mut();
        if slot < n_openai {
            let Some(f) = fields
                .get_mut("tool_calls")
                .and_then(|c| c.get_mut(slot))
                .and_then(|c| c.get_mut("function"))
            else {
                return false;
            };
            match f.get_mut("arguments") {
                Some(obj @ Value::Object(_)) => set(obj),
                _ => false,
            }
        } else {
            let Some(Value::Array(blocks)) = fields.get_mut("content") else {
                return false;
            };
            blocks
                .iter_mut()
                .filter(|b| block_type(b) == Some("tool_use"))
                .nth(slot - n_openai)
                .and_then(|b| b.get_mut("input"))
                .is_some_and(set)
        }
    }

    /// Remove the tool calls with these ids (OpenAI entries or Anthropic blocks).
    /// An emptied `tool_calls` array is removed, since providers reject it.
    pub fn remove_tool_calls(&mut self, ids: &HashSet<&str>) {
        if !self
            .tool_calls()
            .iter()
            .any(|c| ids.contains(c.id.as_ref()))
        {
            return;
        }
        let gone = |c: &Value| str_of(vget(c, "id")).is_some_and(|id| ids.contains(id));
        // A shared message is copied without the removed calls (their
        // arguments are never copied).
        let kept: Option<Vec<Value>> = match get_small(&self.0.fields, "tool_calls") {
            Some(Value::Array(calls)) if Arc::strong_count(&self.0) > 1 => {
                Some(calls.iter().filter(|c| !gone(c)).cloned().collect())
            }
            _ => None,
        };
        let fields = match kept {
            Some(kept) => {
                let fields = self.fields_mut_replacing(&[Step::Key("tool_calls")]);
                fields.insert("tool_calls".into(), Value::Array(kept));
                fields
            }
            None => self.fields_mut(),
        };
        let mut empty = false;
        if let Some(Value::Array(calls)) = fields.get_mut("tool_calls") {
            calls.retain(|c| !gone(c));
            empty = calls.is_empty();
        }
        if empty {
            fields.shift_remove("tool_calls");
        }
        if let Some(Value::Array(blocks)) = fields.get_mut("content") {
            blocks.retain(|b| {
                !(block_type(b) == Some("tool_use")
                    && str_of(vget(b, "id")).is_some_and(|id| ids.contains(id)))
            });
        }
    }

    /// Remove Anthropic `tool_result` blocks answering these ids.
    pub fn remove_tool_results(&mut self, ids: &HashSet<&str>) {
        if !self
            .blocks_of("tool_result")
            .any(|b| str_of(vget(b, "tool_use_id")).is_some_and(|id| ids.contains(id)))
        {
            return;
        }
        if let Some(Value::Array(blocks)) = self.fields_mut().get_mut("content") {
            blocks.retain(|b| {
                !(block_type(b) == Some("tool_result")
                    && str_of(vget(b, "tool_use_id")).is_some_and(|id| ids.contains(id)))
            });
        }
    }

    /// True when the message has nothing left a provider would accept as content:
    /// no text, no tool calls, no tool results, no other blocks.
    pub fn is_empty(&self) -> bool {
        self.shape().empty
    }

    fn content_empty(&self) -> bool {
        match self.content() {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.trim().is_empty(),
            Some(Value::Array(b)) => b.iter().all(|b| {
                block_type(b) == Some("text")
                    && str_of(vget(b, "text")).is_none_or(|t| t.trim().is_empty())
            }),
            _ => false,
        }
    }
}

fn block_size(b: &Value) -> usize {
    match block_type(b) {
        Some("tool_use") => {
            str_of(vget(b, "name")).map_or(0, |s| s.chars().count())
                + vget(b, "input").map_or(0, |v| v.to_string().chars().count())
        }
        Some("tool_result") => match vget(b, "content") {
            Some(Value::String(s)) => s.chars().count(),
            Some(Value::Array(inner)) => inner.iter().map(block_size).sum(),
            _ => 0,
        },
        Some("thinking") => str_of(vget(b, "thinking")).map_or(0, |s| s.chars().count()),
        _ => str_of(vget(b, "text")).map_or(0, |s| s.chars().count()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Result lookups agree with a scan of the blocks, below and above the
    /// size from which they use the index, with repeated and missing ids,
    /// and after the message changes.
    #[test]
    fn result_lookups_agree_with_a_scan() {
        for n in [3, SCAN_RESULTS + 1, 200] {
            let mut blocks: Vec<Value> = (0..n)
                .map(|i| {
                    serde_json::json!({"type": "tool_result", "tool_use_id": format!("t{}", i % (n - 1)),
                        "content": format!("r{i}")})
                })
                .collect();
            blocks.insert(1, serde_json::json!({"type": "text", "text": "x"}));
            let v = serde_json::json!({"role": "user", "content": blocks});
            let mut m = Message::from_fields(MessageId::new("m"), v.as_object().unwrap().clone());
            let scan = |m: &Message, id: &str| -> Vec<String> {
                m.tool_results()
                    .into_iter()
                    .filter(|r| r.call_id == id)
                    .map(|r| r.text.into_owned())
                    .collect()
            };
            for id in ["t0", "t1", "nope", ""] {
                let all: Vec<String> = m
                    .tool_result_blocks(id)
                    .iter()
                    .map(|b| b["content"].as_str().unwrap().to_string())
                    .collect();
                assert_eq!(all, scan(&m, id), "{n} {id}");
                assert_eq!(
                    m.tool_result(id).map(|r| r.text.into_owned()),
                    scan(&m, id).first().cloned()
                );
                assert_eq!(m.answers(id), !scan(&m, id).is_empty());
            }
            assert_eq!(m.tool_result_blocks("t0").len(), 2, "t0 is answered twice");
            // A change drops the index.
            m.fields_mut()["content"][0]["tool_use_id"] = Value::from("new");
            assert!(m.answers("new"));
            assert_eq!(m.tool_result_blocks("t0").len(), 1);
        }
    }
    use serde_json::json;

    fn msg(v: Value) -> Message {
        Message::from_fields(MessageId::new("m"), v.as_object().unwrap().clone())
    }

    #[test]
    fn openai_tool_calls_and_results() {
        let a = msg(
            json!({"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"a.rs\"}"}}]}),
        );
        let calls = a.tool_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "Read");
        assert_eq!(calls[0].args()["file_path"], "a.rs");
        let t = msg(json!({"role":"tool","tool_call_id":"c1","content":"fn main(){}"}));
        assert_eq!(t.tool_results()[0].call_id, "c1");
        assert_eq!(t.tool_results()[0].text, "fn main(){}");
    }

    /// `tool_result(id)` is `tool_results()`' first with that id.
    fn check_tool_result(m: &Message, ids: &[&str]) {
        for id in ids {
            let want = m.tool_results().into_iter().find(|r| r.call_id == *id);
            assert_eq!(m.tool_result(id), want, "{id} in {m:?}");
        }
    }

    #[test]
    fn one_tool_result_is_the_first_of_all() {
        let ids = ["a", "b", "c", "", "x"];
        for v in [
            json!({"role":"tool","tool_call_id":"a","content":"r"}),
            json!({"role":"tool","name":"b","content":[{"type":"text","text":"t1"},{"type":"text","text":"t2"}]}),
            json!({"role":"function","content":"r"}),
            json!({"role":"user","content":[
                {"type":"tool_result","tool_use_id":"a","content":"one"},
                {"type":"text","text":"between"},
                {"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}],"is_error":true},
                {"type":"tool_result","tool_use_id":"a","content":"again"},
                {"type":"tool_result","content":"no id"}
            ]}),
            json!({"role":"assistant","content":"plain"}),
        ] {
            check_tool_result(&msg(v), &ids);
        }
    }

    proptest::proptest! {
        #[test]
        fn tool_result_answers_as_tool_results(
            role in 0usize..4,
            blocks in proptest::collection::vec((0usize..4, 0usize..3, proptest::bool::ANY), 0..6),
        ) {
            let id = |k: usize| ["a", "b", "c", ""][k % 4];
            let role = ["tool", "user", "function", "assistant"][role];
            let content: Vec<Value> = blocks
                .iter()
                .map(|&(k, t, err)| match t {
                    0 => json!({"type":"text","text":format!("t{k}")}),
                    1 => json!({"type":"tool_result","tool_use_id":id(k),"content":format!("r{k}"),"is_error":err}),
                    _ => json!({"type":"tool_result","tool_use_id":id(k),"content":[{"type":"text","text":"p"},{"type":"text","text":format!("q{k}")}]}),
                })
                .collect();
            let mut v = json!({"role": role, "content": content});
            if let Some((k, _, _)) = blocks.first() {
                v["tool_call_id"] = json!(id(*k));
            }
            check_tool_result(&msg(v), &["a", "b", "c", "", "z"]);
        }
    }

    #[test]
    fn anthropic_blocks() {
        let a = msg(
            json!({"role":"assistant","content":[{"type":"text","text":"look"},{"type":"tool_use","id":"t1","name":"Read","input":{"path":"x"}}]}),
        );
        assert!(a.has_tool_calls());
        assert_eq!(a.text(), "look");
        let u = msg(
            json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"data"}],"is_error":false}]}),
        );
        assert!(u.is_tool_result_carrier());
        assert_eq!(u.tool_results()[0].text, "data");
        let mut u2 = u.clone();
        assert!(u2.set_tool_result_text("t1", "short"));
        assert_eq!(u2.tool_results()[0].text, "short");
        assert!(u.raw().is_none());
    }

    #[test]
    fn remove_calls_drops_empty_array() {
        let mut a = msg(
            json!({"role":"assistant","content":"x","tool_calls":[{"id":"c1","function":{"name":"n","arguments":"{}"}}]}),
        );
        a.remove_tool_calls(&["c1"].into_iter().collect());
        assert!(!a.fields().contains_key("tool_calls"));
        assert!(!a.has_tool_calls());
    }

    #[test]
    fn set_tool_call_arg_in_both_dialects() {
        let mut a = msg(json!({"role":"assistant","content":"","tool_calls":[
                {"id":"c1","type":"function","function":{"name":"Write","arguments":"{\"path\":\"a.rs\",\"content\":\"long text\",\"n\":3}"}},
                {"id":"c2","type":"function","function":{"name":"Write","arguments":"{\"path\":\"b.rs\",\"content\":\"other\"}"}}]}));
        let before = a.clone();
        // Not a string, no such key, no such call, arguments not JSON: no change.
        assert!(!a.set_tool_call_arg("c1", "n", "x"));
        assert!(!a.set_tool_call_arg("c1", "mode", "x"));
        assert!(!a.set_tool_call_arg("c9", "content", "x"));
        assert_eq!(a, before);
        assert!(a.set_tool_call_arg("c2", "content", "S"));
        let calls = a.tool_calls();
        // The other call is untouched; argument order is kept.
        assert_eq!(calls[0].arguments, before.tool_calls()[0].arguments);
        assert_eq!(calls[1].arguments, r#"{"path":"b.rs","content":"S"}"#);

        let mut b = msg(
            json!({"role":"assistant","content":[{"type":"text","text":"w"},{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"x","content":"body"}}]}),
        );
        assert!(b.set_tool_call_arg("t1", "content", "S"));
        assert_eq!(
            b.tool_calls()[0].args(),
            json!({"file_path":"x","content":"S"})
        );
        assert_eq!(b.text(), "w");
        let mut bad = msg(
            json!({"role":"assistant","content":"","tool_calls":[{"id":"c1","function":{"name":"W","arguments":"{not json"}}]}),
        );
        assert!(!bad.set_tool_call_arg("c1", "content", "S"));
    }

    #[test]
    fn set_tool_call_arg_at_matches_set_tool_call_arg() {
        let docs = [
            json!({"role":"assistant","content":"","tool_calls":[
                {"id":"c1","type":"function","function":{"name":"Write","arguments":"{\"path\":\"a.rs\",\"content\":\"long text\",\"n\":3}"}},
                {"id":"c2","type":"function","function":{"name":"Write","arguments":"{\"path\": \"b.rs\", \"content\": \"o\\u00e9\"}"}},
                {"id":"c3","type":"function","function":{"name":"Write","arguments":{"content":"obj","path":"c"}}}]}),
            json!({"role":"assistant","content":[{"type":"text","text":"w"},
                {"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"x","content":"body"}},
                {"type":"tool_use","id":"t2","name":"Write","input":{"content":"b2"}}]}),
        ];
        for d in docs {
            let m = msg(d);
            for (slot, call) in m.tool_calls().iter().enumerate() {
                for key in ["content", "path", "n", "missing"] {
                    let (mut a, mut b) = (m.clone(), m.clone());
                    let ra = a.set_tool_call_arg(&call.id, key, "S");
                    let rb = b.set_tool_call_arg_at(slot, key, "S", &call.args());
                    assert_eq!(ra, rb, "{slot} {key}");
                    if ra {
                        assert_eq!(a.fields(), b.fields(), "{slot} {key}");
                    }
                }
            }
            let mut c = m.clone();
            assert!(!c.set_tool_call_arg_at(9, "content", "S", &json!({"content": "x"})));
        }
    }

    #[test]
    fn role_follows_edits_of_the_fields() {
        let mut m = msg(json!({"role":"tool","tool_call_id":"c","content":"x"}));
        assert_eq!(m.role(), Role::Tool);
        let shared = m.clone();
        m.fields_mut()
            .insert("role".into(), Value::String("assistant".into()));
        assert_eq!(m.role(), Role::Assistant);
        assert_eq!(shared.role(), Role::Tool);
        m.fields_mut().shift_remove("role");
        assert_eq!(m.role(), Role::Other(String::new()));
    }

    #[test]
    fn edits_of_a_shared_message_equal_those_of_an_unshared_one() {
        let docs = [
            json!({"role":"tool","tool_call_id":"c","content":"long text","x":[1,{"a":2}]}),
            json!({"role":"assistant","name":"n"}),
            json!({"role":"assistant","content":"","tool_calls":[
                {"id":"c1","type":"function","function":{"name":"Write","arguments":"{\"path\":\"a\",\"content\":\"long\"}"}},
                {"id":"c2","type":"function","function":{"name":"Read","arguments":"{\"path\":\"b\"}"}}],"z":1}),
        ];
        let edits: [fn(&mut Message); 4] = [
            |m| m.set_text("short"),
            |m| {
                let args = json!({"path": "a", "content": "long"});
                m.set_tool_call_arg_at(0, "content", "S", &args);
            },
            |m| m.remove_tool_calls(&["c1"].into_iter().collect()),
            |m| m.remove_tool_calls(&["c1", "c2"].into_iter().collect()),
        ];
        for d in docs {
            let m = msg(d.clone());
            for edit in edits {
                // Shared with `m` (copied on write) and alone (edited in place).
                let mut shared = m.clone();
                edit(&mut shared);
                let mut alone = msg(d.clone());
                edit(&mut alone);
                assert_eq!(shared.fields(), &alone.fields().clone(), "{d}");
                let keys = |m: &Message| m.fields().keys().cloned().collect::<Vec<_>>();
                assert_eq!(keys(&shared), keys(&alone), "{d}");
                assert_eq!(m.fields(), msg(d.clone()).fields(), "the original is kept");
            }
        }
    }

    #[test]
    fn set_text_keeps_non_text_blocks() {
        let mut a = msg(
            json!({"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]}),
        );
        a.set_text("z");
        assert_eq!(
            a.content().unwrap(),
            &json!([{"type":"text","text":"z"},{"type":"image","source":{}}])
        );
    }

    #[test]
    fn edits_clear_raw_and_share_until_changed() {
        let m = Message::from_raw(
            MessageId::new("a"),
            json!({"role":"user","content":"hi"})
                .as_object()
                .unwrap()
                .clone(),
            "{\"role\": \"user\", \"content\": \"hi\"}".into(),
        );
        let mut c = m.clone();
        assert!(Message::same(&m, &c));
        c.set_text("yo");
        assert!(!Message::same(&m, &c));
        assert!(m.raw().is_some() && c.raw().is_none());
    }
}
