//! The table of agent tool dialects: which tool names and arguments mean read,
//! write, edit or command. Shared by the stale-op pruner and the tool-result
//! compressor.

use crate::message::ToolCall;

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Reads a file.
    Read,
    /// Writes a whole file (create or overwrite).
    Write,
    /// Edits part of a file.
    Edit,
    /// Runs a shell command.
    Command,
    /// Searches (grep, glob, find).
    Search,
}

/// One operation extracted from a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// What it does.
    pub kind: OpKind,
    /// Files it touches (normalized).
    pub paths: Vec<String>,
    /// The command, for commands (whitespace-normalized).
    pub command: Option<String>,
}

/// Extract the operation of a tool call with the built-in table, or `None` for
/// tools it does not know.
pub fn extract(call: &ToolCall<'_>) -> Option<Operation> {
    let _ = call;
    None
}
