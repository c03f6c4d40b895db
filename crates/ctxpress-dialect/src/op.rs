//! The operation model: what a tool call does ([`OpKind`], [`Operation`]) and
//! how its result reports success ([`ExitReport`], [`Status`]).

/// What an operation does.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Reads a file.
    Read,
    /// Writes a whole file (create or overwrite).
    Write,
    /// Edits part of a file.
    Edit,
    /// Runs a shell command.
    #[default]
    Command,
    /// Searches (grep, glob, find).
    Search,
}

/// One operation extracted from a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Operation {
    /// What it does.
    pub kind: OpKind,
    /// Files it touches (normalized). Empty for a read or edit of "the file the
    /// agent has open" (SWE-agent); see [`Operation::current_file`].
    pub paths: Vec<String>,
    /// The command, for commands and shell-derived operations
    /// (whitespace-normalized).
    pub command: Option<String>,
    /// Files a command changes as a side effect (redirects, `tee`, `sed -i`,
    /// `rm`, `mv`, `cp`), normalized.
    pub writes: Vec<String>,
    /// Working directory the call ran in, when known (normalized).
    pub cwd: Option<String>,
    /// True when an empty `paths` means the editor's currently open file.
    pub current_file: bool,
    /// How the tool reports exit codes in its result.
    pub exit: ExitReport,
}

impl Operation {
    /// True when the operation changes files (write, edit, or a command with
    /// side-effect writes).
    pub fn modifies(&self) -> bool {
        matches!(self.kind, OpKind::Write | OpKind::Edit) || !self.writes.is_empty()
    }
    /// Files this operation changes.
    pub fn modified_paths(&self) -> &[String] {
        match self.kind {
            OpKind::Write | OpKind::Edit => &self.paths,
            _ => &self.writes,
        }
    }
    /// True when it came from a shell command (rather than a file tool).
    pub fn is_shell(&self) -> bool {
        self.command.is_some()
    }
}

/// How a tool's result reports its exit status.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ExitReport {
    /// No reliable exit code: look for one, else use error patterns.
    #[default]
    Unknown,
    /// Every result states its exit code (Codex).
    Always,
    /// Only failures state one (`Exit code N` in Claude Code's Bash); no code
    /// means success.
    OnFailure,
}

/// Outcome of a tool call judged from its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// It worked.
    Success,
    /// It failed.
    Failure,
    /// Nothing says either way.
    Unknown,
}
