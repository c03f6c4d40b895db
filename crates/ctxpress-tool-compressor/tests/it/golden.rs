//! Golden tests of the summary formats, one per agent dialect:
//! `tests/data/<dialect>.input.json` run through the pipeline (protected tail
//! 2, last result kept, information check off so every format shows) must give
//! `<dialect>.expected.json`, and `expand` must restore the input. Set
//! `UPDATE_GOLDEN=1` to rewrite the expected files after a reviewed change.
#![allow(missing_docs)]

use ctxpress_core::archive::{archive, expand};
use ctxpress_core::{Conversation, MemoryArchive, Pipeline, StageContext, StageStatus, validate};
use ctxpress_tool_compressor::{ToolCompressor, ToolCompressorConfig};
use std::path::PathBuf;

fn run(dialect: &str) -> (Conversation, Conversation, ctxpress_core::Report) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let text = std::fs::read_to_string(dir.join(format!("{dialect}.input.json"))).unwrap();
    let input = Conversation::parse(&text).unwrap();
    let mut conv = input.clone();
    let mut p = Pipeline::default();
    p.push(Box::new(ToolCompressor::new(ToolCompressorConfig {
        protected_tail: 2,
        keep_last: 1,
        min_chars: 300,
        chars_per_lost_term: 0,
        ..Default::default()
    })));
    let report = p.run(&mut conv, &StageContext::default());
    assert_eq!(report.stages[0].status, StageStatus::Applied, "{dialect}");
    assert!(validate(&conv).len() <= validate(&input).len(), "{dialect}");
    let out = conv.to_json_string();
    let exp_path = dir.join(format!("{dialect}.expected.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&exp_path, format!("{out}\n")).unwrap();
    }
    let expected = std::fs::read_to_string(&exp_path).unwrap();
    assert!(
        out.trim_end() == expected.trim_end(),
        "{dialect}: output differs from {exp_path:?} (UPDATE_GOLDEN=1 rewrites it)"
    );
    // Everything is archived: expand gives the input back byte for byte.
    let mem = MemoryArchive::new();
    archive(&input, &conv, &mem).unwrap();
    assert_eq!(
        expand(&conv, &mem).unwrap().to_json_string(),
        input.to_json_string(),
        "{dialect}"
    );
    (input, conv, report)
}

fn summaries(c: &Conversation) -> Vec<String> {
    c.messages
        .iter()
        .flat_map(|m| m.tool_results())
        .filter(|r| r.text.starts_with("[summary: tool "))
        .map(|r| r.text.lines().next().unwrap_or("").to_string())
        .collect()
}

fn ids(c: &Conversation) -> Vec<String> {
    c.messages
        .iter()
        .flat_map(|m| {
            m.tool_calls()
                .into_iter()
                .map(|x| x.id.to_string())
                .chain(m.tool_results().into_iter().map(|r| r.call_id.to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn check_shape(input: &Conversation, out: &Conversation) {
    assert_eq!(ids(input), ids(out));
    let roles = |c: &Conversation| -> Vec<String> {
        c.messages
            .iter()
            .map(|m| m.role_str().to_string())
            .collect()
    };
    assert_eq!(roles(input), roles(out));
    assert!(out.size() < input.size());
}

#[test]
fn claude_code() {
    let (i, o, _) = run("claude_code");
    check_shape(&i, &o);
    assert_eq!(
        summaries(&o),
        vec![
            "[summary: tool Read /repo/frontend/src/app/core/auth.service.ts: 32 lines; outline: 11 declarations]",
            "[summary: tool Bash `cd /repo/frontend && npx jest 2>&1 | tail -40`, exit 1: 27 lines]",
        ]
    );
}

#[test]
fn codex() {
    let (i, o, _) = run("codex");
    check_shape(&i, &o);
    assert_eq!(
        summaries(&o),
        vec![
            "[summary: tool exec_command `sed -n '1,40p' backend/app/bookings.py`, exit 0: 24 lines; outline: 10 declarations]",
            "[summary: tool exec_command `go build ./...`, exit 1: 17 lines]",
        ]
    );
}

#[test]
fn openhands() {
    let (i, o, _) = run("openhands");
    check_shape(&i, &o);
    assert_eq!(
        summaries(&o),
        vec![
            "[summary: tool str_replace_editor read /workspace/app/bookings.py: 24 lines; outline: 10 declarations]",
            "[summary: tool execute_bash `pip install -r requirements.txt`, exit 0: 19 lines]",
        ]
    );
}

#[test]
fn swe_agent() {
    let (i, o, _) = run("swe_agent");
    check_shape(&i, &o);
    assert_eq!(
        summaries(&o),
        vec![
            "[summary: tool bash `open src/app/bookings.py`: 24 lines; outline: 10 declarations]",
            "[summary: tool bash `search_dir get_session src`: 9 matches in 5 files]",
        ]
    );
}

#[test]
fn anthropic_blocks() {
    let (i, o, _) = run("anthropic");
    check_shape(&i, &o);
    assert_eq!(
        summaries(&o),
        vec![
            "[summary: tool Read /repo/src/auth.service.ts: 32 lines; outline: 11 declarations]",
            "[summary: tool Bash `npx jest`: 26 lines]",
        ]
    );
}
