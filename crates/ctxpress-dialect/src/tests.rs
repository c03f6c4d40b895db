use super::*;
use ctxpress_core::message::ToolCall;
use serde_json::Value;
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
    let t = builtin();
    let content = json!({"file_path": "/r/a.rs", "content": "x\ny\n"});
    assert_eq!(t.write_content("Write", &content), Some("x\ny\n"));
    assert_eq!(
        content_fingerprint(t.write_content("Write", &content).unwrap()),
        content_fingerprint("1\tx\n2\ty")
    );
    // Not a write, or no content: nothing.
    assert_eq!(t.write_content("Read", &content), None);
    assert_eq!(
        t.write_content("Write", &json!({"file_path": "/r/a.rs"})),
        None
    );
    assert_eq!(t.write_content("NoSuchTool", &content), None);
    // An editor's write subcommand carries its content; its other ones do not.
    let create = json!({"command": "create", "path": "/r/b.py", "file_text": "print(1)\n"});
    assert_eq!(
        t.write_content("str_replace_editor", &create),
        Some("print(1)\n")
    );
    let view = json!({"command": "view", "path": "/r/b.py"});
    assert_eq!(t.write_content("str_replace_editor", &view), None);
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
        "", "'", "\"", "\\", ">", "2>", "<<", "cat <<", "a | | b", "é > ü", "sed -i", "cd", "&>",
        "|&", "bash -c",
    ] {
        let _ = parse_shell(s, Some("/w"));
        let _ = command_family(s);
        let _ = result_status(ExitReport::Unknown, s, None);
        let _ = normalize_path(s, Some("C:"));
    }
}

#[test]
fn exit_code_reads_the_first_eight_and_last_three_lines() {
    // The plain version: split everything, then pick.
    let re = regex::Regex::new(
        r"(?i)(?:^exit code|exited with code|exit status|exit code|exit_code)\W{0,3}(-?\d+)",
    )
    .unwrap();
    let reference = |text: &str| -> Option<i64> {
        let t = text.trim_start();
        let lines: Vec<&str> = t.lines().collect();
        let head = lines.iter().take(8);
        let tail = lines.iter().skip(lines.len().saturating_sub(3).max(8));
        for l in head.chain(tail) {
            if let Some(c) = re.captures(l) {
                return c.get(1).and_then(|m| m.as_str().parse().ok());
            }
        }
        None
    };
    for n in 0..16 {
        for at in 0..n {
            for ending in ["\n", "\r\n"] {
                let text: String = (0..n)
                    .map(|i| {
                        if i == at {
                            format!("Exit code {i}{ending}")
                        } else {
                            format!("line {i}{ending}")
                        }
                    })
                    .collect();
                assert_eq!(
                    exit_code(&text),
                    reference(&text),
                    "{n} lines, code at {at}"
                );
                let two = format!("{text}exit status 99");
                assert_eq!(
                    exit_code(&two),
                    reference(&two),
                    "{n} lines + 1, code at {at}"
                );
            }
        }
    }
}

#[test]
fn normalize_ws_joins_the_words_with_one_space() {
    for s in ["", "  ", "a", " a  b\tc\n", "ls  -la\u{a0}x", "é  ü"] {
        assert_eq!(
            normalize_ws(s),
            s.split_whitespace().collect::<Vec<_>>().join(" "),
            "{s:?}"
        );
    }
}
