//! The table of agent tool dialects: which tool names and arguments mean read,
//! write, edit or command. Shared by the stale-op pruner and the tool-result
//! compressor.
//!
//! The built-in [`DialectTable`] knows Claude Code, Codex CLI, OpenHands,
//! SWE-agent, Cline/Roo, Gemini CLI and OpenCode tools; a table deserialized from
//! configuration (the facade parses TOML) can be layered over it with
//! [`DialectTable::extend`]. Shell commands are parsed for reads (`cat`, `sed -n`,
//! `head`, `tail`, `nl`, `Get-Content`), writes (`> file`, `tee`, heredocs) and
//! in-place edits (`sed -i`, `>>`); Codex patches are read from their
//! `*** Update File:` / `*** Add File:` / `*** Delete File:` headers.
//!
//! One module each: [`op`] (the operation model), [`table`] (tool specs and
//! extraction), [`shell`] (the shell lexer), [`patch`] (Codex patches),
//! [`paths`] (path normalization, working directory), [`status`] (exit
//! status and payload of results), [`fingerprint`] (file-content
//! fingerprints; lines are cut by `core::text::lines`), [`text_results`]
//! (tool results sent back as user text, Cline and Roo Code). Everything
//! public is re-exported here.

pub mod fingerprint;
pub mod op;
pub mod patch;
pub mod paths;
pub mod shell;
pub mod status;
pub mod table;
pub mod text_results;

pub use fingerprint::{content_fingerprint, content_line_count};
pub use op::{ExitReport, OpKind, Operation, Status};
pub use patch::parse_patch;
pub use paths::{detect_cwd, normalize_path, normalize_ws};
pub use shell::{command_family, parse_shell};
pub use status::{ResultFacts, exit_code, line_looks_failed, result_payload, result_status};
pub use table::{CallArgs, DialectTable, ToolKind, ToolSpec, builtin, extract};
pub use text_results::{TextResult, environment_blocks, strip_environment, text_results};

#[cfg(test)]
mod tests;
