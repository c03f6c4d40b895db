//! ctxpress strategy crate `classifier`: classifies message text into tiers
//! (T0 with hard and soft reasons, T2, T3) and applies the ordered preservation
//! rules of spec 000 section 1 / spec 001, recording the outcome as message
//! annotations for later stages.
//!
//! Used alone, it changes no text: it writes each message's classification and
//! decision into the annotations, for the stages after it.
//!
//! ```rust
//! use ctxpress_classifier::{Classifier, ClassifierConfig};
//! use ctxpress_core::{Conversation, Decision, Pipeline, StageContext};
//! use serde_json::json;
//!
//! let prose = "We talked about the release plan and agreed to ship the new parser next week, \
//!              after the team has reviewed the migration notes and the changelog.";
//! let text = json!([
//!     {"role": "system", "content": "You are a helpful assistant."},
//!     {"role": "user", "content": prose},
//!     {"role": "assistant", "content": "Noted."},
//! ])
//! .to_string();
//! let mut conv = Conversation::parse(&text)?;
//! let cfg = ClassifierConfig { recency_window: 0, ..ClassifierConfig::default() };
//! let mut pipeline = Pipeline::new(Vec::new());
//! pipeline.push(Box::new(Classifier::new(cfg)));
//! pipeline.run(&mut conv, &StageContext::default());
//! let decision = |i: usize| {
//!     let a = conv.ann(conv.messages[i].id());
//!     a.and_then(|a| a.decision).map(|(d, _)| d)
//! };
//! assert_eq!(decision(0), Some(Decision::Preserve)); // a preserved role
//! assert_eq!(decision(1), Some(Decision::Compress)); // plain prose
//! assert_eq!(decision(2), Some(Decision::Preserve)); // too short
//! assert_eq!(conv.to_json_string(), text); // nothing rewritten
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - [`classify()`]: one text to a [`Classification`](ctxpress_core::Classification).
//! - [`decide`]: every message of a conversation to a [`MessageDecision`].
//! - [`Classifier`]: the strategy, registered as `classifier`.

mod classify;
mod masks;
#[cfg(test)]
mod reference;
mod rules;

pub use classify::{T3_MIN_WORDS, classify, is_valid_json, prose_chars};
pub use rules::{Classifier, ClassifierConfig, MessageDecision, decide, decide_lazy, message_text};
