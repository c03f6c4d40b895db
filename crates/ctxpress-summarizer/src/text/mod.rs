//! Deterministic text functions of the extractive summarizer (spec 000 section 4):
//! paragraph and sentence splitting, sentence scoring, budget packing, entity
//! extraction, structured tool output, code-split and the output formats.
//!
//! - [`sentences`](mod@sentences): paragraphs and sentences.
//! - [`scoring`]: sentence weights, packing, the extractive summary.
//! - [`entities`]: key entities in priority order.
//! - [`structured`]: structured tool output.
//! - [`formats`]: `[summary: ...]`, code-split, the bare summary of a text.
//! - `words`: the word patterns (identifiers, vowelless abbreviations,
//!   status words) in one pass over the bytes.
//!
//! What a code fence is, and which words are identifiers, paths and
//! versions, is [`ctxpress_text`]'s answer, shared with the classifier.

pub mod entities;
pub mod formats;
pub mod scoring;
pub mod sentences;
pub mod structured;
mod words;

pub use entities::{extract_entities, extract_entities_where};
pub use formats::{code_split, format_code_split, format_summary, summarize_text, summary_id};
pub use scoring::{JOIN, Scored, pack, score_all, score_sentence, summarize, truncate_words};
pub use sentences::{Sentence, sentences, split_paragraphs, split_sentences};
pub use structured::{is_structured, summarize_structured};

/// Summary budget in characters, chosen by input length (spec 000: 200 chars
/// under 600 chars of input, else 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Budget {
    /// Inputs shorter than this many characters get the short budget.
    pub short_threshold: usize,
    /// Budget for short inputs.
    pub short: usize,
    /// Budget for long inputs.
    pub long: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            short_threshold: 600,
            short: 200,
            long: 400,
        }
    }
}

impl Budget {
    /// The budget for a text of `chars` characters.
    pub fn for_len(&self, chars: usize) -> usize {
        if chars < self.short_threshold {
            self.short
        } else {
            self.long
        }
    }
}

/// Characters of `s`.
pub(crate) fn chars(s: &str) -> usize {
    s.chars().count()
}
