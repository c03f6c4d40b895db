//! `ctxpress serve`: a compressing HTTP proxy in front of an OpenAI Chat
//! Completions or Anthropic Messages API.
//!
//! An agent that speaks HTTP points its base URL here. `POST
//! /v1/chat/completions` and `POST /v1/messages` bodies go through a
//! [`ctxpress::Session`] per client and conversation (keyed by a hash of the
//! credential and the `x-ctxpress-session` header, else of the credential,
//! the system prompt, the first user message and the client's ids in the
//! body, cache markers left out: the same from the first request on), so
//! the history is compacted only when it crosses the window's trigger and
//! the provider's prompt cache stays warm between compactions. Every other
//! field and header goes upstream as sent (authorization passes through and
//! is never logged); responses, server-sent events included, come back
//! chunk by chunk as the upstream sends them, its errors too. Any other path
//! is forwarded untouched. A body that is not a conversation is forwarded
//! untouched as well: the upstream answers it as it would have.
//!
//! Also: `GET /metrics` (Prometheus text), `GET /ctxpress/search?q=` over
//! the archive, `GET /ctxpress/health`. Bounded: a body size limit, a limit
//! on requests in flight, upstream connect and read timeouts, a cap on the
//! sessions kept (least recently used dropped), graceful shutdown that
//! finishes the requests in flight. One JSON log line per request on stderr,
//! with a request id and figures, never message content.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, Uri};
use axum::routing::{any, get, post};
use ctxpress::session::{content_read_hash, read_hash};
use ctxpress::store::SqliteArchive;
use ctxpress::{Conversation, PipelineConfig, Session};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The header that names a conversation's session explicitly.
pub const SESSION_HEADER: &str = "x-ctxpress-session";

/// What the proxy needs to run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The upstream API's base URL, e.g. `https://api.openai.com/v1`. A
    /// request for `/v1/X` goes to `BASE/X` when the base ends in `/v1`,
    /// else to `BASE/v1/X`.
    pub upstream: String,
    /// The pipeline, with a window or a budget (sessions need one).
    pub pipeline: PipelineConfig,
    /// The SQLite archive of originals (searchable); `None` keeps none.
    pub archive: Option<PathBuf>,
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    /// Requests in flight at once; more wait.
    pub max_in_flight: usize,
    /// Sessions kept; the least recently used goes beyond this.
    pub max_sessions: usize,
    /// Time to connect to the upstream.
    pub connect_timeout: Duration,
    /// Longest wait for the upstream's next bytes.
    pub read_timeout: Duration,
    /// Write one JSON line per request to stderr.
    pub log: bool,
}

impl ProxyConfig {
    /// Defaults around an upstream and a pipeline: 32 MiB bodies, 64
    /// requests in flight, 1024 sessions, 10 s to connect, 600 s between
    /// upstream bytes, logging on, no archive.
    pub fn new(upstream: impl Into<String>, pipeline: PipelineConfig) -> Self {
        ProxyConfig {
            upstream: upstream.into(),
            pipeline,
            archive: None,
            body_limit: 32 << 20,
            max_in_flight: 64,
            max_sessions: 1024,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(600),
            log: true,
        }
    }
}

/// The `[serve]` table of a configuration file; flags override it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ServeTable {
    /// Address to listen on.
    pub listen: String,
    /// The upstream API's base URL.
    pub upstream: Option<String>,
    /// SQLite archive of originals; `""` keeps none.
    pub archive: String,
    /// Largest request body, in MiB.
    pub body_limit_mb: usize,
    /// Requests in flight at once.
    pub max_in_flight: usize,
    /// Sessions kept.
    pub max_sessions: usize,
    /// Time to connect to the upstream, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Longest wait for the upstream's next bytes, in milliseconds.
    pub read_timeout_ms: u64,
    /// One JSON line per request on stderr.
    pub log: bool,
}

impl Default for ServeTable {
    fn default() -> Self {
        ServeTable {
            listen: "127.0.0.1:8787".into(),
            upstream: None,
            archive: "ctxpress-serve.db".into(),
            body_limit_mb: 32,
            max_in_flight: 64,
            max_sessions: 1024,
            connect_timeout_ms: 10_000,
            read_timeout_ms: 600_000,
            log: true,
        }
    }
}

impl ServeTable {
    /// The `[serve]` table of `cfg` (defaults for what it leaves out);
    /// errors name the field and suggest the closest known one.
    pub fn of(cfg: &PipelineConfig) -> Result<Self, ctxpress::core::ConfigError> {
        match &cfg.serve {
            None => Ok(ServeTable::default()),
            Some(m) => ctxpress::core::parse_params("serve", &serde_json::Value::Object(m.clone())),
        }
    }

    /// The proxy configuration these settings make with `cfg`'s pipeline.
    pub fn config(&self, cfg: PipelineConfig) -> Result<ProxyConfig, ProxyError> {
        let upstream = self
            .upstream
            .clone()
            .ok_or_else(|| ProxyError::Upstream(String::new()))?;
        let mut p = ProxyConfig::new(upstream, cfg);
        p.archive = (!self.archive.is_empty()).then(|| PathBuf::from(&self.archive));
        p.body_limit = self.body_limit_mb.max(1) << 20;
        p.max_in_flight = self.max_in_flight.max(1);
        p.max_sessions = self.max_sessions.max(1);
        p.connect_timeout = Duration::from_millis(self.connect_timeout_ms.max(1));
        p.read_timeout = Duration::from_millis(self.read_timeout_ms.max(1));
        p.log = self.log;
        Ok(p)
    }
}

/// Why the proxy cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The pipeline or window configuration.
    #[error(transparent)]
    Config(#[from] ctxpress::core::ConfigError),
    /// The upstream URL.
    #[error(
        "upstream `{0}`: expected the API's base URL, http:// or https:// (--upstream or `serve.upstream`)"
    )]
    Upstream(String),
    /// The archive could not be opened.
    #[error("{path}: cannot open archive: {message}")]
    Archive {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Counters behind `/metrics`.
#[derive(Debug, Default)]
struct Metrics {
    requests: AtomicU64,
    compressed: AtomicU64,
    passed_through: AtomicU64,
    upstream_errors: AtomicU64,
    tokens_given: AtomicU64,
    tokens_sent: AtomicU64,
    compactions: AtomicU64,
    prefix_kept: AtomicU64,
    prefix_changed: AtomicU64,
    latency_micros: AtomicU64,
    latency_count: AtomicU64,
    in_flight: AtomicU64,
}

/// Sessions by key, least recently used first.
#[derive(Default)]
struct Sessions {
    map: HashMap<String, Arc<tokio::sync::Mutex<Session>>>,
    order: VecDeque<String>,
}

struct Shared {
    cfg: ProxyConfig,
    client: reqwest::Client,
    archive: Option<Arc<SqliteArchive>>,
    sessions: Mutex<Sessions>,
    /// Salts the session keys (see [`session_key`]).
    salt: RandomState,
    gate: tokio::sync::Semaphore,
    metrics: Metrics,
    next_id: AtomicU64,
}

/// A configured proxy; [`Proxy::router`] gives its routes, [`Proxy::serve`]
/// runs it.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("upstream", &self.shared.cfg.upstream)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Check the configuration (a session can be made from it), open the
    /// archive and build the HTTP client.
    pub fn new(cfg: ProxyConfig) -> Result<Self, ProxyError> {
        if !(cfg.upstream.starts_with("http://") || cfg.upstream.starts_with("https://")) {
            return Err(ProxyError::Upstream(cfg.upstream.clone()));
        }
        Session::new(&cfg.pipeline)?;
        let archive = match &cfg.archive {
            Some(p) => Some(Arc::new(SqliteArchive::open(p).map_err(|e| {
                ProxyError::Archive {
                    path: p.display().to_string(),
                    message: e.to_string(),
                }
            })?)),
            None => None,
        };
        let client = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .read_timeout(cfg.read_timeout)
            .build()?;
        Ok(Proxy {
            shared: Arc::new(Shared {
                gate: tokio::sync::Semaphore::new(cfg.max_in_flight.max(1)),
                cfg,
                client,
                archive,
                sessions: Mutex::new(Sessions::default()),
                salt: RandomState::new(),
                metrics: Metrics::default(),
                next_id: AtomicU64::new(1),
            }),
        })
    }

    /// The routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/v1/chat/completions",
                post(forward::<{ Api::OpenAi as u8 }>),
            )
            .route("/v1/messages", post(forward::<{ Api::Anthropic as u8 }>))
            .route("/metrics", get(metrics))
            .route("/ctxpress/search", get(search))
            .route("/ctxpress/health", get(|| async { "ok\n" }))
            .fallback(any(forward::<{ Api::Other as u8 }>))
            .layer(DefaultBodyLimit::max(self.shared.cfg.body_limit))
            .with_state(self.shared.clone())
    }

    /// Serve on `listener` until `shutdown` completes, then finish the
    /// requests in flight and return.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
    }
}

/// The API a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Api {
    OpenAi = 0,
    Anthropic = 1,
    Other = 2,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
            Api::Other => "other",
        }
    }
}

/// The handler of every route that goes upstream; `API` is an [`Api`] as
/// a number (`Api::OpenAi as u8`, ...).
async fn forward<const API: u8>(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let api = match API {
        0 => Api::OpenAi,
        1 => Api::Anthropic,
        _ => Api::Other,
    };
    handle(s, api, method, uri, headers, body).await
}

/// What compression did to one request, for the log and the metrics.
#[derive(Default)]
struct Done {
    tokens_given: usize,
    tokens_sent: usize,
    compacted: bool,
    reset: bool,
    fits: bool,
    session: Option<String>,
    note: Option<&'static str>,
}

/// Headers that carry the client's credential.
const CREDENTIALS: &[&str] = &["authorization", "x-api-key", "api-key", "x-goog-api-key"];

/// Body fields by which a client names its user or conversation, the same
/// on every turn: Anthropic `metadata.user_id` (Claude Code's holds its
/// session id), OpenAI `prompt_cache_key`, `safety_identifier`, `user`.
fn client_ids(conv: &Conversation) -> [Option<&serde_json::Value>; 4] {
    let f = &conv.envelope.fields;
    [
        f.get("metadata").and_then(|m| m.get("user_id")),
        f.get("prompt_cache_key"),
        f.get("safety_identifier"),
        f.get("user"),
    ]
}

/// The session key: the client (a hash of its credential, salted per
/// process so that the logged key tells nothing about it) and the
/// conversation: the `x-ctxpress-session` header when sent, else the system
/// prompt, the first user message and the ids the client gives in the body.
/// What is hashed is what the provider reads of them (cache markers left
/// out), so the key is the same from the first request on while the client
/// moves its markers (a first user message is the newest one, marked, in
/// the first request only).
fn session_key(salt: &RandomState, headers: &HeaderMap, conv: &Conversation) -> String {
    let mut h = salt.build_hasher();
    for name in CREDENTIALS {
        if let Some(v) = headers.get(*name) {
            name.hash(&mut h);
            v.as_bytes().hash(&mut h);
        }
    }
    if let Some(v) = headers.get(SESSION_HEADER) {
        v.as_bytes().hash(&mut h);
        return format!("x{:016x}", h.finish());
    }
    let system = match conv.envelope.fields.get("system") {
        Some(v) => Some(content_read_hash(v)),
        None => conv
            .messages
            .iter()
            .find(|m| matches!(m.role_str(), "system" | "developer"))
            .map(read_hash),
    };
    system.hash(&mut h);
    conv.messages
        .iter()
        .find(|m| m.role_str() == "user")
        .map(read_hash)
        .hash(&mut h);
    for id in client_ids(conv) {
        id.map(|v| v.to_string()).hash(&mut h);
    }
    format!("h{:016x}", h.finish())
}

fn session_for(s: &Shared, key: &str) -> Result<Arc<tokio::sync::Mutex<Session>>, String> {
    let mut g = s.sessions.lock().map_err(|_| "session table poisoned")?;
    if let Some(x) = g.map.get(key).cloned() {
        if let Some(p) = g.order.iter().position(|k| k == key) {
            g.order.remove(p);
        }
        g.order.push_back(key.to_string());
        return Ok(x);
    }
    let session = Session::new(&s.cfg.pipeline)
        .map_err(|e| e.to_string())?
        .with_archive(s.archive.clone().map(|a| a as Arc<dyn ctxpress::Archive>));
    let x = Arc::new(tokio::sync::Mutex::new(session));
    g.map.insert(key.to_string(), x.clone());
    g.order.push_back(key.to_string());
    while g.map.len() > s.cfg.max_sessions.max(1) {
        let Some(old) = g.order.pop_front() else {
            break;
        };
        g.map.remove(&old);
    }
    Ok(x)
}

/// The body to send upstream: the compressed request, or the body as sent
/// when it is not a conversation (the upstream answers it as it would).
async fn compress(s: &Shared, headers: &HeaderMap, body: &Bytes, done: &mut Done) -> Option<Bytes> {
    let Ok(text) = std::str::from_utf8(body) else {
        done.note = Some("not UTF-8: forwarded as sent");
        return None;
    };
    let conv = match Conversation::parse(text) {
        Ok(c) if !c.messages.is_empty() => c,
        _ => {
            done.note = Some("not a conversation: forwarded as sent");
            return None;
        }
    };
    let key = session_key(&s.salt, headers, &conv);
    let session = match session_for(s, &key) {
        Ok(x) => x,
        Err(_) => {
            done.note = Some("no session: forwarded as sent");
            return None;
        }
    };
    done.session = Some(key);
    let mut guard = session.clone().lock_owned().await;
    let prepared = if guard.needs_async() {
        // LLM stages: awaited here (their time is the endpoint's).
        guard.prepare_async(&conv).await.ok()
    } else {
        // CPU work (a compaction of a long history takes a while): on a
        // blocking thread, so the runtime's workers keep streaming other
        // responses meanwhile.
        tokio::task::spawn_blocking(move || guard.prepare(&conv).ok())
            .await
            .ok()
            .flatten()
    };
    let Some((request, r)) = prepared else {
        done.note = Some("compression failed: forwarded as sent");
        return None;
    };
    done.tokens_given = r.tokens_given;
    done.tokens_sent = r.tokens_request;
    done.compacted = r.compacted;
    done.reset = r.reset;
    done.fits = r.fits;
    let m = &s.metrics;
    m.compressed.fetch_add(1, Ordering::Relaxed);
    m.tokens_given
        .fetch_add(r.tokens_given as u64, Ordering::Relaxed);
    m.tokens_sent
        .fetch_add(r.tokens_request as u64, Ordering::Relaxed);
    m.compactions
        .fetch_add(u64::from(r.compacted), Ordering::Relaxed);
    m.prefix_kept
        .fetch_add(r.tokens_prefix_kept as u64, Ordering::Relaxed);
    m.prefix_changed
        .fetch_add(r.tokens_prefix_changed as u64, Ordering::Relaxed);
    let mut out = Vec::with_capacity(body.len());
    request.write_to(&mut out).ok()?;
    Some(Bytes::from(out))
}

/// Headers that belong to one connection, not to the request.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

fn upstream_url(base: &str, uri: &Uri) -> String {
    let base = base.trim_end_matches('/');
    let path = uri.path();
    let path = if base.ends_with("/v1") {
        path.strip_prefix("/v1").unwrap_or(path)
    } else {
        path
    };
    match uri.query() {
        Some(q) => format!("{base}{path}?{q}"),
        None => format!("{base}{path}"),
    }
}

fn error_response(status: StatusCode, api: Api, message: &str) -> Response<Body> {
    let body = match api {
        Api::Anthropic => {
            serde_json::json!({"type": "error", "error": {"type": "api_error", "message": message}})
        }
        _ => serde_json::json!({"error": {"message": message, "type": "ctxpress_proxy_error"}}),
    };
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn handle(
    s: Arc<Shared>,
    api: Api,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let id = s.next_id.fetch_add(1, Ordering::Relaxed);
    let start = Instant::now();
    s.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let Ok(_permit) = s.gate.acquire().await else {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            api,
            "ctxpress: shutting down",
        );
    };
    s.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
    let mut done = Done::default();
    let sent = if api == Api::Other || method != Method::POST {
        None
    } else {
        compress(&s, &headers, &body, &mut done).await
    };
    if sent.is_none() {
        s.metrics.passed_through.fetch_add(1, Ordering::Relaxed);
    }
    let out_body = sent.unwrap_or_else(|| body.clone());
    let url = upstream_url(&s.cfg.upstream, &uri);
    let mut req = s.client.request(method.clone(), &url);
    for (k, v) in &headers {
        if !hop_by_hop(k) && k.as_str() != SESSION_HEADER {
            req = req.header(k, v);
        }
    }
    let compress_ms = start.elapsed().as_secs_f64() * 1000.0;
    let up = Instant::now();
    let result = req.body(out_body).send().await;
    let upstream_ms = up.elapsed().as_secs_f64() * 1000.0;
    s.metrics
        .latency_micros
        .fetch_add(up.elapsed().as_micros() as u64, Ordering::Relaxed);
    s.metrics.latency_count.fetch_add(1, Ordering::Relaxed);
    let response = match result {
        Ok(r) => {
            let status = r.status();
            if status.is_client_error() || status.is_server_error() {
                s.metrics.upstream_errors.fetch_add(1, Ordering::Relaxed);
            }
            let mut out = Response::builder().status(status.as_u16());
            for (k, v) in r.headers() {
                if !hop_by_hop(k) {
                    out = out.header(k, v);
                }
            }
            // Chunk by chunk, as the upstream sends them (server-sent
            // events included): nothing is buffered.
            let stream = futures_util::stream::unfold(Some(r), |r| async move {
                let mut r = r?;
                match r.chunk().await {
                    Ok(Some(b)) => Some((Ok::<Bytes, reqwest::Error>(b), Some(r))),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), None)),
                }
            });
            out.body(Body::from_stream(stream)).unwrap_or_else(|_| {
                error_response(
                    StatusCode::BAD_GATEWAY,
                    api,
                    "ctxpress: bad upstream response",
                )
            })
        }
        Err(e) => {
            s.metrics.upstream_errors.fetch_add(1, Ordering::Relaxed);
            let (status, what) = if e.is_timeout() {
                (StatusCode::GATEWAY_TIMEOUT, "timed out")
            } else {
                (StatusCode::BAD_GATEWAY, "unreachable")
            };
            error_response(
                status,
                api,
                &format!(
                    "ctxpress: the upstream {what} ({})",
                    ctxpress::core::secrets::mask_url_credentials(&url)
                ),
            )
        }
    };
    s.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    if s.cfg.log {
        let line = serde_json::json!({
            "id": id,
            "api": api.name(),
            "method": method.as_str(),
            "path": uri.path(),
            "status": response.status().as_u16(),
            "session": done.session,
            "tokens_given": done.tokens_given,
            "tokens_sent": done.tokens_sent,
            "compacted": done.compacted,
            "reset": done.reset,
            "fits": done.fits,
            "note": done.note,
            "compress_ms": (compress_ms * 10.0).round() / 10.0,
            "upstream_ms": (upstream_ms * 10.0).round() / 10.0,
        });
        eprintln!("{line}");
    }
    response
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response<Body> {
    let m = &s.metrics;
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let sessions = s.sessions.lock().map_or(0, |x| x.map.len());
    let mut t = String::new();
    let mut put = |name: &str, kind: &str, help: &str, v: String| {
        t.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
        ));
    };
    put(
        "ctxpress_requests_total",
        "counter",
        "Requests received.",
        g(&m.requests).to_string(),
    );
    put(
        "ctxpress_requests_compressed_total",
        "counter",
        "Requests whose messages went through a session.",
        g(&m.compressed).to_string(),
    );
    put(
        "ctxpress_requests_passed_through_total",
        "counter",
        "Requests forwarded as sent (other paths, bodies that are not conversations).",
        g(&m.passed_through).to_string(),
    );
    put(
        "ctxpress_upstream_errors_total",
        "counter",
        "Upstream answers of 4xx or 5xx, and upstreams unreachable or timed out.",
        g(&m.upstream_errors).to_string(),
    );
    put(
        "ctxpress_tokens_in_total",
        "counter",
        "Tokens of the histories as received.",
        g(&m.tokens_given).to_string(),
    );
    put(
        "ctxpress_tokens_out_total",
        "counter",
        "Tokens of the requests sent upstream.",
        g(&m.tokens_sent).to_string(),
    );
    put(
        "ctxpress_compactions_total",
        "counter",
        "Turns that compacted a history.",
        g(&m.compactions).to_string(),
    );
    put(
        "ctxpress_cache_prefix_tokens_kept_total",
        "counter",
        "Request tokens that repeat the start of the session's previous request (servable from the provider's prompt cache).",
        g(&m.prefix_kept).to_string(),
    );
    put(
        "ctxpress_cache_prefix_tokens_changed_total",
        "counter",
        "Tokens of previous requests that the next one no longer starts with.",
        g(&m.prefix_changed).to_string(),
    );
    put(
        "ctxpress_upstream_latency_seconds_sum",
        "counter",
        "Time to the upstream's response headers, summed.",
        format!("{:.6}", g(&m.latency_micros) as f64 / 1e6),
    );
    put(
        "ctxpress_upstream_latency_seconds_count",
        "counter",
        "Upstream requests timed.",
        g(&m.latency_count).to_string(),
    );
    put(
        "ctxpress_requests_in_flight",
        "gauge",
        "Requests being handled.",
        g(&m.in_flight).to_string(),
    );
    put(
        "ctxpress_sessions",
        "gauge",
        "Sessions kept.",
        sessions.to_string(),
    );
    let mut r = Response::new(Body::from(t));
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

/// `GET /ctxpress/search` parameters.
#[derive(Debug, serde::Deserialize)]
struct SearchParams {
    q: String,
    conversation: Option<String>,
    limit: Option<usize>,
}

async fn search(State(s): State<Arc<Shared>>, Query(p): Query<SearchParams>) -> Response<Body> {
    let Some(a) = s.archive.clone() else {
        return error_response(
            StatusCode::NOT_FOUND,
            Api::Other,
            "ctxpress: this proxy keeps no archive (--archive)",
        );
    };
    let limit = p.limit.unwrap_or(20).min(1000);
    let found =
        tokio::task::spawn_blocking(move || a.search(&p.q, p.conversation.as_deref(), limit)).await;
    match found {
        Ok(Ok(hits)) => {
            let v: Vec<serde_json::Value> = hits
                .iter()
                .map(|h| {
                    serde_json::json!({
                        "conversation": h.conversation,
                        "key": h.key,
                        "pos": h.pos,
                        "role": h.role,
                        "snippet": h.snippet,
                        "score": h.score,
                    })
                })
                .collect();
            let mut r = Response::new(Body::from(serde_json::Value::Array(v).to_string()));
            r.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        Ok(Err(e)) => error_response(
            StatusCode::BAD_REQUEST,
            Api::Other,
            &format!("ctxpress: search: {e}"),
        ),
        Err(_) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            Api::Other,
            "ctxpress: search failed",
        ),
    }
}
