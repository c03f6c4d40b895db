//! The dialect table: tool specs by name ([`DialectTable`], [`ToolSpec`]),
//! the built-in table, and the extraction of an [`Operation`] from a call's
//! arguments (with a fallback by tool and argument names), read through
//! [`CallArgs`]: a parsed [`Value`] or the traffic index's lazily parsed
//! arguments.

use super::shell::{is_shell_program, parse_shell_in};
use super::{ExitReport, OpKind, Operation, normalize_path, normalize_ws, parse_patch};
use ctxpress_core::message::ToolCall;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

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

    /// The full content a write call puts into its file, when the tool is a
    /// write (or an editor's write subcommand) and its arguments carry it:
    /// fingerprint it with [`super::content_fingerprint`] to compare it with a read.
    /// Worked out on demand, not by [`DialectTable::extract_args`]: most
    /// writes are never compared.
    pub fn write_content<'a, A: CallArgs + ?Sized>(
        &self,
        name: &str,
        args: &'a A,
    ) -> Option<&'a str> {
        let s = self.find(name)?;
        let kind = match s.kind {
            ToolKind::Write => OpKind::Write,
            ToolKind::Editor => editor_kind(s, args)?,
            _ => return None,
        };
        (kind == OpKind::Write)
            .then(|| arg_str(args, &s.content_args))
            .flatten()
    }

    /// Like [`DialectTable::extract`] with parsed arguments.
    pub fn extract_args<A: CallArgs + ?Sized>(
        &self,
        name: &str,
        args: &A,
        cwd: Option<&str>,
    ) -> Option<Operation> {
        self.extract_with(self.find(name), name, args, cwd)
    }

    /// [`DialectTable::extract_args`] with `spec`, what [`DialectTable::find`]
    /// gives for `name` (looked up once by a caller extracting many calls).
    pub(crate) fn extract_with<A: CallArgs + ?Sized>(
        &self,
        spec: Option<&ToolSpec>,
        name: &str,
        args: &A,
        cwd: Option<&str>,
    ) -> Option<Operation> {
        match spec {
            Some(s) => from_spec(s, args, cwd),
            None => fallback(name, args, cwd),
        }
    }
}

/// A call's arguments as the extraction reads them: a parsed [`Value`], or
/// the traffic index's lazily parsed [`crate::traffic::Args`], which answer
/// the same for the same arguments.
pub trait CallArgs {
    /// Member `key` when the arguments are an object holding it (as
    /// [`Value::get`] answers).
    fn arg(&self, key: &str) -> Option<&Value>;
    /// The arguments are a JSON object.
    fn is_object(&self) -> bool;
    /// The whole arguments as a value.
    fn whole(&self) -> &Value;
}

impl CallArgs for Value {
    fn arg(&self, key: &str) -> Option<&Value> {
        Value::get(self, key)
    }

    fn is_object(&self) -> bool {
        Value::is_object(self)
    }

    fn whole(&self) -> &Value {
        self
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

fn arg_str<'a, A: CallArgs + ?Sized>(args: &'a A, names: &[String]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| args.arg(n.as_str()).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
}

fn arg_paths<A: CallArgs + ?Sized>(args: &A, names: &[String], cwd: Option<&str>) -> Vec<String> {
    for n in names {
        match args.arg(n.as_str()) {
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

/// The command a call runs: a string argument as it is (borrowed from the
/// arguments, not copied), an array's words joined (or the script of
/// `["bash", "-lc", script]`).
fn command_arg<'a, A: CallArgs + ?Sized>(args: &'a A, names: &[String]) -> Option<Cow<'a, str>> {
    for n in names {
        match args.arg(n.as_str()) {
            Some(Value::String(s)) if !s.trim().is_empty() => return Some(Cow::Borrowed(s)),
            Some(Value::Array(a)) if !a.is_empty() => {
                let words: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
                // ["bash", "-lc", "script"] runs the script.
                if let [sh, flag, script] = words.as_slice()
                    && is_shell_program(sh)
                    && flag.starts_with('-')
                    && flag.ends_with('c')
                {
                    return Some(Cow::Borrowed(script));
                }
                return Some(Cow::Owned(words.join(" ")));
            }
            _ => {}
        }
    }
    None
}

/// The kind an editor's sub-command argument selects.
fn editor_kind<A: CallArgs + ?Sized>(s: &ToolSpec, args: &A) -> Option<OpKind> {
    let sub = s
        .subcommand_arg
        .as_ref()
        .and_then(|a| args.arg(a.as_str()))
        .and_then(Value::as_str)?;
    s.subcommands.get(sub).copied()
}

fn from_spec<A: CallArgs + ?Sized>(
    s: &ToolSpec,
    args: &A,
    session_cwd: Option<&str>,
) -> Option<Operation> {
    let own_cwd = arg_str(args, &s.cwd_args).map(|c| normalize_path(c, session_cwd));
    let cwd = own_cwd.as_deref().or(session_cwd);
    let base = Operation {
        cwd: cwd.map(|c| normalize_path(c, None)),
        exit: s.exit,
        current_file: s.current_file,
        ..Operation::default()
    };
    // `base` is moved into the one operation made, not copied.
    let file_op = |kind: OpKind, base: Operation| -> Option<Operation> {
        let paths = arg_paths(args, &s.path_args, cwd);
        if paths.is_empty() && !s.current_file {
            return None;
        }
        Some(Operation {
            kind,
            paths,
            ..base
        })
    };
    match s.kind {
        ToolKind::Read => file_op(OpKind::Read, base),
        ToolKind::Write => file_op(OpKind::Write, base),
        ToolKind::Edit => file_op(OpKind::Edit, base),
        ToolKind::Editor => file_op(editor_kind(s, args)?, base),
        ToolKind::Search => {
            let mut key = String::new();
            for n in &s.command_args {
                if let Some(v) = args.arg(n.as_str()) {
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
                key = args.whole().to_string();
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
            // The operation's working directory is `base`'s (`cwd`
            // normalized the same way), moved in, not worked out again.
            let mut op = parse_shell_in(&cmd, cwd, base.cwd);
            op.exit = s.exit;
            if op.kind == OpKind::Command || op.current_file {
                op.current_file = op.current_file || s.current_file;
            }
            Some(op)
        }
    }
}

fn fallback<A: CallArgs + ?Sized>(name: &str, args: &A, cwd: Option<&str>) -> Option<Operation> {
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
