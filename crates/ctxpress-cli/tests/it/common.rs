//! Helpers the CLI test files share: running the binary, the shipped example
//! data, temporary files left in a folder.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The `ctxpress` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_ctxpress");

/// The binary as an `assert_cmd` command.
pub fn bin() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("ctxpress").unwrap()
}

/// A file of the shipped example data (`examples/data`).
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/data")
        .join(name)
}

/// Run `ctxpress ARGS` with `stdin` (empty when `None`).
pub fn run(args: &[&dyn AsRef<std::ffi::OsStr>], stdin: Option<&[u8]>) -> Output {
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

/// Run `ctxpress ARGS` with the file `stdin` as its standard input (none
/// when `None`).
pub fn run_from(args: &[&dyn AsRef<std::ffi::OsStr>], stdin: Option<&Path>) -> Output {
    let mut cmd = Command::new(BIN);
    for a in args {
        cmd.arg(a);
    }
    match stdin {
        Some(p) => cmd.stdin(std::fs::File::open(p).unwrap()),
        None => cmd.stdin(Stdio::null()),
    };
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.output().unwrap()
}

/// The standard error of a run, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The files in `dir` whose name has `.ctxpress-` (temporary files).
pub fn temps(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".ctxpress-"))
        .collect()
}

/// A port on 127.0.0.1 free a moment ago, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
