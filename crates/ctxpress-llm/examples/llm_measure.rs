//! Latency and acceptance of LLM summaries on real assistant messages.
//!
//! `CTXPRESS_LLM_URL=http://127.0.0.1:8765/v1 cargo run --release -p ctxpress-llm --example llm_measure [-- N MIN_CHARS]`
//!
//! Takes the first N (default 20) assistant messages of at least MIN_CHARS
//! (default 1500) characters from `coding_agent_sessions.jsonl`, summarizes
//! them with 1 and with 4 requests in flight, and prints the mean latency,
//! the share accepted (non-empty and strictly shorter than the input) versus
//! fallback (by cause), and the character ratio of the accepted summaries.

use ctxpress_core::{SummarizeAsync, SummaryKind, SummaryRequest};
use ctxpress_llm::{ENV_URL, LlmBackend, LlmConfig};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn corpus() -> PathBuf {
    std::env::var_os("CTXPRESS_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"))
        .join("coding_agent_sessions.jsonl")
}

fn messages(n: usize, min_chars: usize) -> std::io::Result<Vec<String>> {
    let f = std::fs::File::open(corpus())?;
    let mut out = Vec::new();
    for line in std::io::BufReader::new(f).lines() {
        let line = line?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        for m in v["messages"].as_array().into_iter().flatten() {
            if m["role"] == "assistant"
                && let Some(c) = m["content"].as_str()
                && c.chars().count() >= min_chars
                && !out.iter().any(|o: &String| o == c)
            {
                out.push(c.to_string());
                if out.len() == n {
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}

struct Outcome {
    latency: Duration,
    input_chars: usize,
    result: Result<usize, String>,
}

async fn run(
    backend: Arc<LlmBackend>,
    texts: &[String],
    concurrency: usize,
) -> (Vec<Outcome>, Duration) {
    let sem = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, t) in texts.iter().enumerate() {
        let (b, sem, t) = (backend.clone(), sem.clone(), t.clone());
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let t0 = Instant::now();
            let req = SummaryRequest {
                text: &t,
                kind: SummaryKind::Assistant,
                budget_chars: None,
                context: None,
            };
            let r = b.summarize_async(&req).await;
            let input_chars = t.chars().count();
            let result = match r {
                Ok(s) if !s.is_empty() && s.chars().count() < input_chars => Ok(s.chars().count()),
                Ok(_) => Err("rejected".to_string()),
                Err(e) => Err(e.cause().to_string()),
            };
            (
                i,
                Outcome {
                    latency: t0.elapsed(),
                    input_chars,
                    result,
                },
            )
        });
    }
    let mut out: Vec<(usize, Outcome)> = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(x) = r {
            out.push(x);
        }
    }
    out.sort_by_key(|(i, _)| *i);
    (out.into_iter().map(|(_, o)| o).collect(), start.elapsed())
}

fn report(concurrency: usize, outcomes: &[Outcome], wall: Duration) {
    let n = outcomes.len().max(1);
    let mean = outcomes
        .iter()
        .map(|o| o.latency.as_secs_f64())
        .sum::<f64>()
        / n as f64;
    let mut lat: Vec<f64> = outcomes.iter().map(|o| o.latency.as_secs_f64()).collect();
    lat.sort_by(f64::total_cmp);
    let p50 = lat.get(lat.len() / 2).copied().unwrap_or(0.0);
    let max = lat.last().copied().unwrap_or(0.0);
    let accepted: Vec<&Outcome> = outcomes.iter().filter(|o| o.result.is_ok()).collect();
    let mut causes: BTreeMap<&str, usize> = BTreeMap::new();
    for o in outcomes {
        if let Err(c) = &o.result {
            *causes.entry(c.as_str()).or_default() += 1;
        }
    }
    let in_chars: usize = accepted.iter().map(|o| o.input_chars).sum();
    let out_chars: usize = accepted
        .iter()
        .map(|o| *o.result.as_ref().unwrap_or(&0))
        .sum();
    let ratio = if in_chars == 0 {
        0.0
    } else {
        out_chars as f64 / in_chars as f64
    };
    println!(
        "concurrency {concurrency}: {} messages, wall {:.1} s, mean latency {:.2} s (p50 {:.2} s, max {:.2} s), \
accepted {}/{} ({:.0} %), fallback {} {:?}, char ratio of accepted {:.3} ({} -> {} chars)",
        outcomes.len(),
        wall.as_secs_f64(),
        mean,
        p50,
        max,
        accepted.len(),
        outcomes.len(),
        100.0 * accepted.len() as f64 / n as f64,
        outcomes.len() - accepted.len(),
        causes,
        ratio,
        in_chars,
        out_chars
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let min_chars: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1500);
    if std::env::var(ENV_URL)
        .map(|u| u.trim().is_empty())
        .unwrap_or(true)
    {
        eprintln!(
            "skipped: {ENV_URL} not set (scripts/llm-server.sh start 8765; export {ENV_URL}=$(scripts/llm-server.sh url))"
        );
        return;
    }
    let texts = match messages(n, min_chars) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {}: {e}", corpus().display());
            std::process::exit(1);
        }
    };
    let total: usize = texts.iter().map(|t| t.chars().count()).sum();
    println!(
        "{} assistant messages of >= {min_chars} chars, {total} chars in all (mean {})",
        texts.len(),
        total / texts.len().max(1)
    );
    let backend = match LlmBackend::openai(LlmConfig {
        timeout_ms: 180_000,
        max_retries: 1,
        ..LlmConfig::default()
    }) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            eprintln!("bad configuration: {e}");
            std::process::exit(1);
        }
    };
    println!("endpoint {} model {}", backend.url(), backend.model());
    for concurrency in [1usize, 4] {
        let (outcomes, wall) = run(backend.clone(), &texts, concurrency).await;
        report(concurrency, &outcomes, wall);
    }
    println!("{:?}", backend.stats());
}
