//! The admin routes: `/metrics`, `/ctxpress/search` and the MCP guard, the
//! admin token check they share, and the `Host` check every route but health
//! passes.

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Uri};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Api, App, error_response};

pub(crate) async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response<Body> {
    if let Some(r) = admin_refusal(&app, &headers, "/metrics") {
        return r;
    }
    let s = &app.s;
    let m = &s.metrics;
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (sessions, session_bytes) = s.sessions.lock().map_or((0, 0), |x| (x.map.len(), x.total));
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
        "ctxpress_requests_refused_total",
        "counter",
        "Requests refused for their path (malformed, or outside /v1): never forwarded.",
        g(&m.refused).to_string(),
    );
    put(
        "ctxpress_requests_misdirected_total",
        "counter",
        "Requests refused for their Host header (a name this proxy does not answer to): never forwarded.",
        g(&m.misdirected).to_string(),
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
        "Requests being handled (a streamed response until its body ends).",
        g(&m.in_flight).to_string(),
    );
    put(
        "ctxpress_requests_waiting",
        "gauge",
        "Requests waiting for a place under the in-flight limit.",
        g(&m.waiting).to_string(),
    );
    put(
        "ctxpress_sessions",
        "gauge",
        "Sessions kept.",
        sessions.to_string(),
    );
    put(
        "ctxpress_sessions_bytes",
        "gauge",
        "Bytes the sessions are estimated to hold (bounded by the session memory budget).",
        session_bytes.to_string(),
    );
    put(
        "ctxpress_sessions_dropped_total",
        "counter",
        "Sessions dropped for the memory budget or unused for the idle time.",
        g(&m.sessions_dropped).to_string(),
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
    /// The `x-ctxpress-conversation` header of its responses (a key salted
    /// per process from the client's credential and the conversation, so
    /// it cannot be guessed).
    conversation: Option<String>,
    limit: Option<usize>,
}

/// Equal, in a time that depends on the lengths only.
pub(crate) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    std::hint::black_box(diff) == 0
}

/// The proxy's own endpoints but health (`/metrics`, search): with an
/// admin token, for requests that carry it (`authorization: Bearer
/// TOKEN`, compared in constant time; 401 else); without one, on loopback
/// only (403 beyond it). The refusal, if any.
fn admin_refusal(app: &App, headers: &HeaderMap, what: &str) -> Option<Response<Body>> {
    let Some(token) = app.s.cfg.admin_token.as_ref().filter(|t| !t.0.is_empty()) else {
        return app.beyond_loopback.then(|| {
            error_response(
                StatusCode::FORBIDDEN,
                Api::Other,
                &format!(
                    "ctxpress: {what} needs the admin token when the proxy listens beyond loopback (--admin-token, $CTXPRESS_ADMIN_TOKEN or `serve.admin_token`)"
                ),
            )
        });
    };
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if same_secret(given.trim().as_bytes(), token.0.as_bytes()) {
        return None;
    }
    let mut r = error_response(
        StatusCode::UNAUTHORIZED,
        Api::Other,
        &format!("ctxpress: {what} needs the admin token (authorization: Bearer TOKEN)"),
    );
    r.headers_mut().insert(
        axum::http::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer"),
    );
    Some(r)
}

/// `/mcp`: the admin token's (`Proxy::new` refuses `mcp` without one).
#[cfg(feature = "mcp")]
pub(crate) async fn mcp_guard(
    State(app): State<Arc<App>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response<Body> {
    if let Some(r) = admin_refusal(&app, req.headers(), "/mcp") {
        return r;
    }
    next.run(req).await
}

/// Every request but `GET /ctxpress/health`: its `Host` (one, and the
/// target's authority when the target is absolute) must be one the proxy
/// answers to; 421 else, never forwarded.
pub(crate) async fn check_host(
    State(app): State<Arc<App>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response<Body> {
    if app.hosts.any || req.uri().path() == "/ctxpress/health" {
        return next.run(req).await;
    }
    let mut given = req.headers().get_all(axum::http::header::HOST).iter();
    let host = given
        .next()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let refused = match (&host, given.next(), req.uri().authority()) {
        (None, _, None) => Some("no Host header".to_string()),
        (Some(_), Some(_), _) => Some("more than one Host header".to_string()),
        (h, _, a) => h
            .iter()
            .map(String::as_str)
            .chain(a.map(|a| a.as_str()))
            .find(|h| !app.hosts.allows(h))
            .map(|h| {
                let shown: String = h.chars().take(100).collect();
                format!("Host `{}`", shown.escape_debug())
            }),
    };
    let Some(what) = refused else {
        return next.run(req).await;
    };
    let s = &app.s;
    s.metrics.misdirected.fetch_add(1, Ordering::Relaxed);
    let api = match (req.method(), req.uri().path()) {
        (&Method::POST, "/v1/messages") => Api::Anthropic,
        (&Method::POST, "/v1/chat/completions") => Api::OpenAi,
        _ => Api::Other,
    };
    let r = error_response(
        StatusCode::MISDIRECTED_REQUEST,
        api,
        &format!(
            "ctxpress: refused: {what}; this proxy answers to {} (--allow-host NAME or `serve.allowed_hosts` adds a name)",
            app.hosts.shown()
        ),
    );
    if s.cfg.log {
        let id = s.next_id.fetch_add(1, Ordering::Relaxed);
        let line = serde_json::json!({
            "id": id,
            "api": api.name(),
            "method": req.method().as_str(),
            "path": req.uri().path(),
            "status": r.status().as_u16(),
            "note": "Host refused",
        });
        eprintln!("{line}");
    }
    r
}

/// `GET /ctxpress/search?q=WORDS&conversation=ID`:
/// off without an admin token; with one, the request must carry it
/// (`authorization: Bearer TOKEN`), and hits come from the one conversation
/// named, so a client reads its own history only.
pub(crate) async fn search(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response<Body> {
    let s = &app.s;
    if s.cfg.admin_token.as_ref().is_none_or(|t| t.0.is_empty()) {
        return error_response(
            StatusCode::NOT_FOUND,
            Api::Other,
            "ctxpress: search is off (--admin-token or `serve.admin_token` turns it on)",
        );
    }
    if let Some(r) = admin_refusal(&app, &headers, "search") {
        return r;
    }
    let Some(a) = s.archive.clone() else {
        return error_response(
            StatusCode::NOT_FOUND,
            Api::Other,
            "ctxpress: this proxy keeps no archive (--archive)",
        );
    };
    let bad = |m: &str| error_response(StatusCode::BAD_REQUEST, Api::Other, m);
    let p = match Query::<SearchParams>::try_from_uri(&uri) {
        Ok(Query(p)) => p,
        Err(e) => return bad(&format!("ctxpress: search: {e}")),
    };
    let Some(conversation) = p.conversation.clone().filter(|c| !c.is_empty()) else {
        return bad(
            "ctxpress: search: name the conversation: `conversation=ID`, the x-ctxpress-conversation header of its responses",
        );
    };
    let limit = p.limit.unwrap_or(20).min(1000);
    let found =
        tokio::task::spawn_blocking(move || a.search(&p.q, Some(&conversation), limit)).await;
    match found {
        Ok(Ok(hits)) => {
            let v: Vec<serde_json::Value> = hits.iter().map(|h| h.to_json()).collect();
            let mut r = Response::new(Body::from(serde_json::Value::Array(v).to_string()));
            r.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        Ok(Err(e)) => bad(&format!("ctxpress: search: {e}")),
        Err(_) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            Api::Other,
            "ctxpress: search failed",
        ),
    }
}
