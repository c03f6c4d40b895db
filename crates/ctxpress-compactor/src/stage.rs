//! The `compactor` pipeline stage.

use crate::{CompactionConfig, CompactionResult, Compactor, state};
use ctxpress_core::archive::content_hash;
use ctxpress_core::compaction::{BatchArchive, MemoryBatchArchive, SummaryBatch};
use ctxpress_core::registry::StrategyFactory;
use ctxpress_core::strategy::BuiltStrategy;
use ctxpress_core::{
    AsyncStrategy, ConfigError, Conversation, StageContext, StageOutcome, Strategy, StrategyError,
    parse_params,
};
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

/// Name under which the strategy is registered.
pub const NAME: &str = "compactor";

/// Most clip messages whose batches the stage remembers.
const REMEMBERED: usize = 1024;

/// The compactor as a pipeline stage (sync, or async when its backend is an
/// async one such as an LLM). Without a budget in the context it
/// compacts now (everything before the protected tail); with one, only when
/// the conversation is over it, oldest chunks first until under it.
///
/// Batches are kept in memory, keyed by the text of the clip-archive message
/// they stand behind, so a later run on the compacted conversation continues
/// them (and reruns of a budget search on the same input start from the same
/// batches). The clip message's `replaces` names every message it folded,
/// so the run's archive of originals restores them (`ctxpress expand`).
#[derive(Debug)]
pub struct CompactorStage {
    compactor: Compactor,
    known: Mutex<HashMap<String, Vec<SummaryBatch>>>,
}

impl CompactorStage {
    /// A stage over a compactor.
    pub fn new(compactor: Compactor) -> Self {
        CompactorStage {
            compactor,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The compactor.
    pub fn compactor(&self) -> &Compactor {
        &self.compactor
    }
}

/// The conversation id for labels: the envelope's `id`, else a hash of the
/// first message that is not a system or clip message.
pub fn conversation_id(conv: &Conversation) -> String {
    conv.id().unwrap_or_else(|| {
        let first = conv
            .messages
            .iter()
            .find(|m| !m.role().is_system() && !state::is_clip_text(&m.text()))
            .map(|m| conv.message_json(m))
            .unwrap_or_default();
        format!("c{}", &content_hash(&first)[..12])
    })
}

fn clip_key(text: &str) -> String {
    content_hash(text)
}

fn build(params: &Value) -> Result<BuiltStrategy, ConfigError> {
    let cfg: CompactionConfig = parse_params(NAME, params)?;
    let c = Compactor::new(cfg)?;
    Ok(if c.is_async() {
        BuiltStrategy::Async(Box::new(CompactorStage::new(c)))
    } else {
        BuiltStrategy::Sync(Box::new(CompactorStage::new(c)))
    })
}

fn default_config() -> Value {
    serde_json::to_value(CompactionConfig::default()).unwrap_or_default()
}

ctxpress_core::inventory::submit! {
    StrategyFactory {
        name: NAME,
        summary: "fold old messages into archived summary batches behind one [Context Summary] clip-archive message (chunk-and-fold, session ledger, recursive re-summarization; LLM backends async)",
        default_config,
        build,
        params: &[
            (
                "chunk_tokens",
                "Most tokens of messages in one chunk (a single larger tool exchange is a chunk of its own).",
            ),
            ("clip_window", "Batches shown in full at each end of the clip-archive message (N)."),
            (
                "buffer",
                "Batches allowed beyond `2 * clip_window` before the oldest are summarized again into one deeper batch.",
            ),
            (
                "protected_tail",
                "The last this many user/assistant messages are never folded (nor the last user message).",
            ),
            (
                "prompt",
                "Summarization prompt for model backends, with `{{messages}}`, `{{previous_summary}}` and `{{budget}}` (tokens).",
            ),
            ("backend", "Summarizer backend in core's registry (`extractive`, `openai`, ...)."),
            ("llm", "Parameters passed to the backend factory (a table)."),
            ("summary_tokens", "Summary budget per chunk in tokens (about four characters each)."),
        ],
        takes_llm: true,
    }
}

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl CompactorStage {
    /// The conversation id, an archive seeded with the batches behind the
    /// conversation's clip message (when this stage made it), and the
    /// index where the clip message goes.
    fn prepare(
        &self,
        conv: &Conversation,
    ) -> Result<(String, MemoryBatchArchive, usize), StrategyError> {
        let id = conversation_id(conv);
        let archive = MemoryBatchArchive::new();
        let lead = crate::clip_position(conv, self.compactor.config().protected_tail);
        if let Some(m) = conv.messages.get(lead) {
            let t = m.text();
            if state::is_clip_text(&t) && !conv.is_protected(lead) {
                let known = self
                    .known
                    .lock()
                    .map_err(|_| StrategyError::Failed("lock poisoned".into()))?;
                if let Some(b) = known.get(&clip_key(&t)) {
                    archive
                        .put_batches(b)
                        .map_err(|e| StrategyError::Failed(e.to_string()))?;
                }
            }
        }
        Ok((id, archive, lead))
    }

    fn finish(
        &self,
        conv: &mut Conversation,
        r: CompactionResult,
        archive: &MemoryBatchArchive,
        id: &str,
        lead: usize,
        recall: bool,
    ) -> Result<StageOutcome, StrategyError> {
        let mut out = StageOutcome::default();
        out.notes.extend(r.notes.iter().cloned());
        if let Some(e) = r.error {
            return Err(StrategyError::Failed(e.to_string()));
        }
        if !r.compacted {
            return Ok(out);
        }
        let batches = archive
            .batches(id)
            .map_err(|e| StrategyError::Failed(e.to_string()))?;
        let lead = r.history.messages[lead.min(r.history.messages.len())..]
            .iter()
            .position(crate::is_clip)
            .map_or(lead, |k| lead + k);
        if let Some(m) = r.history.messages.get(lead) {
            let mut known = self
                .known
                .lock()
                .map_err(|_| StrategyError::Failed("lock poisoned".into()))?;
            if known.len() >= REMEMBERED {
                known.clear();
            }
            known.insert(clip_key(&m.text()), batches);
        }
        out.count("messages_folded", r.messages_folded as u64);
        out.count("batches_added", r.batches_added.len() as u64);
        out.count("batches_resummarized", r.resummarized.len() as u64);
        out.count("fallbacks", r.fallbacks as u64);
        let mut history = r.history;
        if recall {
            crate::mark_clip(conv, &mut history, lead);
        }
        *conv = history;
        Ok(out)
    }
}

impl Strategy for CompactorStage {
    fn name(&self) -> &str {
        NAME
    }

    fn apply(
        &self,
        conv: &mut Conversation,
        ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let (id, archive, lead) = self.prepare(conv)?;
        let r = self
            .compactor
            .compress_to(conv, &id, &archive, ctx.budget, ctx.counter.as_ref());
        self.finish(conv, r, &archive, &id, lead, ctx.archive.is_some())
    }
}

impl AsyncStrategy for CompactorStage {
    fn name(&self) -> &str {
        NAME
    }

    fn apply_async<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        conv: &'life1 mut Conversation,
        ctx: &'life2 StageContext,
    ) -> BoxFut<'async_trait, Result<StageOutcome, StrategyError>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let (id, archive, lead) = self.prepare(conv)?;
            let r = self
                .compactor
                .compress_to_async(conv, &id, &archive, ctx.budget, ctx.counter.as_ref())
                .await;
            self.finish(conv, r, &archive, &id, lead, ctx.archive.is_some())
        })
    }
}
