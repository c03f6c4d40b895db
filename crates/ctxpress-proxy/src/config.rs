//! The proxy's configuration (`ProxyConfig`, the `[serve]` table) and why it
//! cannot start.

use ctxpress::PipelineConfig;
use std::path::PathBuf;
use std::time::Duration;

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
    /// ([`ctxpress::session::Session::retained_bytes`]); the least recently used go first.
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
    /// [`Proxy::router`](crate::Proxy::router)): `NAME` on any port, `NAME:PORT` on that one
    /// (IPv6 in brackets), `*` for any. Empty: on loopback, only its own
    /// names; beyond loopback, any (the start-up warning says so).
    pub allowed_hosts: Vec<String>,
    /// Write one JSON line per request to stderr.
    pub log: bool,
    /// Serve the MCP server of the `mcp` module over the archive at `/mcp` (needs
    /// the admin token and an archive; see [`Proxy::router`](crate::Proxy::router)).
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
