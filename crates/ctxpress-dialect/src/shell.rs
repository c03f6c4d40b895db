//! The shell lexer: simple commands, redirects and heredocs, and what a
//! command line reads, writes or edits; command families.
//!
//! [`parse_shell`] gives the [`Operation`] of a command line
//! (reads such as `cat`, `sed -n`, `head`, `Get-Content`; writes by `>`, `tee`,
//! heredocs; in-place edits by `sed -i`, `>>`); [`command_family`] names what a
//! command runs, so a later run of the same family supersedes an earlier
//! failure.

use super::{OpKind, Operation, normalize_path, normalize_ws, parse_patch};

use std::borrow::Cow;

#[derive(Debug, Default)]
struct Seg<'a> {
    words: Vec<Cow<'a, str>>,
    /// Output redirect targets: (path, append).
    outs: Vec<(Cow<'a, str>, bool)>,
    piped: bool,
}

pub(super) fn is_shell_program(w: &str) -> bool {
    // The last path component, compared ignoring ASCII case (no lower-case
    // copy: nearly every program asked about is none of these).
    let base = w
        .bytes()
        .rposition(|c| c == b'/' || c == b'\\')
        .and_then(|k| w.get(k + 1..))
        .unwrap_or(w);
    base.len() <= 8
        && ["bash", "sh", "zsh", "dash", "bash.exe", "sh.exe"]
            .iter()
            .any(|p| base.eq_ignore_ascii_case(p))
}

/// The word being lexed: pieces of the command (quoted parts, escaped
/// characters, plain runs), borrowed while they are one contiguous slice of
/// it, copied only when a word joins pieces that are not (`a"b"`).
#[derive(Default)]
struct WordBuf {
    /// The word so far as one slice `start..end` of the command.
    span: Option<(usize, usize)>,
    /// The word so far, once it is not one slice.
    owned: Option<String>,
}

impl WordBuf {
    /// Append `cmd[s..e]`.
    fn push(&mut self, cmd: &str, s: usize, e: usize) {
        let piece = cmd.get(s..e).unwrap_or("");
        if let Some(o) = self.owned.as_mut() {
            o.push_str(piece);
            return;
        }
        match self.span {
            None => self.span = Some((s, e)),
            Some((a, b)) if b == s => self.span = Some((a, e)),
            Some((a, b)) => {
                let mut o = String::with_capacity(b - a + piece.len());
                o.push_str(cmd.get(a..b).unwrap_or(""));
                o.push_str(piece);
                self.owned = Some(o);
            }
        }
    }

    /// The word so far.
    fn as_str<'a>(&'a self, cmd: &'a str) -> &'a str {
        match (&self.owned, self.span) {
            (Some(o), _) => o,
            (None, Some((a, b))) => cmd.get(a..b).unwrap_or(""),
            (None, None) => "",
        }
    }

    /// The word, leaving the buffer empty.
    fn take<'a>(&mut self, cmd: &'a str) -> Cow<'a, str> {
        let span = self.span.take();
        match (self.owned.take(), span) {
            (Some(o), _) => Cow::Owned(o),
            (None, Some((a, b))) => Cow::Borrowed(cmd.get(a..b).unwrap_or("")),
            (None, None) => Cow::Borrowed(""),
        }
    }
}

/// True for the bytes that end a run of plain word characters (the
/// lexer's operators, quotes, escapes and blanks; `#` only starts a comment
/// outside a word).
fn ends_plain_run(b: u8) -> bool {
    matches!(
        b,
        b'\n'
            | b' '
            | b'\t'
            | b'\r'
            | b'\''
            | b'"'
            | b'\\'
            | b';'
            | b'('
            | b')'
            | b'&'
            | b'|'
            | b'>'
            | b'<'
    )
}

/// Split a shell command into simple commands. Quotes and escapes are honoured,
/// heredoc bodies skipped, output redirects collected. Works on bytes: every
/// character the lexer acts on is ASCII, so a multi-byte character is always
/// part of a word.
fn split_shell(cmd: &str) -> Vec<Seg<'_>> {
    split_shell_until(cmd, |_| false)
}

/// [`split_shell`], stopping after the first simple command `stop` accepts
/// (the ones before it and it are as the whole split gives them).
// The word/segment macros reset state that the last expansion never reads again.
#[allow(unused_assignments)]
fn split_shell_until<'a>(cmd: &'a str, stop: impl Fn(&Seg<'a>) -> bool) -> Vec<Seg<'a>> {
    let mut segs = Vec::new();
    let mut seg = Seg::default();
    let mut word = WordBuf::default();
    let mut in_word = false;
    let mut heredocs: Vec<Cow<'_, str>> = Vec::new();
    let b = cmd.as_bytes();
    let n = b.len();
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
                let w = word.take(cmd);
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
                let last = stop(&done);
                segs.push(done);
                if last {
                    return segs;
                }
            }
            seg.piped = $piped;
        };
    }
    // The end of the line starting at `from` (its `\n`, or the end).
    let line_end = |from: usize| {
        b.get(from..)
            .and_then(|rest| memchr::memchr(b'\n', rest))
            .map_or(n, |k| from + k)
    };
    while i < n {
        let c = b[i];
        match c {
            b'\n' => {
                end_seg!(false);
                i += 1;
                // Skip heredoc bodies.
                for delim in std::mem::take(&mut heredocs) {
                    while i < n {
                        let start = i;
                        i = line_end(i);
                        let line = cmd.get(start..i).unwrap_or("");
                        i += 1;
                        if line.trim() == delim {
                            break;
                        }
                    }
                }
                continue;
            }
            b' ' | b'\t' | b'\r' => end_word!(),
            b'\'' => {
                in_word = true;
                i += 1;
                let end = b
                    .get(i..)
                    .and_then(|rest| memchr::memchr(b'\'', rest))
                    .map_or(n, |k| i + k);
                word.push(cmd, i, end);
                i = end;
            }
            b'"' => {
                in_word = true;
                i += 1;
                while i < n && b[i] != b'"' {
                    let stop = b
                        .get(i..)
                        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
                        .map_or(n, |k| i + k);
                    word.push(cmd, i, stop);
                    i = stop;
                    if i < n && b[i] == b'\\' {
                        if i + 1 < n && matches!(b[i + 1], b'"' | b'\\' | b'$') {
                            i += 1;
                        }
                        word.push(cmd, i, i + 1);
                        i += 1;
                    }
                }
            }
            b'\\' => {
                let after = cmd.get(i + 1..).and_then(|r| r.chars().next());
                // A backslash before a name character is a Windows path
                // separator, not an escape.
                if after.is_some_and(|ch| ch.is_alphanumeric() || matches!(ch, '_' | '.')) {
                    in_word = true;
                    word.push(cmd, i, i + 1);
                } else if let Some(ch) = after {
                    if ch != '\n' {
                        in_word = true;
                        word.push(cmd, i + 1, i + 1 + ch.len_utf8());
                    }
                    i += ch.len_utf8();
                }
            }
            b'#' if !in_word => {
                i = line_end(i);
                continue;
            }
            b';' | b'(' | b')' => {
                end_seg!(false);
            }
            b'&' => {
                if i + 1 < n && b[i + 1] == b'&' {
                    end_seg!(false);
                    i += 1;
                } else if i + 1 < n && b[i + 1] == b'>' {
                    // &> file / &>> file
                    end_word!();
                    i += 1;
                    let app = i + 1 < n && b[i + 1] == b'>';
                    if app {
                        i += 1;
                    }
                    next = Next::Out(app);
                } else {
                    end_seg!(false);
                }
            }
            b'|' => {
                if i + 1 < n && b[i + 1] == b'|' {
                    end_seg!(false);
                    i += 1;
                } else {
                    if i + 1 < n && b[i + 1] == b'&' {
                        i += 1;
                    }
                    end_seg!(true);
                }
            }
            b'>' => {
                // An fd number right before `>` belongs to the redirect.
                let mut fd_out = true;
                let w = word.as_str(cmd);
                if in_word && !w.is_empty() && w.bytes().all(|c| c.is_ascii_digit()) {
                    fd_out = w == "1";
                    word = WordBuf::default();
                    in_word = false;
                }
                end_word!();
                let app = i + 1 < n && b[i + 1] == b'>';
                if app {
                    i += 1;
                }
                if i + 1 < n && b[i + 1] == b'&' {
                    // >&2, 2>&1: a dup, not a file.
                    i += 1;
                    next = Next::Skip;
                } else {
                    next = if fd_out { Next::Out(app) } else { Next::Skip };
                }
            }
            b'<' => {
                end_word!();
                if i + 1 < n && b[i + 1] == b'<' {
                    i += 1;
                    if i + 1 < n && b[i + 1] == b'<' {
                        i += 1;
                        next = Next::Skip; // here-string
                    } else {
                        if i + 1 < n && b[i + 1] == b'-' {
                            i += 1;
                        }
                        next = Next::Heredoc;
                    }
                } else {
                    next = Next::Skip;
                }
            }
            _ => {
                // A run of plain word characters (a `#` inside a word is one).
                in_word = true;
                let end = b
                    .get(i + 1..)
                    .and_then(|rest| rest.iter().position(|&x| ends_plain_run(x)))
                    .map_or(n, |k| i + 1 + k);
                word.push(cmd, i, end);
                i = end;
                continue;
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

fn file_args<'a>(words: &'a [Cow<'_, str>], with_value: &[&str]) -> Vec<&'a str> {
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
        out.push(&**w);
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
        let mut prog_buf = [0u8; 24];
        let prog_l = program_lower(prog_raw, &mut prog_buf);
        let prog = &*prog_l;
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
                        named.push(p.to_string());
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

/// The program a command word names, lower-cased in ASCII: its last `/`
/// component, written into `buf` when it fits (nearly every program name
/// does), else copied.
fn program_lower<'b>(word: &str, buf: &'b mut [u8; 24]) -> Cow<'b, str> {
    let base = word.rsplit('/').next().unwrap_or(word);
    if let Some(dst) = buf.get_mut(..base.len()) {
        dst.copy_from_slice(base.as_bytes());
        dst.make_ascii_lowercase();
        // ASCII case changes keep UTF-8 valid: never `Err`.
        if let Ok(l) = std::str::from_utf8(dst) {
            return Cow::Borrowed(l);
        }
    }
    Cow::Owned(base.to_ascii_lowercase())
}

fn segs_is_editor(args: &[Cow<'_, str>]) -> bool {
    // `edit 4:4` / `insert 12`: a line range or number.
    args.first()
        .is_none_or(|a| a.chars().all(|c| c.is_ascii_digit() || c == ':'))
}

/// True when the first line of `cmd` is a SWE-agent `edit 4:4` / `insert
/// 12` block header: `edit` or `insert`, then at most one word, of digits
/// and colons. Its words are looked at one by one: no other command's first
/// line is split past its first word.
fn is_swe_edit_block(cmd: &str) -> bool {
    let first_line = cmd.trim_start().lines().next().unwrap_or("");
    let mut fw = first_line.split_whitespace();
    if !matches!(fw.next(), Some("edit" | "insert")) {
        return false;
    }
    let arg = fw.next();
    fw.next().is_none() && arg.is_none_or(|a| a.chars().all(|c| c.is_ascii_digit() || c == ':'))
}

/// Parse a shell command into an operation: a read when it only reads files
/// (`cat`, `sed -n`, `head`, `tail`, `nl`, `Get-Content`, SWE-agent `open`), a
/// write or edit when it only writes them (`> file`, `tee`, heredocs, `>>`,
/// `sed -i`, SWE-agent `create`/`edit`), else a command (with the files it
/// changes as side effects in `writes`). Relative paths resolve against `cwd`
/// and any `cd` earlier in the command.
pub fn parse_shell(cmd: &str, cwd: Option<&str>) -> Operation {
    parse_shell_in(cmd, cwd, cwd.map(|c| normalize_path(c, None)))
}

/// [`parse_shell`] with the operation's working directory given: `cwd_n`
/// is `cwd` normalized as [`parse_shell`] normalizes it (the dialect table
/// has it already).
pub(crate) fn parse_shell_in(cmd: &str, cwd: Option<&str>, cwd_n: Option<String>) -> Operation {
    let command = Some(normalize_ws(cmd));
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
    if is_swe_edit_block(cmd) {
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
    let is_main = |s: &Seg<'_>| {
        s.words
            .first()
            .is_some_and(|w| !matches!(&**w, "cd" | "pushd" | "Set-Location" | "export" | "set"))
    };
    // The lexer stops at the main command: the rest (pipes, heredoc
    // bodies, later steps) is not looked at.
    let segs = split_shell_until(cmd, is_main);
    let main = segs.iter().find(|s| is_main(s));
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The lexer as first written (one `char` at a time, every word
    /// copied): the byte lexer must split every command the same way.
    #[derive(Debug, Default, PartialEq)]
    struct RefSeg {
        words: Vec<String>,
        outs: Vec<(String, bool)>,
        piped: bool,
    }

    #[allow(unused_assignments)]
    fn reference(cmd: &str) -> Vec<RefSeg> {
        let mut segs = Vec::new();
        let mut seg = RefSeg::default();
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
                        if chars[i] == '\\' && i + 1 < n && matches!(chars[i + 1], '"' | '\\' | '$')
                        {
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

    fn owned(segs: Vec<Seg<'_>>) -> Vec<RefSeg> {
        segs.into_iter()
            .map(|s| RefSeg {
                words: s.words.into_iter().map(Cow::into_owned).collect(),
                outs: s
                    .outs
                    .into_iter()
                    .map(|(w, a)| (w.into_owned(), a))
                    .collect(),
                piped: s.piped,
            })
            .collect()
    }

    #[test]
    fn the_byte_lexer_splits_as_the_char_lexer() {
        let cmds = [
            "",
            "cd /r && cat a.txt | head -n 5 > out.txt 2>&1",
            "echo 'it''s' \"a \\\" b $x\" c\\d \\\n e # comment\nnext",
            "cat > f <<'EOF'\nbody > x\n  EOF  \nls; (pwd) || true & wait",
            "cat <<- END\nx\nEND\ncat <<< here &>> log &> log2 |& tee -a t",
            "a\\é b\\\u{e9}x C:\\Users\\me\\f.txt 'unterminated",
            "\"open quote \\",
            "x#y #z\n1>f 2>g 12>h >>i >&2 <in",
            "héllo wörld > ñ.txt; ünï\\",
            "trailing backslash\\",
        ];
        for c in cmds {
            assert_eq!(owned(split_shell(c)), reference(c), "{c:?}");
        }
    }

    /// The SWE-agent block test as first written (every word of the first
    /// line collected).
    fn is_swe_edit_block_reference(cmd: &str) -> bool {
        let first_line = cmd.trim_start().lines().next().unwrap_or("");
        let mut fw = first_line.split_whitespace();
        if let (Some("edit" | "insert"), rest) = (fw.next(), fw.collect::<Vec<_>>())
            && rest.len() <= 1
            && rest
                .first()
                .is_none_or(|a| a.chars().all(|c| c.is_ascii_digit() || c == ':'))
        {
            return true;
        }
        false
    }

    #[test]
    fn swe_edit_blocks_are_found_as_before() {
        for c in [
            "",
            "edit",
            "edit 4:4\nnew text\nend_of_edit",
            "  insert 12\nx",
            "edit 4:4 more",
            "edit x",
            "edit\t1:2 \r\nbody",
            "editor 1",
            "cat edit 1",
            "insert\u{a0}3",
            "edit ４",
        ] {
            assert_eq!(
                is_swe_edit_block(c),
                is_swe_edit_block_reference(c),
                "{c:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn programs_lower_case_as_a_copy(w in "([a-zA-Z]{0,3}/){0,2}[a-zA-Z0-9é_.-]{0,30}") {
            let mut buf = [0u8; 24];
            let want = w.rsplit('/').next().unwrap_or(&w).to_ascii_lowercase();
            prop_assert_eq!(&*program_lower(&w, &mut buf), want.as_str());
        }

        #[test]
        fn swe_edit_blocks_random(c in "[ \t\r\n\u{a0}]{0,2}(edit|insert|ed|cat)?[ \t\u{a0}\n]{0,2}([0-9:]{0,3}|x)?[ \t\n]{0,2}([0-9]{0,2}|y)?[\n]?[a-z ]{0,4}") {
            prop_assert_eq!(is_swe_edit_block(&c), is_swe_edit_block_reference(&c));
        }

        #[test]
        fn a_split_stopped_at_a_command_is_a_prefix_of_the_whole(c in "[ab1 \\n;|&<>'\"]{0,30}") {
            let stop = |s: &Seg<'_>| s.words.first().is_some_and(|w| w == "b");
            let whole = split_shell(&c);
            let end = whole.iter().position(stop).map_or(whole.len(), |k| k + 1);
            let part = owned(split_shell_until(&c, stop));
            prop_assert_eq!(part, owned(whole).into_iter().take(end).collect::<Vec<_>>());
        }

        #[test]
        fn shell_programs_are_found_as_by_a_lower_case_copy(w in "([a-z]{0,3}[/\\\\])?(bash|sh|zsh|dash|Bash|SH|ZsH|bash\\.exe|sh\\.EXE|[a-zA-Zé.]{0,9})") {
            let base = w.rsplit(['/', '\\']).next().unwrap_or(&w);
            let expect = matches!(
                base.to_ascii_lowercase().as_str(),
                "bash" | "sh" | "zsh" | "dash" | "bash.exe" | "sh.exe"
            );
            prop_assert_eq!(is_shell_program(&w), expect);
        }

        #[test]
        fn random_commands_split_alike(c in "[a-c1 \\t\\n\\r'\"\\\\#;()&|<>_.$é-]{0,40}") {
            prop_assert_eq!(owned(split_shell(&c)), reference(&c));
        }
    }
}
