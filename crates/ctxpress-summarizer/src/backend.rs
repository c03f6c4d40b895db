//! The deterministic `extractive` backend and the LLM-with-fallback path.

use crate::text::{Budget, summarize_text};
use ctxpress_core::summarize::{
    Backend, BackendFactory, Summarize, SummarizeAsync, SummarizeError, SummaryRequest,
};
use ctxpress_core::{ConfigError, parse_params};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// Parameters of the `extractive` backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtractiveConfig {
    /// Inputs shorter than this many characters get `short_budget`.
    pub short_threshold: usize,
    /// Summary budget in characters for short inputs.
    pub short_budget: usize,
    /// Summary budget in characters for long inputs.
    pub long_budget: usize,
}

impl Default for ExtractiveConfig {
    fn default() -> Self {
        let b = Budget::default();
        ExtractiveConfig {
            short_threshold: b.short_threshold,
            short_budget: b.short,
            long_budget: b.long,
        }
    }
}

/// The deterministic extractive summarizer as a core [`Summarize`] backend.
///
/// It returns the bare summary text (no `[summary: ...]` brackets); a request's
/// `budget_chars` overrides the length-based budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extractive {
    /// Budget by input length.
    pub budget: Budget,
}

impl Extractive {
    /// A backend with the given budgets.
    pub fn new(budget: Budget) -> Self {
        Extractive { budget }
    }

    /// Build from the backend's JSON parameters (unknown fields rejected).
    pub fn from_params(params: &Value) -> Result<Self, ConfigError> {
        let c: ExtractiveConfig = parse_params("extractive", params)?;
        Ok(Extractive::new(Budget {
            short_threshold: c.short_threshold,
            short: c.short_budget,
            long: c.long_budget,
        }))
    }

    /// The deterministic summary of `req` (never fails, never longer than the
    /// trimmed input).
    pub fn summarize_req(&self, req: &SummaryRequest<'_>) -> String {
        match req.budget_chars {
            // With a fixed budget, `summarize_text` already gives structured
            // tool output its structured summary (when that is shorter).
            Some(b) => summarize_text(
                req.text,
                &Budget {
                    short_threshold: 0,
                    short: b,
                    long: b,
                },
            ),
            None => summarize_text(req.text, &self.budget),
        }
    }
}

impl Summarize for Extractive {
    fn summarize(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        Ok(self.summarize_req(req))
    }
}

fn build_extractive(params: &Value) -> Result<Backend, ConfigError> {
    Ok(Backend::Sync(Arc::new(Extractive::from_params(params)?)))
}

ctxpress_core::inventory::submit! {
    BackendFactory {
        name: "extractive",
        summary: "deterministic extractive summaries (sentence scoring, entities, structured output)",
        build: build_extractive,
    }
}

/// Which path produced a summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummarySource {
    /// The primary backend's answer was accepted.
    Primary,
    /// The deterministic summary was used; `cause` is
    /// [`SummarizeError::cause`] of why the primary's answer was not.
    Fallback {
        /// Short stable cause name (`timeout`, `http`, `rejected`, ...).
        cause: &'static str,
        /// The full error, for notes.
        error: SummarizeError,
    },
}

/// A summary and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackSummary {
    /// The bare summary text.
    pub text: String,
    /// Which path produced it.
    pub source: SummarySource,
}

impl FallbackSummary {
    /// The fallback cause, if the deterministic path was taken.
    pub fn cause(&self) -> Option<&'static str> {
        match &self.source {
            SummarySource::Primary => None,
            SummarySource::Fallback { cause, .. } => Some(cause),
        }
    }
}

/// Check a primary answer: accepted only when non-empty and strictly shorter
/// (in characters) than the input; returned trimmed.
pub fn accept(input: &str, answer: &str) -> Result<String, SummarizeError> {
    let a = answer.trim();
    if a.is_empty() {
        return Err(SummarizeError::Rejected("empty answer".into()));
    }
    let (al, il) = (a.chars().count(), input.chars().count());
    if al >= il {
        return Err(SummarizeError::Rejected(format!(
            "answer of {al} chars is not shorter than the input of {il}"
        )));
    }
    Ok(a.to_string())
}

/// Ask `primary` for a summary of `req`; accept its text only if non-empty and
/// strictly shorter than `req.text`, else (and on any error) use the
/// deterministic summary of `fallback`. Reports which path was taken and why.
pub async fn with_fallback(
    primary: &dyn SummarizeAsync,
    req: &SummaryRequest<'_>,
    fallback: &Extractive,
) -> FallbackSummary {
    let result = primary
        .summarize_async(req)
        .await
        .and_then(|a| accept(req.text, &a));
    match result {
        Ok(text) => FallbackSummary {
            text,
            source: SummarySource::Primary,
        },
        Err(error) => FallbackSummary {
            text: fallback.summarize_req(req),
            source: SummarySource::Fallback {
                cause: error.cause(),
                error,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_core::summarize::SummaryKind;
    use serde_json::json;

    #[test]
    fn registered_and_params_checked() {
        let b = ctxpress_core::summarize::build_backend("extractive", &json!({})).unwrap();
        assert!(matches!(b, Backend::Sync(_)));
        let e = ctxpress_core::summarize::build_backend("extractive", &json!({"short_budgt": 1}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("short_budget"), "{e}");
        let e = ctxpress_core::summarize::build_backend("extractiv", &json!({}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("did you mean `extractive`"), "{e}");
    }

    #[test]
    fn accept_rules() {
        assert_eq!(accept("abcdef", " abc "), Ok("abc".into()));
        assert_eq!(accept("abc", "   ").unwrap_err().cause(), "rejected");
        assert_eq!(accept("abc", "abc").unwrap_err().cause(), "rejected");
        // chars, not bytes: four 2-byte chars are shorter than five ASCII ones.
        assert!(accept("abcde", "éééé").is_ok());
    }

    #[test]
    fn budget_override() {
        let text = "The parser reads src/lib.rs and calls parseHeader twice. \
                    It then validates every field. The result is cached for 10 seconds.";
        let ex = Extractive::default();
        let req = SummaryRequest {
            text,
            kind: SummaryKind::Assistant,
            budget_chars: Some(60),
            context: None,
        };
        let s = ex.summarize_req(&req);
        assert!(s.chars().count() <= 60, "{s}");
        assert!(s.contains("parseHeader"), "{s}");
    }
}
