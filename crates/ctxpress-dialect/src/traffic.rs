//! One parsed view of a conversation's tool traffic, shared by the stages
//! that reason about tool calls (stale pruner, tool compressor).
//!
//! [`Traffic::of`] walks the conversation once: every tool call with its
//! arguments ([`Args`]: OpenAI `function.arguments` strings scanned once and
//! their members parsed on demand, Anthropic `input` objects and object
//! arguments read in place, never stringified and parsed back), its
//! [`Operation`] from a dialect table, the message holding its result, how
//! many calls share its id, and the session's working directory.
//!
//! The parsed calls of each message are cached in the conversation, keyed by
//! the message's shared allocation ([`Message::share_key`], with a clone held
//! so the key is never reused): a later stage asking again (or the same stage
//! in a later run over an unchanged prefix) gets the calls of every message it
//! did not change without parsing them again; only changed or new messages are
//! parsed. Changing a message (copy on write) gives it a new allocation, so a
//! stale entry can never be returned, whoever changed it. The cache is
//! dropped and rebuilt when a stage asks with another dialect table or
//! working directory.
//!
//! Each walk marks the cache entries of the messages it finds and drops the
//! rest, so the cache holds only the conversation's current messages. The
//! exchanges are walked in place ([`Traffic::exchanges`] builds their list only
//! on demand). [`result_facts`] gives a tool result's [`ResultFacts`] (exit
//! code, payload, failed first or last line), worked out the first time any
//! stage asks and kept in the same cache while the result's message is
//! unchanged. A write's content is fingerprinted only when compared
//! ([`DialectTable::write_content`](crate::DialectTable::write_content)); a
//! stage edits an argument without parsing it again with
//! `Message::set_tool_call_arg_at`.

use crate::{self as dialect, DialectTable, Operation, ResultFacts};
use ctxpress_core::conversation::{Conversation, Exchange, exchange_results};
use ctxpress_core::message::{Message, Role};
use foldhash::{HashMap, HashMapExt};
use serde_json::Value;
use std::sync::{Arc, Mutex};

mod args;
pub use args::Args;

/// One tool call, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// The arguments: OpenAI's string parsed (`Value::Null` when it is not
    /// valid JSON), an object given as is, Anthropic's `input`; worked out on
    /// demand (see [`Args`]).
    pub args: Args,
    /// Its operation under the table and working directory the index was
    /// built with; `None` for tools the table does not know.
    pub op: Option<Operation>,
}

/// The tool calls of one message, in [`Message::tool_calls`] order.
pub type MessageCalls = Arc<[ParsedCall]>;

/// The parsed calls of `m` (no operations yet), in [`Message::tool_calls`]
/// order: OpenAI `tool_calls` entries, then Anthropic `tool_use` blocks.
pub fn parse_calls(m: &Message) -> Vec<ParsedCall> {
    parse_calls_with(m, &mut args::Scratch::default())
}

/// The string `v` holds, copied (empty when it is not one).
fn string_of(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or("").to_string()
}

/// OpenAI call `i` of `m`, the value `c` of its `tool_calls` (no operation yet).
fn openai_call(m: &Message, i: usize, c: &Value, scratch: &mut args::Scratch) -> ParsedCall {
    use ctxpress_core::message::vget as get;
    let f = get(c, "function");
    ParsedCall {
        id: string_of(get(c, "id")),
        name: string_of(f.and_then(|f| get(f, "name"))),
        args: Args::openai(m, i, f.and_then(|f| get(f, "arguments")), scratch),
        op: None,
    }
}

/// The parsed calls of `m` as [`parse_calls`] gives them, each with the
/// operation `op_of` gives it. A message whose content holds no `tool_use`
/// block (every OpenAI one) has its calls built in place in the shared
/// slice, without a vector to copy them from.
fn message_calls(
    m: &Message,
    scratch: &mut args::Scratch,
    mut op_of: impl FnMut(&ParsedCall) -> Option<Operation>,
) -> MessageCalls {
    use ctxpress_core::message::{get_small, vget as get};
    let blocky = matches!(m.content(), Some(Value::Array(blocks))
        if blocks.iter().any(|b| get(b, "type").and_then(Value::as_str) == Some("tool_use")));
    if !blocky {
        let calls: &[Value] = match get_small(m.fields(), "tool_calls") {
            Some(Value::Array(calls)) => calls,
            _ => &[],
        };
        return calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut call = openai_call(m, i, c, scratch);
                call.op = op_of(&call);
                call
            })
            .collect();
    }
    let mut calls = parse_calls_with(m, scratch);
    for c in &mut calls {
        c.op = op_of(c);
    }
    MessageCalls::from(calls)
}

/// [`parse_calls`] with working space kept by a caller parsing many.
fn parse_calls_with(m: &Message, scratch: &mut args::Scratch) -> Vec<ParsedCall> {
    use ctxpress_core::message::{get_small, vget as get};
    let s = string_of;
    let mut out = Vec::new();
    if let Some(Value::Array(calls)) = get_small(m.fields(), "tool_calls") {
        out.reserve(calls.len());
        for (i, c) in calls.iter().enumerate() {
            out.push(openai_call(m, i, c, scratch));
        }
    }
    if let Some(Value::Array(blocks)) = m.content() {
        for (i, b) in blocks.iter().enumerate() {
            if get(b, "type").and_then(Value::as_str) == Some("tool_use") {
                out.push(ParsedCall {
                    id: s(get(b, "id")),
                    name: s(get(b, "name")),
                    args: Args::anthropic(m, i, get(b, "input")),
                    op: None,
                });
            }
        }
    }
    out
}

struct Entry {
    /// Held so its allocation (the key) stays alive.
    _msg: Message,
    calls: MessageCalls,
    /// The last [`cached_calls`] pass that found the message.
    seen: u64,
}

struct Results {
    /// Held so its allocation (the key) stays alive.
    _msg: Message,
    /// Facts of the message's first result (by [`Message::tool_result_ids`]
    /// position), once asked about: a tool message's only one.
    first: Option<ResultFacts>,
    /// (position among the result ids, facts of that result's text) for the
    /// other results asked about.
    rest: Vec<(usize, ResultFacts)>,
    /// The last [`cached_calls`] pass that found the message (a new entry
    /// takes the current one).
    seen: u64,
}

#[derive(Default)]
struct CacheState {
    /// Table and working directory the operations were extracted with.
    key: Option<(DialectTable, Option<String>)>,
    by_msg: HashMap<usize, Entry>,
    /// [`ResultFacts`] of tool results, by result message (independent of
    /// the table: the facts are of the text alone).
    results: HashMap<usize, Results>,
    /// Passes of [`cached_calls`] so far: each marks the entries of the
    /// messages it finds, then drops the others.
    pass: u64,
}

/// The conversation's cache of parsed tool calls (see the module docs).
/// It lives in the conversation ([`Conversation::cache`]): clones share it;
/// it is never serialized.
#[derive(Default)]
pub struct Cache(Mutex<CacheState>);

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |s| s.by_msg.len());
        write!(f, "traffic::Cache({n} messages)")
    }
}

/// A call of an exchange: where it is and what answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallRef {
    /// Index of the assistant message holding the call.
    pub msg: usize,
    /// Position among that message's tool calls.
    pub slot: usize,
    /// Index of the message holding its result: the first of the exchange's
    /// result messages that answers its id.
    pub result: Option<usize>,
    /// The id is not empty and no other call in the conversation has it.
    pub unique: bool,
}

/// The tool traffic of a conversation (see the module docs).
#[derive(Debug, Clone)]
pub struct Traffic {
    /// The session's working directory: the one given, normalized, else the
    /// one the conversation states ([`dialect::detect_cwd`]).
    pub cwd: Option<String>,
    /// The calls of every exchange, in conversation order.
    pub calls: Vec<CallRef>,
    /// Parsed calls per message index (empty for messages without calls).
    per_msg: Vec<Option<MessageCalls>>,
}

impl Traffic {
    /// The traffic of `conv` under `table`, with `cwd` as the session's
    /// working directory when given (else the one the conversation states).
    /// Messages whose calls were parsed before with the same table and
    /// working directory are not parsed again.
    pub fn of(conv: &Conversation, table: &DialectTable, cwd: Option<&str>) -> Traffic {
        let cwd = cwd
            .map(|c| dialect::normalize_path(c, None))
            .or_else(|| dialect::detect_cwd(conv));
        let per_msg = cached_calls(conv, table, cwd.as_deref());
        let n_calls: usize = per_msg.iter().flatten().map(|c| c.len()).sum();
        let mut id_counts: HashMap<&str, usize> = HashMap::with_capacity(n_calls);
        for c in per_msg.iter().flatten().flat_map(|c| c.iter()) {
            *id_counts.entry(c.id.as_str()).or_default() += 1;
        }
        let mut calls = Vec::with_capacity(n_calls);
        // call id -> first result message of the exchange answering it (one
        // map, cleared for each exchange)
        let mut answered: HashMap<&str, usize> = HashMap::new();
        // The exchanges as `Conversation::exchanges` finds them, walked in
        // place (no list of them, nor of their call ids, is built).
        let msgs = &conv.messages;
        let mut i = 0;
        while i < msgs.len() {
            let (Some(mc), Some(m)) = (per_msg.get(i).and_then(Option::as_ref), msgs.get(i)) else {
                i += 1;
                continue;
            };
            if *m.role_ref() != Role::Assistant {
                i += 1;
                continue;
            }
            let results = exchange_results(msgs, i);
            answered.clear();
            for r in results.clone() {
                if let Some(rm) = msgs.get(r) {
                    // The ids of `tool_results()`, without building the
                    // results (their texts).
                    for id in rm.tool_result_ids() {
                        answered.entry(id).or_insert(r);
                    }
                }
            }
            for (slot, c) in mc.iter().enumerate() {
                calls.push(CallRef {
                    msg: i,
                    slot,
                    result: answered.get(c.id.as_str()).copied(),
                    unique: !c.id.is_empty() && id_counts.get(c.id.as_str()) == Some(&1),
                });
            }
            i = results.end.max(i + 1);
        }
        drop(id_counts);
        drop(answered);
        Traffic {
            cwd,
            calls,
            per_msg,
        }
    }

    /// The exchanges (as [`Conversation::exchanges`] finds them, with the
    /// call ids of the parsed calls). `conv` must be the conversation the
    /// index was built from.
    pub fn exchanges(&self, conv: &Conversation) -> Vec<Exchange> {
        exchanges(conv, &self.per_msg)
    }

    /// The parsed call `r` points at.
    pub fn call(&self, r: &CallRef) -> &ParsedCall {
        &self.per_msg[r.msg]
            .as_ref()
            .expect("a call's message has calls")[r.slot]
    }

    /// The parsed calls of message `i` (`None` for a message without calls).
    pub fn message_calls(&self, i: usize) -> Option<&MessageCalls> {
        self.per_msg.get(i).and_then(Option::as_ref)
    }

    /// How many calls of the conversation have this id (counted when asked:
    /// [`CallRef::unique`] says what the stages need).
    pub fn id_count(&self, id: &str) -> usize {
        self.per_msg
            .iter()
            .flatten()
            .flat_map(|c| c.iter())
            .filter(|c| c.id == id)
            .count()
    }
}

/// The [`ResultFacts`] of the result of call `call_id` held by message `msg`
/// of `conv`, whose text is `text`: worked out the first time any stage asks,
/// then kept in the conversation's cache while the message is unchanged (a
/// changed message has a new allocation, so it is never answered from a
/// stale entry). `text` must be that result's text
/// ([`Message::tool_results`]).
pub fn result_facts(conv: &Conversation, msg: usize, call_id: &str, text: &str) -> ResultFacts {
    let Some(m) = conv.messages.get(msg) else {
        return ResultFacts::of(text);
    };
    let cache = conv.cache::<Cache>();
    let mut guard = cache.0.lock().unwrap_or_else(|e| e.into_inner());
    // The result is named by the first position of its id among the
    // message's result ids (equal ids, one result: the first, as
    // `Message::tool_result` finds it), so no id is copied; an id the
    // message does not hold is worked out, not kept.
    let Some(at) = m.tool_result_ids().position(|id| id == call_id) else {
        return ResultFacts::of(text);
    };
    let pass = guard.pass;
    let entry = guard
        .results
        .entry(m.share_key())
        .or_insert_with(|| Results {
            _msg: m.clone(),
            first: None,
            rest: Vec::new(),
            seen: pass,
        });
    if at == 0 {
        return *entry.first.get_or_insert_with(|| ResultFacts::of(text));
    }
    if let Some((_, f)) = entry.rest.iter().find(|(k, _)| *k == at) {
        return *f;
    }
    let f = ResultFacts::of(text);
    entry.rest.push((at, f));
    f
}

/// The parsed calls of each message of `conv`, from the cache where the
/// message is unchanged; the cache then holds exactly these messages (and
/// the result facts only of these messages).
///
/// The cache's maps are kept from pass to pass: each message found marks its
/// entry with the pass, a message not found is parsed and inserted, and the
/// entries left unmarked (messages no longer in the conversation) are dropped
/// at the end, instead of every entry being moved into new maps.
fn cached_calls(
    conv: &Conversation,
    table: &DialectTable,
    cwd: Option<&str>,
) -> Vec<Option<MessageCalls>> {
    let cache = conv.cache::<Cache>();
    let mut guard = cache.0.lock().unwrap_or_else(|e| e.into_inner());
    let state = &mut *guard;
    let same_key = state
        .key
        .as_ref()
        .is_some_and(|(t, c)| t == table && c.as_deref() == cwd);
    if !same_key {
        state.by_msg.clear();
        state.key = Some((table.clone(), cwd.map(str::to_string)));
    }
    state.pass += 1;
    let pass = state.pass;
    let mut out = Vec::with_capacity(conv.messages.len());
    // Tool name -> its spec: a conversation calls a few tools many times.
    let mut specs: HashMap<String, Option<&dialect::ToolSpec>> = HashMap::new();
    let mut scratch = args::Scratch::default();
    let mark_results = !state.results.is_empty();
    for m in &conv.messages {
        let key = m.share_key();
        if mark_results && let Some(r) = state.results.get_mut(&key) {
            r.seen = pass;
        }
        if !m.has_tool_calls() {
            out.push(None);
            continue;
        }
        let calls = match state.by_msg.get_mut(&key) {
            Some(e) => {
                e.seen = pass;
                e.calls.clone()
            }
            None => {
                let calls = message_calls(m, &mut scratch, |c| {
                    let spec = match specs.get(c.name.as_str()) {
                        Some(spec) => *spec,
                        None => *specs
                            .entry(c.name.clone())
                            .or_insert_with(|| table.find(&c.name)),
                    };
                    table.extract_with(spec, &c.name, &c.args, cwd)
                });
                state.by_msg.insert(
                    key,
                    Entry {
                        _msg: m.clone(),
                        calls: calls.clone(),
                        seen: pass,
                    },
                );
                calls
            }
        };
        out.push(Some(calls));
    }
    state.by_msg.retain(|_, e| e.seen == pass);
    if mark_results {
        state.results.retain(|_, r| r.seen == pass);
    }
    out
}

/// [`Conversation::exchanges`], with the call ids from the parsed calls.
fn exchanges(conv: &Conversation, per_msg: &[Option<MessageCalls>]) -> Vec<Exchange> {
    let msgs = &conv.messages;
    let mut out = Vec::new();
    let n = msgs.len();
    let mut i = 0;
    while i < n {
        let m = &msgs[i];
        let calls = per_msg.get(i).and_then(Option::as_ref);
        if m.role() == Role::Assistant
            && let Some(calls) = calls
        {
            let results = exchange_results(msgs, i);
            let j = results.end;
            out.push(Exchange {
                call: i,
                results: results.collect(),
                call_ids: calls.iter().map(|c| c.id.clone()).collect(),
            });
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OpKind;

    const DOC: &str = r#"[{"role":"system","content":"Working directory: /repo"},
      {"role":"assistant","content":"","tool_calls":[
        {"id":"a","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"src/x.rs\"}"}},
        {"id":"b","type":"function","function":{"name":"Bash","arguments":{"command":"cargo test"}}}]},
      {"role":"tool","tool_call_id":"a","content":"fn x() {}"},
      {"role":"tool","tool_call_id":"b","content":"ok"},
      {"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"Nope","arguments":"not json"}}]}]"#;

    #[test]
    fn one_walk_gives_calls_results_ids_and_cwd() {
        let conv = Conversation::parse(DOC).unwrap();
        let t = Traffic::of(&conv, dialect::builtin(), None);
        assert_eq!(t.cwd.as_deref(), Some("/repo"));
        assert_eq!(t.exchanges(&conv), conv.exchanges());
        assert_eq!(t.calls.len(), 3);
        let read = t.call(&t.calls[0]);
        assert_eq!(read.op.as_ref().unwrap().kind, OpKind::Read);
        assert_eq!(read.op.as_ref().unwrap().paths, vec!["/repo/src/x.rs"]);
        assert_eq!(t.calls[0].result, Some(2));
        assert!(!t.calls[0].unique, "id a is used twice");
        assert_eq!(t.id_count("a"), 2);
        assert_eq!(t.calls[1].result, Some(3));
        assert!(t.calls[1].unique);
        assert_eq!(t.call(&t.calls[1]).args.value()["command"], "cargo test");
        assert_eq!(t.call(&t.calls[2]).args.value(), &Value::Null);
        assert_eq!(t.calls[2].result, None);
        // Same views as the message's own.
        for r in &t.calls {
            let m = &conv.messages[r.msg];
            let c = &m.tool_calls()[r.slot];
            assert_eq!(
                (c.id.as_ref(), c.name.as_ref()),
                (t.call(r).id.as_str(), t.call(r).name.as_str())
            );
            assert_eq!(&c.args(), t.call(r).args.value());
        }
    }

    #[test]
    fn unchanged_messages_are_not_parsed_again() {
        let mut conv = Conversation::parse(DOC).unwrap();
        let t1 = Traffic::of(&conv, dialect::builtin(), None);
        let t2 = Traffic::of(&conv, dialect::builtin(), None);
        assert!(Arc::ptr_eq(
            t1.per_msg[1].as_ref().unwrap(),
            t2.per_msg[1].as_ref().unwrap()
        ));
        // A changed message is parsed again; the others are shared.
        conv.messages[4].set_text("x");
        let t3 = Traffic::of(&conv, dialect::builtin(), None);
        assert!(Arc::ptr_eq(
            t1.per_msg[1].as_ref().unwrap(),
            t3.per_msg[1].as_ref().unwrap()
        ));
        assert!(!Arc::ptr_eq(
            t1.per_msg[4].as_ref().unwrap(),
            t3.per_msg[4].as_ref().unwrap()
        ));
        // Another working directory: operations extracted again.
        let t4 = Traffic::of(&conv, dialect::builtin(), Some("/other"));
        assert_eq!(
            t4.call(&t4.calls[0]).op.as_ref().unwrap().paths,
            vec!["/other/src/x.rs"]
        );
    }

    #[test]
    fn result_facts_are_kept_while_the_message_is_unchanged() {
        let mut conv = Conversation::parse(DOC).unwrap();
        let text = "Exit code 2\nerror: boom";
        // Asked with another text for the same (message, call): the cached
        // facts answer, which shows the cache is used.
        let f = result_facts(&conv, 2, "a", text);
        assert_eq!(f.exit_code, Some(2));
        assert_eq!(result_facts(&conv, 2, "a", "ok"), f);
        // Another call of the same message is worked out on its own.
        assert_eq!(result_facts(&conv, 2, "z", "ok").exit_code, None);
        // A changed message (new allocation) is never answered from the
        // cache, whoever changed it.
        conv.messages[2].set_text("ok");
        assert_eq!(result_facts(&conv, 2, "a", "ok").exit_code, None);
        // Traffic::of keeps only the facts of messages still present.
        let _ = Traffic::of(&conv, dialect::builtin(), None);
        let n = conv.cache::<Cache>().0.lock().unwrap().results.len();
        assert_eq!(n, 1);
    }

    #[test]
    fn message_calls_are_the_parsed_calls_with_their_operations() {
        let mixed = r#"[{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"u","name":"Read","input":{"file_path":"/b.rs"}}],"tool_calls":[{"id":"o","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}"}}]}]"#;
        let anthropic = r#"{"system":"s","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"/a.rs"}},{"type":"tool_use","id":"v","name":"Nope","input":{}}]}]}"#;
        for doc in [DOC, mixed, anthropic] {
            let conv = Conversation::parse(doc).unwrap();
            let table = dialect::builtin();
            for m in conv.messages.iter().filter(|m| m.has_tool_calls()) {
                let op_of = |c: &ParsedCall| table.extract_args(&c.name, &c.args, Some("/w"));
                let mut want = parse_calls(m);
                for c in &mut want {
                    c.op = op_of(c);
                }
                let got = message_calls(m, &mut args::Scratch::default(), op_of);
                assert_eq!(&got[..], &want[..], "{doc}");
                assert_eq!(got.len(), m.tool_calls().len());
            }
        }
    }

    #[test]
    fn anthropic_input_is_used_as_is() {
        let conv = Conversation::parse(r#"{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"/a.rs","n":1.5}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}"#).unwrap();
        let t = Traffic::of(&conv, dialect::builtin(), None);
        assert_eq!(t.calls.len(), 1);
        assert_eq!(t.calls[0].result, Some(2));
        assert_eq!(
            t.call(&t.calls[0]).args.value(),
            &conv.messages[1].tool_calls()[0].args()
        );
    }
}
