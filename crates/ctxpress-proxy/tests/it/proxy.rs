//! The proxy between a client and a stub upstream on 127.0.0.1 that records
//! what it receives: both APIs compressed through sessions (pairing valid,
//! window met, system byte-identical, every other field and header as
//! sent), streaming passed through chunk by chunk, upstream errors passed
//! through, other paths forwarded, metrics, search, limits.
#![allow(missing_docs)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Response, StatusCode, Uri};
use axum::routing::any;
use ctxpress::{Conversation, validate};
use ctxpress_proxy::{Proxy, ProxyConfig};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};

/// What the stub upstream received.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

#[derive(Default)]
struct Stub {
    seen: Mutex<Vec<Seen>>,
    /// Released by the test once it has read the first streamed chunk.
    go_on: Notify,
}

async fn stub_handler(
    stub: Arc<Stub>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    stub.seen.lock().unwrap().push(Seen {
        path: uri.to_string(),
        headers: headers.clone(),
        body: body.clone(),
    });
    if let Some(code) = headers.get("x-test-status") {
        let code: u16 = code.to_str().unwrap().parse().unwrap();
        return Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .header("retry-after", "7")
            .body(Body::from(
                r#"{"error":{"message":"slow down","type":"rate_limit"}}"#,
            ))
            .unwrap();
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if v["stream"] == json!(true) {
        let stub2 = stub.clone();
        let stream = async_stream(stub2);
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(stream))
            .unwrap();
    }
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"id": "resp-1", "path": uri.path()}).to_string(),
        ))
        .unwrap()
}

/// Two SSE events: the second only after the test has read the first
/// through the proxy (a proxy that buffers would never deliver the first).
fn async_stream(
    stub: Arc<Stub>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::unfold(0u8, move |n| {
        let stub = stub.clone();
        async move {
            match n {
                0 => Some((
                    Ok(Bytes::from_static(b"data: {\"delta\":\"first\"}\n\n")),
                    1,
                )),
                1 => {
                    stub.go_on.notified().await;
                    Some((
                        Ok(Bytes::from_static(
                            b"data: {\"delta\":\"second\"}\n\ndata: [DONE]\n\n",
                        )),
                        2,
                    ))
                }
                _ => None,
            }
        }
    })
}

async fn start_stub() -> (Arc<Stub>, String) {
    let stub = Arc::new(Stub::default());
    let s = stub.clone();
    let app = Router::new().fallback(any(move |uri: Uri, h: HeaderMap, b: Bytes| {
        let s = s.clone();
        async move { stub_handler(s, uri, h, b).await }
    }));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (stub, format!("http://{addr}/v1"))
}

struct Running {
    url: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("graceful shutdown finishes")
            .unwrap()
            .unwrap();
    }
}

async fn start_proxy(
    upstream: &str,
    window: usize,
    archive: Option<std::path::PathBuf>,
) -> Running {
    start_proxy_with(upstream, window, archive, |_| {}).await
}

async fn start_proxy_with(
    upstream: &str,
    window: usize,
    archive: Option<std::path::PathBuf>,
    f: impl FnOnce(&mut ProxyConfig),
) -> Running {
    let mut pipeline = ctxpress::preset("agent").unwrap();
    pipeline.window.size = Some(window);
    let mut cfg = ProxyConfig::new(upstream, pipeline);
    cfg.archive = archive;
    cfg.log = false;
    cfg.body_limit = 4 << 20;
    f(&mut cfg);
    let proxy = Proxy::new(cfg).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(proxy.serve(l, async move {
        let _ = rx.await;
    }));
    Running {
        url: format!("http://{addr}"),
        stop: Some(tx),
        task,
    }
}

fn body_of(i: usize, lines: usize) -> String {
    (0..lines)
        .map(|l| format!("{l:4} fn step_{i}_{l}(x: u32) -> u32 {{ x + {l} }} // src/mod_{i}.rs"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn openai_history(turns: usize) -> Vec<Value> {
    openai_history_of(turns, 80)
}

fn openai_history_of(turns: usize, lines: usize) -> Vec<Value> {
    let mut m = vec![
        json!({"role": "system", "content": "You are a coding agent. Work in /repo."}),
        json!({"role": "user", "content": "Fix the failing test in src/mod_0.rs."}),
    ];
    for i in 0..turns {
        m.push(json!({"role": "assistant", "content": format!("Reading src/mod_{i}.rs."), "tool_calls": [{"id": format!("call_{i}"), "type": "function", "function": {"name": "Read", "arguments": json!({"file_path": format!("/repo/src/mod_{i}.rs")}).to_string()}}]}));
        m.push(
            json!({"role": "tool", "tool_call_id": format!("call_{i}"), "content": body_of(i, lines)}),
        );
    }
    m.push(json!({"role": "user", "content": "Now fix it."}));
    m
}

fn anthropic_history(turns: usize) -> Vec<Value> {
    let mut m = vec![json!({"role": "user", "content": "Fix the failing test in src/mod_0.rs."})];
    for i in 0..turns {
        m.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("Reading src/mod_{i}.rs.")}, {"type": "tool_use", "id": format!("toolu_{i}"), "name": "Read", "input": {"file_path": format!("/repo/src/mod_{i}.rs")}}]}));
        m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": body_of(i, 80)}]}));
    }
    m.push(json!({"role": "user", "content": [{"type": "text", "text": "Now fix it."}]}));
    m
}

fn tokens(c: &Conversation) -> usize {
    c.messages
        .iter()
        .map(|m| ctxpress::core::tokens::count_message(&ctxpress::core::Heuristic, m))
        .sum::<usize>()
        + ctxpress::core::window::envelope_tokens(c, &ctxpress::core::Heuristic)
}

#[tokio::test]
async fn openai_requests_are_compressed_and_everything_else_passes_as_sent() {
    let (stub, upstream) = start_stub().await;
    let p = start_proxy(&upstream, 8000, None).await;
    let client = reqwest::Client::new();
    let req = json!({"model": "gpt-x", "temperature": 0, "messages": openai_history(30), "tools": [{"type": "function", "function": {"name": "Read"}}]});
    let r = client
        .post(format!("{}/v1/chat/completions", p.url))
        .bearer_auth("sk-test-secret")
        .header("x-custom", "kept")
        .header(ctxpress_proxy::SESSION_HEADER, "conv-1")
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<Value>().await.unwrap()["path"],
        "/v1/chat/completions"
    );
    let seen = stub.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.headers["authorization"], "Bearer sk-test-secret");
    assert_eq!(seen.headers["x-custom"], "kept");
    assert!(seen.headers.get(ctxpress_proxy::SESSION_HEADER).is_none());
    let sent = Conversation::parse(std::str::from_utf8(&seen.body).unwrap()).unwrap();
    let given = Conversation::parse(&req.to_string()).unwrap();
    assert!(tokens(&given) > 5600);
    assert!(
        tokens(&sent) <= 5600,
        "window 8000: trigger 5600, got {}",
        tokens(&sent)
    );
    assert!(validate(&sent).is_empty());
    assert_eq!(
        sent.message_json(&sent.messages[0]),
        given.message_json(&given.messages[0])
    );
    let v: Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(v["model"], "gpt-x");
    assert_eq!(v["temperature"], 0);
    assert_eq!(v["tools"], req["tools"]);
    p.shutdown().await;
}

#[tokio::test]
async fn anthropic_requests_keep_their_system_and_pairing() {
    let (stub, upstream) = start_stub().await;
    let p = start_proxy(&upstream, 8000, None).await;
    let system = "You are Claude Code. Follow the repository's conventions.";
    let req = json!({"model": "claude-x", "max_tokens": 1024, "system": system, "messages": anthropic_history(30)});
    let r = reqwest::Client::new()
        .post(format!("{}/v1/messages", p.url))
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", "2023-06-01")
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let seen = stub.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.headers["x-api-key"], "sk-ant-test");
    let sent = Conversation::parse(std::str::from_utf8(&seen.body).unwrap()).unwrap();
    assert!(tokens(&sent) <= 5600, "{}", tokens(&sent));
    assert!(validate(&sent).is_empty());
    let v: Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(v["system"], system);
    assert_eq!(v["max_tokens"], 1024);
    p.shutdown().await;
}

#[tokio::test]
async fn later_turns_extend_the_previous_request_byte_for_byte() {
    let (stub, upstream) = start_stub().await;
    let p = start_proxy(&upstream, 16000, None).await;
    let client = reqwest::Client::new();
    let full = openai_history_of(60, 20);
    let mut bodies: Vec<Vec<String>> = Vec::new();
    let mut compactions = 0;
    let mut last_len = 0;
    for k in (4..full.len()).step_by(2) {
        let req = json!({"model": "m", "messages": &full[..k]});
        let r = client
            .post(format!("{}/v1/chat/completions", p.url))
            .json(&req)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let seen = stub.seen.lock().unwrap().last().cloned().unwrap();
        let c = Conversation::parse(std::str::from_utf8(&seen.body).unwrap()).unwrap();
        let texts: Vec<String> = c.messages.iter().map(|m| c.message_json(m)).collect();
        if let Some(prev) = bodies.last() {
            if texts.len() >= prev.len() && texts[..prev.len()] == prev[..] {
                assert!(texts.len() >= last_len);
            } else {
                compactions += 1;
            }
        }
        last_len = texts.len();
        bodies.push(texts);
    }
    assert!(
        compactions >= 1 && compactions * 6 <= bodies.len(),
        "{compactions} compactions in {} turns",
        bodies.len()
    );
    let m = client
        .get(format!("{}/metrics", p.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains(&format!("ctxpress_compactions_total {compactions}\n")),
        "{m}"
    );
    assert!(m.contains("ctxpress_sessions 1\n"), "{m}");
    assert!(m.contains("# TYPE ctxpress_cache_prefix_tokens_kept_total counter"));
    p.shutdown().await;
}

/// A Claude Code style request (Anthropic Messages) of turn `k`: marked
/// `system` blocks, `tools`, `metadata.user_id`, a first user request and
/// `k` tool rounds; the client's one message marker sits on the newest
/// message's last block (moved there every turn, gone from the others).
fn claude_code_turn(k: usize) -> Value {
    let mut m = vec![json!({"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>\nThe repository is /repo.\n</system-reminder>"},
        {"type": "text", "text": "Fix the failing test in src/mod_0.rs."}
    ]})];
    for i in 0..k {
        m.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("Reading src/mod_{i}.rs.")}, {"type": "tool_use", "id": format!("toolu_{i}"), "name": "Read", "input": {"file_path": format!("/repo/src/mod_{i}.rs")}}]}));
        m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": body_of(i, 8 + i % 9)}]}));
    }
    let last = m.last_mut().unwrap()["content"].as_array_mut().unwrap();
    last.last_mut().unwrap()["cache_control"] = json!({"type": "ephemeral"});
    json!({
        "model": "claude-x",
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Follow the repository's conventions.", "cache_control": {"type": "ephemeral"}}
        ],
        "tools": [{"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}],
        "metadata": {"user_id": "user_1_account_2_session_3"},
        "messages": m
    })
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {text}"))
}

/// Claude Code moves its one message marker to the newest message every
/// turn. Through the proxy: one session from the first request on, one
/// compaction per `trigger - target` of growth, the requests between two
/// compactions the previous one byte for byte (but its newest message, the
/// marker gone from it), system untouched, one marker on the newest message.
#[tokio::test]
async fn a_claude_code_session_is_one_session_that_keeps_its_prefix() {
    let (stub, upstream) = start_stub().await;
    let p = start_proxy(&upstream, 40000, None).await;
    let client = reqwest::Client::new();
    let mut prev: Option<Vec<String>> = None;
    let mut compactions = 0;
    let mut last_given = 0;
    for k in 0..110 {
        let req = claude_code_turn(k);
        let r = client
            .post(format!("{}/v1/messages", p.url))
            .header("x-api-key", "sk-ant-test")
            .json(&req)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let seen = stub.seen.lock().unwrap().last().cloned().unwrap();
        let v: Value = serde_json::from_slice(&seen.body).unwrap();
        assert_eq!(v["system"], req["system"]);
        let c = Conversation::parse(std::str::from_utf8(&seen.body).unwrap()).unwrap();
        assert!(validate(&c).is_empty(), "turn {k}");
        let now: Vec<String> = c.messages.iter().map(|m| c.message_json(m)).collect();
        let marks = now
            .iter()
            .map(|m| m.matches("cache_control").count())
            .sum::<usize>();
        assert_eq!(marks, 1, "turn {k}");
        assert!(now.last().unwrap().contains("cache_control"), "turn {k}");
        if let Some(p) = &prev
            && !(now.len() > p.len() && now[..p.len() - 1] == p[..p.len() - 1])
        {
            compactions += 1;
        }
        last_given = tokens(&Conversation::parse(&req.to_string()).unwrap());
        prev = Some(now);
    }
    let m = client
        .get(format!("{}/metrics", p.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(metric(&m, "ctxpress_sessions"), 1, "{m}");
    assert_eq!(metric(&m, "ctxpress_compactions_total"), compactions, "{m}");
    // Window 40000: trigger 28000, target 16000.
    let most = 1 + (last_given - 28000).div_ceil(28000 - 16000) as u64;
    assert!(
        (most - 1..=most).contains(&compactions),
        "{compactions} compactions, at most {most} expected ({last_given} tokens at the end)"
    );
    let kept = metric(&m, "ctxpress_cache_prefix_tokens_kept_total");
    let sent = metric(&m, "ctxpress_tokens_out_total");
    eprintln!(
        "proxy replay: {compactions} compactions (at most {most}), {last_given} tokens at the end, kept {kept} of {sent}"
    );
    assert!(kept * 10 >= sent * 9, "kept {kept} of {sent}");
    p.shutdown().await;
}

/// The same conversation from two credentials is two sessions; the
/// session header does not join another credential's session either.
#[tokio::test]
async fn clients_with_other_credentials_get_other_sessions() {
    let (_stub, upstream) = start_stub().await;
    let p = start_proxy(&upstream, 16000, None).await;
    let client = reqwest::Client::new();
    let send = |key: &'static str, header: Option<&'static str>, k: usize| {
        let mut r = client
            .post(format!("{}/v1/messages", p.url))
            .header("x-api-key", key)
            .json(&claude_code_turn(k));
        if let Some(h) = header {
            r = r.header(ctxpress_proxy::SESSION_HEADER, h);
        }
        async move { assert_eq!(r.send().await.unwrap().status(), 200) }
    };
    let sessions = || async {
        let m = client
            .get(format!("{}/metrics", p.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metric(&m, "ctxpress_sessions")
    };
    send("sk-ant-a", None, 1).await;
    send("sk-ant-a", None, 2).await;
    assert_eq!(sessions().await, 1);
    send("sk-ant-b", None, 2).await;
    assert_eq!(sessions().await, 2);
    send("sk-ant-a", Some("conv-1"), 3).await;
    send("sk-ant-b", Some("conv-1"), 3).await;
    assert_eq!(sessions().await, 4);
    p.shutdown().await;
}

#[tokio::test]
async fn streams_pass_through_chunk_by_chunk() {
    let (stub, upstream) = start_stub().await;
    let p = start_proxy(&upstream, 8000, None).await;
    let req = json!({"model": "m", "stream": true, "messages": openai_history(2)});
    let mut r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", p.url))
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let first = tokio::time::timeout(Duration::from_secs(10), r.chunk())
        .await
        .expect("the first event arrives before the upstream sends the second")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("first"));
    stub.go_on.notify_one();
    let mut rest = Vec::new();
    while let Some(c) = r.chunk().await.unwrap() {
        rest.extend_from_slice(&c);
    }
    assert!(String::from_utf8_lossy(&rest).ends_with("data: [DONE]\n\n"));
    p.shutdown().await;
}

#[tokio::test]
async fn upstream_errors_and_other_paths_pass_through() {
    let (stub, upstream) = start_stub().await;
    let p = start_proxy(&upstream, 8000, None).await;
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/chat/completions", p.url))
        .header("x-test-status", "429")
        .json(&json!({"model": "m", "messages": openai_history(1)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "7");
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"error":{"message":"slow down","type":"rate_limit"}}"#
    );
    let r = client
        .get(format!("{}/v1/models?limit=2", p.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        stub.seen.lock().unwrap().last().unwrap().path,
        "/v1/models?limit=2"
    );
    // Not a conversation: forwarded as sent, the upstream answers.
    let odd = r#"{"model": "m", "prompt": "legacy completion"}"#;
    let r = client
        .post(format!("{}/v1/chat/completions", p.url))
        .body(odd)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        &stub.seen.lock().unwrap().last().unwrap().body[..],
        odd.as_bytes()
    );
    // Over the body limit: refused here, never sent.
    let n = stub.seen.lock().unwrap().len();
    let big = "x".repeat(5 << 20);
    let r = client
        .post(format!("{}/v1/chat/completions", p.url))
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE.as_u16());
    assert_eq!(stub.seen.lock().unwrap().len(), n);
    p.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_clear_502() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/v1", l.local_addr().unwrap());
    drop(l);
    let p = start_proxy(&dead, 8000, None).await;
    let r = reqwest::Client::new()
        .post(format!("{}/v1/messages", p.url))
        .json(&json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable")
    );
    p.shutdown().await;
}

#[tokio::test]
async fn originals_are_archived_and_searchable_by_their_own_conversation_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("serve.db");
    let (_stub, upstream) = start_stub().await;
    let client = reqwest::Client::new();
    // Without an admin token, search is off.
    let p = start_proxy(&upstream, 8000, Some(db.clone())).await;
    let r = client
        .get(format!(
            "{}/ctxpress/search?q=step_2_17&conversation=a",
            p.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    p.shutdown().await;

    let p = start_proxy_with(&upstream, 8000, Some(db.clone()), |c| {
        c.admin_token = Some(ctxpress_proxy::Secret("tok-123".into()));
    })
    .await;
    let mut ids = Vec::new();
    for (name, secret) in [("alice", "sk-alice-secret"), ("bob", "sk-bob-secret")] {
        let mut h = openai_history(30);
        h[1] = json!({"role": "user", "content": format!("Fix the failing test; my key is {secret}.")});
        let r = client
            .post(format!("{}/v1/chat/completions", p.url))
            .header(ctxpress_proxy::SESSION_HEADER, name)
            .json(&json!({"model": "m", "messages": h}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        ids.push(
            r.headers()[ctxpress_proxy::CONVERSATION_HEADER]
                .to_str()
                .unwrap()
                .to_string(),
        );
    }
    let search = |query: String, token: Option<&'static str>| {
        let mut r = client.get(format!("{}/ctxpress/search?{query}", p.url));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    // No token, a wrong one, a longer one: 401.
    for t in [None, Some("tok-12"), Some("tok-1234"), Some("")] {
        let r = search(format!("q=secret&conversation={}", ids[1]), t)
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{t:?}");
    }
    // No conversation named: 400.
    let r = search("q=secret".into(), Some("tok-123")).await.unwrap();
    assert_eq!(r.status(), 400);
    // Alice's session sees her history only, each hit naming it.
    let hits: Value = search(
        format!("q=step_2_17&conversation={}&limit=50", ids[0]),
        Some("tok-123"),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let hits = hits.as_array().unwrap();
    assert!(!hits.is_empty());
    for h in hits {
        assert_eq!(h["conversation"], ids[0].as_str(), "{h}");
        // The hit's recall handle, as `ctxpress search --json` gives it.
        assert!(
            h["handle"].is_null() || h["handle"].as_str().is_some_and(|x| x.starts_with("#h")),
            "{h}"
        );
    }
    assert!(hits.iter().any(|h| h["handle"].is_string()), "{hits:?}");
    let text = search(
        "q=step_2_17&conversation=".to_string() + &ids[1],
        Some("tok-123"),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let hits: Value = serde_json::from_str(&text).unwrap();
    assert!(!hits.as_array().unwrap().is_empty(), "{text}");
    assert!(!text.contains("sk-alice-secret"), "{text}");
    assert_eq!(
        client
            .get(format!("{}/ctxpress/health", p.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "ok\n"
    );
    p.shutdown().await;
}

#[test]
fn a_config_without_a_window_is_refused() {
    let e = Proxy::new(ProxyConfig::new(
        "http://127.0.0.1:1/v1",
        ctxpress::preset("agent").unwrap(),
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("window"), "{e}");
    let mut p = ctxpress::preset("agent").unwrap();
    p.window.size = Some(1000);
    let e = Proxy::new(ProxyConfig::new("ftp://x", p))
        .unwrap_err()
        .to_string();
    assert!(e.contains("http"), "{e}");
}
