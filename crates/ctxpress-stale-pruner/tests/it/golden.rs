//! Golden tests, one per agent dialect: `tests/data/<dialect>.input.json` run
//! through the pipeline (protected tail 2) must give `<dialect>.expected.json`.
//! Set `UPDATE_GOLDEN=1` to rewrite the expected files after a reviewed change.
#![allow(missing_docs)]

use ctxpress_core::{Conversation, Pipeline, StageContext, StageStatus, validate};
use ctxpress_stale_pruner::{StalePruner, StalePrunerConfig};
use std::path::PathBuf;

fn run(dialect: &str) -> (String, String, ctxpress_core::Report) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let input = std::fs::read_to_string(dir.join(format!("{dialect}.input.json"))).unwrap();
    let mut conv = Conversation::parse(&input).unwrap();
    let mut p = Pipeline::default();
    p.push(Box::new(StalePruner::new(StalePrunerConfig {
        protected_tail: 2,
        ..Default::default()
    })));
    let report = p.run(&mut conv, &StageContext::default());
    assert_eq!(report.stages[0].status, StageStatus::Applied, "{dialect}");
    let before = validate(&Conversation::parse(&input).unwrap()).len();
    assert!(
        validate(&conv).len() <= before,
        "{dialect}: {:?}",
        validate(&conv)
    );
    let out = conv.to_json_string();
    let exp_path = dir.join(format!("{dialect}.expected.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&exp_path, &out).unwrap();
    }
    let expected = std::fs::read_to_string(&exp_path).unwrap();
    assert_eq!(out, expected, "{dialect}: output differs from {exp_path:?}");
    (input, out, report)
}

fn counters(r: &ctxpress_core::Report) -> Vec<(String, u64)> {
    r.stages[0]
        .outcome
        .counters
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn c(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn claude_code() {
    let (i, o, r) = run("claude_code");
    assert!(o.len() < i.len());
    assert_eq!(
        counters(&r),
        c(&[
            ("failed_commands", 0),
            ("stale_commands", 2),
            ("stale_reads", 1),
            ("superseded_edits", 1)
        ]
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .collect::<Vec<_>>())
    );
}

#[test]
fn codex() {
    let (_, _, r) = run("codex");
    assert_eq!(
        counters(&r),
        c(&[
            ("failed_commands", 1),
            ("stale_commands", 1),
            ("stale_reads", 1)
        ])
    );
}

#[test]
fn openhands() {
    let (_, _, r) = run("openhands");
    assert_eq!(
        counters(&r),
        c(&[("failed_commands", 1), ("stale_reads", 1)])
    );
}

#[test]
fn cline() {
    let (_, _, r) = run("cline");
    assert_eq!(
        counters(&r),
        c(&[("stale_commands", 1), ("stale_reads", 1)])
    );
}

#[test]
fn gemini() {
    let (_, _, r) = run("gemini");
    assert_eq!(
        counters(&r),
        c(&[("stale_commands", 1), ("stale_reads", 1)])
    );
}

#[test]
fn swe_agent() {
    let (i, o, r) = run("swe_agent");
    assert!(o.len() < i.len());
    assert_eq!(counters(&r), c(&[("stale_reads", 1)]));
}
