//! JSON over HTTP with a per-attempt timeout and retries with exponential
//! backoff and jitter, on a private Tokio runtime so that callers may use any
//! executor (or a runtime without timers) without the client panicking.
//!
//! An answer's body is read up to 8 MiB: a longer one is a bad response (cut
//! off, not held in memory until the timeout), so the caller falls back.

use ctxpress_core::SummarizeError;
use serde_json::Value;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::config::{LlmConfig, LlmConfigError};

/// The largest answer read, in bytes. A summary is a few kilobytes; a
/// runaway or endless body is cut off here (a bad response) instead of
/// being held in memory until the timeout.
const MAX_BODY: usize = 8 << 20;

/// Counters of one backend since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Summaries asked for.
    pub requests: u64,
    /// HTTP attempts made (requests plus retries).
    pub attempts: u64,
    /// Retries after a 429, a 5xx or a connection error.
    pub retries: u64,
    /// Requests that ended in an error (after retries), including short-circuited ones.
    pub failures: u64,
    /// Requests failed at once, without an attempt, because the endpoint was
    /// unreachable for the last `breaker_after` requests (circuit open).
    pub short_circuited: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    requests: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    failures: AtomicU64,
    short_circuited: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            requests: self.requests.load(Ordering::Relaxed),
            attempts: self.attempts.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            short_circuited: self.short_circuited.load(Ordering::Relaxed),
        }
    }
}

/// HTTP client with the retry policy of a backend.
pub(crate) struct Http {
    client: reqwest::Client,
    timeout_ms: u64,
    max_retries: u32,
    backoff_ms: u64,
    max_backoff_ms: u64,
    breaker: Breaker,
    pub(crate) counters: Counters,
}

/// Fails requests at once while an endpoint is unreachable: after `after`
/// requests in a row end in a connection error or timeout, requests fail
/// without an attempt for `cooldown_ms`; then requests are let through again,
/// and the first one to fail that way reopens the circuit.
struct Breaker {
    after: u32,
    cooldown_ms: u64,
    epoch: std::time::Instant,
    consecutive: std::sync::atomic::AtomicU32,
    open_until_ms: AtomicU64,
}

impl Breaker {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn is_open(&self) -> bool {
        self.after > 0 && self.now_ms() < self.open_until_ms.load(Ordering::Relaxed)
    }

    fn record(&self, unreachable: bool) {
        if self.after == 0 {
            return;
        }
        if unreachable {
            let n = self
                .consecutive
                .fetch_add(1, Ordering::Relaxed)
                .saturating_add(1);
            if n >= self.after {
                self.open_until_ms.store(
                    self.now_ms().saturating_add(self.cooldown_ms),
                    Ordering::Relaxed,
                );
            }
        } else {
            self.consecutive.store(0, Ordering::Relaxed);
            self.open_until_ms.store(0, Ordering::Relaxed);
        }
    }
}

/// One failed attempt: the error, whether it is worth retrying, and the
/// server's `Retry-After` in milliseconds if it sent one.
struct Failure {
    error: SummarizeError,
    retry: bool,
    retry_after_ms: Option<u64>,
}

impl Http {
    pub(crate) fn new(cfg: &LlmConfig) -> Result<Self, LlmConfigError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(cfg.timeout_ms.min(10_000)))
            .user_agent(concat!("ctxpress-llm/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmConfigError::Client(error_chain(&e)))?;
        Ok(Http {
            client,
            timeout_ms: cfg.timeout_ms,
            max_retries: cfg.max_retries,
            backoff_ms: cfg.backoff_ms,
            max_backoff_ms: cfg.max_backoff_ms.max(cfg.backoff_ms),
            breaker: Breaker {
                after: cfg.breaker_after,
                cooldown_ms: cfg.breaker_cooldown_ms,
                epoch: std::time::Instant::now(),
                consecutive: std::sync::atomic::AtomicU32::new(0),
                open_until_ms: AtomicU64::new(0),
            },
            counters: Counters::default(),
        })
    }

    /// POST `body` to `url` and return the parsed JSON answer.
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: &Value,
    ) -> Result<Value, SummarizeError> {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        if self.breaker.is_open() {
            self.counters
                .short_circuited
                .fetch_add(1, Ordering::Relaxed);
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
            return Err(SummarizeError::Transport(format!(
                "endpoint unreachable for the last {} requests; not retried for {} ms",
                self.breaker.after, self.breaker.cooldown_ms
            )));
        }
        let mut attempt: u32 = 0;
        loop {
            self.counters.attempts.fetch_add(1, Ordering::Relaxed);
            match self.attempt(url, headers, body).await {
                Ok(v) => {
                    self.breaker.record(false);
                    return Ok(v);
                }
                Err(f) if f.retry && attempt < self.max_retries => {
                    self.counters.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(self.delay(attempt, f.retry_after_ms)).await;
                    attempt += 1;
                }
                Err(f) => {
                    self.breaker.record(matches!(
                        f.error,
                        SummarizeError::Transport(_) | SummarizeError::Timeout(_)
                    ));
                    self.counters.failures.fetch_add(1, Ordering::Relaxed);
                    return Err(f.error);
                }
            }
        }
    }

    /// One request; its answer is read up to [`MAX_BODY`].
    async fn attempt(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: &Value,
    ) -> Result<Value, Failure> {
        let mut rb = self
            .client
            .post(url)
            .timeout(Duration::from_millis(self.timeout_ms))
            .json(body);
        for (k, v) in headers {
            rb = rb.header(*k, v.as_str());
        }
        let resp = rb.send().await.map_err(|e| self.transport_failure(&e))?;
        let status = resp.status();
        if !status.is_success() {
            let code = status.as_u16();
            let retry_after_ms = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| s.saturating_mul(1000));
            return Err(Failure {
                error: SummarizeError::Http(code),
                retry: code == 429 || status.is_server_error(),
                retry_after_ms,
            });
        }
        let mut resp = resp;
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.transport_failure(&e))? {
            if bytes.len() + chunk.len() > MAX_BODY {
                return Err(Failure {
                    error: SummarizeError::BadResponse(format!(
                        "the answer is larger than {} MiB",
                        MAX_BODY >> 20
                    )),
                    retry: false,
                    retry_after_ms: None,
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&bytes).map_err(|e| Failure {
            error: SummarizeError::BadResponse(format!(
                "{e}; body starts with {:?}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(120)])
            )),
            retry: false,
            retry_after_ms: None,
        })
    }

    fn transport_failure(&self, e: &reqwest::Error) -> Failure {
        if e.is_timeout() {
            // A slow server stays slow: retrying would multiply the wait.
            Failure {
                error: SummarizeError::Timeout(self.timeout_ms),
                retry: false,
                retry_after_ms: None,
            }
        } else {
            Failure {
                error: SummarizeError::Transport(error_chain(e)),
                retry: !e.is_builder(),
                retry_after_ms: None,
            }
        }
    }

    /// Backoff before retry number `attempt + 1`: `backoff_ms * 2^attempt`
    /// plus up to half of it as jitter, at least the server's `Retry-After`,
    /// never more than `max_backoff_ms`.
    pub(crate) fn delay(&self, attempt: u32, retry_after_ms: Option<u64>) -> Duration {
        let base = self
            .backoff_ms
            .saturating_mul(1u64 << attempt.min(20))
            .min(self.max_backoff_ms);
        let jitter = if base >= 2 {
            random_u64() % (base / 2 + 1)
        } else {
            0
        };
        let ms = base
            .saturating_add(jitter)
            .max(retry_after_ms.unwrap_or(0))
            .min(self.max_backoff_ms);
        Duration::from_millis(ms)
    }
}

fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// The error and its sources, e.g. "error sending request: connection refused".
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}

fn runtime() -> Result<&'static tokio::runtime::Runtime, SummarizeError> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ctxpress-llm")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| SummarizeError::Other(format!("cannot start the HTTP runtime: {e}")))
}

/// Run `fut` on the private runtime and wait for it from any executor; the
/// task is aborted when the returned future is dropped.
pub(crate) async fn run_detached<F>(fut: F) -> Result<String, SummarizeError>
where
    F: Future<Output = Result<String, SummarizeError>> + Send + 'static,
{
    let handle = runtime()?.spawn(fut);
    match (AbortOnDrop(handle)).await {
        Ok(r) => r,
        Err(e) => Err(SummarizeError::Other(format!("request task failed: {e}"))),
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(backoff_ms: u64, max_backoff_ms: u64) -> Http {
        let cfg = LlmConfig {
            backoff_ms,
            max_backoff_ms,
            ..LlmConfig::default()
        };
        Http::new(&cfg).unwrap()
    }

    #[test]
    fn backoff_doubles_with_bounded_jitter() {
        let h = http(100, 10_000);
        for attempt in 0..4u32 {
            let base = 100u64 << attempt;
            for _ in 0..50 {
                let d = h.delay(attempt, None).as_millis() as u64;
                assert!(d >= base && d <= base + base / 2, "attempt {attempt}: {d}");
            }
        }
        let spread: std::collections::HashSet<_> = (0..50).map(|_| h.delay(3, None)).collect();
        assert!(spread.len() > 1, "no jitter");
    }

    #[test]
    fn backoff_is_capped_and_honours_retry_after() {
        let h = http(100, 1_000);
        assert_eq!(h.delay(30, None), Duration::from_millis(1_000));
        assert_eq!(h.delay(0, Some(800)), Duration::from_millis(800));
        assert_eq!(h.delay(0, Some(60_000)), Duration::from_millis(1_000));
        let h = http(0, 0);
        assert_eq!(h.delay(5, None), Duration::ZERO);
    }

    #[test]
    fn run_detached_works_without_a_runtime() {
        // A plain thread with no Tokio context: the private runtime does the work.
        let fut = run_detached(async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok("done".to_string())
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap(); // timers disabled on purpose
        assert_eq!(rt.block_on(fut).unwrap(), "done");
    }
}
