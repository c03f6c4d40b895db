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

use crate::conversation::{Conversation, Exchange};
use crate::dialect::{self, DialectTable, Operation, ResultFacts};
use crate::message::{Message, Role};
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

/// [`parse_calls`] with working space kept by a caller parsing many.
fn parse_calls_with(m: &Message, scratch: &mut args::Scratch) -> Vec<ParsedCall> {
    use crate::message::{get_small, vget as get};
    fn s(v: Option<&Value>) -> String {
        v.and_then(Value::as_str).unwrap_or("").to_string()
    }
    let mut out = Vec::new();
    if let Some(Value::Array(calls)) = get_small(m.fields(), "tool_calls") {
        for (i, c) in calls.iter().enumerate() {
            let f = get(c, "function");
            out.push(ParsedCall {
                id: s(get(c, "id")),
                name: s(f.and_then(|f| get(f, "name"))),
                args: Args::openai(m, i, f.and_then(|f| get(f, "arguments")), scratch),
                op: None,
            });
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
}

struct Results {
    /// Held so its allocation (the key) stays alive.
    _msg: Message,
    /// (call id, facts of its result text), for the results asked about.
    facts: Vec<(String, ResultFacts)>,
}

#[derive(Default)]
struct CacheState {
    /// Table and working directory the operations were extracted with.
    key: Option<(DialectTable, Option<String>)>,
    by_msg: HashMap<usize, Entry>,
    /// [`ResultFacts`] of tool results, by result message (independent of
    /// the table: the facts are of the text alone).
    results: HashMap<usize, Results>,
}

/// The conversation's cache of parsed tool calls (see the module docs).
/// Clones share it; it is never serialized.
#[derive(Clone, Default)]
pub struct Cache(Arc<Mutex<CacheState>>);

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
    /// The exchanges (as [`Conversation::exchanges`]).
    pub exchanges: Vec<Exchange>,
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
        let mut id_counts: HashMap<&str, usize> = HashMap::new();
        for c in per_msg.iter().flatten().flat_map(|c| c.iter()) {
            *id_counts.entry(c.id.as_str()).or_default() += 1;
        }
        let exchanges = exchanges(conv, &per_msg);
        let mut calls = Vec::new();
        // call id -> first result message of the exchange answering it (one
        // map, cleared for each exchange)
        let mut answered: HashMap<&str, usize> = HashMap::new();
        for ex in &exchanges {
            let Some(mc) = per_msg.get(ex.call).and_then(Option::as_ref) else {
                continue;
            };
            answered.clear();
            for &r in &ex.results {
                if let Some(rm) = conv.messages.get(r) {
                    // The ids of `tool_results()`, without building the
                    // results (their texts).
                    for id in rm.tool_result_ids() {
                        answered.entry(id).or_insert(r);
                    }
                }
            }
            for (slot, c) in mc.iter().enumerate() {
                calls.push(CallRef {
                    msg: ex.call,
                    slot,
                    result: answered.get(c.id.as_str()).copied(),
                    unique: !c.id.is_empty() && id_counts.get(c.id.as_str()) == Some(&1),
                });
            }
        }
        drop(id_counts);
        Traffic {
            cwd,
            calls,
            exchanges,
            per_msg,
        }
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
    let cache = conv.traffic_cache();
    let mut state = cache.0.lock().unwrap_or_else(|e| e.into_inner());
    let entry = state
        .results
        .entry(m.share_key())
        .or_insert_with(|| Results {
            _msg: m.clone(),
            facts: Vec::new(),
        });
    if let Some((_, f)) = entry.facts.iter().find(|(id, _)| id == call_id) {
        return *f;
    }
    let f = ResultFacts::of(text);
    entry.facts.push((call_id.to_string(), f));
    f
}

/// The parsed calls of each message of `conv`, from the cache where the
/// message is unchanged; the cache then holds exactly these messages (and
/// the result facts only of these messages).
fn cached_calls(
    conv: &Conversation,
    table: &DialectTable,
    cwd: Option<&str>,
) -> Vec<Option<MessageCalls>> {
    let cache = conv.traffic_cache();
    let mut state = cache.0.lock().unwrap_or_else(|e| e.into_inner());
    let same_key = state
        .key
        .as_ref()
        .is_some_and(|(t, c)| t == table && c.as_deref() == cwd);
    if !same_key {
        state.by_msg.clear();
        state.key = Some((table.clone(), cwd.map(str::to_string)));
    }
    let mut old = std::mem::take(&mut state.by_msg);
    let mut old_results = std::mem::take(&mut state.results);
    let mut out = Vec::with_capacity(conv.messages.len());
    // Tool name -> its spec: a conversation calls a few tools many times.
    let mut specs: HashMap<String, Option<&dialect::ToolSpec>> = HashMap::new();
    let mut scratch = args::Scratch::default();
    for m in &conv.messages {
        if !old_results.is_empty()
            && let Some(r) = old_results.remove(&m.share_key())
        {
            state.results.insert(m.share_key(), r);
        }
        if !m.has_tool_calls() {
            out.push(None);
            continue;
        }
        let key = m.share_key();
        let calls = match old.remove(&key) {
            Some(e) => e.calls,
            None => {
                let mut calls = parse_calls_with(m, &mut scratch);
                for c in &mut calls {
                    let spec = match specs.get(c.name.as_str()) {
                        Some(spec) => *spec,
                        None => *specs
                            .entry(c.name.clone())
                            .or_insert_with(|| table.find(&c.name)),
                    };
                    c.op = table.extract_with(spec, &c.name, &c.args, cwd);
                }
                MessageCalls::from(calls)
            }
        };
        state.by_msg.insert(
            key,
            Entry {
                _msg: m.clone(),
                calls: calls.clone(),
            },
        );
        out.push(Some(calls));
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
            let mut results = Vec::new();
            let mut j = i + 1;
            if j < n && msgs[j].role() == Role::User && msgs[j].is_tool_result() {
                results.push(j);
                j += 1;
            } else {
                while j < n && matches!(msgs[j].role(), Role::Tool | Role::Function) {
                    results.push(j);
                    j += 1;
                }
            }
            out.push(Exchange {
                call: i,
                results,
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
    use crate::dialect::OpKind;

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
        assert_eq!(t.exchanges, conv.exchanges());
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
        let n = conv.traffic_cache().0.lock().unwrap().results.len();
        assert_eq!(n, 1);
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
