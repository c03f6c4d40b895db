//! The client against a real OpenAI-compatible model server (llama.cpp server
//! with SmolLM2-135M-Instruct, started by `scripts/llm-server.sh start PORT`).
//! `#[ignore]`d by default; run with the server up, e.g.
//! `CTXPRESS_LLM_URL=$(scripts/llm-server.sh url) cargo test -p ctxpress-llm --test it -- --ignored real_server::`
//! (`.ci/run` does).

use crate::common;

use common::{Reply, Stub};
use ctxpress_core::{SummarizeAsync, SummarizeError, SummaryKind, SummaryRequest};
use ctxpress_llm::{ENV_URL, LlmBackend, LlmConfig};
use serde_json::Value;
use std::io::BufRead;
use std::path::PathBuf;

/// The server's URL; these tests are `#[ignore]`d and run (by `.ci/run`, with
/// `--ignored`) only where a server is up, so a missing URL is a failure.
fn server_url() -> Option<String> {
    match std::env::var(ENV_URL) {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => panic!("{ENV_URL} is not set: start scripts/llm-server.sh and set it"),
    }
}

/// A config for the real server: generous timeout (2 cores, shared), no retries
/// unless a test asks for them.
fn config(url: &str) -> LlmConfig {
    LlmConfig {
        base_url: Some(url.to_string()),
        timeout_ms: 120_000,
        max_retries: 0,
        backoff_ms: 50,
        ..LlmConfig::default()
    }
}

fn corpus_file() -> PathBuf {
    std::env::var_os("CTXPRESS_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"))
        .join("coding_agent_sessions.jsonl")
}

/// A long assistant message: the first one of 1500-2500 chars in the corpus
/// (read at test time, never copied), or a made-up one when the corpus is absent.
fn long_assistant_message() -> String {
    if let Ok(f) = std::fs::File::open(corpus_file()) {
        for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let msgs = v["messages"].as_array().cloned().unwrap_or_default();
            for m in msgs {
                if m["role"] == "assistant"
                    && let Some(c) = m["content"].as_str()
                    && (1500..2500).contains(&c.chars().count())
                {
                    return c.to_string();
                }
            }
        }
    }
    let para = "I changed `src/server/routes.rs` so that `handle_upload` validates the \
content length before reading the body; requests over 10 MB now get HTTP 413 instead of \
timing out after 30 s. The integration test `upload_too_large` covers it and passes. ";
    para.repeat(8)
}

/// Every test sends the same request, so the server's prefix cache makes the
/// later ones cheap; a 300-char budget keeps `max_tokens` at 116.
fn req(text: &str) -> SummaryRequest<'_> {
    SummaryRequest {
        text,
        kind: SummaryKind::Assistant,
        budget_chars: Some(300),
        context: None,
    }
}

#[tokio::test]
#[ignore = "needs a local model server: CTXPRESS_LLM_URL (scripts/llm-server.sh; .ci/run runs it)"]
async fn long_assistant_message_gives_a_well_formed_summary() {
    let Some(url) = server_url() else { return };
    let text = long_assistant_message();
    let b = LlmBackend::openai(config(&url)).unwrap();
    let out = b.summarize_async(&req(&text)).await.unwrap();
    assert!(!out.is_empty());
    assert_eq!(out.trim(), out, "surrounding whitespace left");
    assert!(!out.to_lowercase().starts_with("summary:"), "{out}");
    assert!(!out.contains("<|im_"), "chat-template tokens leaked: {out}");
    // At most max_tokens (116) tokens came back: far below 116 * 16 chars.
    assert!(out.chars().count() < 1856, "{} chars", out.chars().count());
    assert!(out.chars().count() < text.chars().count());
    let s = b.stats();
    assert_eq!((s.attempts, s.failures), (1, 0));
    println!(
        "input {} chars -> summary {} chars: {out}",
        text.chars().count(),
        out.chars().count()
    );
}

#[tokio::test]
#[ignore = "needs a local model server: CTXPRESS_LLM_URL (scripts/llm-server.sh; .ci/run runs it)"]
async fn temperature_zero_without_prompt_cache_is_repeatable() {
    let Some(url) = server_url() else { return };
    let text = long_assistant_message();
    // Record what goes over the wire on the way to the real server.
    let real = url.clone();
    let proxy = Stub::start(move |_, _| Reply::Forward(real.clone())).await;
    let b = LlmBackend::openai(LlmConfig {
        base_url: Some(proxy.base_url()),
        ..config(&url)
    })
    .unwrap();
    let r = req(&text);
    let a = b.summarize_async(&r).await.unwrap();
    let c = b.summarize_async(&r).await.unwrap();
    assert_eq!(a, c, "temperature 0 must be deterministic");
    let seen = proxy.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.body["temperature"], 0);
        assert_eq!(s.body["cache_prompt"], false);
        assert_eq!(s.body["max_tokens"], 116);
    }
}

#[tokio::test]
#[ignore = "needs a local model server: CTXPRESS_LLM_URL (scripts/llm-server.sh; .ci/run runs it)"]
async fn retry_path_recovers_against_the_real_server() {
    let Some(url) = server_url() else { return };
    let real = url.clone();
    // The first attempt fails with 503 at the proxy, the retry reaches the model.
    let proxy = Stub::start(move |n, _| {
        if n == 0 {
            Reply::raw(503, "{}")
        } else {
            Reply::Forward(real.clone())
        }
    })
    .await;
    let b = LlmBackend::openai(LlmConfig {
        base_url: Some(proxy.base_url()),
        max_retries: 2,
        ..config(&url)
    })
    .unwrap();
    let text = long_assistant_message();
    let out = b.summarize_async(&req(&text)).await.unwrap();
    assert!(!out.is_empty());
    assert_eq!(proxy.hits(), 2);
    let s = b.stats();
    assert_eq!((s.attempts, s.retries, s.failures), (2, 1, 0));
}

#[tokio::test]
#[ignore = "needs a local model server: CTXPRESS_LLM_URL (scripts/llm-server.sh; .ci/run runs it)"]
async fn real_server_timeout_is_reported_and_not_retried() {
    let Some(url) = server_url() else { return };
    let b = LlmBackend::openai(LlmConfig {
        timeout_ms: 30,
        max_retries: 2,
        ..config(&url)
    })
    .unwrap();
    // A fresh text, so that no cached prefix lets the server answer in time.
    let text = "Explain in detail why the integration test upload_too_large in \
src/server/routes.rs fails with HTTP 413 after 30 s on CI but passes locally."
        .repeat(3);
    let e = b.summarize_async(&req(&text)).await.unwrap_err();
    assert_eq!(e, SummarizeError::Timeout(30));
    assert_eq!(b.stats().attempts, 1);
}

#[tokio::test]
#[ignore = "needs a local model server: CTXPRESS_LLM_URL (scripts/llm-server.sh; .ci/run runs it)"]
async fn unknown_route_is_a_client_error_without_retry() {
    let Some(url) = server_url() else { return };
    let b = LlmBackend::openai(LlmConfig {
        base_url: Some(format!("{}/no-such-route", url.trim_end_matches('/'))),
        max_retries: 2,
        ..config(&url)
    })
    .unwrap();
    let e = b.summarize_async(&req("short")).await.unwrap_err();
    assert!(
        matches!(e, SummarizeError::Http(s) if (400..500).contains(&s)),
        "{e:?}"
    );
    assert_eq!(b.stats().attempts, 1);
}
