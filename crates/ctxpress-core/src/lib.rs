//! Core of ctxpress: the message model, conversation view, annotations, strategy
//! contract, registry, invariant checker, token counting, provenance and archive
//! traits, and the shared services strategies look up by name (summarizer
//! backends, secret detector, tool dialect table).
//!
//! Strategy crates depend on this crate only; see ARCHITECTURE.md.

pub mod annotate;
pub mod archive;
pub mod canonical;
pub mod compaction;
pub mod config;
pub mod conversation;
pub mod dialect;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod handle;
pub mod ledger;
pub mod message;
pub mod pipeline;
pub mod registry;
pub mod secrets;
pub mod strategy;
pub mod summarize;
pub mod text;
pub mod tokens;
pub mod traffic;
pub mod validate;
pub mod window;

pub use annotate::{Annotations, Classification, Decision, DecisionRule, DupMark, Reason, Tier};
pub use archive::{Archive, ArchiveError, MemoryArchive, Record, expand};
pub use config::{ConfigError, parse_params};
pub use conversation::{Conversation, Envelope, Exchange, Format, ParseError};
pub use message::{Message, MessageId, Role, ToolCall, ToolResult};
pub use pipeline::{Pipeline, Report, Stage, StageReport, StageStatus};
pub use registry::StrategyFactory;
pub use strategy::{
    AsyncStrategy, BuiltStrategy, StageContext, StageOutcome, Strategy, StrategyError,
};
pub use summarize::{
    Backend, BackendFactory, Summarize, SummarizeAsync, SummarizeError, SummaryKind, SummaryRequest,
};
pub use tokens::{Heuristic, TokenCounter};
pub use validate::{Violation, ViolationKind, validate};
pub use window::{BudgetReport, Limits, RungReport, WindowConfig};

#[doc(hidden)]
pub use inventory;
#[doc(hidden)]
pub use serde_json;
