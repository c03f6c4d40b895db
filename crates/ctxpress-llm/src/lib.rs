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
//!
//! Every request is redacted here, in the one place all callers (the
//! summarizer, the compactor's chunk-and-fold and re-summarization, the
//! ladder) go through: secrets in the prompt, the context and the system
//! message become `[REDACTED:kind]` before the body is built. An API key is
//! never sent over plain `http://` off loopback without `allow_insecure_http`,
//! and neither the key nor a base URL's `user:pass@` appears in any error or
//! `Debug` output (see [`LlmConfig`]).

mod backend;
mod config;
mod http;
mod prompt;

pub use backend::{ANTHROPIC_VERSION, LlmBackend, OpenAiBackend, parse_anthropic, parse_openai};
pub use config::{
    ENV_MODEL, ENV_URL, HYBRID_ASSISTANT, HYBRID_USER, LlmConfig, LlmConfigError, MaxTokens,
    PromptStyle, Prompts, Provider, Resolved, display_url, is_loopback_host,
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
