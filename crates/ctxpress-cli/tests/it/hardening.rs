//! Hardening of the `ctxpress` binary (issue #18): byte-exact JSONL, paths
//! that would destroy data, `expand` with the wrong archive, temporary files
//! and modes, a closed stdout.
#![allow(missing_docs)]

use crate::common;

use common::{BIN, data, run, stderr, temps};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

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

// ---------------------------------------------------------------------------
// 2. Paths that would destroy data.

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
        .collect();
    v.sort();
    v
}

/// `ctxpress ARGS` exits 2 naming both flags, and no file in `dir` was
/// created, changed or removed.
fn refused(dir: &Path, args: &[&dyn AsRef<std::ffi::OsStr>], flags: [&str; 2]) {
    let before = snapshot(dir);
    let o = run(args, None);
    let err = stderr(&o);
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    assert_eq!(o.status.code(), Some(2), "{shown:?}: {err}");
    for f in flags {
        assert!(err.contains(f), "{shown:?}: `{f}` not named in: {err}");
    }
    assert!(err.contains("refusing to overwrite"), "{err}");
    assert!(o.stdout.is_empty());
    assert_eq!(snapshot(dir), before, "{shown:?}: files changed");
}

/// A folder with an input, a filled archive and a config file.
fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    std::fs::write(&inp, corpus_lines(2).join("\n") + "\n").unwrap();
    let db = dir.path().join("a.db");
    let out0 = dir.path().join("first.jsonl");
    let o = run(
        &[
            &"compress",
            &"--preset",
            &"chat",
            &"--budget",
            &"1500",
            &"--archive",
            &db,
            &inp,
            &"-o",
            &out0,
        ],
        None,
    );
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
    assert!(std::fs::metadata(&db).unwrap().len() > 0);
    let cfg = dir.path().join("p.toml");
    std::fs::write(&cfg, "version = 1\n[[stages]]\ntype = \"dedup\"\n").unwrap();
    (dir, inp, db, cfg)
}

#[test]
fn compress_refuses_outputs_that_name_an_input_or_each_other() {
    let (dir, inp, db, cfg) = workspace();
    let d = dir.path();
    let out = d.join("out.jsonl");
    let new_db = d.join("new.db");
    // --stats-json naming the input (through `..`), before the new archive is created.
    let dotdot = d.join("sub");
    std::fs::create_dir(&dotdot).unwrap();
    let via = dotdot.join("../in.jsonl");
    refused(
        d,
        &[
            &"compress",
            &inp,
            &"--archive",
            &new_db,
            &"--stats-json",
            &via,
        ],
        ["INPUT", "--stats-json"],
    );
    assert!(!new_db.exists());
    // --stats-json equal to -o.
    refused(
        d,
        &[&"compress", &inp, &"-o", &out, &"--stats-json", &out],
        ["-o", "--stats-json"],
    );
    // -o equal to --archive (an archive that holds records).
    refused(
        d,
        &[&"compress", &inp, &"--archive", &db, &"-o", &db],
        ["--archive", "-o"],
    );
    // --stats-json on the archive's write-ahead log.
    let wal = d.join("a.db-wal");
    refused(
        d,
        &[&"compress", &inp, &"--archive", &db, &"--stats-json", &wal],
        ["--archive", "--stats-json"],
    );
    // -o equal to --config; --archive equal to the input.
    refused(
        d,
        &[&"compress", &inp, &"--config", &cfg, &"-o", &cfg],
        ["--config", "-o"],
    );
    refused(
        d,
        &[&"compress", &inp, &"--archive", &inp],
        ["INPUT", "--archive"],
    );
}

#[cfg(unix)]
#[test]
fn links_and_redirected_stdin_are_the_same_file() {
    let (dir, inp, db, _) = workspace();
    let d = dir.path();
    // A symbolic link to the input, a hard link to the input, a symbolic
    // link to the archive.
    let sym = d.join("sym.jsonl");
    std::os::unix::fs::symlink(&inp, &sym).unwrap();
    let hard = d.join("hard.jsonl");
    std::fs::hard_link(&inp, &hard).unwrap();
    let db_link = d.join("db-link");
    std::os::unix::fs::symlink("a.db", &db_link).unwrap();
    refused(d, &[&"compress", &inp, &"-o", &sym], ["INPUT", "-o"]);
    refused(d, &[&"compress", &inp, &"-o", &hard], ["INPUT", "-o"]);
    refused(
        d,
        &[&"compress", &inp, &"--stats-json", &hard],
        ["INPUT", "--stats-json"],
    );
    refused(
        d,
        &[&"compress", &inp, &"--archive", &db, &"-o", &db_link],
        ["--archive", "-o"],
    );
    // `ctxpress compress - -o FILE < FILE`.
    let before = snapshot(d);
    let o = Command::new(BIN)
        .args(["compress", "-", "-o"])
        .arg(&hard)
        .stdin(std::fs::File::open(&inp).unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("INPUT (stdin)"), "{}", stderr(&o));
    assert_eq!(snapshot(d), before);
}

#[test]
fn expand_and_compact_refuse_the_same_paths() {
    let (dir, inp, db, cfg) = workspace();
    let d = dir.path();
    let first = d.join("first.jsonl");
    refused(
        d,
        &[&"expand", &first, &"--archive", &db, &"-o", &db],
        ["--archive", "-o"],
    );
    refused(
        d,
        &[&"expand", &first, &"--archive", &db, &"-o", &first],
        ["INPUT", "-o"],
    );
    refused(
        d,
        &[&"compact", &inp, &"--archive", &db, &"-o", &db],
        ["--archive", "-o"],
    );
    refused(
        d,
        &[&"compact", &inp, &"--archive", &db, &"-o", &inp],
        ["INPUT", "-o"],
    );
    refused(
        d,
        &[
            &"compact",
            &inp,
            &"--archive",
            &db,
            &"--config",
            &cfg,
            &"-o",
            &cfg,
        ],
        ["--config", "-o"],
    );
    refused(
        d,
        &[&"compact", &inp, &"--archive", &inp],
        ["INPUT", "--archive"],
    );
}

// ---------------------------------------------------------------------------
// 3. `expand` with the wrong archive.

#[test]
fn expand_with_the_wrong_or_an_empty_archive_fails_and_writes_nothing() {
    let (dir, inp, db, _) = workspace();
    let d = dir.path();
    let compressed = d.join("first.jsonl");
    assert_ne!(
        std::fs::read(&compressed).unwrap(),
        std::fs::read(&inp).unwrap()
    );
    // Another archive: the same preset over other conversations.
    let other_in = d.join("other.jsonl");
    let l = std::fs::read_to_string(data("swe_agent.jsonl")).unwrap();
    let other: Vec<&str> = l.lines().skip(5).take(2).collect();
    std::fs::write(&other_in, other.join("\n") + "\n").unwrap();
    let wrong = d.join("wrong.db");
    let o = run(
        &[
            &"compress",
            &"--preset",
            &"chat",
            &"--budget",
            &"1500",
            &"--archive",
            &wrong,
            &other_in,
            &"-o",
            &d.join("other.out.jsonl"),
        ],
        None,
    );
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
    // An empty archive: an identity run records nothing.
    let empty = d.join("empty.db");
    let o = run(
        &[
            &"compress",
            &"--preset",
            &"identity",
            &"--archive",
            &empty,
            &inp,
            &"-o",
            &d.join("id.jsonl"),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for db in [&wrong, &empty] {
        let back = d.join("back.jsonl");
        let o = run(
            &[&"expand", &compressed, &"--archive", db, &"-o", &back],
            None,
        );
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("could not be restored"), "{err}");
        assert!(err.contains("--partial"), "{err}");
        assert!(err.contains("first.jsonl:1"), "{err}");
        assert!(!back.exists());
        // To stdout: nothing either.
        let o = run(&[&"expand", &compressed, &"--archive", db], None);
        assert_eq!(o.status.code(), Some(1));
        assert!(o.stdout.is_empty());
        // --partial writes what it could (here: the input as it is) and warns.
        let o = run(
            &[
                &"expand",
                &"--partial",
                &compressed,
                &"--archive",
                db,
                &"-o",
                &back,
            ],
            None,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).contains("warning:"), "{}", stderr(&o));
        assert_eq!(
            std::fs::read(&back).unwrap(),
            std::fs::read(&compressed).unwrap()
        );
        std::fs::remove_file(&back).unwrap();
    }
    // The right archive restores everything: exit 0, no warning.
    let back = d.join("back.jsonl");
    let o = run(
        &[&"expand", &compressed, &"--archive", &db, &"-o", &back],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&inp).unwrap());
    // An input that was never compressed needs nothing from any archive.
    let o = run(&[&"expand", &inp, &"--archive", &empty], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, std::fs::read(&inp).unwrap());
}

#[test]
fn expand_of_a_compacted_history_with_another_archive_fails() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (db, out, wrong) = (d.join("a.db"), d.join("out.jsonl"), d.join("w.db"));
    let o = run(
        &[
            &"compact",
            &data("swe_agent.jsonl"),
            &"--archive",
            &db,
            &"-o",
            &out,
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(
        &[
            &"compress",
            &"--preset",
            &"identity",
            &"--archive",
            &wrong,
            &out,
            &"-o",
            &d.join("x.jsonl"),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[&"expand", &out, &"--archive", &wrong], None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let o = run(&[&"expand", &out, &"--archive", &db], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, std::fs::read(data("swe_agent.jsonl")).unwrap());
}

// ---------------------------------------------------------------------------
// 4. Temporary files and modes.

/// Run `ctxpress ARGS` under `umask MASK` (through `sh`).
#[cfg(unix)]
fn run_umask(mask: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("umask {mask} && exec \"$0\" \"$@\""))
        .arg(BIN);
    for a in args {
        cmd.arg(a);
    }
    cmd.output().unwrap()
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[cfg(unix)]
#[test]
fn new_outputs_get_the_umask_mode_and_existing_ones_keep_theirs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inp = d.join("in.jsonl");
    std::fs::write(&inp, corpus_lines(1)[0].clone() + "\n").unwrap();
    for (mask, want) in [("022", 0o644), ("077", 0o600), ("002", 0o664)] {
        let out = d.join(format!("out{mask}.jsonl"));
        let stats = d.join(format!("stats{mask}.json"));
        let o = run_umask(
            mask,
            &[
                &"compress",
                &"--preset",
                &"identity",
                &inp,
                &"-o",
                &out,
                &"--stats-json",
                &stats,
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(mode(&out), want, "-o under umask {mask}");
        assert_eq!(mode(&stats), want, "--stats-json under umask {mask}");
    }
    // An existing output keeps its mode (as `>` would), whatever the umask.
    let out = d.join("kept.jsonl");
    std::fs::write(&out, "old").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    let o = run_umask(
        "022",
        &[&"compress", &"--preset", &"identity", &inp, &"-o", &out],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(mode(&out), 0o640);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&inp).unwrap());
    assert!(temps(d).is_empty(), "{:?}", temps(d));
}

#[cfg(target_os = "linux")]
#[test]
fn stale_temporary_files_of_dead_runs_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inp = d.join("in.jsonl");
    std::fs::write(&inp, corpus_lines(1)[0].clone() + "\n").unwrap();
    // A pid that no longer runs: a child that has exited and been reaped.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let alive = std::process::id();
    let stale = d.join(format!(".out.jsonl.ctxpress-{dead}.tmp"));
    let stale_stats = d.join(format!(".s.json.ctxpress-{dead}.tmp"));
    let running = d.join(format!(".out.jsonl.ctxpress-{alive}.tmp"));
    let other = d.join(format!(".other.jsonl.ctxpress-{dead}.tmp"));
    let unrelated = d.join(format!(".out.jsonl.ctxpress-{dead}.tmp.keep"));
    for f in [&stale, &stale_stats, &running, &other, &unrelated] {
        std::fs::write(f, "partial").unwrap();
    }
    let out = d.join("out.jsonl");
    let o = run(
        &[
            &"compress",
            &"--preset",
            &"identity",
            &inp,
            &"-o",
            &out,
            &"--stats-json",
            &d.join("s.json"),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stale.exists(), "the dead run's temporary file is left");
    assert!(!stale_stats.exists());
    // Another live process's, another output's and other files are kept.
    assert!(running.exists() && other.exists() && unrelated.exists());
    // Also when the run itself then fails on bad input.
    std::fs::write(&stale, "partial").unwrap();
    let bad = d.join("bad.jsonl");
    std::fs::write(&bad, "{\n").unwrap();
    let o = run(&[&"compress", &bad, &"-o", &out], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(!stale.exists());
}

#[test]
fn a_failed_write_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inp = d.join("in.jsonl");
    std::fs::write(&inp, corpus_lines(1)[0].clone() + "\n").unwrap();
    // The output is a folder: the rename over it fails.
    let out = d.join("folder");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep"), "x").unwrap();
    let o = run(
        &[&"compress", &"--preset", &"identity", &inp, &"-o", &out],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write"), "{}", stderr(&o));
    assert!(temps(d).is_empty(), "{:?}", temps(d));
    assert!(out.join("keep").exists());
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_output_is_followed_and_a_pipe_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inp = d.join("in.jsonl");
    let bytes = corpus_lines(1)[0].clone() + "\n";
    std::fs::write(&inp, &bytes).unwrap();
    // -o LINK replaces the link's target, as `> LINK` does; the link stays.
    let target = d.join("target.jsonl");
    std::fs::write(&target, "old").unwrap();
    let link = d.join("link.jsonl");
    std::os::unix::fs::symlink("target.jsonl", &link).unwrap();
    let o = run(
        &[&"compress", &"--preset", &"identity", &inp, &"-o", &link],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), bytes);
    // -o FIFO writes into the pipe instead of replacing it with a file.
    let fifo = d.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo here
    }
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    let o = run(
        &[&"compress", &"--preset", &"identity", &inp, &"-o", &fifo],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(reader.join().unwrap(), bytes.as_bytes());
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

// ---------------------------------------------------------------------------
// 5. A closed stdout.

/// Spawn `ctxpress ARGS`, read `n` bytes of its stdout (none: close it at
/// once), close it, and return its exit status and stderr.
fn reader_goes_away(args: &[&dyn AsRef<std::ffi::OsStr>], n: usize) -> (Option<i32>, String) {
    use std::io::Read;
    let mut cmd = Command::new(BIN);
    for a in args {
        cmd.arg(a);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut buf = vec![0u8; n];
    so.read_exact(&mut buf).unwrap();
    drop(so);
    let o = child.wait_with_output().unwrap();
    (o.status.code(), stderr(&o))
}

#[test]
fn a_closed_stdout_ends_quietly() {
    // Bigger than a pipe's buffer, so the writer meets the closed pipe.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.jsonl");
    let one = std::fs::read_to_string(data("swe_agent.jsonl")).unwrap();
    std::fs::write(&big, one.repeat(4)).unwrap();
    assert!(one.len() * 4 > 1 << 20);
    let (code, err) = reader_goes_away(&[&"compress", &"--preset", &"identity", &big], 10);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let (code, err) = reader_goes_away(&[&"compress", &"--preset", &"chat", &big], 10);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let (code, err) = reader_goes_away(&[&"classify", &big], 10);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    // Commands that print line by line (`println!` panicked on a closed stdout).
    let (code, err) = reader_goes_away(&[&"stats", &big], 0);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let (code, err) = reader_goes_away(&[&"strategies"], 0);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let (code, err) = reader_goes_away(&[&"presets", &"--show", &"agent"], 0);
    assert_eq!((code, err.as_str()), (Some(0), ""));
}

// ---------------------------------------------------------------------------
// Beyond the issue: what a demanding user also expects.

#[test]
fn a_byte_order_mark_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let l = corpus_lines(2);
    for (name, text) in [
        ("bom.jsonl", format!("\u{feff}{}\r\n{}\r\n", l[0], l[1])),
        ("bom.json", format!("\u{feff}{}", l[0])),
    ] {
        let inp = d.join(name);
        let out = d.join(format!("out.{name}"));
        std::fs::write(&inp, &text).unwrap();
        let o = run(
            &[&"compress", &"--preset", &"identity", &inp, &"-o", &out],
            None,
        );
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), text, "{name}");
    }
}

#[test]
fn two_outputs_on_stdout_and_a_missing_folder_are_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inp = d.join("in.jsonl");
    std::fs::write(&inp, corpus_lines(2).join("\n") + "\n").unwrap();
    let db = d.join("a.db");
    let o = run(&[&"compress", &inp, &"--stats-json", &"-"], None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("both write to stdout"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
    // --stats-json alone on stdout is fine.
    let o = run(
        &[
            &"compress",
            &inp,
            &"-o",
            &d.join("o.jsonl"),
            &"--stats-json",
            &"-",
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(serde_json::from_slice::<serde_json::Value>(&o.stdout).is_ok());
    // A missing output folder: nothing is archived either.
    let o = run(
        &[
            &"compress",
            &"--preset",
            &"chat",
            &"--budget",
            &"1500",
            &"--archive",
            &db,
            &inp,
            &"-o",
            &d.join("missing/o.jsonl"),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no such directory"), "{}", stderr(&o));
    assert!(!db.exists());
}

/// An API key is not sent over plain http to a host that is not loopback:
/// compress and compact refuse the endpoint before any request (naming the
/// flag that allows it), and never print the URL's credentials.
#[test]
fn an_api_key_over_plain_http_is_refused_and_credentials_not_printed() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("swe_agent.jsonl");
    let out = dir.path().join("out.jsonl");
    let db = dir.path().join("a.db");
    let url = "http://alice:hunter2pw@example.invalid:9/v1";
    for args in [
        vec![
            "compress",
            input.to_str().unwrap(),
            "--preset",
            "hybrid",
            "--window",
            "2000",
        ],
        vec![
            "compact",
            input.to_str().unwrap(),
            "--archive",
            db.to_str().unwrap(),
        ],
    ] {
        let mut cmd = Command::new(BIN);
        cmd.args(&args)
            .args(["--llm-url", url, "--llm-model", "m", "-o"])
            .arg(&out)
            .env("OPENAI_API_KEY", "sk-test-0123456789abcdef0123456789abcdef");
        let o = cmd.output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("allow_insecure_http") || err.contains("--llm-allow-insecure-http"),
            "{err}"
        );
        assert!(!err.contains("hunter2pw"), "credentials printed: {err}");
        assert!(!out.exists(), "{args:?} wrote an output");
    }
    // The flag exists on both commands.
    for sub in ["compress", "compact"] {
        let o = Command::new(BIN).args([sub, "--help"]).output().unwrap();
        assert!(String::from_utf8_lossy(&o.stdout).contains("--llm-allow-insecure-http"));
    }
}

/// Ids, roles and texts with terminal escape sequences (issue #33): every
/// command that prints them to a terminal writes them out escaped, never
/// the raw control bytes.
#[test]
fn terminal_escapes_in_the_input_are_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}";
    let lines: Vec<String> = corpus_lines(3)
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"] = format!("conv-{i}{evil}").into();
            if i == 0 {
                // A tool result answering no call: a violation naming it.
                v["messages"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({"role": "tool", "tool_call_id": format!("call{evil}"), "content": "x"}));
            }
            v.to_string()
        })
        .collect();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let db = dir.path().join("a.db");
    let out = dir.path().join("out.jsonl");
    let clean = |what: &str, o: &Output| {
        for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            assert!(
                !bytes.iter().any(|&b| b == 0x1b || b == 0x07)
                    && !String::from_utf8_lossy(bytes).contains('\u{202e}'),
                "{what}: raw escape bytes on {stream}: {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    };
    let o = run(&[&"validate", &input], None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("conv-0\\u{1b}]0;pwned\\u{7}"), "{text}");
    clean("validate", &o);
    let o = run(
        &[
            &"compact",
            &input,
            &"--archive",
            &db,
            &"-o",
            &out,
            &"--stats",
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("conv-1\\u{1b}"), "{}", stderr(&o));
    clean("compact --stats", &o);
    let o = run(
        &[&"search", &"the", &"--archive", &db, &"--limit", &"50"],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\\u{1b}"));
    clean("search", &o);
    let o = run(&[&"stats", &input], None);
    clean("stats", &o);
}

#[test]
fn zero_limits_are_refused_naming_their_flag() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let out = dir.path().join("out.jsonl");
    let o = run(
        &[
            &"compress",
            &data("swe_agent.jsonl"),
            &"--budget",
            &"8000",
            &"--archive",
            &db,
            &"-o",
            &out,
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(
        &[&"search", &"the", &"--archive", &db, &"--limit", &"0"],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--limit"), "{}", stderr(&o));
    let o = run(
        &[
            &"compress",
            &data("swe_agent.jsonl"),
            &"--window",
            &"0",
            &"-o",
            &out,
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--window") && !stderr(&o).contains("--size"),
        "{}",
        stderr(&o)
    );
}
