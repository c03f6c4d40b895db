//! Run the stale pruner over a JSONL file (one `{"id", "messages", ...}` a line)
//! through the core pipeline and write the output JSONL.
//!
//! `cargo run --release -p ctxpress-stale-pruner --example measure -- IN.jsonl OUT.jsonl [keep|keep_last]`
//!
//! Prints per-rule counts, messages, tokens and chars before/after, and the
//! stage status (applied or reverted) per conversation that was not applied.

use ctxpress_core::{Conversation, Pipeline, StageContext};
use ctxpress_stale_pruner::{PartialEdits, StalePruner, StalePrunerConfig};
use std::collections::BTreeMap;
use std::io::{BufRead, BufWriter, Write};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(input), Some(output)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: measure IN.jsonl OUT.jsonl [keep|keep_last]");
        std::process::exit(2);
    };
    let partial = match args.get(3).map(String::as_str) {
        Some("keep_last") => PartialEdits::KeepLast,
        _ => PartialEdits::Keep,
    };
    let cfg = StalePrunerConfig {
        partial_edits: partial,
        ..Default::default()
    };
    let mut pipeline = Pipeline::default();
    pipeline.push(Box::new(StalePruner::new(cfg)));
    let ctx = StageContext::default();
    let reader = std::io::BufReader::new(std::fs::File::open(input)?);
    let mut out = BufWriter::new(std::fs::File::create(output)?);
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let (mut mb, mut ma, mut tb, mut ta, mut cb, mut ca) = (0, 0, 0, 0, 0, 0);
    let mut micros = 0u128;
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut conv = Conversation::parse(&line)?;
        let report = pipeline.run(&mut conv, &ctx);
        for s in &report.stages {
            if s.status != ctxpress_core::StageStatus::Applied {
                eprintln!("{:?}: {:?}", conv.id(), s.status);
            }
            for (k, v) in &s.outcome.counters {
                *totals.entry(k.clone()).or_default() += v;
            }
        }
        mb += report.messages_before;
        ma += report.messages_after;
        tb += report.tokens_before;
        ta += report.tokens_after;
        cb += report.chars_before;
        ca += report.chars_after;
        micros += report.micros;
        writeln!(out, "{}", conv.to_json_string())?;
    }
    out.flush()?;
    println!("partial_edits = {partial:?}");
    println!(
        "Removed: {} stale reads, {} stale edits, {} stale bash, {} failed bash; {} read references",
        totals.get("stale_reads").unwrap_or(&0),
        totals.get("superseded_edits").unwrap_or(&0),
        totals.get("stale_commands").unwrap_or(&0),
        totals.get("failed_commands").unwrap_or(&0),
        totals.get("read_references").unwrap_or(&0),
    );
    println!("messages {mb} -> {ma}, tokens {tb} -> {ta}, chars {cb} -> {ca}");
    println!("time {:.1} ms", micros as f64 / 1000.0);
    Ok(())
}
