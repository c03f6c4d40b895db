//! The Model Context Protocol server of `ctxpress mcp` and `ctxpress serve
//! --mcp`: a model reads back what ctxpress took out of its context.
//!
//! Built on the official Rust SDK (`rmcp`). Three read-only tools over one
//! SQLite archive (what `compress --archive`, `compact` and `serve` write):
//!
//! * `search_history` {query, conversation?, limit?}: ranked hits (FTS5,
//!   bm25), each with its recall handle (or null), conversation, role,
//!   snippet and where it is stored (record key and position);
//! * `recall` {handle, offset?, max_chars?}: the originals a handle (or a
//!   compaction batch label) stands for, as text
//!   ([`Recalled::to_text`](ctxpress::Recalled::to_text)), in pages; an
//!   answer that is not the last says which `offset` comes next;
//! * `history_outline` {conversation, offset?}: the conversation's handles
//!   (messages, roles, a one-line preview) and compaction batches.
//!
//! Bounds: every answer is at most [`MAX_ANSWER_BYTES`] (64 KiB) of text;
//! `limit` is 1 to [`MAX_HITS`] (default [`DEFAULT_HITS`]), `max_chars` 1
//! to [`MAX_PAGE_CHARS`] (default [`DEFAULT_PAGE_CHARS`]); string arguments
//! are at most [`MAX_ARGUMENT_BYTES`]. A request out of bounds is refused,
//! not clamped, so the model knows what it got.
//!
//! Errors: what a model can correct (a malformed or unknown handle, an
//! argument out of bounds or of the wrong type, an unknown conversation, an
//! archive that cannot be read) is a tool error (`isError: true`, the text
//! saying why and what to do), as the MCP specification asks for input
//! errors so the model sees them; an unknown tool name is a JSON-RPC
//! invalid-params error.
//!
//! Transports: stdio ([`serve_stdio`], until stdin closes), streamable HTTP
//! on a listener of its own ([`serve_http`], at `/mcp`; bearer token
//! required beyond loopback, the `Host` checked against DNS rebinding), and
//! mounted on the proxy (`ProxyConfig::mcp`, behind the admin token). Over
//! HTTP the server is stateless: each POST is answered with JSON, no
//! session is kept between requests.
//!
//! The handler is written by hand (`impl ServerHandler`), without `rmcp`'s
//! macros.

mod tools;

pub use tools::{
    DEFAULT_HITS, DEFAULT_PAGE_CHARS, MAX_ANSWER_BYTES, MAX_ARGUMENT_BYTES, MAX_HITS,
    MAX_PAGE_CHARS, OUTLINE_BATCHES, OUTLINE_HANDLES,
};

use crate::Secret;
use crate::admin::same_secret;
use crate::hosts::Hosts;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Response, StatusCode};
use ctxpress::store::SqliteArchive;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use std::net::SocketAddr;
use std::sync::Arc;

/// What the server tells a client it is for (MCP `instructions`).
const INSTRUCTIONS: &str = "ctxpress compresses long conversation histories: old tool \
    results are summarized, repeats replaced by references, old exchanges evicted behind a \
    ledger note. Every marker it writes carries a recall handle, `#h` and 10 hex digits \
    ([summary#h7f3a2c91d0: ...]). Everything it took out is archived word for word: \
    `recall` a handle to read the originals, `search_history` for words you no longer \
    see (a file name, an error, an identifier), `history_outline` for what one \
    conversation has archived. Read-only; answers are at most 64 KiB.";

/// The MCP server over one archive: [`ServerHandler`] for `rmcp`.
#[derive(Clone)]
pub struct HistoryServer {
    archive: Arc<SqliteArchive>,
}

impl std::fmt::Debug for HistoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryServer")
            .field("archive", &self.archive.path())
            .finish()
    }
}

impl HistoryServer {
    /// The server over `archive` (read only).
    pub fn new(archive: Arc<SqliteArchive>) -> Self {
        HistoryServer { archive }
    }

    /// The tools as MCP lists them.
    pub fn tools() -> Vec<Tool> {
        tools::definitions()
            .into_iter()
            .map(|(name, description, schema)| {
                let schema = match schema {
                    serde_json::Value::Object(m) => m,
                    _ => serde_json::Map::new(),
                };
                Tool::new(name, description, Arc::new(schema)).annotate(
                    ToolAnnotations::new()
                        .read_only(true)
                        .destructive(false)
                        .idempotent(true)
                        .open_world(false),
                )
            })
            .collect()
    }
}

impl ServerHandler for HistoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ctxpress", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(Self::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let args = request
            .arguments
            .map_or(serde_json::Value::Null, serde_json::Value::Object);
        let archive = self.archive.clone();
        let tool = name.clone();
        // SQLite is blocking work: off the runtime's workers.
        let done = tokio::task::spawn_blocking(move || tools::call(&archive, &tool, args))
            .await
            .map_err(|e| ErrorData::internal_error(format!("{name}: {e}"), None))?;
        match done {
            None => Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`: the tools are search_history, recall and history_outline",
                    name.chars().take(100).collect::<String>()
                ),
                None,
            )),
            Some(Ok(answer)) => Ok(CallToolResult::success(
                answer.0.into_iter().map(ContentBlock::text).collect(),
            )
            .into()),
            Some(Err(why)) => Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into()),
        }
    }
}

/// Why the MCP server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The session could not start (the client's `initialize` failed).
    #[error("MCP session: {0}")]
    Session(String),
    /// Listening or serving HTTP failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Serve `archive` on stdin and stdout until stdin closes (or the client
/// ends the session); `Ok` then.
pub async fn serve_stdio(archive: Arc<SqliteArchive>) -> Result<(), McpError> {
    let running = HistoryServer::new(archive)
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| McpError::Session(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| McpError::Session(e.to_string()))?;
    Ok(())
}

/// The streamable HTTP service of the server over `archive`, for a router
/// that checks `Host` and credentials itself: stateless (JSON answers, no
/// session kept), requests of at most 1 MiB.
pub fn http_service(
    archive: Arc<SqliteArchive>,
) -> StreamableHttpService<HistoryServer, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(1 << 20);
    StreamableHttpService::new(
        move || Ok(HistoryServer::new(archive.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// State of the stand-alone HTTP router's guard.
struct Guard {
    hosts: Hosts,
    token: Option<Secret>,
}

/// The stand-alone HTTP routes of the server, listening on `local`:
/// `/mcp` only. A request must name the server in its `Host` (on loopback:
/// `localhost`, `127.0.0.1`, `[::1]` or `local`, on its port; else 421),
/// and carry `authorization: Bearer TOKEN` when a token is set (else 401).
pub fn router(archive: Arc<SqliteArchive>, token: Option<Secret>, local: SocketAddr) -> Router {
    let guard = Arc::new(Guard {
        hosts: Hosts::new(&[], local).unwrap_or(Hosts {
            any: false,
            names: Vec::new(),
        }),
        token: token.filter(|t| !t.0.is_empty()),
    });
    Router::new()
        .route_service("/mcp", http_service(archive))
        .layer(axum::middleware::from_fn_with_state(guard, check))
}

/// A plain-text refusal.
fn refusal(status: StatusCode, message: &str) -> Response<Body> {
    let mut r = Response::new(Body::from(format!("{message}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// `authorization: Bearer TOKEN` carries `token` (compared in constant time).
pub(crate) fn carries(headers: &axum::http::HeaderMap, token: &Secret) -> bool {
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    same_secret(given.trim().as_bytes(), token.0.as_bytes())
}

async fn check(
    State(g): State<Arc<Guard>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response<Body> {
    if !g.hosts.any {
        let mut hosts = req.headers().get_all(axum::http::header::HOST).iter();
        let ok = match (hosts.next(), hosts.next()) {
            (Some(h), None) => std::str::from_utf8(h.as_bytes()).is_ok_and(|h| g.hosts.allows(h)),
            _ => false,
        };
        if !ok {
            return refusal(
                StatusCode::MISDIRECTED_REQUEST,
                &format!(
                    "ctxpress mcp: refused: this server answers to {} (DNS rebinding)",
                    g.hosts.shown()
                ),
            );
        }
    }
    if let Some(t) = &g.token
        && !carries(req.headers(), t)
    {
        let mut r = refusal(
            StatusCode::UNAUTHORIZED,
            "ctxpress mcp: needs the token (authorization: Bearer TOKEN)",
        );
        r.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
        return r;
    }
    next.run(req).await
}

/// Serve `archive` over streamable HTTP at `/mcp` on `listener` (see
/// [`router`]) until `shutdown` completes, then finish the requests in
/// flight and return.
pub async fn serve_http(
    archive: Arc<SqliteArchive>,
    listener: tokio::net::TcpListener,
    token: Option<Secret>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), McpError> {
    let local = listener.local_addr()?;
    let app = router(archive, token, local);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
