//! Running stages with the invariants enforced structurally: after every stage
//! the conversation is validated and measured, and a stage that introduces a
//! pairing or role violation, makes a message or the conversation longer, or
//! fails, is reverted and reported as such.
//!
//! The guard, per stage: snapshot, apply, then validate (skipped when
//! [`validate::same_violations`](crate::validate::same_violations) shows every
//! message kept what validation reads) and measure; a new violation, a changed
//! `protected` message, a longer message (same id) or conversation, or an error
//! reverts the stage ([`StageStatus::Reverted`]). The budget's reports live
//! here too ([`BudgetReport`], [`RungReport`]), with [`ready`], which drives a
//! pipeline of sync stages through the async driver.

use crate::conversation::Conversation;
use crate::message::{Message, MessageId};
use crate::strategy::{BuiltStrategy, StageContext, StageOutcome};
use crate::tokens::count_message;
use crate::validate::{introduces_violations, same_violations, validate};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

/// What became of a stage.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum StageStatus {
    /// The stage ran and its result was kept.
    Applied,
    /// The stage ran but broke an invariant; its result was discarded.
    Reverted(String),
    /// The stage returned an error; the conversation was left as it was.
    Failed(String),
    /// An async stage in a sync run; not run.
    Skipped(String),
}

/// Figures of one stage.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StageReport {
    /// Strategy name.
    pub name: String,
    /// Outcome.
    pub status: StageStatus,
    /// Messages before the stage.
    pub messages_before: usize,
    /// Messages after the stage.
    pub messages_after: usize,
    /// Tokens before the stage.
    pub tokens_before: usize,
    /// Tokens after the stage.
    pub tokens_after: usize,
    /// Characters (see `Message::size`) before.
    pub chars_before: usize,
    /// Characters after.
    pub chars_after: usize,
    /// What the stage counted.
    pub outcome: StageOutcome,
    /// Wall time in microseconds.
    pub micros: u128,
}

/// Figures of a whole run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Messages in.
    pub messages_before: usize,
    /// Messages out.
    pub messages_after: usize,
    /// Tokens in.
    pub tokens_before: usize,
    /// Tokens out.
    pub tokens_after: usize,
    /// Characters in.
    pub chars_before: usize,
    /// Characters out.
    pub chars_after: usize,
    /// Per stage.
    pub stages: Vec<StageReport>,
    /// Wall time in microseconds.
    pub micros: u128,
    /// With a window or budget: what fit and what it cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
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

/// The notes a merged [`Report`] keeps per stage (see [`Report::merge`]).
pub const MAX_MERGED_NOTES: usize = 64;

impl Report {
    /// chars in / chars out.
    pub fn ratio(&self) -> f64 {
        if self.chars_after == 0 {
            1.0
        } else {
            self.chars_before as f64 / self.chars_after as f64
        }
    }

    /// Add another run's figures (for batches). Each stage keeps at most
    /// [`MAX_MERGED_NOTES`] notes; the counter `notes_omitted` counts the
    /// others.
    pub fn merge(&mut self, o: &Report) {
        self.messages_before += o.messages_before;
        self.messages_after += o.messages_after;
        self.tokens_before += o.tokens_before;
        self.tokens_after += o.tokens_after;
        self.chars_before += o.chars_before;
        self.chars_after += o.chars_after;
        self.micros += o.micros;
        match (&mut self.budget, &o.budget) {
            (Some(b), Some(ob)) => b.merge(ob),
            (None, Some(ob)) => self.budget = Some(ob.clone()),
            _ => {}
        }
        for s in &o.stages {
            match self.stages.iter_mut().find(|x| x.name == s.name) {
                Some(x) => {
                    x.messages_before += s.messages_before;
                    x.messages_after += s.messages_after;
                    x.tokens_before += s.tokens_before;
                    x.tokens_after += s.tokens_after;
                    x.chars_before += s.chars_before;
                    x.chars_after += s.chars_after;
                    x.micros += s.micros;
                    for (k, v) in &s.outcome.counters {
                        *x.outcome.counters.entry(k.clone()).or_default() += v;
                    }
                    // A batch keeps the first notes of each stage and counts
                    // the rest: notes are per conversation, and a batch of
                    // millions must not hold them all.
                    let room = MAX_MERGED_NOTES.saturating_sub(x.outcome.notes.len());
                    x.outcome
                        .notes
                        .extend(s.outcome.notes.iter().take(room).cloned());
                    let dropped = s.outcome.notes.len().saturating_sub(room) as u64;
                    if dropped > 0 {
                        *x.outcome
                            .counters
                            .entry("notes_omitted".to_string())
                            .or_default() += dropped;
                    }
                    if s.status != StageStatus::Applied && x.status == StageStatus::Applied {
                        x.status = s.status.clone();
                    }
                }
                None => self.stages.push(s.clone()),
            }
        }
    }
}

/// One configured stage.
#[derive(Debug)]
pub struct Stage {
    /// Strategy name (for reports).
    pub name: String,
    /// The strategy.
    pub strategy: BuiltStrategy,
}

/// An ordered list of stages.
#[derive(Debug, Default)]
pub struct Pipeline {
    /// The stages, run in order.
    pub stages: Vec<Stage>,
}

/// FxHash-style hasher for the measure's maps (message ids and allocation
/// addresses): they are rebuilt after every stage, and SipHash's strength
/// buys nothing for keys a stage cannot choose.
#[derive(Default, Clone, Copy)]
struct FastHasher(u64);

impl FastHasher {
    const K: u64 = 0xf135_7aea_2e62_a9c5;

    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            if let Some(dst) = w.get_mut(..rest.len()) {
                dst.copy_from_slice(rest);
            }
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[derive(Clone)]
struct Measure {
    messages: usize,
    tokens: usize,
    chars: usize,
    /// (message, tokens, size) of each message, in conversation order; the
    /// handles keep the allocations alive, so [`Message::same`] can tell an
    /// untouched message from a changed one.
    entries: Vec<(Message, usize, usize)>,
}

/// A message a stage made longer: (id, size after, size before).
type Longer = (MessageId, usize, usize);

/// How far past the cursor the measure looks for a message's previous
/// entry before it asks the index (a stage that removed a few messages).
const LOOKAHEAD: usize = 8;

/// Measure `conv`; messages a stage left untouched (still shared with the
/// conversation `prev` measured) are not counted again. Also gives the first
/// message (in conversation order) that is longer than the message with its
/// id in `prev`.
///
/// Stages keep the order of the messages they leave, so the previous entry
/// of an untouched message is found by walking both lists together; a
/// message that moved (or a run of removed messages longer than the
/// lookahead) is found through an index built only when needed.
fn measure(
    conv: &Conversation,
    ctx: &StageContext,
    prev: Option<&Measure>,
) -> (Measure, Option<Longer>) {
    let mut tokens = 0;
    let mut chars = 0;
    let mut entries = Vec::with_capacity(conv.messages.len());
    let mut longer = None;
    let old: &[(Message, usize, usize)] = prev.map_or(&[], |p| p.entries.as_slice());
    let mut cursor = 0;
    let mut by_key: Option<FastMap<usize, usize>> = None;
    let mut by_id: Option<FastMap<&MessageId, usize>> = None;
    for m in &conv.messages {
        let near = old
            .get(cursor..)
            .unwrap_or(&[])
            .iter()
            .take(LOOKAHEAD)
            .position(|(o, _, _)| Message::same(o, m))
            .map(|k| cursor + k);
        let hit = near.or_else(|| {
            if old.is_empty() {
                return None;
            }
            let index = by_key.get_or_insert_with(|| {
                old.iter()
                    .enumerate()
                    .map(|(i, (o, _, _))| (o.share_key(), i))
                    .collect()
            });
            index
                .get(&m.share_key())
                .copied()
                .filter(|&k| Message::same(&old[k].0, m))
        });
        let (t, n) = match hit {
            Some(k) => {
                cursor = k + 1;
                (old[k].1, old[k].2)
            }
            None => {
                let (t, n) = (count_message(ctx.counter.as_ref(), m), m.size());
                // The message this one replaced: usually the one at the
                // cursor (a stage rewrote it in place).
                let before = match old.get(cursor) {
                    Some((o, _, size)) if o.id() == m.id() => {
                        cursor += 1;
                        Some(*size)
                    }
                    _ if old.is_empty() => None,
                    _ => {
                        let index = by_id.get_or_insert_with(|| {
                            old.iter()
                                .enumerate()
                                .map(|(i, (o, _, _))| (o.id(), i))
                                .collect()
                        });
                        index.get(m.id()).map(|&k| old[k].2)
                    }
                };
                if longer.is_none()
                    && let Some(b) = before.filter(|&b| n > b)
                {
                    longer = Some((m.id().clone(), n, b));
                }
                (t, n)
            }
        };
        tokens += t;
        chars += n;
        entries.push((m.clone(), t, n));
    }
    let measured = Measure {
        messages: conv.messages.len(),
        tokens,
        chars,
        entries,
    };
    (measured, longer)
}

impl Pipeline {
    /// A pipeline of these stages.
    pub fn new(stages: Vec<Stage>) -> Self {
        Pipeline { stages }
    }

    /// Append a sync strategy.
    pub fn push(&mut self, s: Box<dyn crate::Strategy>) {
        self.stages.push(Stage {
            name: s.name().to_string(),
            strategy: BuiltStrategy::Sync(s),
        });
    }

    /// Append an async strategy.
    pub fn push_async(&mut self, s: Box<dyn crate::AsyncStrategy>) {
        self.stages.push(Stage {
            name: s.name().to_string(),
            strategy: BuiltStrategy::Async(s),
        });
    }

    /// True when some stage is async.
    pub fn needs_async(&self) -> bool {
        self.stages
            .iter()
            .any(|s| matches!(s.strategy, BuiltStrategy::Async(_)))
    }

    /// Run synchronously. Async stages are skipped and reported as such; use
    /// [`Pipeline::run_async`] for pipelines that have them.
    pub fn run(&self, conv: &mut Conversation, ctx: &StageContext) -> Report {
        // Nothing awaits when async stages are skipped: ready at the first poll.
        ready(self.drive(conv, ctx, false)).expect("a run without async stages never waits")
    }

    /// Run, awaiting async stages.
    pub async fn run_async(&self, conv: &mut Conversation, ctx: &StageContext) -> Report {
        self.drive(conv, ctx, true).await
    }

    /// The one loop of both runs: each stage applied, then kept or reverted
    /// by [`finish`]; async stages are awaited when `awaits`, else skipped.
    async fn drive(&self, conv: &mut Conversation, ctx: &StageContext, awaits: bool) -> Report {
        let start = Instant::now();
        let (mut before, _) = measure(conv, ctx, None);
        let first = (before.messages, before.tokens, before.chars);
        let mut violations = validate(conv);
        let mut stages = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            let t = Instant::now();
            let snapshot = conv.clone();
            let result = match &stage.strategy {
                BuiltStrategy::Sync(s) => Some(s.apply(conv, ctx)),
                BuiltStrategy::Async(s) if awaits => Some(s.apply_async(conv, ctx).await),
                BuiltStrategy::Async(_) => None,
            };
            // With an archive to recall from, every marker the stage wrote
            // gets its recall handle before the guard measures the result.
            if ctx.archive.is_some() && matches!(result, Some(Ok(_))) {
                crate::markers::tag_markers(&snapshot, conv, ctx.counter.as_ref());
            }
            let (r, m, v) = finish(stage, result, snapshot, conv, ctx, before, violations, t);
            stages.push(r);
            before = m;
            violations = v;
        }
        report(first, &before, stages, start)
    }
}

/// The run's figures: `first` is (messages, tokens, chars) before any stage.
fn report(
    first: (usize, usize, usize),
    last: &Measure,
    stages: Vec<StageReport>,
    start: Instant,
) -> Report {
    Report {
        messages_before: first.0,
        messages_after: last.messages,
        tokens_before: first.1,
        tokens_after: last.tokens,
        chars_before: first.2,
        chars_after: last.chars,
        stages,
        micros: start.elapsed().as_micros(),
        budget: None,
    }
}

/// The first message marked `protected` in `before` that `after` changed
/// or dropped.
fn touched_protected(before: &Conversation, after: &Conversation) -> Option<MessageId> {
    // Most runs protect nothing (only the window ladder marks messages): a
    // walk over the annotations tells without a look-up per message.
    if !before.annotations().values().any(|a| a.protected) {
        return None;
    }
    let mut protected = before
        .messages
        .iter()
        .filter(|m| before.ann(m.id()).is_some_and(|a| a.protected))
        .peekable();
    // Most runs protect nothing (only the window ladder marks messages).
    protected.peek()?;
    // By id, the last message with an id standing for it: one pass, however
    // many messages are protected (every system message is).
    let now: foldhash::HashMap<&MessageId, &Message> =
        after.messages.iter().map(|m| (m.id(), m)).collect();
    protected
        .find(|m| {
            !now.get(m.id())
                .is_some_and(|n| Message::same(m, n) || m.fields() == n.fields())
        })
        .map(|m| m.id().clone())
}

/// Keep or revert what a stage did to `conv` (given `snapshot`, the
/// conversation before it): the figures and violations after it, or, when
/// it changed no message or is reverted, `before` and `violations` as they
/// were (moved through, not copied).
#[allow(clippy::too_many_arguments)]
fn finish(
    stage: &Stage,
    result: Option<Result<StageOutcome, crate::StrategyError>>,
    snapshot: Conversation,
    conv: &mut Conversation,
    ctx: &StageContext,
    before: Measure,
    violations: Vec<crate::Violation>,
    t: Instant,
) -> (StageReport, Measure, Vec<crate::Violation>) {
    let (status, outcome) = match result {
        None => (
            StageStatus::Skipped("async stage in a sync run".into()),
            StageOutcome::default(),
        ),
        Some(Err(e)) => (StageStatus::Failed(e.to_string()), StageOutcome::default()),
        Some(Ok(o)) => (StageStatus::Applied, o),
    };
    let mut status = status;
    let mut kept = None;
    if status == StageStatus::Applied {
        // A stage that only annotated (every message the one it was given,
        // in its place) left the checks' answers and the figures as they
        // were: `before` measured exactly the messages of `snapshot`, so a
        // new measure would find every entry unchanged.
        let unchanged = conv.format == snapshot.format
            && conv.messages.len() == snapshot.messages.len()
            && conv
                .messages
                .iter()
                .zip(&snapshot.messages)
                .all(|(a, b)| Message::same(a, b));
        if !unchanged {
            let (m, longer) = measure(conv, ctx, Some(&before));
            // A stage that rewrote texts in place (same roles and pairing
            // facts) left the violations as they were.
            let v = if same_violations(&snapshot, conv) {
                None
            } else {
                Some(validate(conv))
            };
            let new_v = v.as_deref().unwrap_or(&violations);
            if introduces_violations(&violations, new_v) {
                let first = new_v
                    .iter()
                    .find(|x| !violations.contains(x))
                    .map(|x| x.to_string())
                    .unwrap_or_default();
                status = StageStatus::Reverted(format!("introduced a violation: {first}"));
            } else if let Some(id) = touched_protected(&snapshot, conv) {
                status = StageStatus::Reverted(format!("changed protected message {id}"));
            } else if m.chars > before.chars {
                status = StageStatus::Reverted(format!(
                    "made the conversation longer ({} > {} chars)",
                    m.chars, before.chars
                ));
            } else if let Some((id, n, b)) = longer {
                status =
                    StageStatus::Reverted(format!("made message {id} longer ({n} > {b} chars)"));
            } else {
                kept = Some((m, v));
            }
        }
    }
    if status != StageStatus::Applied {
        *conv = snapshot;
    }
    let r = |after: &Measure, status| StageReport {
        name: stage.name.clone(),
        status,
        messages_before: before.messages,
        messages_after: after.messages,
        tokens_before: before.tokens,
        tokens_after: after.tokens,
        chars_before: before.chars,
        chars_after: after.chars,
        outcome,
        micros: t.elapsed().as_micros(),
    };
    match kept {
        Some((after, v)) => (r(&after, status), after, v.unwrap_or(violations)),
        None => (r(&before, status), before, violations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Strategy, StrategyError};

    #[test]
    fn a_merged_report_keeps_a_bounded_number_of_notes() {
        let one = |i: usize| Report {
            stages: vec![StageReport {
                name: "s".into(),
                status: StageStatus::Applied,
                messages_before: 1,
                messages_after: 1,
                tokens_before: 1,
                tokens_after: 1,
                chars_before: 1,
                chars_after: 1,
                outcome: StageOutcome {
                    notes: vec![format!("conversation {i}")],
                    ..StageOutcome::default()
                },
                micros: 0,
            }],
            ..Report::default()
        };
        let mut all = one(0);
        for i in 1..1000 {
            all.merge(&one(i));
        }
        let s = &all.stages[0];
        assert_eq!(s.outcome.notes.len(), MAX_MERGED_NOTES);
        assert_eq!(s.outcome.notes[1], "conversation 1");
        assert_eq!(
            s.outcome.counters.get("notes_omitted").copied(),
            Some((1000 - MAX_MERGED_NOTES) as u64)
        );
        assert_eq!(s.chars_before, 1000);
    }

    struct DropTool;
    impl Strategy for DropTool {
        fn name(&self) -> &str {
            "drop_tool"
        }
        fn apply(
            &self,
            conv: &mut Conversation,
            _: &StageContext,
        ) -> Result<StageOutcome, StrategyError> {
            conv.messages.retain(|m| m.role() != crate::Role::Tool);
            Ok(StageOutcome::default())
        }
    }
    struct Grow;
    impl Strategy for Grow {
        fn name(&self) -> &str {
            "grow"
        }
        fn apply(
            &self,
            conv: &mut Conversation,
            _: &StageContext,
        ) -> Result<StageOutcome, StrategyError> {
            let t = format!("{} and more", conv.messages[0].text());
            conv.messages[0].set_text(t);
            Ok(StageOutcome::default())
        }
    }
    struct Fail;
    impl Strategy for Fail {
        fn name(&self) -> &str {
            "fail"
        }
        fn apply(
            &self,
            conv: &mut Conversation,
            _: &StageContext,
        ) -> Result<StageOutcome, StrategyError> {
            conv.messages.clear();
            Err(StrategyError::Failed("nope".into()))
        }
    }

    /// Shrinks one message a lot and grows a later one a little: the
    /// conversation gets shorter, one message longer.
    struct ShrinkAndGrow;
    impl Strategy for ShrinkAndGrow {
        fn name(&self) -> &str {
            "shrink_and_grow"
        }
        fn apply(
            &self,
            conv: &mut Conversation,
            _: &StageContext,
        ) -> Result<StageOutcome, StrategyError> {
            conv.messages[1].set_text("short");
            let t = format!("{}!", conv.messages[3].text());
            conv.messages[3].set_text(t);
            Ok(StageOutcome::default())
        }
    }

    /// Annotates every message, changes none.
    struct Annotate;
    impl Strategy for Annotate {
        fn name(&self) -> &str {
            "annotate"
        }
        fn apply(
            &self,
            conv: &mut Conversation,
            _: &StageContext,
        ) -> Result<StageOutcome, StrategyError> {
            let ids: Vec<_> = conv.messages.iter().map(|m| m.id().clone()).collect();
            for id in ids {
                conv.ann_mut(&id).protected = false;
            }
            Ok(StageOutcome::default())
        }
    }

    /// Shortens the second message.
    struct Shrink;
    impl Strategy for Shrink {
        fn name(&self) -> &str {
            "shrink"
        }
        fn apply(
            &self,
            conv: &mut Conversation,
            _: &StageContext,
        ) -> Result<StageOutcome, StrategyError> {
            conv.messages[1].set_text("short");
            Ok(StageOutcome::default())
        }
    }

    #[test]
    fn an_annotating_stage_keeps_the_figures_the_next_stage_starts_from() {
        let doc = format!(
            r#"[{{"role":"user","content":"q"}},{{"role":"assistant","content":"{}"}},{{"role":"user","content":"b"}},{{"role":"assistant","content":"c"}}]"#,
            "a".repeat(200)
        );
        let ctx = StageContext::default();
        let mut p = Pipeline::default();
        p.push(Box::new(Annotate));
        p.push(Box::new(DropTool));
        p.push(Box::new(ShrinkAndGrow));
        p.push(Box::new(Annotate));
        p.push(Box::new(Shrink));
        p.push(Box::new(Annotate));
        let mut c = Conversation::parse(&doc).unwrap();
        let figures = |m: &Measure| (m.messages, m.tokens, m.chars);
        let (first, _) = measure(&c, &ctx, None);
        let r = p.run(&mut c, &ctx);
        let (last, _) = measure(&c, &ctx, None);
        assert_ne!(figures(&first), figures(&last));
        let applied = [true, true, false, true, true, true];
        for (s, ok) in r.stages.iter().zip(applied) {
            assert_eq!(s.status == StageStatus::Applied, ok, "{}", s.name);
        }
        let before = |s: &StageReport| (s.messages_before, s.tokens_before, s.chars_before);
        let after = |s: &StageReport| (s.messages_after, s.tokens_after, s.chars_after);
        for s in &r.stages[..4] {
            assert_eq!(before(s), figures(&first), "{}", s.name);
            assert_eq!(after(s), figures(&first), "{}", s.name);
        }
        assert_eq!(before(&r.stages[4]), figures(&first));
        assert_eq!(after(&r.stages[4]), figures(&last));
        assert_eq!(before(&r.stages[5]), figures(&last));
        assert_eq!(after(&r.stages[5]), figures(&last));
        assert_eq!(
            (r.messages_after, r.tokens_after, r.chars_after),
            figures(&last)
        );
    }

    #[test]
    fn a_stage_that_makes_one_message_longer_is_reverted() {
        let doc = format!(
            r#"[{{"role":"user","content":"q"}},{{"role":"assistant","content":"{}"}},{{"role":"user","content":"b"}},{{"role":"assistant","content":"c"}}]"#,
            "a".repeat(200)
        );
        let mut p = Pipeline::default();
        p.push(Box::new(ShrinkAndGrow));
        let mut c = Conversation::parse(&doc).unwrap();
        let id = c.messages[3].id().clone();
        let r = p.run(&mut c, &StageContext::default());
        assert_eq!(c.to_json_string(), doc);
        assert_eq!(
            r.stages[0].status,
            StageStatus::Reverted(format!("made message {id} longer (2 > 1 chars)"))
        );
    }

    #[test]
    fn the_incremental_measure_equals_a_fresh_one() {
        let ctx = StageContext::default();
        let texts: Vec<String> = (0..40)
            .map(|i| format!("message {i} {}", "w ".repeat(i)))
            .collect();
        let doc = serde_json::to_string(
            &texts
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": t})
                })
                .collect::<Vec<_>>(),
        )
        .unwrap();
        type Edit = fn(&mut Conversation);
        let edits: [Edit; 5] = [
            |c| {
                c.messages.drain(3..20);
            },
            |c| {
                let m = c.messages.remove(30);
                c.messages.insert(2, m);
            },
            |c| c.messages[5].set_text("x"),
            |c| {
                c.messages.reverse();
            },
            |c| {
                c.messages.drain(0..39);
            },
        ];
        for edit in edits {
            let mut c = Conversation::parse(&doc).unwrap();
            let (before, _) = measure(&c, &ctx, None);
            edit(&mut c);
            let (inc, _) = measure(&c, &ctx, Some(&before));
            let (fresh, _) = measure(&c, &ctx, None);
            assert_eq!(
                (inc.messages, inc.tokens, inc.chars),
                (fresh.messages, fresh.tokens, fresh.chars)
            );
            let sizes = |m: &Measure| m.entries.iter().map(|e| (e.1, e.2)).collect::<Vec<_>>();
            assert_eq!(sizes(&inc), sizes(&fresh));
        }
    }

    const DOC: &str = r#"[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"}]"#;

    #[test]
    fn violating_growing_and_failing_stages_are_reverted() {
        let mut p = Pipeline::default();
        p.push(Box::new(DropTool));
        p.push(Box::new(Grow));
        p.push(Box::new(Fail));
        let mut c = Conversation::parse(DOC).unwrap();
        let r = p.run(&mut c, &StageContext::default());
        assert_eq!(c.to_json_string(), DOC);
        assert!(
            matches!(&r.stages[0].status, StageStatus::Reverted(m) if m.contains("violation")),
            "{:?}",
            r.stages[0].status
        );
        assert!(
            matches!(&r.stages[1].status, StageStatus::Reverted(m) if m.contains("longer")),
            "{:?}",
            r.stages[1].status
        );
        assert_eq!(r.stages[2].status, StageStatus::Failed("nope".into()));
        assert_eq!(r.messages_before, 3);
        assert_eq!(r.messages_after, 3);
    }
}
