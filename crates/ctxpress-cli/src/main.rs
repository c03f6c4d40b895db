//! `ctxpress`: compress, expand, validate and inspect LLM conversation histories.
//!
//! Commands: compress (default preset `agent`; `--budget`, `--window`,
//! `--trigger`, `--target`, `--tokenizer` are one `LimitArgs`, shared with
//! `serve`; exit 3 when a conversation cannot fit), expand, validate, stats,
//! strategies (`--show NAME`: every parameter with its type and default as a
//! `[[stages]]` table, each under its doc line), presets, serve (`serve.rs`),
//! search (`search.rs`: ranked hits from the archive's FTS5 index, a hit under
//! a recall handle shown with it; exit 1 with no match), recall (`recall.rs`;
//! exit 1 when the handle is unknown), mcp (`mcp.rs`, cargo feature `mcp`),
//! compact (`compact.rs`). The LLM flags (`--llm-url`, `--llm-model`,
//! `--llm-allow-insecure-http`) are one `LlmArgs`. `batch.rs` streams a JSONL
//! batch through `--jobs N` workers; `io.rs` reads byte-exact JSONL and writes
//! through checked paths; `trace.rs` is `--trace`. `tests/it/readme.rs` runs
//! the README's commands and checks the synopsis' flags.

mod batch;
mod compact;
mod io;
mod mcp;
mod recall;
mod search;
mod serve;
// `Trace::print` is unused now: a batch prints the rendered traces in input order.
#[allow(dead_code)]
mod trace;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use ctxpress::core::StageStatus;
use ctxpress::core::tokens::counter_named;
use ctxpress::{Compressor, Conversation, PipelineConfig, Report};
use io::{InputError, Kind, Output, PathUse, Reader, check_paths, parse_item, print_out};
use serde_json::{Value, json};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

/// `println!` that returns the error (a closed stdout among them) instead of
/// panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        print_out(&format!("{}\n", format_args!($($arg)*)))?
    };
}

#[derive(Parser)]
#[command(
    name = "ctxpress",
    version,
    about = "Shrink LLM conversation and agent histories to fit a context window"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compress conversations (.json document or .jsonl batch; `-` for stdin).
    #[command(
        after_help = "Exit codes: 0 done (every conversation fits its budget), 2 bad input or usage \
                      (nothing written), 3 some conversation cannot fit: its protected part alone \
                      is over the budget (the output is written, everything else compressed)."
    )]
    Compress(Box<CompressArgs>),
    /// Compact now, as an agent's `/compact` does: fold everything before the
    /// protected tail into summary batches archived in DB.
    Compact(Box<compact::CompactArgs>),
    /// Restore the originals of compressed conversations from an archive.
    ///
    /// Exit 1, writing nothing, when messages ctxpress wrote (summaries,
    /// dedup references, evict notes, [Context Summary ...) remain that the
    /// archive cannot restore (another archive?); --partial writes them anyway.
    Expand {
        /// Compressed input.
        input: String,
        /// The archive written by `compress --archive` or `compact`.
        #[arg(long)]
        archive: String,
        /// Output file (default stdout).
        #[arg(short, long)]
        output: Option<String>,
        /// Write what the archive restores even when some compressed messages
        /// cannot be restored (a warning says how many); exit 0.
        #[arg(long)]
        partial: bool,
        /// Worker threads for a JSONL batch [default: the available cores];
        /// the output is the same for any N.
        #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        jobs: Option<u32>,
    },
    /// Search the archived originals (ranked); exit 1 when nothing matches.
    Search(search::SearchArgs),
    /// Print the originals a handle in a compressed history stands for
    /// (`[summary#h7f3a2c91d0: ...]`); exit 1 when the archive does not
    /// hold it.
    Recall(recall::RecallArgs),
    /// Serve the archive to a model over the Model Context Protocol (tools
    /// search_history, recall, history_outline): on stdio until stdin
    /// closes, or streamable HTTP at ADDR/mcp with --listen.
    Mcp(mcp::McpArgs),
    /// Run a compressing proxy in front of an OpenAI- or Anthropic-compatible
    /// API: point the agent's base URL at it.
    #[command(
        override_usage = "ctxpress serve --upstream <URL> (--window <TOKENS> | --budget <TOKENS>) [OPTIONS]"
    )]
    Serve(Box<serve::ServeArgs>),
    /// Check tool-call pairing and roles; exit 1 when violations are found.
    Validate {
        /// Input file or `-`.
        #[arg(default_value = "-")]
        input: String,
    },
    /// Print each message's tier, reasons and preservation decision as JSON lines.
    Classify {
        /// Input file or `-`.
        #[arg(default_value = "-")]
        input: String,
        /// Classifier parameters as TOML (e.g. `recency_window = 6`).
        #[arg(long, value_name = "FILE")]
        config: Option<String>,
    },
    /// Messages, tokens by role and tool-output share.
    Stats {
        /// Input file or `-`.
        #[arg(default_value = "-")]
        input: String,
        /// Token counter: heuristic, o200k_base, cl100k_base.
        #[arg(long, default_value = "heuristic")]
        tokenizer: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the registered strategies.
    Strategies {
        /// Print this strategy's parameters with their types, defaults and
        /// doc lines, as a `[[stages]]` table to start a configuration from.
        #[arg(long, value_name = "NAME")]
        show: Option<String>,
    },
    /// List the presets, or print one as TOML.
    ///
    /// Under a budget (--budget, --window) that a preset's stages cannot
    /// reach, the ladder goes further, whatever the preset: old tool results,
    /// old assistant and then old user messages summarized, the oldest
    /// messages archived behind a session ledger. `--show NAME` says what
    /// each keeps.
    Presets {
        /// Print this preset's configuration.
        #[arg(long)]
        show: Option<String>,
    },
}

#[derive(clap::Args)]
struct CompressArgs {
    /// Input file (.json or .jsonl) or `-` for stdin.
    #[arg(default_value = "-")]
    input: String,
    /// Output file (default stdout). Written atomically; never the input.
    #[arg(short, long)]
    output: Option<String>,
    /// Preset name (see `ctxpress presets`) [default: agent].
    #[arg(long, conflicts_with = "config")]
    preset: Option<String>,
    /// Pipeline configuration file (TOML or JSON).
    #[arg(long)]
    config: Option<String>,
    #[command(flatten)]
    limits: LimitArgs,
    /// SQLite archive of originals, for `ctxpress expand`.
    #[arg(long, value_name = "DB")]
    archive: Option<String>,
    #[command(flatten)]
    llm: LlmArgs,
    /// Print a per-stage table to stderr.
    #[arg(long)]
    stats: bool,
    /// Write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<String>,
    /// Print to stderr, for each message, its classifier decision, the rule
    /// that made it, and what became of it (kept, summarized, merged, ...).
    #[arg(long)]
    trace: bool,
    /// Worker threads for a JSONL batch [default: the available cores]. The
    /// output is the same for any N, in input order; 1 runs on one thread.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Compress(a) => compress(*a),
        Cmd::Compact(a) => compact::run(&a),
        Cmd::Expand {
            input,
            archive,
            output,
            partial,
            jobs,
        } => expand(&input, &archive, output.as_deref(), partial, jobs),
        Cmd::Search(a) => search::run(&a),
        Cmd::Recall(a) => recall::run(&a),
        Cmd::Mcp(a) => mcp::run(&a),
        Cmd::Serve(a) => serve::run(&a),
        Cmd::Validate { input } => validate(&input),
        Cmd::Classify { input, config } => classify(&input, config.as_deref()),
        Cmd::Stats {
            input,
            tokenizer,
            json,
        } => stats(&input, &tokenizer, json),
        Cmd::Strategies { show } => strategies(show.as_deref()),
        Cmd::Presets { show } => presets(show.as_deref()),
    };
    match r {
        Ok(code) => code,
        // The reader of stdout went away (`ctxpress ... | head`): stop
        // quietly, as Unix tools do.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", io::safe_lines(&format!("error: {e:#}")));
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

fn load_config(a: &CompressArgs) -> Result<PipelineConfig> {
    let mut cfg = match (&a.preset, &a.config) {
        (_, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("{path}: cannot read: {e}")))?;
            PipelineConfig::parse_file(path, &text).map_err(|e| usage(e.to_string()))?
        }
        (Some(name), None) => ctxpress::preset(name).map_err(|e| usage(e.to_string()))?,
        (None, None) => ctxpress::preset(DEFAULT_PRESET).map_err(|e| usage(e.to_string()))?,
    };
    a.limits.apply(&mut cfg)?;
    if a.llm.any() {
        a.llm.apply(cfg.llm.get_or_insert_with(Default::default));
    }
    Ok(cfg)
}

/// The budget, window and token-counter flags `compress` and `serve` share.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct LimitArgs {
    /// Token budget for each conversation: one at or under it is left as
    /// it is; one over it is compressed, oldest first, until it fits (or
    /// until only its protected part is left).
    #[arg(long, value_name = "TOKENS")]
    pub(crate) budget: Option<usize>,
    /// The model's context window in tokens: compress a conversation over
    /// --trigger × WINDOW down to --target × WINDOW (with --budget too, the
    /// lower of each).
    #[arg(long, value_name = "TOKENS")]
    pub(crate) window: Option<usize>,
    /// Share of --window above which a conversation is compressed [default: 0.70].
    #[arg(long, value_name = "SHARE", requires = "window")]
    pub(crate) trigger: Option<f64>,
    /// Share of --window a conversation is compressed down to [default: 0.40].
    #[arg(long, value_name = "SHARE", requires = "window")]
    pub(crate) target: Option<f64>,
    /// Token counter: heuristic, o200k_base, cl100k_base.
    #[arg(long)]
    pub(crate) tokenizer: Option<String>,
}

impl LimitArgs {
    /// Put the flags into `cfg` and check the window they make.
    pub(crate) fn apply(&self, cfg: &mut PipelineConfig) -> Result<()> {
        if let Some(t) = &self.tokenizer {
            counter_named(t).map_err(|e| usage(format!("--tokenizer: {e}")))?;
            cfg.tokenizer = Some(t.clone());
        }
        if let Some(b) = self.budget {
            cfg.window.budget = Some(b);
        }
        if let Some(w) = self.window {
            cfg.window.size = Some(w);
        }
        if let Some(t) = self.trigger {
            cfg.window.trigger = t;
        }
        if let Some(t) = self.target {
            cfg.window.target = t;
        }
        cfg.window.validate().map_err(|e| {
            usage(
                e.to_string()
                    .replace("`window.size`", "`--window`")
                    .replace("`window.", "`--"),
            )
        })
    }
}

/// The LLM flags `compress` and `compact` share.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct LlmArgs {
    /// OpenAI-compatible endpoint for summarizing stages (key from
    /// $OPENAI_API_KEY); without one, summaries are extractive.
    #[arg(long, value_name = "URL")]
    pub(crate) llm_url: Option<String>,
    /// Model name for --llm-url.
    #[arg(long, value_name = "NAME")]
    pub(crate) llm_model: Option<String>,
    /// Allow sending the API key over plain http to a host that is not
    /// loopback (refused otherwise).
    #[arg(long)]
    pub(crate) llm_allow_insecure_http: bool,
}

impl LlmArgs {
    /// True when any LLM flag is given.
    pub(crate) fn any(&self) -> bool {
        self.llm_url.is_some() || self.llm_model.is_some() || self.llm_allow_insecure_http
    }

    /// Put the flags into an `[llm]` table.
    pub(crate) fn apply(&self, llm: &mut serde_json::Map<String, Value>) {
        if let Some(u) = &self.llm_url {
            llm.insert("base_url".into(), Value::String(u.clone()));
        }
        if let Some(m) = &self.llm_model {
            llm.insert("model".into(), Value::String(m.clone()));
        }
        if self.llm_allow_insecure_http {
            llm.insert("allow_insecure_http".into(), Value::Bool(true));
        }
    }
}

/// The preset used when neither --preset nor --config is given.
const DEFAULT_PRESET: &str = "agent";

/// Exit code when a conversation cannot fit its budget (the output is still
/// written: everything that could be compressed was).
const EXIT_DOES_NOT_FIT: u8 = 3;

fn open_archive(path: &str) -> Result<Arc<dyn ctxpress::Archive>> {
    Ok(Arc::new(open_sqlite(path)?))
}

/// The archive at `path` for a command that only reads one (`search`,
/// `recall`, `mcp`): a folder or a missing file is a usage error (exit 2),
/// and nothing is created.
pub(crate) fn open_existing_archive(path: &str) -> Result<ctxpress::store::SqliteArchive> {
    let p = std::path::Path::new(path);
    if p.is_dir() {
        return Err(usage(format!("{path}: is a folder, not an archive")));
    }
    if !p.is_file() {
        return Err(usage(format!("{path}: no such archive")));
    }
    open_sqlite(path)
}

/// Open (creating when missing) the SQLite archive at `path`. The error
/// names the file (exit 2). When it cannot be opened, files this attempt
/// created (the archive and its `-wal`, `-shm`, `-journal` beside it) are
/// removed, so a failed run leaves nothing behind; files that were there
/// are never touched.
pub(crate) fn open_sqlite(path: &str) -> Result<ctxpress::store::SqliteArchive> {
    // A device or a folder is no archive: SQLite would put its journal
    // beside it (`/dev/full-journal`) before failing.
    if let Ok(md) = std::fs::metadata(path)
        && !md.is_file()
    {
        let what = if md.is_dir() {
            "it is a folder"
        } else {
            "it is not a regular file"
        };
        return Err(usage(format!("{path}: cannot open archive: {what}")));
    }
    let files: Vec<String> = ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|ext| format!("{path}{ext}"))
        .collect();
    let existed: Vec<bool> = files
        .iter()
        .map(|f| std::fs::symlink_metadata(f).is_ok())
        .collect();
    ctxpress::store::SqliteArchive::open(path).map_err(|e| {
        if !existed[0] {
            for (f, was) in files.iter().zip(&existed) {
                if !was {
                    let _ = std::fs::remove_file(f);
                }
            }
        }
        // Every store error names the file.
        usage(e.to_string())
    })
}

/// The context of a failed archive write: the input position and the
/// archive, so that a full disk or a read-only archive is named.
fn archive_write(name: &str, line: usize, archive: &str) -> String {
    format!("{name}:{line}: cannot write the archive {archive}")
}

/// The paths `compress` reads and writes, checked before anything is.
fn compress_paths(a: &CompressArgs) -> Vec<PathUse> {
    let mut uses = vec![PathUse::read("INPUT", &a.input)];
    if let Some(c) = &a.config {
        uses.push(PathUse::read("--config", c));
    }
    if let Some(d) = &a.archive {
        uses.push(PathUse::write("--archive", d));
    }
    uses.push(PathUse::write("-o", a.output.as_deref().unwrap_or("-")));
    if let Some(s) = &a.stats_json {
        uses.push(PathUse::write("--stats-json", s));
    }
    uses
}

/// What a worker made of one conversation.
struct Compressed {
    /// The conversation written out (without its line ending).
    bytes: Vec<u8>,
    /// Input bytes of the conversation (for progress).
    in_bytes: usize,
    report: Report,
    /// Why it does not fit its budget, when it does not.
    misfit: Option<String>,
    /// `--trace` output.
    trace: Option<String>,
    /// Its archive writes, made in input order by the emitting thread.
    held: batch::Held,
}

/// The first conversations that do not fit (five are shown) and how many.
#[derive(Default)]
struct Misfits {
    shown: Vec<String>,
    count: usize,
}

fn compress(a: CompressArgs) -> Result<ExitCode> {
    check_paths(&compress_paths(&a))?;
    let cfg = load_config(&a)?;
    let mut reader = Reader::open(&a.input)?;
    let archive = a
        .archive
        .as_deref()
        .map(open_archive)
        .transpose()?
        .map(|inner| Arc::new(batch::HeldArchive::new(inner)));
    let compressor = Compressor::from_config(&cfg)
        .map_err(|e| usage(e.to_string()))?
        .with_archive(archive.clone().map(|h| h as Arc<dyn ctxpress::Archive>));
    let runtime = if compressor.needs_async() {
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
    let jobs = match reader.kind {
        Kind::Document => 1,
        Kind::Jsonl => batch::jobs(a.jobs.map(|n| n as usize)),
    };
    let mut output = Output::create(a.output.as_deref())?;
    if reader.bom() {
        output.write(io::BOM)?;
    }
    let bar = progress(&reader);
    let name = reader.name.clone();
    let work = |line: usize, text: String| -> Result<Compressed> {
        let in_bytes = text.len();
        let mut conv = parse_item(&name, line, &text)?;
        drop(text);
        let trace = a.trace.then(|| trace::Trace::start(&conv));
        let (r, held) = batch::HeldArchive::hold(|| match &runtime {
            Some(rt) => rt.block_on(compressor.compress_async(&mut conv)),
            None => compressor.compress(&mut conv),
        });
        let r = r.with_context(|| format!("{name}:{line}"))?;
        let id = || conv.id().map(|i| format!(" ({i})")).unwrap_or_default();
        let trace = trace.map(|t| t.render(&conv, &format!("{name}:{line}{}", id())));
        let misfit = r.budget.as_ref().filter(|b| !b.fits).map(|b| {
            format!(
                "{name}:{line}{}: {} tokens, {} over the target of {} (its protected messages and their tool results alone are {} tokens)",
                id(),
                b.tokens_after,
                b.over_by,
                b.target,
                b.protected_tokens
            )
        });
        let mut bytes = Vec::new();
        conv.write_to(&mut bytes)
            .expect("writing to a Vec cannot fail");
        Ok(Compressed {
            bytes,
            in_bytes,
            report: r,
            misfit,
            trace,
            held,
        })
    };
    let mut total = Report::default();
    let mut misfits = Misfits::default();
    let mut conversations = 0usize;
    batch::run(&mut reader, jobs, work, |piece| {
        match piece {
            batch::Out::Blank(raw) => output.write(raw.as_bytes())?,
            batch::Out::Item {
                line,
                ending,
                value: c,
            } => {
                if let Some(arch) = &archive {
                    arch.replay(c.held).with_context(|| {
                        archive_write(&name, line, a.archive.as_deref().unwrap_or_default())
                    })?;
                }
                if let Some(t) = &c.trace {
                    eprint!("{t}");
                }
                output.write(&c.bytes)?;
                output.write(ending.as_bytes())?;
                if let Some(m) = c.misfit {
                    if misfits.shown.len() < 5 {
                        misfits.shown.push(m);
                    }
                    misfits.count += 1;
                }
                total.merge(&c.report);
                conversations += 1;
                if let Some(b) = &bar {
                    b.inc((c.in_bytes + ending.len()) as u64);
                }
            }
        }
        Ok(())
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    // The report is written (to its temporary file) before the output is
    // committed, so a full disk under either fails the run with neither
    // written; only a failure of the last step (a rename, a device) can
    // leave the output without its report, and the error says so.
    let report = match &a.stats_json {
        Some(p) => {
            let v = json!({ "conversations": conversations, "input_bytes": reader.bytes(), "jobs": jobs, "peak_rss_bytes": peak_rss(), "ratio": total.ratio(), "fits": total.budget.as_ref().map(|b| b.fits), "statistics": ctxpress::statistics(&total), "report": total });
            let mut o = Output::create(Some(p))?;
            o.write(serde_json::to_string_pretty(&v)?.as_bytes())?;
            o.prepare()?;
            Some(o)
        }
        None => None,
    };
    output.commit()?;
    if let Some(o) = report {
        o.commit()
            .context("the output was written, its --stats-json report was not")?;
    }
    if a.stats {
        eprint!("{}", stats_table(&total, conversations));
    }
    if misfits.count == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    for m in &misfits.shown {
        eprintln!("does not fit: {}", io::safe(m));
    }
    if misfits.count > 5 {
        eprintln!("... and {} more", misfits.count - 5);
    }
    eprintln!(
        "error: {} of {conversations} conversations do not fit the budget (output written; exit {EXIT_DOES_NOT_FIT})",
        misfits.count,
    );
    Ok(ExitCode::from(EXIT_DOES_NOT_FIT))
}

/// The process's peak resident set size in bytes (`VmHWM` of
/// `/proc/self/status`; `None` where there is no such file).
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = l
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// A progress bar on a terminal: over the input's bytes when its size is
/// known, else a count of conversations.
fn progress(reader: &Reader) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() || reader.kind == Kind::Document {
        return None;
    }
    let (b, template) = match reader.size {
        Some(n) => (
            indicatif::ProgressBar::new(n),
            "{bar:40} {bytes}/{total_bytes} {elapsed}",
        ),
        None => (indicatif::ProgressBar::no_length(), "{bytes} {elapsed}"),
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        b.set_style(style);
    }
    Some(b)
}

/// The `--stats` table of a run over `conversations` conversations: one
/// row per stage and ladder step, columns aligned whatever the names, then
/// the ladder's rungs, the total and the budget. Each row says how many
/// conversations it counts: with a budget, the stages run only on those
/// over the trigger and a ladder step only on those its rung ran on, while
/// the total counts all. A stage that ran and left its conversations the
/// same size is `unchanged`; counters that are zero are not printed. The
/// time column is the last one, so that a test can mask it.
fn stats_table(r: &Report, conversations: usize) -> String {
    /// One row's cells and the lines printed under it (counters, a reason).
    struct Row {
        cells: [String; 7],
        notes: Vec<String>,
    }
    let row = |name: &str,
               status: &str,
               convs: usize,
               (mb, ma): (usize, usize),
               (tb, ta): (usize, usize),
               (cb, ca): (usize, usize),
               us: u128| {
        let ratio = if ca == 0 { 1.0 } else { cb as f64 / ca as f64 };
        Row {
            cells: [
                name.to_string(),
                status.to_string(),
                convs.to_string(),
                format!("{mb} → {ma}"),
                format!("{tb} → {ta}"),
                format!("{ratio:.2}"),
                format!("{:.1}ms", us as f64 / 1000.0),
            ],
            notes: Vec::new(),
        }
    };
    let budget = r.budget.as_ref();
    // The conversations a stage row counts: a ladder step's (`rung:stage`)
    // are its rung's, the stages' those over the trigger.
    let counted = |name: &str| match (budget, name.split_once(':')) {
        (Some(b), Some((rung, _))) => b
            .rungs
            .iter()
            .find(|g| g.name == rung)
            .map_or(0, |g| g.conversations),
        (Some(b), None) => b.triggered,
        (None, _) => conversations,
    };
    let mut rows: Vec<Row> = Vec::new();
    for st in &r.stages {
        let same = st.messages_before == st.messages_after
            && st.tokens_before == st.tokens_after
            && st.chars_before == st.chars_after;
        let status = match &st.status {
            StageStatus::Applied if same => "unchanged",
            StageStatus::Applied => "applied",
            StageStatus::Reverted(_) => "reverted",
            StageStatus::Failed(_) => "failed",
            StageStatus::Skipped(_) => "skipped",
        };
        let mut x = row(
            &st.name,
            status,
            counted(&st.name),
            (st.messages_before, st.messages_after),
            (st.tokens_before, st.tokens_after),
            (st.chars_before, st.chars_after),
            st.micros,
        );
        let counters: Vec<String> = st
            .outcome
            .counters
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if !counters.is_empty() {
            x.notes.push(counters.join(", "));
        }
        if let StageStatus::Reverted(why) | StageStatus::Failed(why) | StageStatus::Skipped(why) =
            &st.status
        {
            x.notes.push(why.clone());
        }
        rows.push(x);
    }
    let total = row(
        "total",
        "",
        conversations,
        (r.messages_before, r.messages_after),
        (r.tokens_before, r.tokens_after),
        (r.chars_before, r.chars_after),
        r.micros,
    );
    let head = [
        "stage",
        "status",
        "conversations",
        "messages",
        "tokens",
        "ratio",
        "time",
    ];
    let mut w = head.map(|h| h.chars().count());
    for x in rows.iter().chain(std::iter::once(&total)) {
        for (w, c) in w.iter_mut().zip(&x.cells) {
            *w = (*w).max(c.chars().count());
        }
    }
    // Names and statuses to the left, figures to the right; padded by
    // chars (`{:>N}` counts the arrows as one each).
    let line = |cells: [&str; 7]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(w).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            if i < 2 {
                l.push_str(&format!("{c:<w$}"));
            } else {
                l.push_str(&format!("{c:>w$}"));
            }
        }
        format!("{}\n", l.trim_end())
    };
    let mut s = line(head);
    for x in &rows {
        s.push_str(&line(x.cells.each_ref().map(String::as_str)));
        for n in &x.notes {
            s.push_str(&format!("    {n}\n"));
        }
    }
    if let Some(b) = budget {
        let name_w = b.rungs.iter().map(|g| g.name.len()).max().unwrap_or(0);
        for g in &b.rungs {
            let plural = |n: usize, one: &str, many: &str| {
                format!("{n} {}", if n == 1 { one } else { many })
            };
            let mut parts = vec![plural(g.conversations, "conversation", "conversations")];
            for (n, one, many) in [
                (
                    g.messages_changed,
                    "message rewritten",
                    "messages rewritten",
                ),
                (g.messages_removed, "message removed", "messages removed"),
                (g.tokens_removed, "token removed", "tokens removed"),
            ] {
                if n > 0 {
                    parts.push(plural(n, one, many));
                }
            }
            if parts.len() == 1 {
                parts.push("nothing removed".to_string());
            }
            s.push_str(&format!(
                "ladder {:<name_w$}  {}\n",
                g.name,
                parts.join(", ")
            ));
        }
    }
    s.push_str(&line(total.cells.each_ref().map(String::as_str)));
    let stats: Vec<String> = ctxpress::statistics(r)
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if !stats.is_empty() {
        s.push_str(&format!("statistics: {}\n", stats.join(", ")));
    }
    if let Some(b) = budget {
        s.push_str(&format!(
            "budget: trigger {} / target {} tokens ({}): {} of {} conversations over the trigger (the stages ran on those); {} of {} fit{}\n",
            b.trigger,
            b.target,
            b.counter,
            b.triggered,
            b.conversations,
            b.fitting,
            b.conversations,
            if b.fits {
                String::new()
            } else {
                format!(" ({} tokens over in total)", b.over_by)
            }
        ));
    }
    s
}

/// Exit code of `expand` when compressed messages remain that the archive
/// cannot restore (nothing is written without --partial).
const EXIT_NOT_RESTORED: u8 = 1;

/// What a worker made of one compressed conversation.
struct Expanded {
    /// The conversation expanded and written out (without its line ending).
    bytes: Vec<u8>,
    /// Its id, when compressed messages are left in it.
    id: Option<String>,
    /// Positions of the compressed messages left (none when all restored).
    left: Vec<usize>,
}

fn expand(
    input: &str,
    archive: &str,
    output: Option<&str>,
    partial: bool,
    jobs: Option<u32>,
) -> Result<ExitCode> {
    let mut uses = vec![
        PathUse::read("INPUT", input),
        PathUse::write("--archive", archive),
    ];
    if let Some(o) = output {
        uses.push(PathUse::write("-o", o));
    }
    check_paths(&uses)?;
    if !std::path::Path::new(archive).exists() {
        return Err(usage(format!("{archive}: no such archive")));
    }
    let mut reader = Reader::open(input)?;
    let arch = open_archive(archive)?;
    let jobs = match reader.kind {
        Kind::Document => 1,
        Kind::Jsonl => batch::jobs(jobs.map(|n| n as usize)),
    };
    let mut out = Output::create(output)?;
    if reader.bom() {
        out.write(io::BOM)?;
    }
    let name = reader.name.clone();
    let work = |line: usize, text: String| -> Result<Expanded> {
        let c = parse_item(&name, line, &text)?;
        drop(text);
        let e = ctxpress::expand(&c, arch.as_ref())
            .with_context(|| format!("{name}:{line}: cannot read the archive {archive}"))?;
        drop(c);
        let left = ctxpress::unrestored(&e);
        let mut bytes = Vec::new();
        e.write_to(&mut bytes)
            .expect("writing to a Vec cannot fail");
        Ok(Expanded {
            bytes,
            id: if left.is_empty() { None } else { e.id() },
            left,
        })
    };
    // (line, conversation id, positions of compressed messages left): the
    // first five conversations, then counts.
    let mut shown: Vec<(usize, Option<String>, Vec<usize>)> = Vec::new();
    let (mut left_convs, mut left_msgs, mut conversations) = (0usize, 0usize, 0usize);
    batch::run(&mut reader, jobs, work, |piece| {
        match piece {
            batch::Out::Blank(raw) => out.write(raw.as_bytes())?,
            batch::Out::Item {
                line,
                ending,
                value: e,
            } => {
                out.write(&e.bytes)?;
                out.write(ending.as_bytes())?;
                conversations += 1;
                if !e.left.is_empty() {
                    left_convs += 1;
                    left_msgs += e.left.len();
                    if shown.len() < 5 {
                        shown.push((line, e.id, e.left));
                    }
                }
            }
        }
        Ok(())
    })?;
    if left_convs > 0 {
        for (line, id, pos) in &shown {
            let id = id.as_ref().map(|i| format!(" ({i})")).unwrap_or_default();
            let listed: Vec<String> = pos
                .iter()
                .take(8)
                .map(|p| format!("messages[{p}]"))
                .collect();
            let more = if pos.len() > 8 { ", ..." } else { "" };
            let line = format!(
                "not restored: {name}:{line}{id}: {}{more}",
                listed.join(", ")
            );
            eprintln!("{}", io::safe(&line));
        }
        if left_convs > 5 {
            eprintln!("... and {} more conversations", left_convs - 5);
        }
        let what = format!(
            "{left_msgs} compressed messages in {left_convs} of {conversations} conversations could not be restored from {archive} (not the archive they were compressed with?)",
        );
        if !partial {
            // `out` is dropped uncommitted: nothing is written.
            eprintln!(
                "error: {what}; nothing written (exit {EXIT_NOT_RESTORED}; --partial writes what could be restored)"
            );
            return Ok(ExitCode::from(EXIT_NOT_RESTORED));
        }
        eprintln!("warning: {what}; written as they are (--partial)");
    }
    out.commit()?;
    Ok(ExitCode::SUCCESS)
}

/// Every conversation of `input` in order, one at a time (a JSONL batch is
/// streamed), with its line.
fn each_conversation(
    input: &str,
    mut f: impl FnMut(&str, usize, Conversation) -> Result<()>,
) -> Result<usize> {
    let mut reader = Reader::open(input)?;
    let mut n = 0;
    while let Some(p) = reader.next_piece()? {
        if let io::Piece::Item { line, text, .. } = p {
            let c = parse_item(&reader.name, line, &text)?;
            drop(text);
            f(&reader.name, line, c)?;
            n += 1;
        }
    }
    Ok(n)
}

fn validate(input: &str) -> Result<ExitCode> {
    let mut bad = 0;
    let n = each_conversation(input, |name, line, c| {
        let v = ctxpress::validate(&c);
        for x in &v {
            let id = c.id().map(|i| format!(" ({i})")).unwrap_or_default();
            outln!("{}", io::safe(&format!("{name}:{line}{id}: {x}")));
        }
        bad += usize::from(!v.is_empty());
        Ok(())
    })?;
    if bad > 0 {
        eprintln!("{bad} of {n} conversations have violations");
        Ok(ExitCode::from(1))
    } else {
        eprintln!("{n} conversations, no violations");
        Ok(ExitCode::SUCCESS)
    }
}

fn classify(input: &str, config: Option<&str>) -> Result<ExitCode> {
    use ctxpress::classifier::{ClassifierConfig, decide};
    let cfg: ClassifierConfig = match config {
        None => ClassifierConfig::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("{path}: cannot read: {e}")))?;
            // The file is the classifier's parameters table.
            let table =
                ctxpress::config::check_toml(path, &text).map_err(|e| usage(e.to_string()))?;
            let params = serde_json::to_value(table).map_err(|e| usage(format!("{path}: {e}")))?;
            ctxpress::core::parse_params("classifier", &params)
                .map_err(|e| usage(ctxpress::config::error_in_file(path, &text, &e).to_string()))?
        }
    };
    let mut out = std::io::stdout().lock();
    each_conversation(input, |_, _, c| {
        for d in decide(&c, &cfg) {
            let mut v = serde_json::to_value(&d)?;
            if let (Some(id), Some(o)) = (c.id(), v.as_object_mut()) {
                o.insert("conversation".into(), Value::String(id));
            }
            std::io::Write::write_all(&mut out, format!("{v}\n").as_bytes())
                .map_err(io::stdout_error)?;
        }
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

fn stats(input: &str, tokenizer: &str, as_json: bool) -> Result<ExitCode> {
    let counter = counter_named(tokenizer).map_err(|e| usage(format!("--tokenizer: {e}")))?;
    let mut s = ctxpress::Stats::new(counter);
    each_conversation(input, |_, _, c| {
        s.add(&c);
        Ok(())
    })?;
    if as_json {
        outln!("{}", s.to_json());
    } else {
        outln!("conversations  {}", s.conversations);
        outln!("messages       {}", s.messages);
        outln!("tokens         {} ({})", s.tokens, s.tokenizer);
        if s.system_tokens + s.tool_definition_tokens > 0 {
            outln!(
                "  outside the messages: {} tokens of top-level system, {} of tool definitions",
                s.system_tokens,
                s.tool_definition_tokens
            );
        }
        outln!(
            "tool output    {:.1}% of {} chars",
            s.tool_output_share() * 100.0,
            s.chars
        );
        for (role, r) in &s.roles {
            outln!(
                "  {:<12} {:>7} messages {:>10} tokens",
                io::safe(role),
                r.messages,
                r.tokens
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn strategies(show: Option<&str>) -> Result<ExitCode> {
    let all = ctxpress::core::registry::strategies()?;
    let Some(name) = show else {
        for f in &all {
            outln!("{:<16} {}", f.name, f.summary);
        }
        return Ok(ExitCode::SUCCESS);
    };
    let Some(f) = all.iter().find(|f| f.name == name) else {
        let hint = ctxpress::core::config::closest(name, all.iter().map(|f| f.name))
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        return Err(usage(format!("unknown strategy `{name}`{hint}")));
    };
    outln!("# {}: {}", f.name, f.summary);
    outln!("# Every parameter with its default under its doc line; unknown names are rejected.");
    outln!("[[stages]]");
    outln!("type = {}", Value::String(f.name.to_string()));
    if let Value::Object(params) = (f.default_config)() {
        for (k, v) in &params {
            let kind = match v {
                Value::Bool(_) => "boolean",
                Value::Number(n) if n.is_f64() => "number",
                Value::Number(_) => "integer",
                Value::String(_) => "string",
                Value::Array(_) => "list",
                Value::Object(_) => "table",
                Value::Null => "optional",
            };
            let shown = match v {
                Value::Null => format!("# {k} = (unset)"),
                Value::Object(_) => format!("# {k} = {v} (a table)"),
                Value::Number(n) => format!("{k} = {n}"),
                other => {
                    let mut t = toml::Table::new();
                    match toml::Value::try_from(other) {
                        Ok(tv) => {
                            t.insert(k.clone(), tv);
                            toml::to_string(&t)
                                .unwrap_or_default()
                                .trim_end()
                                .to_string()
                        }
                        Err(_) => format!("{k} = {other}"),
                    }
                }
            };
            if let Some(doc) = f.param_doc(k) {
                outln!("# {doc}");
            }
            outln!("{shown:<48} # {kind}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn presets(show: Option<&str>) -> Result<ExitCode> {
    match show {
        Some(name) => {
            let p = ctxpress::PRESETS.iter().find(|p| p.name == name);
            match p {
                Some(p) => print_out(p.toml)?,
                None => {
                    return Err(usage(
                        ctxpress::preset(name)
                            .err()
                            .map(|e| e.to_string())
                            .unwrap_or_default(),
                    ));
                }
            }
        }
        None => {
            for p in ctxpress::PRESETS {
                outln!("{:<16} {}", p.name, p.summary);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
