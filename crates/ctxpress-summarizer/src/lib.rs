//! ctxpress strategy crate: the `summarizer` stage and the `extractive` backend.
//!
//! Used alone, it summarizes the messages whose annotations say `Compress`
//! (the classifier writes them in a full pipeline; here they are set by hand):
//!
//! ```rust
//! use ctxpress_core::{Conversation, Decision, DecisionRule, Pipeline, StageContext};
//! use serde_json::json;
//! use ctxpress_summarizer::{Summarizer, SummarizerConfig};
//!
//! let prose = "We looked at how the queue hands work from the primary loop to the \
//!              secondary loop. We decided to keep the lock-free ring buffer for now, \
//!              because it measured well under load. The alternative needs a rewrite of \
//!              the scheduler, which nobody wants to start this month. We will revisit \
//!              the question after the release, once the benchmarks are automated.";
//! let text = json!([
//!     {"role": "user", "content": prose},
//!     {"role": "assistant", "content": "Agreed."},
//! ])
//! .to_string();
//! let mut conv = Conversation::parse(&text)?;
//! let id = conv.messages[0].id().clone();
//! conv.ann_mut(&id).decision = Some((Decision::Compress, DecisionRule::Compressible));
//! let mut pipeline = Pipeline::new(Vec::new());
//! pipeline.push(Box::new(Summarizer::new(SummarizerConfig::default())));
//! let report = pipeline.run(&mut conv, &StageContext::default());
//! assert!(conv.messages[0].text().starts_with("[summary:"), "{}", conv.messages[0].text());
//! assert_eq!(conv.messages[1].text(), "Agreed.");
//! assert!(report.chars_after < report.chars_before);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
    Budget, Scored, Sentence, code_split, extract_entities, extract_entities_where,
    format_code_split, format_summary, is_structured, pack, score_all, score_sentence, sentences,
    split_paragraphs, split_sentences, summarize, summarize_structured, summarize_text, summary_id,
};

pub mod backend;
pub mod bounded;
pub mod strategy;

pub use backend::{
    Extractive, ExtractiveConfig, FallbackSummary, SummarySource, accept, with_fallback,
};
pub use bounded::run_bounded;
pub use strategy::{AsyncSummarizer, NO_CLASSIFICATION, Summarizer, SummarizerConfig};
