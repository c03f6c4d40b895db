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

/// The synopsis block: every `ctxpress SUBCOMMAND` line names a subcommand
/// that exists, and every `--flag` on it (and on its continuation lines) is
/// in that subcommand's `--help`.
#[test]
fn readme_synopsis_flags_exist() {
    let mut checked = 0;
    for (lang, body) in readme_blocks() {
        if lang != "sh" || !body.lines().any(|l| l.starts_with("ctxpress ")) {
            continue;
        }
        // Continuation lines (indented, not a comment) belong to the command above.
        let mut commands: Vec<String> = Vec::new();
        for line in body.lines() {
            let code = line.split('#').next().unwrap_or("");
            if line.starts_with("ctxpress ") {
                commands.push(code.to_string());
            } else if line.starts_with(' ')
                && !code.trim().is_empty()
                && let Some(last) = commands.last_mut()
            {
                last.push(' ');
                last.push_str(code);
            }
        }
        for cmd in commands {
            let sub = cmd.split_whitespace().nth(1).expect("a subcommand");
            let out = Command::cargo_bin("ctxpress")
                .unwrap()
                .args([sub, "--help"])
                .output()
                .unwrap();
            assert!(out.status.success(), "`ctxpress {sub} --help` failed");
            let help = String::from_utf8_lossy(&out.stdout);
            for flag in cmd
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .filter(|w| w.starts_with("--") && w.len() > 2)
            {
                assert!(
                    help.contains(flag),
                    "README synopsis: `ctxpress {sub}` has no {flag}\n{help}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "synopsis commands checked: {checked}");
}
