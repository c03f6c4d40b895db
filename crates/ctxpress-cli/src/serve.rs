//! `ctxpress serve`: the compressing proxy of `ctxpress-proxy`, configured
//! from flags over the `[serve]` table of `--config`.

use crate::{LimitArgs, LlmArgs, usage};
use anyhow::{Context, Result};
use ctxpress_proxy::{Proxy, ServeTable};
use std::process::ExitCode;

/// Arguments of `ctxpress serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Required: the upstream API's base URL, e.g. <https://api.openai.com/v1>
    /// or <https://api.anthropic.com/v1> (unless `upstream` is set in the
    /// `[serve]` table of --config).
    #[arg(long, value_name = "URL", required_unless_present = "config")]
    upstream: Option<String>,
    /// Address to listen on [default: 127.0.0.1:8787].
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    #[command(flatten)]
    limits: LimitArgs,
    /// Preset name [default: agent].
    #[arg(long, conflicts_with = "config")]
    preset: Option<String>,
    /// Pipeline configuration file (TOML or JSON), `[serve]` table included.
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    /// SQLite archive of the originals [default: ctxpress-serve.db].
    #[arg(long, value_name = "DB")]
    archive: Option<String>,
    /// Keep no archive.
    #[arg(long, conflicts_with = "archive")]
    no_archive: bool,
    #[command(flatten)]
    llm: LlmArgs,
    /// Requests handled at once; more wait [default: 64].
    #[arg(long, value_name = "N")]
    max_in_flight: Option<usize>,
    /// Largest request body in MiB [default: 32].
    #[arg(long, value_name = "MIB")]
    body_limit_mb: Option<usize>,
    /// Memory the sessions may hold, in MiB; the least recently used are
    /// dropped first [default: 256].
    #[arg(long, value_name = "MIB")]
    session_memory_mb: Option<usize>,
    /// The admin token: `GET /metrics` and `GET /ctxpress/search` answer
    /// requests that carry it (`authorization: Bearer TOKEN`); also
    /// $CTXPRESS_ADMIN_TOKEN or `serve.admin_token` (formerly
    /// --search-token, $CTXPRESS_SEARCH_TOKEN, `serve.search_token`).
    /// Without one, search is off and /metrics answers on loopback only.
    #[arg(long, value_name = "TOKEN", alias = "search-token")]
    admin_token: Option<String>,
    /// Answer requests whose Host header is HOST too (NAME on any port,
    /// NAME:PORT, or * for any; repeatable; replaces `serve.allowed_hosts`).
    /// Without it: on loopback, only localhost, 127.0.0.1 and `[::1]` on the
    /// listening port (others get 421: DNS rebinding); beyond loopback,
    /// any Host, and the start-up warning says so.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_host: Vec<String>,
    /// Also serve the archive to models over the Model Context Protocol
    /// at /mcp (streamable HTTP; tools search_history, recall,
    /// history_outline; or `serve.mcp`): needs the admin token, sent as
    /// `authorization: Bearer TOKEN`, and an archive.
    #[arg(long)]
    mcp: bool,
    /// No log line per request.
    #[arg(long)]
    quiet: bool,
}

/// Run the proxy until SIGINT or SIGTERM, then finish the requests in flight.
pub fn run(a: &ServeArgs) -> Result<ExitCode> {
    let mut file = None;
    let mut cfg = match (&a.preset, &a.config) {
        (_, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("{path}: cannot read: {e}")))?;
            let cfg = ctxpress::PipelineConfig::parse_file(path, &text)
                .map_err(|e| usage(e.to_string()))?;
            file = Some((path, text));
            cfg
        }
        (p, None) => {
            ctxpress::preset(p.as_deref().unwrap_or("agent")).map_err(|e| usage(e.to_string()))?
        }
    };
    // Errors of the `[serve]` table name their place in the file.
    let mut table = ServeTable::of(&cfg).map_err(|e| match &file {
        Some((path, text)) => usage(ctxpress::config::error_in_file(path, text, &e).to_string()),
        None => usage(e.to_string()),
    })?;
    if let Some(u) = &a.upstream {
        table.upstream = Some(u.clone());
    }
    if let Some(l) = &a.listen {
        table.listen = l.clone();
    }
    if let Some(d) = &a.archive {
        table.archive = d.clone();
    }
    if a.no_archive {
        table.archive.clear();
    }
    if let Some(n) = a.max_in_flight {
        table.max_in_flight = n;
    }
    if let Some(n) = a.body_limit_mb {
        table.body_limit_mb = n;
    }
    if let Some(n) = a.session_memory_mb {
        table.session_memory_mb = n;
    }
    let env_token = std::env::var("CTXPRESS_ADMIN_TOKEN")
        .or_else(|_| std::env::var("CTXPRESS_SEARCH_TOKEN"))
        .ok();
    if let Some(t) = a.admin_token.clone().or(env_token) {
        table.admin_token = Some(ctxpress_proxy::Secret(t));
    }
    if !a.allow_host.is_empty() {
        table.allowed_hosts = a.allow_host.clone();
    }
    if a.quiet {
        table.log = false;
    }
    if a.mcp {
        table.mcp = true;
    }
    a.limits.apply(&mut cfg)?;
    if cfg.window.size.is_none() && cfg.window.budget.is_none() {
        return Err(usage(
            "serve needs the model's window (--window TOKENS) or a budget (--budget TOKENS)",
        ));
    }
    if a.llm.any() {
        a.llm.apply(cfg.llm.get_or_insert_with(Default::default));
    }
    if table.upstream.is_none() {
        return Err(usage(
            "serve needs the upstream API's base URL: --upstream URL (or `upstream` in [serve])",
        ));
    }
    let listen = table.listen.clone();
    let log = table.log;
    let proxy_cfg = table.config(cfg).map_err(|e| usage(e.to_string()))?;
    let proxy = Proxy::new(proxy_cfg).map_err(|e| usage(e.to_string()))?;
    let upstream = proxy.upstream_shown().to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .map_err(|e| usage(format!("--listen {listen}: {e}")))?;
        let addr = listener.local_addr().context("the listening address")?;
        if log {
            eprintln!("ctxpress serve: listening on http://{addr}, forwarding to {upstream}");
        }
        // Said even with --quiet.
        for w in proxy.warnings(addr) {
            eprintln!("{w}");
        }
        proxy
            .serve(listener, shutdown_signal())
            .await
            .context("serving")?;
        if log {
            eprintln!("ctxpress serve: stopped");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// SIGINT (Ctrl-C) or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
