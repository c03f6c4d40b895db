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
//! - when the stages alone cannot reach the target, the **ladder**
//!   escalates in order of information lost, each rung the same way: the
//!   facade builds tighter tool-result summaries, old assistant prose, old
//!   user prose; then its `evict` rung is the **allocation** (`allocate`):
//!   the target is spent on the core (system messages, the last user
//!   request, the newest exchange), a floor for the session ledger
//!   ([`ledger_floor`], [`ledger`](crate::ledger)), the newest messages
//!   whole (newest first, up to a share of the room), then older messages as the
//!   summarizing rungs left them, newest first; everything older moves into
//!   the archive behind the ledger, rendered to fill the room left. A last
//!   rung summarizes the tool results of the tail when the core alone is
//!   over. Whole exchanges throughout: a call never leaves its results.
//!
//! Protected from the stages and the summarizing rungs, by annotation:
//! system messages, the last user message and the last `protected_tail`
//! user/assistant messages; the allocation keeps system messages and the
//! last user request byte-identical and may move the rest of the tail. When
//! the protected messages alone exceed the target, the report says so
//! (`fits = false`, `over_by`).
//!
//! [`WindowConfig`] is the `[window]` table: `size`, `trigger`, `target`,
//! `budget`, `protected_tail`, `force_converge`. The allocation marks kept
//! references to what it moved out as archived ([`ARCHIVED_REF`]); its ledger
//! note's `replaces` names every message it stands for, so the archive keeps
//! them for `expand`. [`EvictOldest`] is the `evict` strategy alone (oldest
//! whole exchanges behind a ledger note). [`envelope_tokens`] is what a request
//! sends outside its messages (`tokens::fixed_tokens`' total), counted against
//! the limits. The reports ([`BudgetReport`], [`RungReport`]) and [`ready`]
//! live in `ctxpress_core::pipeline` and are re-exported here.

use ctxpress_core::config::ConfigError;
use ctxpress_core::conversation::Conversation;
use ctxpress_core::message::{Message, MessageId, Role};
pub use ctxpress_core::pipeline::{BudgetReport, RungReport, ready};
use ctxpress_core::pipeline::{Pipeline, Report};
use ctxpress_core::strategy::{StageContext, StageOutcome, Strategy, StrategyError};
use ctxpress_core::tokens::{TokenCounter, count_message};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
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

/// Whether `m` is a request: a user message that neither carries tool
/// results in blocks nor is one of ctxpress's own notes. (A user message
/// that carries results as text may be the request the agent acts on.)
fn is_request(m: &Message) -> bool {
    m.role() == Role::User
        && !m.is_tool_result_carrier()
        && !crate::ledger::is_generated_note(&m.text())
}

/// Ids of the messages the ladder never touches: system messages, the last
/// user message (not counting ctxpress's own notes) and the last `tail`
/// user/assistant messages (tool-result carriers do not count, as in spec 004,
/// nor user messages that only carry results as text). The last user message
/// may be such a carrier: it holds the result the agent is acting on.
pub fn protected_ids(conv: &Conversation, tail: usize) -> HashSet<MessageId> {
    let mut out = HashSet::new();
    let conversational = |m: &Message| {
        matches!(m.role(), Role::User | Role::Assistant)
            && !ctxpress_dialect::turns::carries_results(m)
    };
    for m in &conv.messages {
        if m.role().is_system() {
            out.insert(m.id().clone());
        }
    }
    if let Some(m) = conv.messages.iter().rev().find(|m| is_request(m)) {
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
        // What the ledger reads of messages it evicts (see `allocate`).
        let original = cfg.force_converge.then(|| conv.clone());
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
            // The state before the summarizing rungs: what the allocation
            // keeps whole.
            let mut base: Option<Conversation> = None;
            for rung in ladder {
                if now <= limits.target {
                    break;
                }
                if rung.name == EVICT {
                    let t = Instant::now();
                    let whole = base.take().unwrap_or_else(|| conv.clone());
                    // The tightest form of every message: the rungs after
                    // this one (the tail's tool results) run unrestricted
                    // over what the summarizing rungs left.
                    let mut tight = conv.clone();
                    let at = ladder.iter().position(|r| r.name == EVICT).unwrap_or(0);
                    for later in &ladder[at + 1..] {
                        later.pipeline.run_async(&mut tight, &run_ctx).await;
                    }
                    let original = original.as_ref().unwrap_or(&whole);
                    let Some(out) = allocate(&whole, &tight, original, &run_ctx, inner_target)
                    else {
                        continue;
                    };
                    let after = tokens_of(&out.conv, ctx).iter().sum::<usize>() + fixed;
                    budget.rungs.push(RungReport {
                        name: rung.name.clone(),
                        conversations: 1,
                        messages_changed: out.summarized,
                        messages_removed: conv
                            .messages
                            .len()
                            .saturating_sub(out.conv.messages.len()),
                        tokens_removed: now.saturating_sub(after),
                        micros: t.elapsed().as_micros(),
                    });
                    *conv = out.conv;
                    now = after;
                    continue;
                }
                if base.is_none() {
                    base = Some(conv.clone());
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

/// The tokens the session ledger gets at least once older messages have to
/// go: 40% of the first 8,000 tokens of the target and 20% of the rest (at
/// 8k, the newest messages hold less of what comes next than a ranked ledger
/// of everything before them; at larger targets they hold more), at least
/// 120 tokens (`LEDGER_MIN`).
pub fn ledger_floor(target: usize) -> usize {
    let first = target.min(8_000);
    (first * 2 / 5 + (target - first) / 5).max(LEDGER_MIN)
}
/// Tokens the ledger gets at least.
const LEDGER_MIN: usize = 120;
/// Share of the room (after the ledger's floor) that the newest messages
/// may take whole before older ones are taken summarized.
const WHOLE_SHARE: f64 = 0.6;

/// What [`allocate`] made.
struct Allocation {
    conv: Conversation,
    /// Messages taken in their summarized form.
    summarized: usize,
}

/// Spend `target` on, in this order: the protected core (locked messages
/// and their results, as in `whole`), the session ledger (a floor share),
/// the newest messages whole (newest first), then older messages in their
/// summarized form (`summ`: the same conversation after the summarizing
/// rungs), newest first; every older message goes to the archive behind the
/// ledger, which is rendered to fill what room is left. Whole exchanges
/// throughout (a call never leaves its results). `None` when nothing needs
/// to move (everything fits summarized).
///
/// The ledger reads each evicted message as it was before the stages
/// (`original`, by id) when it is there: a tool output the tool compressor
/// summarized in place still names everything it held.
fn allocate<'a>(
    whole: &'a Conversation,
    summ: &'a Conversation,
    original: &Conversation,
    ctx: &StageContext,
    target: usize,
) -> Option<Allocation> {
    let counter = ctx.counter.as_ref();
    let n = whole.messages.len();
    let by_id: HashMap<&'a MessageId, &'a Message> =
        summ.messages.iter().map(|m| (m.id(), m)).collect();
    // Units: a message and the tool results after it.
    let mut units: Vec<(usize, usize)> = Vec::new();
    for (i, m) in whole.messages.iter().enumerate() {
        if i > 0
            && m.is_tool_result()
            && let Some(u) = units.last_mut()
        {
            u.1 = i + 1;
            continue;
        }
        units.push((i, i + 1));
    }
    // The core: system messages, the last user request and the newest
    // exchange (the one the agent is acting on). The rest of the protected
    // tail comes first among the newest messages kept whole.
    // (The one `fit` marked protected: a stage may have added user-role
    // notes after it that the note test does not know.)
    let last_user = whole
        .messages
        .iter()
        .rposition(|m| is_request(m) && whole.ann(m.id()).is_some_and(|a| a.protected))
        .or_else(|| whole.messages.iter().rposition(is_request));
    let locked = |i: usize| whole.messages[i].role().is_system() || Some(i) == last_user;
    let mut unit_locked: Vec<bool> = units.iter().map(|&(s, e)| (s..e).any(locked)).collect();
    if let Some(l) = unit_locked.last_mut() {
        *l = true;
    }
    // The protected tail (spec 004: the last user/assistant messages) stays
    // whole too when it and the ledger's floor fit the target; when they do
    // not, only the core above is kept and the tail competes newest first.
    let with_tail: Vec<bool> = units
        .iter()
        .zip(&unit_locked)
        .map(|(&(s, e), &l)| {
            l || (s..e).any(|i| {
                whole
                    .ann(whole.messages[i].id())
                    .is_some_and(|a| a.protected)
            })
        })
        .collect();
    let short = |m: &'a Message| -> &'a Message { by_id.get(m.id()).copied().unwrap_or(m) };
    // Each unit's tokens whole and in its tightest form, counted once.
    let cost = |s: usize, e: usize, summarized: bool| -> usize {
        whole.messages[s..e]
            .iter()
            .map(|m| count_message(counter, if summarized { short(m) } else { m }))
            .sum()
    };
    let whole_cost: Vec<usize> = units.iter().map(|&(s, e)| cost(s, e, false)).collect();
    let short_cost: Vec<usize> = units.iter().map(|&(s, e)| cost(s, e, true)).collect();
    let core_of = |locked: &[bool]| -> usize {
        locked
            .iter()
            .zip(&whole_cost)
            .filter(|(l, _)| **l)
            .map(|(_, c)| c)
            .sum()
    };
    let mut core = core_of(&unit_locked);
    // The newest exchange is kept whole only while it fits beside the
    // system messages and the last request: when it does not, it competes
    // like the rest (its tightest form, else the ledger), so a budget that
    // holds the system messages and the last request is met.
    if core + LEDGER_MIN > target {
        let mut without = unit_locked.clone();
        if let (Some(l), Some(&(s, e))) = (without.last_mut(), units.last())
            && !(s..e).any(locked)
        {
            *l = false;
            let c = core_of(&without);
            if c < core {
                unit_locked = without;
                core = c;
            }
        }
    }
    let tail_core = core_of(&with_tail);
    if tail_core + ledger_floor(target) <= target || tail_core <= core {
        unit_locked = with_tail;
        core = tail_core;
    }
    let room = target.saturating_sub(core);
    let all_short: usize = unit_locked
        .iter()
        .zip(&short_cost)
        .filter(|(l, _)| !**l)
        .map(|(_, c)| c)
        .sum();
    // How each unlocked unit goes out: 0 evicted, 1 summarized, 2 whole.
    let mut how = vec![2u8; units.len()];
    if all_short <= room {
        // No eviction: the newest whole while the rest fits summarized.
        let mut used = all_short;
        let mut whole_from = units.len();
        for u in (0..units.len()).rev() {
            if unit_locked[u] {
                continue;
            }
            let extra = whole_cost[u] - short_cost[u].min(whole_cost[u]);
            if used + extra > room {
                break;
            }
            used += extra;
            whole_from = u;
        }
        for u in 0..whole_from {
            if !unit_locked[u] {
                how[u] = 1;
            }
        }
    } else {
        let floor = ledger_floor(target).min(room);
        let room = room.saturating_sub(floor);
        let whole_cap = (room as f64 * WHOLE_SHARE) as usize;
        let mut used = 0usize;
        let mut phase = 2u8;
        for u in (0..units.len()).rev() {
            if unit_locked[u] {
                continue;
            }
            if phase == 2 {
                let c = whole_cost[u];
                if used + c <= whole_cap {
                    used += c;
                    continue;
                }
                phase = 1;
            }
            if phase == 1 {
                let c = short_cost[u];
                if used + c <= room {
                    used += c;
                    how[u] = 1;
                    continue;
                }
                phase = 0;
            }
            how[u] = 0;
        }
    }
    for (u, l) in unit_locked.iter().enumerate() {
        if *l {
            how[u] = 2;
        }
    }
    let mut out = whole.clone();
    out.messages = Vec::with_capacity(n);
    let evicting = how.contains(&0);
    // The ledger of everything evicted, leaving out what stays visible.
    let mut kept_text = String::new();
    for (u, &(s, e)) in units.iter().enumerate() {
        if how[u] == 0 {
            continue;
        }
        for m in &whole.messages[s..e] {
            let m = if how[u] == 1 { short(m) } else { m };
            kept_text.push_str(&m.text());
            kept_text.push('\n');
            for c in m.tool_calls() {
                kept_text.push_str(&c.arguments);
                kept_text.push('\n');
            }
            if !matches!(m.role(), Role::Tool | Role::Function) {
                for r in m.tool_results() {
                    kept_text.push_str(&r.text);
                    kept_text.push('\n');
                }
            }
        }
    }
    let mut ledger = crate::ledger::Ledger::new([kept_text.as_str()]);
    let before_stages: HashMap<&MessageId, &Message> =
        original.messages.iter().map(|m| (m.id(), m)).collect();
    let mut evicted_tokens = 0;
    for (u, &(s, e)) in units.iter().enumerate() {
        if how[u] == 0 {
            for m in &whole.messages[s..e] {
                ledger.add(before_stages.get(m.id()).copied().unwrap_or(m));
            }
            evicted_tokens += whole_cost[u];
        }
    }
    let mut summarized = 0;
    let mut u = 0;
    // Where the ledger goes: the note of the first run of evicted units
    // (later runs get a short note each), written once the rest is known.
    let mut ledger_at = None;
    while u < units.len() {
        let (s, e) = units[u];
        match how[u] {
            0 => {
                // A run of evicted units behind one note.
                let mut v = u;
                while v < units.len() && how[v] == 0 {
                    v += 1;
                }
                let end = units[v - 1].1;
                let id = out.fresh_id("evicted");
                let ids: Vec<MessageId> = whole.messages[s..end]
                    .iter()
                    .map(|m| m.id().clone())
                    .collect();
                // With an archive to recall from, the note names its handle.
                let handle = ctx.archive.is_some().then(|| {
                    let h = ctxpress_core::markers::handle_of(whole, &ids);
                    ctxpress_core::markers::mark(&mut out, &id, h.clone(), ids.clone());
                    h
                });
                let text = if ledger_at.is_none() {
                    ledger_at = Some(out.messages.len());
                    if handle.is_some() {
                        // Lines whose latest exchange is in this run recall it.
                        let own: HashSet<&MessageId> = ids.iter().collect();
                        ledger.set_line_handles(|line| {
                            line.iter()
                                .all(|i| own.contains(i))
                                .then(|| ctxpress_core::markers::handle_of(whole, line))
                        });
                    }
                    ledger.set_handle(handle);
                    String::new()
                } else {
                    match handle {
                        Some(h) => format!(
                            "[{} earlier messages moved to the archive as {h}; the session ledger above lists what they held; recall {h} gives them back]",
                            end - s
                        ),
                        None => format!(
                            "[{} earlier messages moved to the archive; the session ledger above lists what they held; `ctxpress expand` restores them]",
                            end - s
                        ),
                    }
                };
                out.ann_mut(&id).replaces = ids;
                out.messages.push(Message::text_message(id, "user", &text));
                u = v;
                continue;
            }
            1 => {
                for m in &whole.messages[s..e] {
                    let m2 = short(m);
                    if m2.share_key() != m.share_key() {
                        summarized += 1;
                        // The recall handles its tight form's markers carry.
                        if let Some(a) = summ.ann(m2.id())
                            && !a.handles.is_empty()
                        {
                            for h in a.handles.clone() {
                                ctxpress_core::markers::mark(
                                    &mut out,
                                    m2.id(),
                                    h.handle,
                                    h.stands_for,
                                );
                            }
                        }
                    }
                    out.messages.push(m2.clone());
                }
            }
            _ => out.messages.extend(whole.messages[s..e].iter().cloned()),
        }
        u += 1;
    }
    if !evicting && summarized == 0 {
        return None;
    }
    // Nothing points at nothing: a reference to a message or call that was
    // moved out says where it went.
    let mut gone = Gone::default();
    for (u, &(s, e)) in units.iter().enumerate() {
        if how[u] == 0 {
            for m in &whole.messages[s..e] {
                gone.ids.insert(m.id().as_str().to_string());
                gone.ids
                    .extend(m.tool_calls().iter().map(|c| c.id.to_string()));
                if !m.is_tool_result() {
                    gone.names
                        .insert(ctxpress_text::message_ref(m.role_str(), &m.text()));
                }
            }
        }
    }
    if !gone.ids.is_empty() {
        for m in &mut out.messages {
            if m.role().is_system() || Some(m.id()) == last_user.map(|i| whole.messages[i].id()) {
                continue;
            }
            rewrite_dangling(m, &gone);
        }
    }
    // The ledger fills the room the rest leaves, never more than what it
    // stands for.
    if let Some(at) = ledger_at {
        let rest: usize = out
            .messages
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != at)
            .map(|(_, m)| count_message(counter, m))
            .sum();
        let limit = target
            .saturating_sub(rest)
            .min(evicted_tokens.saturating_sub(1));
        let (text, _) = ledger.render_within(limit, counter);
        let id = out.messages[at].id().clone();
        for (h, ids) in ledger.line_handles() {
            if text.contains(&h.to_string()) {
                ctxpress_core::markers::mark(&mut out, &id, h.clone(), ids.to_vec());
            }
        }
        out.messages[at].set_text(text);
    }
    // Never longer: when the notes cost more than what they stand for (a
    // tiny conversation), nothing moves.
    if out.size() >= whole.size() {
        return None;
    }
    Some(Allocation {
        conv: out,
        summarized,
    })
}

/// What a reference to a moved-out message or call gets after its id.
pub const ARCHIVED_REF: &str = " (archived; the session ledger lists what it held)";

/// What moved out of a conversation, as references name it.
#[derive(Debug, Default)]
struct Gone {
    /// Message and tool-call ids (`dup of call_7`, `call call_7`; older
    /// references named messages by their ids too).
    ids: HashSet<String>,
    /// Messages as dedup names them (`dup of the user message "..."`, see
    /// [`ctxpress_text::message_ref`]).
    names: HashSet<String>,
}

/// `text` with every reference (`dup of ID`, `near-dup of ID`, `call ID`,
/// `dup of the ROLE message "..."`) to what is in `gone` marked as
/// archived; `None` when there is none.
fn mark_dangling(text: &str, gone: &Gone) -> Option<String> {
    let mut out = String::new();
    let mut at = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        // `dup of `, or `dup#h0123456789 of ` with a recall handle.
        let tagged = 3 + 2 + ctxpress_core::handle::DIGITS;
        let (skip, dup) = if rest.starts_with(b"dup of ") {
            (7, true)
        } else if rest.starts_with(b"dup#h")
            && rest.len() > tagged
            && rest[tagged..].starts_with(b" of ")
            && rest[5..tagged].iter().all(u8::is_ascii_hexdigit)
        {
            (tagged + 4, true)
        } else if rest.starts_with(b" call ") {
            (6, false)
        } else {
            i += 1;
            continue;
        };
        let start = i + skip;
        // A message named by its role and first words (only after `dup of`).
        let named = dup
            .then(|| {
                gone.names
                    .iter()
                    .filter(|n| text[start..].starts_with(n.as_str()))
                    .map(String::len)
                    .max()
            })
            .flatten();
        let end = match named {
            Some(len) => start + len,
            None => text[start..]
                .find(|c: char| c.is_whitespace() || c == ']' || c == ',' || c == ';')
                .map_or(text.len(), |e| start + e),
        };
        let known = named.is_some() || gone.ids.contains(&text[start..end]);
        if end > start && known && !text[end..].starts_with(ARCHIVED_REF) {
            out.push_str(&text[at..end]);
            out.push_str(ARCHIVED_REF);
            at = end;
        }
        i = end.max(i + 1);
    }
    if at == 0 {
        return None;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// Mark the references of `m` (its text, or each of its tool results) to
/// ids in `gone` as archived.
fn rewrite_dangling(m: &mut Message, gone: &Gone) {
    if m.is_tool_result() && !matches!(m.role(), Role::Tool | Role::Function) {
        let fixes: Vec<(String, String)> = m
            .tool_results()
            .iter()
            .filter_map(|r| mark_dangling(&r.text, gone).map(|t| (r.call_id.to_string(), t)))
            .collect();
        for (id, t) in fixes {
            m.set_tool_result_text(&id, t);
        }
        return;
    }
    let plain = matches!(m.role(), Role::Tool | Role::Function)
        || m.content().is_some_and(serde_json::Value::is_string);
    if plain {
        if let Some(t) = mark_dangling(&m.text(), gone) {
            m.set_text(t);
        }
        return;
    }
    // Text blocks, each in its place.
    let fixes: Vec<(Option<usize>, String)> = ctxpress_dialect::text_results::text_parts(m)
        .into_iter()
        .filter_map(|(part, t)| mark_dangling(t, gone).map(|t| (part, t)))
        .collect();
    for (part, t) in fixes {
        m.set_text_part(part, t);
    }
}

/// Tokens of the text a conversation sends outside its messages, counted
/// against the limits: an Anthropic request's top-level `system` and the
/// tool definitions (`tokens::fixed_tokens`, which `ctxpress stats` adds
/// too). 0 for a bare array.
pub fn envelope_tokens(conv: &Conversation, counter: &dyn TokenCounter) -> usize {
    ctxpress_core::tokens::fixed_tokens(conv, counter).total()
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

/// The last rung: moves the oldest whole exchanges (never a tool call
/// without its results, never a protected or system message) out of the
/// conversation, oldest first, until it fits `ctx.budget`, each contiguous
/// run behind one user-role session ledger note ([`crate::ledger`]) whose
/// `replaces` names them, so the archive keeps them for `expand`. (Inside
/// [`fit`], the ladder's `evict` rung is the allocation instead, which
/// writes one ledger for everything it moves out.)
#[derive(Debug, Clone, Copy, Default)]
pub struct EvictOldest;

/// Registered name of [`EvictOldest`].
pub const EVICT: &str = "evict";

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
            let mut note = crate::ledger::Ledger::new(std::iter::empty::<&str>());
            let limit = (target / NOTE_SHARE).max(64);
            while e < n && !locked[e] {
                saved += toks[e];
                note.add(&conv.messages[e]);
                e += 1;
                if cut(e) {
                    let (note, nt) = note.render_within(limit, ctx.counter.as_ref());
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
        assert!(
            ctxpress_core::validate(&c).is_empty(),
            "{:?}",
            ctxpress_core::validate(&c)
        );
        assert!(tokens_of(&c, &ctx).iter().sum::<usize>() <= budget);
        assert_eq!(c.messages[0].role(), Role::System);
        let note = c.messages[1].text().into_owned();
        assert!(note.starts_with("[session ledger: "), "{note}");
        assert!(note.contains("first request: \"task 0 word word"), "{note}");
        assert!(
            note.contains("/r/f0.rs: read") && note.contains("/r/f1.rs: read"),
            "{note}"
        );
        // The ledger quotes the requests, so it costs more than the two
        // exchanges the budget made room for: a third goes too.
        let archived = out.counters["messages_archived"] as usize;
        assert!((6..=9).contains(&archived), "{archived}");
        assert_eq!(c.ann(c.messages[1].id()).unwrap().replaces.len(), archived);
        assert_eq!(c.messages.last().unwrap().text(), "last");
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
        assert!(crate::ledger::is_generated_note(
            "[3 earlier messages archived: 1 user; ctxpress expand restores them]"
        ));
        assert!(!crate::ledger::is_generated_note("[WIP] fix the parser"));
    }

    #[test]
    fn dangling_references_are_marked_archived() {
        let gone = Gone {
            ids: ["m2-ab".to_string(), "toolu_1".to_string()].into(),
            names: [ctxpress_text::message_ref(
                "user",
                "Fix the failing test\nin a.rs",
            )]
            .into(),
        };
        assert_eq!(
            mark_dangling(
                "[cce:dup of the user message \"Fix the failing test\" — 300 chars]",
                &gone
            )
            .as_deref(),
            Some(
                "[cce:dup of the user message \"Fix the failing test\" (archived; the session ledger lists what it held) — 300 chars]"
            )
        );
        assert_eq!(
            mark_dangling(
                "[cce:dup of the user message \"Fix the other test\" — 300 chars]",
                &gone
            ),
            None
        );
        assert_eq!(
            mark_dangling("[cce:dup of m2-ab — 300 chars]", &gone).as_deref(),
            Some(
                "[cce:dup of m2-ab (archived; the session ledger lists what it held) — 300 chars]"
            )
        );
        assert_eq!(
            mark_dangling(
                "[ctxpress: a.rs unchanged: same content as Read call toolu_1]",
                &gone
            )
            .as_deref(),
            Some(
                "[ctxpress: a.rs unchanged: same content as Read call toolu_1 (archived; the session ledger lists what it held)]"
            )
        );
        assert_eq!(mark_dangling("[cce:dup of m3-cd — 300 chars]", &gone), None);
        assert_eq!(mark_dangling("a dup of é", &gone), None);
        let once = mark_dangling("dup of m2-ab", &gone).unwrap();
        assert_eq!(mark_dangling(&once, &gone), None, "marked once");
    }

    /// A long session over its budget: the newest exchange (a large read the
    /// agent is acting on) stays whole, the oldest exchanges go behind one
    /// ledger, the result fits and lands close to the target.
    #[test]
    fn the_newest_tool_result_survives_while_older_ones_go_to_the_ledger() {
        let file = |i: usize| {
            (0..60)
                .map(|k| {
                    format!("pub fn handler_{i}_{k}(req: &Request) -> Response {{ todo!() }}\n")
                })
                .collect::<String>()
        };
        let mut msgs = vec![
            json!({"role": "system", "content": "You are a coding agent."}),
            json!({"role": "user", "content": "Refactor the handlers in src/ to return Result."}),
        ];
        for i in 0..12 {
            msgs.push(json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": format!("c{i}"), "type": "function", "function": {"name": "Read", "arguments": format!("{{\"file_path\":\"/r/src/h{i}.rs\"}}")}}]}));
            msgs.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": file(i)}));
        }
        msgs.push(json!({"role": "user", "content": "Now do h12.rs the same way."}));
        msgs.push(json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c12", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\":\"/r/src/h12.rs\"}"}}]}));
        msgs.push(json!({"role": "tool", "tool_call_id": "c12", "content": file(12)}));
        let mut c = conv(json!(msgs));
        let input = c.clone();
        let total: usize = tokens_of(&c, &StageContext::default()).iter().sum();
        let budget = total / 4;
        let ladder = vec![Rung::of(EVICT, Box::new(EvictOldest))];
        let cfg = WindowConfig {
            budget: Some(budget),
            ..WindowConfig::default()
        };
        let limits = cfg.limits().unwrap();
        let r = ready(fit(
            &mut c,
            &StageContext::default(),
            &Pipeline::default(),
            &ladder,
            &cfg,
            limits,
        ))
        .unwrap();
        let b = r.budget.unwrap();
        assert!(b.fits && b.tokens_after <= budget, "{b:?}");
        assert!(
            b.tokens_after * 100 >= budget * 90,
            "lands close to the target: {b:?}"
        );
        assert!(
            ctxpress_core::validate(&c).is_empty(),
            "{:?}",
            ctxpress_core::validate(&c)
        );
        // System, the last request and the newest exchange, byte-identical.
        let last = &c.messages[c.messages.len() - 3..];
        let want = &input.messages[input.messages.len() - 3..];
        for (a, b) in last.iter().zip(want) {
            assert_eq!(c.message_json(a), input.message_json(b));
        }
        assert_eq!(
            c.message_json(&c.messages[0]),
            input.message_json(&input.messages[0])
        );
        let ledger = c.messages[1].text().into_owned();
        assert!(ledger.starts_with(crate::ledger::HEAD), "{ledger}");
        assert!(ledger.contains("/r/src/h0.rs: read"), "{ledger}");
        assert_eq!(
            c.ann(c.messages[1].id()).unwrap().replaces.first(),
            Some(input.messages[1].id())
        );
        // Older exchanges that stay come before the newest, oldest first.
        assert!(c.messages.len() < input.messages.len());
    }

    #[test]
    fn ready_runs_futures_that_never_wait() {
        assert_eq!(ready(async { 3 }), Some(3));
    }
}
