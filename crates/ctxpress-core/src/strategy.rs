//! The strategy contract: one small trait a pipeline step, sync or async.

use crate::archive::Archive;
use crate::conversation::Conversation;
use crate::summarize::SummarizeError;
use crate::tokens::TokenCounter;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a stage may read about the run.
#[derive(Clone)]
pub struct StageContext {
    /// Token counter for budgets and reports.
    pub counter: Arc<dyn TokenCounter>,
    /// Target token count for the output, if any.
    pub budget: Option<usize>,
    /// The model's context window in tokens, if known.
    pub window: Option<usize>,
    /// Archive of originals, when one is configured (e.g. for LLM summary caches).
    pub archive: Option<Arc<dyn Archive>>,
}

impl Default for StageContext {
    fn default() -> Self {
        StageContext {
            counter: Arc::new(crate::tokens::Heuristic),
            budget: None,
            window: None,
            archive: None,
        }
    }
}

impl std::fmt::Debug for StageContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageContext")
            .field("counter", &self.counter.name())
            .field("budget", &self.budget)
            .field("window", &self.window)
            .field("archive", &self.archive.is_some())
            .finish()
    }
}

impl StageContext {
    /// Tokens of the whole conversation with this run's counter.
    pub fn tokens(&self, conv: &Conversation) -> usize {
        conv.messages
            .iter()
            .map(|m| crate::tokens::count_message(self.counter.as_ref(), m))
            .sum()
    }
}

/// What a stage reports besides the figures the pipeline measures itself.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct StageOutcome {
    /// Named counts of what changed, e.g. `stale_reads: 6`.
    pub counters: BTreeMap<String, u64>,
    /// Free-form remarks (e.g. fallbacks and their causes).
    pub notes: Vec<String>,
}

impl StageOutcome {
    /// Add `n` to a counter.
    pub fn count(&mut self, name: &str, n: u64) {
        *self.counters.entry(name.to_string()).or_default() += n;
    }
}

/// A stage failed; the pipeline leaves the conversation as it was before it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StrategyError {
    /// The strategy could not do its work.
    #[error("{0}")]
    Failed(String),
    /// A summarizer backend failed and no fallback was possible.
    #[error("summarizer: {0}")]
    Summarizer(#[from] SummarizeError),
}

/// A synchronous pipeline step.
pub trait Strategy: Send + Sync {
    /// Registered name.
    fn name(&self) -> &str;
    /// Transform the conversation in place.
    fn apply(
        &self,
        conv: &mut Conversation,
        ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError>;
}

/// An asynchronous pipeline step (e.g. one that calls an LLM).
#[async_trait]
pub trait AsyncStrategy: Send + Sync {
    /// Registered name.
    fn name(&self) -> &str;
    /// Transform the conversation in place.
    async fn apply_async(
        &self,
        conv: &mut Conversation,
        ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError>;
}

/// A built stage, sync or async.
pub enum BuiltStrategy {
    /// Synchronous.
    Sync(Box<dyn Strategy>),
    /// Asynchronous.
    Async(Box<dyn AsyncStrategy>),
}

impl BuiltStrategy {
    /// The strategy's name.
    pub fn name(&self) -> &str {
        match self {
            BuiltStrategy::Sync(s) => s.name(),
            BuiltStrategy::Async(s) => s.name(),
        }
    }
}

impl std::fmt::Debug for BuiltStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BuiltStrategy({})", self.name())
    }
}
