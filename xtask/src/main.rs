//! Project automation: `cargo xtask bench`, `cargo xtask needed` and `cargo xtask scale`.
//!
//! Every measurement runs in a child process (`xtask measure`) so its peak RSS
//! is its own; the parent collects the figures, calls ../shared/eval/score.py for
//! quality when python3 is present, and prints a markdown table.
//!
//! For a statistically sound comparison of presets and strategies on a corpus sample, run
//! `cargo bench -p ctxpress-benches` (criterion; the `benches/` member).
//!
//! `bench` prints presets over corpus files (MB/s, ratio, violations) and the
//! budget table: every preset on the agent files (those with tool calls) at 8k,
//! 32k and 128k tokens by default, with the share that fit, ratio, fact
//! retention and the rungs used. `needed` (`needed.rs`) prints every preset and
//! a truncation baseline at 4k to 64k `o200k_base` tokens, and saves or
//! compares its rows against `benches/baselines/NAME.needed.json` (`--save`,
//! `--compare`).

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use ctxpress::{Compressor, Conversation, PipelineConfig};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

mod needed;

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run presets and single strategies over corpus files.
    Bench(BenchArgs),
    /// Needed facts under a budget: cut the agent files' conversations,
    /// compress each history to each budget, score what the agent went on to use.
    Needed(needed::NeededArgs),
    /// Time per MB and peak RSS on concatenated conversations of growing size.
    Scale {
        /// Presets to run (comma-separated); default all.
        #[arg(long, value_delimiter = ',')]
        presets: Vec<String>,
        /// Sizes in MB.
        #[arg(long, value_delimiter = ',', default_values_t = vec![0.1, 1.0, 10.0, 100.0])]
        sizes: Vec<f64>,
    },
    /// (internal) one measurement in this process; prints JSON.
    Measure {
        /// Preset name or `strategy:NAME` or a config file path.
        #[arg(long)]
        pipeline: String,
        /// Input JSONL.
        #[arg(long)]
        file: PathBuf,
        /// Timed runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Where to write the output JSONL of the last run.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Token budget for each conversation.
        #[arg(long)]
        budget: Option<usize>,
    },
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Presets (comma-separated); default all.
    #[arg(long, value_delimiter = ',')]
    presets: Vec<String>,
    /// Strategies to run alone (comma-separated); default all registered; `none` for none.
    #[arg(long, value_delimiter = ',')]
    strategies: Vec<String>,
    /// Timed runs per measurement (median reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Write all figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Regenerate docs/benchmarks.md.
    #[arg(long)]
    write_docs: bool,
    /// Save the results as a named baseline (benches/baselines/NAME.json).
    #[arg(long)]
    baseline: Option<String>,
    /// Compare with a saved baseline; exit 1 on a quality regression.
    #[arg(long)]
    compare: Option<String>,
    /// Token budgets for the budget table (comma-separated), run on the
    /// agent files (those with tool calls); `none` for no budget table.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["8000".to_string(), "32000".to_string(), "128000".to_string()])]
    budgets: Vec<String>,
    /// Token budgets for the needed-facts table (the presets and `truncate`
    /// on the agent files; see `cargo xtask needed`); `none` for no such table.
    #[arg(long, value_delimiter = ',', default_values_t = needed::DEFAULT_BUDGETS.map(|b| b.to_string()))]
    needed_budgets: Vec<String>,
    /// Timed runs per budget measurement.
    #[arg(long, default_value_t = 1)]
    budget_runs: usize,
    /// Worker threads for the jobs table: the `ctxpress` binary (built in
    /// release) compresses the largest agent file with `--preset agent
    /// --jobs N` for each N (comma-separated); `none` for no jobs table.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["1".to_string(), "2".to_string()])]
    jobs: Vec<String>,
    /// JSONL files; default every file of ../shared/corpus.
    files: Vec<PathBuf>,
}

/// One measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Measurement {
    pipeline: String,
    file: String,
    conversations: usize,
    bytes: usize,
    messages_before: usize,
    messages_after: usize,
    chars_before: usize,
    chars_after: usize,
    tokens_before: usize,
    tokens_after: usize,
    new_violations: usize,
    reverted_stages: usize,
    median_secs: f64,
    runs_secs: Vec<f64>,
    peak_rss_kb: u64,
    #[serde(default)]
    score: Option<serde_json::Value>,
    #[serde(default)]
    vs_identity: Option<f64>,
    /// The run's token budget, if any.
    #[serde(default)]
    budget: Option<usize>,
    /// What fit (summed over the file's conversations), with a budget.
    #[serde(default)]
    fit: Option<ctxpress::BudgetReport>,
}

impl Measurement {
    fn mbps(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.median_secs.max(1e-9)
    }
    fn ratio(&self) -> f64 {
        self.chars_before as f64 / self.chars_after.max(1) as f64
    }
    /// A figure of score.py's, when it ran.
    fn score_of(&self, k: &str) -> Option<f64> {
        self.score
            .as_ref()
            .and_then(|s| s.get(k))
            .and_then(serde_json::Value::as_f64)
    }
    fn token_ratio(&self) -> f64 {
        self.tokens_before as f64 / self.tokens_after.max(1) as f64
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Bench(a) => bench(a),
        Cmd::Needed(a) => needed::run(a),
        Cmd::Scale { presets, sizes } => scale(presets, sizes),
        Cmd::Measure {
            pipeline,
            file,
            runs,
            out,
            budget,
        } => {
            let m = measure(&pipeline, &file, runs, out.as_deref(), budget)?;
            println!("{}", serde_json::to_string(&m)?);
            Ok(())
        }
    }
}

fn load_pipeline(spec: &str) -> Result<Compressor> {
    let cfg = if let Some(name) = spec.strip_prefix("strategy:") {
        PipelineConfig::from_toml(&format!("version = 1\n[[stages]]\ntype = \"{name}\"\n"))?
    } else if Path::new(spec).exists() {
        PipelineConfig::parse(&std::fs::read_to_string(spec)?)?
    } else {
        ctxpress::preset(spec)?
    };
    Ok(Compressor::from_config(&cfg)?)
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn measure(
    spec: &str,
    file: &Path,
    runs: usize,
    out: Option<&Path>,
    budget: Option<usize>,
) -> Result<Measurement> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let comp = load_pipeline(spec)?.with_budget(budget);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut times = Vec::new();
    let mut last = None;
    // Timed: parse + compress + serialize, as the CLI does; nothing else.
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let mut convs = Vec::with_capacity(lines.len());
        let mut reports = Vec::with_capacity(lines.len());
        for line in &lines {
            let mut c = Conversation::parse(line)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let r = if comp.needs_async() {
                rt.block_on(comp.compress_async(&mut c))?
            } else {
                comp.compress(&mut c)?
            };
            reports.push(r);
            convs.push(c);
        }
        let mut buf = Vec::with_capacity(text.len());
        for c in &convs {
            c.write_to(&mut buf)?;
            buf.push(b'\n');
        }
        times.push(t.elapsed().as_secs_f64());
        last = Some((convs, reports, buf));
    }
    let (convs, reports, buf) = last.expect("at least one run");
    if let Some(o) = out {
        std::fs::write(o, &buf)?;
    }
    // Checked independently of the pipeline's own guard, outside the timing.
    let mut new_violations = 0;
    for (line, c) in lines.iter().zip(&convs) {
        let input =
            Conversation::parse(line).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        new_violations += usize::from(ctxpress::core::validate::introduces_violations(
            &ctxpress::validate(&input),
            &ctxpress::validate(c),
        ));
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let fit = reports
        .iter()
        .fold(None, |acc: Option<ctxpress::BudgetReport>, r| {
            match (acc, &r.budget) {
                (Some(mut a), Some(b)) => {
                    a.merge(b);
                    Some(a)
                }
                (None, Some(b)) => Some(b.clone()),
                (a, None) => a,
            }
        });
    Ok(Measurement {
        pipeline: spec.to_string(),
        file: file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        conversations: convs.len(),
        bytes: text.len(),
        messages_before: reports.iter().map(|r| r.messages_before).sum(),
        messages_after: reports.iter().map(|r| r.messages_after).sum(),
        chars_before: reports.iter().map(|r| r.chars_before).sum(),
        chars_after: reports.iter().map(|r| r.chars_after).sum(),
        tokens_before: reports.iter().map(|r| r.tokens_before).sum(),
        tokens_after: reports.iter().map(|r| r.tokens_after).sum(),
        new_violations,
        reverted_stages: reports
            .iter()
            .flat_map(|r| &r.stages)
            .filter(|s| !matches!(s.status, ctxpress::core::StageStatus::Applied))
            .count(),
        median_secs: sorted[sorted.len() / 2],
        runs_secs: times,
        peak_rss_kb: peak_rss_kb(),
        score: None,
        vs_identity: None,
        budget,
        fit,
    })
}

fn child(
    spec: &str,
    file: &Path,
    runs: usize,
    out: Option<&Path>,
    budget: Option<usize>,
) -> Result<Measurement> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "measure",
        "--pipeline",
        spec,
        "--runs",
        &runs.to_string(),
        "--file",
    ])
    .arg(file);
    if let Some(o) = out {
        cmd.arg("--out").arg(o);
    }
    if let Some(b) = budget {
        cmd.arg("--budget").arg(b.to_string());
    }
    let o = cmd.output()?;
    if !o.status.success() {
        bail!(
            "measuring {spec} on {}: {}",
            file.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(serde_json::from_slice(&o.stdout)?)
}

fn score(orig: &Path, out: &Path) -> Option<serde_json::Value> {
    let script = root().join("../shared/eval/score.py");
    if !script.exists() {
        return None;
    }
    let o = Command::new("python3")
        .arg(&script)
        .arg("--orig")
        .arg(orig)
        .arg("--out")
        .arg(out)
        .output()
        .ok()?;
    if !o.status.success() {
        return None;
    }
    serde_json::from_slice(&o.stdout).ok()
}

fn corpus_files() -> Result<Vec<PathBuf>> {
    let dir = root().join("../shared/corpus");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("no corpus at {} (pass files explicitly)", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    v.sort();
    Ok(v)
}

fn bench(a: BenchArgs) -> Result<()> {
    let files = if a.files.is_empty() {
        corpus_files()?
    } else {
        a.files.clone()
    };
    let presets: Vec<String> = if a.presets.is_empty() {
        ctxpress::PRESETS
            .iter()
            .map(|p| p.name.to_string())
            .collect()
    } else {
        a.presets.clone()
    };
    let strategies: Vec<String> = match a.strategies.as_slice() {
        [] => ctxpress::core::registry::strategies()?
            .iter()
            .map(|f| f.name.to_string())
            .collect(),
        [n] if n == "none" => Vec::new(),
        s => s.to_vec(),
    };
    let mut specs: Vec<String> = presets.clone();
    if !specs.iter().any(|p| p == "identity") {
        specs.insert(0, "identity".into());
    }
    specs.extend(strategies.iter().map(|s| format!("strategy:{s}")));
    let python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !python {
        eprintln!("python3 not found: quality figures (fact retention) are not computed");
    }
    let tmp = tempfile::tempdir()?;
    let mut all = Vec::new();
    for f in &files {
        let mut identity_secs = None;
        for spec in &specs {
            let out = tmp.path().join("out.jsonl");
            let mut m = child(spec, f, a.runs, Some(&out), None)?;
            if python {
                m.score = score(f, &out);
            }
            if spec == "identity" {
                identity_secs = Some(m.median_secs);
            }
            m.vs_identity = identity_secs.map(|i| m.median_secs / i.max(1e-9));
            eprintln!(
                "{:<28} {:<30} ratio {:>5.2}  {:>7.1} MB/s",
                m.file,
                m.pipeline,
                m.ratio(),
                m.mbps()
            );
            all.push(m);
        }
    }
    let budgets: Vec<usize> = match a.budgets.as_slice() {
        [n] if n == "none" => Vec::new(),
        b => b
            .iter()
            .map(|x| {
                x.parse()
                    .with_context(|| format!("--budgets: `{x}` is not a token count"))
            })
            .collect::<Result<_>>()?,
    };
    let mut fits = Vec::new();
    for f in files.iter().filter(|f| is_agent_file(f)) {
        for p in &presets {
            for &b in &budgets {
                let out = tmp.path().join("out.jsonl");
                let mut m = child(p, f, a.budget_runs, Some(&out), Some(b))?;
                if python {
                    m.score = score(f, &out);
                }
                eprintln!(
                    "{:<28} {:<10} budget {:>7}: {} of {} fit, ratio {:>5.2}",
                    m.file,
                    m.pipeline,
                    b,
                    m.fit.as_ref().map_or(0, |x| x.fitting),
                    m.conversations,
                    m.ratio()
                );
                fits.push(m);
            }
        }
    }
    let mut table = markdown(&all);
    if !fits.is_empty() {
        table.push_str(&budget_markdown(&fits));
    }
    let needed_budgets: Vec<usize> = match a.needed_budgets.as_slice() {
        [n] if n == "none" => Vec::new(),
        b => b
            .iter()
            .map(|x| {
                x.parse()
                    .with_context(|| format!("--needed-budgets: `{x}` is not a token count"))
            })
            .collect::<Result<_>>()?,
    };
    let mut needed_rows = Vec::new();
    if !needed_budgets.is_empty() {
        let agent_files: Vec<PathBuf> =
            files.iter().filter(|f| is_agent_file(f)).cloned().collect();
        let pipelines: Vec<String> = presets
            .iter()
            .cloned()
            .chain([needed::TRUNCATE.to_string()])
            .collect();
        needed_rows = needed::measure(&agent_files, &pipelines, &needed_budgets, None)?;
    }
    let jobs: Vec<usize> = match a.jobs.as_slice() {
        [n] if n == "none" => Vec::new(),
        j => j
            .iter()
            .map(|x| {
                x.parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .with_context(|| format!("--jobs: `{x}` is not a thread count"))
            })
            .collect::<Result<_>>()?,
    };
    let largest_agent_file = files
        .iter()
        .filter(|f| is_agent_file(f))
        .max_by_key(|f| std::fs::metadata(f).map_or(0, |m| m.len()));
    if let (false, Some(f)) = (jobs.is_empty(), largest_agent_file) {
        table.push_str(&jobs_markdown(f, &jobs, a.runs, tmp.path())?);
    }
    // After the jobs, where `cargo xtask needed --write-docs` puts it too.
    if !needed_rows.is_empty() {
        table.push_str(&needed::markdown(&needed_rows));
    }
    println!("{table}");
    all.extend(fits);
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&all)?)?;
    }
    if a.write_docs {
        write_docs(&table)?;
    }
    if let Some(name) = &a.baseline {
        let dir = root().join("benches/baselines");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join(format!("{name}.json")),
            serde_json::to_string_pretty(&all)?,
        )?;
        if !needed_rows.is_empty() {
            needed::save(name, &needed_rows)?;
        }
    }
    if let Some(name) = &a.compare {
        let base: Vec<Measurement> = serde_json::from_str(&std::fs::read_to_string(
            root().join(format!("benches/baselines/{name}.json")),
        )?)?;
        let regressed = compare(&base, &all);
        // The needed-facts rows, when that baseline has them.
        let needed_regressed = !needed_rows.is_empty()
            && root()
                .join(format!("benches/baselines/{name}.needed.json"))
                .exists()
            && needed::compare_with(name, &needed_rows).is_err();
        if regressed || needed_regressed {
            bail!("quality regressed against baseline `{name}`");
        }
    }
    Ok(())
}

/// The jobs table: `ctxpress compress --preset agent --jobs N FILE` for each
/// N through the release binary (built first), median wall time of `runs`
/// runs and the peak RSS its `--stats-json` reports; the outputs of every N
/// must be the same bytes.
fn jobs_markdown(file: &Path, jobs: &[usize], runs: usize, tmp: &Path) -> Result<String> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "--release", "-p", "ctxpress-cli"])
        .current_dir(root())
        .status()
        .context("building the ctxpress binary")?;
    if !status.success() {
        bail!("building the ctxpress binary failed");
    }
    // Beside this binary: target/release/ctxpress.
    let bin = std::env::current_exe()?.with_file_name("ctxpress");
    let bytes = std::fs::metadata(file)?.len() as f64;
    let name = file
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut s = format!(
        "\n## Jobs\n\n`ctxpress compress --preset agent --jobs N` on {name} ({:.1} MB, one conversation a line): \
the release binary, a whole run (read, compress on N threads, write in input order); the output is the same bytes \
for every N. Median of {runs} runs on a machine with {cores} cores. **peak RSS**: the process's high-water mark \
(at most 4 × N conversations and 64 MiB of input text are in flight, not the whole file).\n\n\
| file | jobs | s | MB/s | × jobs 1 | peak RSS MB |\n|---|---|---|---|---|---|\n",
        bytes / 1e6
    );
    let mut first: Option<(f64, Vec<u8>)> = None;
    for &n in jobs {
        let out = tmp.join("jobs.jsonl");
        let stats = tmp.join("jobs.json");
        let mut secs = Vec::new();
        let mut peak = 0u64;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            let o = Command::new(&bin)
                .args(["compress", "--preset", "agent", "--jobs", &n.to_string()])
                .arg("--stats-json")
                .arg(&stats)
                .arg("-o")
                .arg(&out)
                .arg(file)
                .output()
                .with_context(|| format!("running {}", bin.display()))?;
            secs.push(t.elapsed().as_secs_f64());
            if !o.status.success() {
                bail!(
                    "ctxpress --jobs {n} failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats)?)?;
            peak = peak.max(v["peak_rss_bytes"].as_u64().unwrap_or(0));
        }
        secs.sort_by(f64::total_cmp);
        let median = secs[secs.len() / 2];
        let output = std::fs::read(&out)?;
        let speedup = match &first {
            None => {
                first = Some((median, output));
                1.0
            }
            Some((one, bytes)) => {
                if *bytes != output {
                    bail!(
                        "ctxpress --jobs {n} wrote other bytes than --jobs {}",
                        jobs[0]
                    );
                }
                one / median.max(1e-9)
            }
        };
        eprintln!(
            "{name:<28} agent --jobs {n}: {median:.2} s, {:.1} MB/s",
            bytes / 1e6 / median
        );
        s.push_str(&format!(
            "| {name} | {n} | {median:.2} | {:.1} | {speedup:.2} | {:.0} |\n",
            bytes / 1e6 / median.max(1e-9),
            peak as f64 / (1 << 20) as f64
        ));
    }
    Ok(s)
}

/// True when the file's conversations call tools (an agent file).
fn is_agent_file(f: &Path) -> bool {
    std::fs::read_to_string(f)
        .is_ok_and(|t| t.contains("\"tool_calls\"") || t.contains("\"tool_use\""))
}

fn budget_markdown(all: &[Measurement]) -> String {
    let mut s = String::from(
        "\n## Budgets\n\nEach conversation of each agent file compressed to a token budget (heuristic counter): at or under it a conversation comes out unchanged; over it the preset's stages run oldest first, then the ladder (tool_results, assistant_prose, user_prose, evict, tail_tool_results) until it fits. `hybrid` keeps its own window as well (128k: trigger 89.6k, target 51.2k) and the lower of each applies, so at 128000 it compresses more conversations, further. **over budget**: conversations over the budget (the others come out byte-identical); **fit**: share that end at or under it; **rungs used**: conversations in which each rung removed tokens; **s**: wall time of the whole file, one run.\n\n| file | pipeline | budget | over budget | fit | ratio (chars) | fact ret. | user fact ret. | trail ret. | new violations | rungs used (conversations) | s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for m in all {
        let g = |k: &str| m.score_of(k);
        let (triggered, fitting, rungs) = match &m.fit {
            Some(f) => (
                f.triggered,
                f.fitting,
                f.rungs
                    .iter()
                    .filter(|r| r.tokens_removed > 0)
                    .map(|r| format!("{} {}", r.name, r.conversations))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            None => (0, 0, String::new()),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {}/{} | {:.0}% | {:.2} | {} | {} | {} | {} | {} | {:.2} |\n",
            m.file,
            m.pipeline,
            m.budget.unwrap_or(0),
            triggered,
            m.conversations,
            100.0 * fitting as f64 / m.conversations.max(1) as f64,
            m.ratio(),
            fmt_opt(g("fact_ret"), 3),
            fmt_opt(g("user_fact_ret"), 3),
            fmt_opt(g("trail_ret"), 3),
            m.new_violations,
            if rungs.is_empty() {
                "–".into()
            } else {
                rungs
            },
            m.median_secs
        ));
    }
    s
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

fn markdown(all: &[Measurement]) -> String {
    let mut s = String::from(
        "| file | pipeline | msgs in→out | ratio (chars) | ratio (tokens) | fact ret. | user fact ret. | trail ret. | new violations | MB/s | × identity | peak RSS MB |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for m in all {
        let g = |k: &str| m.score_of(k);
        let violations = m
            .score
            .as_ref()
            .and_then(|s| s.get("invalid_new"))
            .and_then(serde_json::Value::as_u64)
            .map(|v| v as usize)
            .unwrap_or(m.new_violations);
        s.push_str(&format!(
            "| {} | {} | {}→{} | {:.2} | {:.2} | {} | {} | {} | {} | {:.1} | {} | {:.0} |\n",
            m.file,
            m.pipeline,
            m.messages_before,
            m.messages_after,
            m.ratio(),
            m.token_ratio(),
            fmt_opt(g("fact_ret"), 3),
            fmt_opt(g("user_fact_ret"), 3),
            fmt_opt(g("trail_ret"), 3),
            violations,
            m.mbps(),
            fmt_opt(m.vs_identity, 2),
            m.peak_rss_kb as f64 / 1024.0
        ));
    }
    s
}

/// Quality tolerance for `--compare`.
const TOLERANCE: f64 = 0.005;

fn compare(base: &[Measurement], cur: &[Measurement]) -> bool {
    let mut regressed = false;
    for c in cur {
        let Some(b) = base
            .iter()
            .find(|b| b.file == c.file && b.pipeline == c.pipeline && b.budget == c.budget)
        else {
            continue;
        };
        let g = |m: &Measurement, k: &str| m.score_of(k);
        let mut line = format!(
            "{} {}{}: ratio {:.3} → {:.3}, MB/s {:.1} → {:.1}",
            c.file,
            c.pipeline,
            c.budget
                .map(|b| format!(" (budget {b})"))
                .unwrap_or_default(),
            b.ratio(),
            c.ratio(),
            b.mbps(),
            c.mbps()
        );
        if c.ratio() < b.ratio() * (1.0 - TOLERANCE) {
            regressed = true;
            line.push_str("  REGRESSION(ratio)");
        }
        for k in ["fact_ret", "user_fact_ret", "trail_ret"] {
            if let (Some(x), Some(y)) = (g(b, k), g(c, k)) {
                line.push_str(&format!(", {k} {x:.4} → {y:.4}"));
                if y < x - TOLERANCE {
                    regressed = true;
                    line.push_str(&format!("  REGRESSION({k})"));
                }
            }
        }
        if c.new_violations > b.new_violations {
            regressed = true;
            line.push_str("  REGRESSION(violations)");
        }
        println!("{line}");
    }
    regressed
}

/// The search latency section of docs/benchmarks.md: measured by hand (not by
/// `bench`), kept here so `--write-docs` keeps it.
const SEARCH_DOCS: &str = "\n\
## Search\n\
\n\
Measured on 2026-11-29 (session 29) by `cargo bench -p ctxpress-benches --bench search` (release build, an idle 2-core machine): every corpus conversation (509 in 5 files) compressed by `agent` at 8,000 tokens into one SQLite archive (88.8 MB, 322 recall handles: the session ledgers' lines carry their own), then each query timed alone through `SqliteArchive::search` (10 hits): words drawn from the middle third of every conversation. 629 of the 729 one-word queries find something (the rest are words the budget left in the output, which is not archived).\n\
\n\
| what | n | median | p90 | p99 | max |\n\
|---|---|---|---|---|---|\n\
| one word, all conversations | 729 | 3.67 ms | 10.30 ms | 15.54 ms | 26.46 ms |\n\
| two words, all conversations | 436 | 0.79 ms | 6.40 ms | 14.64 ms | 16.90 ms |\n\
| one word within its conversation | 729 | 0.16 ms | 1.24 ms | 4.33 ms | 14.37 ms |\n\
| `recall` of every handle in the outputs | 322 | 0.02 ms | 0.86 ms | 4.58 ms | 7.61 ms |\n\
\n\
The whole `ctxpress search` command (process start, open, query, print) took 2.9-4.2 ms median and 10-16 ms p99 when measured by hand on 2026-11-24 (a busy machine, a 77 MB archive).\n\
";

/// Compaction figures measured by hand (kept by `write_docs`).
const COMPACT_DOCS: &str = "\n## Compaction\n\n\
Measured on 2026-11-25 (by hand, session 15): `ctxpress compress ../shared/corpus/coding_agent_sessions.jsonl --preset compact \
--window 128000 --archive DB --jobs 1` (trigger 89.6k, target 51.2k tokens), release build, a busy 2-core machine; quality \
from `../shared/eval/score.py`.\n\n\
| sessions | over trigger | under target after | tokens in → out | ratio (chars) | fact ret. | user fact ret. | trail ret. | \
new violations | time per session | peak RSS | archive per MB of input |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n\
| 37 | 29 | 37 | 6.82M → 1.93M | 3.55 | 0.484 | 0.498 | 0.760 | 0 | 0.28 s (10.5 s for 37; a fuzzer and a test run shared the 2 cores) | 79 MB | 2.6 MB (68.8 MB for 26.7 MB, FTS index included) |\n\n\
`ctxpress expand` restores the input byte for byte from the archive.\n";

/// Session and proxy figures measured by hand (kept by `write_docs`).
const SESSION_DOCS: &str = "\n## Sessions and the proxy\n\n\
Measured on 2026-11-25 (by hand, session 16), release builds, a busy 2-core machine.\n\n\
**Replay** (`CTXPRESS_REPLAY_ALL=1 cargo test --release -p ctxpress-tests --test it -- session_replay:: --nocapture`): every \
corpus session replayed turn by turn as a proxy sees it (the whole history before each assistant message), through a \
`Session` with the `agent` preset, against compressing each turn's history from scratch with the same window. \
**cached share**: the tokens of each request that repeat the start of the previous request byte for byte (what a \
provider can serve from its prompt cache), over all request tokens.\n\n\
| file | window | conversations | turns | compactions | tokens sent ÷ given | cached share, session | cached share, recompressing every turn |\n\
|---|---|---|---|---|---|---|---|\n\
| coding_agent_sessions.jsonl | 32,000 | 37 | 8,431 | 603 (one per 14 turns) | 410M ÷ 1,181M (0.35) | 0.965 | 0.093 |\n\
| swe_agent_trajs.jsonl | 12,000 | 13 | 139 | 7 | 0.665M ÷ 0.757M (0.88) | 0.842 | 0.757 |\n\n\
**Proxy load** (`CTXPRESS_LOAD_FULL=1 cargo test --release -p ctxpress-proxy --test it -- load:: --nocapture`): concurrent \
sessions replaying corpus histories through `ctxpress serve`'s router to a stub upstream on 127.0.0.1 that answers at \
once, so the client's time per request is the proxy's overhead (parse, session, compaction when due, serialize, forward). \
No request failed.\n\n\
| requests | window | sessions × requests | mean tokens | overhead p50 | p99 | RSS before → after |\n\
|---|---|---|---|---|---|---|\n\
| ~10k tokens | 16,000 | 16 × up to 10 (51) | 9,723 | 31.5 ms | 96.4 ms | 43 → 63 MB |\n\
| ~100k tokens | 128,000 | 8 × up to 5 (36) | 93,655 | 20.4 ms | 202.3 ms (a compaction) | 85 → 107 MB |\n";

/// Python package figures measured by hand (kept by `write_docs`).
const BUILD_DOCS: &str = concat!(
    "\n## Build profiles\n\n\
Measured on 2026-11-29 (by hand, session 27) on a fresh clone with an empty target directory, an idle 2-core machine: \
`cargo build -p ctxpress-cli` with each profile, then the CLI's throughput (`compress --preset agent --jobs 1` on \
coding_agent_sessions.jsonl, 26.7 MB, the whole process timed; the two binaries run in turn, medians).\n\n\
| profile | what | first build | agent, no budget | agent, `--budget 32000` |\n\
|---|---|---|---|---|\n\
| `release` (the README's commands) | no cross-crate LTO, 16 codegen units a crate, `-O2` | 3m52s | 0.790 s (33.8 MB/s) | 1.631 s (16.4 MB/s) |\n\
| `dist` (`cargo install`, wheels) | fat LTO, one codegen unit, `-O3` | 4m34s | 0.740 s (36.1 MB/s) | 1.608 s (16.6 MB/s) |\n\n\
15 and 9 runs of each; the spread within a column is about ±10% on this machine, and a second series of 7 runs without a \
budget had `release` ahead (0.672 s against 0.726 s). Before session 27 `release` was thin LTO at `-O3` (4m12s to build) \
and plain `-O3` without LTO took 4m01s.\n",
    "\n\
**The test run.** `cargo test --workspace --no-fail-fast` on a fresh clone, idle machine (session 28), with the `dev` profile of each row:\n\
\n\
| `dev` profile | build | run | total |\n\
|---|---|---|---|\n\
| everything at `-O1`, line tables | 7m15s | 1m44s | 8m59s |\n\
| the crates no test spends its time in (CLI, proxy, LLM client, xtask, benches, their HTTP/TLS/async/clap/criterion dependencies) at `-O0` | 5m54s-6m17s | 1m43s-1m56s | 7m50s-8m00s |\n\
| the same without debug info (kept) | 5m13s | 1m37s | 6m50s |\n\
"
);
const PYTHON_DOCS: &str = "\n## Python package\n\n\
Measured on 2026-11-25 (by hand, session 16) with `python crates/ctxpress-py/bench/overhead.py --runs 3` (medians), the \
release wheel (`maturin build --release`, abi3, stripped: 5.6 MB; 3 min 21 s to build with the dependencies already \
compiled) in a fresh venv, the release CLI, the `agent` preset, a quiet 2-core machine. `import ctxpress`: 13.2 ms. \
**CLI**: `ctxpress compress --jobs 1` on the whole file, process start included; **text** / **dicts**: \
`Compressor.compress` on each line as a string / as parsed dicts (dicts pay `json.dumps` and `json.loads`); \
**threads**: 1 thread's time ÷ N threads' on the same lines, one shared `Compressor` (the interpreter lock is released \
while Rust works). The outputs are checked equal to the CLI's.\n\n\
| file | conversations | MB | CLI MB/s | text MB/s | dicts MB/s | extra per conversation (text / dicts) | 2 threads | 4 threads |\n\
|---|---|---|---|---|---|---|---|---|\n\
| coding_agent_sessions.jsonl | 37 | 26.72 | 32.1 | 32.4 | 26.6 | −0.22 ms / +4.60 ms | 1.80× | 1.84× |\n\
| taubench_airline.jsonl | 156 | 2.62 | 31.8 | 41.4 | 26.5 | −0.12 ms / +0.11 ms | 1.89× | 1.95× |\n\
| swe_agent_trajs.jsonl | 13 | 0.38 | 8.7 | 40.7 | 28.3 | −2.64 ms / −2.32 ms | 1.84× | 1.56× |\n\n\
Spark (`examples/python/spark_batch.py`, local[2], `mapInPandas`, output byte-identical to the CLI's): about 50 \
conversations/s on taubench_airline (156 conversations, a busy machine) after about 10 s of session start and 7-11 s of \
worker warm-up; the CLI does about 130/s on the same file.\n";

/// Node package figures measured by hand (kept by `write_docs`).
const NODE_DOCS: &str = r#"
## Node package

Measured on 2026-11-29 (by hand) with `node crates/ctxpress-node/bench/overhead.mjs --runs 3` and, right after it for comparison, `python crates/ctxpress-py/bench/overhead.py --runs 3` (medians), against the same release CLI, `agent` preset. The machine was **not** quiet (load average 3.4-3.7 on 2 cores from other builds), so the absolute MB/s and especially the parallel columns are low; the Node-vs-CLI differences were measured in the same minute. The addon is `cargo build --release -p ctxpress-node` (x86-64-v2 from `.cargo/config.toml`), stripped: 12.7 MB; `npm pack` of the package with it: 6.8 MB tarball (15.8 MB unpacked, 8 files) with the addon unstripped, about 6.1 MB stripped. `require('ctxpress')`: 5.8 ms (Python's `import ctxpress` in the same minute: 17.7 ms). **text** / **objects**: `compressSync` on each line as a string / as parsed objects (objects pay `JSON.stringify` and `JSON.parse`); **in flight**: the lines through `compress` (libuv's pool), 1 thread's time ÷ that with 2 or 4 in flight. The outputs are checked equal to the CLI's.

| file | conversations | MB | CLI MB/s | Node text MB/s | Node objects MB/s | extra per conversation (text / objects) | 2 in flight | 4 in flight |
|---|---|---|---|---|---|---|---|---|
| coding_agent_sessions.jsonl | 37 | 26.72 | 44.9 | 45.4 | 36.2 | −0.17 ms / +3.86 ms | 0.82× | 0.74× |
| taubench_airline.jsonl | 156 | 2.62 | 28.3 | 31.8 | 24.9 | −0.07 ms / +0.08 ms | 1.14× | 1.13× |
| swe_agent_trajs.jsonl | 13 | 0.38 | 7.3 | 29.2 | 17.7 | −3.03 ms / −2.37 ms | 1.09× | 1.08× |

Per MB on coding_agent_sessions (the large file, where process start does not count): Node text costs what the CLI does (−0.2 ms/MB), Node objects +5.4 ms/MB; Python in the same minute: text +4.1 ms/MB, dicts +12.4 ms/MB (CLI 36.5 MB/s, text 31.7, dicts 25.1). Python's threads did not scale in that minute either (0.91× on 2 threads), so the parallel columns say how busy the machine was; `test/threads.test.mjs` checks that compressions do overlap on the pool.
"#;

fn write_docs(table: &str) -> Result<()> {
    let path = root().join("docs/benchmarks.md");
    let head = "# Benchmarks\n\nGenerated by `cargo xtask bench --write-docs` on the files of `../shared/corpus` \
(2-core machine; numbers from one run, medians of the timed runs).\n\n";
    let how = "\n## How to read the numbers\n\n\
- **ratio (chars)**: characters of text, tool results and tool-call arguments in ÷ out (the scorer's measure); \
**ratio (tokens)** the same with the heuristic token counter.\n\
- **fact ret.**, **user fact ret.**, **trail ret.**: from `../shared/eval/score.py`: the share of facts (paths, identifiers, \
numbers with units, URLs, versions, hashes, error names) of the input still found in the output; the same for user \
messages; the share of edited files whose name is still in the output.\n\
- **new violations**: conversations whose output breaks tool-call pairing while the input did not (must be 0).\n\
- **MB/s**: input bytes ÷ median wall time of parse + compress + serialize, in one process; **× identity**: that time \
÷ the identity preset's on the same file in the same run (the floor: parse and serialize only).\n\
- **peak RSS**: the measuring process's high-water mark, including the whole input held in memory.\n\
- Speed is noisy on shared machines; compare ratios within one run, not across runs.\n";
    std::fs::create_dir_all(path.parent().expect("docs dir"))?;
    std::fs::write(
        &path,
        format!(
            "{head}{table}{SEARCH_DOCS}{COMPACT_DOCS}{SESSION_DOCS}{PYTHON_DOCS}{NODE_DOCS}{BUILD_DOCS}{how}"
        ),
    )?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn scale(presets: Vec<String>, sizes: Vec<f64>) -> Result<()> {
    let presets: Vec<String> = if presets.is_empty() {
        ctxpress::PRESETS
            .iter()
            .map(|p| p.name.to_string())
            .collect()
    } else {
        presets
    };
    let src = corpus_files()?;
    let mut sessions = Vec::new();
    for f in &src {
        for line in std::fs::read_to_string(f)?
            .lines()
            .filter(|l| !l.trim().is_empty())
        {
            let v: serde_json::Value = serde_json::from_str(line)?;
            if let Some(m) = v.get("messages").and_then(|m| m.as_array()) {
                sessions.push(m.clone());
            }
        }
    }
    if sessions.is_empty() {
        bail!("no sessions in the corpus");
    }
    let tmp = tempfile::tempdir()?;
    println!("| size MB | pipeline | s per MB | MB/s | peak RSS MB |\n|---|---|---|---|---|");
    for size in sizes {
        let target = (size * 1e6) as usize;
        let mut msgs: Vec<serde_json::Value> = Vec::new();
        let mut bytes = 0;
        let mut round = 0;
        'fill: loop {
            for s in &sessions {
                for m in s {
                    let mut m = m.clone();
                    uniquify(&mut m, round);
                    bytes += m.to_string().len();
                    msgs.push(m);
                }
                if bytes >= target {
                    break 'fill;
                }
            }
            round += 1;
        }
        let file = tmp.path().join(format!("scale-{size}.jsonl"));
        std::fs::write(
            &file,
            format!("{}\n", serde_json::json!({"id": "scale", "messages": msgs})),
        )?;
        for p in &presets {
            let m = child(p, &file, 1, None, None)?;
            println!(
                "| {size} | {p} | {:.3} | {:.1} | {:.0} |",
                m.median_secs / (m.bytes as f64 / 1e6),
                m.mbps(),
                m.peak_rss_kb as f64 / 1024.0
            );
        }
    }
    Ok(())
}

/// Make tool-call ids unique across repeated copies of a session.
fn uniquify(m: &mut serde_json::Value, round: usize) {
    if round == 0 {
        return;
    }
    if let Some(id) = m
        .get_mut("tool_call_id")
        .and_then(|v| v.as_str().map(|s| format!("{s}_r{round}")))
    {
        m["tool_call_id"] = serde_json::Value::String(id);
    }
    if let Some(calls) = m.get_mut("tool_calls").and_then(|v| v.as_array_mut()) {
        for c in calls {
            if let Some(id) = c
                .get("id")
                .and_then(|v| v.as_str())
                .map(|s| format!("{s}_r{round}"))
            {
                c["id"] = serde_json::Value::String(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// The sections measured by hand are in docs/benchmarks.md as written
    /// here, so `--write-docs` keeps them as they are.
    #[test]
    fn hand_measured_sections_are_in_the_docs() {
        let docs = std::fs::read_to_string(super::root().join("docs/benchmarks.md")).unwrap();
        for (name, section) in [
            ("SEARCH_DOCS", super::SEARCH_DOCS),
            ("COMPACT_DOCS", super::COMPACT_DOCS),
            ("SESSION_DOCS", super::SESSION_DOCS),
            ("PYTHON_DOCS", super::PYTHON_DOCS),
            ("NODE_DOCS", super::NODE_DOCS),
            ("BUILD_DOCS", super::BUILD_DOCS),
        ] {
            assert!(
                docs.contains(section),
                "{name} differs from docs/benchmarks.md"
            );
        }
    }
}
