//! Every code block of the README is true: its `cargo run -p ctxpress-cli`
//! commands run (on the shipped example data, exit 0, writing their output),
//! its other `cargo` commands are ones that exist, and its TOML pipeline
//! builds. (Its Rust blocks are doc tests of the facade crate.)
#![allow(missing_docs)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (language, body) of each fenced block.
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim().to_string(), String::new())),
            (Some(_), Some(_)) => out.extend(open.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

fn readme_blocks() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let b = blocks(&text);
    assert!(b.len() >= 5, "README blocks not found: {b:?}");
    b
}

#[test]
fn readme_cli_commands_run_as_written() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo().join("examples"), dir.path().join("examples")).unwrap();
    let mut ran = 0;
    for (lang, body) in readme_blocks() {
        if lang != "sh" {
            continue;
        }
        for line in body.lines().map(str::trim) {
            if line.starts_with("cd fuzz && cargo +nightly fuzz run") {
                // Needs nightly and cargo-fuzz: check the target exists instead.
                let target = line
                    .split_whitespace()
                    .skip_while(|w| *w != "run")
                    .skip(1)
                    .find(|w| !w.starts_with('-'))
                    .expect("a fuzz target");
                assert!(
                    repo()
                        .join("fuzz/fuzz_targets")
                        .join(format!("{target}.rs"))
                        .exists(),
                    "README names a fuzz target that does not exist: {line}"
                );
                continue;
            }
            if line.starts_with('#') || line.is_empty() || !line.starts_with("cargo ") {
                continue;
            }
            let Some(args) = line.strip_prefix("cargo run --release -p ctxpress-cli -- ") else {
                let known = [
                    "cargo test --workspace",
                    "cargo xtask bench",
                    "cargo bench -p",
                ];
                assert!(
                    known.iter().any(|k| line.starts_with(k)),
                    "README command not covered by this test: {line}"
                );
                continue;
            };
            let args: Vec<&str> = args.split_whitespace().collect();
            if let Some(i) = args.iter().position(|a| *a == "-o") {
                // Outputs go where .gitignore covers them (target/).
                let out = args[i + 1];
                assert!(
                    out.starts_with("target/"),
                    "README command writes {out} outside target/ (not ignored by git): {line}"
                );
                std::fs::create_dir_all(dir.path().join("target")).unwrap();
            }
            let out = Command::cargo_bin("ctxpress")
                .unwrap()
                .current_dir(dir.path())
                .args(&args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "README command failed ({:?}): {line}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            if let Some(i) = args.iter().position(|a| *a == "-o") {
                let written = dir.path().join(args[i + 1]);
                assert!(written.exists(), "{line}: wrote no {}", written.display());
                std::fs::remove_file(written).unwrap();
            }
            ran += 1;
        }
    }
    assert!(
        ran >= 2,
        "expected the README's compress commands, ran {ran}"
    );
}

#[test]
fn readme_pipeline_config_builds() {
    let mut built = 0;
    for (lang, body) in readme_blocks() {
        if lang != "toml" {
            continue;
        }
        let cfg = ctxpress::PipelineConfig::parse(&body)
            .unwrap_or_else(|e| panic!("README TOML does not parse: {e}\n{body}"));
        cfg.build()
            .unwrap_or_else(|e| panic!("README TOML does not build: {e}\n{body}"));
        assert!(cfg.window.limits().is_some(), "the example sets a window");
        built += 1;
    }
    assert_eq!(built, 1, "the README's pipeline example");
}

/// The `ctxpress ...` commands of a `sh` block, each with its continuation
/// lines (indented, not a comment) and without its comments; also one
/// another command runs after ` -- ` (`claude mcp add NAME -- ctxpress
/// mcp ...`).
fn commands_in(body: &str) -> Vec<String> {
    let mut commands: Vec<String> = Vec::new();
    for line in body.lines() {
        let code = line.split('#').next().unwrap_or("");
        if line.starts_with("ctxpress ") {
            commands.push(code.to_string());
        } else if let Some(at) = code.find(" -- ctxpress ") {
            commands.push(code[at + " -- ".len()..].to_string());
        } else if line.starts_with(' ')
            && !code.trim().is_empty()
            && let Some(last) = commands.last_mut()
        {
            last.push(' ');
            last.push_str(code);
        }
    }
    commands
}

/// The commands of the synopsis (the block under "The command line") and
/// those of the other `sh` blocks.
fn synopsis_and_others() -> (Vec<String>, Vec<String>) {
    let (mut syn, mut others) = (Vec::new(), Vec::new());
    for (lang, body) in readme_blocks() {
        if lang != "sh" {
            continue;
        }
        if body.contains("ctxpress compress [") && syn.is_empty() {
            syn = commands_in(&body);
        } else {
            others.extend(commands_in(&body));
        }
    }
    assert!(!syn.is_empty(), "the README synopsis block is not found");
    (syn, others)
}

/// The flags written in a synopsis command: `--long` and `-s` words.
fn written_flags(cmd: &str) -> Vec<String> {
    cmd.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| {
            (w.starts_with("--") && w.len() > 2)
                || (w.len() == 2 && w.starts_with('-') && w != &"--")
        })
        .map(str::to_string)
        .collect()
}

/// The options a `--help` lists, each as its forms (`["-o", "--output"]`),
/// without `--help` and `--version`.
fn help_flags(help: &str) -> Vec<Vec<String>> {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .map(|l| {
            let spec = l.split("  ").next().unwrap_or("");
            spec.split([',', ' '])
                .filter(|w| w.starts_with('-'))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|forms| !forms.iter().any(|f| f == "--help" || f == "--version"))
        .collect()
}

fn help_of(args: &[&str]) -> String {
    let out = Command::cargo_bin("ctxpress")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "`ctxpress {}` failed", args.join(" "));
    String::from_utf8(out.stdout).unwrap()
}

/// The synopsis block and the `--help`s agree: it has a line for every
/// subcommand `ctxpress --help` lists and for no other; each line writes
/// every option of that subcommand's `--help` (in its long or short form)
/// and no option that `--help` does not list. The `ctxpress` examples of
/// the other blocks use only options that exist.
#[test]
fn readme_synopsis_matches_every_help() {
    let top = help_of(&["--help"]);
    let subcommands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .collect();
    assert!(subcommands.len() >= 10, "{top}");
    let (commands, others) = synopsis_and_others();
    let written: Vec<&str> = commands
        .iter()
        .map(|c| c.split_whitespace().nth(1).expect("a subcommand"))
        .collect();
    for sub in &subcommands {
        assert!(
            written.contains(sub),
            "README synopsis: no line for `ctxpress {sub}`"
        );
    }
    for sub in &written {
        assert!(
            subcommands.contains(sub),
            "README synopsis: `ctxpress {sub}` is not a subcommand:\n{top}"
        );
    }
    for (i, cmd) in commands.iter().chain(&others).enumerate() {
        let sub = cmd.split_whitespace().nth(1).unwrap();
        let help = help_of(&[sub, "--help"]);
        let listed = help_flags(&help);
        let flags = written_flags(cmd);
        for f in &flags {
            assert!(
                listed.iter().flatten().any(|l| l == f),
                "README: `ctxpress {sub}` has no {f}\n{help}"
            );
        }
        if i >= commands.len() {
            // An example elsewhere, not the synopsis: it need not write
            // every option.
            continue;
        }
        for forms in &listed {
            assert!(
                forms.iter().any(|f| flags.contains(f)),
                "README synopsis: `ctxpress {sub}` lacks {}\n{cmd}",
                forms.join(" / ")
            );
        }
    }
}

/// The `ctxpress` commands written in a JSON block's MCP client
/// configuration: `"command": ["ctxpress", ARGS...]` (opencode) and
/// `"command": "ctxpress", "args": [ARGS...]` (Cursor, Claude Code).
fn json_commands(v: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match v {
        Value::Object(o) => {
            let words: Option<Vec<&str>> = match (o.get("command"), o.get("args")) {
                (Some(Value::Array(c)), _) => c.iter().map(Value::as_str).collect(),
                (Some(Value::String(c)), Some(Value::Array(a))) => {
                    std::iter::once(Some(c.as_str()))
                        .chain(a.iter().map(Value::as_str))
                        .collect()
                }
                _ => None,
            };
            if let Some(w) = words.filter(|w| w.first() == Some(&"ctxpress")) {
                out.push(w.join(" "));
            }
            o.values().for_each(|x| json_commands(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| json_commands(x, out)),
        _ => {}
    }
}

/// Every JSON block of the README (the MCP client configurations) is
/// JSON, and the `ctxpress` commands in them use only options that exist.
#[test]
fn readme_json_blocks_parse_and_use_real_flags() {
    let mut commands = Vec::new();
    let mut blocks = 0;
    for (lang, body) in readme_blocks() {
        if lang != "json" {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("README JSON block does not parse: {e}\n{body}"));
        json_commands(&v, &mut commands);
        blocks += 1;
    }
    assert!(blocks >= 2, "the MCP client configurations");
    assert!(commands.len() >= 2, "{commands:?}");
    for cmd in &commands {
        let sub = cmd.split_whitespace().nth(1).expect("a subcommand");
        let help = help_of(&[sub, "--help"]);
        let listed = help_flags(&help);
        for f in written_flags(cmd) {
            assert!(
                listed.iter().flatten().any(|l| *l == f),
                "README: `ctxpress {sub}` has no {f}\n{help}"
            );
        }
    }
}
