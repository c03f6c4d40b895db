//! Token counting: a fast heuristic and exact BPE counts for OpenAI encodings.

use crate::message::Message;
use std::sync::Arc;

/// Counts tokens of a text.
pub trait TokenCounter: Send + Sync {
    /// Name, e.g. `heuristic` or `o200k_base`.
    fn name(&self) -> &str;
    /// Tokens in `text`.
    fn count(&self, text: &str) -> usize;
}

/// About four bytes a token (spec 003), never zero for non-empty text. Fast and
/// good enough to steer budgets; use [`Bpe`] for exact figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Heuristic;

impl TokenCounter for Heuristic {
    fn name(&self) -> &str {
        "heuristic"
    }
    fn count(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }
}

/// Exact BPE counts with an embedded vocabulary (no download at run time).
pub struct Bpe {
    name: &'static str,
    enc: &'static tiktoken::CoreBpe,
}

impl Bpe {
    /// `o200k_base` (GPT-4o and later) or `cl100k_base` (GPT-4, GPT-3.5).
    pub fn new(encoding: &str) -> Option<Self> {
        let name = match encoding {
            "o200k_base" => "o200k_base",
            "cl100k_base" => "cl100k_base",
            _ => return None,
        };
        tiktoken::get_encoding(name).map(|enc| Bpe { name, enc })
    }
}

impl TokenCounter for Bpe {
    fn name(&self) -> &str {
        self.name
    }
    fn count(&self, text: &str) -> usize {
        self.enc.count(text)
    }
}

/// A counter by name: `heuristic`, `o200k_base` or `cl100k_base`.
pub fn counter_by_name(name: &str) -> Option<Arc<dyn TokenCounter>> {
    match name {
        "heuristic" => Some(Arc::new(Heuristic)),
        other => Bpe::new(other).map(|b| Arc::new(b) as Arc<dyn TokenCounter>),
    }
}

/// Per-message framing tokens a provider adds (role markers).
pub const MESSAGE_OVERHEAD: usize = 4;

/// Tokens of one message: text, tool calls (name and arguments) and tool results,
/// plus framing.
pub fn count_message(counter: &dyn TokenCounter, m: &Message) -> usize {
    let mut n = MESSAGE_OVERHEAD + counter.count(&m.text());
    for c in m.tool_calls() {
        n += counter.count(&c.name) + counter.count(&c.arguments);
    }
    if !matches!(m.role(), crate::Role::Tool | crate::Role::Function) {
        for r in m.tool_results() {
            n += counter.count(&r.text);
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpe_counts_match_known_values() {
        let o = Bpe::new("o200k_base").unwrap();
        assert_eq!(o.count("hello world"), 2);
        let c = Bpe::new("cl100k_base").unwrap();
        assert_eq!(c.count("hello world"), 2);
        assert!(Bpe::new("nope").is_none());
    }

    #[test]
    fn heuristic_is_quarter_bytes() {
        assert_eq!(Heuristic.count(""), 0);
        assert_eq!(Heuristic.count("abcde"), 2);
    }
}
