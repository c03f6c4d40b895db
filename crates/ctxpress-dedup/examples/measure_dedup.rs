//! Run `dedup` over a JSONL file (one conversation a line) and report chars
//! removed and time.
//!
//! ```text
//! cargo run --release -p ctxpress-dedup --example measure_dedup -- IN.jsonl OUT.jsonl [--fuzzy] [--delta] [--threshold T] [--min-chars N] [--recency N]
//! ```

use ctxpress_core::{Conversation, Pipeline, StageContext, StageStatus};
use ctxpress_dedup::{Dedup, DedupConfig};
use std::io::{BufRead, BufWriter, Write};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cfg = DedupConfig::default();
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--fuzzy" => cfg.fuzzy = true,
            "--delta" => cfg.delta = true,
            "--no-exact" => cfg.exact = false,
            "--threshold" => cfg.threshold = val()?.parse()?,
            "--min-chars" => cfg.min_chars = val()?.parse()?,
            "--recency" => cfg.recency_window = val()?.parse()?,
            other => files.push(other.to_string()),
        }
    }
    let [input, output] = files.as_slice() else {
        return Err("usage: measure IN.jsonl OUT.jsonl [--fuzzy] [--delta] [--threshold T]".into());
    };
    let mut pipeline = Pipeline::default();
    pipeline.push(Box::new(Dedup::new(cfg)?));
    let ctx = StageContext::default();
    let reader = std::io::BufReader::new(std::fs::File::open(input)?);
    let mut out = BufWriter::new(std::fs::File::create(output)?);
    let (mut before, mut after, mut convs, mut reverted) = (0usize, 0usize, 0usize, 0usize);
    let mut counters = std::collections::BTreeMap::<String, u64>::new();
    let mut micros = 0u128;
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut conv = Conversation::parse(&line)?;
        let t = Instant::now();
        let report = pipeline.run(&mut conv, &ctx);
        micros += t.elapsed().as_micros();
        before += report.chars_before;
        after += report.chars_after;
        convs += 1;
        for s in &report.stages {
            if s.status != StageStatus::Applied {
                reverted += 1;
                eprintln!("conversation {convs}: {:?}", s.status);
            }
            for (k, v) in &s.outcome.counters {
                *counters.entry(k.clone()).or_default() += v;
            }
        }
        writeln!(out, "{}", conv.to_json_string())?;
    }
    out.flush()?;
    println!(
        "conversations {convs}  chars {before} -> {after}  removed {} ({:.2}%)  time {:.1} ms  reverted {reverted}",
        before - after,
        100.0 * (before - after) as f64 / before.max(1) as f64,
        micros as f64 / 1000.0
    );
    println!("{counters:?}");
    Ok(())
}
