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

use crate::conversation::Conversation;
use crate::message::{Role, ToolCall};
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::LazyLock;

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
    /// Fingerprint of the full content a write puts into its file (see
    /// [`content_fingerprint`]), when the arguments carry it.
    pub content_hash: Option<u64>,
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

/// How a tool's arguments map to an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads the file(s) named by `path_args`.
    Read,
    /// Writes whole file(s).
    Write,
    /// Edits part of file(s).
    Edit,
    /// Searches; the arguments form the command key.
    Search,
    /// Runs the shell command in `command_args` (parsed for reads and writes).
    Shell,
    /// Applies a Codex-style patch held in `command_args`.
    Patch,
    /// An editor whose sub-command (in `subcommand_arg`) selects the kind via
    /// `subcommands` (OpenHands `str_replace_editor`).
    Editor,
}

/// One tool of a dialect.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// Tool name as the agent calls it (matched exactly, then ignoring case).
    pub name: String,
    /// What the tool does.
    pub kind: ToolKind,
    /// Argument names holding the path(s), first present wins; a string or an
    /// array of strings.
    #[serde(default)]
    pub path_args: Vec<String>,
    /// Argument names holding the command, patch or search pattern.
    #[serde(default)]
    pub command_args: Vec<String>,
    /// Argument names holding the working directory.
    #[serde(default)]
    pub cwd_args: Vec<String>,
    /// Argument names holding the full content written (for write tools).
    #[serde(default)]
    pub content_args: Vec<String>,
    /// For editors: the argument naming the sub-command.
    #[serde(default)]
    pub subcommand_arg: Option<String>,
    /// For editors: sub-command -> kind.
    #[serde(default)]
    pub subcommands: BTreeMap<String, OpKind>,
    /// A missing path means the currently open file (SWE-agent).
    #[serde(default)]
    pub current_file: bool,
    /// How results report exit codes.
    #[serde(default)]
    pub exit: ExitReport,
}

/// The dialect table: tool specs by name.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DialectTable {
    /// The tools; a later entry with the same name wins.
    pub tools: Vec<ToolSpec>,
}

fn spec(name: &str, kind: ToolKind, paths: &[&str]) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        kind,
        path_args: paths.iter().map(|s| s.to_string()).collect(),
        command_args: Vec::new(),
        cwd_args: Vec::new(),
        content_args: Vec::new(),
        subcommand_arg: None,
        subcommands: BTreeMap::new(),
        current_file: false,
        exit: ExitReport::Unknown,
    }
}

fn shell(name: &str, cmd: &[&str], cwd: &[&str], exit: ExitReport) -> ToolSpec {
    let mut s = spec(name, ToolKind::Shell, &[]);
    s.command_args = cmd.iter().map(|s| s.to_string()).collect();
    s.cwd_args = cwd.iter().map(|s| s.to_string()).collect();
    s.exit = exit;
    s
}

fn with_content(mut s: ToolSpec, content: &[&str]) -> ToolSpec {
    s.content_args = content.iter().map(|s| s.to_string()).collect();
    s
}

fn editor(name: &str) -> ToolSpec {
    let mut s = spec(name, ToolKind::Editor, &["path"]);
    s.subcommand_arg = Some("command".into());
    s.content_args = vec!["file_text".into()];
    for (k, v) in [
        ("view", OpKind::Read),
        ("create", OpKind::Write),
        ("str_replace", OpKind::Edit),
        ("insert", OpKind::Edit),
        ("undo_edit", OpKind::Edit),
    ] {
        s.subcommands.insert(k.into(), v);
    }
    s
}

fn current(mut s: ToolSpec) -> ToolSpec {
    s.current_file = true;
    s
}

impl DialectTable {
    /// The built-in table.
    pub fn builtin() -> Self {
        use ExitReport::*;
        use ToolKind as K;
        let fp = &["file_path", "filePath", "path"][..];
        let tools = vec![
            // Claude Code (and OpenCode, which uses the same names in lower case).
            spec("Read", K::Read, fp),
            with_content(spec("Write", K::Write, fp), &["content"]),
            spec("Edit", K::Edit, fp),
            spec("MultiEdit", K::Edit, fp),
            spec("NotebookEdit", K::Edit, &["notebook_path", "file_path"]),
            shell("Bash", &["command"], &[], OnFailure),
            {
                let mut s = spec("Grep", K::Search, &[]);
                s.command_args = vec!["pattern".into(), "path".into(), "glob".into()];
                s
            },
            {
                let mut s = spec("Glob", K::Search, &[]);
                s.command_args = vec!["pattern".into(), "path".into()];
                s
            },
            // Codex CLI.
            shell("shell", &["command", "cmd"], &["workdir", "cwd"], Always),
            shell("shell_command", &["command"], &["workdir", "cwd"], Always),
            shell(
                "exec_command",
                &["cmd", "command"],
                &["workdir", "cwd"],
                Always,
            ),
            {
                let mut s = spec("apply_patch", K::Patch, &[]);
                s.command_args = vec!["input".into(), "patch".into()];
                s.cwd_args = vec!["workdir".into()];
                s
            },
            // OpenHands.
            editor("str_replace_editor"),
            editor("file_editor"),
            shell("execute_bash", &["command"], &[], Unknown),
            // SWE-agent (function-calling tools; text actions come as `bash`).
            shell("bash", &["command", "cmd"], &[], Unknown),
            current(spec("open", K::Read, &["path", "file"])),
            current(spec("goto", K::Read, &[])),
            current(spec("scroll_down", K::Read, &[])),
            current(spec("scroll_up", K::Read, &[])),
            current(spec("edit", K::Edit, fp)),
            current(spec("insert", K::Edit, fp)),
            spec("create", K::Write, &["filename", "path", "file_path"]),
            {
                let mut s = spec("find_file", K::Search, &[]);
                s.command_args = vec!["file_name".into(), "dir".into()];
                s
            },
            {
                let mut s = spec("search_dir", K::Search, &[]);
                s.command_args = vec!["search_term".into(), "dir".into()];
                s
            },
            {
                let mut s = spec("search_file", K::Search, &[]);
                s.command_args = vec!["search_term".into(), "file".into()];
                s
            },
            // Cline / Roo Code.
            spec(
                "read_file",
                K::Read,
                &["path", "absolute_path", "file_path"],
            ),
            with_content(
                spec("write_to_file", K::Write, &["path", "file_path"]),
                &["content"],
            ),
            spec("replace_in_file", K::Edit, &["path", "file_path"]),
            spec("apply_diff", K::Edit, &["path", "file_path"]),
            spec("insert_content", K::Edit, &["path"]),
            spec("search_and_replace", K::Edit, &["path"]),
            shell("execute_command", &["command"], &["cwd"], Unknown),
            {
                let mut s = spec("search_files", K::Search, &[]);
                s.command_args = vec!["regex".into(), "path".into(), "file_pattern".into()];
                s
            },
            // Gemini CLI.
            with_content(
                spec("write_file", K::Write, &["file_path", "path"]),
                &["content"],
            ),
            spec("replace", K::Edit, &["file_path", "path"]),
            spec("read_many_files", K::Read, &["paths"]),
            shell("run_shell_command", &["command"], &["directory"], Unknown),
            {
                let mut s = spec("search_file_content", K::Search, &[]);
                s.command_args = vec!["pattern".into(), "path".into(), "include".into()];
                s
            },
        ];
        DialectTable { tools }
    }

    /// Layer `other` over this table: its tools replace same-named ones.
    pub fn extend(&mut self, other: DialectTable) {
        for t in other.tools {
            self.tools.retain(|x| x.name != t.name);
            self.tools.push(t);
        }
    }

    /// The spec for a tool name: exact match, then case-insensitive.
    pub fn find(&self, name: &str) -> Option<&ToolSpec> {
        self.tools
            .iter()
            .rev()
            .find(|t| t.name == name)
            .or_else(|| {
                self.tools
                    .iter()
                    .rev()
                    .find(|t| t.name.eq_ignore_ascii_case(name))
            })
    }

    /// The operation of a call, resolving relative paths against `cwd` (the
    /// session's working directory) when given. `None` for tools it does not
    /// know and calls whose arguments do not fit.
    pub fn extract(&self, call: &ToolCall<'_>, cwd: Option<&str>) -> Option<Operation> {
        let args = call.args();
        self.extract_args(&call.name, &args, cwd)
    }

    /// Like [`DialectTable::extract`] with parsed arguments.
    pub fn extract_args(&self, name: &str, args: &Value, cwd: Option<&str>) -> Option<Operation> {
        match self.find(name) {
            Some(s) => from_spec(s, args, cwd),
            None => fallback(name, args, cwd),
        }
    }
}

static BUILTIN: LazyLock<DialectTable> = LazyLock::new(DialectTable::builtin);

/// The built-in table, shared.
pub fn builtin() -> &'static DialectTable {
    &BUILTIN
}

/// Extract the operation of a tool call with the built-in table, or `None` for
/// tools it does not know.
pub fn extract(call: &ToolCall<'_>) -> Option<Operation> {
    BUILTIN.extract(call, None)
}

fn arg_str<'a>(args: &'a Value, names: &[String]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| args.get(n.as_str()).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
}

fn arg_paths(args: &Value, names: &[String], cwd: Option<&str>) -> Vec<String> {
    for n in names {
        match args.get(n.as_str()) {
            Some(Value::String(s)) if !s.trim().is_empty() => {
                return vec![normalize_path(s, cwd)];
            }
            Some(Value::Array(a)) => {
                let v: Vec<String> = a
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| normalize_path(s, cwd))
                    .collect();
                if !v.is_empty() {
                    return v;
                }
            }
            _ => {}
        }
    }
    Vec::new()
}

fn command_arg(args: &Value, names: &[String]) -> Option<String> {
    for n in names {
        match args.get(n.as_str()) {
            Some(Value::String(s)) if !s.trim().is_empty() => return Some(s.clone()),
            Some(Value::Array(a)) if !a.is_empty() => {
                let words: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
                // ["bash", "-lc", "script"] runs the script.
                if let [sh, flag, script] = words.as_slice()
                    && is_shell_program(sh)
                    && flag.starts_with('-')
                    && flag.ends_with('c')
                {
                    return Some(script.to_string());
                }
                return Some(words.join(" "));
            }
            _ => {}
        }
    }
    None
}

fn from_spec(s: &ToolSpec, args: &Value, session_cwd: Option<&str>) -> Option<Operation> {
    let own_cwd = arg_str(args, &s.cwd_args).map(|c| normalize_path(c, session_cwd));
    let cwd = own_cwd.as_deref().or(session_cwd);
    let base = Operation {
        cwd: cwd.map(|c| normalize_path(c, None)),
        exit: s.exit,
        current_file: s.current_file,
        ..Operation::default()
    };
    let file_op = |kind: OpKind| -> Option<Operation> {
        let paths = arg_paths(args, &s.path_args, cwd);
        if paths.is_empty() && !s.current_file {
            return None;
        }
        let content_hash = if kind == OpKind::Write {
            arg_str(args, &s.content_args).map(content_fingerprint)
        } else {
            None
        };
        Some(Operation {
            kind,
            paths,
            content_hash,
            ..base.clone()
        })
    };
    match s.kind {
        ToolKind::Read => file_op(OpKind::Read),
        ToolKind::Write => file_op(OpKind::Write),
        ToolKind::Edit => file_op(OpKind::Edit),
        ToolKind::Editor => {
            let sub = s
                .subcommand_arg
                .as_ref()
                .and_then(|a| args.get(a.as_str()))
                .and_then(Value::as_str)?;
            let kind = *s.subcommands.get(sub)?;
            file_op(kind)
        }
        ToolKind::Search => {
            let mut key = String::new();
            for n in &s.command_args {
                if let Some(v) = args.get(n.as_str()) {
                    if !key.is_empty() {
                        key.push(' ');
                    }
                    match v {
                        Value::String(x) => key.push_str(x),
                        other => key.push_str(&other.to_string()),
                    }
                }
            }
            if key.trim().is_empty() {
                key = args.to_string();
            }
            Some(Operation {
                kind: OpKind::Search,
                command: Some(format!("{} {}", s.name, normalize_ws(&key))),
                ..base
            })
        }
        ToolKind::Patch => {
            let text = command_arg(args, &s.command_args)?;
            let (kind, paths) = parse_patch(&text, cwd)?;
            Some(Operation {
                kind,
                paths,
                ..base
            })
        }
        ToolKind::Shell => {
            let cmd = command_arg(args, &s.command_args)?;
            let mut op = parse_shell(&cmd, cwd);
            op.cwd = base.cwd;
            op.exit = s.exit;
            if op.kind == OpKind::Command || op.current_file {
                op.current_file = op.current_file || s.current_file;
            }
            Some(op)
        }
    }
}

fn fallback(name: &str, args: &Value, cwd: Option<&str>) -> Option<Operation> {
    if !args.is_object() {
        return None;
    }
    // Words of the name: `run_terminal`, `viewSource`, `file-read`.
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in name.chars() {
        if (!ch.is_alphanumeric() || (ch.is_uppercase() && prev_lower)) && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        if ch.is_alphanumeric() {
            cur.extend(ch.to_lowercase());
        }
        prev_lower = ch.is_lowercase();
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    let has = |ws: &[&str]| words.iter().any(|w| ws.contains(&w.as_str()));
    let path_names: Vec<String> = ["path", "file_path", "filePath", "filename", "file"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let kind = if has(&[
        "shell", "bash", "exec", "execute", "command", "terminal", "run",
    ]) {
        ToolKind::Shell
    } else if has(&["patch"]) {
        ToolKind::Patch
    } else if has(&["edit", "replace", "insert", "modify"]) {
        ToolKind::Edit
    } else if has(&["write", "create", "save"]) {
        ToolKind::Write
    } else if has(&["read", "view", "open", "cat"]) {
        ToolKind::Read
    } else {
        return None;
    };
    let mut s = spec(name, kind, &[]);
    s.path_args = path_names;
    s.command_args = vec!["command".into(), "cmd".into(), "input".into()];
    s.cwd_args = vec!["cwd".into(), "workdir".into()];
    s.content_args = vec!["content".into()];
    from_spec(&s, args, cwd)
}

/// Parse a Codex-style patch: the paths of its `*** Update File:`,
/// `*** Add File:`, `*** Delete File:` and `*** Move to:` headers. The kind is
/// `Edit` when any file is updated in place, else `Write`. `None` when there is
/// no header.
pub fn parse_patch(text: &str, cwd: Option<&str>) -> Option<(OpKind, Vec<String>)> {
    let mut paths: Vec<String> = Vec::new();
    let mut partial = false;
    for line in text.lines() {
        let l = line.trim_start();
        let rest = if let Some(r) = l.strip_prefix("*** Update File:") {
            partial = true;
            r
        } else if let Some(r) = l
            .strip_prefix("*** Add File:")
            .or_else(|| l.strip_prefix("*** Delete File:"))
            .or_else(|| l.strip_prefix("*** Move to:"))
        {
            r
        } else {
            continue;
        };
        let p = normalize_path(rest.trim(), cwd);
        if !p.is_empty() && !paths.contains(&p) {
            paths.push(p);
        }
    }
    if paths.is_empty() {
        return None;
    }
    Some((if partial { OpKind::Edit } else { OpKind::Write }, paths))
}

/// Collapse runs of whitespace to one space and trim.
pub fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_drive(b: &[u8]) -> bool {
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

/// Normalize a path: quotes and whitespace trimmed, backslashes to slashes,
/// Windows drive paths lower-cased (their file systems ignore case), relative paths joined to `cwd` when known, `.` and `..`
/// resolved lexically, repeated and trailing slashes removed.
pub fn normalize_path(p: &str, cwd: Option<&str>) -> String {
    let t = p
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`')
        .trim();
    let mut s = t.replace('\\', "/");
    if let Some(rest) = s.strip_prefix("file://") {
        s = rest.to_string();
    }
    let absolute = s.starts_with('/') || is_drive(s.as_bytes()) || s.starts_with('~');
    if !absolute
        && let Some(c) = cwd
        && !c.trim().is_empty()
    {
        let base = normalize_path(c, None);
        s = format!("{base}/{s}");
    }
    let windows = is_drive(s.as_bytes());
    if windows {
        s = s.to_lowercase();
    }
    let lead = if s.starts_with('/') { "/" } else { "" };
    let mut parts: Vec<&str> = Vec::new();
    for seg in s.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if matches!(parts.last(), Some(l) if *l != ".." && !is_drive(l.as_bytes())) {
                    parts.pop();
                } else if lead.is_empty() && !windows {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let mut out = format!("{lead}{}", parts.join("/"));
    if windows && out.len() == 2 {
        out.push('/');
    }
    if out.is_empty() && !t.is_empty() {
        out = if lead.is_empty() {
            ".".into()
        } else {
            "/".into()
        };
    }
    out
}

/// The session's working directory, when the conversation states it (Codex
/// `<cwd>...</cwd>` in its environment context, or `Working directory: ...` in
/// a system prompt). Looks at the first messages only.
pub fn detect_cwd(conv: &Conversation) -> Option<String> {
    static CWD: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"<cwd>([^<\n]+)</cwd>|(?m)^\s*(?:Working directory|Primary working directory|cwd):\s*(\S[^\n]*)$")
            .expect("valid regex")
    });
    for m in conv.messages.iter().take(8) {
        if !matches!(m.role(), Role::System | Role::Developer | Role::User) {
            continue;
        }
        let t = m.text();
        if let Some(c) = CWD.captures(&t) {
            let v = c.get(1).or_else(|| c.get(2))?.as_str().trim();
            if !v.is_empty() {
                return Some(normalize_path(v, None));
            }
        }
    }
    if let Some(Value::String(c)) = conv.envelope.fields.get("cwd") {
        return Some(normalize_path(c, None));
    }
    None
}

// ---------------------------------------------------------------------------
// Shell parsing.

#[derive(Debug, Default)]
struct Seg {
    words: Vec<String>,
    /// Output redirect targets: (path, append).
    outs: Vec<(String, bool)>,
    piped: bool,
}

fn is_shell_program(w: &str) -> bool {
    let base = w.rsplit(['/', '\\']).next().unwrap_or(w);
    matches!(
        base.to_ascii_lowercase().as_str(),
        "bash" | "sh" | "zsh" | "dash" | "bash.exe" | "sh.exe"
    )
}

/// Split a shell command into simple commands. Quotes and escapes are honoured,
/// heredoc bodies skipped, output redirects collected.
// The word/segment macros reset state that the last expansion never reads again.
#[allow(unused_assignments)]
fn split_shell(cmd: &str) -> Vec<Seg> {
    let mut segs = Vec::new();
    let mut seg = Seg::default();
    let mut word = String::new();
    let mut in_word = false;
    let mut heredocs: Vec<String> = Vec::new();
    let chars: Vec<char> = cmd.chars().collect();
    let n = chars.len();
    let mut i = 0;
    // What the next completed word is for.
    #[derive(PartialEq)]
    enum Next {
        Word,
        Out(bool),
        Skip,
        Heredoc,
    }
    let mut next = Next::Word;
    macro_rules! end_word {
        () => {
            if in_word {
                let w = std::mem::take(&mut word);
                match next {
                    Next::Word => seg.words.push(w),
                    Next::Out(app) => seg.outs.push((w, app)),
                    Next::Skip => {}
                    Next::Heredoc => heredocs.push(w),
                }
                next = Next::Word;
                in_word = false;
            }
        };
    }
    macro_rules! end_seg {
        ($piped:expr) => {
            end_word!();
            let done = std::mem::take(&mut seg);
            if !done.words.is_empty() || !done.outs.is_empty() {
                segs.push(done);
            }
            seg.piped = $piped;
        };
    }
    while i < n {
        let c = chars[i];
        match c {
            '\n' => {
                end_seg!(false);
                i += 1;
                // Skip heredoc bodies.
                for delim in std::mem::take(&mut heredocs) {
                    while i < n {
                        let start = i;
                        while i < n && chars[i] != '\n' {
                            i += 1;
                        }
                        let line: String = chars[start..i].iter().collect();
                        i += 1;
                        if line.trim() == delim {
                            break;
                        }
                    }
                }
                continue;
            }
            ' ' | '\t' | '\r' => end_word!(),
            '\'' => {
                in_word = true;
                i += 1;
                while i < n && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < n && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < n && matches!(chars[i + 1], '"' | '\\' | '$') {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
            }
            '\\' => {
                // A backslash before a name character is a Windows path
                // separator, not an escape.
                if i + 1 < n
                    && (chars[i + 1].is_alphanumeric() || matches!(chars[i + 1], '_' | '.'))
                {
                    in_word = true;
                    word.push('\\');
                } else if i + 1 < n {
                    if chars[i + 1] != '\n' {
                        in_word = true;
                        word.push(chars[i + 1]);
                    }
                    i += 1;
                }
            }
            '#' if !in_word => {
                while i < n && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ';' | '(' | ')' => {
                end_seg!(false);
            }
            '&' => {
                if i + 1 < n && chars[i + 1] == '&' {
                    end_seg!(false);
                    i += 1;
                } else if i + 1 < n && chars[i + 1] == '>' {
                    // &> file / &>> file
                    end_word!();
                    i += 1;
                    let app = i + 1 < n && chars[i + 1] == '>';
                    if app {
                        i += 1;
                    }
                    next = Next::Out(app);
                } else {
                    end_seg!(false);
                }
            }
            '|' => {
                if i + 1 < n && chars[i + 1] == '|' {
                    end_seg!(false);
                    i += 1;
                } else {
                    if i + 1 < n && chars[i + 1] == '&' {
                        i += 1;
                    }
                    end_seg!(true);
                }
            }
            '>' => {
                // An fd number right before `>` belongs to the redirect.
                let mut fd_out = true;
                if in_word && !word.is_empty() && word.chars().all(|c| c.is_ascii_digit()) {
                    fd_out = word == "1";
                    word.clear();
                    in_word = false;
                }
                end_word!();
                let app = i + 1 < n && chars[i + 1] == '>';
                if app {
                    i += 1;
                }
                if i + 1 < n && chars[i + 1] == '&' {
                    // >&2, 2>&1: a dup, not a file.
                    i += 1;
                    next = Next::Skip;
                } else {
                    next = if fd_out { Next::Out(app) } else { Next::Skip };
                }
            }
            '<' => {
                end_word!();
                if i + 1 < n && chars[i + 1] == '<' {
                    i += 1;
                    if i + 1 < n && chars[i + 1] == '<' {
                        i += 1;
                        next = Next::Skip; // here-string
                    } else {
                        if i + 1 < n && chars[i + 1] == '-' {
                            i += 1;
                        }
                        next = Next::Heredoc;
                    }
                } else {
                    next = Next::Skip;
                }
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
        i += 1;
    }
    end_seg!(false);
    segs
}

fn is_null_target(p: &str) -> bool {
    let l = p.to_ascii_lowercase();
    l == "/dev/null" || l == "nul" || l == "$null" || l == "/dev/stderr" || l == "/dev/stdout"
}

#[derive(Default)]
struct ShellScan {
    reads: Vec<String>,
    writes_full: Vec<String>,
    writes_partial: Vec<String>,
    side_writes: Vec<String>,
    other: bool,
    swe_open: Option<OpKind>,
}

fn push_unique(v: &mut Vec<String>, p: String) {
    if !p.is_empty() && !v.contains(&p) {
        v.push(p);
    }
}

fn file_args<'a>(words: &'a [String], with_value: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut skip = false;
    let mut dashdash = false;
    for w in words {
        if skip {
            skip = false;
            continue;
        }
        if !dashdash && w == "--" {
            dashdash = true;
            continue;
        }
        if !dashdash && w.starts_with('-') && w.len() > 1 {
            if with_value.iter().any(|f| f.eq_ignore_ascii_case(w)) {
                skip = true;
            }
            continue;
        }
        out.push(w.as_str());
    }
    out
}

fn scan_shell(cmd: &str, cwd: Option<&str>, scan: &mut ShellScan, depth: usize) {
    let mut cwd: Option<String> = cwd.map(str::to_string);
    for seg in split_shell(cmd) {
        let Some(prog_raw) = seg.words.first() else {
            // Bare `> file`.
            for (p, app) in &seg.outs {
                if !is_null_target(p) {
                    let p = normalize_path(p, cwd.as_deref());
                    if *app {
                        push_unique(&mut scan.writes_partial, p);
                    } else {
                        push_unique(&mut scan.writes_full, p);
                    }
                }
            }
            continue;
        };
        let prog_l = prog_raw
            .rsplit('/')
            .next()
            .unwrap_or(prog_raw)
            .to_ascii_lowercase();
        let prog = prog_l.as_str();
        let args = seg.words.get(1..).unwrap_or(&[]);
        let outs: Vec<(String, bool)> = seg
            .outs
            .iter()
            .filter(|(p, _)| !is_null_target(p))
            .map(|(p, a)| (normalize_path(p, cwd.as_deref()), *a))
            .collect();
        let c = cwd.as_deref();
        // Nested shells.
        if depth < 3
            && is_shell_program(prog)
            && let Some(pos) = args
                .iter()
                .position(|a| a.starts_with('-') && a.ends_with('c') && !a.starts_with("--"))
            && let Some(script) = args.get(pos + 1)
        {
            scan_shell(script, c, scan, depth + 1);
            continue;
        }
        if depth < 3
            && matches!(prog, "powershell" | "pwsh" | "powershell.exe" | "pwsh.exe")
            && let Some(pos) = args
                .iter()
                .position(|a| a.eq_ignore_ascii_case("-command") || a.eq_ignore_ascii_case("-c"))
            && let Some(rest) = args.get(pos + 1..)
            && !rest.is_empty()
        {
            scan_shell(&rest.join(" "), c, scan, depth + 1);
            continue;
        }
        match prog {
            "cd" | "pushd" | "set-location" | "sl" | "chdir" => {
                if let Some(d) = file_args(args, &[]).first() {
                    cwd = Some(normalize_path(d, c));
                }
                continue;
            }
            "echo" | "printf" | "true" | ":" | "export" | "set" | "popd" | "clear" | "sleep"
            | "write-host" | "write-output"
                if outs.is_empty() =>
            {
                continue;
            }
            _ => {}
        }
        // Output redirects on a content producer are pure writes.
        if !outs.is_empty() {
            if matches!(prog, "cat" | "echo" | "printf") {
                for (p, app) in outs {
                    if app {
                        push_unique(&mut scan.writes_partial, p);
                    } else {
                        push_unique(&mut scan.writes_full, p);
                    }
                }
            } else {
                scan.other = true;
                for (p, _) in outs {
                    push_unique(&mut scan.side_writes, p);
                }
            }
            continue;
        }
        match prog {
            "cat" | "nl" | "less" | "more" | "bat" | "type" | "get-content" | "gc" => {
                let files = file_args(
                    args,
                    &[
                        "-path",
                        "-totalcount",
                        "-tail",
                        "-head",
                        "-first",
                        "-encoding",
                        "-literalpath",
                    ],
                );
                let named = args
                    .iter()
                    .position(|a| {
                        a.eq_ignore_ascii_case("-path") || a.eq_ignore_ascii_case("-literalpath")
                    })
                    .and_then(|pos| args.get(pos + 1));
                if let Some(p) = named {
                    push_unique(&mut scan.reads, normalize_path(p, c));
                }
                if files.iter().any(|f| f.contains('*')) {
                    scan.other = true;
                } else if files.is_empty() {
                    if named.is_none() && !seg.piped {
                        scan.other = true;
                    }
                } else {
                    for f in files {
                        push_unique(&mut scan.reads, normalize_path(f, c));
                    }
                }
            }
            "head" | "tail" => {
                if args
                    .iter()
                    .any(|a| a == "-f" || a == "-F" || a == "--follow")
                {
                    scan.other = true;
                    continue;
                }
                let files = file_args(args, &["-n", "-c", "--lines", "--bytes"]);
                if files.is_empty() {
                    if !seg.piped {
                        scan.other = true;
                    }
                } else {
                    for f in files {
                        push_unique(&mut scan.reads, normalize_path(f, c));
                    }
                }
            }
            "sed" => {
                let in_place = args.iter().any(|a| {
                    a == "-i"
                        || a.starts_with("-i") && !a.starts_with("-in")
                        || a.starts_with("--in-place")
                });
                let has_e = args.iter().any(|a| a == "-e" || a == "--expression");
                let mut files = file_args(args, &["-e", "--expression", "-f"]);
                if !has_e && !files.is_empty() {
                    files.remove(0); // the script
                }
                if files.is_empty() {
                    if !seg.piped {
                        scan.other = true;
                    }
                } else if in_place {
                    for f in files {
                        push_unique(&mut scan.writes_partial, normalize_path(f, c));
                    }
                } else {
                    for f in files {
                        push_unique(&mut scan.reads, normalize_path(f, c));
                    }
                }
            }
            "tee" | "tee-object" | "set-content" | "out-file" | "add-content" => {
                let append =
                    prog == "add-content" || args.iter().any(|a| a == "-a" || a == "--append");
                let files = file_args(args, &["-encoding", "-value", "-filepath", "-path"]);
                let mut named: Vec<String> = Vec::new();
                for key in ["-path", "-filepath"] {
                    if let Some(pos) = args.iter().position(|a| a.eq_ignore_ascii_case(key))
                        && let Some(p) = args.get(pos + 1)
                    {
                        named.push(p.clone());
                    }
                }
                let targets: Vec<String> = if !named.is_empty() {
                    named
                } else if prog == "tee" {
                    files.iter().map(|s| s.to_string()).collect()
                } else {
                    files.iter().take(1).map(|s| s.to_string()).collect()
                };
                for f in targets.iter().filter(|f| !is_null_target(f)) {
                    let p = normalize_path(f, c);
                    if append {
                        push_unique(&mut scan.writes_partial, p);
                    } else {
                        push_unique(&mut scan.writes_full, p);
                    }
                }
            }
            "rm" | "del" | "remove-item" | "unlink" | "touch" => {
                scan.other = true;
                for f in file_args(args, &[]) {
                    push_unique(&mut scan.side_writes, normalize_path(f, c));
                }
            }
            "mv" | "move" | "cp" | "copy" | "move-item" | "copy-item" => {
                scan.other = true;
                let files = file_args(args, &["-t", "--target-directory"]);
                let targets: &[&str] = if matches!(prog, "mv" | "move" | "move-item") {
                    &files
                } else {
                    files.last().map(std::slice::from_ref).unwrap_or(&[])
                };
                for f in targets {
                    push_unique(&mut scan.side_writes, normalize_path(f, c));
                }
            }
            // SWE-agent editor commands.
            "open" if depth == 0 => {
                if let Some(f) = file_args(args, &[]).first() {
                    push_unique(&mut scan.reads, normalize_path(f, c));
                }
                scan.swe_open = Some(OpKind::Read);
            }
            "create" if depth == 0 => {
                if let Some(f) = file_args(args, &[]).first() {
                    push_unique(&mut scan.writes_full, normalize_path(f, c));
                }
            }
            "edit" | "insert" if depth == 0 && segs_is_editor(args) => {
                scan.swe_open = Some(OpKind::Edit);
            }
            "goto" | "scroll_down" | "scroll_up" if depth == 0 => {
                scan.swe_open = Some(OpKind::Read);
            }
            _ => scan.other = true,
        }
    }
}

fn segs_is_editor(args: &[String]) -> bool {
    // `edit 4:4` / `insert 12`: a line range or number.
    args.first()
        .is_none_or(|a| a.chars().all(|c| c.is_ascii_digit() || c == ':'))
}

/// Parse a shell command into an operation: a read when it only reads files
/// (`cat`, `sed -n`, `head`, `tail`, `nl`, `Get-Content`, SWE-agent `open`), a
/// write or edit when it only writes them (`> file`, `tee`, heredocs, `>>`,
/// `sed -i`, SWE-agent `create`/`edit`), else a command (with the files it
/// changes as side effects in `writes`). Relative paths resolve against `cwd`
/// and any `cd` earlier in the command.
pub fn parse_shell(cmd: &str, cwd: Option<&str>) -> Operation {
    let command = Some(normalize_ws(cmd));
    let cwd_n = cwd.map(|c| normalize_path(c, None));
    if cmd.contains("*** Begin Patch")
        && let Some((kind, paths)) = parse_patch(cmd, cwd)
    {
        return Operation {
            kind,
            paths,
            command,
            cwd: cwd_n,
            ..Operation::default()
        };
    }
    // SWE-agent `edit 4:4` / `insert 12` blocks: the rest is the new text.
    let first_line = cmd.trim_start().lines().next().unwrap_or("");
    let mut fw = first_line.split_whitespace();
    if let (Some("edit" | "insert"), rest) = (fw.next(), fw.collect::<Vec<_>>())
        && rest.len() <= 1
        && rest
            .first()
            .is_none_or(|a| a.chars().all(|c| c.is_ascii_digit() || c == ':'))
    {
        return Operation {
            kind: OpKind::Edit,
            command,
            cwd: cwd_n,
            current_file: true,
            ..Operation::default()
        };
    }
    let mut scan = ShellScan::default();
    scan_shell(cmd, cwd, &mut scan, 0);
    let base = Operation {
        command,
        cwd: cwd_n,
        ..Operation::default()
    };
    if scan.other {
        let mut writes = scan.side_writes;
        for p in scan.writes_full.into_iter().chain(scan.writes_partial) {
            push_unique(&mut writes, p);
        }
        return Operation {
            kind: OpKind::Command,
            writes,
            ..base
        };
    }
    if !scan.writes_full.is_empty() || !scan.writes_partial.is_empty() {
        let kind = if scan.writes_partial.is_empty() {
            OpKind::Write
        } else {
            OpKind::Edit
        };
        let mut paths = scan.writes_full;
        for p in scan.writes_partial {
            push_unique(&mut paths, p);
        }
        return Operation {
            kind,
            paths,
            ..base
        };
    }
    if let Some(k) = scan.swe_open
        && scan.reads.len() <= 1
    {
        return Operation {
            kind: k,
            paths: scan.reads,
            current_file: true,
            ..base
        };
    }
    if !scan.reads.is_empty() {
        return Operation {
            kind: OpKind::Read,
            paths: scan.reads,
            ..base
        };
    }
    Operation {
        kind: OpKind::Command,
        ..base
    }
}

/// A coarse key grouping runs of "the same command" for failure handling: the
/// command with leading `cd` steps and trailing pipes dropped, reduced to the
/// program and its first non-flag argument (`npx jest ...` -> `npx jest`).
pub fn command_family(cmd: &str) -> String {
    let segs = split_shell(cmd);
    let main = segs.iter().find(|s| {
        s.words.first().is_some_and(|w| {
            !matches!(
                w.as_str(),
                "cd" | "pushd" | "Set-Location" | "export" | "set"
            )
        })
    });
    let Some(seg) = main else {
        return normalize_ws(cmd);
    };
    let mut key: Vec<&str> = Vec::new();
    for w in &seg.words {
        if key.is_empty() {
            key.push(w.rsplit('/').next().unwrap_or(w));
        } else if !w.starts_with('-') && !w.contains('=') {
            key.push(w);
            break;
        }
    }
    key.join(" ")
}

// ---------------------------------------------------------------------------
// Results.

static EXIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^exit code|exited with code|exit status|exit code|exit_code)\W{0,3}(-?\d+)")
        .expect("valid regex")
});

/// The exit code a result states in its first eight or last three lines
/// (`Exit code 1`, `Exit code: 0`, `Process exited with code 0`,
/// `[Command finished with exit code 1]`, `"exit_code": 0`).
pub fn exit_code(text: &str) -> Option<i64> {
    let t = text.trim_start();
    if t.starts_with('{') {
        static JSON_RE: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r#""exit_code"\s*:\s*(-?\d+)"#).expect("valid regex"));
        if let Some(c) = JSON_RE.captures(t) {
            return c.get(1).and_then(|m| m.as_str().parse().ok());
        }
    }
    let lines: Vec<&str> = t.lines().collect();
    let head = lines.iter().take(8);
    let tail = lines.iter().skip(lines.len().saturating_sub(3).max(8));
    for l in head.chain(tail) {
        if l.len() > 200 {
            continue;
        }
        if let Some(c) = EXIT_RE.captures(l) {
            return c.get(1).and_then(|m| m.as_str().parse().ok());
        }
    }
    None
}

static FAIL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)error:|\bfailed\b|exception|command not found|permission denied|no such file|cannot|fatal:")
        .expect("valid regex")
});

fn is_footer(l: &str) -> bool {
    let t = l.trim();
    t.starts_with("(Open file:") || t.starts_with("(Current directory:") || t == "bash-$"
}

/// The payload of a tool result: the output after a Codex `Output:` header, or
/// the whole text, with SWE-agent's `(Open file: ...)` footer dropped.
pub fn result_payload(text: &str) -> &str {
    let mut t = text;
    // Codex exec_command / shell_command headers.
    let mut off = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i >= 8 {
            break;
        }
        off += line.len();
        if line.trim_end() == "Output:" {
            t = text.get(off..).unwrap_or("");
            break;
        }
    }
    // SWE-agent footer.
    let mut end = t.len();
    for line in t.lines().rev().take(4) {
        if line.trim().is_empty() || is_footer(line) {
            if let Some(p) = t.get(..end).and_then(|s| s.rfind(line)) {
                end = p;
            }
        } else {
            break;
        }
    }
    t.get(..end).unwrap_or(t)
}

/// True when one line matches the spec's error patterns ("0 failed" and
/// "failed: 0" of a passing summary do not count).
pub fn line_looks_failed(line: &str) -> bool {
    static ZERO_RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\b0\s+failed\b|\bfailed\W{0,2}\s*0\b|\b0\s+errors?\b")
            .expect("valid regex")
    });
    FAIL_RE.find_iter(line).any(|m| {
        if m.as_str().eq_ignore_ascii_case("failed") {
            !ZERO_RE.is_match(line)
        } else {
            true
        }
    })
}

/// Judge a tool result: `is_error`, `<tool_use_error>`, a stated exit code,
/// the tool's exit convention, then the error patterns on the first and last
/// non-empty lines of the output (never anywhere in it).
pub fn result_status(exit: ExitReport, text: &str, is_error: Option<bool>) -> Status {
    if is_error == Some(true) {
        return Status::Failure;
    }
    let t = text.trim_start();
    if t.starts_with("<tool_use_error>") || t.starts_with("Error: ") && t.len() < 400 {
        return Status::Failure;
    }
    if let Some(code) = exit_code(text) {
        return if code == 0 {
            Status::Success
        } else {
            Status::Failure
        };
    }
    if exit == ExitReport::OnFailure {
        return Status::Success;
    }
    let payload = result_payload(text);
    let mut lines = payload.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next();
    let last = lines.next_back();
    if first.is_some_and(line_looks_failed) || last.is_some_and(line_looks_failed) {
        return Status::Failure;
    }
    if is_error == Some(false) {
        Status::Success
    } else {
        Status::Unknown
    }
}

/// Fingerprint of file content as a read returns or a write writes it:
/// line-number prefixes (`12\t`, `   12→`) removed when every line has one,
/// trailing `<system-reminder>` blocks dropped, trailing whitespace ignored.
pub fn content_fingerprint(text: &str) -> u64 {
    let mut t = text;
    if let Some(p) = t.find("<system-reminder>") {
        t = t.get(..p).unwrap_or(t);
    }
    let lines: Vec<&str> = t.trim_end().lines().collect();
    let numbered = !lines.is_empty() && lines.iter().all(|l| strip_line_number(l).is_some());
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for l in &lines {
        let body = if numbered {
            strip_line_number(l).unwrap_or(l)
        } else {
            l
        };
        h.update(body.trim_end().as_bytes());
        h.update(b"\n");
    }
    h.digest()
}

fn strip_line_number(l: &str) -> Option<&str> {
    let t = l.trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = t.get(digits..)?;
    rest.strip_prefix('\t')
        .or_else(|| rest.strip_prefix('→'))
        .or(if rest.is_empty() { Some("") } else { None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::borrow::Cow;

    fn call(name: &str, args: Value) -> ToolCall<'static> {
        ToolCall {
            id: Cow::Borrowed("c"),
            name: Cow::Owned(name.to_string()),
            arguments: Cow::Owned(args.to_string()),
        }
    }

    fn op(name: &str, args: Value) -> Operation {
        extract(&call(name, args)).expect("known tool")
    }

    #[test]
    fn claude_code_tools() {
        let r = op(
            "Read",
            json!({"file_path": "/repo/./src/a.rs", "limit": 10}),
        );
        assert_eq!(
            (r.kind, r.paths),
            (OpKind::Read, vec!["/repo/src/a.rs".into()])
        );
        let w = op(
            "Write",
            json!({"file_path": "/r/a.rs", "content": "x\ny\n"}),
        );
        assert_eq!(w.kind, OpKind::Write);
        assert_eq!(w.content_hash, Some(content_fingerprint("1\tx\n2\ty")));
        assert_eq!(
            op(
                "Edit",
                json!({"file_path": "/r/a.rs", "old_string": "a", "new_string": "b"})
            )
            .kind,
            OpKind::Edit
        );
        assert_eq!(
            op("MultiEdit", json!({"file_path": "/r/a.rs", "edits": []})).kind,
            OpKind::Edit
        );
        assert_eq!(
            op("NotebookEdit", json!({"notebook_path": "/r/n.ipynb"})).paths,
            vec!["/r/n.ipynb".to_string()]
        );
        let g = op("Grep", json!({"pattern": "foo", "path": "/r"}));
        assert_eq!(
            (g.kind, g.command.as_deref()),
            (OpKind::Search, Some("Grep foo /r"))
        );
        assert_eq!(
            op("Glob", json!({"pattern": "**/*.rs"})).kind,
            OpKind::Search
        );
        let b = op("Bash", json!({"command": "cd \"/r/my dir\" && npm   test"}));
        assert_eq!(b.kind, OpKind::Command);
        assert_eq!(b.command.as_deref(), Some("cd \"/r/my dir\" && npm test"));
        assert_eq!(b.exit, ExitReport::OnFailure);
        // Missing path: not an operation.
        assert!(extract(&call("Read", json!({"limit": 3}))).is_none());
        // Unknown tools are left alone.
        assert!(extract(&call("TaskCreate", json!({"subject": "x"}))).is_none());
        assert!(extract(&call("write_stdin", json!({"session_id": 1, "chars": ""}))).is_none());
    }

    #[test]
    fn shell_reads_writes_and_cd() {
        let r = parse_shell(
            "cd /r/backend && sed -n '1,200p' src/main.go && echo '---' && cat ../README.md",
            None,
        );
        assert_eq!(r.kind, OpKind::Read);
        assert_eq!(
            r.paths,
            vec![
                "/r/backend/src/main.go".to_string(),
                "/r/README.md".to_string()
            ]
        );
        let r = parse_shell("head -n 50 a.txt | nl", Some("/w"));
        assert_eq!(
            (r.kind, r.paths),
            (OpKind::Read, vec!["/w/a.txt".to_string()])
        );
        assert_eq!(parse_shell("tail -f log.txt", None).kind, OpKind::Command);
        let w = parse_shell("cat > /r/a.txt <<'EOF'\nhello > not/a/file\nEOF\n", None);
        assert_eq!(
            (w.kind, w.paths),
            (OpKind::Write, vec!["/r/a.txt".to_string()])
        );
        let w = parse_shell("echo x | tee out.txt", Some("/r"));
        assert_eq!(
            (w.kind, w.paths),
            (OpKind::Write, vec!["/r/out.txt".to_string()])
        );
        let e = parse_shell("echo x >> log.txt", Some("/r"));
        assert_eq!(e.kind, OpKind::Edit);
        let e = parse_shell("sed -i 's/a/b/' f.py", Some("/r"));
        assert_eq!(
            (e.kind, e.paths),
            (OpKind::Edit, vec!["/r/f.py".to_string()])
        );
        let c = parse_shell("npm test > out.log 2>&1", Some("/r"));
        assert_eq!(
            (c.kind, c.writes),
            (OpKind::Command, vec!["/r/out.log".to_string()])
        );
        let c = parse_shell("go build ./... 2>/dev/null", None);
        assert!(c.writes.is_empty() && c.kind == OpKind::Command);
        let n = parse_shell("/bin/bash -lc \"cat 'a b.txt'\"", Some("/r"));
        assert_eq!(
            (n.kind, n.paths),
            (OpKind::Read, vec!["/r/a b.txt".to_string()])
        );
        let p = parse_shell(
            "powershell -Command Get-Content -Path src\\x.ts -TotalCount 40",
            Some("C:\\W"),
        );
        assert_eq!(
            (p.kind, p.paths),
            (OpKind::Read, vec!["c:/w/src/x.ts".to_string()])
        );
        assert_eq!(parse_shell("ls -la", None).kind, OpKind::Command);
        assert_eq!(
            parse_shell("rm -f a.txt", Some("/r")).writes,
            vec!["/r/a.txt".to_string()]
        );
    }

    #[test]
    fn codex_tools_and_patches() {
        let e = op(
            "exec_command",
            json!({"cmd": "sed -n '1,80p' src/a.js", "workdir": "/home/u/p"}),
        );
        assert_eq!(
            (e.kind, e.paths.clone()),
            (OpKind::Read, vec!["/home/u/p/src/a.js".to_string()])
        );
        assert_eq!(e.cwd.as_deref(), Some("/home/u/p"));
        assert_eq!(e.exit, ExitReport::Always);
        let s = op(
            "shell",
            json!({"command": ["bash", "-lc", "cat x.txt"], "workdir": "/p"}),
        );
        assert_eq!(s.paths, vec!["/p/x.txt".to_string()]);
        let s = op(
            "shell_command",
            json!({"command": "Get-ChildItem -Force", "workdir": "C:\\Users\\Me\\T"}),
        );
        assert_eq!(
            (s.kind, s.cwd.as_deref()),
            (OpKind::Command, Some("c:/users/me/t"))
        );
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: /abs/b.rs\n+x\n*** Delete File: c.rs\n*** End Patch\n";
        let p = DialectTable::builtin()
            .extract(&call("apply_patch", json!({"input": patch})), Some("/w"))
            .unwrap();
        assert_eq!(p.kind, OpKind::Edit);
        assert_eq!(p.paths, vec!["/w/src/a.rs", "/abs/b.rs", "/w/c.rs"]);
        let add = parse_patch(
            "*** Begin Patch\n*** Add File: n.rs\n+x\n*** End Patch",
            None,
        )
        .unwrap();
        assert_eq!(add.0, OpKind::Write);
        let via_shell = parse_shell(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.py\n*** End Patch\nEOF",
            Some("/w"),
        );
        assert_eq!(
            (via_shell.kind, via_shell.paths),
            (OpKind::Edit, vec!["/w/a.py".to_string()])
        );
    }

    #[test]
    fn other_dialects() {
        let t = DialectTable::builtin();
        let x = |n: &str, a: Value| t.extract_args(n, &a, Some("/w")).unwrap();
        assert_eq!(
            x(
                "str_replace_editor",
                json!({"command": "view", "path": "/w/a.py"})
            )
            .kind,
            OpKind::Read
        );
        assert_eq!(
            x(
                "str_replace_editor",
                json!({"command": "create", "path": "a.py", "file_text": "x"})
            )
            .kind,
            OpKind::Write
        );
        assert_eq!(
            x(
                "file_editor",
                json!({"command": "str_replace", "path": "a.py"})
            )
            .kind,
            OpKind::Edit
        );
        assert!(
            t.extract_args(
                "str_replace_editor",
                &json!({"command": "bogus", "path": "a"}),
                None
            )
            .is_none()
        );
        assert_eq!(
            x("execute_bash", json!({"command": "cat a.py"})).paths,
            vec!["/w/a.py".to_string()]
        );
        assert_eq!(
            x("read_file", json!({"path": "src/x.ts"})).paths,
            vec!["/w/src/x.ts".to_string()]
        );
        assert_eq!(
            x("write_to_file", json!({"path": "x.ts", "content": "a"})).kind,
            OpKind::Write
        );
        assert_eq!(
            x("replace_in_file", json!({"path": "x.ts", "diff": "d"})).kind,
            OpKind::Edit
        );
        assert_eq!(
            x("apply_diff", json!({"path": "x.ts", "diff": "d"})).kind,
            OpKind::Edit
        );
        assert_eq!(
            x("execute_command", json!({"command": "ls"})).kind,
            OpKind::Command
        );
        assert_eq!(
            x("write_file", json!({"file_path": "x.ts", "content": "a"})).kind,
            OpKind::Write
        );
        assert_eq!(
            x("replace", json!({"file_path": "x.ts"})).kind,
            OpKind::Edit
        );
        assert_eq!(
            x("run_shell_command", json!({"command": "head a"})).kind,
            OpKind::Read
        );
        // SWE-agent.
        let o = x("bash", json!({"command": "open tests/m.py"}));
        assert_eq!(
            (o.kind, o.paths),
            (OpKind::Read, vec!["/w/tests/m.py".to_string()])
        );
        let e = x(
            "bash",
            json!({"command": "edit 4:4\ndef f():\nend_of_edit"}),
        );
        assert!(e.kind == OpKind::Edit && e.paths.is_empty() && e.current_file);
        assert_eq!(
            x("bash", json!({"command": "create reproduce.py"})).kind,
            OpKind::Write
        );
        let fe = x("edit", json!({"search": "a", "replace": "b"}));
        assert!(fe.current_file && fe.kind == OpKind::Edit);
        assert_eq!(x("open", json!({"path": "t.py"})).kind, OpKind::Read);
        // OpenCode lower-case names with camelCase args.
        assert_eq!(x("read", json!({"filePath": "/w/a"})).kind, OpKind::Read);
        // Generic fallback by name and argument names.
        assert_eq!(
            x("view_source", json!({"filename": "z.c"})).paths,
            vec!["/w/z.c".to_string()]
        );
        assert_eq!(
            x("run_terminal", json!({"cmd": "cat z.c"})).kind,
            OpKind::Read
        );
        assert!(
            t.extract_args("frobnicate", &json!({"path": "z"}), None)
                .is_none()
        );
    }

    #[test]
    fn table_extends_from_deserialized_config() {
        let extra: DialectTable = serde_json::from_value(json!({"tools": [
            {"name": "fetch_source", "kind": "read", "path_args": ["target"]},
            {"name": "Read", "kind": "search", "command_args": ["file_path"]}
        ]}))
        .unwrap();
        let mut t = DialectTable::builtin();
        t.extend(extra);
        let r = t
            .extract_args("fetch_source", &json!({"target": "a/b"}), Some("/w"))
            .unwrap();
        assert_eq!(
            (r.kind, r.paths),
            (OpKind::Read, vec!["/w/a/b".to_string()])
        );
        assert_eq!(
            t.extract_args("Read", &json!({"file_path": "x"}), None)
                .unwrap()
                .kind,
            OpKind::Search
        );
        assert!(
            serde_json::from_value::<DialectTable>(
                json!({"tools": [{"name": "x", "kind": "read", "pathargs": []}]})
            )
            .is_err()
        );
    }

    #[test]
    fn paths_normalize() {
        assert_eq!(
            normalize_path("./src//a/../b.rs", Some("/w/")),
            "/w/src/b.rs"
        );
        assert_eq!(
            normalize_path("C:\\Users\\Me\\A.ts", None),
            "c:/users/me/a.ts"
        );
        assert_eq!(
            normalize_path("c:/users/me/a.ts", None),
            normalize_path("C:\\USERS\\me\\a.ts", None)
        );
        assert_eq!(
            normalize_path("src\\x.ts", Some("D:\\Proj")),
            "d:/proj/src/x.ts"
        );
        assert_eq!(normalize_path("\"/a b/c\"", None), "/a b/c");
        assert_eq!(normalize_path("../x", None), "../x");
        assert_eq!(normalize_path("/../x", None), "/x");
        assert_eq!(normalize_path("é/ü.rs", Some("/w")), "/w/é/ü.rs");
    }

    #[test]
    fn statuses() {
        use Status::*;
        assert_eq!(
            result_status(ExitReport::OnFailure, "Exit code 1\nboom", None),
            Failure
        );
        assert_eq!(
            result_status(ExitReport::OnFailure, "all good", None),
            Success
        );
        assert_eq!(
            result_status(
                ExitReport::Always,
                "Exit code: 0\nWall time: 1s\nOutput:\nerror: nope",
                None
            ),
            Success
        );
        assert_eq!(
            result_status(
                ExitReport::Always,
                "Command: x\nChunk ID: 1\nWall time: 0\nProcess exited with code 2\nOutput:\n",
                None
            ),
            Failure
        );
        assert_eq!(
            result_status(
                ExitReport::Unknown,
                "<tool_use_error>String not found</tool_use_error>",
                None
            ),
            Failure
        );
        assert_eq!(result_status(ExitReport::Unknown, "x", Some(true)), Failure);
        assert_eq!(
            result_status(
                ExitReport::Unknown,
                "{\"output\":\"x\",\"metadata\":{\"exit_code\":1}}",
                None
            ),
            Failure
        );
        assert_eq!(
            result_status(ExitReport::Unknown, "bash: foo: command not found", None),
            Failure
        );
        // Patterns only on the first and last lines.
        assert_eq!(
            result_status(ExitReport::Unknown, "ok\nerror: in the middle\nfine", None),
            Unknown
        );
        assert_eq!(
            result_status(
                ExitReport::Unknown,
                "running\nTests: 0 failed, 12 passed",
                None
            ),
            Unknown
        );
        assert_eq!(
            result_status(ExitReport::Unknown, "running\n3 failed, 9 passed", None),
            Failure
        );
        assert_eq!(
            result_status(
                ExitReport::Unknown,
                "cat: x: No such file or directory\n\n(Open file: n/a)\n(Current directory: /r)\nbash-$",
                None
            ),
            Failure
        );
        assert_eq!(
            exit_code("[Command finished with exit code 127]"),
            Some(127)
        );
    }

    #[test]
    fn families_and_fingerprints() {
        assert_eq!(
            command_family("cd /r && npx jest --config j.js foo 2>&1 | tail -5"),
            "npx jest"
        );
        assert_eq!(command_family("go test ./..."), "go test");
        assert_eq!(
            command_family("/usr/bin/python -m pytest -x"),
            "python pytest"
        );
        assert_eq!(
            content_fingerprint("1\ta\n2\tb\n"),
            content_fingerprint("a\nb")
        );
        assert_eq!(
            content_fingerprint("     1→a\n     2→b"),
            content_fingerprint("a\nb\n\n<system-reminder>x</system-reminder>")
        );
        assert_ne!(content_fingerprint("1\ta\nb"), content_fingerprint("a\nb"));
        assert_eq!(
            result_payload("Exit code: 0\nWall time: 1\nOutput:\nhello\n"),
            "hello\n"
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        for s in [
            "", "'", "\"", "\\", ">", "2>", "<<", "cat <<", "a | | b", "é > ü", "sed -i", "cd",
            "&>", "|&", "bash -c",
        ] {
            let _ = parse_shell(s, Some("/w"));
            let _ = command_family(s);
            let _ = result_status(ExitReport::Unknown, s, None);
            let _ = normalize_path(s, Some("C:"));
        }
    }
}
