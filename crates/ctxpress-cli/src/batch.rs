//! Streaming a batch through worker threads: conversations are read one at a
//! time, worked on by up to `jobs` threads, and handed back in input order,
//! with a bounded window of them in flight.
//!
//! The window is what was read and not yet emitted: at most
//! [`WINDOW_PER_JOB`] × `jobs` pieces (conversations or blank lines) and
//! [`WINDOW_BYTES`] of their input text (a longer conversation is still taken,
//! alone): the reader waits when it is full, so memory does not grow with the
//! input. The results are reordered by their place in the input, so the output
//! is byte-identical to a run with `--jobs 1` (which runs everything on the
//! calling thread). The first error in input order stops the run: no further
//! conversation is read or started, the ones in flight are dropped, and the
//! error is returned (the caller's output is then never committed).

use crate::io::{Piece, Reader};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Pieces (conversations, blank lines) in flight per worker thread.
pub const WINDOW_PER_JOB: usize = 4;

/// Input text in flight at most (beyond the first conversation).
pub const WINDOW_BYTES: usize = 64 << 20;

/// What the in-order consumer gets for each piece of the input.
pub enum Out<T> {
    /// A blank line, verbatim with its ending.
    Blank(String),
    /// A conversation's result.
    Item {
        /// 1-based line where the conversation starts.
        line: usize,
        /// Its line ending (`\n`, `\r\n` or nothing).
        ending: &'static str,
        /// What the work made of it.
        value: T,
    },
}

/// The number of worker threads for `--jobs` (default: the available cores).
pub fn jobs(flag: Option<usize>) -> usize {
    flag.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

/// One conversation to work on.
struct Job {
    seq: usize,
    line: usize,
    text: String,
}

/// A finished piece waiting for its turn.
enum Ready<T> {
    Blank(String),
    Item {
        line: usize,
        ending: &'static str,
        /// Its input bytes.
        bytes: usize,
        value: anyhow::Result<T>,
    },
}

/// Run `work(line, text)` on every conversation of `reader` on `jobs`
/// threads and give each result (and each blank line) to `emit` in input
/// order. Stops at the first error in input order (reading, `work` or
/// `emit`) and returns it.
pub fn run<T, W, E>(reader: &mut Reader, jobs: usize, work: W, mut emit: E) -> anyhow::Result<()>
where
    T: Send,
    W: Fn(usize, String) -> anyhow::Result<T> + Sync,
    E: FnMut(Out<T>) -> anyhow::Result<()>,
{
    if jobs <= 1 {
        while let Some(p) = reader.next_piece()? {
            match p {
                Piece::Blank(raw) => emit(Out::Blank(raw))?,
                Piece::Item { line, text, ending } => {
                    let value = work(line, text)?;
                    emit(Out::Item {
                        line,
                        ending,
                        value,
                    })?;
                }
            }
        }
        return Ok(());
    }
    let window = WINDOW_PER_JOB * jobs;
    let stop = AtomicBool::new(false);
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (done_tx, done_rx) = mpsc::channel::<(usize, anyhow::Result<T>)>();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            let job_rx = Arc::clone(&job_rx);
            let done_tx = done_tx.clone();
            let (work, stop) = (&work, &stop);
            s.spawn(move || {
                loop {
                    let next = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = next else {
                        return;
                    };
                    let r = if stop.load(Ordering::Relaxed) {
                        Err(anyhow::anyhow!("stopped"))
                    } else {
                        // A panic is this conversation's error, not a hang.
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            work(job.line, job.text)
                        }))
                        .unwrap_or_else(|p| {
                            let what = p
                                .downcast_ref::<&str>()
                                .map(|s| s.to_string())
                                .or_else(|| p.downcast_ref::<String>().cloned())
                                .unwrap_or_default();
                            Err(anyhow::anyhow!("internal error (panic): {what}"))
                        })
                    };
                    if done_tx.send((job.seq, r)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let r = drive(reader, window, &job_tx, &done_rx, &mut emit);
        // Stop the workers: nothing more is sent, queued jobs are skipped.
        stop.store(true, Ordering::Relaxed);
        drop(job_tx);
        r
    })
}

/// The calling thread's part: read, hand out, collect, reorder, emit.
fn drive<T, E>(
    reader: &mut Reader,
    window: usize,
    job_tx: &mpsc::Sender<Job>,
    done_rx: &mpsc::Receiver<(usize, anyhow::Result<T>)>,
    emit: &mut E,
) -> anyhow::Result<()>
where
    E: FnMut(Out<T>) -> anyhow::Result<()>,
{
    // Pieces waiting for their turn, by place in the input.
    let mut ready: BTreeMap<usize, Ready<T>> = BTreeMap::new();
    // Conversations handed out and not back yet: line, ending, input bytes.
    let mut out: BTreeMap<usize, (usize, &'static str, usize)> = BTreeMap::new();
    // Pieces read and not yet emitted are next_emit..next_seq; their input
    // bytes are `held`.
    let (mut next_seq, mut next_emit, mut held) = (0usize, 0usize, 0usize);
    let mut read_error: Option<(usize, anyhow::Error)> = None;
    let mut eof = false;
    loop {
        // Read while the window has room.
        while !eof
            && read_error.is_none()
            && next_seq - next_emit < window
            && (next_seq == next_emit || held < WINDOW_BYTES)
        {
            match reader.next_piece() {
                Ok(None) => eof = true,
                Ok(Some(Piece::Blank(raw))) => {
                    held += raw.len();
                    ready.insert(next_seq, Ready::Blank(raw));
                    next_seq += 1;
                }
                Ok(Some(Piece::Item { line, text, ending })) => {
                    held += text.len();
                    out.insert(next_seq, (line, ending, text.len()));
                    let seq = next_seq;
                    next_seq += 1;
                    if job_tx.send(Job { seq, line, text }).is_err() {
                        return Err(anyhow::anyhow!("the worker threads stopped"));
                    }
                }
                Err(e) => read_error = Some((next_seq, e)),
            }
        }
        // Emit what is ready, in order.
        loop {
            if let Some((seq, _)) = &read_error
                && *seq == next_emit
            {
                let (_, e) = read_error.take().expect("checked");
                return Err(e);
            }
            let Some(r) = ready.remove(&next_emit) else {
                break;
            };
            next_emit += 1;
            match r {
                Ready::Blank(raw) => {
                    held -= raw.len();
                    emit(Out::Blank(raw))?;
                }
                Ready::Item {
                    line,
                    ending,
                    bytes,
                    value,
                } => {
                    held -= bytes;
                    emit(Out::Item {
                        line,
                        ending,
                        value: value?,
                    })?;
                }
            }
        }
        if next_emit == next_seq && (eof || read_error.is_some()) {
            // A read error is emitted above once everything before it was.
            return Ok(());
        }
        if out.is_empty() {
            // Nothing with the workers (the window held blank lines only):
            // read on.
            continue;
        }
        // Wait for a worker.
        let Ok((seq, value)) = done_rx.recv() else {
            return Err(anyhow::anyhow!("the worker threads stopped"));
        };
        let (line, ending, bytes) = out.remove(&seq).unwrap_or((0, "", 0));
        ready.insert(
            seq,
            Ready::Item {
                line,
                ending,
                bytes,
                value,
            },
        );
    }
}

// ---------------------------------------------------------------------------
// Archive writes in input order.

use ctxpress::Archive;
use ctxpress::core::{ArchiveError, Record};
use std::cell::RefCell;

/// One archive write held back.
enum Write {
    Put(Vec<Record>),
    PutFor(Option<String>, Vec<Record>),
}

/// The archive writes one conversation made, to be replayed in input order
/// by [`HeldArchive::replay`].
#[derive(Default)]
pub struct Held(Vec<Write>);

thread_local! {
    /// The writes of the conversation this thread is compressing, while
    /// [`HeldArchive::hold`] runs.
    static HELD: RefCell<Option<Vec<Write>>> = const { RefCell::new(None) };
}

/// An archive whose record writes, made while [`HeldArchive::hold`] runs on
/// a worker thread, are held and written later by the thread that emits
/// the conversations in input order: the archive is written from one
/// thread, conversation by conversation, in the order of a sequential run,
/// and nothing of a conversation after the first error is written. Reads
/// and the summary cache go straight through.
pub struct HeldArchive {
    inner: Arc<dyn Archive>,
}

impl HeldArchive {
    /// Hold the writes made to `inner`.
    pub fn new(inner: Arc<dyn Archive>) -> Self {
        Self { inner }
    }

    /// Run `f` on this thread with the writes to any `HeldArchive` held;
    /// returns its result and the writes.
    pub fn hold<R>(f: impl FnOnce() -> R) -> (R, Held) {
        HELD.with(|h| *h.borrow_mut() = Some(Vec::new()));
        let r = f();
        let held = HELD.with(|h| h.borrow_mut().take()).unwrap_or_default();
        (r, Held(held))
    }

    /// Write what was held, in the order it was made.
    pub fn replay(&self, held: Held) -> Result<(), ArchiveError> {
        for w in held.0 {
            match w {
                Write::Put(r) => self.inner.put(&r)?,
                Write::PutFor(id, r) => self.inner.put_for(id.as_deref(), &r)?,
            }
        }
        Ok(())
    }

    /// Hold `w` when this thread holds writes; otherwise hand it back.
    fn held(w: Write) -> Option<Write> {
        HELD.with(|h| match h.borrow_mut().as_mut() {
            Some(v) => {
                v.push(w);
                None
            }
            None => Some(w),
        })
    }
}

impl Archive for HeldArchive {
    fn put(&self, records: &[Record]) -> Result<(), ArchiveError> {
        match Self::held(Write::Put(records.to_vec())) {
            None => Ok(()),
            Some(_) => self.inner.put(records),
        }
    }
    fn put_for(&self, conversation: Option<&str>, records: &[Record]) -> Result<(), ArchiveError> {
        match Self::held(Write::PutFor(
            conversation.map(str::to_string),
            records.to_vec(),
        )) {
            None => Ok(()),
            Some(_) => self.inner.put_for(conversation, records),
        }
    }
    fn get(&self, key: &str) -> Result<Option<Vec<String>>, ArchiveError> {
        self.inner.get(key)
    }
    fn cache_get(&self, key: &str) -> Result<Option<String>, ArchiveError> {
        self.inner.cache_get(key)
    }
    fn cache_put(&self, key: &str, value: &str) -> Result<(), ArchiveError> {
        self.inner.cache_put(key, value)
    }
}
