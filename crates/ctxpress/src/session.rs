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

use crate::{Compressor, Error, PipelineConfig, Report};
use ctxpress_core::tokens::count_message;
use ctxpress_core::window::{envelope_tokens, ready};
use ctxpress_core::{Archive, ConfigError, Conversation, Message};
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
    /// own first messages, byte for byte: what a provider can serve from
    /// its prompt cache.
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
    /// Hashes of the original messages the prefix stands for.
    covered: Vec<u64>,
    /// The compressed messages standing for them.
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

fn hash_text(s: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
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
    /// compressed prefix (its messages' texts, source and parsed) and the
    /// hashes and counts of the last request. An estimate for a memory
    /// budget over many sessions, not an exact figure; the pipeline's own
    /// fixed state is left out.
    pub fn retained_bytes(&self) -> usize {
        let prefix: usize = self.prefix.iter().map(message_bytes).sum();
        let hashes = self.covered.capacity() * size_of::<u64>()
            + self.last.capacity() * size_of::<(u64, usize)>()
            // hashbrown: a key, a value and a control byte per bucket.
            + self.counts.capacity() * (size_of::<(u64, usize)>() + 1);
        size_of::<Self>() + prefix + hashes
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
                    let h = hash_text(&c.message_json(m));
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
        request.messages = self
            .prefix
            .iter()
            .cloned()
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
                self.prefix = request.messages.clone();
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

    #[test]
    fn needs_a_window_or_a_budget() {
        let cfg = crate::preset("agent").unwrap();
        let e = Session::new(&cfg).unwrap_err().to_string();
        assert!(e.contains("window"), "{e}");
    }
}
