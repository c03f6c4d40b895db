//! The shell lexer: simple commands, redirects and heredocs, and what a
//! command line reads, writes or edits; command families.

use super::{OpKind, Operation, normalize_path, normalize_ws, parse_patch};

#[derive(Debug, Default)]
struct Seg {
    words: Vec<String>,
    /// Output redirect targets: (path, append).
    outs: Vec<(String, bool)>,
    piped: bool,
}

pub(super) fn is_shell_program(w: &str) -> bool {
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
