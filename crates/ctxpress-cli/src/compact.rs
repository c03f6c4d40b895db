//! `ctxpress compact`: compact now, as an agent's `/compact` does.
//!
//! Everything before the protected tail of each conversation is folded into
//! summary batches (the `compactor`, spec 003), whatever its size. The
//! SQLite archive at `--archive` is both the batch archive (batches persist
//! across runs; `ctxpress search` finds them with kind `batch`) and the
//! archive of originals (`ctxpress expand OUT --archive DB` restores the
//! input byte for byte, through the same provenance records that
//! `compress --archive` writes).

use crate::io::{Kind, Output, PathUse, check_paths, read_input};
use crate::usage;
use anyhow::{Context, Result};
use ctxpress::compactor::state::is_clip_text;
use ctxpress::compactor::{CompactionConfig, CompactionResult, Compactor};
use ctxpress::core::Archive;
use ctxpress::core::archive::content_hash;
use ctxpress::core::compaction::{BatchArchive, MemoryBatchArchive, SummaryBatch};
use ctxpress::core::{ArchiveError, Record};
use ctxpress::store::SqliteArchive;
use ctxpress::{Conversation, PipelineConfig};
use serde_json::{Map, Value};
use std::collections::HashSet;
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
    if let Some(path) = &a.config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("{path}: cannot read: {e}")))?;
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
    let what = a.config.as_deref().unwrap_or("compact");
    ctxpress::core::parse_params(ctxpress::compactor::NAME, &Value::Object(params))
        .map_err(|e| usage(format!("{what}: {e}")))
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

/// The conversation ids, one per input conversation.
fn conversation_ids(
    a: &CompactArgs,
    kind: Kind,
    items: &[(usize, Conversation)],
) -> Result<Vec<String>> {
    if kind == Kind::Jsonl {
        if a.conversation.is_some() {
            return Err(usage(
                "--conversation is for a single document: each JSONL line's `id` names its conversation",
            ));
        }
        let mut seen: std::collections::HashMap<String, usize> = Default::default();
        let mut ids = Vec::with_capacity(items.len());
        for (line, c) in items {
            let id = conversation_id(c);
            if let Some(first) = seen.insert(id.clone(), *line) {
                return Err(usage(format!(
                    "{}:{line}: conversation `{id}` is also on line {first}: ids must be unique",
                    a.input
                )));
            }
            ids.push(id);
        }
        return Ok(ids);
    }
    let id = a
        .conversation
        .clone()
        .or_else(|| items.first().and_then(|(_, c)| c.id()))
        .or_else(|| {
            Path::new(&a.input)
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|_| a.input != "-")
                .map(str::to_string)
        })
        .or_else(|| items.first().map(|(_, c)| conversation_id(c)))
        .unwrap_or_default();
    if id.is_empty() {
        return Err(usage("--conversation: must not be empty"));
    }
    Ok(vec![id])
}

/// Run `ctxpress compact`.
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
    let mut input = read_input(&a.input)?;
    let ids = conversation_ids(a, input.kind, &input.items)?;
    if let Some(out) = a.output.as_deref().filter(|o| *o != "-") {
        let dir = Path::new(out)
            .parent()
            .filter(|d| !d.as_os_str().is_empty());
        if let Some(d) = dir.filter(|d| !d.is_dir()) {
            return Err(usage(format!("{out}: no such directory {}", d.display())));
        }
    }
    let stored = crate::open_sqlite(&a.archive)?;
    let archive = Staged::new(&stored);
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
    let mut rows = Vec::with_capacity(ids.len());
    for ((line, conv), id) in input.items.iter_mut().zip(&ids) {
        let tail = compactor.config().protected_tail;
        warn_if_continuing_elsewhere(&stored, conv, id, tail, &input.name, *line)?;
        let r = match &runtime {
            Some(rt) => rt.block_on(compactor.compress_async(conv, id, &archive)),
            None => compactor.compress(conv, id, &archive),
        };
        if let Some(e) = &r.error {
            return Err(anyhow::anyhow!(
                "{}:{line} ({id}): {e} (archive {})",
                input.name,
                a.archive
            ));
        }
        if r.compacted {
            // The originals, for `expand` (the records `compress --archive`
            // writes, indexed under the conversation's id for search).
            let records = ctxpress::core::archive::records(conv, &r.history);
            if !records.is_empty() {
                archive.put_originals(id, records)?;
            }
        }
        let depth = archive
            .batches(id)
            .map(|b| b.iter().map(|b| b.depth).max())
            .with_context(|| format!("{}: reading the batches", a.archive))?;
        rows.push(row(id, &r, depth));
        *conv = r.history;
    }
    let convs: Vec<&Conversation> = input.items.iter().map(|(_, c)| c).collect();
    // The output is written (to its temporary file, synced) before the
    // archive, and appears only once the archive holds its batches and
    // originals: a full disk under the output leaves the archive as it was
    // (a rerun then compacts as if nothing happened), and no output claims
    // batches that are not stored.
    let mut out = Output::create(a.output.as_deref())?;
    out.write(&input.render(&convs))?;
    out.prepare()?;
    archive
        .apply()
        .with_context(|| format!("cannot write the archive {}", a.archive))?;
    out.commit()?;
    if a.stats {
        eprint!("{}", table(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

/// One archive write of a `compact` run, held until its output is ready.
enum Op {
    Put(Vec<SummaryBatch>),
    Replace(String, Vec<String>, SummaryBatch),
    Originals(String, Vec<Record>),
}

/// The archive of one `compact` run: reads see the stored batches plus this
/// run's writes; the writes are held (the batches of each conversation the
/// run touches are copied into memory first) and made, in order, by
/// [`Staged::apply`] once the output is ready. So a run that fails before
/// (a full disk under the output) leaves the archive as it was.
struct Staged<'a> {
    stored: &'a SqliteArchive,
    view: MemoryBatchArchive,
    seeded: Mutex<HashSet<String>>,
    ops: Mutex<Vec<Op>>,
}

fn poisoned<T>(_: T) -> ArchiveError {
    ArchiveError::Backend("lock poisoned".into())
}

impl<'a> Staged<'a> {
    fn new(stored: &'a SqliteArchive) -> Self {
        Staged {
            stored,
            view: MemoryBatchArchive::new(),
            seeded: Mutex::default(),
            ops: Mutex::default(),
        }
    }

    /// Copy the stored batches of `conversation` into the view, once.
    fn seed(&self, conversation: &str) -> Result<(), ArchiveError> {
        let mut seeded = self.seeded.lock().map_err(poisoned)?;
        if seeded.insert(conversation.to_string()) {
            self.view.put_batches(&self.stored.batches(conversation)?)?;
        }
        Ok(())
    }

    fn hold(&self, op: Op) -> Result<(), ArchiveError> {
        self.ops.lock().map_err(poisoned)?.push(op);
        Ok(())
    }

    /// Hold the originals records of `conversation` (for `expand`).
    fn put_originals(&self, conversation: &str, records: Vec<Record>) -> Result<(), ArchiveError> {
        self.hold(Op::Originals(conversation.to_string(), records))
    }

    /// Make the held writes, in the order they were made (each one
    /// transaction, as it would have been).
    fn apply(&self) -> Result<(), ArchiveError> {
        let ops = std::mem::take(&mut *self.ops.lock().map_err(poisoned)?);
        for op in ops {
            match op {
                Op::Put(b) => self.stored.put_batches(&b)?,
                Op::Replace(c, removed, added) => self.stored.replace(&c, &removed, added)?,
                Op::Originals(c, r) => self.stored.put_for(Some(&c), &r)?,
            }
        }
        Ok(())
    }
}

impl BatchArchive for Staged<'_> {
    fn put_batches(&self, batches: &[SummaryBatch]) -> Result<(), ArchiveError> {
        for b in batches {
            self.seed(&b.conversation)?;
        }
        self.view.put_batches(batches)?;
        self.hold(Op::Put(batches.to_vec()))
    }

    fn batches(&self, conversation: &str) -> Result<Vec<SummaryBatch>, ArchiveError> {
        self.seed(conversation)?;
        self.view.batches(conversation)
    }

    fn read(&self, label: &str) -> Result<Option<SummaryBatch>, ArchiveError> {
        if let Some(b) = self.view.read(label)? {
            return Ok(Some(b));
        }
        // Stored, unless this run removed it from a conversation it holds.
        let seeded = self.seeded.lock().map_err(poisoned)?;
        Ok(BatchArchive::read(self.stored, label)?.filter(|b| !seeded.contains(&b.conversation)))
    }

    fn replace(
        &self,
        conversation: &str,
        removed: &[String],
        added: SummaryBatch,
    ) -> Result<(), ArchiveError> {
        self.seed(conversation)?;
        self.view.replace(conversation, removed, added.clone())?;
        self.hold(Op::Replace(
            conversation.to_string(),
            removed.to_vec(),
            added,
        ))
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
        eprintln!(
            "warning: {name}:{line}: the archive already holds {n} batches of conversation `{id}` but this input has no [Context Summary] message: the new batches follow them (compact the previous output instead, or use another conversation id)"
        );
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
        id: id.to_string(),
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
            s.push_str(&format!("    unchanged: {n}\n"));
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
