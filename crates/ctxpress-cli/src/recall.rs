//! `ctxpress recall`: the exact originals a handle in a compressed history
//! stands for.

use crate::usage;
use anyhow::Result;
use ctxpress::Handle;
use std::io::Write;
use std::process::ExitCode;

/// Arguments of `ctxpress recall`.
#[derive(clap::Args)]
pub struct RecallArgs {
    /// The handle, as a marker writes it (`#h7f3a2c91d0`) or without `#`.
    handle: String,
    /// The archive written by `compress --archive`, `compact` or `serve`.
    #[arg(long, value_name = "DB")]
    archive: String,
    /// Print the messages' text (role, text, tool calls and results)
    /// instead of their JSON.
    #[arg(long)]
    text: bool,
}

/// Print the originals; exit 1 when the archive does not hold the handle.
pub fn run(a: &RecallArgs) -> Result<ExitCode> {
    let Some(handle) = Handle::parse(&a.handle) else {
        return Err(usage(format!(
            "{}: not a handle (a handle is `#h` and 10 hex digits, as in [summary#h7f3a2c91d0: ...])",
            a.handle
        )));
    };
    let arch = crate::open_existing_archive(&a.archive)?;
    let found = ctxpress::recall(&arch, &handle)
        .map_err(|e| usage(format!("{}: cannot read the archive: {e}", a.archive)))?;
    let Some(r) = found else {
        eprintln!("{handle}: not in {}", a.archive);
        return Ok(ExitCode::from(1));
    };
    let text = if a.text {
        r.to_text()
    } else {
        let mut j = r.to_json();
        j.push('\n');
        j
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(crate::io::stdout_error)?;
    Ok(ExitCode::SUCCESS)
}
