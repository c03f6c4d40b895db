//! Compaction of a conversation kept in a `Persistence`: archive first, then
//! delete; an interrupted run is finished by the next one; expand gives back
//! every message as appended.

use ctxpress_compactor::{CompactionConfig, Compactor, expand_stored};
use ctxpress_core::archive::ArchiveError;
use ctxpress_core::compaction::{
    BatchArchive, MemoryBatchArchive, MemoryPersistence, Persistence, StoredMessage, SummaryBatch,
};
use serde_json::json;
use std::future::Future;
use std::sync::{Arc, Mutex};

const T0: i64 = 1_790_000_000;

/// Message `i` of a long conversation: user/assistant prose with a tool
/// exchange every fifth turn, all with timestamps.
fn message(i: usize) -> Vec<String> {
    let t = T0 + 60 * i as i64;
    if i % 5 == 4 {
        let id = format!("call{i}");
        vec![
            json!({"role": "assistant", "content": "", "timestamp": t, "tool_calls": [{"id": id,
                "type": "function", "function": {"name": "Bash",
                "arguments": json!({"command": format!("cargo test --test t{i}")}).to_string()}}]})
            .to_string(),
            json!({"role": "tool", "tool_call_id": id, "timestamp": t,
                "content": format!("test t{i} ... ok\n").repeat(20)})
            .to_string(),
        ]
    } else {
        let role = if i.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        };
        vec![
            json!({"role": role, "timestamp": t, "content": format!(
                "Turn {i}: the queue hands work from the primary loop to the secondary loop; \
                 we keep the ring buffer because it measured well under load ({i})."
            )})
            .to_string(),
        ]
    }
}

fn messages(range: std::ops::Range<usize>) -> Vec<String> {
    range.flat_map(message).collect()
}

fn compactor() -> Compactor {
    Compactor::new(CompactionConfig {
        chunk_tokens: 400,
        ..CompactionConfig::default()
    })
    .unwrap()
    .with_now(T0 * 1000)
}

fn system() -> String {
    json!({"role": "system", "content": "You are a coding agent."}).to_string()
}

#[test]
fn stored_conversation_is_folded_in_place_and_expands_exactly() {
    let (p, a) = (MemoryPersistence::new(), MemoryBatchArchive::new());
    let mut appended = vec![system()];
    appended.extend(messages(0..40));
    p.append("c", &appended).unwrap();
    let c = compactor();
    for round in 0..3 {
        let before = p.load("c").unwrap().len();
        let r = c.compress_stored("c", &p, &a);
        assert!(r.error.is_none(), "round {round}: {:?}", r.error);
        assert!(r.compacted, "round {round}: {:?}", r.notes);
        let after = p.load("c").unwrap();
        assert!(after.len() < before, "round {round}");
        // What is stored is the compacted history.
        let stored: Vec<&str> = after.iter().map(|m| m.json.as_str()).collect();
        let history: Vec<String> = r
            .history
            .messages
            .iter()
            .map(|m| r.history.message_json(m))
            .collect();
        assert_eq!(stored, history, "round {round}");
        assert_eq!(after[0].json, system());
        assert!(
            after[1].json.contains("[Context Summary"),
            "{}",
            after[1].json
        );
        assert_eq!(
            expand_stored("c", &p, &a).unwrap(),
            appended,
            "round {round}"
        );
        // More messages arrive.
        let more = messages(40 + round * 20..60 + round * 20);
        p.append("c", &more).unwrap();
        appended.extend(more);
    }
    assert_eq!(expand_stored("c", &p, &a).unwrap(), appended);
}

/// A persistence whose `fold` fails (after the archive commit): the crash
/// window between the two writes.
struct FailingFold {
    inner: MemoryPersistence,
    fail: Mutex<bool>,
}

impl Persistence for FailingFold {
    fn load(&self, c: &str) -> Result<Vec<StoredMessage>, ArchiveError> {
        self.inner.load(c)
    }
    fn append(&self, c: &str, m: &[String]) -> Result<Vec<i64>, ArchiveError> {
        self.inner.append(c, m)
    }
    fn fold(&self, c: &str, r: &[i64], i: &[String]) -> Result<(), ArchiveError> {
        if *self.fail.lock().unwrap() {
            return Err(ArchiveError::Backend("killed".into()));
        }
        self.inner.fold(c, r, i)
    }
}

#[test]
fn a_run_stopped_after_the_archive_commit_is_finished_by_the_next() {
    let p = FailingFold {
        inner: MemoryPersistence::new(),
        fail: Mutex::new(true),
    };
    let a = MemoryBatchArchive::new();
    let mut appended = vec![system()];
    appended.extend(messages(0..40));
    p.append("c", &appended).unwrap();
    let c = compactor();
    let r = c.compress_stored("c", &p, &a);
    assert!(!r.compacted);
    assert!(r.error.is_some());
    assert!(!a.is_empty(), "the batches were committed first");
    let batches = a.batches("c").unwrap().len();
    // Every original is still stored.
    let stored: Vec<String> = p.load("c").unwrap().into_iter().map(|m| m.json).collect();
    assert_eq!(stored, appended);

    *p.fail.lock().unwrap() = false;
    let r = c.compress_stored("c", &p, &a);
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(
        r.notes.iter().any(|n| n.contains("interrupted compaction")),
        "{:?}",
        r.notes
    );
    // The same messages were not summarized twice.
    assert_eq!(a.batches("c").unwrap().len(), batches);
    assert_eq!(expand_stored("c", &p, &a).unwrap(), appended);
    // And it goes on as usual.
    let more = messages(40..70);
    p.append("c", &more).unwrap();
    appended.extend(more);
    let r = c.compress_stored("c", &p, &a);
    assert!(
        r.compacted && r.error.is_none(),
        "{:?} {:?}",
        r.notes,
        r.error
    );
    assert_eq!(expand_stored("c", &p, &a).unwrap(), appended);
}

#[test]
fn an_archive_that_fails_leaves_persistence_untouched() {
    struct Broken;
    impl BatchArchive for Broken {
        fn put_batches(
            &self,
            _: &[ctxpress_core::compaction::SummaryBatch],
        ) -> Result<(), ArchiveError> {
            Err(ArchiveError::Backend("disk full".into()))
        }
        fn batches(
            &self,
            _: &str,
        ) -> Result<Vec<ctxpress_core::compaction::SummaryBatch>, ArchiveError> {
            Ok(Vec::new())
        }
        fn read(
            &self,
            _: &str,
        ) -> Result<Option<ctxpress_core::compaction::SummaryBatch>, ArchiveError> {
            Ok(None)
        }
        fn replace(
            &self,
            _: &str,
            _: &[String],
            _: ctxpress_core::compaction::SummaryBatch,
        ) -> Result<(), ArchiveError> {
            Err(ArchiveError::Backend("disk full".into()))
        }
    }
    let p = MemoryPersistence::new();
    let mut appended = vec![system()];
    appended.extend(messages(0..40));
    p.append("c", &appended).unwrap();
    let r = compactor().compress_stored("c", &p, &Broken);
    assert!(!r.compacted);
    assert!(r.error.is_some());
    let stored: Vec<String> = p.load("c").unwrap().into_iter().map(|m| m.json).collect();
    assert_eq!(stored, appended);
}

#[test]
fn stored_messages_that_do_not_parse_are_an_error_not_a_panic() {
    let p = MemoryPersistence::new();
    p.append("c", &["{\"role\": ".into()]).unwrap();
    let r = compactor().compress_stored("c", &p, &MemoryBatchArchive::new());
    assert!(!r.compacted);
    assert!(r.error.is_some());
    // An empty conversation is nothing to do.
    let r = compactor().compress_stored("none", &p, &MemoryBatchArchive::new());
    assert!(!r.compacted);
    assert!(r.error.is_none(), "{:?}", r.error);
}

/// Every conversation of ../shared/corpus, appended in three parts with a
/// compaction after each: the stored history expands to every message byte
/// for byte, and no compaction reports an error.
#[test]
fn corpus_conversations_compacted_three_times_expand_exactly() {
    let files = ctxpress_tests::corpus::files();
    let c = Compactor::new(CompactionConfig::default()).unwrap();
    let (mut convs, mut compactions, mut thrice) = (0, 0, 0);
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let at = format!("{name}:{}", n + 1);
            let conv = ctxpress_core::Conversation::parse(line).unwrap();
            let all: Vec<String> = conv.messages.iter().map(|m| conv.message_json(m)).collect();
            let (p, a) = (MemoryPersistence::new(), MemoryBatchArchive::new());
            let cuts = [all.len() * 3 / 5, all.len() * 4 / 5, all.len()];
            let mut from = 0;
            let mut rounds = 0;
            for (round, &to) in cuts.iter().enumerate() {
                p.append("c", &all[from..to]).unwrap();
                from = to;
                let r = c.compress_stored("c", &p, &a);
                assert!(r.error.is_none(), "{at} round {round}: {:?}", r.error);
                compactions += usize::from(r.compacted);
                rounds += usize::from(r.compacted);
                let got = expand_stored("c", &p, &a).unwrap();
                if got[..] != all[..to] {
                    let short = |v: &[String]| -> Vec<String> {
                        v.iter().map(|t| t.chars().take(70).collect()).collect()
                    };
                    let i = got.iter().zip(&all[..to]).position(|(x, y)| x != y);
                    let stored: Vec<String> =
                        p.load("c").unwrap().into_iter().map(|m| m.json).collect();
                    panic!(
                        "{at} round {round}: expanded {} messages, appended {to}; first difference at {i:?}\n got {:#?}\n want {:#?}\n stored {:#?}\n notes {:?}",
                        got.len(),
                        short(&got[..got.len().min(4)]),
                        short(&all[..4.min(to)]),
                        short(&stored[..stored.len().min(5)]),
                        r.notes
                    );
                }
            }
            convs += 1;
            thrice += usize::from(rounds == 3);
        }
    }
    // Short chats have little before their protected tail; the agent
    // sessions are compacted in every round.
    assert!(
        convs > 0 && compactions > convs / 2 && thrice > 0,
        "{convs} conversations, {compactions} compactions, {thrice} compacted three times"
    );
    eprintln!("{convs} conversations, {compactions} compactions, {thrice} compacted three times");
}

/// The async path folds a stored conversation the same way as the sync one
/// (system messages after the clip included), so it expands exactly too.
#[test]
fn the_async_path_folds_like_the_sync_one_and_expands_exactly() {
    let mut appended = vec![system()];
    for (i, m) in messages(0..40).into_iter().enumerate() {
        if i % 7 == 3 {
            appended.push(json!({"role": "system", "content": format!("note {i}")}).to_string());
        }
        appended.push(m);
    }
    let run = |sync: bool| {
        let (p, a) = (MemoryPersistence::new(), MemoryBatchArchive::new());
        p.append("c", &appended).unwrap();
        let r = if sync {
            compactor().compress_stored("c", &p, &a)
        } else {
            let c = compactor();
            let fut = c.compress_stored_async("c", &p, &a);
            let mut fut = std::pin::pin!(fut);
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            match fut.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(r) => r,
                std::task::Poll::Pending => panic!("a sync backend never waits"),
            }
        };
        assert!(
            r.compacted && r.error.is_none(),
            "{:?} {:?}",
            r.notes,
            r.error
        );
        assert_eq!(
            expand_stored("c", &p, &a).unwrap(),
            appended,
            "sync: {sync}"
        );
        let stored: Vec<String> = p.load("c").unwrap().into_iter().map(|m| m.json).collect();
        stored
    };
    assert_eq!(run(false), run(true));
}

/// A persistence and batch archive (in memory, or one SQLite database)
/// that stop writing after a number of writes (`put_batches`, `replace`,
/// `fold`), as a process killed there would: each later write fails and
/// changes nothing.
struct Killed {
    p: Arc<dyn Persistence>,
    a: Arc<dyn BatchArchive>,
    /// Writes left before the "kill" (`None`: no kill).
    left: Mutex<Option<usize>>,
    /// The writes done, in order.
    log: Mutex<Vec<&'static str>>,
}

impl Killed {
    /// A copy of the stored messages and batches of conversation `c`.
    fn copy(stored: &[String], batches: &[SummaryBatch], sqlite: bool) -> Self {
        let (p, a): (Arc<dyn Persistence>, Arc<dyn BatchArchive>) = if sqlite {
            let db = Arc::new(ctxpress_store::SqliteArchive::open_in_memory().unwrap());
            (db.clone(), db)
        } else {
            (
                Arc::new(MemoryPersistence::new()),
                Arc::new(MemoryBatchArchive::new()),
            )
        };
        p.append("c", stored).unwrap();
        a.put_batches(batches).unwrap();
        Killed {
            p,
            a,
            left: Mutex::new(None),
            log: Mutex::new(Vec::new()),
        }
    }

    fn state(&self) -> (Vec<String>, Vec<SummaryBatch>) {
        let stored = self.p.load("c").unwrap();
        let batches = self.a.batches("c").unwrap();
        (stored.into_iter().map(|m| m.json).collect(), batches)
    }

    fn write(&self, what: &'static str) -> Result<(), ArchiveError> {
        let mut left = self.left.lock().unwrap();
        match left.as_mut() {
            Some(0) => return Err(ArchiveError::Backend("killed".into())),
            Some(n) => *n -= 1,
            None => {}
        }
        self.log.lock().unwrap().push(what);
        Ok(())
    }
}

impl BatchArchive for Killed {
    fn put_batches(&self, b: &[SummaryBatch]) -> Result<(), ArchiveError> {
        self.write("put")?;
        self.a.put_batches(b)
    }
    fn batches(&self, c: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        self.a.batches(c)
    }
    fn read(&self, l: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        self.a.read(l)
    }
    fn replace(&self, c: &str, r: &[String], b: SummaryBatch) -> Result<(), ArchiveError> {
        self.write("replace")?;
        self.a.replace(c, r, b)
    }
}

impl Persistence for Killed {
    fn load(&self, c: &str) -> Result<Vec<StoredMessage>, ArchiveError> {
        self.p.load(c)
    }
    fn append(&self, c: &str, m: &[String]) -> Result<Vec<i64>, ArchiveError> {
        self.p.append(c, m)
    }
    fn fold(&self, c: &str, r: &[i64], i: &[String]) -> Result<(), ArchiveError> {
        self.write("fold")?;
        self.p.fold(c, r, i)
    }
}

/// A compaction killed after each of its writes in turn (the archive writes
/// done, the persistence rewrite not), over rounds that append few or many
/// messages: finishing the interrupted run leaves a stored history that
/// expands to exactly what was appended, whether `finish_interrupted` or the
/// next `compress_stored` finishes it. With many messages at once the
/// re-summarization merges the oldest batches with the first fresh ones
/// (a `replace`, then a `put` of the other fresh batches): after a kill
/// there the newest batch holds old and pending messages together.
#[test]
fn a_run_killed_after_any_write_is_finished_exactly() {
    for sqlite in [false, true] {
        killed_after_any_write(sqlite);
    }
}

fn killed_after_any_write(sqlite: bool) {
    let c = Compactor::new(CompactionConfig {
        chunk_tokens: 300,
        clip_window: 1,
        buffer: 1,
        ..CompactionConfig::default()
    })
    .unwrap()
    .with_now(T0 * 1000);
    let main = Killed::copy(&[system()], &[], sqlite);
    let mut appended = vec![system()];
    let (mut next, mut kills, mut merged_pending) = (0, 0, 0);
    for (round, n) in [30, 6, 45, 9, 9, 70, 3, 12, 60, 9].into_iter().enumerate() {
        let more = messages(next..next + n);
        next += n;
        main.p.append("c", &more).unwrap();
        appended.extend(more);
        let (stored, batches) = main.state();
        'kills: for k in 0.. {
            // Recovery by finish_interrupted, and by the next compaction.
            for by_compaction in [false, true] {
                let t = Killed::copy(&stored, &batches, sqlite);
                *t.left.lock().unwrap() = Some(k);
                let r = c.compress_stored("c", &t, &t);
                let log = t.log.lock().unwrap().clone();
                if r.error.is_none() {
                    // It finished in at most k writes.
                    assert!(r.compacted && log.len() <= k, "round {round}: {log:?}");
                    break 'kills;
                }
                kills += 1;
                *t.left.lock().unwrap() = None;
                let at = format!("sqlite {sqlite}, round {round}, killed after {log:?}");
                let finished = if by_compaction {
                    let r = c.compress_stored("c", &t, &t);
                    assert!(r.error.is_none(), "{at}: {:?}", r.error);
                    usize::from(r.notes.iter().any(|n| n.contains("interrupted")))
                } else {
                    c.finish_interrupted("c", &t, &t).unwrap()
                };
                if finished > 0 && log.first() == Some(&"replace") {
                    merged_pending += 1;
                }
                let got = expand_stored("c", &t, &t).unwrap();
                if got != appended {
                    let i = got.iter().zip(&appended).position(|(x, y)| x != y);
                    panic!(
                        "{at}: expanded {} messages, appended {}; first difference at {i:?}",
                        got.len(),
                        appended.len()
                    );
                }
            }
            if k > 8 {
                panic!("round {round}: more than 8 writes");
            }
        }
        let r = c.compress_stored("c", &main, &main);
        assert!(r.compacted && r.error.is_none(), "round {round}: {r:?}");
        assert_eq!(expand_stored("c", &main, &main).unwrap(), appended);
    }
    eprintln!("{kills} kill points, {merged_pending} after a merging re-summarization");
    assert!(kills >= 30, "{kills} kill points");
    assert!(
        merged_pending >= 4,
        "{merged_pending} kills after a re-summarization that merged fresh batches"
    );
}

/// The first compaction killed before the persistence rewrite, then a user
/// message appended: the task (the first user message, protected while it
/// was the last one) is no longer protected, so the clip position moves
/// before it, yet the pending messages after it are found and folded.
#[test]
fn a_first_run_killed_is_finished_after_the_task_lost_its_protection() {
    let mut appended = vec![
        system(),
        json!({"role": "user", "content": "Fix the queue."}).to_string(),
    ];
    for i in 0..30 {
        let m = message(i * 2 + 1); // assistant turns and tool exchanges only
        appended.extend(m);
    }
    let t = Killed::copy(&appended, &[], false);
    *t.left.lock().unwrap() = Some(1); // the archive write, not the fold
    let c = compactor();
    let r = c.compress_stored("c", &t, &t);
    assert!(r.error.is_some(), "{r:?}");
    assert!(
        !t.a.batches("c").unwrap().is_empty(),
        "the batches were archived"
    );
    *t.left.lock().unwrap() = None;
    let more = vec![json!({"role": "user", "content": "Now the tests."}).to_string()];
    t.p.append("c", &more).unwrap();
    appended.extend(more);
    let r = c.compress_stored("c", &t, &t);
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(
        r.notes.iter().any(|n| n.contains("interrupted compaction")),
        "{:?}",
        r.notes
    );
    assert_eq!(expand_stored("c", &t, &t).unwrap(), appended);
}

/// A persistence whose next fold another run's compaction of the same
/// conversation precedes (a second process winning the race): the fold
/// then finds messages it loaded gone.
struct Racing<'a> {
    inner: &'a Killed,
    race: Mutex<bool>,
}

impl Persistence for Racing<'_> {
    fn load(&self, c: &str) -> Result<Vec<StoredMessage>, ArchiveError> {
        self.inner.load(c)
    }
    fn append(&self, c: &str, m: &[String]) -> Result<Vec<i64>, ArchiveError> {
        self.inner.append(c, m)
    }
    fn fold(&self, c: &str, r: &[i64], i: &[String]) -> Result<(), ArchiveError> {
        if std::mem::take(&mut *self.race.lock().unwrap()) {
            let other = compactor().compress_stored(c, self.inner, self.inner);
            assert!(other.error.is_none(), "{:?}", other.error);
        }
        self.inner.fold(c, r, i)
    }
}

/// Another run folds the stored messages between this run's load and its
/// fold, as it compacts or as it finishes an interrupted compaction: the
/// fold reports a conflict and changes nothing, this run starts again from
/// the stored messages, and the history still expands exactly.
#[test]
fn a_fold_that_lost_a_race_with_another_run_starts_again() {
    let c = compactor();
    for interrupted in [false, true] {
        let mut appended = vec![system()];
        appended.extend(messages(0..40));
        let inner = Killed::copy(&appended, &[], false);
        if interrupted {
            // Batches archived, the fold not done.
            *inner.left.lock().unwrap() = Some(1);
            assert!(c.compress_stored("c", &inner, &inner).error.is_some());
            *inner.left.lock().unwrap() = None;
            let more = messages(40..60);
            inner.append("c", &more).unwrap();
            appended.extend(more);
        }
        let p = Racing {
            inner: &inner,
            race: Mutex::new(true),
        };
        let r = c.compress_stored("c", &p, &inner);
        assert!(
            r.error.is_none(),
            "interrupted {interrupted}: {:?}",
            r.error
        );
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("(1 of this run's folds lost the race)")),
            "interrupted {interrupted}: {:?}",
            r.notes
        );
        assert_eq!(
            expand_stored("c", &inner, &inner).unwrap(),
            appended,
            "interrupted {interrupted}"
        );
    }
}
