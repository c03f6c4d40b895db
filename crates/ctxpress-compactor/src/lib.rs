//! ctxpress strategy `compactor` (spec 003): folds the old part of a history
//! into summary batches, archives them, and puts one clip-archive message in
//! their place.
//!
//! Used alone: everything before the last five user/assistant messages folds
//! into one `[Context Summary` message (its batches in an archive of the run).
//!
//! ```rust
//! use ctxpress_compactor::{CompactionConfig, Compactor, CompactorStage};
//! use ctxpress_core::{Conversation, Pipeline, StageContext};
//! use serde_json::json;
//!
//! let mut messages = Vec::new();
//! for i in 0..8 {
//!     let ask = format!("Step {i}: make src/parse_{i}.rs accept trailing commas.");
//!     messages.push(json!({"role": "user", "content": ask}));
//!     let details = "The tokenizer now keeps a flag for a pending comma and the list rule \
//!                    accepts it before the closing bracket; the error messages are unchanged. ";
//!     let done = format!("Updated src/parse_{i}.rs. {}", details.repeat(4));
//!     messages.push(json!({"role": "assistant", "content": done}));
//! }
//! let text = serde_json::Value::Array(messages).to_string();
//! let mut conv = Conversation::parse(&text)?;
//! let compactor = Compactor::new(CompactionConfig::default())?;
//! let mut pipeline = Pipeline::new(Vec::new());
//! pipeline.push(Box::new(CompactorStage::new(compactor)));
//! let report = pipeline.run(&mut conv, &StageContext::default());
//! assert!(conv.messages[0].text().starts_with("[Context Summary"));
//! assert_eq!(conv.messages.len(), 1 + 5); // the clip message and the tail
//! assert!(report.messages_after < report.messages_before);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - **Chunk-and-fold.** The messages before the protected tail (never a
//!   system message, which stays where it is) are cut into chunks of at most
//!   `chunk_tokens` tokens, never inside a tool exchange. Each chunk is
//!   summarized with the summary so far as context, through the summarizer
//!   backend registered in core under `backend` (`extractive` by default). A
//!   summary that is empty or not shorter than its chunk, or a backend
//!   error, takes the deterministic path instead (a digest of one line a
//!   message); a chunk the backend fails on is first split in two. A system
//!   message inside the folded range keeps its place: the folded messages
//!   after it go behind a one-line note there, whose `replaces` (and recall
//!   handle) names them, so the output keeps the input's order. With an
//!   async backend (an LLM) use [`Compactor::compress_to_async`]; the stage
//!   is then registered async.
//! - **Task state and ledger.** Every archived batch summary ends with a
//!   [`state::TaskState`] block built from the messages themselves: first and
//!   latest request, files read and modified, commands with their last
//!   status, unresolved errors, open plan items, kept credentials. The clip
//!   shows the session ledger instead (`ctxpress_budget::ledger`, the same note
//!   the budget's evict rung writes; a tenth of the folded tokens, 160 to
//!   1,500, under a budget at least the budget's ledger floor), built from the folded messages and seeded from the previous
//!   clip, so the next compaction updates it (anchored) rather than
//!   regenerating it; the credentials follow it on `keep:` lines.
//! - **Archive before delete.** The new batches, with the exact source texts
//!   of the messages they cover, are stored in the [`BatchArchive`] before the
//!   compacted history is returned; when that fails, the history comes back
//!   unchanged with the error.
//! - **Clip archive.** The compacted history starts (after the leading system
//!   messages) with one message whose text begins with `[Context Summary`:
//!   the first and last `clip_window` batches in full, and a line naming the
//!   omitted middle (labels, time range, how to search it). It is a `user`
//!   message in both dialects (spec 003 says system message; here the system
//!   messages stay byte-identical, and Anthropic has no system role).
//! - **Recursive re-summarization.** When there are more than
//!   `2 * clip_window + buffer` batches, the oldest are summarized again into
//!   one batch of depth + 1 (fresh batches have depth 0).
//!
//! [`Compactor::compress`] never fails and never panics: any error returns
//! the history unchanged with the error in the [`CompactionResult`].

pub mod prompt;
mod stage;
pub mod state;
mod stored;

mod clip;
mod render;

pub use prompt::{DEFAULT_SUMMARIZATION_PROMPT, interpolate_prompt};
pub use stage::{CompactorStage, NAME};
pub use state::TaskState;
pub use stored::expand_stored;

pub use clip::{batches_from_clip, clip_position, clip_text, leading_system, write_handles};
pub(crate) use clip::{fit_clip, is_clip, mark_clip};
use render::clip_lines;
pub use render::{digest, render_messages};

use ctxpress_budget::ledger::Ledger;
use ctxpress_core::archive::ArchiveError;
use ctxpress_core::compaction::{
    BatchArchive, SummaryBatch, batch_header, batch_label, format_iso, message_time, now_millis,
    parse_header, parse_iso,
};
use ctxpress_core::summarize::{
    Backend, Summarize, SummarizeAsync, SummaryKind, SummaryRequest, build_backend,
};
use ctxpress_core::tokens::{Heuristic, TokenCounter, count_message};
use ctxpress_core::{ConfigError, Conversation, Message, MessageId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Polls a future, turning a panic inside it into `None`.
struct CatchUnwind<'a, T>(BoxFut<'a, T>);

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Option<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let inner = &mut self.get_mut().0;
        match catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Some(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    }
}

/// Configuration of the compactor (the `compactor` stage's parameters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionConfig {
    /// Most tokens of messages in one chunk (a single larger tool exchange is
    /// a chunk of its own).
    pub chunk_tokens: usize,
    /// Batches shown in full at each end of the clip-archive message (N).
    pub clip_window: usize,
    /// Batches allowed beyond `2 * clip_window` before the oldest are
    /// summarized again into one deeper batch.
    pub buffer: usize,
    /// The last this many user/assistant messages are never folded (and the
    /// last user message never is), as in the window's protection.
    pub protected_tail: usize,
    /// Summarization prompt for model backends, with `{{messages}}`,
    /// `{{previous_summary}}` and `{{budget}}` (tokens).
    pub prompt: String,
    /// Summarizer backend in core's registry (`extractive`, `openai`, ...).
    pub backend: String,
    /// Parameters passed to the backend factory (a JSON object).
    pub llm: Value,
    /// Summary budget per chunk in tokens (about four characters each).
    pub summary_tokens: usize,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            chunk_tokens: 4000,
            clip_window: 2,
            buffer: 2,
            protected_tail: 5,
            prompt: DEFAULT_SUMMARIZATION_PROMPT.to_string(),
            backend: "extractive".into(),
            llm: Value::Object(Map::new()),
            summary_tokens: 500,
        }
    }
}

impl CompactionConfig {
    /// Check the values; errors name the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, message: &str| ConfigError::InvalidField {
            stage: None,
            strategy: NAME.into(),
            field: field.into(),
            message: message.into(),
        };
        if self.chunk_tokens == 0 {
            return Err(bad("chunk_tokens", "must be at least 1"));
        }
        if self.clip_window == 0 {
            return Err(bad("clip_window", "must be at least 1"));
        }
        if self.summary_tokens == 0 {
            return Err(bad("summary_tokens", "must be at least 1"));
        }
        if !self.llm.is_object() {
            return Err(bad("llm", "must be a table (JSON object)"));
        }
        if !self.prompt.contains("{{messages}}") {
            return Err(bad("prompt", "must contain {{messages}}"));
        }
        Ok(())
    }

    /// Most batches kept before re-summarization: `2 * clip_window + buffer`.
    pub fn max_batches(&self) -> usize {
        2 * self.clip_window + self.buffer
    }
}

/// How many times one compaction starts again because another run changed
/// the conversation's batches under it (each time, that other run
/// finished a write: this bounds a livelock, not a wait).
const MAX_CONFLICTS: usize = 16;

/// Why a compaction left the history unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// The batch archive failed (nothing was removed from the history).
    #[error("batch archive: {0}")]
    Archive(#[from] ArchiveError),
    /// Something inside the compactor went wrong (including a panic).
    #[error("compaction failed: {0}")]
    Failed(String),
}

/// What a compaction did.
#[derive(Debug, Clone)]
pub struct CompactionResult {
    /// The compacted history, or the original when nothing was done or an
    /// error occurred.
    pub history: Conversation,
    /// True when the history was compacted.
    pub compacted: bool,
    /// Original messages folded into new batches.
    pub messages_folded: usize,
    /// Labels of the batches added.
    pub batches_added: Vec<String>,
    /// Labels of the batches summarized again (removed from the archive).
    pub resummarized: Vec<String>,
    /// Chunks whose summary came from the deterministic path.
    pub fallbacks: usize,
    /// Tokens before (heuristic unless a counter was given).
    pub tokens_before: usize,
    /// Tokens after.
    pub tokens_after: usize,
    /// Remarks: fallbacks and their causes, why nothing was done.
    pub notes: Vec<String>,
    /// The error, when the history was left unchanged because of one.
    pub error: Option<CompactionError>,
}

impl CompactionResult {
    fn unchanged(history: &Conversation, tokens: usize) -> Self {
        CompactionResult {
            history: history.clone(),
            compacted: false,
            messages_folded: 0,
            batches_added: Vec::new(),
            resummarized: Vec::new(),
            fallbacks: 0,
            tokens_before: tokens,
            tokens_after: tokens,
            notes: Vec::new(),
            error: None,
        }
    }
}

/// The primary summarizer: a sync or async backend, or none (deterministic only).
#[derive(Clone)]
enum Primary {
    Backend(Arc<dyn Summarize>),
    Async(Arc<dyn SummarizeAsync>),
    Digest,
}

/// The compactor.
#[derive(Clone)]
pub struct Compactor {
    cfg: CompactionConfig,
    primary: Primary,
    /// True when the primary gets the rendered prompt (model backends) rather
    /// than the bare messages (`extractive`).
    prompted: bool,
    notes: Vec<String>,
    now: Option<i64>,
    /// Fold system messages after the clip position too (a stored
    /// conversation, whose batches must hold every message in order).
    fold_system: bool,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("cfg", &self.cfg)
            .field("prompted", &self.prompted)
            .field("notes", &self.notes)
            .finish()
    }
}

/// Backend parameters for a model backend: its chunk template becomes the
/// bare text, since the compactor sends the rendered prompt.
fn prompted_params(llm: &Value) -> Value {
    let mut p = llm.clone();
    if let Value::Object(o) = &mut p {
        let prompts = o
            .entry("prompts")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(pr) = prompts {
            pr.entry("chunk")
                .or_insert_with(|| Value::String("{{text}}".into()));
        }
    }
    p
}

impl Compactor {
    /// Build from a config: the backend is looked up in core's registry.
    /// An async-only backend, or `extractive` when no crate registering it is
    /// linked, leaves the deterministic path (noted in every result).
    pub fn new(cfg: CompactionConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut notes = Vec::new();
        let prompted = cfg.backend != "extractive";
        let built = if prompted {
            build_backend(&cfg.backend, &prompted_params(&cfg.llm))
                .or_else(|_| build_backend(&cfg.backend, &cfg.llm))
        } else {
            build_backend(&cfg.backend, &cfg.llm)
        };
        let primary = match built {
            Ok(Backend::Sync(s)) => Primary::Backend(s),
            Ok(Backend::Async(a)) => Primary::Async(a),
            Err(ConfigError::UnknownBackend { .. }) if !prompted => {
                notes.push("backend `extractive` is not linked: deterministic digest used".into());
                Primary::Digest
            }
            Err(e) => return Err(e),
        };
        Ok(Compactor {
            cfg,
            primary,
            prompted,
            notes,
            now: None,
            fold_system: false,
        })
    }

    /// A compactor over a given backend (tests, library callers). With
    /// `prompted`, the backend gets the rendered prompt as its text.
    pub fn with_backend(
        cfg: CompactionConfig,
        backend: Arc<dyn Summarize>,
        prompted: bool,
    ) -> Self {
        Compactor {
            cfg,
            primary: Primary::Backend(backend),
            prompted,
            notes: Vec::new(),
            now: None,
            fold_system: false,
        }
    }

    /// A compactor over an async backend (an LLM): use
    /// [`Compactor::compress_to_async`].
    pub fn with_async_backend(
        cfg: CompactionConfig,
        backend: Arc<dyn SummarizeAsync>,
        prompted: bool,
    ) -> Self {
        Compactor {
            cfg,
            primary: Primary::Async(backend),
            prompted,
            notes: Vec::new(),
            now: None,
            fold_system: false,
        }
    }

    /// True when the backend is async: the sync entry points then fail
    /// (history unchanged) and [`Compactor::compress_to_async`] is the one to use.
    pub fn is_async(&self) -> bool {
        matches!(self.primary, Primary::Async(_))
    }

    /// Use this time (milliseconds since the epoch) for messages without one
    /// of their own, instead of the clock.
    pub fn with_now(mut self, millis: i64) -> Self {
        self.now = Some(millis);
        self
    }

    /// The configuration in use.
    pub fn config(&self) -> &CompactionConfig {
        &self.cfg
    }

    /// Compact now: fold everything before the protected tail into batches
    /// stored in `archive`. Never fails: on any error the history comes back
    /// unchanged with the error in the result.
    pub fn compress(
        &self,
        history: &Conversation,
        conversation_id: &str,
        archive: &dyn BatchArchive,
    ) -> CompactionResult {
        self.compress_to(history, conversation_id, archive, None, &Heuristic)
    }

    /// Like [`Compactor::compress`]; with a `budget`, only the oldest chunks
    /// needed to bring the history to `budget` tokens (counted with
    /// `counter`) are folded, and nothing when it is already under it.
    pub fn compress_to(
        &self,
        history: &Conversation,
        conversation_id: &str,
        archive: &dyn BatchArchive,
        budget: Option<usize>,
        counter: &dyn TokenCounter,
    ) -> CompactionResult {
        let before = total_tokens(history, counter);
        let run = catch_unwind(AssertUnwindSafe(|| {
            ctxpress_budget::window::ready(self.run(
                history,
                conversation_id,
                archive,
                budget,
                counter,
                before,
            ))
        }));
        let outcome = match run {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Ok(Err(CompactionError::Failed(
                "the summarizer backend is async: use compress_to_async".into(),
            ))),
            Err(p) => Err(p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into())),
        };
        self.finish(history, before, outcome)
    }

    /// [`Compactor::compress`] for async backends (any backend works).
    /// Never fails.
    pub async fn compress_async(
        &self,
        history: &Conversation,
        conversation_id: &str,
        archive: &dyn BatchArchive,
    ) -> CompactionResult {
        self.compress_to_async(history, conversation_id, archive, None, &Heuristic)
            .await
    }

    /// [`Compactor::compress_to`] for async backends (any backend works).
    /// Never fails.
    pub async fn compress_to_async(
        &self,
        history: &Conversation,
        conversation_id: &str,
        archive: &dyn BatchArchive,
        budget: Option<usize>,
        counter: &dyn TokenCounter,
    ) -> CompactionResult {
        let before = total_tokens(history, counter);
        let fut: BoxFut<'_, _> =
            Box::pin(self.run(history, conversation_id, archive, budget, counter, before));
        let outcome = CatchUnwind(fut).await.ok_or_else(|| "panic".to_string());
        self.finish(history, before, outcome)
    }

    fn finish(
        &self,
        history: &Conversation,
        before: usize,
        outcome: Result<Result<CompactionResult, CompactionError>, String>,
    ) -> CompactionResult {
        let mut r = match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let mut r = CompactionResult::unchanged(history, before);
                r.error = Some(e);
                r
            }
            Err(what) => {
                let mut r = CompactionResult::unchanged(history, before);
                r.error = Some(CompactionError::Failed(format!("panicked: {what}")));
                r
            }
        };
        let mut notes = self.notes.clone();
        notes.append(&mut r.notes);
        r.notes = notes;
        r
    }

    /// Ask the primary backend; errors and panics as text.
    async fn ask(&self, req: &SummaryRequest<'_>) -> Result<String, String> {
        match &self.primary {
            Primary::Backend(b) => match catch_unwind(AssertUnwindSafe(|| b.summarize(req))) {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("backend panicked".into()),
            },
            Primary::Async(a) => match CatchUnwind(a.summarize_async(req)).await {
                Some(r) => r.map_err(|e| e.to_string()),
                None => Err("backend panicked".into()),
            },
            Primary::Digest => Err("no backend".into()),
        }
    }

    fn now(&self) -> i64 {
        self.now.unwrap_or_else(now_millis)
    }

    /// [`Compactor::run_once`], again from the batches stored then when
    /// another run changed the conversation's batches between the read and
    /// the write ([`ArchiveError::Conflict`]: that attempt wrote nothing),
    /// so concurrent runs on one conversation act as if one ran after the
    /// other.
    async fn run(
        &self,
        history: &Conversation,
        id: &str,
        archive: &dyn BatchArchive,
        budget: Option<usize>,
        counter: &dyn TokenCounter,
        before: usize,
    ) -> Result<CompactionResult, CompactionError> {
        let mut conflicts = 0;
        loop {
            match self
                .run_once(history, id, archive, budget, counter, before)
                .await
            {
                Err(CompactionError::Archive(ArchiveError::Conflict(_)))
                    if conflicts < MAX_CONFLICTS =>
                {
                    conflicts += 1;
                }
                r => return r,
            }
        }
    }

    async fn run_once(
        &self,
        history: &Conversation,
        id: &str,
        archive: &dyn BatchArchive,
        budget: Option<usize>,
        counter: &dyn TokenCounter,
        before: usize,
    ) -> Result<CompactionResult, CompactionError> {
        let mut res = CompactionResult::unchanged(history, before);
        if budget.is_some_and(|b| before <= b) {
            res.notes.push("under the budget: nothing to fold".into());
            return Ok(res);
        }
        let msgs = &history.messages;
        let n = msgs.len();
        let toks: Vec<usize> = msgs.iter().map(|m| count_message(counter, m)).collect();
        let mut lead = clip_position(history, self.cfg.protected_tail);
        let annotated = |i: usize| history.is_protected(i);
        // The previous clip-archive message, regenerated from the batches
        // (one annotated `protected` stays where it is, before the new one).
        let mut old_clip = None;
        if lead < n && is_clip(&msgs[lead]) {
            if annotated(lead) {
                lead += 1;
            } else {
                old_clip = Some(lead);
            }
        }
        // Where folding stops: the first protected message (never inside an exchange).
        let protected = ctxpress_budget::window::protected_ids(history, self.cfg.protected_tail);
        let mut limit = (lead..n)
            .find(|&i| {
                !msgs[i].role().is_system()
                    && Some(i) != old_clip
                    && (protected.contains(msgs[i].id()) || annotated(i))
            })
            .unwrap_or(n);
        while limit > 0 && limit < n && msgs[limit].is_tool_result() {
            limit -= 1;
        }
        // Units: whole exchanges or single messages.
        let exchanges = history.exchanges();
        let mut units: Vec<Vec<usize>> = Vec::new();
        let mut i = lead;
        while i < limit {
            if Some(i) == old_clip || (msgs[i].role().is_system() && !self.fold_system) {
                i += 1;
                continue;
            }
            match exchanges.iter().find(|e| e.call == i) {
                Some(e) => {
                    let mut u = vec![i];
                    u.extend(e.results.iter().copied().filter(|&r| r < limit));
                    i = u.last().copied().unwrap_or(i) + 1;
                    units.push(u);
                }
                None => {
                    units.push(vec![i]);
                    i += 1;
                }
            }
        }
        if units.is_empty() {
            res.notes
                .push("nothing before the protected tail to fold".into());
            return Ok(res);
        }
        // What is never folded this time: the messages after the last unit.
        let stays = units.last().and_then(|u| u.last()).map_or(lead, |&j| j + 1);
        // Chunks by token budget.
        let mut chunks: Vec<Vec<usize>> = Vec::new();
        let mut cur: Vec<usize> = Vec::new();
        let mut cur_t = 0;
        for u in units {
            let t: usize = u.iter().map(|&j| toks[j]).sum();
            if !cur.is_empty() && cur_t + t > self.cfg.chunk_tokens {
                chunks.push(std::mem::take(&mut cur));
                cur_t = 0;
            }
            cur.extend(u);
            cur_t += t;
        }
        if !cur.is_empty() {
            chunks.push(cur);
        }
        let mut prev = archive.batches(id)?;
        if prev.is_empty()
            && let Some(c) = old_clip
        {
            // A clip message this archive does not know (another process,
            // another archive): carry on from the batches it shows.
            let seeded = batches_from_clip(&msgs[c].text(), id);
            if !seeded.is_empty() {
                archive.put_batches(&seeded)?;
                res.notes.push(format!(
                    "{} batches recovered from the clip-archive message",
                    seeded.len()
                ));
                prev = seeded;
            }
        }
        let mut running = prev
            .last()
            .and_then(|b| TaskState::parse(&b.summary))
            .unwrap_or_default();
        // The session ledger the clip shows: what the clip showed before
        // (its ledger, or the task state of the newest batch), updated by
        // every folded message. Names the tail keeps visible are left out.
        let mut ledger = ledger_beside(msgs[..lead].iter().chain(&msgs[stays..]));
        match (old_clip, prev.last()) {
            (Some(c), _) => ledger.add(&msgs[c]),
            (None, Some(b)) => ledger.add(&Message::text_message(
                MessageId::new(""),
                "user",
                &format!("[Context Summary]\n{}", b.summary),
            )),
            (None, None) => {}
        }
        let mut summary_so_far = prev.last().map(batch_body).unwrap_or_default();
        let mut last_end = prev
            .last()
            .and_then(|b| parse_iso(&b.end))
            .unwrap_or(i64::MIN);
        let old_clip_tokens = old_clip.map_or(0, |c| toks[c]);
        let now = self.now();
        let mut fresh: Vec<SummaryBatch> = Vec::new();
        let mut folded: Vec<usize> = Vec::new();
        let mut attempt = None;
        for chunk in &chunks {
            let cm: Vec<Message> = chunk.iter().map(|&j| msgs[j].clone()).collect();
            let text = render_messages(&cm);
            let (body, fell_back) = self
                .summarize_chunk(&cm, &text, &summary_so_far, 0, &mut res)
                .await;
            res.fallbacks += usize::from(fell_back);
            running = running.update(&cm);
            cm.iter().for_each(|m| ledger.add(m));
            let times: Vec<i64> = cm.iter().filter_map(message_time).collect();
            let mut end = times.iter().copied().max().unwrap_or(now);
            if end <= last_end {
                end = last_end.saturating_add(1);
            }
            let start = times.iter().copied().min().unwrap_or(end).min(end);
            last_end = end;
            let (start, end) = (format_iso(start), format_iso(end));
            fresh.push(SummaryBatch {
                label: batch_label(id, &end),
                conversation: id.to_string(),
                depth: 0,
                summary: compose(&batch_header(0, &start, &end, cm.len()), &body, &running),
                start,
                end,
                count: cm.len(),
                originals: cm.iter().map(|m| history.message_json(m)).collect(),
            });
            summary_so_far = body;
            folded.extend(chunk.iter().copied());
            if let Some(b) = budget {
                let plan = self.resummarize(&prev, &fresh, id).await?;
                let folded_t: usize = folded.iter().map(|&j| toks[j]).sum();
                // Folding is decided with the ledger at its budget share:
                // on coding sessions a ledger that big holds more of what
                // comes next than the messages it costs (8k: 0.591 of the
                // needed facts when folding as if it were a tenth of what
                // folds, 0.613 so; 32k: 0.875, 0.960).
                let room = ledger_room(folded_t + old_clip_tokens, budget);
                let state = shown_state(&ledger, &running, room, counter);
                let clip = clip_text(&plan.all, self.cfg.clip_window, id, Some(&state));
                let probe = Message::text_message(MessageId::new(""), "user", &clip);
                let after = before - folded_t - old_clip_tokens + count_message(counter, &probe);
                attempt = Some(plan);
                if after <= b {
                    break;
                }
            }
        }
        let plan = match attempt {
            Some(p) => p,
            None => self.resummarize(&prev, &fresh, id).await?,
        };
        res.fallbacks += usize::from(plan.fallback);
        // The compacted history.
        let folded_t: usize = folded.iter().map(|&j| toks[j]).sum();
        let room = ledger_room(folded_t + old_clip_tokens, budget);
        let state = shown_state(&ledger, &running, room, counter);
        let clip = clip_text(&plan.all, self.cfg.clip_window, id, Some(&state));
        let mut out = history.clone();
        let cid = out.fresh_id("compaction");
        // A user message in both dialects: the system messages stay exactly
        // as they were (invariant 2), and Anthropic has no system role.
        let clip_msg = Message::text_message(cid.clone(), "user", &clip);
        let gone: HashSet<usize> = folded.iter().copied().chain(old_clip).collect();
        let mut replaces: Vec<MessageId> = old_clip.iter().map(|&c| msgs[c].id().clone()).collect();
        replaces.extend(folded.iter().map(|&j| msgs[j].id().clone()));
        // The clip takes the place of the first folded message. A system
        // message inside the folded range stays where it is: the folded
        // messages after it go behind a short note of their own there (its
        // `replaces` names them), so the output keeps the input's order and
        // each note's recall handle gives back exactly its stretch.
        let mut new_msgs: Vec<Message> = msgs[..lead].to_vec();
        let mut clip_msg = Some(clip_msg);
        let mut clip_at = lead;
        let mut continued: Vec<(MessageId, Vec<MessageId>)> = Vec::new();
        let mut stretch: Vec<MessageId> = Vec::new();
        for (j, m) in msgs.iter().enumerate().skip(lead) {
            if gone.contains(&j) {
                if clip_msg.is_none() && stretch.is_empty() {
                    let nid = out.fresh_id("compaction");
                    new_msgs.push(Message::text_message(nid.clone(), "user", ""));
                    continued.push((nid, Vec::new()));
                }
                if let Some(c) = clip_msg.take() {
                    clip_at = new_msgs.len();
                    new_msgs.push(c);
                }
                stretch.push(m.id().clone());
                continue;
            }
            if let Some(last) = continued.last_mut()
                && !stretch.is_empty()
            {
                last.1.append(&mut stretch);
            }
            stretch.clear();
            new_msgs.push(m.clone());
        }
        if let Some(last) = continued.last_mut() {
            last.1.append(&mut stretch);
        }
        // The clip's own stretch: what is not behind a continuation note.
        let behind: HashSet<&MessageId> = continued.iter().flat_map(|(_, ids)| ids).collect();
        replaces.retain(|id| !behind.contains(id));
        for (nid, ids) in &continued {
            let text = format!(
                "[ctxpress: {} earlier messages moved to the archive; the Context Summary above covers them]",
                ids.len()
            );
            if let Some(m) = new_msgs.iter_mut().find(|m| m.id() == nid) {
                *m = Message::text_message(nid.clone(), "user", &text);
            }
        }
        let lead = clip_at;
        let mut after: usize = new_msgs.iter().map(|m| count_message(counter, m)).sum();
        if let Some(b) = budget.filter(|&b| after > b) {
            // Over the budget with every chunk folded: a shorter clip (the
            // ledger first, then the latest summary), the batches
            // themselves archived in full. (On coding sessions the ledger
            // holds more of what comes next than the batch summaries: 8k,
            // 0.613 of the needed facts so, 0.599 keeping the summaries and
            // giving the ledger only the room they leave.)
            let clip_t = count_message(counter, &new_msgs[lead]);
            // At least the ledger's floor under this budget, even when what
            // stays is over the budget alone: the budget's later rungs
            // shorten that, and a clip cut to nothing (`[…`) would have
            // lost everything folded.
            let allowed = b
                .saturating_sub(after - clip_t)
                .max(ctxpress_budget::window::ledger_floor(b));
            let small = fit_clip(
                &clip,
                &plan.all,
                id,
                allowed,
                counter,
                (&ledger, room),
                &running,
            );
            let small_msg = Message::text_message(cid.clone(), "user", &small);
            let small_t = count_message(counter, &small_msg);
            if small_t < clip_t {
                new_msgs[lead] = small_msg;
                after = after - clip_t + small_t;
                res.notes.push(format!(
                    "clip-archive message shortened to {small_t} tokens for the budget"
                ));
            }
        }
        // Room for the clip's recall handle, written when the run archives
        // the originals (the same with or without: one output either way).
        let handle_room = counter.count(ctxpress_core::handle::PROBE);
        if after + handle_room >= before {
            res.notes.push(format!(
                "compaction would not shorten the history ({after} >= {before} tokens): left unchanged"
            ));
            return Ok(res);
        }
        // Archive before the messages leave the history.
        if let Some((removed, merged)) = &plan.replace {
            archive.replace(id, removed, merged.clone())?;
        }
        if !plan.put.is_empty() {
            archive.put_batches(&plan.put)?;
        }
        out.messages = new_msgs;
        out.ann_mut(&cid).replaces = replaces;
        for (nid, ids) in continued {
            out.ann_mut(&nid).replaces = ids;
        }
        res.history = out;
        res.compacted = true;
        res.messages_folded = folded.len();
        res.batches_added = plan.put.iter().map(|b| b.label.clone()).collect();
        if let Some((removed, merged)) = &plan.replace {
            res.batches_added.push(merged.label.clone());
            res.resummarized = removed.clone();
        }
        res.tokens_after = after;
        Ok(res)
    }

    /// A chunk's summary body: the primary backend's when acceptable, else
    /// (after splitting a failing multi-message chunk once or twice) the
    /// deterministic digest. Returns whether the deterministic path was used.
    fn summarize_chunk<'s>(
        &'s self,
        cm: &'s [Message],
        text: &'s str,
        previous: &'s str,
        depth: usize,
        res: &'s mut CompactionResult,
    ) -> BoxFut<'s, (String, bool)> {
        Box::pin(async move {
            let budget_chars = self.cfg.summary_tokens * 4;
            if matches!(self.primary, Primary::Digest) {
                return (digest(cm, budget_chars.min(text.chars().count() / 2)), true);
            }
            let prompt;
            let req_text = if self.prompted {
                prompt =
                    interpolate_prompt(&self.cfg.prompt, text, previous, self.cfg.summary_tokens);
                prompt.as_str()
            } else {
                text
            };
            let req = SummaryRequest {
                text: req_text,
                kind: SummaryKind::Chunk,
                budget_chars: Some(budget_chars),
                context: (!previous.is_empty()).then_some(previous),
            };
            let answer = self.ask(&req).await.and_then(|a| accept(text, &a));
            match answer {
                Ok(a) => (a, false),
                Err(e) if cm.len() > 1 && depth < 2 => {
                    // Split further and fold the halves.
                    res.notes
                        .push(format!("chunk of {} messages split: {e}", cm.len()));
                    let mid = split_point(cm);
                    let (l, r) = cm.split_at(mid);
                    let (lt, rt) = (render_messages(l), render_messages(r));
                    let (ls, lf) = self.summarize_chunk(l, &lt, previous, depth + 1, res).await;
                    let (rs, rf) = self.summarize_chunk(r, &rt, &ls, depth + 1, res).await;
                    let joined = format!("{ls}\n{rs}");
                    if joined.chars().count() < text.chars().count() {
                        (joined, lf || rf)
                    } else {
                        (digest(cm, budget_chars.min(text.chars().count() / 2)), true)
                    }
                }
                Err(e) => {
                    res.notes.push(format!("deterministic summary used: {e}"));
                    (digest(cm, budget_chars.min(text.chars().count() / 2)), true)
                }
            }
        })
    }

    /// The archive writes: fresh batches, and when there are too many, the
    /// oldest summarized again into one batch of depth + 1.
    async fn resummarize(
        &self,
        prev: &[SummaryBatch],
        fresh: &[SummaryBatch],
        id: &str,
    ) -> Result<Plan, CompactionError> {
        let mut all: Vec<SummaryBatch> = prev.iter().chain(fresh).cloned().collect();
        let max = self.cfg.max_batches();
        if all.len() <= max || all.len() < 2 {
            return Ok(Plan {
                all,
                put: fresh.to_vec(),
                replace: None,
                fallback: false,
            });
        }
        let k = (all.len() - max + 1).max(2);
        let old: Vec<SummaryBatch> = all.drain(..k).collect();
        let depth = old.iter().map(|b| b.depth).max().unwrap_or(0) + 1;
        let bodies: Vec<String> = old.iter().map(batch_body).collect();
        let text = bodies.join("\n\n");
        let budget_chars = self.cfg.summary_tokens * 4;
        let body = if matches!(self.primary, Primary::Digest) {
            None
        } else {
            let prompt;
            let req_text = if self.prompted {
                prompt = interpolate_prompt(&self.cfg.prompt, &text, "", self.cfg.summary_tokens);
                prompt.as_str()
            } else {
                text.as_str()
            };
            let req = SummaryRequest {
                text: req_text,
                kind: SummaryKind::Chunk,
                budget_chars: Some(budget_chars),
                context: None,
            };
            self.ask(&req)
                .await
                .ok()
                .and_then(|a| accept(&text, &a).ok())
        };
        let fallback = body.is_none();
        let body =
            body.unwrap_or_else(|| clip_lines(&text, budget_chars.min(text.chars().count())));
        let state = old
            .last()
            .and_then(|b| TaskState::parse(&b.summary))
            .unwrap_or_default();
        let (first, last) = (&old[0], &old[old.len() - 1]);
        let count = old.iter().map(|b| b.count).sum();
        let merged = SummaryBatch {
            label: batch_label(id, &last.end),
            conversation: id.to_string(),
            depth,
            start: first.start.clone(),
            end: last.end.clone(),
            count,
            summary: compose(
                &batch_header(depth, &first.start, &last.end, count),
                &body,
                &state,
            ),
            originals: old
                .iter()
                .flat_map(|b| b.originals.iter().cloned())
                .collect(),
        };
        let stored: HashSet<&str> = prev.iter().map(|b| b.label.as_str()).collect();
        let removed: Vec<String> = old
            .iter()
            .filter(|b| stored.contains(b.label.as_str()))
            .map(|b| b.label.clone())
            .collect();
        let put: Vec<SummaryBatch> = fresh
            .iter()
            .filter(|b| !old.iter().any(|o| o.label == b.label))
            .cloned()
            .collect();
        all.insert(0, merged.clone());
        Ok(if removed.is_empty() {
            let mut put = put;
            put.insert(0, merged);
            Plan {
                all,
                put,
                replace: None,
                fallback,
            }
        } else {
            Plan {
                all,
                put,
                replace: Some((removed, merged)),
                fallback,
            }
        })
    }
}

/// What a compaction writes to the archive, and the batches after it.
struct Plan {
    /// Every batch of the conversation after the writes, oldest first.
    all: Vec<SummaryBatch>,
    /// Batches to store.
    put: Vec<SummaryBatch>,
    /// Stored batches summarized again: their labels and the new batch.
    replace: Option<(Vec<String>, SummaryBatch)>,
    /// The re-summarized batch took the deterministic path.
    fallback: bool,
}

/// Accept a backend's answer: non-empty and shorter (in characters) than the
/// chunk it summarizes.
fn accept(chunk: &str, answer: &str) -> Result<String, String> {
    let a = answer.trim();
    if a.is_empty() {
        return Err("empty summary".into());
    }
    let (al, cl) = (a.chars().count(), chunk.chars().count());
    if al >= cl {
        return Err(format!(
            "summary of {al} chars is not shorter than its chunk ({cl})"
        ));
    }
    Ok(a.to_string())
}

/// Tokens of a whole history, counted with `counter`.
fn total_tokens(history: &Conversation, counter: &dyn TokenCounter) -> usize {
    history
        .messages
        .iter()
        .map(|m| count_message(counter, m))
        .sum()
}

/// A split point near the middle that keeps tool exchanges whole.
fn split_point(cm: &[Message]) -> usize {
    let mid = cm.len() / 2;
    (mid..cm.len())
        .chain((1..mid).rev())
        .find(|&i| !cm[i].is_tool_result())
        .unwrap_or(mid.max(1))
}

/// Tokens the clip's session ledger gets at most (less when a budget needs
/// the room).
const LEDGER_TOKENS: usize = 1_500;

/// Tokens the clip's ledger gets for `folded` tokens of folded messages: a
/// tenth of them, at least 160 and at most [`LEDGER_TOKENS`], so the clip
/// stays a small part of what it stands for; under a budget at least the
/// share the budget gives its ledger (`window::ledger_floor`), at most half
/// of what was folded.
fn ledger_room(folded: usize, budget: Option<usize>) -> usize {
    let room = (folded / 10).clamp(160, LEDGER_TOKENS);
    match budget {
        Some(b) => room.max(ctxpress_budget::window::ledger_floor(b).min(folded / 2)),
        None => room,
    }
}

/// What the clip shows after its batches: the session ledger within `limit`
/// tokens, and the credentials the folded messages held (the task state's
/// `keep:` lines, verbatim; the ledger never lists a secret).
fn shown_state(
    ledger: &Ledger,
    state: &TaskState,
    limit: usize,
    counter: &dyn TokenCounter,
) -> String {
    let (note, _) = ledger.render_within(limit, counter);
    if state.kept.is_empty() {
        return note;
    }
    let kept = TaskState {
        kept: state.kept.clone(),
        ..TaskState::default()
    };
    format!("{note}\n{}", kept.render().trim_end())
}

/// An empty ledger for the messages a compaction folds, leaving out the
/// names the messages that stay (`stays`) show anyway.
fn ledger_beside<'m>(stays: impl IntoIterator<Item = &'m Message>) -> Ledger {
    let visible: Vec<String> = stays.into_iter().map(|m| m.text().into_owned()).collect();
    Ledger::new(visible.iter().map(String::as_str))
}

/// The summary of a batch: header, body, task state block.
fn compose(header: &str, body: &str, state: &TaskState) -> String {
    format!("{header}\n{}\n\n{}", body.trim_end(), state.render())
}

/// A batch's body: its summary without header and task state block.
fn batch_body(b: &SummaryBatch) -> String {
    let after = parse_header(&b.summary).map_or(b.summary.as_str(), |(_, rest)| rest);
    TaskState::strip(after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_budget::ledger;
    use ctxpress_core::compaction::batch_header;

    fn batch(i: usize, depth: u32) -> SummaryBatch {
        let (start, end) = (
            format_iso(i as i64 * 60_000),
            format_iso(i as i64 * 60_000 + 1),
        );
        let st = TaskState {
            first_request: Some(format!("request {i}")),
            ..TaskState::default()
        };
        SummaryBatch {
            label: batch_label("c", &end),
            conversation: "c".into(),
            depth,
            summary: compose(
                &batch_header(depth, &start, &end, 2),
                &format!("body {i}"),
                &st,
            ),
            start,
            end,
            count: 2,
            originals: vec!["{}".into(), "{}".into()],
        }
    }

    #[test]
    fn clip_text_shows_both_ends_and_names_the_middle() {
        let b: Vec<SummaryBatch> = (0..5).map(|i| batch(i, u32::from(i == 0))).collect();
        let t = clip_text(&b, 2, "c", None);
        assert!(t.starts_with(
            "[Context Summary: 10 earlier messages of conversation c in 5 batches, 1970-01-01T00:00:00.000Z to 1970-01-01T00:04:00.001Z]"
        ), "{t}");
        for i in [0, 1, 3, 4] {
            assert!(t.contains(&format!("\nbody {i}\n")), "{t}");
        }
        assert!(!t.contains("body 2"));
        assert!(t.contains(&format!(
            "[1 batches omitted (2 messages, 1970-01-01T00:02:00.000Z to 1970-01-01T00:02:00.001Z): {}; `ctxpress search QUERY --conversation c` finds them",
            b[2].label
        )), "{t}");
        assert!(t.contains("[depth:1|start:1970-01-01T00:00:00.000Z|"));
        // Only the last batch shown carries its task state.
        assert_eq!(t.matches(state::BEGIN).count(), 1);
        assert!(
            t.ends_with(&format!("first request: request 4\n{}", state::END)),
            "{t}"
        );
        // Few batches: all shown, nothing omitted.
        let t = clip_text(&b[..3], 2, "c", None);
        assert!(t.contains("body 0") && t.contains("body 2") && !t.contains("omitted"));
    }

    /// A ledger of a short exchange.
    fn sample_ledger() -> Ledger {
        let mut l = Ledger::new(std::iter::empty::<&str>());
        for (role, text) in [
            ("user", "Make src/parse_array.rs accept trailing commas."),
            (
                "assistant",
                "The fix is in parse_array: the list rule must accept a comma before the bracket.",
            ),
        ] {
            l.add(&Message::text_message(MessageId::new(""), role, text));
        }
        l
    }

    #[test]
    fn clip_text_with_a_ledger_shows_it_after_the_batches() {
        let b: Vec<SummaryBatch> = (0..5).map(|i| batch(i, 0)).collect();
        let kept = TaskState {
            kept: vec!["DB_PASSWORD=hunter2x9".into()],
            ..TaskState::default()
        };
        let state = shown_state(&sample_ledger(), &kept, LEDGER_TOKENS, &Heuristic);
        let t = clip_text(&b, 2, "c", Some(&state));
        // The ledger, not a task state of requests and files; the
        // credential stays verbatim.
        assert!(t.contains(&format!("body 4\n\n{}", ledger::HEAD)), "{t}");
        assert!(
            t.contains("first request: \"Make src/parse_array.rs"),
            "{t}"
        );
        assert!(!t.contains("first request: request 4"), "{t}");
        assert!(
            t.ends_with(&format!("keep: \"DB_PASSWORD=hunter2x9\"\n{}", state::END)),
            "{t}"
        );
        // Batches read back from it do not take the ledger for a body.
        let back = batches_from_clip(&t, "c");
        assert_eq!(back.len(), 5);
        assert_eq!(batch_body(&back[4]), "body 4");
        assert_eq!(TaskState::parse(&back[4].summary).unwrap().kept, kept.kept);
    }

    #[test]
    fn batches_come_back_from_a_clip_text() {
        let b: Vec<SummaryBatch> = (0..5).map(|i| batch(i, u32::from(i == 0))).collect();
        let back = batches_from_clip(&clip_text(&b, 2, "c", None), "c");
        assert_eq!(back.len(), 5);
        for i in [0, 1, 3, 4] {
            assert_eq!(back[i].label, b[i].label);
            assert_eq!(
                (back[i].depth, back[i].count, &back[i].start),
                (b[i].depth, 2, &b[i].start)
            );
            assert_eq!(batch_body(&back[i]), format!("body {i}"));
        }
        // The omitted middle: one batch naming it.
        assert_eq!(back[2].label, b[2].label);
        assert!(batch_body(&back[2]).contains(&b[2].label));
        assert_eq!(
            TaskState::parse(&back[4].summary)
                .unwrap()
                .first_request
                .as_deref(),
            Some("request 4")
        );
        // A shortened clip: one batch of its text.
        let short = fit_clip(
            &clip_text(&b, 2, "c", None),
            &b,
            "c",
            150,
            &Heuristic,
            (&sample_ledger(), LEDGER_TOKENS),
            &TaskState::default(),
        );
        let one = batches_from_clip(&short, "c");
        assert_eq!(one.len(), 1, "{short}");
        assert_eq!((one[0].count, one[0].end.as_str()), (10, b[4].end.as_str()));
        assert!(batches_from_clip("no clip", "c").is_empty());
    }

    #[test]
    fn batch_body_drops_header_and_state() {
        assert_eq!(batch_body(&batch(3, 0)), "body 3");
    }

    #[test]
    fn digest_and_accept_bounds() {
        let msgs: Vec<Message> = (0..30)
            .map(|i| {
                Message::text_message(
                    MessageId::new(format!("m{i}")),
                    "user",
                    &"a long line of text ".repeat(20),
                )
            })
            .collect();
        let d = digest(&msgs, 500);
        assert!(d.chars().count() <= 500, "{}", d.chars().count());
        assert!(d.starts_with("- user: a long line"));
        assert!(accept("abcdef", " abc ").is_ok());
        assert!(accept("abc", "abcd").is_err());
        assert!(accept("abc", "  ").is_err());
    }

    #[test]
    fn fit_clip_stays_within_the_allowance() {
        let b: Vec<SummaryBatch> = (0..5).map(|i| batch(i, 0)).collect();
        let full = clip_text(&b, 2, "c", None);
        for allowed in [20, 60, 120, 400] {
            let s = fit_clip(
                &full,
                &b,
                "c",
                allowed,
                &Heuristic,
                (&sample_ledger(), LEDGER_TOKENS),
                &TaskState::default(),
            );
            assert!(s.starts_with("[Context Summary"), "{s}");
            let t = count_message(
                &Heuristic,
                &Message::text_message(MessageId::new(""), "system", &s),
            );
            assert!(
                t <= allowed.max(count_message(
                    &Heuristic,
                    &Message::text_message(
                        MessageId::new(""),
                        "system",
                        full.lines().next().unwrap()
                    )
                )),
                "{allowed}: {t}"
            );
        }
    }

    #[test]
    fn leading_system_stops_at_a_clip_message() {
        let c = Conversation::new(vec![
            Message::text_message(MessageId::new("s"), "system", "sys"),
            Message::text_message(MessageId::new("c"), "system", "[Context Summary: x]"),
            Message::text_message(MessageId::new("u"), "user", "hi"),
        ]);
        assert_eq!(leading_system(&c), 1);
    }
}
