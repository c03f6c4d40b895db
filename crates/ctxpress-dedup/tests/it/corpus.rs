//! Golden output on a small MIT excerpt shape, and a sampled run on the shared
//! agent-session corpus (read at test time from ../shared; a missing corpus fails the test).

use ctxpress_core::archive::{archive, expand};
use ctxpress_core::{Conversation, MemoryArchive, Pipeline, StageContext, StageStatus, validate};
use ctxpress_dedup::{Dedup, DedupConfig};
use std::io::BufRead;
use std::path::Path;

fn pipeline(cfg: DedupConfig) -> Pipeline {
    let mut p = Pipeline::default();
    p.push(Box::new(Dedup::new(cfg).unwrap()));
    p
}

#[test]
fn golden_reread_session() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let input = std::fs::read_to_string(dir.join("reread.json")).unwrap();
    let want = std::fs::read_to_string(dir.join("reread.expected.json")).unwrap();
    let mut conv = Conversation::parse(input.trim_end()).unwrap();
    let r = pipeline(DedupConfig {
        fuzzy: true,
        delta: true,
        ..DedupConfig::default()
    })
    .run(&mut conv, &StageContext::default());
    assert_eq!(r.stages[0].status, StageStatus::Applied);
    let got = conv.to_json_string();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(dir.join("reread.expected.json"), format!("{got}\n")).unwrap();
    }
    assert_eq!(got, want.trim_end());
}

#[test]
fn sampled_agent_sessions_round_trip() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/coding_agent_sessions.jsonl");
    let f = std::fs::File::open(&path).unwrap_or_else(|e| {
        panic!(
            "corpus file {} is missing ({e}): this test needs the shared corpus beside the repository",
            path.display()
        )
    });
    // Every 12th conversation, at most 3, to stay fast in debug builds.
    let lines = std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .step_by(12)
        .take(3);
    let mut removed = 0;
    for line in lines {
        let input = Conversation::parse(&line).unwrap();
        let mut out = input.clone();
        let r = pipeline(DedupConfig {
            fuzzy: true,
            delta: true,
            ..DedupConfig::default()
        })
        .run(&mut out, &StageContext::default());
        assert_eq!(r.stages[0].status, StageStatus::Applied);
        assert!(validate(&out).len() <= validate(&input).len());
        removed += r.chars_before - r.chars_after;
        let arch = MemoryArchive::new();
        archive(&input, &out, &arch).unwrap();
        assert_eq!(expand(&out, &arch).unwrap().to_json_string(), line);
    }
    assert!(removed > 0, "dedup found nothing in the sampled sessions");
}
