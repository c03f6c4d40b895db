//! `ctxpress compact`: compact now, as an agent's `/compact` does.
//!
//! Everything before the protected tail of each conversation is folded into
//! summary batches (the `compactor`, spec 003), whatever its size. The
//! SQLite archive at `--archive` is both the batch archive (batches persist
//! across runs; `ctxpress search` finds them with kind `batch`) and the
//! archive of originals (`ctxpress expand OUT --archive DB` restores the
//! input byte for byte, through the same provenance records that
//! `compress --archive` writes).
//!
//! A JSONL input is streamed, one conversation at a time. The batches are
//! written as each conversation is compacted, in a run marked in the archive
//! that is finished once the output is committed: a run that fails, or is
//! killed before its output appears, is undone (by itself, or by the next
//! `compact` on the archive), so a rerun compacts as if it never ran.
//!
//! The next `compact` undoes a killed run in `settle`: a run is undone when its
//! output file did not appear, which is told by the output's temporary file's
//! device and inode, noted in the run's mark before the rename, not being in
//! place. The originals are recorded too, so `expand` restores the input.

use crate::io::{BOM, Kind, Output, PathUse, Piece, Reader, check_paths, parse_item, write_piece};
use crate::usage;
use anyhow::{Context, Result};
use ctxpress::compactor::state::is_clip_text;
use ctxpress::compactor::{CompactionConfig, CompactionResult, Compactor};
use ctxpress::core::Archive;
use ctxpress::core::archive::content_hash;
use ctxpress::core::compaction::{BatchArchive, SummaryBatch};
use ctxpress::core::{ArchiveError, Record};
use ctxpress::store::SqliteArchive;
use ctxpress::{Conversation, PipelineConfig};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Mutex;

/// Arguments of `ctxpress compact`.
#[derive(clap::Args)]
pub struct CompactArgs {
    /// Input file (.json document or .jsonl batch) or `-` for stdin.
    input: String,
    /// SQLite archive (created when missing) for the summary batches and the
    /// originals: `ctxpress search` and `ctxpress expand` read it.
    #[arg(long, value_name = "DB")]
    archive: String,
    /// Conversation id for a single document [default: its `id`, else the
    /// file stem]. Not for JSONL, where each line's `id` is used.
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// Output file (default stdout). Written atomically; never the input.
    #[arg(short, long)]
    output: Option<String>,
    /// Compactor parameters as TOML (e.g. `chunk_tokens = 2000`,
    /// `clip_window = 2`, `protected_tail = 5`).
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    #[command(flatten)]
    llm: crate::LlmArgs,
    /// Print, per conversation, the messages folded, the batches added (and
    /// summarized again), chunks that fell back to the deterministic summary
    /// (e.g. the model failed), the deepest batch and the tokens before and
    /// after to stderr.
    #[arg(long)]
    stats: bool,
}

/// The compactor's configuration: the `--config` file's parameters, then
/// the LLM flags (an endpoint switches the default `extractive` backend to
/// `openai`).
fn load_config(a: &CompactArgs) -> Result<CompactionConfig> {
    let mut params = Map::new();
    let mut file_llm: Option<Map<String, Value>> = None;
    let mut file_text = None;
    if let Some(path) = &a.config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("{path}: cannot read: {e}")))?;
        // Syntax errors at their place in the file (not in the text below).
        ctxpress::config::check_toml(path, &text).map_err(|e| usage(e.to_string()))?;
        let v = PipelineConfig::from_toml(&format!(
            "version = 1\n[[stages]]\ntype = \"compactor\"\n{text}"
        ))
        .map_err(|e| usage(format!("{path}: {e}")))?;
        if let Some(s) = v.stages.first() {
            params = s.params.clone();
        }
        // An `[llm]` table in the file parses as the pipeline's, not the
        // stage's `llm` parameter: it is the compactor's (it was ignored,
        // with its timeout and any misspelled field). As in a pipeline, it
        // applies when an endpoint is named (here or by --llm-url).
        file_llm = v.llm;
        file_text = Some(text);
    }
    if a.llm.any() || file_llm.is_some() {
        let had = params.contains_key("llm");
        let mut llm = match params.remove("llm") {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(usage("--config: `llm` must be a table")),
        };
        for (k, x) in file_llm.unwrap_or_default() {
            llm.entry(k).or_insert(x);
        }
        a.llm.apply(&mut llm);
        let endpoint = llm.get("base_url").is_some_and(|u| !u.is_null());
        if endpoint && !params.contains_key("backend") {
            params.insert("backend".into(), Value::String("openai".into()));
        }
        if endpoint || had || a.llm.any() {
            params.insert("llm".into(), Value::Object(llm));
        }
    }
    ctxpress::core::parse_params(ctxpress::compactor::NAME, &Value::Object(params)).map_err(|e| {
        match (&a.config, &file_text) {
            (Some(path), Some(text)) => {
                usage(ctxpress::config::error_in_file(path, text, &e).to_string())
            }
            _ => usage(format!("compact: {e}")),
        }
    })
}

/// A conversation's `id`, else (like the `compactor` stage) a hash of its
/// first message that is neither a system nor a clip-archive message.
fn conversation_id(conv: &Conversation) -> String {
    conv.id().unwrap_or_else(|| {
        let first = conv
            .messages
            .iter()
            .find(|m| !m.role().is_system() && !is_clip_text(&m.text()))
            .map(|m| conv.message_json(m))
            .unwrap_or_default();
        format!("c{}", &content_hash(&first)[..12])
    })
}

/// The conversation id of a single document: `--conversation`, else its
/// `id`, else the file stem, else a hash of its first message.
fn document_id(a: &CompactArgs, conv: &Conversation) -> Result<String> {
    let id = a
        .conversation
        .clone()
        .or_else(|| conv.id())
        .or_else(|| {
            Path::new(&a.input)
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|_| a.input != "-")
                .map(str::to_string)
        })
        .unwrap_or_else(|| conversation_id(conv));
    if id.is_empty() {
        return Err(usage("--conversation: must not be empty"));
    }
    Ok(id)
}

/// Run `ctxpress compact`.
///
/// The input is streamed as `compress` streams it: one conversation at a
/// time is parsed, compacted and written to the output (held until the run
/// succeeds, spooled to a file past 8 MiB), so memory does not grow with the
/// input. The archive is written as each conversation is compacted, inside a
/// run marked in the archive ([`Run`]): a run that fails undoes its batches
/// before it exits, and one killed before its output appeared is undone by
/// the next `compact` on the archive (see [`settle`]).
pub fn run(a: &CompactArgs) -> Result<ExitCode> {
    let mut uses = vec![
        PathUse::read("INPUT", &a.input),
        PathUse::write("--archive", &a.archive),
    ];
    if let Some(c) = &a.config {
        uses.push(PathUse::read("--config", c));
    }
    if let Some(o) = &a.output {
        uses.push(PathUse::write("-o", o));
    }
    check_paths(&uses)?;
    let cfg = load_config(a)?;
    let compactor = Compactor::new(cfg).map_err(|e| usage(e.to_string()))?;
    let mut reader = Reader::open(&a.input)?;
    if reader.kind == Kind::Jsonl && a.conversation.is_some() {
        return Err(usage(
            "--conversation is for a single document: each JSONL line's `id` names its conversation",
        ));
    }
    if let Some(out) = a.output.as_deref().filter(|o| *o != "-") {
        let dir = Path::new(out)
            .parent()
            .filter(|d| !d.as_os_str().is_empty());
        if let Some(d) = dir.filter(|d| !d.is_dir()) {
            return Err(usage(format!("{out}: no such directory {}", d.display())));
        }
    }
    let stored = crate::open_sqlite(&a.archive)?;
    settle(&stored).with_context(|| format!("{}: finishing an earlier run", a.archive))?;
    let runtime = if compactor.is_async() {
        Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("starting the async runtime")?,
        )
    } else {
        None
    };
    let archive = Run::new(&stored);
    let done = compact_all(a, &compactor, &mut reader, &archive, runtime.as_ref()).and_then(
        |(mut out, rows)| {
            // The output is written (to its temporary file, synced) before
            // the run notes which file it renames into place, and appears
            // only after that: a run killed from here on is recognised by
            // the next one (that file in place: kept; else undone).
            out.prepare()?;
            archive.committing(&out)?;
            out.commit()?;
            Ok(rows)
        },
    );
    let rows = match done {
        Ok(rows) => rows,
        Err(e) => {
            if let Err(u) = archive.undo() {
                eprintln!(
                    "warning: {}: cannot undo this run's batches yet ({u}): the next `ctxpress compact` on it does",
                    a.archive
                );
            }
            return Err(e);
        }
    };
    if let Err(e) = archive.finish() {
        // The output is there; the next run sees it and drops the mark.
        eprintln!("warning: {}: cannot mark this run finished: {e}", a.archive);
    }
    if a.stats {
        eprint!("{}", table(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

/// Compact every conversation of `reader` in input order, writing each to
/// the output as it is done; the output is returned uncommitted.
fn compact_all(
    a: &CompactArgs,
    compactor: &Compactor,
    reader: &mut Reader,
    archive: &Run<'_>,
    runtime: Option<&tokio::runtime::Runtime>,
) -> Result<(Output, Vec<Row>)> {
    let mut out = Output::create(a.output.as_deref())?;
    if reader.bom() {
        out.write(BOM)?;
    }
    let name = reader.name.clone();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut rows = Vec::new();
    let mut piece = Vec::new();
    while let Some(p) = reader.next_piece()? {
        let (line, text, ending) = match p {
            Piece::Blank(raw) => {
                out.write(raw.as_bytes())?;
                continue;
            }
            Piece::Item { line, text, ending } => (line, text, ending),
        };
        let mut conv = parse_item(&name, line, &text)?;
        drop(text);
        let id = if reader.kind == Kind::Jsonl {
            let id = conversation_id(&conv);
            if let Some(first) = seen.insert(id.clone(), line) {
                return Err(usage(format!(
                    "{}:{line}: conversation `{id}` is also on line {first}: ids must be unique",
                    a.input
                )));
            }
            id
        } else {
            document_id(a, &conv)?
        };
        let tail = compactor.config().protected_tail;
        warn_if_continuing_elsewhere(archive.stored, &conv, &id, tail, &name, line)?;
        let mut r = match runtime {
            Some(rt) => rt.block_on(compactor.compress_async(&conv, &id, archive)),
            None => compactor.compress(&conv, &id, archive),
        };
        // The clip's recall handle (and its notes'), archived below.
        ctxpress::compactor::write_handles(&conv, &mut r, &ctxpress::core::tokens::Heuristic);
        if let Some(e) = &r.error {
            return Err(anyhow::anyhow!(
                "{name}:{line} ({id}): {e} (archive {})",
                a.archive
            ));
        }
        if r.compacted {
            // The originals, for `expand` (the records `compress --archive`
            // writes, indexed under the conversation's id for search).
            let records = ctxpress::core::archive::records(&conv, &r.history);
            if !records.is_empty() {
                archive
                    .put_originals(&id, records)
                    .with_context(|| format!("cannot write the archive {}", a.archive))?;
            }
        }
        let depth = archive
            .batches(&id)
            .map(|b| b.iter().map(|b| b.depth).max())
            .with_context(|| format!("{}: reading the batches", a.archive))?;
        rows.push(row(&id, &r, depth));
        conv = r.history;
        piece.clear();
        write_piece(&mut piece, &conv, ending);
        out.write(&piece)?;
    }
    Ok((out, rows))
}

/// Finish the runs of `compact` processes that are gone (killed, or failed
/// without undoing): a run whose output never appeared (it died before its
/// output was ready, or its output file is not the one it renamed into
/// place) is undone, so the archive holds the batches it had before and a
/// rerun compacts as a first run would; a run whose output is in place keeps
/// its batches. When that cannot be told (an output to stdout or a device),
/// the batches are kept: the output may refer to them, and keeping them
/// loses nothing (a rerun on the same input warns that they are there).
///
/// (An output renamed into place and then replaced by another program
/// before the run could drop its mark, a window of one small transaction,
/// counts as never appeared.)
fn settle(stored: &SqliteArchive) -> Result<(), ArchiveError> {
    let me = std::process::id();
    for p in stored.pending_runs()? {
        let note: Value = serde_json::from_str(&p.note).unwrap_or_default();
        let Some(pid) = note["pid"].as_u64().and_then(|p| u32::try_from(p).ok()) else {
            continue;
        };
        // A run still going (or, without /proc, one that may be) is left.
        if pid != me && crate::io::pid_alive(pid) != Some(false) {
            continue;
        }
        let appeared = match note["output"].as_str() {
            Some("file") => file_committed(&note),
            Some("stream") => true,
            _ => false,
        };
        if appeared {
            stored.finish_run(&p.token)?;
        } else {
            stored.undo_run(&p.token)?;
        }
    }
    Ok(())
}

/// Whether the output file of a run noted `note` is in place: the
/// destination is the temporary file it renamed (same device and inode).
/// (The temporary file itself is gone by now: `check_paths` removes those
/// of dead runs.)
fn file_committed(note: &Value) -> bool {
    let node = |v: &Value| Some((v.get(0)?.as_u64()?, v.get(1)?.as_u64()?));
    let dest = note["dest"]
        .as_str()
        .and_then(|p| std::fs::symlink_metadata(p).ok())
        .and_then(|md| crate::io::node(&md));
    dest.is_some() && dest == node(&note["node"])
}

/// The archive of one `compact` run: reads and writes go to the SQLite
/// archive, inside a run marked there ([`SqliteArchive::begin_run`]) at the
/// first write, with the batches of each conversation saved before the run
/// first changes them; [`Run::undo`] puts them back, [`Run::finish`] keeps
/// what was written once the output is committed. The originals records are
/// not undone: they are keyed by content, so a rerun writes the same ones.
struct Run<'a> {
    stored: &'a SqliteArchive,
    token: String,
    state: Mutex<RunState>,
}

#[derive(Default)]
struct RunState {
    /// The run is marked in the archive.
    begun: bool,
    /// The conversations whose batches are saved.
    saved: HashSet<String>,
}

fn poisoned<T>(_: T) -> ArchiveError {
    ArchiveError::Backend("lock poisoned".into())
}

impl<'a> Run<'a> {
    fn new(stored: &'a SqliteArchive) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Run {
            stored,
            token: format!("compact-{}-{nanos}", std::process::id()),
            state: Mutex::default(),
        }
    }

    fn note(output: &str) -> String {
        serde_json::json!({"pid": std::process::id(), "output": output}).to_string()
    }

    /// Mark the run (once), and save the batches of `conversation` (once)
    /// before it changes them.
    fn touch(&self, conversation: &str) -> Result<(), ArchiveError> {
        let mut s = self.state.lock().map_err(poisoned)?;
        if !s.begun {
            self.stored.begin_run(&self.token, &Self::note("pending"))?;
            s.begun = true;
        }
        if !s.saved.contains(conversation) {
            self.stored.save_batches(&self.token, conversation)?;
            s.saved.insert(conversation.to_string());
        }
        Ok(())
    }

    fn begun(&self) -> Result<bool, ArchiveError> {
        Ok(self.state.lock().map_err(poisoned)?.begun)
    }

    /// Write the originals records of `conversation` (for `expand`).
    fn put_originals(&self, conversation: &str, records: Vec<Record>) -> Result<(), ArchiveError> {
        self.stored.put_for(Some(conversation), &records)
    }

    /// Note, before `out` is committed, how to tell later whether it was.
    fn committing(&self, out: &Output) -> Result<(), ArchiveError> {
        if !self.begun()? {
            return Ok(());
        }
        let note = match out.file_identity() {
            Some((temp, dest, (dev, ino))) => serde_json::json!({
                "pid": std::process::id(),
                "output": "file",
                "temp": temp,
                "dest": dest,
                "node": [dev, ino],
            })
            .to_string(),
            None => Self::note("stream"),
        };
        self.stored.note_run(&self.token, &note)
    }

    /// Undo what the run wrote to the batches.
    fn undo(&self) -> Result<(), ArchiveError> {
        if !self.begun()? {
            return Ok(());
        }
        self.stored.undo_run(&self.token)
    }

    /// Keep what the run wrote.
    fn finish(&self) -> Result<(), ArchiveError> {
        if !self.begun()? {
            return Ok(());
        }
        self.stored.finish_run(&self.token)
    }
}

impl BatchArchive for Run<'_> {
    fn put_batches(&self, batches: &[SummaryBatch]) -> Result<(), ArchiveError> {
        for b in batches {
            self.touch(&b.conversation)?;
        }
        self.stored.put_batches(batches)
    }

    fn batches(&self, conversation: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        self.stored.batches(conversation)
    }

    fn read(&self, label: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        BatchArchive::read(self.stored, label)
    }

    fn replace(
        &self,
        conversation: &str,
        removed: &[String],
        added: SummaryBatch,
    ) -> Result<(), ArchiveError> {
        self.touch(conversation)?;
        self.stored.replace(conversation, removed, added)
    }
}

/// Warn when the archive already holds batches for `id` but the input is not
/// a compacted history (no clip-archive message after the system prompt):
/// the new batches follow the stored ones, which then show in its clip
/// message although they may cover the same messages (the same input
/// compacted twice, or another conversation with the same id).
fn warn_if_continuing_elsewhere(
    archive: &SqliteArchive,
    conv: &Conversation,
    id: &str,
    protected_tail: usize,
    name: &str,
    line: usize,
) -> Result<()> {
    let lead = ctxpress::compactor::clip_position(conv, protected_tail);
    let clipped = conv
        .messages
        .get(lead)
        .is_some_and(|m| is_clip_text(&m.text()));
    if clipped {
        return Ok(());
    }
    let n = archive
        .batches(id)
        .with_context(|| format!("reading the batches of {id}"))?
        .len();
    if n > 0 {
        let warning = format!(
            "warning: {name}:{line}: the archive already holds {n} batches of conversation `{id}` but this input has no [Context Summary] message: the new batches follow them (compact the previous output instead, or use another conversation id)"
        );
        eprintln!("{}", crate::io::safe(&warning));
    }
    Ok(())
}

/// One conversation's line of `--stats`.
struct Row {
    id: String,
    compacted: bool,
    folded: usize,
    added: usize,
    resummarized: usize,
    fallbacks: usize,
    depth: Option<u32>,
    before: usize,
    after: usize,
    note: Option<String>,
}

fn row(id: &str, r: &CompactionResult, depth: Option<u32>) -> Row {
    Row {
        // Shown in a terminal: escape sequences in it are written out.
        id: crate::io::safe(id).into_owned(),
        compacted: r.compacted,
        folded: r.messages_folded,
        added: r.batches_added.len(),
        resummarized: r.resummarized.len(),
        fallbacks: r.fallbacks,
        depth,
        before: r.tokens_before,
        after: r.tokens_after,
        note: (!r.compacted).then(|| r.notes.last().cloned()).flatten(),
    }
}

fn table(rows: &[Row]) -> String {
    let w = rows
        .iter()
        .map(|r| r.id.chars().count())
        .max()
        .unwrap_or(0)
        .max(12);
    let mut s = format!(
        "{:<w$} {:>7} {:>8} {:>13} {:>10} {:>6} {:>21}\n",
        "conversation", "folded", "batches", "resummarized", "fallbacks", "depth", "tokens"
    );
    let (mut before, mut after, mut added, mut folded) = (0, 0, 0, 0);
    for r in rows {
        let depth = r.depth.map_or("-".to_string(), |d| d.to_string());
        s.push_str(&format!(
            "{:<w$} {:>7} {:>8} {:>13} {:>10} {:>6} {:>21}\n",
            r.id,
            r.folded,
            r.added,
            r.resummarized,
            r.fallbacks,
            depth,
            format!("{} → {}", r.before, r.after),
        ));
        if let Some(n) = r.note.as_ref().filter(|_| !r.compacted) {
            s.push_str(&format!("    unchanged: {}\n", crate::io::safe(n)));
        }
        before += r.before;
        after += r.after;
        added += r.added;
        folded += r.folded;
    }
    s.push_str(&format!(
        "total: {} conversations ({} compacted), {folded} messages folded into {added} batches, {before} → {after} tokens (heuristic)\n",
        rows.len(),
        rows.iter().filter(|r| r.compacted).count(),
    ));
    s
}
