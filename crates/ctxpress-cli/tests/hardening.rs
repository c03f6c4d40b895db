//! Hardening of the `ctxpress` binary (issue #18): byte-exact JSONL, paths
//! that would destroy data, `expand` with the wrong archive, temporary files
//! and modes, a closed stdout.
#![allow(missing_docs)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_ctxpress");

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/data")
        .join(name)
}

/// Run `ctxpress ARGS` with `stdin` (empty when `None`).
fn run(args: &[&dyn AsRef<std::ffi::OsStr>], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(BIN);
    for a in args {
        cmd.arg(a);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut si = child.stdin.take().unwrap();
    if let Some(b) = stdin {
        si.write_all(b).unwrap();
    }
    drop(si);
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The first `n` lines of the shipped SWE-agent batch (real agent
/// trajectories with tool calls), without their line endings.
fn corpus_lines(n: usize) -> Vec<String> {
    std::fs::read_to_string(data("swe_agent.jsonl"))
        .unwrap()
        .lines()
        .take(n)
        .map(str::to_string)
        .collect()
}

/// A JSONL file as editors and other tools leave them: CRLF and LF endings
/// mixed, a blank line and a whitespace-only line in the middle, blank lines
/// at the start, and no newline after the last line.
fn awkward_jsonl() -> Vec<u8> {
    let l = corpus_lines(4);
    format!("\r\n{}\r\n\r\n{}\n  \t\n{}\r\n\n{}", l[0], l[1], l[2], l[3]).into_bytes()
}

// ---------------------------------------------------------------------------
// 1. Byte-exact JSONL.

#[test]
fn identity_gives_awkward_jsonl_back_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    let out = dir.path().join("out.jsonl");
    let bytes = awkward_jsonl();
    std::fs::write(&inp, &bytes).unwrap();
    let o = run(
        &[&"compress", &"--preset", &"identity", &inp, &"-o", &out],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), bytes);

    // From stdin (sniffed as JSONL), to stdout.
    let o = run(&[&"compress", &"--preset", &"identity", &"-"], Some(&bytes));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, bytes);

    // All CRLF with a final CRLF; all LF without a final newline.
    let l = corpus_lines(3);
    for text in [
        format!("{}\r\n{}\r\n{}\r\n", l[0], l[1], l[2]),
        format!("{}\n{}\n{}", l[0], l[1], l[2]),
    ] {
        std::fs::write(&inp, &text).unwrap();
        let o = run(
            &[&"compress", &"--preset", &"identity", &inp, &"-o", &out],
            None,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
    }
}

#[test]
fn identity_keeps_a_crlf_document_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("doc.json");
    let out = dir.path().join("out.json");
    let text = "\r\n{\r\n  \"id\": \"d\",\r\n  \"messages\": [\r\n    {\"role\": \"user\", \"content\": \"hi\"},\r\n    {\"role\": \"assistant\", \"content\": \"hello\"}\r\n  ]\r\n}";
    std::fs::write(&inp, text).unwrap();
    let o = run(
        &[&"compress", &"--preset", &"identity", &inp, &"-o", &out],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
}

/// The line endings and blank lines of a JSONL text: each line's ending
/// (`"\r\n"`, `"\n"`, `""`), and the blank lines verbatim.
fn shape(text: &str) -> Vec<String> {
    text.split_inclusive('\n')
        .map(|l| {
            if l.trim().is_empty() {
                format!("blank {l:?}")
            } else if l.ends_with("\r\n") {
                "line CRLF".into()
            } else if l.ends_with('\n') {
                "line LF".into()
            } else {
                "line (no ending)".into()
            }
        })
        .collect()
}

#[test]
fn compress_keeps_line_endings_and_expand_restores_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    let bytes = awkward_jsonl();
    std::fs::write(&inp, &bytes).unwrap();
    for preset in ["agent", "chat"] {
        let db = dir.path().join(format!("{preset}.db"));
        let out = dir.path().join(format!("{preset}.jsonl"));
        let back = dir.path().join(format!("{preset}.back.jsonl"));
        let o = run(
            &[
                &"compress",
                &"--preset",
                &preset,
                &"--budget",
                &"1500",
                &"--archive",
                &db,
                &inp,
                &"-o",
                &out,
            ],
            None,
        );
        assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
        let compressed = std::fs::read(&out).unwrap();
        assert!(
            compressed.len() < bytes.len(),
            "{preset}: nothing compressed"
        );
        assert_eq!(
            shape(&String::from_utf8(compressed).unwrap()),
            shape(&String::from_utf8(bytes.clone()).unwrap()),
            "{preset}: line endings and blank lines"
        );
        let o = run(&[&"expand", &out, &"--archive", &db, &"-o", &back], None);
        assert!(o.status.success(), "{preset}: {}", stderr(&o));
        assert_eq!(std::fs::read(&back).unwrap(), bytes, "{preset}");
    }
}
