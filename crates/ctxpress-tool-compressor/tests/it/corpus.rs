//! A sampled run on the shared agent-session corpus (read at test time from
//! ../shared; a missing corpus fails the test): the stage applies, adds no violation,
//! compresses, and `expand` restores every input line byte for byte.
#![allow(missing_docs)]

use ctxpress_core::archive::{archive, expand};
use ctxpress_core::{Conversation, MemoryArchive, Pipeline, StageContext, StageStatus, validate};
use ctxpress_tool_compressor::{PREFIX, ToolCompressor};
use std::io::BufRead;
use std::path::Path;

fn sample(file: &str, step: usize, take: usize) -> Option<Vec<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus")
        .join(file);
    let f = std::fs::File::open(&path).unwrap_or_else(|e| {
        panic!(
            "corpus file {} is missing ({e}): this test needs the shared corpus beside the repository",
            path.display()
        )
    });
    Some(
        std::io::BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .step_by(step)
            .take(take)
            .collect(),
    )
}

fn run(line: &str) -> (usize, usize) {
    let input = Conversation::parse(line).unwrap();
    let mut out = input.clone();
    let mut p = Pipeline::default();
    p.push(Box::new(ToolCompressor::default()));
    let r = p.run(&mut out, &StageContext::default());
    assert_eq!(r.stages[0].status, StageStatus::Applied);
    assert!(validate(&out).len() <= validate(&input).len());
    assert_eq!(out.messages.len(), input.messages.len());
    let summaries = out
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .filter(|x| x.text.starts_with(PREFIX))
        .count();
    let arch = MemoryArchive::new();
    archive(&input, &out, &arch).unwrap();
    assert_eq!(expand(&out, &arch).unwrap().to_json_string(), line);
    (r.chars_before - r.chars_after, summaries)
}

#[test]
fn sampled_agent_sessions_compress_and_round_trip() {
    // Every 12th conversation, at most 3, to stay fast in debug builds.
    let Some(lines) = sample("coding_agent_sessions.jsonl", 12, 3) else {
        return;
    };
    let (mut saved, mut summaries) = (0, 0);
    for line in &lines {
        let (s, n) = run(line);
        saved += s;
        summaries += n;
    }
    assert!(
        saved > 0 && summaries > 0,
        "nothing summarized in the sample"
    );
}

#[test]
fn other_dialects_round_trip() {
    for (file, step) in [("swe_agent_trajs.jsonl", 4), ("taubench_airline.jsonl", 40)] {
        let Some(lines) = sample(file, step, 4) else {
            return;
        };
        for line in &lines {
            run(line);
        }
    }
}
