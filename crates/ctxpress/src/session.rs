//! A [`Session`]: one growing conversation compressed so that the provider's
//! prompt cache stays warm.
//!
//! Providers bill a request whose first tokens equal the previous request's
//! far cheaper. A compressor that rewrites the history on every turn throws
//! that away; a session compresses only when the history crosses the
//! trigger, down to the target, and then keeps the compressed messages as a
//! fixed prefix that the next turns append to (hysteresis: nothing happens
//! again until the trigger is crossed). Between two compactions every
//! request starts with the exact messages of the previous one.
//!
//! The client may send the whole original history each turn (the usual
//! case): the known part is recognized by hashes and replaced by the prefix
//! without compressing it again. A history that does not continue the known
//! one (edited, or another conversation) starts the session afresh.
//!
//! Continuation is decided on what the provider reads of a message
//! ([`read_hash`]): cache markers (`cache_control`, on the message or on a
//! content block at any depth) do not count, since clients move them every
//! turn (Claude Code keeps one on its newest message), and string content
//! reads as the one text block it stands for (Claude Code sends its newest
//! message as a marked block, the same message as a string later). The markers of the
//! messages the prefix stands for are dropped from it, so its bytes stay the
//! same from one compaction to the next; the client's marker on its newest
//! message stays there, also when that message is inside the prefix (the
//! compaction turn). System messages are sent as the client sends them,
//! markers included. So a request never has more markers than the client
//! sent, and the breakpoint the client asked for is where it put it.
//!
//! After a compaction that cannot get under the trigger (the part no stage may
//! touch is over it), the session compacts again only once the history has
//! grown by `trigger - target` tokens. Each turn gives a [`TurnReport`]: tokens
//! given and sent, the prefix tokens kept and changed (what the prompt cache
//! can serve and what it gave up), whether it compacted, whether it started
//! afresh. [`Session::retained_bytes`] is the memory a session holds, which the
//! proxy's session budget counts.

use crate::{Compressor, Error, PipelineConfig, Report};
use ctxpress_budget::window::{envelope_tokens, ready};
use ctxpress_core::tokens::count_message;
use ctxpress_core::{Archive, ConfigError, Conversation, Message};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// What one turn cost and saved.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[non_exhaustive]
pub struct TurnReport {
    /// Tokens of the history as given.
    pub tokens_given: usize,
    /// Tokens of the request.
    pub tokens_request: usize,
    /// `tokens_given - tokens_request`.
    pub tokens_saved: usize,
    /// Tokens at the start of this request that are the previous request's
    /// own first messages as the provider reads them (byte for byte but the
    /// cache markers, whose placement does not change what is cached): what
    /// a provider can serve from its prompt cache. Messages only: `system`
    /// and `tools`, cached too, are not counted.
    pub tokens_prefix_kept: usize,
    /// Tokens of the previous request that this one no longer starts with
    /// (the cache given up; 0 between compactions).
    pub tokens_prefix_changed: usize,
    /// This turn crossed the trigger and compressed the history.
    pub compacted: bool,
    /// The request is at or under the trigger. False when the part no
    /// stage may touch (system, recent tail) is over it: the session then
    /// waits for the history to grow by `trigger - target` tokens before it
    /// compacts again, instead of compacting on every turn.
    pub fits: bool,
    /// The history did not continue the one this session knew (edited, or
    /// another conversation): the session started afresh.
    pub reset: bool,
    /// The pipeline's report when this turn compacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
}

/// One growing conversation and its compressed prefix; see the module docs.
#[derive(Debug)]
pub struct Session {
    compressor: Compressor,
    trigger: usize,
    target: usize,
    /// [`read_hash`]es of the original messages the prefix stands for.
    covered: Vec<u64>,
    /// The compressed messages standing for them, without cache markers.
    prefix: Vec<Message>,
    /// Hashes and token counts of the last request's messages.
    last: Vec<(u64, usize)>,
    /// Token counts of the messages of the last history and request, by
    /// hash: a turn counts only its new messages.
    counts: HashMap<u64, usize>,
    /// Compact when a request is over this: the trigger, or after a
    /// compaction that could not get under it, its result plus the room a
    /// compaction is meant to make (`trigger - target`).
    next_trigger: usize,
    compactions: usize,
}

/// The field clients move between turns to mark where the provider should
/// cache: Anthropic's `cache_control`, which OpenAI-compatible gateways
/// take on content parts too. (OpenAI's own caching needs no marker.)
const MARKER: &str = "cache_control";

/// Hash of what the provider reads of a message: every field but the cache
/// markers on the message and on its content blocks, at any depth of
/// blocks (a `tool_result`'s own blocks too; a tool call's `input` is the
/// caller's data and counts whole). Two sends of a message that differ only
/// in where the client put its markers hash the same, and so do content
/// `"s"` and `[{"type": "text", "text": "s"}]`.
pub fn read_hash(m: &Message) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    hash_object(m.fields(), &mut h);
    h.finish()
}

/// [`read_hash`] of a content value: a string or content blocks, e.g. an
/// Anthropic top-level `system`.
pub fn content_read_hash(v: &Value) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    hash_blocks(v, &mut h);
    h.finish()
}

fn hash_object(o: &Map<String, Value>, h: &mut impl Hasher) {
    h.write_u8(6);
    let mut n = 0usize;
    for (k, v) in o {
        if k == MARKER {
            continue;
        }
        n += 1;
        k.hash(h);
        if k == "content" {
            hash_blocks(v, h);
        } else {
            hash_value(v, h);
        }
    }
    h.write_usize(n);
}

fn hash_blocks(v: &Value, h: &mut impl Hasher) {
    match v {
        // A string is the one text block it stands for, to the provider
        // and here: clients send a message both ways (Claude Code sends one
        // as a marked text block while it is the newest, as a string after).
        // Hashed as `[{"type": "text", "text": s}]` is, without building it.
        Value::String(s) => {
            h.write_u8(5);
            h.write_u8(6);
            "type".hash(h);
            h.write_u8(4);
            "text".hash(h);
            "text".hash(h);
            h.write_u8(4);
            s.hash(h);
            h.write_usize(2);
            h.write_usize(1);
        }
        Value::Array(a) => {
            h.write_u8(5);
            for b in a {
                match b {
                    Value::Object(o) => hash_object(o, h),
                    x => hash_value(x, h),
                }
            }
            h.write_usize(a.len());
        }
        x => hash_value(x, h),
    }
}

fn hash_value(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
        Value::Number(n) => {
            h.write_u8(3);
            n.to_string().hash(h);
        }
        Value::String(s) => {
            h.write_u8(4);
            s.hash(h);
        }
        Value::Array(a) => {
            h.write_u8(5);
            for x in a {
                hash_value(x, h);
            }
            h.write_usize(a.len());
        }
        Value::Object(o) => {
            h.write_u8(7);
            for (k, x) in o {
                k.hash(h);
                hash_value(x, h);
            }
            h.write_usize(o.len());
        }
    }
}

/// The last marker of an object or of its content blocks, at any depth.
fn last_marker(o: &Map<String, Value>) -> Option<&Value> {
    let inner = match o.get("content") {
        Some(Value::Array(a)) => a.iter().rev().find_map(|b| match b {
            Value::Object(x) => last_marker(x),
            _ => None,
        }),
        _ => None,
    };
    inner.or_else(|| o.get(MARKER))
}

/// Drop the markers of an object and of its content blocks, at any depth;
/// other fields keep their order.
fn strip_markers(o: &mut Map<String, Value>) {
    o.shift_remove(MARKER);
    if let Some(Value::Array(a)) = o.get_mut("content") {
        for b in a {
            if let Value::Object(x) = b {
                strip_markers(x);
            }
        }
    }
}

/// `m` without markers; unchanged (its source text kept) when it has none,
/// and when it is a system message (those stay byte-identical: the request
/// carries the client's own, see [`Session::prepare_async`]).
fn unmarked(mut m: Message) -> Message {
    if !m.role_ref().is_system() && last_marker(m.fields()).is_some() {
        strip_markers(m.fields_mut());
    }
    m
}

/// Put `marker` on the last block of `m` that can carry one (not a
/// thinking block); string content becomes one text block.
fn put_marker(m: &mut Message, marker: &Value) {
    let fields = m.fields_mut();
    match fields.get_mut("content") {
        Some(Value::String(s)) => {
            let mut b = Map::new();
            b.insert("type".into(), Value::String("text".into()));
            b.insert("text".into(), Value::String(std::mem::take(s)));
            b.insert(MARKER.into(), marker.clone());
            fields.insert("content".into(), Value::Array(vec![Value::Object(b)]));
        }
        Some(Value::Array(a)) => {
            let block = a.iter_mut().rev().find_map(|b| match b {
                Value::Object(x)
                    if !matches!(
                        x.get("type").and_then(Value::as_str),
                        Some("thinking" | "redacted_thinking")
                    ) =>
                {
                    Some(x)
                }
                _ => None,
            });
            if let Some(x) = block {
                x.insert(MARKER.into(), marker.clone());
            }
        }
        _ => {}
    }
}

impl Session {
    /// A session with the pipeline, window and budget of `cfg`: compact when
    /// a request would be over the window's trigger share (or the budget),
    /// down to its target share. With a budget alone, the target is the
    /// budget times `target / trigger` (0.4 / 0.7 by default), so a
    /// compaction leaves room for the turns after it.
    pub fn new(cfg: &PipelineConfig) -> Result<Self, ConfigError> {
        let w = &cfg.window;
        w.validate()?;
        let limits = w.limits().ok_or_else(|| {
            ConfigError::Invalid(
                "a session needs a window (`window.size`) or a budget (`window.budget`)".into(),
            )
        })?;
        let (trigger, target) = match (w.size, w.budget) {
            (None, Some(b)) => (b, ((b as f64) * w.target / w.trigger).floor() as usize),
            _ => (limits.trigger, limits.target),
        };
        let mut inner = cfg.clone();
        inner.window.budget = Some(target.max(1));
        Ok(Session {
            compressor: Compressor::from_config(&inner)?,
            trigger,
            target,
            covered: Vec::new(),
            prefix: Vec::new(),
            last: Vec::new(),
            counts: HashMap::new(),
            next_trigger: trigger,
            compactions: 0,
        })
    }

    /// Archive the originals of every compaction here (so `expand` restores
    /// the history from any request).
    pub fn with_archive(mut self, archive: Option<Arc<dyn Archive>>) -> Self {
        self.compressor = self.compressor.with_archive(archive);
        self
    }

    /// Archive the originals of later compactions here instead (as
    /// [`Session::with_archive`], on a session in place).
    pub fn set_archive(&mut self, archive: Option<Arc<dyn Archive>>) {
        self.compressor.ctx.archive = archive;
    }

    /// Roughly the heap bytes this session keeps between turns: the
    /// compressed prefix (its messages' texts, source and parsed), the
    /// hashes and counts of the last request, and what its token counter
    /// memoizes ([`TokenCounter::retained_bytes`]: an exact counter keeps
    /// the counts of long texts, up to 65,536 of them, per session). An
    /// estimate for a memory budget over many sessions, not an exact
    /// figure; the pipeline's own fixed state is left out.
    ///
    /// [`TokenCounter::retained_bytes`]: ctxpress_core::TokenCounter::retained_bytes
    pub fn retained_bytes(&self) -> usize {
        let prefix: usize = self.prefix.iter().map(message_bytes).sum();
        let hashes = self.covered.capacity() * size_of::<u64>()
            + self.last.capacity() * size_of::<(u64, usize)>()
            // hashbrown: a key, a value and a control byte per bucket.
            + self.counts.capacity() * (size_of::<(u64, usize)>() + 1);
        let memo = self.compressor.counter().retained_bytes();
        size_of::<Self>() + prefix + hashes + memo
    }

    /// Compact above this many tokens.
    pub fn trigger(&self) -> usize {
        self.trigger
    }

    /// Compact down to this many tokens.
    pub fn target(&self) -> usize {
        self.target
    }

    /// Compactions so far.
    pub fn compactions(&self) -> usize {
        self.compactions
    }

    /// True when `prepare_async` is required (an LLM stage).
    pub fn needs_async(&self) -> bool {
        self.compressor.needs_async()
    }

    /// The request for this turn's history (sync stages only).
    pub fn prepare(&mut self, history: &Conversation) -> Result<(Conversation, TurnReport), Error> {
        if self.needs_async() {
            return Err(Error::NeedsAsync);
        }
        ready(self.prepare_async(history)).ok_or(Error::NeedsAsync)?
    }

    /// The request for this turn's history: the history itself while it is
    /// under the trigger, else the kept prefix followed by the messages after
    /// the part it stands for, compacted again when that crosses the trigger.
    pub async fn prepare_async(
        &mut self,
        history: &Conversation,
    ) -> Result<(Conversation, TurnReport), Error> {
        let counter = self.compressor.counter().clone();
        let mut counts = HashMap::with_capacity(history.messages.len() + self.prefix.len());
        let mut measure = |c: &Conversation| -> Vec<(u64, usize)> {
            c.messages
                .iter()
                .map(|m| {
                    let h = read_hash(m);
                    let n = *counts.entry(h).or_insert_with(|| {
                        self.counts
                            .get(&h)
                            .copied()
                            .unwrap_or_else(|| count_message(counter.as_ref(), m))
                    });
                    (h, n)
                })
                .collect()
        };
        let given = measure(history);
        let hashes: Vec<u64> = given.iter().map(|x| x.0).collect();
        let mut report = TurnReport::default();
        // Where the history goes on past what the prefix stands for.
        let continues =
            hashes.len() >= self.covered.len() && hashes[..self.covered.len()] == self.covered[..];
        let rest = if continues {
            self.covered.len()
        } else {
            report.reset = !self.covered.is_empty();
            self.covered.clear();
            self.prefix.clear();
            self.next_trigger = self.trigger;
            0
        };
        let mut request = history.clone();
        // The prefix's system messages are the client's (compaction keeps
        // them byte-identical): sent as the client sends them this turn, so
        // they stay byte-identical and keep the client's markers where it
        // has them now.
        let mut systems = history.messages[..rest]
            .iter()
            .filter(|m| m.role_ref().is_system());
        request.messages = self
            .prefix
            .iter()
            .map(|m| {
                if m.role_ref().is_system()
                    && let Some(now) = systems.next()
                    && read_hash(now) == read_hash(m)
                {
                    return now.clone();
                }
                m.clone()
            })
            .chain(history.messages[rest..].iter().cloned())
            .collect();
        let fixed = envelope_tokens(history, counter.as_ref());
        report.tokens_given = given.iter().map(|x| x.1).sum::<usize>() + fixed;
        let mut now = measure(&request);
        let mut tokens: usize = now.iter().map(|x| x.1).sum::<usize>() + fixed;
        if tokens > self.next_trigger {
            let r = self.compressor.compress_async(&mut request).await?;
            tokens = r.tokens_after;
            let after = measure(&request);
            report.compacted = after.iter().map(|x| x.0).ne(now.iter().map(|x| x.0));
            if report.compacted {
                self.compactions += 1;
                // Without the markers: the same bytes every turn until the
                // next compaction.
                self.prefix = request.messages.drain(..).map(unmarked).collect();
                request.messages = self.prefix.clone();
                self.covered = hashes;
                now = after;
            }
            self.next_trigger = if tokens <= self.trigger {
                self.trigger
            } else {
                tokens + (self.trigger - self.target)
            };
            report.report = Some(r);
        }
        // The request ends inside the prefix (this turn compacted, or the
        // client sent nothing new): its newest message keeps the marker the
        // client put on its own newest one.
        let ends_in_prefix = report.compacted || rest == history.messages.len();
        if ends_in_prefix
            && !self.prefix.is_empty()
            && let (Some(newest), Some(out)) =
                (history.messages.last(), request.messages.last_mut())
            && let Some(marker) = last_marker(newest.fields())
        {
            if read_hash(out) == read_hash(newest) {
                *out = newest.clone();
            } else {
                let marker = marker.clone();
                put_marker(out, &marker);
            }
        }
        report.tokens_request = tokens;
        report.fits = tokens <= self.trigger;
        report.tokens_saved = report.tokens_given.saturating_sub(tokens);
        // The cache: how much of the previous request this one starts with.
        let common = now
            .iter()
            .zip(&self.last)
            .take_while(|(a, b)| a.0 == b.0)
            .count();
        report.tokens_prefix_kept = now[..common].iter().map(|x| x.1).sum();
        report.tokens_prefix_changed = self.last[common..].iter().map(|x| x.1).sum();
        self.last = now;
        self.counts = counts;
        Ok((request, report))
    }
}

/// Heap bytes of one message: its source text when kept, its parsed
/// fields, and the shared cell around them.
fn message_bytes(m: &Message) -> usize {
    let fields: usize = m
        .fields()
        .iter()
        .map(|(k, v)| k.capacity() + size_of::<(String, serde_json::Value)>() + 16 + value_bytes(v))
        .sum();
    256 + m.id().as_str().len() + m.raw().map_or(0, str::len) + fields
}

fn value_bytes(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::String(s) => s.capacity(),
        Value::Number(_) => 24,
        Value::Array(a) => {
            a.capacity() * size_of::<Value>() + a.iter().map(value_bytes).sum::<usize>()
        }
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| k.capacity() + size_of::<(String, Value)>() + 16 + value_bytes(v))
            .sum(),
        Value::Null | Value::Bool(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn history(turns: usize) -> Conversation {
        let mut msgs = vec![json!({"role": "system", "content": "You are a coding agent."})];
        for i in 0..turns {
            msgs.push(json!({"role": "user", "content": format!("Step {i}: look at src/mod_{i}.rs and explain why the cache in it is rebuilt on every call; we measured {i} ms.")}));
            msgs.push(json!({"role": "assistant", "content": format!("In src/mod_{i}.rs the cache is keyed by the request id, which changes every call, so it never hits; keying it by the path fixes it. {}", "The rest of the module is fine. ".repeat(8))}));
        }
        Conversation::parse(&serde_json::Value::Array(msgs).to_string()).unwrap()
    }

    fn texts(c: &Conversation) -> Vec<String> {
        c.messages.iter().map(|m| c.message_json(m)).collect()
    }

    fn session(budget: usize) -> Session {
        let mut cfg = crate::preset("agent").unwrap();
        cfg.window.budget = Some(budget);
        Session::new(&cfg).unwrap()
    }

    #[test]
    fn under_the_trigger_the_request_is_the_history() {
        let mut s = session(100_000);
        let h = history(5);
        let (req, r) = s.prepare(&h).unwrap();
        assert_eq!(req.to_json_string(), h.to_json_string());
        assert!(!r.compacted && !r.reset && r.tokens_saved == 0);
        assert_eq!(r.tokens_request, r.tokens_given);
    }

    #[test]
    fn compacts_rarely_and_keeps_the_prefix_between_compactions() {
        let budget = 3000;
        let mut s = session(budget);
        assert_eq!((s.trigger(), s.target()), (3000, 1714));
        let mut last: Option<Vec<String>> = None;
        let mut compactions = Vec::new();
        for turn in 1..=80 {
            let h = history(turn);
            let (req, r) = s.prepare(&h).unwrap();
            assert!(r.tokens_request <= budget, "turn {turn}: {r:?}");
            assert!(crate::validate(&req).is_empty(), "turn {turn}");
            let now = texts(&req);
            if let Some(prev) = &last {
                if r.compacted {
                    compactions.push(turn);
                    assert!(r.tokens_prefix_changed > 0);
                } else {
                    assert_eq!(
                        &now[..prev.len()],
                        &prev[..],
                        "turn {turn}: the prefix moved"
                    );
                    assert_eq!(r.tokens_prefix_changed, 0);
                    assert!(r.tokens_prefix_kept > 0);
                }
            }
            last = Some(now);
        }
        assert_eq!(s.compactions(), compactions.len());
        assert!(
            (2..=12).contains(&compactions.len()),
            "compactions at turns {compactions:?}"
        );
        // Hysteresis: never two compactions on consecutive turns.
        assert!(
            compactions.windows(2).all(|w| w[1] - w[0] > 1),
            "{compactions:?}"
        );
    }

    #[test]
    fn an_edited_history_starts_afresh_and_the_archive_restores_it() {
        let archive = Arc::new(ctxpress_core::MemoryArchive::new());
        let mut s = session(3000).with_archive(Some(archive.clone()));
        let h = history(40);
        let (req, r) = s.prepare(&h).unwrap();
        assert!(r.compacted);
        let back = crate::expand(&req, archive.as_ref()).unwrap();
        assert_eq!(back.to_json_string(), h.to_json_string());
        // Another conversation: the session starts afresh.
        let other = history(3);
        let (req, r) = s.prepare(&other).unwrap();
        assert!(r.reset && !r.compacted);
        assert_eq!(req.to_json_string(), other.to_json_string());
    }

    /// A Claude Code style session (Anthropic Messages): `system` blocks and
    /// `tools`, one user request, then tool rounds (assistant text and
    /// `tool_use`, user `tool_result`), a short user message now and then.
    /// Deterministic. `turn(k)` is the request body of turn `k`: the first
    /// `2k + 1` messages with the client's one message marker on the newest
    /// message's last block (inside a `tool_result`'s own content blocks
    /// every third turn), none on the others: the client moves it every turn.
    pub(crate) mod claude_code {
        use serde_json::{Value, json};

        pub const MARK: &str = r#""cache_control""#;

        fn output(i: usize) -> Value {
            // 6 to 40 lines, about 12 tokens a line.
            let lines = 6 + (i * 7919 + 13) % 35;
            let text: Vec<String> = (0..lines)
                .map(|l| format!("{l:4}  let v_{i}_{l} = table.get(\"k{i}_{l}\").unwrap_or({l}); // src/m{}.rs", i % 9))
                .collect();
            json!(text.join("\n"))
        }

        fn messages(rounds: usize) -> Vec<Value> {
            let mut m = vec![json!({"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\nAs you answer the user's questions, you can use the following context: the repository is /repo, branch main.\n</system-reminder>"},
                {"type": "text", "text": "The cache in src/m0.rs is rebuilt on every call; find out why and fix it, then run the tests."}
            ]})];
            for i in 0..rounds {
                let (name, input) = match i % 3 {
                    0 => (
                        "Read",
                        json!({"file_path": format!("/repo/src/m{}.rs", i % 9)}),
                    ),
                    1 => (
                        "Bash",
                        json!({"command": format!("cargo test -p m{} -- cache_{i}", i % 9), "description": "Run the tests"}),
                    ),
                    _ => (
                        "Grep",
                        json!({"pattern": format!("cache_{i}"), "path": "/repo/src"}),
                    ),
                };
                m.push(json!({"role": "assistant", "content": [
                    {"type": "text", "text": format!("Step {i}: checking how the cache is keyed in src/m{}.rs.", i % 9)},
                    {"type": "tool_use", "id": format!("toolu_{i:04}"), "name": name, "input": input}
                ]}));
                let result = if i % 2 == 0 {
                    json!({"type": "tool_result", "tool_use_id": format!("toolu_{i:04}"), "content": output(i)})
                } else {
                    json!({"type": "tool_result", "tool_use_id": format!("toolu_{i:04}"), "content": [{"type": "text", "text": output(i)}]})
                };
                let mut blocks = vec![result];
                if i % 10 == 9 {
                    blocks.push(json!({"type": "text", "text": format!("Keep going; step {i} looks right.")}));
                }
                m.push(json!({"role": "user", "content": blocks}));
            }
            m
        }

        /// The request of turn `k` (`k + 1` user messages).
        pub fn turn(k: usize) -> String {
            let mut msgs = messages(k);
            let marker = json!({"type": "ephemeral"});
            let last = msgs.last_mut().unwrap();
            let blocks = last["content"].as_array_mut().unwrap();
            let block = blocks.last_mut().unwrap();
            if k % 3 == 1 && block["content"].is_array() {
                let inner = block["content"].as_array_mut().unwrap();
                inner.last_mut().unwrap()["cache_control"] = marker;
            } else {
                block["cache_control"] = marker;
            }
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 32000,
                "system": [
                    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks. Follow the repository's conventions; run the tests before you finish.", "cache_control": {"type": "ephemeral"}}
                ],
                "tools": [
                    {"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}},
                    {"name": "Bash", "description": "Runs a command.", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}}, "required": ["command"]}},
                    {"name": "Grep", "description": "Searches files.", "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}}
                ],
                "metadata": {"user_id": "user_0123_account_4567_session_89ab"},
                "messages": msgs,
                "stream": true
            })
            .to_string()
        }
    }

    /// Claude Code moves its one message marker to the newest message every
    /// turn. The session must see the history continue (no reset after the
    /// first compaction), compact once per `trigger - target` of growth, keep
    /// the compacted prefix byte for byte between compactions, never send
    /// more markers than the client did, keep the client's marker on the
    /// newest message, and so leave most of every request cacheable.
    #[test]
    fn a_claude_code_session_keeps_its_prefix_while_the_marker_moves() {
        use claude_code::{MARK, turn};
        let mut cfg = crate::preset("agent").unwrap();
        cfg.window.size = Some(100_000);
        let mut s = Session::new(&cfg).unwrap();
        let (trigger, target) = (s.trigger(), s.target());
        let mut prev: Option<Vec<String>> = None;
        let (mut kept, mut sent) = (0usize, 0usize);
        let mut compactions = Vec::new();
        let mut last_given = 0;
        let turns = 220;
        // What went wrong, turn by turn (gathered so that a failure still
        // prints the figures).
        let mut wrong: Vec<String> = Vec::new();
        for k in 1..=turns {
            let h = Conversation::parse(&turn(k)).unwrap();
            let (req, r) = s.prepare(&h).unwrap();
            assert!(crate::validate(&req).is_empty(), "turn {k}");
            assert!(r.tokens_request <= r.tokens_given, "turn {k}");
            assert_eq!(req.envelope.prefix, h.envelope.prefix, "turn {k}");
            let now = texts(&req);
            let marks = |t: &[String]| t.iter().map(|m| m.matches(MARK).count()).sum::<usize>();
            if r.reset {
                wrong.push(format!("turn {k}: reset"));
            }
            if marks(&now) != 1 || marks(&texts(&h)) != 1 {
                wrong.push(format!("turn {k}: {} markers sent", marks(&now)));
            }
            if !now.last().unwrap().contains(MARK) {
                wrong.push(format!("turn {k}: the newest message lost its marker"));
            }
            if r.compacted {
                compactions.push((k, r.tokens_given));
            } else if let Some(p) = &prev
                && (now.len() < p.len() || now[..p.len() - 1] != p[..p.len() - 1])
            {
                // Byte for byte but the previous newest message, which the
                // client unmarked.
                wrong.push(format!("turn {k}: the prefix moved"));
            }
            if k > 1 {
                kept += r.tokens_prefix_kept;
                sent += r.tokens_request;
            }
            last_given = r.tokens_given;
            prev = Some(now);
        }
        let share = kept as f64 / sent as f64;
        let growth = last_given.saturating_sub(trigger) as f64 / (trigger - target) as f64;
        eprintln!(
            "replay: {turns} turns, {} compactions at {compactions:?}, trigger {trigger}, target {target}, given at the end {last_given} ({growth:.2} × (trigger - target) past the trigger), cacheable share {share:.3}",
            compactions.len()
        );
        assert!(
            wrong.is_empty(),
            "{} turns wrong: {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(8)]
        );
        assert!(share >= 0.9, "cacheable share {share:.3}");
        assert_eq!(s.compactions(), compactions.len());
        // A compaction lands at or under the target, so the next one waits
        // for at least `trigger - target` tokens of growth.
        assert!(
            compactions
                .windows(2)
                .all(|w| w[1].1 - w[0].1 >= trigger - target),
            "{compactions:?}"
        );
        let most = 1 + growth.ceil() as usize;
        assert!(
            (most.saturating_sub(1).max(1)..=most).contains(&compactions.len()),
            "{} compactions, expected about {most}",
            compactions.len()
        );
    }

    #[test]
    fn the_read_hash_ignores_markers_and_only_markers() {
        let m = |v: serde_json::Value| {
            let c = Conversation::parse(&json!([v]).to_string()).unwrap();
            read_hash(&c.messages[0])
        };
        let plain = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}]},
            {"type": "text", "text": "go on"}
        ]});
        let mut marked = plain.clone();
        marked["cache_control"] = json!({"type": "ephemeral"});
        marked["content"][1]["cache_control"] = json!({"type": "ephemeral"});
        marked["content"][0]["content"][0]["cache_control"] =
            json!({"type": "ephemeral", "ttl": "1h"});
        assert_eq!(m(plain.clone()), m(marked));
        let mut edited = plain.clone();
        edited["content"][0]["content"][0]["text"] = json!("ok!");
        assert_ne!(m(plain), m(edited));
        // A tool call's input is the caller's data: a key named like a
        // marker there counts.
        let call = |input| json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Set", "input": input}]});
        assert_ne!(
            m(call(json!({"cache_control": 1}))),
            m(call(json!({"cache_control": 2})))
        );
        // OpenAI-compatible parts carry it the same way.
        assert_eq!(
            m(json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})),
            m(
                json!({"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]})
            )
        );
        assert_eq!(
            content_read_hash(
                &json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}])
            ),
            content_read_hash(&json!([{"type": "text", "text": "sys"}]))
        );
    }

    #[test]
    fn string_content_reads_as_its_text_block() {
        let m = |v: serde_json::Value| {
            let c = Conversation::parse(&json!([v]).to_string()).unwrap();
            read_hash(&c.messages[0])
        };
        let block = |text: &str| json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]);
        for role in ["user", "assistant", "system"] {
            assert_eq!(
                m(json!({"role": role, "content": "hi"})),
                m(json!({"role": role, "content": block("hi")})),
                "{role}"
            );
            assert_ne!(
                m(json!({"role": role, "content": "hi"})),
                m(json!({"role": role, "content": block("hi!")})),
                "{role}"
            );
        }
        // Not the same: two blocks, another type, another field.
        let two = json!([{"type": "text", "text": "h"}, {"type": "text", "text": "i"}]);
        let other = json!([{"type": "input_text", "text": "hi"}]);
        let more = json!([{"type": "text", "text": "hi", "citations": []}]);
        for v in [two, other, more] {
            assert_ne!(
                m(json!({"role": "user", "content": "hi"})),
                m(json!({"role": "user", "content": v}))
            );
        }
        // In a tool result too, and a top-level system.
        assert_eq!(
            m(
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]})
            ),
            m(
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": block("ok")}]})
            )
        );
        assert_eq!(
            content_read_hash(&json!("sys")),
            content_read_hash(&block("sys"))
        );
    }

    /// Claude Code 2.1.332 sends a message as one marked text block while it
    /// is the newest and as a string after (its environment, a system
    /// message): the provider reads the same message, so the session goes on
    /// with its prefix, also after a compaction turn that ended with it.
    #[test]
    fn a_message_that_turns_from_marked_block_to_string_continues_the_session() {
        let marker = json!({"type": "ephemeral"});
        let ask = |i: usize| format!("Step {i}: explain src/mod_{i}.rs; we measured {i} ms.");
        let body = |turns: usize| {
            let mut msgs = vec![json!({"role": "system", "content": "You are a coding agent."})];
            for i in 0..turns {
                msgs.push(json!({"role": "user", "content": ask(i)}));
                msgs.push(json!({"role": "assistant", "content": format!("In src/mod_{i}.rs the cache is keyed by the request id. {}", "The rest of the module is fine. ".repeat(8))}));
            }
            msgs.push(json!({"role": "user", "content": [{"type": "text", "text": ask(turns), "cache_control": marker}]}));
            Conversation::parse(&serde_json::Value::Array(msgs).to_string()).unwrap()
        };
        let mut s = session(3000);
        let mut compacted = 0;
        for turn in 1..=60 {
            let (req, r) = s.prepare(&body(turn)).unwrap();
            assert!(!r.reset, "turn {turn}");
            if !r.compacted {
                assert_eq!(r.tokens_prefix_changed, 0, "turn {turn}");
            }
            compacted += usize::from(r.compacted);
            assert!(crate::validate(&req).is_empty(), "turn {turn}");
        }
        assert!(compacted >= 2, "{compacted}");
    }

    #[test]
    fn a_marker_goes_on_the_last_block_that_can_carry_one() {
        let c = Conversation::parse(
            &json!([
                {"role": "user", "content": "plain"},
                {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "t", "signature": "s"}]}
            ])
            .to_string(),
        )
        .unwrap();
        let marker = json!({"type": "ephemeral"});
        let mut a = c.messages[0].clone();
        put_marker(&mut a, &marker);
        assert_eq!(
            Value::Object(a.fields().clone()),
            json!({"role": "user", "content": [{"type": "text", "text": "plain", "cache_control": marker}]})
        );
        let mut b = c.messages[1].clone();
        put_marker(&mut b, &marker);
        assert_eq!(b.fields()["content"][0]["cache_control"], marker);
        assert!(b.fields()["content"][1].get("cache_control").is_none());
        assert_eq!(last_marker(b.fields()), Some(&marker));
        let back = unmarked(b);
        assert_eq!(last_marker(back.fields()), None);
        assert_eq!(read_hash(&back), read_hash(&c.messages[1]));
    }

    /// The client sends the compaction turn's history again (a retry): the
    /// same request goes out, its newest message marked as the client did.
    #[test]
    fn a_retried_compaction_turn_sends_the_same_request() {
        use claude_code::{MARK, turn};
        let mut s = session(12_000);
        let mut k = 1;
        let (first, h) = loop {
            let h = Conversation::parse(&turn(k)).unwrap();
            let (req, r) = s.prepare(&h).unwrap();
            if r.compacted {
                break (req, h);
            }
            k += 1;
        };
        let (again, r) = s.prepare(&h).unwrap();
        assert!(!r.compacted && !r.reset);
        assert_eq!(again.to_json_string(), first.to_json_string());
        let t = texts(&again);
        assert!(t.last().unwrap().contains(MARK));
        assert_eq!(t.iter().filter(|m| m.contains(MARK)).count(), 1);
        assert_eq!(r.tokens_prefix_changed, 0);
    }

    /// An OpenAI-compatible client (a gateway in front of Anthropic) that
    /// marks its system message and moves a second marker to the newest user
    /// message: the system message goes out as the client sends it, marker
    /// and all; the others lose theirs in the prefix.
    #[test]
    fn system_messages_keep_the_clients_markers() {
        let marker = json!({"type": "ephemeral"});
        let body = |turns: usize| {
            let mut msgs = vec![
                json!({"role": "system", "content": [{"type": "text", "text": "You are a coding agent.", "cache_control": marker}]}),
            ];
            for i in 0..turns {
                msgs.push(json!({"role": "user", "content": [{"type": "text", "text": format!("Step {i}: explain src/mod_{i}.rs; we measured {i} ms.")}]}));
                msgs.push(json!({"role": "assistant", "content": format!("In src/mod_{i}.rs the cache is keyed by the request id. {}", "The rest of the module is fine. ".repeat(8))}));
            }
            msgs.push(json!({"role": "user", "content": [{"type": "text", "text": format!("Step {turns}: explain src/mod_{turns}.rs; we measured {turns} ms."), "cache_control": marker}]}));
            Conversation::parse(&serde_json::Value::Array(msgs).to_string()).unwrap()
        };
        let mut s = session(3000);
        let mut compacted = 0;
        for turn in 1..=60 {
            let h = body(turn);
            let (req, r) = s.prepare(&h).unwrap();
            assert!(!r.reset, "turn {turn}");
            compacted += usize::from(r.compacted);
            let (sent, given) = (texts(&req), texts(&h));
            assert_eq!(sent[0], given[0], "turn {turn}: the system message");
            assert_eq!(sent.last(), given.last(), "turn {turn}: the newest message");
            let marks = |t: &[String]| t.iter().filter(|m| m.contains("cache_control")).count();
            assert_eq!(marks(&sent), 2, "turn {turn}");
            assert!(crate::validate(&req).is_empty(), "turn {turn}");
        }
        assert!(compacted >= 2, "{compacted}");
    }

    /// The archive restores the history from a compaction turn's request
    /// and from a later one (markers aside: the prefix drops them).
    #[test]
    fn the_archive_restores_a_marked_history() {
        use claude_code::turn;
        let archive = Arc::new(ctxpress_core::MemoryArchive::new());
        let mut s = session(12_000).with_archive(Some(archive.clone()));
        let reads = |c: &Conversation| c.messages.iter().map(read_hash).collect::<Vec<_>>();
        let mut seen = 0;
        for k in 1..=40 {
            let h = Conversation::parse(&turn(k)).unwrap();
            let (req, r) = s.prepare(&h).unwrap();
            if s.compactions() == 0 {
                continue;
            }
            seen += usize::from(r.compacted);
            let back = crate::expand(&req, archive.as_ref()).unwrap();
            assert_eq!(reads(&back), reads(&h), "turn {k}");
        }
        assert!(seen >= 2, "{seen}");
    }

    /// The token counter's memo is the session's: an exact counter keeps
    /// a count per long text it has seen, and the estimate the proxy's
    /// memory budget bounds includes it (it did not: a session under the
    /// trigger with thousands of long messages was accounted a fraction).
    #[test]
    fn the_estimate_includes_the_counters_memo() {
        let mut cfg = crate::preset("agent").unwrap();
        cfg.window.budget = Some(100_000_000);
        cfg.tokenizer = Some("o200k_base".into());
        let mut s = Session::new(&cfg).unwrap();
        let empty = s.retained_bytes();
        let msgs: Vec<Value> = (0..3000)
            .map(|i| {
                serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
                    "content": format!("{i}: {}", "a long enough message to be memoized. ".repeat(8))})
            })
            .collect();
        let h = Conversation::parse(&Value::Array(msgs).to_string()).unwrap();
        let (_, r) = s.prepare(&h).unwrap();
        assert!(!r.compacted);
        let memo = s.compressor.counter().retained_bytes();
        assert!(memo >= 3000 * size_of::<(u128, usize)>(), "{memo}");
        let hashes = s.last.capacity() * size_of::<(u64, usize)>()
            + s.counts.capacity() * (size_of::<(u64, usize)>() + 1);
        assert_eq!(s.retained_bytes(), size_of::<Session>() + hashes + memo);
        assert!(s.retained_bytes() > empty + memo);
        // The heuristic counter keeps nothing.
        let mut h_cfg = crate::preset("agent").unwrap();
        h_cfg.window.budget = Some(100_000_000);
        let mut plain = Session::new(&h_cfg).unwrap();
        plain.prepare(&h).unwrap();
        assert_eq!(plain.compressor.counter().retained_bytes(), 0);
    }

    #[test]
    fn needs_a_window_or_a_budget() {
        let cfg = crate::preset("agent").unwrap();
        let e = Session::new(&cfg).unwrap_err().to_string();
        assert!(e.contains("window"), "{e}");
    }
}
