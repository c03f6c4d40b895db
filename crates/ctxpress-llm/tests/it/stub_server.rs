//! The client against a local stub server: success, timeout, retries with
//! backoff, no retry on 4xx, unparsable answers, counted attempts.

use crate::common;

use common::{Reply, Stub};
use ctxpress_core::{Backend, SummarizeAsync, SummarizeError, SummaryKind, SummaryRequest};
use ctxpress_llm::{HYBRID_ASSISTANT, HYBRID_USER, LlmBackend, LlmConfig, PromptStyle};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TEXT: &str = "I refactored src/auth/jwt.ts so that jwt.verify is called once per request; \
the middleware now caches req.user for 3.5 s. All 42 tests pass. The remaining problem is \
the TokenExpiredError thrown by refreshSession when the clock skew exceeds 30 s.";

fn req(kind: SummaryKind) -> SummaryRequest<'static> {
    SummaryRequest {
        text: TEXT,
        kind,
        budget_chars: Some(120),
        context: None,
    }
}

fn config(stub: &Stub) -> LlmConfig {
    LlmConfig {
        base_url: Some(stub.base_url()),
        model: Some("stub-model".into()),
        api_key: Some("sk-test".into()),
        timeout_ms: 2_000,
        max_retries: 2,
        backoff_ms: 50,
        max_backoff_ms: 2_000,
        ..LlmConfig::default()
    }
}

fn client(stub: &Stub) -> LlmBackend {
    LlmBackend::openai(config(stub)).unwrap()
}

#[tokio::test]
async fn ok_answer_is_cleaned_and_request_is_well_formed() {
    let stub =
        Stub::start(|_, _| Reply::chat("  Summary: jwt.verify cached; 42 tests pass.\n")).await;
    let b = client(&stub);
    let out = b
        .summarize_async(&req(SummaryKind::Assistant))
        .await
        .unwrap();
    assert_eq!(out, "jwt.verify cached; 42 tests pass.");
    assert_eq!(stub.hits(), 1);
    let seen = &stub.seen()[0];
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(seen.body["model"], "stub-model");
    assert_eq!(seen.body["temperature"], 0);
    assert_eq!(seen.body["cache_prompt"], false);
    assert_eq!(seen.body["max_tokens"], 56);
    let prompt = seen.body["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains(TEXT));
    assert!(prompt.contains("at most 120 characters"));
    let s = b.stats();
    assert_eq!(
        (s.requests, s.attempts, s.retries, s.failures),
        (1, 1, 0, 0)
    );
}

#[tokio::test]
async fn max_tokens_and_prompt_follow_the_kind() {
    let stub = Stub::start(|_, _| Reply::chat("ok")).await;
    let b = client(&stub);
    for kind in [SummaryKind::User, SummaryKind::Assistant, SummaryKind::Tool] {
        let r = SummaryRequest {
            budget_chars: None,
            ..req(kind)
        };
        b.summarize_async(&r).await.unwrap();
    }
    let seen = stub.seen();
    let prompts: Vec<&str> = seen
        .iter()
        .map(|s| s.body["messages"][1]["content"].as_str().unwrap())
        .collect();
    assert!(prompts[0].starts_with("Compress this user message"));
    assert!(prompts[1].starts_with("Compress this assistant response"));
    assert!(prompts[2].starts_with("Compress this tool output"));
    // No budget given: under half the input (TEXT is 246 chars), so 123.
    assert!(
        prompts[0].contains("at most 123 characters"),
        "{}",
        prompts[0]
    );
    assert_eq!(seen[0].body["max_tokens"], 57);
}

#[tokio::test]
async fn slow_server_times_out_without_retry() {
    let stub = Stub::start(|_, _| Reply::chat("late").delayed(Duration::from_secs(3))).await;
    let b = LlmBackend::openai(LlmConfig {
        timeout_ms: 200,
        ..config(&stub)
    })
    .unwrap();
    let t = Instant::now();
    let e = b
        .summarize_async(&req(SummaryKind::Assistant))
        .await
        .unwrap_err();
    assert_eq!(e, SummarizeError::Timeout(200));
    assert!(
        t.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(stub.hits(), 1);
    assert_eq!(b.stats().failures, 1);
}

#[tokio::test]
async fn server_error_then_ok_is_retried() {
    let stub = Stub::start(|n, _| {
        if n == 0 {
            Reply::raw(500, "{\"error\": \"boom\"}")
        } else {
            Reply::chat("recovered")
        }
    })
    .await;
    let b = client(&stub);
    let out = b
        .summarize_async(&req(SummaryKind::Assistant))
        .await
        .unwrap();
    assert_eq!(out, "recovered");
    assert_eq!(stub.hits(), 2);
    let s = b.stats();
    assert_eq!((s.attempts, s.retries, s.failures), (2, 1, 0));
}

#[tokio::test]
async fn persistent_5xx_gives_up_after_max_retries() {
    let stub = Stub::start(|_, _| Reply::raw(503, "unavailable")).await;
    let b = client(&stub);
    let e = b
        .summarize_async(&req(SummaryKind::User))
        .await
        .unwrap_err();
    assert_eq!(e, SummarizeError::Http(503));
    assert_eq!(e.cause(), "http");
    assert_eq!(stub.hits(), 3);
    let s = b.stats();
    assert_eq!((s.attempts, s.retries, s.failures), (3, 2, 1));
}

#[tokio::test]
async fn rate_limit_backs_off_exponentially() {
    let stub = Stub::start(|n, _| {
        if n < 2 {
            Reply::raw(429, "{}")
        } else {
            Reply::chat("fine")
        }
    })
    .await;
    let b = LlmBackend::openai(LlmConfig {
        backoff_ms: 150,
        ..config(&stub)
    })
    .unwrap();
    assert_eq!(
        b.summarize_async(&req(SummaryKind::Tool)).await.unwrap(),
        "fine"
    );
    let seen = stub.seen();
    assert_eq!(seen.len(), 3);
    let gap1 = seen[1].at - seen[0].at;
    let gap2 = seen[2].at - seen[1].at;
    // 150 ms then 300 ms, each plus up to 50 % jitter.
    assert!(gap1 >= Duration::from_millis(150), "{gap1:?}");
    assert!(gap1 < Duration::from_millis(600), "{gap1:?}");
    assert!(gap2 >= Duration::from_millis(300), "{gap2:?}");
    assert!(gap2 < Duration::from_millis(1_000), "{gap2:?}");
}

#[tokio::test]
async fn rate_limit_honours_retry_after() {
    let stub = Stub::start(|n, _| {
        if n == 0 {
            Reply::raw(429, "{}").with_header("retry-after", "1")
        } else {
            Reply::chat("fine")
        }
    })
    .await;
    let b = client(&stub);
    b.summarize_async(&req(SummaryKind::Tool)).await.unwrap();
    let seen = stub.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].at - seen[0].at >= Duration::from_millis(1_000));
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    for status in [400u16, 401, 404, 422] {
        let stub =
            Stub::start(move |_, _| Reply::raw(status, "{\"error\": {\"message\": \"bad\"}}"))
                .await;
        let b = client(&stub);
        let e = b
            .summarize_async(&req(SummaryKind::User))
            .await
            .unwrap_err();
        assert_eq!(e, SummarizeError::Http(status));
        assert_eq!(stub.hits(), 1, "status {status}");
        assert_eq!(b.stats().retries, 0);
    }
}

#[tokio::test]
async fn garbage_json_is_a_bad_response_without_retry() {
    let stub = Stub::start(|_, _| Reply::raw(200, "<html>not json")).await;
    let b = client(&stub);
    let e = b
        .summarize_async(&req(SummaryKind::User))
        .await
        .unwrap_err();
    assert_eq!(e.cause(), "bad_response", "{e}");
    assert!(e.to_string().contains("<html>"), "{e}");
    assert_eq!(stub.hits(), 1);
}

#[tokio::test]
async fn empty_choices_and_empty_content_fail() {
    let stub = Stub::start(|n, _| match n {
        0 => Reply::json(200, json!({"choices": []})),
        1 => Reply::chat("   \n "),
        2 => Reply::chat("Summary:"),
        _ => Reply::json(200, json!({"object": "chat.completion"})),
    })
    .await;
    let b = client(&stub);
    let mut causes = Vec::new();
    for _ in 0..4 {
        causes.push(
            b.summarize_async(&req(SummaryKind::User))
                .await
                .unwrap_err()
                .cause(),
        );
    }
    assert_eq!(
        causes,
        ["bad_response", "rejected", "rejected", "bad_response"]
    );
    assert_eq!(stub.hits(), 4);
}

#[tokio::test]
async fn longer_than_input_answer_is_returned_untouched_for_the_caller_to_judge() {
    let long = format!("{TEXT} {TEXT}");
    let reply = long.clone();
    let stub = Stub::start(move |_, _| Reply::chat(&reply)).await;
    let out = client(&stub)
        .summarize_async(&req(SummaryKind::Assistant))
        .await
        .unwrap();
    assert_eq!(out, long);
    assert!(out.len() > TEXT.len());
}

#[tokio::test]
async fn connection_refused_is_retried_then_a_transport_error() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let b = LlmBackend::openai(LlmConfig {
        base_url: Some(format!("http://{addr}/v1")),
        backoff_ms: 10,
        ..LlmConfig::default()
    })
    .unwrap();
    let e = b
        .summarize_async(&req(SummaryKind::User))
        .await
        .unwrap_err();
    assert_eq!(e.cause(), "transport", "{e}");
    let s = b.stats();
    assert_eq!((s.attempts, s.retries, s.failures), (3, 2, 1));
}

#[tokio::test]
async fn unreachable_endpoint_opens_the_circuit_then_probes_again() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let b = LlmBackend::openai(LlmConfig {
        base_url: Some(format!("http://{addr}/v1")),
        max_retries: 0,
        breaker_after: 2,
        breaker_cooldown_ms: 300,
        ..LlmConfig::default()
    })
    .unwrap();
    for _ in 0..4 {
        let e = b
            .summarize_async(&req(SummaryKind::User))
            .await
            .unwrap_err();
        assert_eq!(e.cause(), "transport");
    }
    let s = b.stats();
    assert_eq!(
        (s.requests, s.attempts, s.short_circuited, s.failures),
        (4, 2, 2, 4)
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    b.summarize_async(&req(SummaryKind::User))
        .await
        .unwrap_err();
    assert_eq!(
        b.stats().attempts,
        3,
        "after the cooldown one request probes again"
    );
    b.summarize_async(&req(SummaryKind::User))
        .await
        .unwrap_err();
    assert_eq!(b.stats().attempts, 3, "and its failure reopens the circuit");
}

#[tokio::test]
async fn http_errors_do_not_open_the_circuit() {
    let stub = Stub::start(|_, _| Reply::raw(400, "{}")).await;
    let b = LlmBackend::openai(LlmConfig {
        breaker_after: 1,
        ..config(&stub)
    })
    .unwrap();
    for _ in 0..3 {
        b.summarize_async(&req(SummaryKind::User))
            .await
            .unwrap_err();
    }
    assert_eq!(stub.hits(), 3);
    assert_eq!(b.stats().short_circuited, 0);
}

#[tokio::test]
async fn requests_run_concurrently() {
    let stub = Stub::start(|_, _| Reply::chat("ok").delayed(Duration::from_millis(300))).await;
    let b = Arc::new(client(&stub));
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let b = b.clone();
        set.spawn(async move { b.summarize_async(&req(SummaryKind::User)).await });
    }
    while let Some(r) = set.join_next().await {
        assert_eq!(r.unwrap().unwrap(), "ok");
    }
    assert_eq!(stub.hits(), 6);
    assert!(
        t.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn dropping_the_future_cancels_the_request() {
    let stub = Stub::start(|_, _| Reply::chat("late").delayed(Duration::from_millis(500))).await;
    let b = client(&stub);
    let r = tokio::time::timeout(
        Duration::from_millis(100),
        b.summarize_async(&req(SummaryKind::User)),
    )
    .await;
    assert!(r.is_err());
    tokio::time::sleep(Duration::from_millis(700)).await;
    // The request was abandoned: it never completed, so nothing counted as a failure.
    let s = b.stats();
    assert_eq!((s.requests, s.failures), (1, 0));
}

#[tokio::test]
async fn anthropic_backend_speaks_messages() {
    let stub = Stub::start(|_, _| {
        Reply::json(
            200,
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "text", "text": "Summary: cached jwt.verify"}]}),
        )
    })
    .await;
    let b = LlmBackend::anthropic(LlmConfig {
        api_key: Some("ak-test".into()),
        ..config(&stub)
    })
    .unwrap();
    let out = b
        .summarize_async(&req(SummaryKind::Assistant))
        .await
        .unwrap();
    assert_eq!(out, "cached jwt.verify");
    let seen = &stub.seen()[0];
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.header("x-api-key"), Some("ak-test"));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen.body["temperature"], 0);
    assert!(seen.body["system"].is_string());
}

#[tokio::test]
async fn registry_backend_reaches_the_server() {
    let stub = Stub::start(|_, _| Reply::chat("via registry")).await;
    let params = json!({"base_url": stub.base_url(), "model": "m", "timeout_ms": 1000,
                        "api_key_env": "CTXPRESS_TEST_UNSET_KEY_VARIABLE"});
    let backend = ctxpress_core::summarize::build_backend("openai", &params).unwrap();
    let Backend::Async(a) = &backend else {
        panic!("openai must be an async backend");
    };
    assert_eq!(
        a.summarize_async(&req(SummaryKind::Chunk)).await.unwrap(),
        "via registry"
    );
    assert_eq!(
        backend
            .as_async()
            .summarize_async(&req(SummaryKind::User))
            .await
            .unwrap(),
        "via registry"
    );
    assert_eq!(stub.hits(), 2);
    // No API key configured and the variable named is unset: no header at all.
    assert!(stub.seen()[0].header("authorization").is_none());
}

#[tokio::test]
async fn hybrid_prompt_style_sends_the_spec_004_prompts() {
    let stub = Stub::start(|_, _| Reply::chat("Asked about jwt.verify caching.")).await;
    // As the summarizer's `llm` table selects it, through the registry.
    let params = json!({"base_url": stub.base_url(), "model": "m", "timeout_ms": 1000,
                        "prompt_style": "hybrid"});
    let backend = ctxpress_core::summarize::build_backend("openai", &params)
        .unwrap()
        .as_async();
    let long = format!("{TEXT} {}", TEXT.repeat(8));
    for kind in [SummaryKind::User, SummaryKind::Assistant, SummaryKind::Tool] {
        let r = SummaryRequest {
            text: &long,
            kind,
            budget_chars: None,
            context: None,
        };
        backend.summarize_async(&r).await.unwrap();
    }
    // The per-role budgets a summarizer passes are what the prompt announces.
    let r = SummaryRequest {
        text: &long,
        kind: SummaryKind::User,
        budget_chars: Some(200),
        context: None,
    };
    backend.summarize_async(&r).await.unwrap();
    let seen = stub.seen();
    let prompt = |i: usize| seen[i].body["messages"][1]["content"].as_str().unwrap();
    assert_eq!(
        prompt(0),
        ctxpress_llm::render(HYBRID_USER, &long, None, 200)
    );
    assert_eq!(
        prompt(1),
        ctxpress_llm::render(HYBRID_ASSISTANT, &long, None, 800)
    );
    assert!(prompt(0).contains("Compress this to 1-2 sentences (at most 200 characters)"));
    assert!(prompt(1).contains("(at most 800 characters)"));
    assert!(prompt(2).starts_with("Compress this tool output"));
    assert_eq!(prompt(3), prompt(0));
    // ~50 and ~200 tokens: max_tokens follows the kind's limit.
    assert_eq!(seen[0].body["max_tokens"], 80);
    assert_eq!(seen[1].body["max_tokens"], 256);
    // The system message is the default one (answer with the summary only).
    assert_eq!(
        seen[0].body["messages"][0]["content"],
        ctxpress_llm::Prompts::default().system
    );

    // The Anthropic backend sends the same user turn.
    let stub = Stub::start(|_, _| {
        Reply::json(
            200,
            json!({"type": "message", "content": [{"type": "text", "text": "short"}]}),
        )
    })
    .await;
    let b = LlmBackend::anthropic(LlmConfig {
        prompt_style: PromptStyle::Hybrid,
        ..config(&stub)
    })
    .unwrap();
    let r = SummaryRequest {
        text: &long,
        kind: SummaryKind::Assistant,
        budget_chars: Some(800),
        context: None,
    };
    b.summarize_async(&r).await.unwrap();
    let seen = stub.seen();
    assert_eq!(
        seen[0].body["messages"][0]["content"],
        ctxpress_llm::render(HYBRID_ASSISTANT, &long, None, 800)
    );
}
