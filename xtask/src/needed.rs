//! `cargo xtask needed`: does a history compressed to a token budget still
//! hold the facts the agent went on to use?
//!
//! `../shared/eval/needed.py cut` cuts each conversation of an agent file where
//! a turn starts (at 50% and 80% of its messages) and lists the facts found both
//! before the cut and in the 40 messages after it. Each prefix is compressed to
//! each budget by each pipeline (the presets, with the exact `o200k_base`
//! counter, and [`truncate`], the plain baseline), then scored by `needed.py
//! score` (share of needed facts kept, new pairing violations) and `score.py`
//! (share of the user messages' facts kept).

use anyhow::{Context, Result, bail};
use ctxpress::Conversation;
use ctxpress::core::conversation::exchange_results;
use ctxpress::core::tokens::{TokenCounter, count_message, counter_named};
use ctxpress::core::window::envelope_tokens;
use ctxpress::core::{Message, Role};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

/// The plain-truncation pipeline's name.
pub const TRUNCATE: &str = "truncate";

/// The budgets measured by default.
pub const DEFAULT_BUDGETS: [usize; 5] = [4000, 8000, 16000, 32000, 64000];

/// The exact counter every pipeline counts with.
const COUNTER: &str = "o200k_base";

/// Shares may drop this much before `--compare` calls it a regression.
const TOLERANCE: f64 = 0.005;

const HEADING: &str = "## Needed facts under a budget";

#[derive(clap::Args)]
pub struct NeededArgs {
    /// Token budgets (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_BUDGETS.to_vec())]
    budgets: Vec<usize>,
    /// Presets and `truncate` (comma-separated); default every preset and `truncate`.
    #[arg(long, value_delimiter = ',')]
    pipelines: Vec<String>,
    /// Only the agent files of ../shared/corpus whose name contains one of
    /// these (comma-separated); default every agent file.
    #[arg(long, value_delimiter = ',')]
    files: Vec<String>,
    /// Keep each pipeline's output here (FILE.PIPELINE.BUDGET.jsonl) and the
    /// cut prefixes (FILE.prefixes.jsonl).
    #[arg(long)]
    keep_outputs: Option<PathBuf>,
    /// Write the table into docs/benchmarks.md (its section replaced).
    #[arg(long)]
    write_docs: bool,
    /// Compare with a saved baseline (benches/baselines/NAME.needed.json);
    /// exit non-zero on a regression.
    #[arg(long)]
    compare: Option<String>,
    /// Save the rows as a baseline (benches/baselines/NAME.needed.json).
    #[arg(long)]
    save: Option<String>,
}

/// One (file, pipeline, budget) measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub file: String,
    pub pipeline: String,
    pub budget: usize,
    /// Prefixes (cuts) scored.
    pub cuts: usize,
    /// Cuts over the budget before compression.
    pub over: usize,
    /// Of those, the ones whose output is at or under the budget.
    pub fitting: usize,
    /// Share of the needed facts kept (`needed.py score`).
    pub needed: f64,
    /// Share of the user messages' facts kept (`score.py`).
    pub user_fact: Option<f64>,
    /// Median of output tokens ÷ budget over the cuts over the budget.
    pub fill: Option<f64>,
    /// Cuts whose output breaks pairing while the prefix did not.
    pub violations: usize,
    /// Wall time of parse + compress + serialize of every cut.
    pub secs: f64,
}

impl Row {
    fn fit(&self) -> Option<f64> {
        (self.over > 0).then(|| self.fitting as f64 / self.over as f64)
    }
}

/// `cargo xtask needed`.
pub fn run(a: NeededArgs) -> Result<()> {
    let wanted: Vec<PathBuf> = crate::corpus_files()?
        .into_iter()
        .filter(|f| crate::is_agent_file(f))
        .filter(|f| {
            let name = file_name(f);
            a.files.is_empty() || a.files.iter().any(|w| name.contains(w.as_str()))
        })
        .collect();
    if wanted.is_empty() {
        bail!("no agent file of the corpus matches --files {:?}", a.files);
    }
    let pipelines = if a.pipelines.is_empty() {
        all_pipelines()
    } else {
        a.pipelines.clone()
    };
    let t = Instant::now();
    let rows = measure(&wanted, &pipelines, &a.budgets, a.keep_outputs.as_deref())?;
    let table = markdown(&rows);
    println!("{table}");
    eprintln!("needed: {:.0} s in all", t.elapsed().as_secs_f64());
    if a.write_docs {
        write_docs(&table)?;
    }
    if let Some(name) = &a.save {
        save(name, &rows)?;
    }
    if let Some(name) = &a.compare {
        compare_with(name, &rows)?;
    }
    Ok(())
}

/// Every preset, then `truncate`.
pub fn all_pipelines() -> Vec<String> {
    ctxpress::PRESETS
        .iter()
        .map(|p| p.name.to_string())
        .chain([TRUNCATE.to_string()])
        .collect()
}

fn file_name(f: &Path) -> String {
    f.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

fn stem(f: &Path) -> String {
    f.file_stem()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

fn eval_script(name: &str) -> Result<PathBuf> {
    let p = crate::root().join("../shared/eval").join(name);
    if !p.exists() {
        bail!(
            "{} not found: the needed-facts measurement needs ../shared/eval",
            p.display()
        );
    }
    Ok(p)
}

/// Measure every pipeline at every budget on every file (agent files of the
/// corpus); needs python3 and ../shared/eval.
pub fn measure(
    files: &[PathBuf],
    pipelines: &[String],
    budgets: &[usize],
    keep: Option<&Path>,
) -> Result<Vec<Row>> {
    let python_ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !python_ok {
        bail!(
            "python3 not found: the needed-facts measurement runs ../shared/eval/needed.py and \
             score.py (`cargo xtask bench --needed-budgets none` skips it)"
        );
    }
    let needed_py = eval_script("needed.py")?;
    let score_py = eval_script("score.py")?;
    let counter = counter_named(COUNTER)?;
    // Check every name before the long run.
    for p in pipelines.iter().filter(|p| *p != TRUNCATE) {
        crate::load_pipeline(p).with_context(|| format!("pipeline `{p}`"))?;
    }
    let tmp = tempfile::tempdir()?;
    let dir = match keep {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            d.to_path_buf()
        }
        None => tmp.path().to_path_buf(),
    };
    let mut rows = Vec::new();
    // An output is scored in the background (two python processes) while
    // the next one is compressed.
    let mut pending: VecDeque<Pending> = VecDeque::new();
    for f in files {
        let name = file_name(f);
        let t = Instant::now();
        let prefixes = cut(&needed_py, f)?;
        if keep.is_some() {
            std::fs::copy(&prefixes, dir.join(format!("{}.prefixes.jsonl", stem(f))))?;
        }
        let lines = prefix_lines(&prefixes)?;
        eprintln!(
            "{name}: {} cuts ({:.1} s)",
            lines.len(),
            t.elapsed().as_secs_f64()
        );
        for p in pipelines {
            for &budget in budgets {
                let out = dir.join(format!("{}.{p}.{budget}.jsonl", stem(f)));
                let row = compress_all(&name, p, &lines, budget, &counter, &out)?;
                pending.push_back(Pending::spawn(row, &needed_py, &score_py, &prefixes, &out)?);
                if pending.len() > 1 {
                    rows.push(pending.pop_front().expect("pending").finish()?);
                }
            }
        }
        // The prefixes file is read by the scorers still running.
        while let Some(p) = pending.pop_front() {
            rows.push(p.finish()?);
        }
    }
    Ok(rows)
}

/// `needed.py cut` on `file`: the path of its prefixes. Cutting the largest
/// file takes a while, so the prefixes are kept beside this binary
/// (`needed-cuts/`) under a key of both files' sizes and modification times.
fn cut(needed_py: &Path, file: &Path) -> Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in [needed_py, file] {
        let m = std::fs::metadata(p).with_context(|| format!("reading {}", p.display()))?;
        (p, m.len(), m.modified().ok()).hash(&mut h);
    }
    let dir = std::env::current_exe()?.with_file_name("needed-cuts");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}-{:016x}.jsonl", stem(file), h.finish()));
    if path.exists() {
        return Ok(path);
    }
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    let o = Command::new("python3")
        .arg(needed_py)
        .args(["cut", "--data"])
        .arg(file)
        .arg("--out")
        .arg(&tmp)
        .output()
        .context("running needed.py cut")?;
    if !o.status.success() {
        bail!(
            "needed.py cut on {}: {}",
            file.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// The prefixes of a `needed.py cut` output as `{"id", "messages"}` lines
/// (the `needed` list dropped: it is the scorer's, not the history's).
fn prefix_lines(path: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l)?;
            Ok(serde_json::json!({"id": v["id"], "messages": v["messages"]}).to_string())
        })
        .collect()
}

/// Tokens of a conversation as the budget counts them.
fn conversation_tokens(conv: &Conversation, counter: &dyn TokenCounter) -> usize {
    envelope_tokens(conv, counter)
        + conv
            .messages
            .iter()
            .map(|m| count_message(counter, m))
            .sum::<usize>()
}

/// Compress every prefix to `budget` with `pipeline` (a preset or
/// `truncate`), write the outputs to `out`; the row without the scores.
fn compress_all(
    file: &str,
    pipeline: &str,
    lines: &[String],
    budget: usize,
    counter: &Arc<dyn TokenCounter>,
    out: &Path,
) -> Result<Row> {
    let comp = if pipeline == TRUNCATE {
        None
    } else {
        Some(
            crate::load_pipeline(pipeline)?
                .with_counter(counter.clone())
                .with_budget(Some(budget)),
        )
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut buf = Vec::new();
    let mut row = Row {
        file: file.to_string(),
        pipeline: pipeline.to_string(),
        budget,
        cuts: lines.len(),
        over: 0,
        fitting: 0,
        needed: 0.0,
        user_fact: None,
        fill: None,
        violations: 0,
        secs: 0.0,
    };
    let mut fills = Vec::new();
    let t = Instant::now();
    for line in lines {
        let mut conv = Conversation::parse(line).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        let (before, after) = match &comp {
            None => {
                let before = conversation_tokens(&conv, counter.as_ref());
                truncate(&mut conv, budget, counter.as_ref());
                (before, conversation_tokens(&conv, counter.as_ref()))
            }
            Some(c) => {
                let r = if c.needs_async() {
                    rt.block_on(c.compress_async(&mut conv))?
                } else {
                    c.compress(&mut conv)?
                };
                match &r.budget {
                    Some(b) => (b.tokens_before, b.tokens_after),
                    None => (r.tokens_before, r.tokens_after),
                }
            }
        };
        if before > budget {
            row.over += 1;
            row.fitting += usize::from(after <= budget);
            fills.push(after as f64 / budget as f64);
        }
        conv.write_to(&mut buf)?;
        buf.push(b'\n');
    }
    row.secs = t.elapsed().as_secs_f64();
    std::fs::write(out, &buf).with_context(|| format!("writing {}", out.display()))?;
    fills.sort_by(f64::total_cmp);
    row.fill = median(&fills);
    Ok(row)
}

fn median(sorted: &[f64]) -> Option<f64> {
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[n / 2]),
        n => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Plain truncation, the baseline any compressor should beat: the system
/// messages plus the newest whole exchanges that fit `budget` (counted as
/// the compressor counts: [`count_message`] plus [`envelope_tokens`]). An
/// assistant message with tool calls and the results answering it go or stay
/// together. A conversation at or under the budget is left unchanged.
pub fn truncate(conv: &mut Conversation, budget: usize, counter: &dyn TokenCounter) {
    let tokens: Vec<usize> = conv
        .messages
        .iter()
        .map(|m| count_message(counter, m))
        .collect();
    let fixed = envelope_tokens(conv, counter);
    if fixed + tokens.iter().sum::<usize>() <= budget {
        return;
    }
    let mut keep: Vec<bool> = conv
        .messages
        .iter()
        .map(|m| m.role_ref().is_system())
        .collect();
    let system: usize = (0..tokens.len())
        .filter(|&i| keep[i])
        .map(|i| tokens[i])
        .sum();
    let mut left = budget.saturating_sub(fixed + system);
    for unit in units(&conv.messages).iter().rev() {
        let t: usize = unit.clone().map(|i| tokens[i]).sum();
        if t > left {
            break;
        }
        left -= t;
        for i in unit.clone() {
            keep[i] = true;
        }
    }
    let mut i = 0;
    conv.messages.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// The non-system messages in the units truncation keeps or drops whole:
/// an assistant message with tool calls plus the results answering it (the
/// next user message when it carries tool results, else the run of tool
/// messages after it); any other message alone.
fn units(msgs: &[Message]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        let mut j = i + 1;
        if m.role_ref().is_system() {
            i = j;
            continue;
        }
        if *m.role_ref() == Role::Assistant && m.has_tool_calls() {
            j = exchange_results(msgs, i).end;
        }
        out.push(i..j);
        i = j;
    }
    out
}

struct Pending {
    row: Row,
    needed: Child,
    score: Child,
}

impl Pending {
    fn spawn(
        row: Row,
        needed_py: &Path,
        score_py: &Path,
        prefixes: &Path,
        out: &Path,
    ) -> Result<Self> {
        let needed = Command::new("python3")
            .arg(needed_py)
            .args(["score", "--prefixes"])
            .arg(prefixes)
            .arg("--out")
            .arg(out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running needed.py score")?;
        let score = Command::new("python3")
            .arg(score_py)
            .arg("--orig")
            .arg(prefixes)
            .arg("--out")
            .arg(out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running score.py")?;
        Ok(Pending { row, needed, score })
    }

    fn finish(self) -> Result<Row> {
        let mut row = self.row;
        let what = format!("{} {} at {}", row.file, row.pipeline, row.budget);
        let needed = json_of(self.needed, "needed.py score", &what)?;
        let score = json_of(self.score, "score.py", &what)?;
        row.needed = needed["needed"]
            .as_f64()
            .with_context(|| format!("needed.py score gave no `needed` for {what}"))?;
        row.violations = needed["violations_new"].as_u64().unwrap_or(0) as usize;
        row.user_fact = score["user_fact_ret"].as_f64();
        eprintln!(
            "{:<28} {:<9} {:>6}: needed {:.3}, user facts {}, fit {}, {:.1} s",
            row.file,
            row.pipeline,
            row.budget,
            row.needed,
            crate::fmt_opt(row.user_fact, 3),
            crate::fmt_opt(row.fit(), 2),
            row.secs
        );
        Ok(row)
    }
}

fn json_of(child: Child, script: &str, what: &str) -> Result<serde_json::Value> {
    let o = child.wait_with_output()?;
    if !o.status.success() {
        bail!(
            "{script} on {what} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    serde_json::from_slice(&o.stdout).with_context(|| format!("{script} on {what}: not JSON"))
}

/// The section of docs/benchmarks.md: heading, what the columns mean, table.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = format!(
        "\n{HEADING}\n\n\
Does a history compressed to a budget still hold what the agent went on to use? `../shared/eval/needed.py cut` \
cuts each conversation of each agent file where a turn starts, at 50% and 80% of its messages, and calls *needed* \
the facts (score.py's paths, identifiers, numbers with units, URLs, versions, hashes, error names) found both before \
the cut and in the 40 messages after it; each cut's history is compressed to each budget, counted with the exact \
`o200k_base` counter. `truncate` is the baseline any compressor should beat: the system messages plus the newest \
whole exchanges that fit (a tool call never without its results). **cuts**: histories scored, and how many were \
over the budget (the others come out unchanged); **needed**: share of the needed facts still in the output \
(`needed.py score`, over all cuts); **user facts**: share of the user messages' facts kept (`score.py`); **fit**: \
share of the cuts over the budget that end at or under it; **fill**: median of output tokens ÷ budget over those \
cuts; **new violations**: cuts whose output breaks tool-call pairing while the history did not (must be 0); **s**: \
wall time to parse, compress and serialize every cut (scoring not included). Generated by `cargo xtask needed \
--write-docs` (or `cargo xtask bench --write-docs`).\n\n\
| file | pipeline | budget | cuts (over budget) | needed | user facts | fit | fill | new violations | s |\n\
|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} ({}) | {:.3} | {} | {} | {} | {} | {:.1} |\n",
            r.file,
            r.pipeline,
            r.budget,
            r.cuts,
            r.over,
            r.needed,
            crate::fmt_opt(r.user_fact, 3),
            r.fit()
                .map_or_else(|| "–".into(), |f| format!("{:.0}%", 100.0 * f)),
            crate::fmt_opt(r.fill, 2),
            r.violations,
            r.secs
        ));
    }
    s
}

/// Replace (or add, before the hand-measured sections) the section in
/// docs/benchmarks.md.
fn write_docs(section: &str) -> Result<()> {
    let path = crate::root().join("docs/benchmarks.md");
    let doc = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (run `cargo xtask bench --write-docs` first)",
            path.display()
        )
    })?;
    let doc = replace_section(&doc, section.trim_start_matches('\n'));
    std::fs::write(&path, doc)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// `doc` with the section under [`HEADING`] (up to the next `## `) replaced by
/// `section`; without one, `section` goes before `## Search` (else at the end).
fn replace_section(doc: &str, section: &str) -> String {
    let section = format!("{}\n", section.trim());
    if let Some(start) = doc.find(&format!("\n{HEADING}\n")).map(|i| i + 1) {
        let end = doc[start + HEADING.len()..]
            .find("\n## ")
            .map_or(doc.len(), |i| start + HEADING.len() + i + 1);
        let sep = if end < doc.len() { "\n" } else { "" };
        return format!("{}{section}{sep}{}", &doc[..start], &doc[end..]);
    }
    match doc.find("\n## Search\n") {
        Some(i) => format!("{}{section}{}", &doc[..i + 1], &doc[i..]),
        None => format!(
            "{}\n{section}",
            doc.trim_end_matches('\n').to_string() + "\n"
        ),
    }
}

fn baseline_path(name: &str) -> PathBuf {
    crate::root().join(format!("benches/baselines/{name}.needed.json"))
}

/// Save the rows as baseline `name`.
pub fn save(name: &str, rows: &[Row]) -> Result<()> {
    let path = baseline_path(name);
    std::fs::create_dir_all(path.parent().expect("baselines dir"))?;
    std::fs::write(&path, serde_json::to_string_pretty(rows)?)?;
    eprintln!("saved {}", path.display());
    Ok(())
}

/// Compare with baseline `name` (an error when it is missing or anything regressed).
pub fn compare_with(name: &str, rows: &[Row]) -> Result<()> {
    let path = baseline_path(name);
    let base: Vec<Row> = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    let regressions = compare(&base, rows);
    if regressions > 0 {
        bail!("{regressions} needed-facts regression(s) against baseline `{name}`");
    }
    Ok(())
}

/// Print each row against its baseline row; the number of regressions:
/// needed or user-fact share down by more than [`TOLERANCE`], fit down,
/// violations up.
fn compare(base: &[Row], cur: &[Row]) -> usize {
    let mut regressions = 0;
    for c in cur {
        let Some(b) = base
            .iter()
            .find(|b| b.file == c.file && b.pipeline == c.pipeline && b.budget == c.budget)
        else {
            continue;
        };
        let mut bad = Vec::new();
        if c.needed < b.needed - TOLERANCE {
            bad.push("needed");
        }
        if let (Some(x), Some(y)) = (b.user_fact, c.user_fact)
            && y < x - TOLERANCE
        {
            bad.push("user facts");
        }
        if let (Some(x), Some(y)) = (b.fit(), c.fit())
            && y < x - 1e-9
        {
            bad.push("fit");
        }
        if c.violations > b.violations {
            bad.push("violations");
        }
        println!(
            "{} {} {}: needed {:.4} → {:.4}, user facts {} → {}, fit {} → {}, fill {} → {}, violations {} → {}{}",
            c.file,
            c.pipeline,
            c.budget,
            b.needed,
            c.needed,
            crate::fmt_opt(b.user_fact, 4),
            crate::fmt_opt(c.user_fact, 4),
            crate::fmt_opt(b.fit(), 3),
            crate::fmt_opt(c.fit(), 3),
            crate::fmt_opt(b.fill, 3),
            crate::fmt_opt(c.fill, 3),
            b.violations,
            c.violations,
            if bad.is_empty() {
                String::new()
            } else {
                format!("  REGRESSION({})", bad.join(", "))
            }
        );
        regressions += bad.len();
    }
    regressions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o200k() -> Arc<dyn TokenCounter> {
        counter_named(COUNTER).unwrap()
    }

    fn roles(conv: &Conversation) -> Vec<String> {
        conv.messages
            .iter()
            .map(|m| m.role().as_str().to_string())
            .collect()
    }

    /// An OpenAI agent session: system, then `turns` × (user, assistant call,
    /// tool result, assistant answer), each text `words` words long.
    fn session(turns: usize, words: usize) -> Conversation {
        let text = |tag: &str| {
            (0..words)
                .map(|i| format!("{tag}{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut msgs =
            vec![serde_json::json!({"role": "system", "content": "You are a careful agent."})];
        for t in 0..turns {
            msgs.push(serde_json::json!({"role": "user", "content": text(&format!("u{t}x"))}));
            msgs.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("c{t}"), "type": "function",
                 "function": {"name": "read", "arguments": format!("{{\"path\": \"src/f{t}.rs\"}}")}}]}));
            msgs.push(serde_json::json!({"role": "tool", "tool_call_id": format!("c{t}"), "content": text(&format!("r{t}x"))}));
            msgs.push(serde_json::json!({"role": "assistant", "content": text(&format!("a{t}x"))}));
        }
        Conversation::parse(&serde_json::json!({"id": "s", "messages": msgs}).to_string()).unwrap()
    }

    #[test]
    fn under_the_budget_nothing_changes() {
        let c = o200k();
        let conv = session(3, 20);
        let total = conversation_tokens(&conv, c.as_ref());
        let mut out = conv.clone();
        truncate(&mut out, total, c.as_ref());
        assert_eq!(out.to_json_string(), conv.to_json_string());
    }

    #[test]
    fn keeps_system_and_newest_whole_exchanges_within_the_budget() {
        let c = o200k();
        let conv = session(10, 50);
        let total = conversation_tokens(&conv, c.as_ref());
        for budget in [total / 2, total / 4, total / 10] {
            let mut out = conv.clone();
            truncate(&mut out, budget, c.as_ref());
            assert!(
                conversation_tokens(&out, c.as_ref()) <= budget,
                "budget {budget}"
            );
            assert!(out.messages.len() < conv.messages.len());
            assert_eq!(out.messages[0].role(), Role::System);
            // A suffix of the input, after the system message.
            let n = out.messages.len();
            let tail: Vec<String> = conv.messages[conv.messages.len() - (n - 1)..]
                .iter()
                .map(|m| m.text().to_string())
                .collect();
            let kept: Vec<String> = out.messages[1..]
                .iter()
                .map(|m| m.text().to_string())
                .collect();
            assert_eq!(kept, tail);
            // Every tool result kept has its call, every call its result.
            assert!(
                !ctxpress::core::validate::introduces_violations(
                    &ctxpress::validate(&conv),
                    &ctxpress::validate(&out)
                ),
                "{:?}",
                roles(&out)
            );
            assert_ne!(out.messages[1].role(), Role::Tool);
        }
    }

    #[test]
    fn a_call_and_its_results_go_together() {
        let c = o200k();
        // The last unit is the call with its result; room for the result
        // alone is not enough to keep the result.
        let conv = Conversation::parse(
            &serde_json::json!([
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "please read the file"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a.rs\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"b.rs\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "fn a() {}"},
                {"role": "tool", "tool_call_id": "c2", "content": "fn b() {}"}
            ])
            .to_string(),
        )
        .unwrap();
        let tokens: Vec<usize> = conv
            .messages
            .iter()
            .map(|m| count_message(c.as_ref(), m))
            .collect();
        // Room for system and the two results, not for the call too.
        let budget = tokens[0] + tokens[3] + tokens[4];
        let mut out = conv.clone();
        truncate(&mut out, budget, c.as_ref());
        assert_eq!(roles(&out), ["system"]);
        // Room for system and the whole exchange: kept whole, the user message not.
        let budget = tokens[0] + tokens[2] + tokens[3] + tokens[4];
        let mut out = conv.clone();
        truncate(&mut out, budget, c.as_ref());
        assert_eq!(roles(&out), ["system", "assistant", "tool", "tool"]);
    }

    #[test]
    fn an_anthropic_result_carrier_stays_with_its_call() {
        let c = o200k();
        let conv = Conversation::parse(
            &serde_json::json!({"system": "be brief", "messages": [
                {"role": "user", "content": "list the files please"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "listing"},
                    {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a.rs b.rs c.rs"}]},
                {"role": "assistant", "content": "three files"}
            ]})
            .to_string(),
        )
        .unwrap();
        let tokens: Vec<usize> = conv
            .messages
            .iter()
            .map(|m| count_message(c.as_ref(), m))
            .collect();
        let fixed = envelope_tokens(&conv, c.as_ref());
        assert!(fixed > 0);
        // The answer and the result carrier fit, not its call: only the answer stays.
        let budget = fixed + tokens[3] + tokens[2];
        let mut out = conv.clone();
        truncate(&mut out, budget, c.as_ref());
        assert_eq!(roles(&out), ["assistant"]);
        assert_eq!(out.messages[0].text(), "three files");
        let budget = fixed + tokens[1] + tokens[2] + tokens[3];
        let mut out = conv.clone();
        truncate(&mut out, budget, c.as_ref());
        assert_eq!(roles(&out), ["assistant", "user", "assistant"]);
    }

    #[test]
    fn the_section_replaces_its_old_self() {
        let doc = "# B\n\n## Budgets\n\nx\n\n## Search\n\ny\n";
        let a = replace_section(doc, "## Needed facts under a budget\n\none\n");
        assert_eq!(
            a,
            "# B\n\n## Budgets\n\nx\n\n## Needed facts under a budget\n\none\n\n## Search\n\ny\n"
        );
        let b = replace_section(&a, "\n## Needed facts under a budget\n\ntwo\n");
        assert_eq!(b, a.replace("one", "two"));
        let end = replace_section("# B\n", "## Needed facts under a budget\n\nz\n");
        assert_eq!(end, "# B\n\n## Needed facts under a budget\n\nz\n");
        assert_eq!(
            replace_section(&end, "## Needed facts under a budget\n\nw\n"),
            end.replace('z', "w")
        );
    }
}
