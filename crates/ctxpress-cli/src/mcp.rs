//! `ctxpress mcp`: the Model Context Protocol server of `ctxpress-proxy`
//! (`search_history`, `recall`, `history_outline`) over an archive, on
//! stdio until stdin closes, or with `--listen` on streamable HTTP until
//! SIGINT or SIGTERM.

use crate::usage;
use anyhow::Result;
use std::process::ExitCode;
#[cfg(feature = "mcp")]
use {anyhow::Context, ctxpress_proxy::Secret, std::sync::Arc, std::time::Duration};

/// Arguments of `ctxpress mcp`.
#[derive(clap::Args)]
pub struct McpArgs {
    /// The archive written by `compress --archive`, `compact` or `serve`
    /// (read only).
    #[arg(long, value_name = "DB")]
    archive: String,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (e.g.
    /// 127.0.0.1:8788); an address beyond loopback needs --token.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The token HTTP requests must carry (`authorization: Bearer TOKEN`,
    /// else 401); also $CTXPRESS_MCP_TOKEN. Required to listen beyond
    /// loopback.
    #[arg(long, value_name = "TOKEN", requires = "listen")]
    token: Option<String>,
}

/// What `ctxpress mcp` says in a build without the cargo feature `mcp`.
#[cfg(not(feature = "mcp"))]
pub fn run(_: &McpArgs) -> Result<ExitCode> {
    Err(usage(
        "this ctxpress was built without the MCP server: build it with the cargo feature `mcp` (cargo install --locked --profile dist --features mcp --path crates/ctxpress-cli)",
    ))
}

/// Serve until stdin closes (stdio) or a signal (HTTP); exit 0 then.
#[cfg(feature = "mcp")]
pub fn run(a: &McpArgs) -> Result<ExitCode> {
    let archive = Arc::new(crate::open_existing_archive(&a.archive)?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let Some(listen) = a.listen.clone() else {
        rt.block_on(ctxpress_proxy::mcp::serve_stdio(archive))
            .context("MCP on stdio")?;
        // Nothing is left to wait for: stdin has closed.
        rt.shutdown_timeout(Duration::from_millis(200));
        return Ok(ExitCode::SUCCESS);
    };
    let token = a
        .token
        .clone()
        .or_else(|| std::env::var("CTXPRESS_MCP_TOKEN").ok())
        .filter(|t| !t.is_empty())
        .map(Secret);
    rt.block_on(async move {
        // Checked before listening: beyond loopback only with a token.
        let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host(&listen)
            .await
            .map_err(|e| usage(format!("--listen {listen}: {e}")))?
            .collect();
        if token.is_none()
            && let Some(beyond) = addrs.iter().find(|a| !a.ip().is_loopback())
        {
            return Err(usage(format!(
                "--listen {listen}: {} is reachable beyond this machine: set a token (--token TOKEN or $CTXPRESS_MCP_TOKEN), or listen on 127.0.0.1",
                beyond.ip()
            )));
        }
        let listener = tokio::net::TcpListener::bind(&addrs[..])
            .await
            .map_err(|e| usage(format!("--listen {listen}: {e}")))?;
        let addr = listener.local_addr().context("the listening address")?;
        eprintln!("ctxpress mcp: serving http://{addr}/mcp");
        ctxpress_proxy::mcp::serve_http(archive, listener, token, crate::serve::shutdown_signal())
            .await
            .context("serving")?;
        Ok(ExitCode::SUCCESS)
    })
}
