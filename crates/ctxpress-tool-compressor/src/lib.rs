//! ctxpress strategy `tool_compressor`: replaces the content of old tool
//! results with short metadata summaries that keep what a model needs
//! (spec 004, "Phase 1: Metadata-Based Tool Compression").
//!
//! Used alone: an old command's long output becomes a `[summary: tool ...]`
//! line block.
//!
//! ```rust
//! use ctxpress_core::{Conversation, Pipeline, StageContext};
//! use serde_json::json;
//! use ctxpress_tool_compressor::{ToolCompressor, ToolCompressorConfig};
//!
//! let mut output: String = (1..=60).map(|i| format!("test case {i} ... ok\n")).collect();
//! output.push_str("test result: ok. 60 passed; 0 failed\n");
//! let text = json!([
//!     {"role": "user", "content": "run the tests"},
//!     {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
//!         "function": {"name": "Bash", "arguments": "{\"command\": \"cargo test\"}"}}]},
//!     {"role": "tool", "tool_call_id": "c1", "content": output},
//!     {"role": "assistant", "content": "All 60 tests pass."},
//! ])
//! .to_string();
//! let mut conv = Conversation::parse(&text)?;
//! let cfg = ToolCompressorConfig {
//!     keep_last: 0,
//!     protected_tail: 0,
//!     ..ToolCompressorConfig::default()
//! };
//! let mut pipeline = Pipeline::new(Vec::new());
//! pipeline.push(Box::new(ToolCompressor::new(cfg)));
//! let report = pipeline.run(&mut conv, &StageContext::default());
//! let summary = conv.messages[2].text();
//! assert!(summary.starts_with("[summary: tool "), "{summary}");
//! assert!(report.chars_after < report.chars_before);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Each result is summarized by the kind of its call, found with the dialect
//! table of `ctxpress_core::dialect`:
//! - reads: path, line count and range, the outline of the file (its
//!   declarations with line numbers: types, functions, methods, routes,
//!   tests, fields, columns, keys, imports) and the paths, URLs and error
//!   names the rest mentions;
//! - writes and edits: path and the tool's own outcome line, plus errors;
//! - commands and other tools: command, exit status, first and last lines,
//!   error lines and count lines (test summaries, match counts), lines that
//!   differ only in numbers kept once;
//! - searches: match and file counts, the files with their match counts;
//! - with `inputs`, the file content an old write call carries in its
//!   arguments: line count, outline and references, as for a read.
//!
//! With the information check on, a summary ends with a `names:` line: the
//! terms (paths, compound identifiers, versions) of the summarized text found
//! nowhere else in the conversation (up to `max_names`), so dropping the
//! text does not drop them from the conversation.
//!
//! Every summary starts with `[summary: tool ` (the classifier's "already
//! compressed" prefix). Only result text (and with `inputs` the content
//! argument of a write) changes: call ids, pairing, roles
//! and message order stay. Never touched: system messages, the protected
//! tail, the last `keep_last` results, short results, results with non-text
//! parts, failures the agent has not acted on yet (no later call of the same
//! command family, path or tool), and results whose summary would not be
//! shorter by `min_saving`. With a token budget the oldest results are
//! compressed first until the conversation fits.

pub mod lines;
mod structured;
pub mod summary;

use ctxpress_core::tokens::count_message;
use ctxpress_core::{
    ConfigError, Conversation, Message, Role, StageContext, StageOutcome, Strategy, StrategyError,
};
use ctxpress_dialect::Turns;
use ctxpress_dialect::traffic::{self, MessageCalls, Traffic};
use ctxpress_dialect::{self as dialect, DialectTable, OpKind, Operation, Status, command_family};
use ctxpress_text::bytes::{char_count, fewer_chars_than};
use foldhash::{HashMap, HashMapExt, HashSet};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
pub use summary::{Kind, Limits, PREFIX, Subject, Summaries, summarize, summarize_input};

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

/// The tool-result compressor.
#[derive(Debug, Clone)]
pub struct ToolCompressor {
    cfg: ToolCompressorConfig,
    table: DialectTable,
}

impl ToolCompressor {
    /// Build from a config.
    pub fn new(cfg: ToolCompressorConfig) -> Self {
        let mut table = DialectTable::builtin();
        table.extend(cfg.dialect.clone());
        ToolCompressor { cfg, table }
    }

    /// The configuration in use.
    pub fn config(&self) -> &ToolCompressorConfig {
        &self.cfg
    }
}

impl Default for ToolCompressor {
    fn default() -> Self {
        Self::new(ToolCompressorConfig::default())
    }
}

fn check(cfg: ToolCompressorConfig) -> Result<ToolCompressor, ConfigError> {
    if !(0.0..=1.0).contains(&cfg.min_saving) {
        return Err(ConfigError::InvalidField {
            stage: None,
            strategy: "tool_compressor".into(),
            field: "min_saving".into(),
            message: format!("must be between 0.0 and 1.0, found {}", cfg.min_saving),
        });
    }
    Ok(ToolCompressor::new(cfg))
}

ctxpress_core::register_strategy!(
    "tool_compressor",
    "replace old tool results with metadata summaries (outline, errors, counts)",
    ToolCompressorConfig,
    check,
    params: &[
        ("min_chars", "Results shorter than this many characters stay verbatim."),
        ("keep_last", "The last this many tool results of the conversation stay verbatim."),
        (
            "protected_tail",
            "The last this many user/assistant messages, and everything after the first of them, are never touched.",
        ),
        (
            "budget_tokens",
            "Target tokens: compress oldest results first and stop once the conversation fits (unset: every eligible result).",
        ),
        (
            "keep_unresolved_errors",
            "Keep failed results verbatim until a later call retries the command family, touches the path, or calls the tool again.",
        ),
        (
            "min_saving",
            "A summary replaces a result only when it saves at least this share of its characters (0.0-1.0).",
        ),
        (
            "chars_per_lost_term",
            "Information check: characters a summary must save per term it drops from the conversation (0 turns it off).",
        ),
        (
            "max_names",
            "With the information check on, most terms found nowhere else listed on a summary's `names:` line (0 lists none).",
        ),
        (
            "inputs",
            "Also summarize the file content old successful write calls carry in their arguments (paths and other arguments stay).",
        ),
        ("reads", "Summarize reads."),
        ("writes", "Summarize write and edit results."),
        ("commands", "Summarize command output."),
        ("searches", "Summarize search output."),
        ("other", "Summarize results of tools the dialect table does not know."),
        (
            "skip_tools",
            "Tool names whose results are never summarized (exact, then ignoring case).",
        ),
        ("max_outline", "Declarations listed in a read's outline."),
        ("max_line_chars", "Characters of one kept line."),
        ("head_lines", "First non-empty lines kept of command and other output."),
        ("tail_lines", "Last non-empty lines kept of command and other output."),
        ("max_error_lines", "Error lines kept per result."),
        ("max_count_lines", "Count / outcome lines kept per result."),
        ("max_list", "Files or paths listed for a search or listing."),
        ("max_refs", "Paths, URLs and error names listed as `refs:` per result."),
        ("cwd", "The session's working directory, when the conversation does not say."),
        ("dialect", "Extra tool dialects, layered over the built-in table."),
    ]
);

/// Counts of one run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Reads summarized.
    pub reads: u64,
    /// Write and edit results summarized.
    pub writes: u64,
    /// Command results summarized.
    pub commands: u64,
    /// Search results summarized.
    pub searches: u64,
    /// Results of other tools summarized.
    pub other: u64,
    /// Write-call inputs (file content in the arguments) summarized.
    pub inputs: u64,
    /// Failed results kept because nothing acted on them yet.
    pub unresolved_errors_kept: u64,
    /// Results kept because their summary would drop too many unique terms.
    pub dense_kept: u64,
    /// Characters removed from result texts.
    pub chars_saved: u64,
}

/// The file content argument of a write call that may be summarized.
#[derive(Debug, Clone)]
struct InputCandidate {
    /// Message index of the call.
    msg: usize,
    /// Position of the call among the message's tool calls.
    slot: usize,
    /// The parsed calls of that message.
    calls: MessageCalls,
    call_id: String,
    /// The argument holding the content.
    key: String,
    subject: Subject,
}

/// One result that may be summarized.
#[derive(Debug, Clone)]
struct Candidate {
    /// Message index of the result.
    msg: usize,
    call_id: String,
    kind: Kind,
    subject: Subject,
}

/// A tool result sent back as user text (Cline, Roo Code): the output
/// between its `[TOOL for 'ARG'] Result:` header and what follows it.
struct TextCandidate {
    /// Message index of the user message.
    msg: usize,
    /// The text part holding the output (`dialect::TextResult::part`).
    part: Option<usize>,
    /// The output's byte range in that part.
    body: std::ops::Range<usize>,
    kind: Kind,
    subject: Subject,
}

/// Longer terms are never listed in a summary's `names:` line.
const MAX_NAME_BYTES: usize = 120;

const DONE_PREFIXES: &[&str] = &[
    "[summary",
    "[truncated",
    "[ctxpress:",
    "[ctxpress#",
    "[cce:",
];
const PATH_KEYS: &[&str] = &[
    "file_path",
    "filePath",
    "path",
    "absolute_path",
    "notebook_path",
    "filename",
    "file",
    "target_file",
    "paths",
];

/// True when the result answering `call_id` in `m` holds text only (no
/// images or other blocks a summary would drop).
fn text_only(m: &Message, call_id: &str) -> bool {
    fn parts_are_text(v: Option<&Value>) -> bool {
        match v {
            None | Some(Value::Null) | Some(Value::String(_)) => true,
            Some(Value::Array(parts)) => parts.iter().all(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str),
                    Some("text") | Some("input_text") | Some("output_text") | None
                ) && p.get("text").is_some_and(Value::is_string)
            }),
            Some(_) => false,
        }
    }
    if matches!(m.role(), Role::Tool | Role::Function) {
        return parts_are_text(m.content());
    }
    match m.content() {
        // Found through the message's result index: asked once per result,
        // a scan of the blocks made a message of N results cost N².
        Some(Value::Array(_)) => m
            .tool_result_blocks(call_id)
            .into_iter()
            .all(|b| parts_are_text(b.get("content"))),
        _ => false,
    }
}

fn display_paths(
    table: &DialectTable,
    name: &str,
    args: &traffic::Args,
    op: Option<&Operation>,
) -> Vec<String> {
    // The paths in argument `k`, when it holds any.
    let paths_in = |k: &str| match args.get(k) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(vec![s.trim().to_string()]),
        Some(Value::Array(a)) => {
            let v: Vec<String> = a
                .iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().to_string())
                .collect();
            (!v.is_empty()).then_some(v)
        }
        _ => None,
    };
    let found = match table.find(name) {
        Some(s) if !s.path_args.is_empty() => s.path_args.iter().find_map(|k| paths_in(k)),
        _ => PATH_KEYS.iter().find_map(|k| paths_in(k)),
    };
    found
        .or_else(|| op.map(|o| o.paths.clone()))
        .unwrap_or_default()
}

/// The command a call runs, with its working directory.
fn command_of(op: Option<&Operation>) -> Option<(&str, &str)> {
    let op = op?;
    Some((op.cwd.as_deref().unwrap_or(""), op.command.as_deref()?))
}

/// Keys a failure is resolved by (a later call sharing one acted on it),
/// but for the command's: its paths, or its tool when it has neither a
/// command nor a path.
fn act_keys(name: &str, op: Option<&Operation>) -> Vec<String> {
    let mut keys: Vec<String> = op
        .into_iter()
        .flat_map(|op| op.paths.iter().chain(op.writes.iter()))
        .map(|p| format!("path\u{1}{p}"))
        .collect();
    if keys.is_empty() && command_of(op).is_none() {
        keys.push(format!("tool\u{1}{}", name.to_lowercase()));
    }
    keys
}

/// The keys of the calls after a point (see [`act_keys`]) and their
/// commands. A command's key (its working directory and command family)
/// is found only when a failure needs it: finding a family parses the
/// command.
#[derive(Default)]
struct LaterKeys<'r> {
    keys: HashSet<String>,
    /// Every command seen, with its working directory.
    commands: HashSet<(&'r str, &'r str)>,
    /// The commands whose key is not in `keys` yet.
    pending: Vec<(&'r str, &'r str)>,
    /// The key of each command whose key was found.
    families: HashMap<(&'r str, &'r str), String>,
}

impl<'r> LaterKeys<'r> {
    fn command_key(&mut self, (cwd, c): (&'r str, &'r str)) -> String {
        self.families
            .entry((cwd, c))
            .or_insert_with(|| format!("cmd\u{1}{cwd}\u{1}{}", command_family(c)))
            .clone()
    }

    /// True when a call seen has the key of `command`.
    fn has_command(&mut self, command: (&'r str, &'r str)) -> bool {
        if self.commands.contains(&command) {
            return true;
        }
        let key = self.command_key(command);
        if self.keys.contains(&key) {
            return true;
        }
        for c in std::mem::take(&mut self.pending) {
            let k = self.command_key(c);
            self.keys.insert(k);
        }
        self.keys.contains(&key)
    }

    fn add(&mut self, keys: Vec<String>, command: Option<(&'r str, &'r str)>) {
        self.keys.extend(keys);
        if let Some(c) = command
            && self.commands.insert(c)
        {
            self.pending.push(c);
        }
    }
}

/// Occurrences of each term in the conversation, keyed by a 64-bit hash of
/// the term: no copy of a term is made, and a look-up compares one number.
/// (Two terms would have to share all 64 bits to be counted as one.)
#[derive(Default)]
struct TermCounts(
    std::collections::HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    /// The keys of a summary's terms, for [`ToolCompressor::settle`]: one
    /// buffer for every summary.
    Vec<u64>,
);

/// The hasher of [`TermCounts`]: its keys are hashes already.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in all the same.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The fixed hash of a term (the same in every run, so results are too).
fn term_key(t: &str) -> u64 {
    static STATE: foldhash::quality::FixedState =
        foldhash::quality::FixedState::with_seed(0x6374_7870);
    STATE.hash_one(t)
}

impl TermCounts {
    fn get_key(&self, k: u64) -> u32 {
        self.0.get(&k).copied().unwrap_or(0)
    }
    fn add_key(&mut self, k: u64, n: u32) {
        *self.0.entry(k).or_insert(0) += n;
    }
    /// Count every occurrence of the terms of `local` (a look-up per
    /// distinct term, not per occurrence).
    fn add_local(&mut self, local: &Local) {
        for lt in &local.terms {
            self.add_key(lt.key, lt.n);
        }
    }
    fn sub_key(&mut self, k: u64, n: u32) {
        if let Some(g) = self.0.get_mut(&k) {
            *g = g.saturating_sub(n);
        }
    }
}

/// One text's distinct terms, in order of first appearance: each term's
/// key ([`term_key`]), the byte range of its first occurrence, and how many
/// times it occurs. The text's length tells a changed text from the one
/// scanned.
#[derive(Default)]
struct Local {
    len: usize,
    terms: Vec<LocalTerm>,
}

#[derive(Clone, Copy)]
struct LocalTerm {
    key: u64,
    start: usize,
    end: usize,
    n: u32,
}

/// Builds [`Local`]s; its index and term list are reused from text to text
/// (each [`Local`] gets a copy of the list, allocated once at its size).
#[derive(Default)]
struct LocalBuilder {
    index: std::collections::HashMap<u64, usize, BuildHasherDefault<KeyHasher>>,
    terms: Vec<LocalTerm>,
}

impl LocalBuilder {
    /// The terms of `text` (as [`lines::for_each_term`] finds them).
    fn scan(&mut self, text: &str, escaped: bool) -> Local {
        self.index.clear();
        self.terms.clear();
        let base = text.as_ptr() as usize;
        let terms = &mut self.terms;
        lines::for_each_term(text, escaped, |t| {
            let key = term_key(t);
            // One probe a term: the slot found is the one filled.
            match self.index.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => {
                    if let Some(lt) = terms.get_mut(*e.get()) {
                        lt.n += 1;
                    }
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    let start = t.as_ptr() as usize - base;
                    e.insert(terms.len());
                    terms.push(LocalTerm {
                        key,
                        start,
                        end: start + t.len(),
                        n: 1,
                    });
                }
            }
        });
        Local {
            len: text.len(),
            terms: self.terms.as_slice().to_vec(),
        }
    }
}

/// The information check's state: the conversation's term counts, and the
/// terms of each candidate's result text (by message index and call id),
/// gathered by the scan that counted them so that
/// [`ToolCompressor::settle`] does not scan the text again.
struct Terms<'c> {
    counts: TermCounts,
    locals: HashMap<(usize, &'c str), Local>,
    /// The terms of the content of each write input (by message index and
    /// call slot), found in the raw JSON of the call's arguments, with that
    /// JSON's string (the terms' positions are in it).
    input_locals: HashMap<(usize, usize), (Local, String)>,
}

/// Count the terms of `text` into `counts`.
fn count_terms(counts: &mut TermCounts, text: &str, escaped: bool) {
    lines::for_each_term(text, escaped, |t| counts.add_key(term_key(t), 1));
}

/// Occurrences of every term in the conversation: message text, tool results
/// and tool-call names and (decoded) arguments; with the terms of the result
/// text of each of `cands`, and of the content argument of each of `inputs`
/// (found in the raw JSON of the arguments when it reads the same, so that
/// [`ToolCompressor::settle`] does not scan the content again).
fn term_counts<'c>(
    conv: &Conversation,
    cands: &'c [Candidate],
    inputs: &[InputCandidate],
) -> Terms<'c> {
    let wanted_inputs: HashMap<(usize, usize), &InputCandidate> =
        inputs.iter().map(|c| ((c.msg, c.slot), c)).collect();
    let mut input_locals: HashMap<(usize, usize), (Local, String)> = HashMap::new();
    let mut input_builder = LocalBuilder::default();
    let mut wanted: HashMap<usize, Vec<&'c str>> = HashMap::new();
    for c in cands {
        wanted.entry(c.msg).or_default().push(c.call_id.as_str());
    }
    let mut counts = TermCounts::default();
    let mut locals: HashMap<(usize, &'c str), Local> = HashMap::new();
    let mut builder = LocalBuilder::default();
    // The slot for the result answering `id` in message `i`, when a
    // candidate wants it and no earlier result of the message took it.
    let slot = |locals: &HashMap<(usize, &'c str), Local>, i: usize, id: &str| {
        let want = wanted.get(&i)?.iter().copied().find(|w| *w == id)?;
        (!locals.contains_key(&(i, want))).then_some((i, want))
    };
    // A result text: counted, and gathered when a candidate wants it.
    let mut result = |locals: &mut HashMap<(usize, &'c str), Local>,
                      counts: &mut TermCounts,
                      key: Option<(usize, &'c str)>,
                      text: &str| match key {
        Some(k) => {
            let local = builder.scan(text, false);
            counts.add_local(&local);
            locals.insert(k, local);
        }
        None => count_terms(counts, text, false),
    };
    for (i, m) in conv.messages.iter().enumerate() {
        let text = m.text();
        if matches!(m.role(), Role::Tool | Role::Function) {
            // A tool message's text is its one result's text.
            let key = m
                .tool_result_ids()
                .next()
                .and_then(|id| slot(&locals, i, id));
            result(&mut locals, &mut counts, key, &text);
        } else {
            count_terms(&mut counts, &text, false);
            for r in m.tool_results() {
                let key = slot(&locals, i, &r.call_id);
                result(&mut locals, &mut counts, key, &r.text);
            }
        }
        for (j, c) in m.tool_calls().into_iter().enumerate() {
            count_terms(&mut counts, &c.name, false);
            // Raw JSON: escapes separate terms, so no need to decode it.
            let args: &str = &c.arguments;
            let content = wanted_inputs
                .get(&(i, j))
                .filter(|ic| ic.call_id == c.id)
                .and_then(|ic| {
                    // The span the traffic index's scan of these arguments found.
                    let call_args = &ic.calls.get(ic.slot)?.args;
                    let text = call_args.get(&ic.key)?.as_str()?;
                    let span = call_args.string_span(&ic.key)?;
                    let raw = args.get(span.clone())?;
                    lines::decodes_to_same_terms(raw, text).then_some(span)
                });
            let pieces = content.and_then(|span| {
                Some((
                    args.get(..span.start)?,
                    args.get(span.clone())?,
                    args.get(span.end..)?,
                ))
            });
            match pieces {
                Some((head, raw, tail)) => {
                    // The content's terms are those of its raw JSON (see
                    // `decodes_to_same_terms`): counted with the rest, once.
                    count_terms(&mut counts, head, true);
                    let local = input_builder.scan(raw, true);
                    counts.add_local(&local);
                    count_terms(&mut counts, tail, true);
                    input_locals.insert((i, j), (local, raw.to_string()));
                }
                None => count_terms(&mut counts, args, true),
            }
        }
    }
    Terms {
        counts,
        locals,
        input_locals,
    }
}

impl ToolCompressor {
    fn skipped_tool(&self, name: &str) -> bool {
        self.cfg
            .skip_tools
            .iter()
            .any(|t| t == name || t.eq_ignore_ascii_case(name))
    }

    fn enabled(&self, kind: Kind) -> bool {
        match kind {
            Kind::Read => self.cfg.reads,
            Kind::Write | Kind::Edit => self.cfg.writes,
            Kind::Command => self.cfg.commands,
            Kind::Search => self.cfg.searches,
            Kind::Other => self.cfg.other,
        }
    }

    /// The results that may be summarized, oldest first, the write inputs
    /// that may be, and the number of failures kept because nothing acted on
    /// them.
    ///
    /// Every answered call is judged by its cheap tests first (and whether
    /// it failed, which the failures kept need for every call); what only a
    /// candidate needs (its display paths, a write's content check, which
    /// decodes the content, copies of its id and name) is worked out for the
    /// calls that can still become one. [`Self::candidates_reference`]
    /// (tests) is the eager version it answers as.
    fn candidates(&self, conv: &Conversation) -> (Vec<Candidate>, Vec<InputCandidate>, u64) {
        let tail = conv.tail_start(self.cfg.protected_tail);
        let traffic = Traffic::of(conv, &self.table, self.cfg.cwd.as_deref());
        // Every answered call, in order, borrowed from the index.
        struct Rec<'t> {
            msg: usize,
            call_msg: usize,
            slot: usize,
            call: &'t traffic::ParsedCall,
            /// Its result, while whether it failed may still be asked.
            res: Option<ctxpress_core::message::ToolResult<'t>>,
            /// May give a write input (all but the content check passed).
            write_input: bool,
            /// Worked out only where it decides something (below).
            failed: bool,
            eligible: bool,
        }
        let mut recs: Vec<Rec<'_>> = Vec::with_capacity(traffic.calls.len());
        for cr in &traffic.calls {
            let call = traffic.call(cr);
            let Some(r) = cr.result else {
                continue;
            };
            let Some(rm) = conv.messages.get(r) else {
                continue;
            };
            let Some(res) = rm.tool_result(&call.id) else {
                continue;
            };
            let op = call.op.as_ref();
            let unique = cr.unique;
            let eligible = unique
                && r < tail
                && !conv.is_protected(r)
                && !DONE_PREFIXES
                    .iter()
                    .any(|p| res.text.trim_start().starts_with(p))
                && !fewer_chars_than(&res.text, self.cfg.min_chars)
                && !self.skipped_tool(&call.name)
                && text_only(rm, &call.id);
            let write_input = self.cfg.inputs
                && unique
                && cr.msg < tail
                && !conv.is_protected(cr.msg)
                && op.is_some_and(|o| o.kind == OpKind::Write)
                && !self.skipped_tool(&call.name);
            recs.push(Rec {
                msg: r,
                call_msg: cr.msg,
                slot: cr.slot,
                call,
                res: (eligible || write_input).then_some(res),
                write_input,
                failed: false,
                eligible,
            });
        }
        // The last `keep_last` results stay.
        let keep_from = recs.len().saturating_sub(self.cfg.keep_last);
        // Whether a call failed decides something only for an older result
        // that may be summarized unless it is an unresolved failure, and for
        // an older write input (kept when it failed); elsewhere it stays
        // false. A failure nothing decides by is never looked up below, and
        // the keys of the calls after a failure that is are all taken, so
        // the failures kept are those of every call's status.
        for r in recs.iter_mut().take(keep_from) {
            let asks = (r.eligible && self.cfg.keep_unresolved_errors) || r.write_input;
            if let (true, Some(res)) = (asks, &r.res) {
                let exit_style = r.call.op.as_ref().map(|o| o.exit).unwrap_or_default();
                let facts = traffic::result_facts(conv, r.msg, &r.call.id, &res.text);
                r.failed = facts.status(exit_style, &res.text, res.is_error) == Status::Failure;
            }
        }
        // Failures nothing acted on stay.
        let mut later = LaterKeys::default();
        let mut unresolved = vec![false; recs.len()];
        // A call's keys are only looked up for the failures before it: the
        // calls before the first failure are skipped.
        let first_failure = recs.iter().position(|r| r.failed).unwrap_or(recs.len());
        for (i, r) in recs.iter().enumerate().skip(first_failure).rev() {
            let op = r.call.op.as_ref();
            let keys = act_keys(&r.call.name, op);
            let command = command_of(op);
            if r.failed
                && !keys.iter().any(|k| later.keys.contains(k))
                && !command.is_some_and(|c| later.has_command(c))
                && let Some(u) = unresolved.get_mut(i)
            {
                *u = true;
            }
            later.add(keys, command);
        }
        // Write inputs: old, successful, of files no recent call touches.
        let mut inputs = Vec::new();
        if self.cfg.inputs {
            let recent: HashSet<&str> = recs
                .iter()
                .skip(keep_from)
                .filter_map(|r| r.call.op.as_ref())
                .flat_map(|o| o.paths.iter().chain(o.writes.iter()))
                .map(String::as_str)
                .collect();
            for r in recs.iter().take(keep_from) {
                let (true, Some(op)) = (r.write_input, r.call.op.as_ref()) else {
                    continue;
                };
                if r.failed || op.paths.iter().any(|p| recent.contains(p.as_str())) {
                    continue;
                }
                let Some(key) = self.content_key(r.call) else {
                    continue;
                };
                inputs.push(InputCandidate {
                    msg: r.call_msg,
                    slot: r.slot,
                    calls: traffic
                        .message_calls(r.call_msg)
                        .cloned()
                        .unwrap_or_else(|| MessageCalls::from(Vec::new())),
                    call_id: r.call.id.clone(),
                    key: key.clone(),
                    subject: Subject {
                        tool: r.call.name.clone(),
                        paths: display_paths(&self.table, &r.call.name, &r.call.args, Some(op)),
                        command: None,
                        exit: None,
                    },
                });
            }
        }
        let mut kept_errors = 0u64;
        let mut out = Vec::new();
        for (i, r) in recs.iter().enumerate().take(keep_from) {
            if !r.eligible {
                continue;
            }
            if self.cfg.keep_unresolved_errors && unresolved.get(i).copied().unwrap_or(false) {
                kept_errors += 1;
                continue;
            }
            let op = r.call.op.as_ref();
            let kind = kind_of(op);
            if !self.enabled(kind) {
                continue;
            }
            let name = &r.call.name;
            let command = op.and_then(|o| o.command.as_deref()).map(|c| {
                // Search keys start with the tool name; the header names it already.
                match c.strip_prefix(name.as_str()) {
                    Some(rest) if kind == Kind::Search => rest.trim().to_string(),
                    _ => c.to_string(),
                }
            });
            out.push(Candidate {
                msg: r.msg,
                call_id: r.call.id.clone(),
                kind,
                subject: Subject {
                    tool: name.clone(),
                    paths: display_paths(&self.table, name, &r.call.args, op),
                    command,
                    exit: None,
                },
            });
        }
        (out, inputs, kept_errors)
    }

    /// The tool results sent as user text that may be summarized, oldest
    /// first: outside the protected tail, not the last `keep_last` of them,
    /// long enough, not summarized already. Failures are not held back:
    /// these agents act on a result in the very next turn, which the
    /// protected tail keeps.
    fn text_candidates(&self, conv: &Conversation) -> Vec<TextCandidate> {
        let tail = conv.tail_start(self.cfg.protected_tail);
        let mut all = Vec::new();
        for (i, m) in conv.messages.iter().enumerate().take(tail) {
            if m.role() != Role::User || conv.is_protected(i) {
                continue;
            }
            for r in dialect::text_results(m) {
                all.push((i, r));
            }
        }
        let keep_from = all.len().saturating_sub(self.cfg.keep_last);
        let mut out = Vec::new();
        for (i, r) in all.into_iter().take(keep_from) {
            let Some(body) = conv
                .messages
                .get(i)
                .and_then(|m| dialect::text_results::part_text(m, r.part))
                .and_then(|t| t.get(r.body.clone()))
            else {
                continue;
            };
            if DONE_PREFIXES
                .iter()
                .any(|p| body.trim_start().starts_with(p))
                || fewer_chars_than(body, self.cfg.min_chars)
                || self.skipped_tool(&r.tool)
            {
                continue;
            }
            let op = r.operation(&self.table, self.cfg.cwd.as_deref());
            let kind = kind_of(op.as_ref());
            if !self.enabled(kind) {
                continue;
            }
            let paths = match &op {
                Some(o) if !o.paths.is_empty() => o.paths.clone(),
                _ => Vec::new(),
            };
            out.push(TextCandidate {
                msg: i,
                part: r.part,
                body: r.body,
                kind,
                subject: Subject {
                    command: op.and_then(|o| o.command).filter(|_| kind != Kind::Read),
                    tool: r.tool,
                    paths,
                    exit: None,
                },
            });
        }
        out
    }

    /// Summarize the output of one result sent as user text, as
    /// [`Self::try_one`] does a tool result; the header and whatever
    /// follows the output (an environment block) stay.
    fn try_text(
        &self,
        conv: &mut Conversation,
        c: &TextCandidate,
        sums: &mut Summaries,
        terms: Option<&mut Terms<'_>>,
        ctx: &StageContext,
        measure: bool,
    ) -> Attempt {
        let rewritten = {
            let Some(text) = conv
                .messages
                .get(c.msg)
                .and_then(|m| dialect::text_results::part_text(m, c.part))
            else {
                return Attempt::Skipped;
            };
            let (Some(head), Some(body), Some(rest)) = (
                text.get(..c.body.start),
                text.get(c.body.clone()),
                text.get(c.body.end..),
            ) else {
                return Attempt::Skipped;
            };
            let facts = dialect::ResultFacts::of(body);
            let counts = terms.map(|t| &mut t.counts);
            match self.summary_of(c.kind, &c.subject, &facts, body, sums, None, counts) {
                Ok((s, saved)) => {
                    let sep = if rest.is_empty() || s.ends_with('\n') {
                        ""
                    } else {
                        "\n\n"
                    };
                    let saved = saved.saturating_sub(sep.len());
                    (format!("{head}{s}{sep}{rest}"), saved)
                }
                Err(a) => return a,
            }
        };
        let (new_text, saved) = rewritten;
        edit(conv, c.msg, ctx, measure, saved, |m| {
            m.set_text_part(c.part, new_text)
        })
    }

    /// The argument of write call `call` holding content worth summarizing
    /// (a string, not already a summary, long enough), by the table's
    /// content arguments in order.
    fn content_key<'t>(&'t self, call: &traffic::ParsedCall) -> Option<&'t String> {
        self.table.find(&call.name)?.content_args.iter().find(|k| {
            call.args
                .get(k.as_str())
                .and_then(Value::as_str)
                .is_some_and(|t| {
                    !DONE_PREFIXES.iter().any(|p| t.trim_start().starts_with(p))
                        && !fewer_chars_than(t, self.cfg.min_chars)
                })
        })
    }

    /// Summarize one candidate. With `terms`, apply the information check
    /// and keep the term counts up to date.
    fn try_one(
        &self,
        conv: &mut Conversation,
        c: &Candidate,
        sums: &mut Summaries,
        terms: Option<&mut Terms<'_>>,
        ctx: &StageContext,
        measure: bool,
    ) -> Attempt {
        // The result text is borrowed from the conversation (not copied)
        // until the summary is settled.
        let summarized = {
            let Some(m) = conv.messages.get(c.msg) else {
                return Attempt::Skipped;
            };
            let Some(res) = m.tool_result(&c.call_id) else {
                return Attempt::Skipped;
            };
            let text: &str = &res.text;
            let facts = traffic::result_facts(conv, c.msg, &c.call_id, text);
            // Tried once, before its result changes: the scan's record of
            // the text's terms still holds.
            let (counts, locals) = match terms {
                Some(Terms { counts, locals, .. }) => (Some(counts), Some(&*locals)),
                None => (None, None),
            };
            let local = locals
                .and_then(|l| l.get(&(c.msg, c.call_id.as_str())))
                .filter(|l| l.len == text.len())
                .map(|l| (l, text));
            self.summary_of(c.kind, &c.subject, &facts, text, sums, local, counts)
        };
        let (s, saved) = match summarized {
            Ok(x) => x,
            Err(a) => return a,
        };
        edit(conv, c.msg, ctx, measure, saved, |m| {
            m.set_tool_result_text(&c.call_id, s)
        })
    }

    /// The settled summary of result `text` (of a call of `kind` on
    /// `subject`, with `facts`) and the characters it saves: reads,
    /// commands and searches summarize their payload, under a subject that
    /// states the exit code. See [`Self::settle`] for `local` and `counts`.
    #[allow(clippy::too_many_arguments)]
    fn summary_of(
        &self,
        kind: Kind,
        subject: &Subject,
        facts: &dialect::ResultFacts,
        text: &str,
        sums: &mut Summaries,
        local: Option<(&Local, &str)>,
        counts: Option<&mut TermCounts>,
    ) -> Result<(String, usize), Attempt> {
        // The subject with the exit code: copied only when it has one.
        let subject = if facts.exit_code == subject.exit {
            std::borrow::Cow::Borrowed(subject)
        } else {
            let mut s = subject.clone();
            s.exit = facts.exit_code;
            std::borrow::Cow::Owned(s)
        };
        let body = if matches!(kind, Kind::Read | Kind::Command | Kind::Search) {
            facts.payload(text)
        } else {
            text
        };
        let mut s = sums.summarize(kind, &subject, body);
        self.settle(text, local, &mut s, counts)
            .map(|saved| (s, saved))
    }

    /// Summarize the content argument of one write call, as [`Self::try_one`]
    /// does a result.
    fn try_input(
        &self,
        conv: &mut Conversation,
        c: &InputCandidate,
        sums: &mut Summaries,
        terms: Option<&mut Terms<'_>>,
        ctx: &StageContext,
        measure: bool,
    ) -> Attempt {
        let Some(m) = conv.messages.get(c.msg) else {
            return Attempt::Skipped;
        };
        // The call's arguments as the traffic index parsed them (the stage
        // changes no other argument of a call, nor the order of calls).
        let Some(call) = c.calls.get(c.slot).filter(|call| call.id == c.call_id) else {
            return Attempt::Skipped;
        };
        if m.tool_calls().get(c.slot).is_none_or(|x| x.id != c.call_id) {
            return Attempt::Skipped;
        }
        let Some(text) = call.args.get(&c.key).and_then(Value::as_str) else {
            return Attempt::Skipped;
        };
        let mut s = sums.summarize_input(&c.subject, text);
        let (local, counts) = match terms {
            Some(Terms {
                counts,
                input_locals,
                ..
            }) => (
                input_locals
                    .get(&(c.msg, c.slot))
                    .map(|(l, raw)| (l, raw.as_str())),
                Some(counts),
            ),
            None => (None, None),
        };
        let saved = match self.settle(text, local, &mut s, counts) {
            Ok(n) => n,
            Err(a) => return a,
        };
        let size_before = m.size();
        edit(conv, c.msg, ctx, measure, saved, |m| {
            // Re-serialized arguments must not come out longer anywhere.
            let original = m.clone();
            let done = m.set_tool_call_arg_at(c.slot, &c.key, &s, call.args.value())
                && m.size() < size_before;
            if !done {
                *m = original;
            }
            done
        })
    }

    /// Finish the summary `s` of `text`. With the information check
    /// (`terms`), append the `names:` line (the terms only `text` holds, up
    /// to `max_names`), reject a summary that would still drop too many, and
    /// update the term counts. Returns the characters saved, or why not.
    ///
    /// `local`, when given, holds the terms of `text`, found earlier, with
    /// the string their positions are in (`text` or its raw JSON).
    fn settle(
        &self,
        text: &str,
        local: Option<(&Local, &str)>,
        s: &mut String,
        terms: Option<&mut TermCounts>,
    ) -> Result<usize, Attempt> {
        let before = char_count(text);
        let max_after = ((before as f64) * (1.0 - self.cfg.min_saving)).floor() as usize;
        // The `names:` line only makes the summary longer: one already too
        // long without it is rejected before the terms are looked at.
        let bare = char_count(s);
        if bare >= before || bare > max_after {
            return Err(Attempt::Skipped);
        }
        let Some(global) = terms else {
            let after = s.chars().count();
            if after >= before || after > max_after {
                return Err(Attempt::Skipped);
            }
            return Ok(before - after);
        };
        // The keys of the bare summary's terms, found once: the `names:`
        // line is scanned on its own at the end (a line break ends every
        // term). Sorted: looked up by bisection, and each key counted once
        // with its number of occurrences (the order of the additions does
        // not matter).
        let mut bare_terms = std::mem::take(&mut global.1);
        bare_terms.clear();
        lines::for_each_term(s, false, |t| bare_terms.push(term_key(t)));
        bare_terms.sort_unstable();
        let scanned;
        let (local, source) = match local {
            Some(l) => l,
            None => {
                scanned = LocalBuilder::default().scan(text, false);
                (&scanned, text)
            }
        };
        let mut names: Vec<&str> = Vec::new();
        let mut lost = 0usize;
        for lt in &local.terms {
            let total = global.get_key(lt.key);
            if total.saturating_sub(lt.n) != 0 || bare_terms.binary_search(&lt.key).is_ok() {
                continue;
            }
            let t = source.get(lt.start..lt.end).unwrap_or("");
            if names.len() < self.cfg.max_names && t.len() <= MAX_NAME_BYTES {
                names.push(t);
            } else {
                lost += 1;
            }
        }
        let bare_len = s.len();
        if !names.is_empty() {
            s.push_str("\nnames: ");
            for (k, name) in names.iter().enumerate() {
                if k > 0 {
                    s.push_str(", ");
                }
                s.push_str(name);
            }
        }
        // The bare summary's characters were counted above.
        let after = bare + s.get(bare_len..).map_or(0, |line| line.chars().count());
        let verdict = if after >= before || after > max_after {
            Err(Attempt::Skipped)
        } else if (before - after) < lost.saturating_mul(self.cfg.chars_per_lost_term) {
            Err(Attempt::Dense)
        } else {
            Ok(())
        };
        if let Err(a) = verdict {
            global.1 = bare_terms;
            return Err(a);
        }
        for lt in &local.terms {
            global.sub_key(lt.key, lt.n);
        }
        for same in bare_terms.chunk_by(|a, b| a == b) {
            if let Some(&k) = same.first() {
                global.add_key(k, u32::try_from(same.len()).unwrap_or(u32::MAX));
            }
        }
        global.1 = bare_terms;
        if let Some(names_line) = s.get(bare_len..) {
            lines::for_each_term(names_line, false, |t| global.add_key(term_key(t), 1));
        }
        Ok(before - after)
    }

    /// Summarize eligible results of `conv` in place and return the counts.
    ///
    /// Without a budget (`budget_tokens`, else the run's budget) every
    /// eligible result that passes the information check is summarized. With
    /// one, results are taken oldest first until the conversation fits;
    /// results that fail the information check come last, again oldest
    /// first, only if the others were not enough.
    pub fn compress(&self, conv: &mut Conversation, ctx: &StageContext) -> Counts {
        let mut counts = Counts::default();
        let (cands, inputs, kept_errors) = self.candidates(conv);
        let texts = self.text_candidates(conv);
        counts.unresolved_errors_kept = kept_errors;
        let budget = self.cfg.budget_tokens.or(ctx.budget);
        let mut total = match budget {
            Some(_) => ctx.tokens(conv),
            None => 0,
        };
        if budget.is_some_and(|b| total <= b) {
            return counts;
        }
        // One conversation's summaries: files read again share the work.
        let mut sums = Summaries::new(self.cfg.limits());
        let mut terms =
            (self.cfg.chars_per_lost_term > 0).then(|| term_counts(conv, &cands, &inputs));
        // Results (tool messages and blocks, and those sent as user text)
        // oldest first, then write inputs oldest first.
        let mut results: Vec<Item<'_>> = cands.iter().map(Item::Result).collect();
        if !texts.is_empty() {
            results.extend(texts.iter().map(Item::Text));
            results.sort_by_key(Item::msg);
        }
        let items = results.into_iter().chain(inputs.iter().map(Item::Input));
        let mut dense: Vec<Item<'_>> = Vec::new();
        let mut fits = false;
        for item in items {
            match self.try_item(conv, item, &mut sums, terms.as_mut(), ctx, budget.is_some()) {
                Attempt::Applied { saved, tokens } => {
                    counts.record(item, saved);
                    if let (Some(b), Some((tb, ta))) = (budget, tokens) {
                        total = (total + ta).saturating_sub(tb);
                        if total <= b {
                            fits = true;
                            break;
                        }
                    }
                }
                Attempt::Dense => dense.push(item),
                Attempt::Skipped => {}
            }
        }
        if let (Some(b), false) = (budget, fits) {
            // Over budget still: the dense ones too, in the same order.
            let mut rest = dense.into_iter();
            for item in rest.by_ref() {
                if let Attempt::Applied { saved, tokens } =
                    self.try_item(conv, item, &mut sums, None, ctx, true)
                {
                    counts.record(item, saved);
                    if let Some((tb, ta)) = tokens {
                        total = (total + ta).saturating_sub(tb);
                    }
                    if total <= b {
                        break;
                    }
                }
            }
            counts.dense_kept = rest.count() as u64;
        } else {
            counts.dense_kept = dense.len() as u64;
        }
        counts
    }

    fn try_item(
        &self,
        conv: &mut Conversation,
        item: Item<'_>,
        sums: &mut Summaries,
        terms: Option<&mut Terms<'_>>,
        ctx: &StageContext,
        measure: bool,
    ) -> Attempt {
        match item {
            Item::Result(c) => self.try_one(conv, c, sums, terms, ctx, measure),
            Item::Text(c) => self.try_text(conv, c, sums, terms, ctx, measure),
            Item::Input(c) => self.try_input(conv, c, sums, terms, ctx, measure),
        }
    }
}

#[cfg(test)]
impl ToolCompressor {
    /// [`Self::candidates`] as it was before it deferred the work only a
    /// candidate needs: every answered call's display paths and content
    /// check worked out at once (the reference it is tested against).
    #[cfg(test)]
    fn candidates_reference(
        &self,
        conv: &Conversation,
    ) -> (Vec<Candidate>, Vec<InputCandidate>, u64) {
        let tail = conv.tail_start(self.cfg.protected_tail);
        let traffic = Traffic::of(conv, &self.table, self.cfg.cwd.as_deref());
        // Every answered call, in order.
        struct Rec {
            msg: usize,
            call_msg: usize,
            slot: usize,
            content_key: Option<String>,
            call_id: String,
            name: String,
            op: Option<Operation>,
            display: Vec<String>,
            failed: bool,
            eligible: bool,
        }
        let mut recs: Vec<Rec> = Vec::new();
        for cr in &traffic.calls {
            let call = traffic.call(cr);
            let Some(r) = cr.result else {
                continue;
            };
            let Some(res) = conv.messages.get(r).and_then(|rm| rm.tool_result(&call.id)) else {
                continue;
            };
            let lead = res.text.trim_start();
            let done = DONE_PREFIXES.iter().any(|p| lead.starts_with(p));
            let long_enough = !fewer_chars_than(&res.text, self.cfg.min_chars);
            let args = &call.args;
            let op = call.op.clone();
            let exit_style = op.as_ref().map(|o| o.exit).unwrap_or_default();
            let facts = traffic::result_facts(conv, r, &call.id, &res.text);
            let failed = facts.status(exit_style, &res.text, res.is_error) == Status::Failure;
            let id = call.id.clone();
            let unique = cr.unique;
            let eligible = unique
                && r < tail
                && !conv.is_protected(r)
                && !done
                && long_enough
                && !self.skipped_tool(&call.name)
                && conv.messages.get(r).is_some_and(|m| text_only(m, &id));
            let content_key = (self.cfg.inputs
                && unique
                && cr.msg < tail
                && !conv.is_protected(cr.msg)
                && op.as_ref().is_some_and(|o| o.kind == OpKind::Write)
                && !self.skipped_tool(&call.name))
            .then(|| self.table.find(&call.name))
            .flatten()
            .and_then(|spec| {
                spec.content_args.iter().find(|k| {
                    args.get(k.as_str())
                        .and_then(Value::as_str)
                        .is_some_and(|t| {
                            !DONE_PREFIXES.iter().any(|p| t.trim_start().starts_with(p))
                                && !fewer_chars_than(t, self.cfg.min_chars)
                        })
                })
            })
            .cloned();
            recs.push(Rec {
                msg: r,
                call_msg: cr.msg,
                slot: cr.slot,
                content_key,
                call_id: id,
                name: call.name.clone(),
                display: display_paths(&self.table, &call.name, args, op.as_ref()),
                op,
                failed,
                eligible,
            });
        }
        // The last `keep_last` results stay.
        let keep_from = recs.len().saturating_sub(self.cfg.keep_last);
        // Failures nothing acted on stay.
        let mut later = LaterKeys::default();
        let mut unresolved: HashSet<usize> = HashSet::default();
        // A call's keys are only looked up for the failures before it: the
        // calls before the first failure are skipped.
        let first_failure = recs.iter().position(|r| r.failed).unwrap_or(recs.len());
        for (i, r) in recs.iter().enumerate().skip(first_failure).rev() {
            let keys = act_keys(&r.name, r.op.as_ref());
            let command = command_of(r.op.as_ref());
            if r.failed
                && !keys.iter().any(|k| later.keys.contains(k))
                && !command.is_some_and(|c| later.has_command(c))
            {
                unresolved.insert(i);
            }
            later.add(keys, command);
        }
        // Write inputs: old, successful, of files no recent call touches.
        let mut inputs = Vec::new();
        if self.cfg.inputs {
            let recent: HashSet<&str> = recs
                .iter()
                .skip(keep_from)
                .filter_map(|r| r.op.as_ref())
                .flat_map(|o| o.paths.iter().chain(o.writes.iter()))
                .map(String::as_str)
                .collect();
            for r in recs.iter().take(keep_from) {
                let (Some(key), Some(op)) = (&r.content_key, &r.op) else {
                    continue;
                };
                if r.failed || op.paths.iter().any(|p| recent.contains(p.as_str())) {
                    continue;
                }
                inputs.push(InputCandidate {
                    msg: r.call_msg,
                    slot: r.slot,
                    calls: traffic
                        .message_calls(r.call_msg)
                        .cloned()
                        .unwrap_or_else(|| MessageCalls::from(Vec::new())),
                    call_id: r.call_id.clone(),
                    key: key.clone(),
                    subject: Subject {
                        tool: r.name.clone(),
                        paths: r.display.clone(),
                        command: None,
                        exit: None,
                    },
                });
            }
        }
        let mut kept_errors = 0u64;
        let mut out = Vec::new();
        for (i, r) in recs.into_iter().enumerate() {
            if !r.eligible || i >= keep_from {
                continue;
            }
            if self.cfg.keep_unresolved_errors && unresolved.contains(&i) {
                kept_errors += 1;
                continue;
            }
            let kind = match r.op.as_ref().map(|o| o.kind) {
                Some(OpKind::Read) => Kind::Read,
                Some(OpKind::Write) => Kind::Write,
                Some(OpKind::Edit) => Kind::Edit,
                Some(OpKind::Search) => Kind::Search,
                Some(OpKind::Command) => Kind::Command,
                None => Kind::Other,
            };
            if !self.enabled(kind) {
                continue;
            }
            let command = r.op.as_ref().and_then(|o| o.command.clone()).map(|c| {
                // Search keys start with the tool name; the header names it already.
                match c.strip_prefix(r.name.as_str()) {
                    Some(rest) if kind == Kind::Search => rest.trim().to_string(),
                    _ => c,
                }
            });
            out.push(Candidate {
                msg: r.msg,
                call_id: r.call_id,
                kind,
                subject: Subject {
                    tool: r.name,
                    paths: r.display,
                    command,
                    exit: None,
                },
            });
        }
        (out, inputs, kept_errors)
    }
}

/// The summary kind of a call's operation.
fn kind_of(op: Option<&Operation>) -> Kind {
    match op.map(|o| o.kind) {
        Some(OpKind::Read) => Kind::Read,
        Some(OpKind::Write) => Kind::Write,
        Some(OpKind::Edit) => Kind::Edit,
        Some(OpKind::Search) => Kind::Search,
        Some(OpKind::Command) => Kind::Command,
        None => Kind::Other,
    }
}

/// Change message `msg` with `change` (false: nothing changed) and report
/// it, with its tokens before and after when `measure`.
fn edit(
    conv: &mut Conversation,
    msg: usize,
    ctx: &StageContext,
    measure: bool,
    saved: usize,
    change: impl FnOnce(&mut Message) -> bool,
) -> Attempt {
    let Some(m) = conv.messages.get_mut(msg) else {
        return Attempt::Skipped;
    };
    let tokens_before = measure.then(|| count_message(ctx.counter.as_ref(), m));
    if !change(m) {
        return Attempt::Skipped;
    }
    let tokens = tokens_before.map(|tb| (tb, count_message(ctx.counter.as_ref(), m)));
    Attempt::Applied {
        saved: saved as u64,
        tokens,
    }
}

/// A tool result or a write input to summarize.
#[derive(Clone, Copy)]
enum Item<'a> {
    Result(&'a Candidate),
    Text(&'a TextCandidate),
    Input(&'a InputCandidate),
}

impl Item<'_> {
    /// The message it changes.
    fn msg(&self) -> usize {
        match self {
            Item::Result(c) => c.msg,
            Item::Text(c) => c.msg,
            Item::Input(c) => c.msg,
        }
    }
}

/// What happened to one candidate.
enum Attempt {
    /// Summarized; `tokens` is (before, after) when measured.
    Applied {
        saved: u64,
        tokens: Option<(usize, usize)>,
    },
    /// Kept: the summary would drop too many unique terms.
    Dense,
    /// Kept: not found, or the summary is not short enough.
    Skipped,
}

impl Counts {
    fn record(&mut self, item: Item<'_>, saved: u64) {
        self.chars_saved += saved;
        let kind = match item {
            Item::Result(c) => c.kind,
            Item::Text(c) => c.kind,
            Item::Input(_) => {
                self.inputs += 1;
                return;
            }
        };
        match kind {
            Kind::Read => self.reads += 1,
            Kind::Write | Kind::Edit => self.writes += 1,
            Kind::Command => self.commands += 1,
            Kind::Search => self.searches += 1,
            Kind::Other => self.other += 1,
        }
    }
}

impl Strategy for ToolCompressor {
    fn name(&self) -> &str {
        "tool_compressor"
    }

    fn apply(
        &self,
        conv: &mut Conversation,
        ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let c = self.compress(conv, ctx);
        let mut out = StageOutcome::default();
        out.count("reads", c.reads);
        out.count("writes", c.writes);
        out.count("commands", c.commands);
        out.count("searches", c.searches);
        out.count("other", c.other);
        out.count("inputs", c.inputs);
        out.count("unresolved_errors_kept", c.unresolved_errors_kept);
        out.count("dense_kept", c.dense_kept);
        out.count("chars_saved", c.chars_saved);
        out.notes.push(format!(
            "Summarized: {} reads, {} writes/edits, {} commands, {} searches, {} other, {} write inputs; kept {} unresolved errors, {} dense results; {} chars saved",
            c.reads,
            c.writes,
            c.commands,
            c.searches,
            c.other,
            c.inputs,
            c.unresolved_errors_kept,
            c.dense_kept,
            c.chars_saved
        ));
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
