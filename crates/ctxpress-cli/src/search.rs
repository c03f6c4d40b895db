//! `ctxpress search`: full-text search over an archive's stored originals.

use crate::usage;
use anyhow::Result;
use ctxpress::store::Hit;
use std::io::Write;
use std::process::ExitCode;

/// Arguments of `ctxpress search`.
#[derive(clap::Args)]
pub struct SearchArgs {
    /// Words to find (all must occur; searched as plain text).
    query: String,
    /// The archive written by `compress --archive`.
    #[arg(long, value_name = "DB")]
    archive: String,
    /// Only this conversation (its `id`).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// At most this many hits, best first.
    #[arg(long, default_value_t = 20, value_name = "N")]
    limit: usize,
    /// One JSON object a line.
    #[arg(long)]
    json: bool,
}

/// Print the hits; exit 1 (like grep) when there are none.
pub fn run(a: &SearchArgs) -> Result<ExitCode> {
    let arch = crate::open_existing_archive(&a.archive)?;
    if a.limit == 0 {
        return Err(usage("--limit: must be at least 1"));
    }
    let hits = arch
        .search(&a.query, a.conversation.as_deref(), a.limit)
        // The store error's text only: its chain repeats SQLite's message.
        .map_err(|e| usage(format!("{}: cannot search the archive: {e}", a.archive)))?;
    if hits.is_empty() {
        eprintln!("no matches");
        return Ok(ExitCode::from(1));
    }
    let mut out = std::io::stdout().lock();
    for h in &hits {
        let line = if a.json {
            h.to_json().to_string()
        } else {
            human(h)
        };
        writeln!(out, "{line}").map_err(crate::io::stdout_error)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn human(h: &Hit) -> String {
    let snippet: Vec<&str> = h.snippet.split_whitespace().collect();
    // A hit under a recall handle shows the handle (`ctxpress recall` takes it).
    let key = h.handle().map_or_else(|| h.key.clone(), |x| x.to_string());
    let line = format!(
        "{}  {}  {}  {}",
        h.conversation.as_deref().unwrap_or("-"),
        key,
        h.role.as_deref().unwrap_or("-"),
        snippet.join(" ")
    );
    crate::io::safe(&line).into_owned()
}
