//! Fitting a context window: a run-level budget that every pipeline honours.
//!
//! [`WindowConfig`] turns a window size with trigger and target shares (spec
//! 004: 0.70 and 0.40), or an absolute budget (trigger = target), into
//! [`Limits`]. [`fit`] then runs a pipeline so that:
//!
//! - at or below the trigger nothing runs and the conversation is unchanged;
//! - above it, the stages compress **oldest first, only as far as needed**:
//!   after an unrestricted run that fits, the run is repeated with every
//!   message from a *horizon* on frozen (annotated `protected`, which the
//!   pipeline guard enforces), the horizon estimated from the unrestricted
//!   run's per-message savings and checked (binary search when the estimate
//!   falls short); everything after the horizon comes out as it went in;
//! - when the stages alone cannot reach the target, the **ladder** escalates
//!   in order of information lost, each rung the same way: the facade builds
//!   tighter tool-result summaries, old assistant prose, old user prose, and
//!   last [`EvictOldest`], which moves the oldest whole exchanges into the
//!   archive behind one short note and always converges.
//!
//! Protected throughout, by annotation: system messages, the last user
//! message and the last `protected_tail` user/assistant messages. When those
//! alone exceed the target, the report says so (`fits = false`, `over_by`)
//! and nothing protected is touched.

use crate::config::ConfigError;
use crate::conversation::Conversation;
use crate::message::{Message, MessageId, Role};
use crate::pipeline::{Pipeline, Report};
use crate::strategy::{StageContext, StageOutcome, Strategy, StrategyError};
use crate::tokens::{TokenCounter, count_message};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::time::Instant;

/// When to compress and how far: the `[window]` table of a pipeline config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WindowConfig {
    /// The model's context window in tokens.
    pub size: Option<usize>,
    /// Share of `size` above which the conversation is compressed.
    pub trigger: f64,
    /// Share of `size` the conversation is compressed down to.
    pub target: f64,
    /// Absolute budget in tokens: trigger = target = budget (with `size`
    /// too, the lower of each).
    pub budget: Option<usize>,
    /// The last this many user/assistant messages are never touched.
    pub protected_tail: usize,
    /// After the stages, escalate through the ladder until under the target
    /// (spec 000's `forceConverge`, done so that it converges).
    pub force_converge: bool,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            size: None,
            trigger: 0.70,
            target: 0.40,
            budget: None,
            protected_tail: 5,
            force_converge: true,
        }
    }
}

/// Token thresholds of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Compress only above this many tokens.
    pub trigger: usize,
    /// Compress down to this many tokens.
    pub target: usize,
}

impl WindowConfig {
    /// The thresholds, or `None` when neither a size nor a budget is set.
    pub fn limits(&self) -> Option<Limits> {
        let share = |w: usize, s: f64| (w as f64 * s).floor() as usize;
        match (self.size, self.budget) {
            (None, None) => None,
            (None, Some(b)) => Some(Limits {
                trigger: b,
                target: b,
            }),
            (Some(w), None) => Some(Limits {
                trigger: share(w, self.trigger),
                target: share(w, self.target),
            }),
            (Some(w), Some(b)) => Some(Limits {
                trigger: share(w, self.trigger).min(b),
                target: share(w, self.target).min(b),
            }),
        }
    }

    /// Check the values; errors name the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, message: String| {
            ConfigError::Invalid(format!("`window.{field}`: {message}"))
        };
        if !(self.target > 0.0 && self.target <= 1.0) {
            return Err(bad(
                "target",
                format!("must be a share in (0, 1], found {}", self.target),
            ));
        }
        if !(self.trigger >= self.target && self.trigger <= 1.0) {
            return Err(bad(
                "trigger",
                format!(
                    "must be a share between target ({}) and 1, found {}",
                    self.target, self.trigger
                ),
            ));
        }
        if self.size == Some(0) {
            return Err(bad("size", "must be at least 1 token".into()));
        }
        if self.budget == Some(0) {
            return Err(bad("budget", "must be at least 1 token".into()));
        }
        Ok(())
    }
}

/// What one rung of the ladder did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RungReport {
    /// Rung name (`tool_results`, `assistant_prose`, `user_prose`, `evict`).
    pub name: String,
    /// Conversations the rung ran on.
    pub conversations: usize,
    /// Messages the rung rewrote.
    pub messages_changed: usize,
    /// Messages the rung removed (net).
    pub messages_removed: usize,
    /// Tokens the rung removed.
    pub tokens_removed: usize,
    /// Wall time in microseconds.
    pub micros: u128,
}

/// What fit and what it cost (summed over a batch).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetReport {
    /// Tokens above which a conversation is compressed.
    pub trigger: usize,
    /// Tokens a conversation is compressed down to.
    pub target: usize,
    /// Token counter the decisions were made with.
    pub counter: String,
    /// True when every conversation ends at or under the target (or was
    /// at or under the trigger).
    pub fits: bool,
    /// Conversations.
    pub conversations: usize,
    /// Conversations over the trigger (the others were left unchanged).
    pub triggered: usize,
    /// Conversations that fit.
    pub fitting: usize,
    /// Tokens in.
    pub tokens_before: usize,
    /// Tokens out.
    pub tokens_after: usize,
    /// Tokens over the target, summed over the conversations that do not fit.
    pub over_by: usize,
    /// Messages never touched: system, the last user message, the tail.
    pub protected_messages: usize,
    /// Tokens that cannot go, as the run ends: the protected messages plus
    /// the results of their tool calls (summarized as far as they could be,
    /// never separated from the call).
    pub protected_tokens: usize,
    /// Rungs of the ladder that ran, in order.
    pub rungs: Vec<RungReport>,
}

impl BudgetReport {
    /// Add another conversation's figures.
    pub fn merge(&mut self, o: &BudgetReport) {
        self.fits &= o.fits;
        self.conversations += o.conversations;
        self.triggered += o.triggered;
        self.fitting += o.fitting;
        self.tokens_before += o.tokens_before;
        self.tokens_after += o.tokens_after;
        self.over_by += o.over_by;
        self.protected_messages += o.protected_messages;
        self.protected_tokens += o.protected_tokens;
        for r in &o.rungs {
            match self.rungs.iter_mut().find(|x| x.name == r.name) {
                Some(x) => {
                    x.conversations += r.conversations;
                    x.messages_changed += r.messages_changed;
                    x.messages_removed += r.messages_removed;
                    x.tokens_removed += r.tokens_removed;
                    x.micros += r.micros;
                }
                None => self.rungs.push(r.clone()),
            }
        }
    }
}

/// One rung of the ladder: a pipeline run oldest first after the stages.
#[derive(Debug)]
pub struct Rung {
    /// Name in reports.
    pub name: String,
    /// What the rung runs.
    pub pipeline: Pipeline,
}

impl Rung {
    /// A rung of one sync strategy.
    pub fn of(name: &str, s: Box<dyn Strategy>) -> Self {
        let mut pipeline = Pipeline::default();
        pipeline.push(s);
        Rung {
            name: name.into(),
            pipeline,
        }
    }
}

/// Most reruns of one pipeline while searching the horizon.
const MAX_PROBES: usize = 12;

fn tokens_of(conv: &Conversation, ctx: &StageContext) -> Vec<usize> {
    conv.messages
        .iter()
        .map(|m| count_message(ctx.counter.as_ref(), m))
        .collect()
}

/// Ids of the messages the ladder never touches: system messages, the last
/// user message (not counting ctxpress's own notes) and the last `tail`
/// user/assistant messages (tool-result carriers do not count, as in spec 004).
pub fn protected_ids(conv: &Conversation, tail: usize) -> HashSet<MessageId> {
    let mut out = HashSet::new();
    let conversational = |m: &Message| {
        matches!(m.role(), Role::User | Role::Assistant) && !m.is_tool_result_carrier()
    };
    for m in &conv.messages {
        if m.role().is_system() {
            out.insert(m.id().clone());
        }
    }
    if let Some(m) = conv.messages.iter().rev().find(|m| {
        m.role() == Role::User && !m.is_tool_result_carrier() && !is_generated_note(&m.text())
    }) {
        out.insert(m.id().clone());
    }
    for m in conv
        .messages
        .iter()
        .rev()
        .filter(|m| conversational(m))
        .take(tail)
    {
        out.insert(m.id().clone());
    }
    out
}

/// True for the user-role notes ctxpress writes in place of what it moved
/// out (an evict note, a compaction's `[Context Summary`): they are not the
/// user's requests, so the "last user message" rule looks past them.
pub fn is_generated_note(text: &str) -> bool {
    text.starts_with("[Context Summary")
        || (text.starts_with('[') && text.contains(" earlier messages archived: "))
}

/// Mark `ids` protected; returns the ids that were not already.
fn mark(conv: &mut Conversation, ids: impl IntoIterator<Item = MessageId>) -> Vec<MessageId> {
    let mut newly = Vec::new();
    for id in ids {
        let a = conv.ann_mut(&id);
        if !a.protected {
            a.protected = true;
            newly.push(id);
        }
    }
    newly
}

fn unmark(conv: &mut Conversation, ids: &[MessageId]) {
    for id in ids {
        conv.ann_mut(id).protected = false;
    }
}

/// The first index at or after `h` that does not split a tool call from its
/// results.
fn snap(conv: &Conversation, mut h: usize) -> usize {
    while conv.messages.get(h).is_some_and(Message::is_tool_result) {
        h += 1;
    }
    h
}

/// The smallest horizon `h` such that, if the stages did to the messages
/// before `h` what the unrestricted run did, the conversation would fit:
/// each input message is charged what stands for it in `after` (itself, or
/// the message that replaces it first), oldest first.
fn estimate_horizon(
    before: &Conversation,
    before_tokens: &[usize],
    after: &Conversation,
    ctx: &StageContext,
    target: usize,
) -> usize {
    let present: HashSet<&MessageId> = before.messages.iter().map(Message::id).collect();
    let mut charged: HashMap<&MessageId, usize> = HashMap::new();
    for m in &after.messages {
        let t = count_message(ctx.counter.as_ref(), m);
        let owner = match after.ann(m.id()).and_then(|a| a.replaces.first()) {
            Some(first) if !present.contains(m.id()) => first,
            _ => m.id(),
        };
        *charged.entry(owner).or_default() += t;
    }
    let mut now: usize = before_tokens.iter().sum();
    for (i, (m, &t)) in before.messages.iter().zip(before_tokens).enumerate() {
        let c = charged.get(m.id()).copied().unwrap_or(0);
        now = (now + c).saturating_sub(t);
        if now <= target {
            return i + 1;
        }
    }
    before.messages.len()
}

/// Run `p` so that it reaches `target` touching the oldest messages only:
/// the unrestricted run when it does not fit (it did what it could), else a
/// run frozen from the smallest horizon found that fits.
async fn step(conv: &mut Conversation, p: &Pipeline, ctx: &StageContext, target: usize) -> Report {
    let n = conv.messages.len();
    let mut full = conv.clone();
    let full_report = p.run_async(&mut full, ctx).await;
    if full_report.tokens_after > target || full_report.tokens_after >= full_report.tokens_before {
        *conv = full;
        return full_report;
    }
    let before_tokens = tokens_of(conv, ctx);
    let est = snap(
        conv,
        estimate_horizon(conv, &before_tokens, &full, ctx, target),
    );
    let mut best = (full, full_report);
    let (mut lo, mut hi) = (est, n);
    let mut first = true;
    for _ in 0..MAX_PROBES {
        if lo >= hi {
            break;
        }
        let h = snap(conv, if first { lo } else { lo + (hi - lo) / 2 });
        if h >= hi {
            break;
        }
        let mut c = conv.clone();
        let frozen = mark(
            &mut c,
            conv.messages[h..]
                .iter()
                .map(|m| m.id().clone())
                .collect::<Vec<_>>(),
        );
        let r = p.run_async(&mut c, ctx).await;
        unmark(&mut c, &frozen);
        if r.tokens_after <= target {
            best = (c, r);
            hi = h;
            if first {
                break;
            }
        } else {
            lo = h + 1;
        }
        first = false;
    }
    *conv = best.0;
    best.1
}

/// Compress `conv` to fit `limits`: nothing at or under the trigger; else
/// the stages oldest first, then (with `force_converge`) the ladder's rungs
/// in order, each only as far as needed. The report's `budget` says what fit.
/// `ctx.budget` is set to the target for the stages.
pub async fn fit(
    conv: &mut Conversation,
    ctx: &StageContext,
    stages: &Pipeline,
    ladder: &[Rung],
    cfg: &WindowConfig,
    limits: Limits,
) -> Report {
    let start = Instant::now();
    // Text outside the messages (an Anthropic request's `system`, the tool
    // definitions) is sent too: it counts against the limits and no stage
    // can shrink it.
    let fixed = envelope_tokens(conv, ctx.counter.as_ref());
    let inner_target = limits.target.saturating_sub(fixed);
    let before_tokens: usize = tokens_of(conv, ctx).iter().sum::<usize>() + fixed;
    let (messages_before, chars_before) = (conv.messages.len(), conv.size());
    let mut budget = BudgetReport {
        trigger: limits.trigger,
        target: limits.target,
        counter: ctx.counter.name().to_string(),
        conversations: 1,
        tokens_before: before_tokens,
        ..BudgetReport::default()
    };
    let mut report = Report {
        messages_before,
        tokens_before: before_tokens,
        chars_before,
        ..Report::default()
    };
    let mut now = before_tokens;
    if before_tokens > limits.trigger {
        budget.triggered = 1;
        let protected = protected_ids(conv, cfg.protected_tail);
        budget.protected_messages = protected.len();
        let marked = mark(conv, protected.iter().cloned());
        let run_ctx = StageContext {
            budget: Some(inner_target),
            ..ctx.clone()
        };
        let r = step(conv, stages, &run_ctx, inner_target).await;
        report.stages.extend(r.stages);
        if !stages.stages.is_empty() {
            now = r.tokens_after + fixed;
        }
        if cfg.force_converge {
            for rung in ladder {
                if now <= limits.target {
                    break;
                }
                let t = Instant::now();
                let was: HashSet<usize> = conv.messages.iter().map(Message::share_key).collect();
                let keep_alive = conv.clone();
                let r = step(conv, &rung.pipeline, &run_ctx, inner_target).await;
                if r.tokens_after + fixed > now {
                    // Fewer characters but more tokens: not worth it.
                    *conv = keep_alive;
                    continue;
                }
                let changed = conv
                    .messages
                    .iter()
                    .filter(|m| !was.contains(&m.share_key()))
                    .count();
                drop(keep_alive);
                budget.rungs.push(RungReport {
                    name: rung.name.clone(),
                    conversations: 1,
                    messages_changed: changed,
                    messages_removed: r.messages_before.saturating_sub(r.messages_after),
                    tokens_removed: now.saturating_sub(r.tokens_after + fixed),
                    micros: t.elapsed().as_micros(),
                });
                report.stages.extend(r.stages.into_iter().map(|mut s| {
                    s.name = format!("{}:{}", rung.name, s.name);
                    s
                }));
                // What the output counts, even when a rung's rewrites have
                // fewer characters but more tokens.
                now = r.tokens_after + fixed;
            }
        }
        budget.protected_tokens = pinned_tokens(conv, &protected, ctx) + fixed;
        unmark(conv, &marked);
    }
    budget.tokens_after = now;
    budget.fits = now <= limits.target || before_tokens <= limits.trigger;
    budget.fitting = usize::from(budget.fits);
    budget.over_by = if budget.fits { 0 } else { now - limits.target };
    report.messages_after = conv.messages.len();
    report.tokens_after = now;
    report.chars_after = conv.size();
    report.budget = Some(budget);
    report.micros = start.elapsed().as_micros();
    report
}

/// Tokens of the text a conversation sends outside its messages, counted
/// against the limits: an Anthropic request's top-level `system` and the
/// tool definitions (`tokens::fixed_tokens`, which `ctxpress stats` adds
/// too). 0 for a bare array.
pub fn envelope_tokens(conv: &Conversation, counter: &dyn TokenCounter) -> usize {
    crate::tokens::fixed_tokens(conv, counter).total()
}

/// Tokens of the `protected` messages of `conv` and of the results that
/// answer their tool calls.
fn pinned_tokens(conv: &Conversation, protected: &HashSet<MessageId>, ctx: &StageContext) -> usize {
    let mut pinned: HashSet<usize> = conv
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| protected.contains(m.id()))
        .map(|(i, _)| i)
        .collect();
    for ex in conv.exchanges() {
        if pinned.contains(&ex.call) {
            pinned.extend(ex.results);
        }
    }
    pinned
        .into_iter()
        .filter_map(|i| conv.messages.get(i))
        .map(|m| count_message(ctx.counter.as_ref(), m))
        .sum()
}

/// Drive a future whose every step is ready at once (a pipeline of sync
/// stages run through the async driver); `None` if it ever waits.
pub fn ready<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// The last rung: moves the oldest whole exchanges (never a tool call
/// without its results, never a protected or system message) out of the
/// conversation, oldest first, until it fits `ctx.budget`, each contiguous
/// run behind one user-role note
/// `[N earlier messages archived: ...; ctxpress expand restores them]`
/// whose `replaces` names them, so the archive keeps them for `expand`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EvictOldest;

/// Registered name of [`EvictOldest`].
pub const EVICT: &str = "evict";

/// Paths an evict note lists as only read (edited ones come first and, at
/// full detail, all of them).
const NOTE_READ: usize = 6;
/// Characters of the first user request a note quotes.
const NOTE_REQUEST: usize = 160;
/// Detail levels of a note, most first: the most edited paths it lists.
const NOTE_DETAIL: [usize; 4] = [usize::MAX, 40, 12, 0];

fn push_new(v: &mut Vec<String>, p: &str) {
    if !v.iter().any(|x| x == p) {
        v.push(p.to_string());
    }
}

/// What the messages an evict note stands for were, gathered one message at
/// a time: roles, tools, the files they edited and read, and the prose of the
/// first user request (before any code fence), clipped.
#[derive(Debug, Default)]
struct NoteBuilder {
    count: usize,
    roles: BTreeMap<&'static str, usize>,
    tools: BTreeMap<String, usize>,
    edited: Vec<String>,
    read: Vec<String>,
    request: Option<String>,
}

impl NoteBuilder {
    fn add(&mut self, m: &Message) {
        self.count += 1;
        let role = if m.is_tool_result() {
            "tool result"
        } else {
            match m.role() {
                Role::User => "user",
                Role::Assistant => "assistant",
                _ => "other",
            }
        };
        *self.roles.entry(role).or_default() += 1;
        if role == "user" && self.request.is_none() {
            let t = m.text();
            let prose = t.split("```").next().unwrap_or("");
            let words: Vec<&str> = prose.split_whitespace().collect();
            if !words.is_empty() {
                let flat = words.join(" ");
                let clipped: String = flat.chars().take(NOTE_REQUEST).collect();
                let more = if clipped.len() < flat.len() {
                    "…"
                } else {
                    ""
                };
                self.request = Some(format!("{clipped}{more}"));
            }
        }
        for c in m.tool_calls() {
            *self.tools.entry(c.name.to_string()).or_default() += 1;
            if let Some(op) = crate::dialect::extract(&c) {
                for p in op.modified_paths() {
                    push_new(&mut self.edited, p);
                }
                for p in &op.paths {
                    if !op.modified_paths().contains(p) {
                        push_new(&mut self.read, p);
                    }
                }
            }
        }
    }

    /// The note, listing at most `max_edited` edited paths (and the number
    /// left out).
    fn render(&self, max_edited: usize) -> String {
        // Paths relative to the folder they all share, named once.
        let base = common_dir(self.edited.iter().chain(&self.read));
        let rel = |p: &str| p.get(base.len()..).unwrap_or(p).to_string();
        let mut s = format!("[{} earlier messages archived: ", self.count);
        let parts: Vec<String> = self.roles.iter().map(|(r, n)| format!("{n} {r}")).collect();
        s.push_str(&parts.join(", "));
        if !self.tools.is_empty() {
            let mut t: Vec<(&String, &usize)> = self.tools.iter().collect();
            t.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let t: Vec<String> = t.iter().take(6).map(|(k, v)| format!("{k}×{v}")).collect();
            s.push_str("; tools: ");
            s.push_str(&t.join(", "));
        }
        if !self.edited.is_empty() && max_edited > 0 {
            let shown: Vec<String> = self
                .edited
                .iter()
                .take(max_edited)
                .map(|p| rel(p))
                .collect();
            if !base.is_empty() {
                s.push_str(&format!("; in {base}"));
            }
            s.push_str(&format!("; edited: {}", shown.join(", ")));
            if shown.len() < self.edited.len() {
                s.push_str(&format!(" (+{} more)", self.edited.len() - shown.len()));
            }
        }
        let read: Vec<String> = self
            .read
            .iter()
            .filter(|p| !self.edited.contains(p))
            .take(if max_edited == 0 { 0 } else { NOTE_READ })
            .map(|p| rel(p))
            .collect();
        if !read.is_empty() {
            if !base.is_empty() && (self.edited.is_empty() || max_edited == 0) {
                s.push_str(&format!("; in {base}"));
            }
            s.push_str(&format!("; read: {}", read.join(", ")));
        }
        if let Some(r) = &self.request {
            s.push_str(&format!("; first request: \"{r}\""));
        }
        s.push_str("; ctxpress expand restores them]");
        s
    }

    /// The most detailed rendering whose tokens stay within `limit` (the
    /// least detailed one otherwise), with its tokens.
    fn render_within(&self, limit: usize, ctx: &StageContext) -> (String, usize) {
        let mut last = (String::new(), usize::MAX);
        for cap in NOTE_DETAIL {
            let text = self.render(cap);
            let probe = Message::text_message(MessageId::new(""), "user", &text);
            let t = count_message(ctx.counter.as_ref(), &probe);
            last = (text, t);
            if t <= limit {
                break;
            }
        }
        last
    }
}

/// The longest folder (ending in `/`, at least two segments deep) that
/// every path starts with; empty when there is none or just one path.
fn common_dir<'a>(mut paths: impl Iterator<Item = &'a String>) -> String {
    let Some(first) = paths.next() else {
        return String::new();
    };
    let mut len = first.rfind('/').map_or(0, |i| i + 1);
    let mut n = 1;
    for p in paths {
        n += 1;
        while len > 0 && !(p.len() > len && p.is_char_boundary(len) && p[..len] == first[..len]) {
            len = first[..len - 1].rfind('/').map_or(0, |i| i + 1);
        }
    }
    let dir = &first[..len];
    if n < 2 || dir.matches('/').count() < 3 {
        return String::new();
    }
    dir.to_string()
}

/// At most this share of the target goes to one evict note.
const NOTE_SHARE: usize = 4;

impl Strategy for EvictOldest {
    fn name(&self) -> &str {
        EVICT
    }

    fn apply(
        &self,
        conv: &mut Conversation,
        ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let mut out = StageOutcome::default();
        let Some(target) = ctx.budget else {
            return Ok(out);
        };
        let toks = tokens_of(conv, ctx);
        let mut total: usize = toks.iter().sum();
        let n = conv.messages.len();
        let locked: Vec<bool> = conv
            .messages
            .iter()
            .map(|m| m.role().is_system() || conv.ann(m.id()).is_some_and(|a| a.protected))
            .collect();
        let cut = |i: usize| i >= n || !conv.messages[i].is_tool_result();
        // (start, end, note text) of each run to replace, oldest first.
        let mut runs: Vec<(usize, usize, String)> = Vec::new();
        let mut i = 0;
        while i < n && total > target {
            if locked[i] || !cut(i) {
                i += 1;
                continue;
            }
            let mut best = None;
            let (mut e, mut saved) = (i, 0usize);
            let mut note = NoteBuilder::default();
            let limit = (target / NOTE_SHARE).max(64);
            while e < n && !locked[e] {
                saved += toks[e];
                note.add(&conv.messages[e]);
                e += 1;
                if cut(e) {
                    let (note, nt) = note.render_within(limit, ctx);
                    if saved > nt {
                        best = Some((e, saved - nt, note));
                        if total - (saved - nt) <= target {
                            break;
                        }
                    }
                }
            }
            match best {
                Some((e, gain, note)) => {
                    total -= gain;
                    runs.push((i, e, note));
                    i = e;
                }
                None => i = e.max(i + 1),
            }
        }
        if runs.is_empty() {
            return Ok(out);
        }
        let old = std::mem::take(&mut conv.messages);
        let mut msgs = Vec::with_capacity(n);
        let mut at = 0;
        for (s, e, note) in runs {
            msgs.extend(old[at..s].iter().cloned());
            let id = conv.fresh_id("evicted");
            let note = Message::text_message(id.clone(), "user", &note);
            conv.ann_mut(&id).replaces = old[s..e].iter().map(|m| m.id().clone()).collect();
            out.count("messages_archived", (e - s) as u64);
            out.count("notes", 1);
            msgs.push(note);
            at = e;
        }
        msgs.extend(old[at..].iter().cloned());
        conv.messages = msgs;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conv(v: serde_json::Value) -> Conversation {
        Conversation::parse(&v.to_string()).unwrap()
    }

    #[test]
    fn limits_from_size_budget_or_both() {
        let mut w = WindowConfig::default();
        assert_eq!(w.limits(), None);
        w.size = Some(100_000);
        assert_eq!(
            w.limits(),
            Some(Limits {
                trigger: 70_000,
                target: 40_000
            })
        );
        w.budget = Some(50_000);
        assert_eq!(
            w.limits(),
            Some(Limits {
                trigger: 50_000,
                target: 40_000
            })
        );
        w.size = None;
        assert_eq!(
            w.limits(),
            Some(Limits {
                trigger: 50_000,
                target: 50_000
            })
        );
        w.target = 0.8;
        let e = w.validate().unwrap_err().to_string();
        assert!(e.contains("window.trigger"), "{e}");
    }

    #[test]
    fn protected_are_system_last_user_and_tail() {
        let mut msgs = vec![json!({"role": "system", "content": "s"})];
        for i in 0..6 {
            msgs.push(json!({"role": "user", "content": format!("u{i}")}));
            msgs.push(json!({"role": "assistant", "content": format!("a{i}")}));
        }
        let c = conv(json!(msgs));
        let p = protected_ids(&c, 3);
        let idx: Vec<usize> = c
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| p.contains(m.id()))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(idx, vec![0, 10, 11, 12]);
    }

    #[test]
    fn evict_keeps_exchanges_whole_and_stops_when_it_fits() {
        let big = "word ".repeat(400);
        let mut msgs = vec![json!({"role": "system", "content": "sys"})];
        for i in 0..4 {
            msgs.push(json!({"role": "user", "content": format!("task {i} {big}")}));
            msgs.push(json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": format!("c{i}"), "type": "function", "function": {"name": "Read", "arguments": format!("{{\"file_path\":\"/r/f{i}.rs\"}}")}}]}));
            msgs.push(
                json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": big.clone()}),
            );
        }
        msgs.push(json!({"role": "user", "content": "last"}));
        let mut c = conv(json!(msgs));
        let toks = tokens_of(&c, &StageContext::default());
        let total: usize = toks.iter().sum();
        // Room for all but the first two exchanges (and the note).
        let budget = total - toks[1..7].iter().sum::<usize>() + 150;
        let ctx = StageContext {
            budget: Some(budget),
            ..StageContext::default()
        };
        let p = protected_ids(&c, 1);
        let marked = mark(&mut c, p);
        assert_eq!(marked.len(), 2);
        let out = EvictOldest.apply(&mut c, &ctx).unwrap();
        assert!(crate::validate(&c).is_empty(), "{:?}", crate::validate(&c));
        assert!(tokens_of(&c, &ctx).iter().sum::<usize>() <= budget);
        assert_eq!(c.messages[0].role(), Role::System);
        let note = c.messages[1].text().into_owned();
        assert!(
            note.starts_with("[6 earlier messages archived: 2 assistant, 2 tool result, 2 user; tools: Read×2; read: /r/f0.rs, /r/f1.rs; first request: \"task 0 word word"),
            "{note}"
        );
        assert_eq!(out.counters["messages_archived"], 6);
        assert_eq!(c.ann(c.messages[1].id()).unwrap().replaces.len(), 6);
        assert_eq!(c.messages.last().unwrap().text(), "last");
        assert_eq!(c.messages[2].text(), format!("task 2 {big}"));
    }

    #[test]
    fn notes_name_paths_under_their_shared_folder_and_shrink_to_fit() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            common_dir(p(&["/w/repo/a.rs", "/w/repo/src/b.rs"]).iter()),
            "/w/repo/"
        );
        assert_eq!(common_dir(p(&["/w/repo/a.rs"]).iter()), "", "one path");
        assert_eq!(common_dir(p(&["/a.rs", "/b.rs"]).iter()), "", "too shallow");
        assert_eq!(common_dir(p(&["/w/x/é.rs", "/w/x/éa.rs"]).iter()), "/w/x/");
        let mut b = NoteBuilder::default();
        for i in 0..50 {
            let args = format!("{{\"file_path\":\"/w/repo/src/module_{i}.rs\",\"content\":\"x\"}}");
            let m = serde_json::json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": format!("c{i}"), "type": "function", "function": {"name": "Write", "arguments": args}}]});
            b.add(&Message::from_fields(
                MessageId::new(format!("m{i}")),
                m.as_object().unwrap().clone(),
            ));
        }
        let ctx = StageContext::default();
        let (full, t_full) = b.render_within(usize::MAX, &ctx);
        assert!(
            full.contains("in /w/repo/src/; edited: module_0.rs, module_1.rs"),
            "{full}"
        );
        assert!(
            full.contains("module_49.rs") && !full.contains("more)"),
            "{full}"
        );
        let (short, t_short) = b.render_within(t_full - 1, &ctx);
        assert!(t_short < t_full);
        assert!(short.contains("(+10 more)"), "40 listed: {short}");
        let (bare, _) = b.render_within(1, &ctx);
        assert!(!bare.contains("edited"), "{bare}");
    }

    #[test]
    fn the_last_user_message_is_a_request_not_a_note() {
        let c = conv(json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "the task"},
            {"role": "user", "content": "[Context Summary: 9 earlier messages]"},
            {"role": "assistant", "content": "a"}
        ]));
        let p = protected_ids(&c, 0);
        assert!(p.contains(c.messages[1].id()), "{p:?}");
        assert!(!p.contains(c.messages[2].id()));
        assert!(is_generated_note(
            "[3 earlier messages archived: 1 user; ctxpress expand restores them]"
        ));
        assert!(!is_generated_note("[WIP] fix the parser"));
    }

    #[test]
    fn ready_runs_futures_that_never_wait() {
        assert_eq!(ready(async { 3 }), Some(3));
    }
}
