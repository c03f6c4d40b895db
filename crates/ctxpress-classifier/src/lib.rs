//! ctxpress strategy crate `classifier`: classifies message text into tiers
//! (T0 with hard and soft reasons, T2, T3) and applies the ordered preservation
//! rules of spec 000 section 1 / spec 001, recording the outcome as message
//! annotations for later stages.
//!
//! - [`classify`]: one text to a [`Classification`](ctxpress_core::Classification).
//! - [`decide`]: every message of a conversation to a [`MessageDecision`].
//! - [`Classifier`]: the strategy, registered as `classifier`.

mod classify;
mod masks;
#[cfg(test)]
mod reference;
mod rules;

pub use classify::{T3_MIN_WORDS, classify, is_valid_json, prose_chars};
pub use rules::{Classifier, ClassifierConfig, MessageDecision, decide, decide_lazy, message_text};
