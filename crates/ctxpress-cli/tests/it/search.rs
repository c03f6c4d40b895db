//! `ctxpress search` over an archive written by `ctxpress compress --archive`.
#![allow(missing_docs)]

use crate::common;

use common::{bin, data};
use predicates::prelude::*;

#[test]
fn compress_then_search_finds_archived_words() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let out = dir.path().join("out.jsonl");
    bin()
        .args(["compress", "--budget", "8000", "--archive"])
        .arg(&db)
        .arg("-o")
        .arg(&out)
        .arg(data("swe_agent.jsonl"))
        .assert()
        .success();

    // A class name read in an exchange the budget compressed away.
    let conv = "sweagent-3ff21d43335a";
    let o = bin()
        .args(["search", "TimeCapsule", "--archive"])
        .arg(&db)
        .assert()
        .success();
    let text = String::from_utf8(o.get_output().stdout.clone()).unwrap();
    let first: Vec<&str> = text.lines().next().unwrap().splitn(4, "  ").collect();
    assert_eq!(first[0], conv, "{text}");
    assert!(
        !first[1].starts_with("doc:"),
        "a record of changed messages: {text}"
    );
    assert!(first[3].contains("«TimeCapsule»"), "{text}");

    // --json: one object a line, best first, filtered by conversation.
    let o = bin()
        .args([
            "search",
            "missing_colon.py",
            "--json",
            "--limit",
            "3",
            "--archive",
        ])
        .arg(&db)
        .args(["--conversation", "sweagent-dcb4fae88692"])
        .assert()
        .success();
    let text = String::from_utf8(o.get_output().stdout.clone()).unwrap();
    let hits: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!hits.is_empty() && hits.len() <= 3, "{text}");
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    for h in &hits {
        assert_eq!(h["conversation"], "sweagent-dcb4fae88692");
        assert_eq!(h["kind"], "original");
        assert!(h["key"].is_string() && h["role"].is_string() && h["pos"].is_u64());
        assert!(
            h["snippet"]
                .as_str()
                .unwrap()
                .contains("«missing_colon.py»")
        );
    }

    // Another conversation has none; FTS5 syntax is plain text.
    bin()
        .args(["search", "missing_colon.py", "--archive"])
        .arg(&db)
        .args(["--conversation", conv])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no matches"));
    for q in ["\"unbalanced", "NOT -x:*", "(", "日本語 🦀"] {
        bin()
            .args(["search", q, "--archive"])
            .arg(&db)
            .assert()
            .code(predicate::in_iter([0, 1]));
    }
}

#[test]
fn missing_archive_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.db");
    bin()
        .args(["search", "x", "--archive"])
        .arg(&db)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no such archive"));
    assert!(!db.exists(), "not created");
}
