//! Crash safety: a compaction killed with SIGKILL (in a child process) at
//! many points loses nothing.
//!
//! The test runs itself as the child: with `CTXPRESS_CRASH_DB` set, the same
//! test function appends the next messages of a fixed conversation to a
//! SQLite file (persistence and batch archive in one) and compacts it, over
//! and over. The kill points are counted in writes, not in time, so that a
//! busy machine kills the same children at the same points as an idle one:
//! the child counts its compactions' writes (batch put, batch replace,
//! fold) and, at the write `CTXPRESS_CRASH_AT`, prints which writes its
//! round has done and which comes next, then waits to be killed (or, with
//! `CTXPRESS_CRASH_RUN`, goes on, and the parent kills it a few
//! milliseconds later: inside a transaction or wherever it got to). After
//! each kill the parent checks that the file passes `PRAGMA
//! integrity_check` and that the stored history, its clip-archive message
//! expanded from the archive, is exactly a prefix of what the children
//! appended once the interrupted compaction is finished, never shorter than
//! what an earlier check saw (so every original is still stored or
//! archived). The kill points are tallied: many must be in the crash window
//! of a compaction, after batches were archived and before the stored
//! history was rewritten. At the end a rerun in the parent appends and
//! compacts 10 more rounds without an error.

use ctxpress_compactor::{CompactionConfig, Compactor, expand_stored};
use ctxpress_core::archive::ArchiveError;
use ctxpress_core::compaction::{BatchArchive, Persistence, StoredMessage, SummaryBatch};
use ctxpress_store::SqliteArchive;
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

const T0: i64 = 1_790_000_000;
const CHILD: &str = "CTXPRESS_CRASH_DB";
const AT: &str = "CTXPRESS_CRASH_AT";
const RUN: &str = "CTXPRESS_CRASH_RUN";
/// Children killed at a write they wait at, then children killed a few
/// milliseconds after they reached their write.
const STOPPED: usize = 28;
const RUNNING: usize = 6;
/// A child is killed at one of its first this many compaction writes (a
/// compaction does one to three): the stopped children at each in turn.
const MAX_AT: usize = 7;
/// Messages appended a round, by the number already appended: mostly a few,
/// sometimes many, so that a compaction folds many chunks at once and
/// summarizes the oldest batches again together with its first fresh ones.
const STEPS: [usize; 5] = [9, 9, 27, 9, 9];

/// The whole conversation, message by message (JSON texts).
fn conversation() -> Vec<String> {
    let mut out = vec![json!({"role": "system", "content": "You are a coding agent."}).to_string()];
    // Long enough for every child and the rerun (a child that runs out
    // fails the test).
    for i in 0..4_000_u32 {
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

/// The expanded history as a prefix of `all`, or where it is not one.
fn prefix(got: &[String], all: &[String]) -> Result<(), String> {
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
}

/// How many messages of `all` the file holds, and how many of them are
/// both stored and archived, or what is wrong. Right after a kill, an
/// interrupted compaction may have archived messages it had not yet
/// deleted: each original must be stored or archived (the expanded history,
/// duplicates dropped, is a prefix of `all`).
fn check(path: &Path, all: &[String]) -> Result<(usize, usize), String> {
    let integrity: String = rusqlite::Connection::open(path)
        .and_then(|c| c.query_row("PRAGMA integrity_check", [], |r| r.get(0)))
        .map_err(|e| format!("integrity_check: {e}"))?;
    if integrity != "ok" {
        return Err(format!("integrity_check: {integrity}"));
    }
    let db = SqliteArchive::open(path).map_err(|e| format!("open: {e}"))?;
    let got = expand_stored("c", &db, &db).map_err(|e| format!("expand: {e}"))?;
    let mut seen = std::collections::HashSet::new();
    let distinct: Vec<&String> = got.iter().filter(|m| seen.insert(*m)).collect();
    let distinct: Vec<String> = distinct.into_iter().cloned().collect();
    prefix(&distinct, all)?;
    Ok((distinct.len(), got.len() - distinct.len()))
}

/// Finish the interrupted compaction, if any: the expanded history is then
/// exactly the first `n` messages of `all` (what [`check`] counted).
fn finish(path: &Path, all: &[String], n: usize) -> Result<(), String> {
    let db = SqliteArchive::open(path).map_err(|e| format!("open: {e}"))?;
    compactor()
        .finish_interrupted("c", &db, &db)
        .map_err(|e| format!("finishing: {e}"))?;
    let got = expand_stored("c", &db, &db).map_err(|e| format!("expand: {e}"))?;
    prefix(&got, all)?;
    if got.len() != n {
        return Err(format!(
            "{n} messages before finishing, {} after",
            got.len()
        ));
    }
    Ok(())
}

/// The SQLite file with a count of the compactions' writes (batch put,
/// batch replace, fold; appends are not counted): at write `stop_at` it
/// prints `crash-point DONE NEXT` (the writes of this round so far, appends
/// included, and the write about to be done) and, when `wait`, waits there
/// to be killed.
struct Counted {
    db: SqliteArchive,
    stop_at: Option<usize>,
    wait: bool,
    /// Writes done; those of the current round.
    writes: Mutex<(usize, Vec<&'static str>)>,
}

impl Counted {
    fn new_round(&self) {
        self.writes.lock().unwrap().1.clear();
    }

    fn write(&self, what: &'static str) {
        let mut w = self.writes.lock().unwrap();
        w.0 += usize::from(what != "append");
        if what != "append" && Some(w.0) == self.stop_at {
            let mut out = std::io::stdout().lock();
            let done = if w.1.is_empty() {
                "-".to_string()
            } else {
                w.1.join(",")
            };
            writeln!(out, "crash-point {done} {what}").unwrap();
            out.flush().unwrap();
            if self.wait {
                // Until killed.
                loop {
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
        }
        w.1.push(what);
    }
}

impl Persistence for Counted {
    fn load(&self, c: &str) -> Result<Vec<StoredMessage>, ArchiveError> {
        self.db.load(c)
    }
    fn append(&self, c: &str, m: &[String]) -> Result<Vec<i64>, ArchiveError> {
        self.write("append");
        self.db.append(c, m)
    }
    fn fold(&self, c: &str, removed: &[i64], insert: &[String]) -> Result<(), ArchiveError> {
        self.write("fold");
        self.db.fold(c, removed, insert)
    }
}

impl BatchArchive for Counted {
    fn put_batches(&self, b: &[SummaryBatch]) -> Result<(), ArchiveError> {
        self.write("put");
        self.db.put_batches(b)
    }
    fn batches(&self, c: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        self.db.batches(c)
    }
    fn read(&self, label: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        BatchArchive::read(&self.db, label)
    }
    fn replace(
        &self,
        c: &str,
        removed: &[String],
        added: SummaryBatch,
    ) -> Result<(), ArchiveError> {
        self.write("replace");
        self.db.replace(c, removed, added)
    }
}

/// Append the next messages and compact, `rounds` times or until everything
/// is appended. Returns the number of compactions that reported an error.
/// How many messages were appended is told by the last one stored (the
/// messages are all different), not by the expanded history: an interrupted
/// compaction left to this run to finish makes that longer.
fn work(db: &Counted, all: &[String], rounds: usize) -> usize {
    let c = compactor();
    let index: HashMap<&str, usize> = all
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut errors = 0;
    for _ in 0..rounds {
        db.new_round();
        let stored = db.load("c").expect("load");
        let have = stored.last().map_or(0, |m| index[m.json.as_str()] + 1);
        if have >= all.len() {
            break;
        }
        let step = STEPS[have % STEPS.len()];
        db.append("c", &all[have..(have + step).min(all.len())])
            .expect("append");
        let r = c.compress_stored("c", db, db);
        if let Some(e) = r.error {
            eprintln!("compaction error: {e}");
            errors += 1;
        }
    }
    errors
}

/// xorshift64*: the running children's kill points and delays (fixed
/// seed, printed).
fn random(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Where the children were killed: before which write, after which writes
/// of the same round.
#[derive(Default, Debug)]
struct Tally {
    /// Before a fold that follows archive writes: the crash window.
    window: usize,
    /// Between two archive writes (a replace, then a put).
    between_batches: usize,
    /// Of those, after a re-summarization that merged fresh batches with
    /// old ones: messages were archived and still stored although the put
    /// of the round had not been done.
    merged_pending: usize,
    /// Before the fold that finishes an interrupted compaction left to
    /// this child.
    recovering: usize,
    /// Interrupted compactions left to the next child to finish.
    left: usize,
    /// Anywhere else (before the first archive write of a compaction).
    other: usize,
}

#[test]
fn killed_compactions_lose_nothing_and_a_rerun_completes() {
    let all = conversation();
    if let Ok(path) = std::env::var(CHILD) {
        // The child: work until killed at the write it was given.
        let db = Counted {
            db: SqliteArchive::open(Path::new(&path)).expect("open the archive"),
            stop_at: std::env::var(AT).ok().map(|n| n.parse().unwrap()),
            wait: std::env::var_os(RUN).is_none(),
            writes: Mutex::new((0, Vec::new())),
        };
        work(&db, &all, usize::MAX);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let exe = std::env::current_exe().unwrap();
    // The child runs this test alone: its name in the test binary is its
    // module path without the binary's own name (`crash::killed_...`).
    let name = "killed_compactions_lose_nothing_and_a_rerun_completes";
    let this_test = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    };
    let seed = 0x5eed_c0de_u64;
    eprintln!("kill points seeded with {seed:#x}");
    let mut next = random(seed);
    let mut seen = 0;
    let mut tally = Tally::default();
    // A child killed as it finishes the interrupted compaction left to it.
    let mut recovery = false;
    let mut interrupted = 0;
    for child_no in 0..STOPPED + RUNNING {
        let stopped = child_no < STOPPED;
        let recovering = std::mem::take(&mut recovery);
        let at = if recovering {
            1
        } else if stopped {
            1 + child_no % MAX_AT
        } else {
            1 + usize::try_from(next() >> 33).unwrap() % MAX_AT
        };
        let mut cmd = Command::new(&exe);
        cmd.args(["--exact", &this_test, "--nocapture", "--test-threads=1"])
            .env(CHILD, &path)
            .env(AT, at.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if !stopped {
            cmd.env(RUN, "1");
        }
        let mut child = cmd.spawn().unwrap();
        // Wait for the child to reach its write (however long a busy
        // machine takes), then kill it there or, running, a little later.
        // (The marker follows libtest's `test NAME ... ` on its line.)
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let point = out
                .lines()
                .map_while(Result::ok)
                .find_map(|l| l.split_once("crash-point ").map(|(_, p)| p.to_string()));
            let _ = tx.send(point);
        });
        let point = match rx.recv_timeout(Duration::from_secs(600)) {
            Ok(Some(point)) => point,
            Ok(None) => {
                let status = child.wait().unwrap();
                panic!("child {child_no} ended ({status}) before its write {at}");
            }
            Err(_) => {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("child {child_no} did not reach its write {at} in 10 minutes");
            }
        };
        if !stopped {
            std::thread::sleep(Duration::from_micros(next() % 4000));
        }
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        let here = format!("child {child_no} (killed before write {at}: {point})");
        let (n, pending) = check(&path, &all).unwrap_or_else(|e| panic!("{here}: {e}"));
        assert!(
            n >= seen,
            "{here}: {n} messages stored, {seen} before: lost some"
        );
        seen = n;
        // Every other interrupted compaction a stopped child leaves is
        // finished by the next child's compaction instead, and every other
        // one of those is killed as it does.
        let leave = stopped && !recovering && pending > 0 && {
            interrupted += 1;
            interrupted % 2 == 0
        };
        if leave {
            tally.left += 1;
            recovery = tally.left % 2 == 0;
        } else {
            finish(&path, &all, n).unwrap_or_else(|e| panic!("{here}: {e}"));
        }
        if stopped {
            let (done, what) = point.split_once(' ').unwrap();
            let archived = done.contains("put") || done.contains("replace");
            match what {
                "fold" if archived => tally.window += 1,
                "fold" if recovering => tally.recovering += 1,
                "put" if done.ends_with("replace") => {
                    tally.between_batches += 1;
                    // The replace merged fresh batches: their messages are
                    // archived and still stored.
                    tally.merged_pending += usize::from(pending > 0);
                }
                _ => tally.other += 1,
            }
        }
    }
    eprintln!("{seen} messages appended; kill points of the stopped children: {tally:?}");
    assert!(seen > 1, "the children appended nothing");
    // The stopped children's kill points depend on the writes alone, never
    // on the machine's speed: these hold on any machine.
    assert!(
        tally.window >= 6
            && tally.between_batches >= 5
            && tally.merged_pending >= 2
            && tally.recovering >= 2
            && tally.left >= 4,
        "too few kills in a compaction's crash window: {tally:?}"
    );
    // A rerun completes: 10 more rounds of appending and compacting, every
    // compaction clean, nothing lost, the stored history kept small.
    let db = Counted {
        db: SqliteArchive::open(&path).unwrap(),
        stop_at: None,
        wait: false,
        writes: Mutex::new((0, Vec::new())),
    };
    let errors = work(&db, &all, 10);
    assert_eq!(errors, 0, "compactions after the crashes reported errors");
    let (n, pending) = check(&path, &all).unwrap();
    assert_eq!(
        pending, 0,
        "the rerun left messages both stored and archived"
    );
    assert!(n >= seen + 10, "the rerun appended {} messages", n - seen);
    let stored = db.load("c").unwrap().len();
    assert!(
        stored < n / 4,
        "{stored} of {n} messages still stored: not compacted"
    );
}
