//! Crash safety: a compaction killed with SIGKILL at random points (in a
//! child process) loses nothing.
//!
//! The test runs itself as the child: with `CTXPRESS_CRASH_DB` set, the same
//! test function appends the next messages of a fixed conversation to a
//! SQLite file (persistence and batch archive in one) and compacts it, over
//! and over, until it is killed or has appended everything. After each kill
//! the parent checks that the archive passes `PRAGMA integrity_check` and
//! that the stored history, its clip-archive message expanded from the
//! archive, is exactly a prefix of what the children appended, never shorter
//! than what an earlier check saw (so every original is still stored or
//! archived). At the end a rerun in the parent appends and compacts 30 more
//! rounds without an error.

use ctxpress_compactor::{CompactionConfig, Compactor, expand_stored};
use ctxpress_core::compaction::Persistence;
use ctxpress_store::SqliteArchive;
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const T0: i64 = 1_790_000_000;
const CHILD: &str = "CTXPRESS_CRASH_DB";
const KILLS: usize = 24;
const STEP: usize = 9;

/// The whole conversation, message by message (JSON texts).
fn conversation() -> Vec<String> {
    let mut out = vec![json!({"role": "system", "content": "You are a coding agent."}).to_string()];
    // Long enough that no child runs out of messages before it is killed.
    for i in 0..20_000_u32 {
        let t = T0 + 60 * i64::from(i);
        if i % 5 == 4 {
            let id = format!("call{i}");
            out.push(
                json!({"role": "assistant", "content": "", "timestamp": t, "tool_calls": [{"id": id,
                    "type": "function", "function": {"name": "Bash",
                    "arguments": json!({"command": format!("cargo test --test t{i}")}).to_string()}}]})
                .to_string(),
            );
            out.push(
                json!({"role": "tool", "tool_call_id": id, "timestamp": t,
                    "content": format!("test t{i} ... ok\n").repeat(12)})
                .to_string(),
            );
        } else {
            let role = if i.is_multiple_of(2) {
                "user"
            } else {
                "assistant"
            };
            out.push(
                json!({"role": role, "timestamp": t, "content": format!(
                    "Turn {i}: the queue hands work from the primary loop to the secondary \
                     loop; we keep the ring buffer because it measured well under load."
                )})
                .to_string(),
            );
        }
    }
    out
}

fn compactor() -> Compactor {
    Compactor::new(CompactionConfig {
        chunk_tokens: 300,
        clip_window: 2,
        buffer: 1,
        ..CompactionConfig::default()
    })
    .unwrap()
}

/// How many messages of `all` the file holds, or what is wrong. Right after
/// a kill, an interrupted compaction may have archived messages it had not
/// yet deleted: each original must be stored or archived (the expanded
/// history, duplicates dropped, is a prefix of `all`), and once the
/// interrupted compaction is finished it is exactly that prefix.
fn check(path: &Path, all: &[String]) -> Result<usize, String> {
    let integrity: String = rusqlite::Connection::open(path)
        .and_then(|c| c.query_row("PRAGMA integrity_check", [], |r| r.get(0)))
        .map_err(|e| format!("integrity_check: {e}"))?;
    if integrity != "ok" {
        return Err(format!("integrity_check: {integrity}"));
    }
    let db = SqliteArchive::open(path).map_err(|e| format!("open: {e}"))?;
    let prefix = |got: &[String]| -> Result<(), String> {
        if got.len() <= all.len() && got[..] == all[..got.len()] {
            return Ok(());
        }
        let at = got.iter().zip(all).position(|(a, b)| a != b);
        let show = |i: Option<usize>, v: &[String]| {
            i.and_then(|i| v.get(i))
                .map(|s| s.chars().take(160).collect::<String>())
        };
        Err(format!(
            "expanded history ({} messages) is not a prefix of the conversation \
             (first difference at {at:?}: {:?} where the conversation has {:?})",
            got.len(),
            show(at, got),
            show(at, all)
        ))
    };
    let got = expand_stored("c", &db, &db).map_err(|e| format!("expand: {e}"))?;
    let mut seen = std::collections::HashSet::new();
    let distinct: Vec<String> = got.into_iter().filter(|m| seen.insert(m.clone())).collect();
    prefix(&distinct)?;
    compactor()
        .finish_interrupted("c", &db, &db)
        .map_err(|e| format!("finishing: {e}"))?;
    let got = expand_stored("c", &db, &db).map_err(|e| format!("expand: {e}"))?;
    prefix(&got)?;
    if got.len() != distinct.len() {
        return Err(format!(
            "{} messages before finishing, {} after",
            distinct.len(),
            got.len()
        ));
    }
    Ok(got.len())
}

/// Append the next messages and compact, until everything is appended.
/// Returns the number of compactions that reported an error.
fn work(path: &Path, all: &[String], rounds: usize) -> usize {
    let db = SqliteArchive::open(path).expect("open the archive");
    let c = compactor();
    let mut errors = 0;
    for _ in 0..rounds {
        let have = expand_stored("c", &db, &db).expect("expand").len();
        if have >= all.len() {
            break;
        }
        db.append("c", &all[have..(have + STEP).min(all.len())])
            .expect("append");
        let r = c.compress_stored("c", &db, &db);
        if let Some(e) = r.error {
            eprintln!("compaction error: {e}");
            errors += 1;
        }
    }
    errors
}

/// xorshift64*: the kill delays (fixed seed, printed).
fn delays(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn killed_compactions_lose_nothing_and_a_rerun_completes() {
    let all = conversation();
    if let Ok(path) = std::env::var(CHILD) {
        // The child: say it is ready (the conversation is built), then work
        // until killed.
        std::fs::write(format!("{path}.started"), b"").unwrap();
        work(Path::new(&path), &all, usize::MAX);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let exe = std::env::current_exe().unwrap();
    let seed = 0x5eed_c0de_u64;
    eprintln!("kill delays seeded with {seed:#x}");
    let mut next = delays(seed);
    let mut seen = 0;
    let mut killed_while_running = 0;
    let started = dir.path().join("crash.db.started");
    for round in 0..KILLS {
        let _ = std::fs::remove_file(&started);
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "killed_compactions_lose_nothing_and_a_rerun_completes",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until it is ready (a busy machine may take seconds to start
        // a debug test binary), let it open the store and work, then kill
        // it at a random point.
        let ready = Instant::now();
        while !started.exists() && ready.elapsed() < Duration::from_secs(120) {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let delay = Duration::from_millis(30 + next() % 400);
        let start = Instant::now();
        let mut exited = None;
        while start.elapsed() < delay {
            if let Some(s) = child.try_wait().unwrap() {
                exited = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        match exited {
            Some(status) => assert!(
                status.success(),
                "round {round}: the child failed on its own"
            ),
            None => {
                child.kill().unwrap(); // SIGKILL on Unix
                killed_while_running += 1;
            }
        }
        child.wait().unwrap();
        let n = check(&path, &all).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(
            n >= seen,
            "round {round}: {n} messages stored, {seen} before: lost some"
        );
        seen = n;
    }
    assert!(
        killed_while_running >= KILLS / 2,
        "only {killed_while_running} of {KILLS} children were killed while working"
    );
    assert!(seen > 1, "the children appended nothing");
    // A rerun completes: 30 more rounds of appending and compacting, every
    // compaction clean, nothing lost, the stored history kept small.
    let errors = work(&path, &all, 30);
    assert_eq!(errors, 0, "compactions after the crashes reported errors");
    let n = check(&path, &all).unwrap();
    assert!(n >= seen + 30, "the rerun appended {} messages", n - seen);
    let db = SqliteArchive::open(&path).unwrap();
    let stored = db.load("c").unwrap().len();
    assert!(
        stored < n / 4,
        "{stored} of {n} messages still stored: not compacted"
    );
}
