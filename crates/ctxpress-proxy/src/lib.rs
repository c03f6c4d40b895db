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
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, Uri};
use axum::routing::get;
use ctxpress::core::Format;
use ctxpress::session::{content_read_hash, read_hash};
use ctxpress::store::SqliteArchive;
use ctxpress::{Conversation, PipelineConfig, Session};
use http_body_util::BodyExt;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(feature = "mcp")]
pub mod mcp;

/// The header that names a conversation's session explicitly.
pub const SESSION_HEADER: &str = "x-ctxpress-session";

/// The response header naming the conversation a request was archived
/// under (what `GET /ctxpress/search?conversation=` takes).
pub const CONVERSATION_HEADER: &str = "x-ctxpress-conversation";

/// A secret in a configuration: shown as `***` by `Debug`.
#[derive(Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// What the proxy needs to run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The upstream API's base URL, e.g. `https://api.openai.com/v1`. A
    /// request for `/v1/X` goes to `BASE/X` when the base's path ends in
    /// `/v1`, else to `BASE/v1/X`; other paths go nowhere. A query in it
    /// (`?key=...`) is added to every request, before the client's own
    /// parameters (a client parameter of the same name is dropped).
    pub upstream: String,
    /// The pipeline, with a window or a budget (sessions need one).
    pub pipeline: PipelineConfig,
    /// The SQLite archive of originals (searchable); `None` keeps none.
    pub archive: Option<PathBuf>,
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    /// Requests in flight at once (a streamed response until its body
    /// ends); more wait.
    pub max_in_flight: usize,
    /// Sessions kept; the least recently used goes beyond this.
    pub max_sessions: usize,
    /// Bytes the sessions may hold between turns, estimated
    /// ([`Session::retained_bytes`]); the least recently used go first.
    pub session_memory: usize,
    /// A session unused this long is dropped.
    pub session_idle: Duration,
    /// Time to connect to the upstream.
    pub connect_timeout: Duration,
    /// Longest wait for the upstream's next bytes.
    pub read_timeout: Duration,
    /// Time a client has to send a request's headers (the connection is
    /// closed after it).
    pub header_timeout: Duration,
    /// Time a client has to send a request's body (answered 408 after it).
    pub body_timeout: Duration,
    /// After the shutdown signal, time left to the requests in flight;
    /// connections still open then are closed.
    pub shutdown_grace: Duration,
    /// Bearer token of the proxy's own endpoints, `GET /metrics` and `GET
    /// /ctxpress/search` (`/ctxpress/health` needs none). `None` (or
    /// empty): search is off, and `/metrics` answers on loopback only (a
    /// proxy listening beyond it refuses it with 403).
    pub admin_token: Option<Secret>,
    /// `Host` names the proxy answers to besides its own (see
    /// [`Proxy::router`]): `NAME` on any port, `NAME:PORT` on that one
    /// (IPv6 in brackets), `*` for any. Empty: on loopback, only its own
    /// names; beyond loopback, any (the start-up warning says so).
    pub allowed_hosts: Vec<String>,
    /// Write one JSON line per request to stderr.
    pub log: bool,
    /// Serve the MCP server of the `mcp` module over the archive at `/mcp` (needs
    /// the admin token and an archive; see [`Proxy::router`]).
    pub mcp: bool,
}

impl ProxyConfig {
    /// Defaults around an upstream and a pipeline: 32 MiB bodies, 64
    /// requests in flight, 1024 sessions in 256 MiB dropped after an hour
    /// unused, 10 s to connect, 600 s between upstream bytes, 30 s for a
    /// request's headers, 120 s for its body, 30 s of grace at shutdown,
    /// no admin token (no search), the loopback names only, logging on,
    /// no archive.
    pub fn new(upstream: impl Into<String>, pipeline: PipelineConfig) -> Self {
        ProxyConfig {
            upstream: upstream.into(),
            pipeline,
            archive: None,
            body_limit: 32 << 20,
            max_in_flight: 64,
            max_sessions: 1024,
            session_memory: 256 << 20,
            session_idle: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(600),
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(120),
            shutdown_grace: Duration::from_secs(30),
            admin_token: None,
            allowed_hosts: Vec::new(),
            log: true,
            mcp: false,
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
    /// Memory the sessions may hold, in MiB.
    pub session_memory_mb: usize,
    /// A session unused this long is dropped, in milliseconds.
    pub session_idle_ms: u64,
    /// Time to connect to the upstream, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Longest wait for the upstream's next bytes, in milliseconds.
    pub read_timeout_ms: u64,
    /// Time a client has to send a request's headers, in milliseconds.
    pub header_timeout_ms: u64,
    /// Time a client has to send a request's body, in milliseconds.
    pub body_timeout_ms: u64,
    /// Time left to the requests in flight at shutdown, in milliseconds.
    pub shutdown_grace_ms: u64,
    /// Bearer token of `GET /metrics` and `GET /ctxpress/search` (search
    /// is off without one); `search_token`, its former name, is read as
    /// it.
    pub admin_token: Option<Secret>,
    /// `Host` names to answer to besides the proxy's own (`NAME`,
    /// `NAME:PORT`, `*` for any).
    pub allowed_hosts: Vec<String>,
    /// One JSON line per request on stderr.
    pub log: bool,
    /// Serve the MCP server at `/mcp` (needs `admin_token` and an archive).
    pub mcp: bool,
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
            session_memory_mb: 256,
            session_idle_ms: 3_600_000,
            connect_timeout_ms: 10_000,
            read_timeout_ms: 600_000,
            header_timeout_ms: 30_000,
            body_timeout_ms: 120_000,
            shutdown_grace_ms: 30_000,
            admin_token: None,
            allowed_hosts: Vec::new(),
            log: true,
            mcp: false,
        }
    }
}

impl ServeTable {
    /// The `[serve]` table of `cfg` (defaults for what it leaves out);
    /// errors name the field and suggest the closest known one.
    pub fn of(cfg: &PipelineConfig) -> Result<Self, ctxpress::core::ConfigError> {
        match &cfg.serve {
            None => Ok(ServeTable::default()),
            Some(m) => {
                let mut m = m.clone();
                if let Some(v) = m.remove("search_token") {
                    if m.contains_key("admin_token") {
                        return Err(ctxpress::core::ConfigError::Invalid(
                            "serve: `search_token` is the former name of `admin_token`: set one of them".into(),
                        ));
                    }
                    m.insert("admin_token".into(), v);
                }
                ctxpress::core::parse_params("serve", &serde_json::Value::Object(m))
            }
        }
    }

    /// The proxy configuration these settings make with `cfg`'s pipeline.
    pub fn config(&self, cfg: PipelineConfig) -> Result<ProxyConfig, ProxyError> {
        let upstream = self
            .upstream
            .clone()
            .ok_or_else(|| ProxyError::Upstream(String::new()))?;
        let ms = |n: u64| Duration::from_millis(n.max(1));
        let mut p = ProxyConfig::new(upstream, cfg);
        p.archive = (!self.archive.is_empty()).then(|| PathBuf::from(&self.archive));
        p.body_limit = self.body_limit_mb.max(1) << 20;
        p.max_in_flight = self.max_in_flight.max(1);
        p.max_sessions = self.max_sessions.max(1);
        p.session_memory = self.session_memory_mb.max(1).saturating_mul(1 << 20);
        p.session_idle = ms(self.session_idle_ms);
        p.connect_timeout = ms(self.connect_timeout_ms);
        p.read_timeout = ms(self.read_timeout_ms);
        p.header_timeout = ms(self.header_timeout_ms);
        p.body_timeout = ms(self.body_timeout_ms);
        p.shutdown_grace = ms(self.shutdown_grace_ms);
        p.admin_token = self.admin_token.clone().filter(|t| !t.0.is_empty());
        p.allowed_hosts = self.allowed_hosts.clone();
        p.log = self.log;
        p.mcp = self.mcp;
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
    /// The upstream URL (shown with its credentials and query masked).
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
    /// An allowed host that is not one.
    #[error(
        "allowed host `{0}`: expected NAME, NAME:PORT, [IPv6]:PORT or * (--allow-host or `serve.allowed_hosts`)"
    )]
    AllowedHost(String),
    /// The MCP server asked for without what it needs.
    #[error("--mcp (`serve.mcp`): {0}")]
    Mcp(&'static str),
}

/// `url` as it may be printed or returned: user and password masked, and
/// the query (which may hold a key) replaced by `?***`.
pub fn shown_url(url: &str) -> String {
    let masked = ctxpress::core::secrets::mask_url_credentials(url);
    match masked.find(['?', '#']) {
        Some(i) if masked[i..].starts_with('?') => format!("{}?***", &masked[..i]),
        Some(i) => masked[..i].to_string(),
        None => masked,
    }
}

/// The upstream, parsed once.
struct Upstream {
    /// `scheme://authority/path`, without a trailing `/` or a query.
    base: String,
    /// The base path ends in `/v1`: `/v1/X` goes to `BASE/X`.
    v1: bool,
    /// The base URL's query, sent on every request.
    query: Option<String>,
    /// Its parameter names, decoded: a client's parameter of one of these
    /// names is dropped.
    names: Vec<String>,
    /// For messages.
    shown: String,
}

impl Upstream {
    fn parse(s: &str) -> Result<Self, ProxyError> {
        let bad = || ProxyError::Upstream(shown_url(s));
        let mut url = reqwest::Url::parse(s).map_err(|_| bad())?;
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(bad());
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad());
        }
        let query = url.query().filter(|q| !q.is_empty()).map(str::to_string);
        let names = query
            .as_deref()
            .map(|q| q.split('&').map(param_name).collect())
            .unwrap_or_default();
        url.set_query(None);
        url.set_fragment(None);
        let base = url.as_str().trim_end_matches('/').to_string();
        let v1 = url.path().trim_end_matches('/').ends_with("/v1");
        Ok(Upstream {
            shown: shown_url(s),
            base,
            v1,
            query,
            names,
        })
    }

    /// The URL a request for the normalized API path `segments` (starting
    /// with `v1`) goes to, with the client's query after the upstream's.
    fn url(&self, segments: &[String], client_query: Option<&str>) -> String {
        let rest = if self.v1 {
            segments.get(1..).unwrap_or_default()
        } else {
            segments
        };
        let mut url = self.base.clone();
        for s in rest {
            url.push('/');
            url.push_str(s);
        }
        let mut params: Vec<&str> = self.query.iter().map(String::as_str).collect();
        for p in client_query.unwrap_or("").split('&') {
            if !p.is_empty() && !self.names.contains(&param_name(p)) {
                params.push(p);
            }
        }
        if !params.is_empty() {
            url.push('?');
            url.push_str(&params.join("&"));
        }
        url
    }
}

/// The decoded name of a `name=value` query parameter.
fn param_name(pair: &str) -> String {
    let name = pair.split('=').next().unwrap_or("").replace('+', " ");
    String::from_utf8_lossy(&percent_decode(name.as_bytes()).unwrap_or_default()).into_owned()
}

fn percent_decode(raw: &[u8]) -> Option<Vec<u8>> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let hi = hex(*raw.get(i + 1)?)?;
            let lo = hex(*raw.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Where a request path leads.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// Under `/v1`: its normalized segments, `v1` first.
    Api(Vec<String>),
    /// A well-formed path outside `/v1`.
    Outside,
    /// Malformed, or climbing out of `/v1`: never forwarded.
    Bad(&'static str),
}

/// Normalize a request path (as sent, percent-encoded): decode it once,
/// read `\` as `/`, drop empty and `.` segments, apply `..`. What is left
/// must be plain ASCII segments (letters, digits, `-._~!$&'()*+,=:@`; no
/// `;`, which some servers read as the end of a segment, as in `..;`): a
/// `%` left after decoding (double encoding), a control character, a
/// non-ASCII character (look-alike dots among them), or a segment of dots
/// only is refused, so that no server behind can read the path another
/// way.
fn target(raw: &str) -> Target {
    let Some(bytes) = percent_decode(raw.as_bytes()) else {
        return Target::Bad("malformed percent-encoding");
    };
    let Ok(path) = String::from_utf8(bytes) else {
        return Target::Bad("not UTF-8");
    };
    let mut segs: Vec<String> = Vec::new();
    let mut climbed = false;
    for seg in path.split(['/', '\\']) {
        match seg {
            "" | "." => {}
            ".." => {
                climbed = true;
                if segs.pop().is_none() {
                    return Target::Bad("climbs above the root");
                }
            }
            s if s.bytes().all(|b| b == b'.') => return Target::Bad("a segment of dots"),
            s if s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,=:@".contains(&b)) =>
            {
                segs.push(s.to_string())
            }
            _ => return Target::Bad("characters not allowed in an API path"),
        }
    }
    match segs.first().map(String::as_str) {
        Some("v1") => Target::Api(segs),
        _ if climbed => Target::Bad("climbs out of /v1"),
        _ => Target::Outside,
    }
}

/// A `Host` (or an allowed host): its name, lowercased (IPv6 in brackets,
/// written the one way; a trailing dot dropped), and its port if it names
/// one. `None` when it is not a host.
fn parse_host(raw: &str) -> Option<(String, Option<u16>)> {
    let s = raw.trim().to_ascii_lowercase();
    let port = |p: &str| -> Option<Option<u16>> {
        match p {
            "" => Some(None),
            p => p.strip_prefix(':')?.parse().ok().map(Some),
        }
    };
    let (name, port) = if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']')?;
        let ip: std::net::Ipv6Addr = rest[..end].parse().ok()?;
        (format!("[{ip}]"), port(&rest[end + 1..])?)
    } else {
        let (name, p) = match s.rfind(':') {
            Some(i) => (&s[..i], port(&s[i..])?),
            None => (s.as_str(), None),
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
        if name.is_empty() || !name.chars().all(ok) {
            return None;
        }
        (name.to_string(), p)
    };
    Some((name, port))
}

/// The `Host` names a request may carry. A web page whose DNS name its
/// author points at 127.0.0.1 (DNS rebinding) reaches a loopback proxy
/// with its own name in `Host`: refused, it cannot use the upstream with
/// the credentials in the upstream URL nor read the proxy's endpoints.
#[derive(Debug, Clone)]
struct Hosts {
    /// Every host is answered.
    any: bool,
    /// (name, port); a port of `None` stands for any.
    names: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// For a proxy listening on `local`: `localhost`, `127.0.0.1`, `[::1]`
    /// and the listening address, on its port, plus `allowed`; any host
    /// when `allowed` holds `*`, or is empty and `local` is beyond loopback.
    fn new(allowed: &[String], local: SocketAddr) -> Result<Self, ProxyError> {
        let port = Some(local.port());
        let mut names: Vec<(String, Option<u16>)> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|n| (n.to_string(), port))
            .collect();
        if !local.ip().is_unspecified() {
            let own = match local.ip() {
                std::net::IpAddr::V4(ip) => ip.to_string(),
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            };
            if !names.iter().any(|(n, _)| *n == own) {
                names.push((own, port));
            }
        }
        let mut any = allowed.is_empty() && !local.ip().is_loopback();
        for a in allowed {
            if a.trim() == "*" {
                any = true;
                continue;
            }
            let h = parse_host(a).ok_or_else(|| ProxyError::AllowedHost(a.clone()))?;
            if !names.contains(&h) {
                names.push(h);
            }
        }
        Ok(Hosts { any, names })
    }

    /// True when a request naming `host` is answered (a `Host` without a
    /// port names port 80).
    fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let Some((name, port)) = parse_host(host) else {
            return false;
        };
        let port = port.unwrap_or(80);
        self.names
            .iter()
            .any(|(n, p)| *n == name && p.is_none_or(|p| p == port))
    }

    /// The names, as an error message lists them.
    fn shown(&self) -> String {
        let v: Vec<String> = self
            .names
            .iter()
            .map(|(n, p)| match p {
                Some(p) => format!("{n}:{p}"),
                None => n.clone(),
            })
            .collect();
        v.join(", ")
    }
}

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

/// Sessions by key, least recently used first; what each is estimated to
/// hold and when it was last used.
#[derive(Default)]
struct Sessions {
    map: HashMap<String, Arc<tokio::sync::Mutex<Session>>>,
    order: VecDeque<String>,
    bytes: HashMap<String, usize>,
    used: HashMap<String, Instant>,
    total: usize,
}

impl Sessions {
    /// Drop `key`'s accounting (it left the table).
    fn forget(&mut self, key: &str) {
        if let Some(b) = self.bytes.remove(key) {
            self.total -= b;
        }
        self.used.remove(key);
    }

    /// Drop the accounting of keys no longer in the table (the count cap
    /// drops sessions without it).
    fn sync(&mut self) {
        if self.bytes.len() > self.map.len() {
            let gone: Vec<String> = self
                .bytes
                .keys()
                .filter(|k| !self.map.contains_key(*k))
                .cloned()
                .collect();
            for k in gone {
                self.forget(&k);
            }
        }
    }

    /// Drop the least recently used session; false when there is none.
    fn drop_oldest(&mut self) -> bool {
        let Some(old) = self.order.pop_front() else {
            return false;
        };
        self.map.remove(&old);
        self.forget(&old);
        true
    }

    /// Drop the sessions unused for `idle` (the oldest are first in line);
    /// how many went.
    fn expire(&mut self, idle: Duration, now: Instant) -> u64 {
        let mut n = 0;
        while let Some(k) = self.order.front() {
            // A session not yet accounted is being made: used now.
            let used = self.used.get(k).copied().unwrap_or(now);
            if now.saturating_duration_since(used) < idle {
                break;
            }
            self.drop_oldest();
            n += 1;
        }
        n
    }
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

/// The archive as one session sees it: every record filed under the
/// session's conversation id, so search can answer for that conversation
/// alone.
struct Filed {
    archive: Arc<SqliteArchive>,
    conversation: String,
}

impl ctxpress::core::Archive for Filed {
    fn put(
        &self,
        records: &[ctxpress::core::archive::Record],
    ) -> Result<(), ctxpress::core::archive::ArchiveError> {
        self.archive.put_for(Some(&self.conversation), records)
    }
    fn get(&self, key: &str) -> Result<Option<Vec<String>>, ctxpress::core::archive::ArchiveError> {
        self.archive.get(key)
    }
    fn put_for(
        &self,
        _conversation: Option<&str>,
        records: &[ctxpress::core::archive::Record],
    ) -> Result<(), ctxpress::core::archive::ArchiveError> {
        self.archive.put_for(Some(&self.conversation), records)
    }
    fn cache_get(
        &self,
        key: &str,
    ) -> Result<Option<String>, ctxpress::core::archive::ArchiveError> {
        self.archive.cache_get(key)
    }
    fn cache_put(
        &self,
        key: &str,
        value: &str,
    ) -> Result<(), ctxpress::core::archive::ArchiveError> {
        self.archive.cache_put(key, value)
    }
}

/// Note what session `key` holds now, then drop sessions, least recently
/// used first, until the table is within the memory budget, and those
/// unused for the idle time.
fn settle(s: &Shared, key: &str, bytes: usize) {
    let Ok(mut g) = s.sessions.lock() else {
        return;
    };
    g.sync();
    let now = Instant::now();
    if g.map.contains_key(key) {
        let bytes = bytes + 2 * key.len() + 128;
        let old = g.bytes.insert(key.to_string(), bytes).unwrap_or(0);
        g.total = g.total - old + bytes;
        g.used.insert(key.to_string(), now);
    }
    let mut dropped = g.expire(s.cfg.session_idle, now);
    while g.total > s.cfg.session_memory && g.drop_oldest() {
        dropped += 1;
    }
    s.metrics
        .sessions_dropped
        .fetch_add(dropped, Ordering::Relaxed);
}

/// Drop the sessions unused for the idle time.
fn expire(s: &Shared) {
    if let Ok(mut g) = s.sessions.lock() {
        g.sync();
        let n = g.expire(s.cfg.session_idle, Instant::now());
        s.metrics.sessions_dropped.fetch_add(n, Ordering::Relaxed);
    }
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
async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response<Body> {
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
fn same_secret(a: &[u8], b: &[u8]) -> bool {
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
async fn mcp_guard(
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
async fn check_host(
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
async fn search(State(app): State<Arc<App>>, headers: HeaderMap, uri: Uri) -> Response<Body> {
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

#[cfg(test)]
mod tests {
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
