//! LLM summarizer backends for ctxpress: an OpenAI-compatible chat-completions
//! client (OpenAI, vLLM, llama.cpp server, Ollama, ...) and an Anthropic
//! Messages client, both implementing [`ctxpress_core::SummarizeAsync`].
//!
//! They register in core's backend registry as `openai` and `anthropic`, so a
//! strategy builds one with `ctxpress_core::summarize::build_backend("openai",
//! &params)` without depending on this crate. Each request has a timeout;
//! 429, 5xx and connection errors are retried with exponential backoff and
//! jitter; other 4xx, timeouts and unparsable bodies are not. Accepting or
//! rejecting an answer against the input (and falling back) is the caller's
//! job; this crate only strips a "Summary:"-style preamble and reports an
//! empty answer as [`ctxpress_core::SummarizeError::Rejected`].

mod backend;
mod config;
mod http;
mod prompt;

pub use backend::{ANTHROPIC_VERSION, LlmBackend, OpenAiBackend, parse_anthropic, parse_openai};
pub use config::{
    ENV_MODEL, ENV_URL, HYBRID_ASSISTANT, HYBRID_USER, LlmConfig, LlmConfigError, MaxTokens,
    PromptStyle, Prompts, Provider, Resolved,
};
pub use http::Stats;
pub use prompt::{budget_chars, clean_answer, default_budget, max_tokens, render, user_prompt};

use ctxpress_core::BackendFactory;

fn build_openai(
    params: &serde_json::Value,
) -> Result<ctxpress_core::Backend, ctxpress_core::ConfigError> {
    backend::build(Provider::OpenAi, params)
}

fn build_anthropic(
    params: &serde_json::Value,
) -> Result<ctxpress_core::Backend, ctxpress_core::ConfigError> {
    backend::build(Provider::Anthropic, params)
}

ctxpress_core::inventory::submit! {
    BackendFactory {
        name: "openai",
        summary: "OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp server, Ollama)",
        build: build_openai,
    }
}

ctxpress_core::inventory::submit! {
    BackendFactory {
        name: "anthropic",
        summary: "Anthropic Messages API",
        build: build_anthropic,
    }
}
