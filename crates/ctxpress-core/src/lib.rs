//! Core of ctxpress: the message model, conversation view, annotations,
//! strategy contract, pipeline, registry, invariant checker, token counting,
//! recall handles and archive traits, and the summarizer backends strategies
//! look up by name.
//!
//! It must never depend on another ctxpress crate: text rules
//! (`ctxpress-text`), agent tool semantics (`ctxpress-dialect`), budgets
//! (`ctxpress-budget`) and every strategy build on it. See ARCHITECTURE.md.

pub mod annotate;
pub mod archive;
pub mod canonical;
pub mod compaction;
pub mod config;
pub mod conversation;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod handle;
pub mod markers;
pub mod message;
pub mod pipeline;
pub mod registry;
pub mod strategy;
pub mod summarize;
pub mod tokens;
pub mod validate;

pub use annotate::{Annotations, Classification, Decision, DecisionRule, DupMark, Reason, Tier};
pub use archive::{Archive, ArchiveError, MemoryArchive, Record, expand};
pub use config::{ConfigError, parse_params};
pub use conversation::{Conversation, Envelope, Exchange, Format, ParseError};
pub use message::{Message, MessageId, Role, ToolCall, ToolResult};
pub use pipeline::{BudgetReport, Pipeline, Report, RungReport, Stage, StageReport, StageStatus};
pub use registry::StrategyFactory;
pub use strategy::{
    AsyncStrategy, BuiltStrategy, StageContext, StageOutcome, Strategy, StrategyError,
};
pub use summarize::{
    Backend, BackendFactory, Summarize, SummarizeAsync, SummarizeError, SummaryKind, SummaryRequest,
};
pub use tokens::{Heuristic, TokenCounter};
pub use validate::{Violation, ViolationKind, validate};

#[doc(hidden)]
pub use inventory;
#[doc(hidden)]
pub use serde_json;
