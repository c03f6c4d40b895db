//! A load test on loopback, bounded in count and time: many concurrent
//! sessions replaying real corpus histories turn by turn through the proxy
//! to a stub upstream that answers at once. No request may fail, memory
//! stays bounded, and the proxy's overhead per request (the client's time
//! minus nothing: the stub answers at once) is reported as p50/p99 for
//! requests of about 10k and about 100k tokens.
//!
//! The default run is small (a debug build); `CTXPRESS_LOAD_FULL=1` with
//! `--release` runs the sizes docs/benchmarks.md quotes.
#![allow(missing_docs)]

use axum::Router;
use axum::body::Bytes;
use axum::routing::any;
use ctxpress::Conversation;
use ctxpress_proxy::{Proxy, ProxyConfig};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

fn full() -> bool {
    std::env::var_os("CTXPRESS_LOAD_FULL").is_some_and(|v| v == "1")
}

fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}

fn tokens(c: &Conversation) -> usize {
    c.messages
        .iter()
        .map(|m| ctxpress::core::tokens::count_message(&ctxpress::core::Heuristic, m))
        .sum()
}

/// The requests of one session: the history before each assistant message,
/// from `from` tokens up to `to` tokens, at most `max` of them.
fn turns(line: &str, from: usize, to: usize, max: usize) -> Vec<String> {
    let conv = Conversation::parse(line).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let msgs = v["messages"].as_array().unwrap();
    let mut out = Vec::new();
    let mut total = 0;
    for (i, m) in conv.messages.iter().enumerate() {
        total += ctxpress::core::tokens::count_message(&ctxpress::core::Heuristic, m);
        if total > to || out.len() >= max {
            break;
        }
        if total >= from
            && conv
                .messages
                .get(i + 1)
                .is_some_and(|n| n.role_str() == "assistant")
        {
            out.push(serde_json::json!({"model": "m", "messages": &msgs[..=i]}).to_string());
        }
    }
    out
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn run_size(
    label: &str,
    from: usize,
    to: usize,
    window: usize,
    sessions: usize,
    per_session: usize,
) {
    let stub = Router::new().fallback(any(|_b: Bytes| async { "{\"id\":\"x\"}" }));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}/v1", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, stub).await.unwrap() });
    let mut pipeline = ctxpress::preset("agent").unwrap();
    pipeline.window.size = Some(window);
    let mut cfg = ProxyConfig::new(upstream, pipeline);
    cfg.log = false;
    cfg.max_in_flight = 16;
    cfg.max_sessions = sessions.max(1);
    let proxy = Proxy::new(cfg).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/chat/completions", l.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(proxy.serve(l, async move {
        let _ = rx.await;
    }));

    let path = ctxpress_tests::corpus::file("coding_agent_sessions.jsonl");
    let lines = ctxpress_tests::corpus::conversations(&path);
    let mut work: Vec<Vec<String>> = lines
        .iter()
        .map(|l| turns(&l.text, from, to, per_session))
        .filter(|t| !t.is_empty())
        .take(sessions)
        .collect();
    assert!(!work.is_empty(), "no corpus session reaches {from} tokens");
    let requests: usize = work.iter().map(Vec::len).sum();
    let sizes: Vec<usize> = work
        .iter()
        .flatten()
        .map(|r| tokens(&Conversation::parse(r).unwrap()))
        .collect();
    let client = reqwest::Client::new();
    let rss_before = rss_kib();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (n, reqs) in work.drain(..).enumerate() {
        let client = client.clone();
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            for r in reqs {
                let t = Instant::now();
                let resp = client
                    .post(&url)
                    .header(ctxpress_proxy::SESSION_HEADER, format!("load-{n}"))
                    .header("content-type", "application/json")
                    .body(r)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
                resp.bytes().await.unwrap();
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            times
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(
            tokio::time::timeout(Duration::from_secs(900), t)
                .await
                .expect("the load finishes in bounded time")
                .unwrap(),
        );
    }
    let wall = started.elapsed();
    all.sort_by(f64::total_cmp);
    let rss_after = rss_kib();
    let mean_tokens = sizes.iter().sum::<usize>() / sizes.len().max(1);
    println!(
        "{label}: {} sessions, {requests} requests of {mean_tokens} tokens on average in {:.1} s: overhead p50 {:.1} ms, p99 {:.1} ms; RSS {:?} -> {:?} KiB",
        sessions.min(requests),
        wall.as_secs_f64(),
        pct(&all, 0.5),
        pct(&all, 0.99),
        rss_before,
        rss_after
    );
    assert_eq!(all.len(), requests, "every request answered");
    if let (Some(a), Some(b)) = (rss_before, rss_after) {
        // Sessions keep their compacted prefixes and hashes, not the traffic.
        assert!(b < a + 1_500_000, "RSS grew from {a} to {b} KiB");
    }
    let _ = tx.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_of_real_histories() {
    if full() {
        run_size("~10k tokens", 8_000, 12_000, 16_000, 16, 10).await;
        run_size("~100k tokens", 90_000, 110_000, 128_000, 8, 5).await;
    } else {
        run_size("~10k tokens", 8_000, 12_000, 16_000, 6, 3).await;
    }
}
