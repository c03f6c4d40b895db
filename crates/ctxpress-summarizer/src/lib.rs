//! ctxpress strategy crate: the `summarizer` stage and the `extractive` backend.
//!
//! - [`text`]: deterministic extractive summaries (spec 000 sections 3-5 and
//!   the output format): sentence splitting, scoring, packing, entities,
//!   structured tool output, code-split.
//! - [`Extractive`]: the deterministic backend, registered as `extractive`.
//! - [`with_fallback`]: accept a primary (LLM) summary only when it is
//!   non-empty and strictly shorter than its input, else summarize
//!   deterministically.
//! - [`Summarizer`]: the strategy, registered as `summarizer`; it acts on the
//!   decisions the classifier wrote into the annotations.

pub mod text;

pub use text::{
    Budget, Scored, Sentence, code_split, extract_entities, format_code_split, format_summary,
    is_structured, pack, score_all, score_sentence, sentences, split_paragraphs, split_sentences,
    summarize, summarize_structured, summarize_text, summary_id,
};

pub mod backend;
pub mod bounded;
pub mod strategy;

pub use backend::{
    Extractive, ExtractiveConfig, FallbackSummary, SummarySource, accept, with_fallback,
};
pub use bounded::run_bounded;
pub use strategy::{AsyncSummarizer, NO_CLASSIFICATION, Summarizer, SummarizerConfig};
