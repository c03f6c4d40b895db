//! Agent tool semantics: what each tool call of a conversation did. The
//! table of agent tool dialects says which tool names and arguments mean
//! read, write, edit or command; the [`traffic`] index walks a conversation
//! once and gives every call its operation, its result and the session's
//! working directory. The stale-op pruner, the tool-result compressor, the
//! classifier and the budget's ledger read it.
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
//! fingerprints), [`text_results`](mod@text_results) (tool results sent back as user text,
//! Cline and Roo Code), [`turns`] (where user turns start, counting those
//! text results), [`traffic`] (the index). Everything public of the first
//! ones is re-exported here.
//!
//! It depends on `ctxpress-core` (the message model) and `ctxpress-text`
//! only: never on the budget, a strategy or the facade.

pub mod fingerprint;
pub mod op;
pub mod patch;
pub mod paths;
pub mod shell;
pub mod status;
pub mod table;
pub mod text_results;
pub mod traffic;
pub mod turns;

pub use fingerprint::{content_fingerprint, content_line_count};
pub use op::{ExitReport, OpKind, Operation, Status};
pub use patch::parse_patch;
pub use paths::{detect_cwd, normalize_path, normalize_ws};
pub use shell::{command_family, parse_shell};
pub use status::{ResultFacts, exit_code, line_looks_failed, result_payload, result_status};
pub use table::{CallArgs, DialectTable, ToolKind, ToolSpec, builtin, extract};
pub use text_results::{TextResult, environment_blocks, strip_environment, text_results};
pub use turns::Turns;

#[cfg(test)]
mod tests;
