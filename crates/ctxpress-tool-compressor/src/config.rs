//! The `tool_compressor` stage's parameters (`ToolCompressorConfig`).

use ctxpress_dialect::DialectTable;
use serde::{Deserialize, Serialize};

use crate::summary::Limits;

/// Parameters of the `tool_compressor` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolCompressorConfig {
    /// Results shorter than this many characters stay verbatim.
    pub min_chars: usize,
    /// The last this many tool results of the conversation stay verbatim.
    pub keep_last: usize,
    /// The last this many user/assistant messages, and everything after the
    /// first of them, are never touched.
    pub protected_tail: usize,
    /// Target tokens: compress oldest results first and stop once the
    /// conversation fits. Without it (and without a run budget) every
    /// eligible result is compressed.
    pub budget_tokens: Option<usize>,
    /// Keep failed results verbatim until a later call retries the command
    /// family, touches the path, or calls the tool again.
    pub keep_unresolved_errors: bool,
    /// A summary replaces a result only when it saves at least this share of
    /// its characters (0.0-1.0; a summary is never longer in any case).
    pub min_saving: f64,
    /// Information check: a summary must save at least this many characters
    /// for each term (path, URL, compound identifier, version) it would drop
    /// from the conversation, i.e. a term of the result found nowhere else
    /// in the conversation and not in the summary. Results denser in unique
    /// terms stay verbatim. 0 turns the check off.
    pub chars_per_lost_term: usize,
    /// With the information check on, a summary ends with a `names:` line
    /// listing up to this many of the result's terms found nowhere else in
    /// the conversation (first appearance first); only the terms beyond it
    /// count as dropped. 0 lists none.
    pub max_names: usize,
    /// Also summarize the file content old write calls carry in their
    /// arguments (outline, references and names, like a read), for calls
    /// outside the protected tail and the last `keep_last`, that succeeded,
    /// of files no recent call touches. Paths and other arguments stay.
    pub inputs: bool,
    /// Summarize reads.
    pub reads: bool,
    /// Summarize write and edit results.
    pub writes: bool,
    /// Summarize command output.
    pub commands: bool,
    /// Summarize search output.
    pub searches: bool,
    /// Summarize results of tools the dialect table does not know.
    pub other: bool,
    /// Tool names whose results are never summarized (exact, then ignoring case).
    pub skip_tools: Vec<String>,
    /// Declarations listed in a read's outline.
    pub max_outline: usize,
    /// Characters of one kept line.
    pub max_line_chars: usize,
    /// First non-empty lines kept of command and other output.
    pub head_lines: usize,
    /// Last non-empty lines kept of command and other output.
    pub tail_lines: usize,
    /// Error lines kept per result.
    pub max_error_lines: usize,
    /// Count / outcome lines kept per result.
    pub max_count_lines: usize,
    /// Files or paths listed for a search or listing.
    pub max_list: usize,
    /// Paths, URLs and error names listed as `refs:` per result.
    pub max_refs: usize,
    /// The session's working directory, when the conversation does not say.
    pub cwd: Option<String>,
    /// Extra tool dialects, layered over the built-in table.
    pub dialect: DialectTable,
}

impl Default for ToolCompressorConfig {
    fn default() -> Self {
        let l = Limits::default();
        ToolCompressorConfig {
            min_chars: 400,
            keep_last: 10,
            protected_tail: 5,
            budget_tokens: None,
            keep_unresolved_errors: true,
            min_saving: 0.2,
            chars_per_lost_term: 800,
            max_names: 40,
            inputs: false,
            reads: true,
            writes: true,
            commands: true,
            searches: true,
            other: true,
            skip_tools: Vec::new(),
            max_outline: l.max_outline,
            max_line_chars: l.max_line_chars,
            head_lines: l.head_lines,
            tail_lines: l.tail_lines,
            max_error_lines: l.max_error_lines,
            max_count_lines: l.max_count_lines,
            max_list: l.max_list,
            max_refs: l.max_refs,
            cwd: None,
            dialect: DialectTable::default(),
        }
    }
}

impl ToolCompressorConfig {
    /// The summary limits of this configuration.
    pub fn limits(&self) -> Limits {
        Limits {
            max_outline: self.max_outline,
            max_line_chars: self.max_line_chars.max(8),
            head_lines: self.head_lines,
            tail_lines: self.tail_lines,
            max_error_lines: self.max_error_lines,
            max_count_lines: self.max_count_lines,
            max_list: self.max_list,
            max_refs: self.max_refs,
        }
    }
}
