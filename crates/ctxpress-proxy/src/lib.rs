//! `ctxpress serve`: a compressing HTTP proxy in front of an OpenAI Chat
//! Completions or Anthropic Messages API.
//!
//! An agent that speaks HTTP points its base URL here. `POST
//! /v1/chat/completions` and `POST /v1/messages` bodies, read in the shape
//! of the API their path names (not guessed from the body), go through a
//! [`ctxpress::Session`] per client and conversation (keyed by a hash of the
//! credential and the `x-ctxpress-session` header, else of the credential,
//! the system prompt, the first user message and the client's ids in the
//! body, cache markers left out: the same from the first request on), so
//! the history is compacted only when it crosses the window's trigger and
//! the provider's prompt cache stays warm between compactions. Every other
//! field and header goes upstream as sent (authorization passes through and
//! is never logged); responses, server-sent events included, come back
//! chunk by chunk as the upstream sends them, its errors too. A body that
//! is not a conversation is forwarded untouched: the upstream answers it as
//! it would have.
//!
//! Paths: the request path is normalized first (percent-encoded bytes
//! decoded, `\` read as `/`, empty and `.` segments dropped, `..` applied);
//! one that is malformed or climbs out of `/v1` is refused with 400, one
//! outside `/v1` with 404, and only `/v1` and the paths under it go
//! upstream, onto the upstream's base path (see [`ProxyConfig::upstream`]).
//! A query in the upstream URL (a key, an API version) is added to every
//! request and never printed or returned.
//!
//! Also: `GET /metrics` (Prometheus text), `GET /ctxpress/health`, `GET
//! /ctxpress/search?q=&conversation=` over the archive, answering only for
//! the one conversation named, and with [`ProxyConfig::mcp`] the MCP server
//! of the `mcp` module (cargo feature `mcp`) at `/mcp` over the proxy's
//! archive. The admin token guards all but health: with one set, they need
//! it; without, search is off, `/metrics` answers on loopback only, and
//! `/mcp` cannot be turned on. A request whose `Host` names the proxy
//! otherwise than by its loopback names or listening address (or an
//! allowed host) is refused with 421, health aside: a web page that points
//! its own name at 127.0.0.1 (DNS rebinding) gets nothing (see
//! [`Proxy::router`]).
//! Bounded: a body size limit, header and body read timeouts, a limit on
//! requests in flight (a streamed response counts until its body ends),
//! upstream connect and read timeouts, a memory budget and an idle expiry
//! for sessions (least recently used dropped first) besides a cap on their
//! count, and a graceful shutdown that waits a bounded time for the
//! requests in flight. One JSON log line per request on stderr, with a
//! request id and figures, never message content.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode};
use axum::routing::get;
use ctxpress::core::Format;
use ctxpress::store::SqliteArchive;
use ctxpress::{Conversation, Session};
use http_body_util::BodyExt;
use std::hash::RandomState;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod admin;
mod config;
mod hosts;
mod sessions;
mod upstream;

#[cfg(feature = "mcp")]
use admin::mcp_guard;
use admin::{check_host, metrics, search};
pub use config::{ProxyConfig, ProxyError, Secret, ServeTable, shown_url};
use hosts::Hosts;
use sessions::{Filed, Sessions, expire, session_for, session_key, settle};
use upstream::{Target, Upstream, target};

#[cfg(feature = "mcp")]
pub mod mcp;

/// The header that names a conversation's session explicitly.
pub const SESSION_HEADER: &str = "x-ctxpress-session";

/// The response header naming the conversation a request was archived
/// under (what `GET /ctxpress/search?conversation=` takes).
pub const CONVERSATION_HEADER: &str = "x-ctxpress-conversation";

/// Counters behind `/metrics`.
#[derive(Debug, Default)]
struct Metrics {
    requests: AtomicU64,
    compressed: AtomicU64,
    passed_through: AtomicU64,
    refused: AtomicU64,
    misdirected: AtomicU64,
    upstream_errors: AtomicU64,
    tokens_given: AtomicU64,
    tokens_sent: AtomicU64,
    compactions: AtomicU64,
    prefix_kept: AtomicU64,
    prefix_changed: AtomicU64,
    latency_micros: AtomicU64,
    latency_count: AtomicU64,
    in_flight: AtomicU64,
    waiting: AtomicU64,
    sessions_dropped: AtomicU64,
}

struct Shared {
    cfg: ProxyConfig,
    upstream: Upstream,
    client: reqwest::Client,
    archive: Option<Arc<SqliteArchive>>,
    sessions: Mutex<Sessions>,
    /// Salts the session keys (see [`session_key`]).
    salt: RandomState,
    gate: Arc<tokio::sync::Semaphore>,
    metrics: Metrics,
    next_id: AtomicU64,
}

/// The routes' state: the proxy, and what its listening address decides.
struct App {
    s: Arc<Shared>,
    hosts: Hosts,
    beyond_loopback: bool,
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
            .field("upstream", &self.shared.upstream.shown)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Check the configuration (a session can be made from it), open the
    /// archive and build the HTTP client.
    pub fn new(cfg: ProxyConfig) -> Result<Self, ProxyError> {
        let upstream = Upstream::parse(&cfg.upstream)?;
        Session::new(&cfg.pipeline)?;
        Hosts::new(&cfg.allowed_hosts, SocketAddr::from(([127, 0, 0, 1], 0)))?;
        if cfg.mcp && !cfg!(feature = "mcp") {
            return Err(ProxyError::Mcp(
                "this build has no MCP server: build ctxpress with the cargo feature `mcp` (cargo install --locked --profile dist --features mcp --path crates/ctxpress-cli)",
            ));
        }
        if cfg.mcp {
            if cfg.admin_token.as_ref().is_none_or(|t| t.0.is_empty()) {
                return Err(ProxyError::Mcp(
                    "needs the admin token (--admin-token, $CTXPRESS_ADMIN_TOKEN or `serve.admin_token`), which MCP clients send as `authorization: Bearer TOKEN`",
                ));
            }
            if cfg.archive.is_none() {
                return Err(ProxyError::Mcp(
                    "needs the archive it serves (--archive DB, not --no-archive)",
                ));
            }
        }
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
                gate: Arc::new(tokio::sync::Semaphore::new(cfg.max_in_flight.max(1))),
                cfg,
                upstream,
                client,
                archive,
                sessions: Mutex::new(Sessions::default()),
                salt: RandomState::new(),
                metrics: Metrics::default(),
                next_id: AtomicU64::new(1),
            }),
        })
    }

    /// The upstream as it may be printed: credentials and query masked.
    pub fn upstream_shown(&self) -> &str {
        &self.shared.upstream.shown
    }

    /// The bytes the sessions are estimated to hold (what the memory budget
    /// bounds), and how many sessions there are.
    pub fn session_usage(&self) -> (usize, usize) {
        self.shared
            .sessions
            .lock()
            .map_or((0, 0), |g| (g.total, g.map.len()))
    }

    /// The routes, for a proxy listening on `local`.
    ///
    /// Every request but `GET /ctxpress/health` must name in its `Host`
    /// (and in its target, when that is absolute) `localhost`,
    /// `127.0.0.1`, `[::1]` or `local`'s address, on `local`'s port, or
    /// one of [`ProxyConfig::allowed_hosts`]; any other is refused with
    /// 421 (DNS rebinding). Listening beyond loopback with no allowed
    /// hosts, any `Host` is answered. `GET /metrics` and `GET
    /// /ctxpress/search` need the admin token when one is set
    /// (`authorization: Bearer TOKEN`, else 401); without one, search is
    /// off (404) and `/metrics` answers on loopback only (403 beyond it).
    /// With [`ProxyConfig::mcp`], `/mcp` serves the MCP server of the `mcp` module
    /// over the proxy's archive (streamable HTTP, stateless), to requests
    /// that carry the admin token (401 else).
    pub fn router(&self, local: SocketAddr) -> Router {
        let hosts = Hosts::new(&self.shared.cfg.allowed_hosts, local).unwrap_or(Hosts {
            // Checked by `Proxy::new`.
            any: false,
            names: Vec::new(),
        });
        let app = Arc::new(App {
            s: self.shared.clone(),
            hosts,
            beyond_loopback: !local.ip().is_loopback(),
        });
        let routes = Router::new()
            .route("/metrics", get(metrics))
            .route("/ctxpress/search", get(search))
            .route("/ctxpress/health", get(|| async { "ok\n" }));
        #[cfg(feature = "mcp")]
        let routes = match (self.shared.cfg.mcp, &self.shared.archive) {
            (true, Some(a)) => routes.merge(
                Router::new()
                    .route_service("/mcp", mcp::http_service(a.clone()))
                    .layer(axum::middleware::from_fn_with_state(app.clone(), mcp_guard)),
            ),
            _ => routes,
        };
        routes
            .fallback(handle)
            .layer(axum::middleware::from_fn_with_state(
                app.clone(),
                check_host,
            ))
            .layer(DefaultBodyLimit::max(self.shared.cfg.body_limit))
            .with_state(app)
    }

    /// What `ctxpress serve` warns about at start-up for a proxy listening
    /// on `local`: listening beyond loopback (anyone who reaches the port
    /// uses the upstream through it), which `Host` names it then answers,
    /// and whether `/metrics` is off for want of an admin token; on
    /// loopback, `*` among the allowed hosts (DNS rebinding).
    pub fn warnings(&self, local: SocketAddr) -> Vec<String> {
        let cfg = &self.shared.cfg;
        let Ok(hosts) = Hosts::new(&cfg.allowed_hosts, local) else {
            return Vec::new();
        };
        let token = cfg.admin_token.as_ref().is_some_and(|t| !t.0.is_empty());
        if local.ip().is_loopback() {
            return if hosts.any {
                vec![
                    "warning: ctxpress serve answers any Host header (allowed host `*`): a web page whose name resolves to this machine can use the upstream through it (DNS rebinding)"
                        .to_string(),
                ]
            } else {
                Vec::new()
            };
        }
        let mut w = format!(
            "warning: ctxpress serve listens on {local}, reachable beyond this machine: anyone who reaches the port uses the upstream through it (loopback only: --listen 127.0.0.1:PORT); "
        );
        if hosts.any {
            w.push_str("it answers any Host header (--allow-host NAME, or `serve.allowed_hosts`, names the only ones to answer)");
        } else {
            w.push_str(&format!("it answers the Host names {}", hosts.shown()));
        }
        if !token {
            w.push_str("; /metrics is refused without an admin token (--admin-token)");
        }
        vec![w]
    }

    /// Serve on `listener` until `shutdown` completes, then stop accepting,
    /// let the requests in flight finish for up to the shutdown grace, close
    /// what is still open and return.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let router = self.router(listener.local_addr()?);
        let cfg = &self.shared.cfg;
        let header_timeout = cfg.header_timeout;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(());
        let mut conns = tokio::task::JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut sweep = tokio::time::interval(
            (cfg.session_idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(60)),
        );
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
                _ = sweep.tick() => expire(&self.shared),
                accepted = listener.accept() => {
                    let stream = match accepted {
                        Ok((stream, _)) => stream,
                        Err(_) => {
                            // Out of file descriptors, most likely: give
                            // the connections open a moment to end.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let service = hyper_util::service::TowerToHyperService::new(router.clone());
                    let mut stop = stop_rx.clone();
                    conns.spawn(async move {
                        let mut builder = hyper::server::conn::http1::Builder::new();
                        builder
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(header_timeout);
                        let conn = builder
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                        let mut conn = std::pin::pin!(conn);
                        tokio::select! {
                            _ = conn.as_mut() => return,
                            _ = stop.changed() => conn.as_mut().graceful_shutdown(),
                        }
                        let _ = conn.await;
                    });
                }
            }
        }
        drop(listener);
        drop(stop_tx);
        let grace = self.shared.cfg.shutdown_grace;
        let _ =
            tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
        conns.abort_all();
        Ok(())
    }
}

/// The API a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    OpenAi,
    Anthropic,
    Other,
}

impl Api {
    /// The provider shape of the API's requests (what `validate` holds a
    /// compressed request to); `None` for other paths.
    fn format(self) -> Option<Format> {
        match self {
            Api::OpenAi => Some(Format::OpenAi),
            Api::Anthropic => Some(Format::Anthropic),
            Api::Other => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
            Api::Other => "other",
        }
    }
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

/// The conversation of a request body to `api`'s path, in that API's
/// shape: the path says which it is (Claude Code's first request, with no
/// tool called yet, could be taken for OpenAI's by its look); `None` when
/// the body is not a conversation with messages.
fn conversation_of(text: &str, api: Api) -> Option<Conversation> {
    let conv = match api.format() {
        Some(f) => Conversation::parse_as(text, f),
        None => Conversation::parse(text),
    };
    conv.ok().filter(|c| !c.messages.is_empty())
}

/// The body to send upstream: the compressed request, or the body as sent
/// when it is not a conversation (the upstream answers it as it would).
async fn compress(
    s: &Shared,
    api: Api,
    headers: &HeaderMap,
    body: &Bytes,
    done: &mut Done,
) -> Option<Bytes> {
    let Ok(text) = std::str::from_utf8(body) else {
        done.note = Some("not UTF-8: forwarded as sent");
        return None;
    };
    let Some(conv) = conversation_of(text, api) else {
        done.note = Some("not a conversation: forwarded as sent");
        return None;
    };
    let key = session_key(&s.salt, headers, &conv);
    let session = match session_for(s, &key) {
        Ok(x) => x,
        Err(_) => {
            done.note = Some("no session: forwarded as sent");
            return None;
        }
    };
    done.session = Some(key.clone());
    let mut guard = session.clone().lock_owned().await;
    if let Some(a) = &s.archive {
        guard.set_archive(Some(Arc::new(Filed {
            archive: a.clone(),
            conversation: key.clone(),
        })));
    }
    let prepared = if guard.needs_async() {
        // LLM stages: awaited here (their time is the endpoint's).
        let r = guard.prepare_async(&conv).await.ok();
        r.map(|r| (r, guard.retained_bytes()))
    } else {
        // CPU work (a compaction of a long history takes a while): on a
        // blocking thread, so the runtime's workers keep streaming other
        // responses meanwhile.
        tokio::task::spawn_blocking(move || {
            let r = guard.prepare(&conv).ok();
            r.map(|r| (r, guard.retained_bytes()))
        })
        .await
        .ok()
        .flatten()
    };
    let Some(((request, r), held)) = prepared else {
        done.note = Some("compression failed: forwarded as sent");
        return None;
    };
    settle(s, &key, held);
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

/// Adds one to a gauge while alive.
struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    fn up(a: &'a AtomicU64) -> Self {
        a.fetch_add(1, Ordering::Relaxed);
        Gauge(a)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request in flight: its place under `max_in_flight` and its count in
/// the gauge, held until the response body has ended (or was dropped).
struct InFlight {
    s: Arc<Shared>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl InFlight {
    fn new(s: Arc<Shared>, permit: tokio::sync::OwnedSemaphorePermit) -> Self {
        s.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { s, _permit: permit }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.s.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The request's body, within the size limit and the body timeout.
async fn read_body(
    s: &Shared,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, (StatusCode, &'static str)> {
    let limit = s.cfg.body_limit;
    let too_large = (
        StatusCode::PAYLOAD_TOO_LARGE,
        "ctxpress: the request body is over the limit",
    );
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large);
    }
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(s.cfg.body_timeout, limited.collect()).await {
        Err(_) => Err((
            StatusCode::REQUEST_TIMEOUT,
            "ctxpress: the request body did not arrive in time",
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large),
        Ok(Err(_)) => Err((
            StatusCode::BAD_REQUEST,
            "ctxpress: cannot read the request body",
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

/// Every request that is not the proxy's own (`/metrics`, `/ctxpress/...`):
/// normalized, compressed when it is a conversation, forwarded upstream.
async fn handle(State(app): State<Arc<App>>, req: Request) -> Response<Body> {
    let s = app.s.clone();
    let id = s.next_id.fetch_add(1, Ordering::Relaxed);
    let start = Instant::now();
    s.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    let (method, uri, headers) = (parts.method, parts.uri, parts.headers);
    let mut done = Done::default();
    let mut upstream_ms = 0.0;
    let mut api = Api::Other;
    let response = 'r: {
        let segments = match target(uri.path()) {
            Target::Api(x) => x,
            Target::Outside => {
                s.metrics.refused.fetch_add(1, Ordering::Relaxed);
                done.note = Some("not an API path: refused");
                break 'r error_response(
                    StatusCode::NOT_FOUND,
                    api,
                    "ctxpress: only /v1 and the paths under it go upstream",
                );
            }
            Target::Bad(why) => {
                s.metrics.refused.fetch_add(1, Ordering::Relaxed);
                done.note = Some(why);
                break 'r error_response(
                    StatusCode::BAD_REQUEST,
                    api,
                    &format!("ctxpress: refused path: {why}"),
                );
            }
        };
        if method == Method::POST {
            let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
            api = match parts[..] {
                ["v1", "chat", "completions"] => Api::OpenAi,
                ["v1", "messages"] => Api::Anthropic,
                _ => Api::Other,
            };
        }
        let body = match read_body(&s, &headers, body).await {
            Ok(b) => b,
            Err((status, message)) => {
                done.note = Some("request body refused");
                break 'r error_response(status, api, message);
            }
        };
        let permit = {
            let _waiting = Gauge::up(&s.metrics.waiting);
            s.gate.clone().acquire_owned().await
        };
        let Ok(permit) = permit else {
            break 'r error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                api,
                "ctxpress: shutting down",
            );
        };
        let flight = InFlight::new(s.clone(), permit);
        let sent = if api == Api::Other {
            None
        } else {
            compress(&s, api, &headers, &body, &mut done).await
        };
        if sent.is_none() {
            s.metrics.passed_through.fetch_add(1, Ordering::Relaxed);
        }
        let out_body = sent.unwrap_or_else(|| body.clone());
        let url = s.upstream.url(&segments, uri.query());
        let mut req = s.client.request(method.clone(), &url);
        for (k, v) in &headers {
            if !hop_by_hop(k) && k.as_str() != SESSION_HEADER {
                req = req.header(k, v);
            }
        }
        let up = Instant::now();
        let result = req.body(out_body).send().await;
        upstream_ms = up.elapsed().as_secs_f64() * 1000.0;
        s.metrics
            .latency_micros
            .fetch_add(up.elapsed().as_micros() as u64, Ordering::Relaxed);
        s.metrics.latency_count.fetch_add(1, Ordering::Relaxed);
        let mut response = match result {
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
                // events included): nothing is buffered. The request stays
                // in flight until the body has ended or was dropped.
                let stream = futures_util::stream::unfold(Some((r, flight)), |state| async move {
                    let (mut r, flight) = state?;
                    match r.chunk().await {
                        Ok(Some(b)) => Some((Ok::<Bytes, reqwest::Error>(b), Some((r, flight)))),
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
                    &format!("ctxpress: the upstream {what} ({})", s.upstream.shown),
                )
            }
        };
        if let Some(v) = done
            .session
            .as_deref()
            .and_then(|k| HeaderValue::from_str(k).ok())
        {
            response
                .headers_mut()
                .insert(HeaderName::from_static(CONVERSATION_HEADER), v);
        }
        response
    };
    if s.cfg.log {
        let compress_ms = start.elapsed().as_secs_f64() * 1000.0 - upstream_ms;
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

#[cfg(test)]
mod tests {
    use super::admin::same_secret;
    use super::hosts::parse_host;
    use super::*;

    fn api(segments: &[&str]) -> Target {
        Target::Api(segments.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn paths_are_normalized_or_refused() {
        assert_eq!(
            target("/v1/chat/completions"),
            api(&["v1", "chat", "completions"])
        );
        assert_eq!(target("/v1//models/./x/"), api(&["v1", "models", "x"]));
        assert_eq!(target("/v1/a/../models"), api(&["v1", "models"]));
        assert_eq!(target("/v1/%6dodels"), api(&["v1", "models"]));
        assert_eq!(target("/favicon.ico"), Target::Outside);
        for bad in [
            "/v1/../tenant-b/v1/x",
            "/v1/%2e%2e/%2e%2e/x",
            "/v1\\..\\..\\x",
            "/v1/%252e%252e/x",
            "/v1/..;/x",
            "/v1/%e2%80%a5/x",
            "/v1/.../x",
            "/v1/%zz",
            "/v1/a%00b",
            "/..",
        ] {
            assert!(matches!(target(bad), Target::Bad(_)), "{bad}");
        }
    }

    #[test]
    fn the_upstream_maps_api_paths_and_keeps_its_query_hidden() {
        let up = Upstream::parse("https://u:p@h/base/v1/?key=sk-x&v=2").unwrap();
        let segs = |p: &str| match target(p) {
            Target::Api(s) => s,
            t => panic!("{t:?}"),
        };
        assert_eq!(
            up.url(&segs("/v1/models"), Some("limit=2&key=mine")),
            "https://u:p@h/base/v1/models?key=sk-x&v=2&limit=2"
        );
        assert_eq!(up.shown, "https://***@h/base/v1/?***");
        let up = Upstream::parse("http://h:8080").unwrap();
        assert_eq!(
            up.url(&segs("/v1/messages"), None),
            "http://h:8080/v1/messages"
        );
        assert!(Upstream::parse("ftp://h/v1?key=sk-x").is_err());
        assert!(!shown_url("http://h/v1?key=sk-x#f").contains("sk-x"));
    }

    /// The request path names the API: a body is read in its shape, not
    /// sniffed (issue #33: Claude Code's first request was read as OpenAI's).
    #[test]
    fn the_path_names_the_format() {
        let claude_first = r#"{"model":"c","system":[{"type":"text","text":"s"}],"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":[{"type":"text","text":"q"}]},{"role":"system","content":"env"}]}"#;
        let looks_anthropic =
            r#"{"model":"m","system":"s","messages":[{"role":"user","content":"q"}]}"#;
        let looks_openai = r#"{"model":"m","messages":[{"role":"user","content":"q"}]}"#;
        for (text, api, want) in [
            (claude_first, Api::Anthropic, Some(Format::Anthropic)),
            (looks_openai, Api::Anthropic, Some(Format::Anthropic)),
            (looks_anthropic, Api::OpenAi, Some(Format::OpenAi)),
            (looks_anthropic, Api::Other, Some(Format::Anthropic)),
            (r#"{"model":"m","messages":[]}"#, Api::OpenAi, None),
            ("not json", Api::Anthropic, None),
        ] {
            let got = conversation_of(text, api).map(|c| c.format);
            assert_eq!(got, want, "{api:?}: {text}");
        }
        let c = conversation_of(claude_first, Api::Anthropic).unwrap();
        assert!(ctxpress::validate(&c).is_empty());
    }

    fn at(addr: &str) -> SocketAddr {
        addr.parse().unwrap()
    }

    #[test]
    fn hosts_are_parsed_one_way() {
        for (raw, want) in [
            ("localhost:8787", Some(("localhost", Some(8787)))),
            ("LocalHost.", Some(("localhost", None))),
            ("[0:0:0:0:0:0:0:1]:80", Some(("[::1]", Some(80)))),
            ("[::1]", Some(("[::1]", None))),
            ("127.0.0.1", Some(("127.0.0.1", None))),
            ("proxy.internal:9000", Some(("proxy.internal", Some(9000)))),
        ] {
            let got = parse_host(raw);
            assert_eq!(got.as_ref().map(|(n, p)| (n.as_str(), *p)), want, "{raw}");
        }
        for bad in [
            "",
            ":80",
            "a b",
            "a@b",
            "x/y",
            "localhost:8787:1",
            "localhost:99999",
            "localhost:",
            "[::1",
            "[evil]:80",
            "::1",
            "é.example",
        ] {
            assert_eq!(parse_host(bad), None, "{bad}");
        }
    }

    /// On loopback: the loopback names on the listening port only (DNS
    /// rebinding: a page's own name is refused), plus what is allowed.
    #[test]
    fn loopback_answers_its_own_names_only() {
        let h = Hosts::new(&[], at("127.0.0.1:8787")).unwrap();
        assert!(!h.any);
        for ok in [
            "127.0.0.1:8787",
            "localhost:8787",
            "LOCALHOST:8787",
            "localhost.:8787",
            "[::1]:8787",
            "[0:0:0:0:0:0:0:1]:8787",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:8787",
            "evil.example",
            "localhost",
            "localhost:80",
            "127.0.0.1:1",
            "127.0.0.1.nip.io:8787",
            "localhost.evil.example:8787",
            "0.0.0.0:8787",
            "",
            "x",
        ] {
            assert!(!h.allows(refused), "{refused}");
        }
        assert_eq!(h.shown(), "localhost:8787, 127.0.0.1:8787, [::1]:8787");
        // Another loopback address answers to itself too; port 80 needs none.
        let h = Hosts::new(&[], at("127.0.0.2:80")).unwrap();
        assert!(h.allows("127.0.0.2") && h.allows("localhost") && h.allows("localhost:80"));
        let h = Hosts::new(
            &[
                "Proxy.Internal".into(),
                "box:9000".into(),
                "[fe80::1]:1".into(),
            ],
            at("[::1]:8787"),
        )
        .unwrap();
        for ok in [
            "proxy.internal",
            "proxy.internal:443",
            "box:9000",
            "[fe80::1]:1",
            "[::1]:8787",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for refused in ["box", "box:9001", "[fe80::1]", "evil.example:8787"] {
            assert!(!h.allows(refused), "{refused}");
        }
        assert!(Hosts::new(&["*".into()], at("127.0.0.1:1")).unwrap().any);
        assert!(matches!(
            Hosts::new(&["a b".into()], at("127.0.0.1:1")),
            Err(ProxyError::AllowedHost(_))
        ));
    }

    /// Beyond loopback: any host unless some are named (then those, the
    /// loopback names and the listening address).
    #[test]
    fn beyond_loopback_answers_any_host_unless_named() {
        assert!(Hosts::new(&[], at("0.0.0.0:8787")).unwrap().any);
        assert!(Hosts::new(&[], at("[::]:8787")).unwrap().any);
        let h = Hosts::new(&["proxy.lan".into()], at("192.168.1.5:8787")).unwrap();
        assert!(!h.any);
        for ok in ["proxy.lan", "192.168.1.5:8787", "localhost:8787"] {
            assert!(h.allows(ok), "{ok}");
        }
        assert!(!h.allows("192.168.1.5:80") && !h.allows("evil.example:8787"));
        let h = Hosts::new(&["proxy.lan".into()], at("0.0.0.0:8787")).unwrap();
        assert!(!h.allows("0.0.0.0:8787") && h.allows("proxy.lan:8787"));
    }

    fn proxy_with(f: impl FnOnce(&mut ProxyConfig)) -> Proxy {
        let mut p = ctxpress::preset("agent").unwrap();
        p.window.size = Some(1000);
        let mut cfg = ProxyConfig::new("http://127.0.0.1:9/v1", p);
        cfg.log = false;
        f(&mut cfg);
        Proxy::new(cfg).unwrap()
    }

    #[test]
    fn warnings_say_what_is_exposed() {
        let p = proxy_with(|_| {});
        assert!(p.warnings(at("127.0.0.1:8787")).is_empty());
        assert!(p.warnings(at("[::1]:8787")).is_empty());
        let w = p.warnings(at("0.0.0.0:8787")).join("\n");
        assert!(
            w.contains("0.0.0.0:8787, reachable beyond this machine"),
            "{w}"
        );
        assert!(
            w.contains("answers any Host header (--allow-host NAME"),
            "{w}"
        );
        assert!(
            w.contains("/metrics is refused without an admin token"),
            "{w}"
        );
        let p = proxy_with(|c| {
            c.allowed_hosts = vec!["proxy.lan".into()];
            c.admin_token = Some(Secret("t".into()));
        });
        let w = p.warnings(at("192.168.1.5:8787")).join("\n");
        assert!(w.contains("answers the Host names localhost:8787"), "{w}");
        assert!(w.contains("192.168.1.5:8787, proxy.lan"), "{w}");
        assert!(!w.contains("/metrics"), "{w}");
        let p = proxy_with(|c| c.allowed_hosts = vec!["*".into()]);
        let w = p.warnings(at("127.0.0.1:8787")).join("\n");
        assert!(
            w.contains("any Host header") && w.contains("DNS rebinding"),
            "{w}"
        );
        let e = ProxyConfig::new("http://127.0.0.1:9/v1", ctxpress::preset("agent").unwrap());
        let mut e = e;
        e.pipeline.window.size = Some(1000);
        e.allowed_hosts = vec!["evil.example/x".into()];
        let e = Proxy::new(e).unwrap_err().to_string();
        assert!(e.contains("allowed host `evil.example/x`"), "{e}");
    }

    /// The router of a proxy listening beyond loopback, asked directly (no
    /// port opened beyond loopback): any Host answered; `/metrics` refused
    /// without an admin token (403), answered with it; on loopback,
    /// `/metrics` is open without a token and a foreign Host is refused.
    #[tokio::test]
    async fn the_admin_endpoints_need_the_token_beyond_loopback() {
        use hyper::service::Service;
        async fn ask(
            p: &Proxy,
            local: &str,
            path: &str,
            host: &str,
            token: Option<&str>,
        ) -> (u16, String) {
            let svc = hyper_util::service::TowerToHyperService::new(p.router(at(local)));
            let mut req = axum::http::Request::get(path).header("host", host);
            if let Some(t) = token {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            let r = svc.call(req.body(Body::empty()).unwrap()).await.unwrap();
            let status = r.status().as_u16();
            let body = r.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
        let open = proxy_with(|_| {});
        let (st, body) = ask(&open, "0.0.0.0:8787", "/metrics", "10.1.2.3:8787", None).await;
        assert_eq!(st, 403, "{body}");
        assert!(body.contains("needs the admin token when the proxy listens beyond loopback"));
        let (st, _) = ask(&open, "0.0.0.0:8787", "/ctxpress/health", "x", None).await;
        assert_eq!(st, 200);
        let (st, body) = ask(&open, "127.0.0.1:8787", "/metrics", "localhost:8787", None).await;
        assert_eq!(st, 200, "{body}");
        assert!(
            body.contains("ctxpress_requests_misdirected_total 0"),
            "{body}"
        );
        let (st, body) = ask(
            &open,
            "127.0.0.1:8787",
            "/metrics",
            "evil.example:8787",
            None,
        )
        .await;
        assert_eq!(st, 421, "{body}");
        assert!(body.contains("Host `evil.example:8787`"), "{body}");
        let (_, body) = ask(&open, "127.0.0.1:8787", "/metrics", "localhost:8787", None).await;
        assert!(
            body.contains("ctxpress_requests_misdirected_total 1"),
            "{body}"
        );
        let guarded = proxy_with(|c| c.admin_token = Some(Secret("tok-9".into())));
        for local in ["0.0.0.0:8787", "127.0.0.1:8787"] {
            for (token, want) in [(None, 401), (Some("tok-"), 401), (Some("tok-9"), 200)] {
                let (st, body) = ask(&guarded, local, "/metrics", "localhost:8787", token).await;
                assert_eq!(st, want, "{local} {token:?}: {body}");
            }
        }
        // Search is the token's too: off without one, 401 without it.
        let (st, _) = ask(
            &open,
            "127.0.0.1:8787",
            "/ctxpress/search?q=x",
            "localhost:8787",
            None,
        )
        .await;
        assert_eq!(st, 404);
        let (st, _) = ask(
            &guarded,
            "127.0.0.1:8787",
            "/ctxpress/search?q=x",
            "localhost:8787",
            None,
        )
        .await;
        assert_eq!(st, 401);
    }

    /// `--mcp` needs the admin token and an archive; `/mcp` answers only
    /// requests that carry the token, and the Host check applies to it.
    #[cfg(feature = "mcp")]
    #[tokio::test]
    async fn mcp_is_mounted_behind_the_admin_token() {
        use hyper::service::Service;
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = ProxyConfig::new("http://127.0.0.1:9/v1", ctxpress::preset("agent").unwrap());
        cfg.pipeline.window.size = Some(1000);
        cfg.mcp = true;
        let e = Proxy::new(cfg.clone()).unwrap_err().to_string();
        assert!(e.contains("--mcp") && e.contains("admin token"), "{e}");
        cfg.admin_token = Some(Secret("tok-m".into()));
        let e = Proxy::new(cfg.clone()).unwrap_err().to_string();
        assert!(e.contains("archive"), "{e}");
        cfg.archive = Some(dir.path().join("a.db"));
        cfg.log = false;
        let p = Proxy::new(cfg).unwrap();
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let ask = |host: &'static str, token: Option<&'static str>| {
            let svc = hyper_util::service::TowerToHyperService::new(p.router(at("127.0.0.1:8787")));
            async move {
                let mut req = axum::http::Request::post("/mcp")
                    .header("host", host)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream");
                if let Some(t) = token {
                    req = req.header("authorization", format!("Bearer {t}"));
                }
                let r = svc.call(req.body(Body::from(init)).unwrap()).await.unwrap();
                let status = r.status().as_u16();
                let body = r.into_body().collect().await.unwrap().to_bytes();
                (status, String::from_utf8_lossy(&body).into_owned())
            }
        };
        assert_eq!(ask("localhost:8787", None).await.0, 401);
        assert_eq!(ask("localhost:8787", Some("tok-x")).await.0, 401);
        assert_eq!(ask("evil.example:8787", Some("tok-m")).await.0, 421);
        let (st, body) = ask("localhost:8787", Some("tok-m")).await;
        assert_eq!(st, 200, "{body}");
        assert!(
            body.contains("\"serverInfo\":{\"name\":\"ctxpress\""),
            "{body}"
        );
    }

    #[test]
    fn the_serve_table_takes_the_former_token_name() {
        let mut cfg = ctxpress::PipelineConfig::parse(
            "version = 1\n[window]\nsize = 1000\n[serve]\nupstream = \"http://h/v1\"\nsearch_token = \"t1\"\nallowed_hosts = [\"proxy.lan\"]\n",
        )
        .unwrap();
        let t = ServeTable::of(&cfg).unwrap();
        assert_eq!(t.admin_token, Some(Secret("t1".into())));
        assert_eq!(t.allowed_hosts, ["proxy.lan"]);
        let p = t.config(cfg.clone()).unwrap();
        assert_eq!(p.admin_token, Some(Secret("t1".into())));
        cfg.serve = None;
        assert_eq!(ServeTable::of(&cfg).unwrap().admin_token, None);
        let both = ctxpress::PipelineConfig::parse(
            "version = 1\n[serve]\nsearch_token = \"a\"\nadmin_token = \"b\"\n",
        )
        .unwrap();
        let e = ServeTable::of(&both).unwrap_err().to_string();
        assert!(e.contains("former name"), "{e}");
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"tok", b"tok"));
        assert!(!same_secret(b"tok", b"to"));
        assert!(!same_secret(b"tok", b"tok2"));
        assert!(!same_secret(b"", b"tok"));
    }
}
