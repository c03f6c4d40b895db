//! Summarizer backends: a shared service looked up by name, so strategy crates
//! (summarizer, tool compressor, compactor) never depend on each other.

use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;

/// What kind of text is being summarized; backends pick prompts and budgets by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SummaryKind {
    /// An old user message.
    User,
    /// An old assistant message.
    Assistant,
    /// A tool result.
    Tool,
    /// A chunk of several messages (compaction).
    Chunk,
}

/// One summarization request.
#[derive(Debug, Clone)]
pub struct SummaryRequest<'a> {
    /// The text to summarize.
    pub text: &'a str,
    /// What the text is.
    pub kind: SummaryKind,
    /// Target length in characters, if the caller has one.
    pub budget_chars: Option<usize>,
    /// Accumulated context from earlier chunks (chunk-and-fold), if any.
    pub context: Option<&'a str>,
}

/// Why a backend produced no usable summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizeError {
    /// The request timed out.
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// The server answered with an HTTP error status.
    #[error("HTTP status {0}")]
    Http(u16),
    /// Connection or transport failure.
    #[error("transport error: {0}")]
    Transport(String),
    /// The response body could not be understood.
    #[error("unparsable response: {0}")]
    BadResponse(String),
    /// The answer was empty or not shorter than the input.
    #[error("rejected: {0}")]
    Rejected(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl SummarizeError {
    /// Short stable name of the cause, for counting fallbacks by cause.
    pub fn cause(&self) -> &'static str {
        match self {
            SummarizeError::Timeout(_) => "timeout",
            SummarizeError::Http(_) => "http",
            SummarizeError::Transport(_) => "transport",
            SummarizeError::BadResponse(_) => "bad_response",
            SummarizeError::Rejected(_) => "rejected",
            SummarizeError::Other(_) => "other",
        }
    }
}

/// A synchronous summarizer backend (e.g. deterministic extractive).
pub trait Summarize: Send + Sync {
    /// Summarize one text.
    fn summarize(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError>;
}

/// An asynchronous summarizer backend (e.g. an LLM over HTTP). Every
/// [`Summarize`] is also a `SummarizeAsync`.
#[async_trait]
pub trait SummarizeAsync: Send + Sync {
    /// Summarize one text.
    async fn summarize_async(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError>;
}

#[async_trait]
impl<T: Summarize + ?Sized> SummarizeAsync for T {
    async fn summarize_async(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        self.summarize(req)
    }
}

/// A built backend.
#[derive(Clone)]
pub enum Backend {
    /// Synchronous backend.
    Sync(Arc<dyn Summarize>),
    /// Asynchronous backend.
    Async(Arc<dyn SummarizeAsync>),
}

impl Backend {
    /// The backend as an async one (sync backends are wrapped).
    pub fn as_async(&self) -> Arc<dyn SummarizeAsync> {
        match self {
            Backend::Sync(s) => Arc::new(SyncAsAsync(s.clone())),
            Backend::Async(a) => a.clone(),
        }
    }
}

struct SyncAsAsync(Arc<dyn Summarize>);

#[async_trait]
impl SummarizeAsync for SyncAsAsync {
    async fn summarize_async(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        self.0.summarize(req)
    }
}

/// Registration of a summarizer backend, submitted with `inventory::submit!`.
pub struct BackendFactory {
    /// Unique name, e.g. `extractive` or `openai`.
    pub name: &'static str,
    /// One-line description.
    pub summary: &'static str,
    /// Builds the backend from its JSON parameters.
    pub build: fn(&Value) -> Result<Backend, crate::ConfigError>,
}

inventory::collect!(BackendFactory);

/// Every registered backend, sorted by name.
pub fn backends() -> Vec<&'static BackendFactory> {
    let mut v: Vec<_> = inventory::iter::<BackendFactory>.into_iter().collect();
    v.sort_by_key(|f| f.name);
    v
}

/// Build the backend registered under `name`.
pub fn build_backend(name: &str, params: &Value) -> Result<Backend, crate::ConfigError> {
    let all = backends();
    match all.iter().find(|f| f.name == name) {
        Some(f) => (f.build)(params),
        None => Err(crate::ConfigError::UnknownBackend {
            name: name.to_string(),
            suggestion: crate::config::closest(name, all.iter().map(|f| f.name)),
        }),
    }
}
