//! Golden tests: inputs and reviewed expected outputs under `tests/data/`.
//! `UPDATE_GOLDEN=1 cargo test -p ctxpress-summarizer --test golden` rewrites
//! the expected values (review the diff before committing).

use ctxpress_summarizer::text::{
    Budget, code_split, extract_entities, format_summary, is_structured, score_sentence, sentences,
    summarize, summarize_structured, summarize_text,
};
use serde_json::{Value, json};
use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Run `f` over every case of `name`, comparing (or, with UPDATE_GOLDEN,
/// rewriting) the fields it returns.
fn golden(name: &str, f: impl Fn(&Value) -> Vec<(&'static str, Value)>) {
    let p = path(name);
    let text = std::fs::read_to_string(&p).expect("golden file");
    let mut cases: Vec<Value> = serde_json::from_str(&text).expect("golden json");
    assert!(!cases.is_empty(), "{name} has no cases");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for (i, case) in cases.iter_mut().enumerate() {
        for (field, got) in f(case) {
            if update {
                case[field] = got;
            } else if case[field] != got {
                failures.push(format!(
                    "{name}[{i}].{field}:\n  expected {}\n  got      {}",
                    case[field], got
                ));
            }
        }
    }
    if update {
        let mut out = serde_json::to_string_pretty(&cases).expect("serializes");
        out.push('\n');
        std::fs::write(&p, out).expect("writes");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn s(v: &Value, k: &str) -> String {
    v[k].as_str().expect("string field").to_string()
}

#[test]
fn golden_sentences() {
    golden("sentences.json", |c| {
        let input = s(c, "input");
        let got: Vec<&str> = sentences(&input).iter().map(|x| x.text).collect();
        vec![("expected", json!(got))]
    });
}

#[test]
fn golden_scores() {
    golden("scores.json", |c| {
        vec![("expected", json!(score_sentence(&s(c, "sentence"))))]
    });
}

#[test]
fn golden_summaries() {
    golden("summaries.json", |c| {
        let input = s(c, "input");
        let got = match c["budget"].as_u64() {
            Some(b) => summarize(&input, b as usize),
            None => summarize_text(&input, &Budget::default()),
        };
        vec![("expected", json!(got))]
    });
}

#[test]
fn golden_entities() {
    golden("entities.json", |c| {
        vec![("expected", json!(extract_entities(&s(c, "input"), 10)))]
    });
}

#[test]
fn golden_structured() {
    golden("structured.json", |c| {
        let input = s(c, "input");
        let st = is_structured(&input);
        let summary = st.then(|| summarize_structured(&input, 200));
        vec![("structured", json!(st)), ("expected", json!(summary))]
    });
}

#[test]
fn golden_code_split() {
    golden("code_split.json", |c| {
        vec![(
            "expected",
            json!(code_split(&s(c, "input"), &Budget::default(), None)),
        )]
    });
}

#[test]
fn golden_formats() {
    golden("formats.json", |c| {
        let entities: Vec<String> = c["entities"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let got = format_summary(
            &s(c, "text"),
            c["merged"].as_u64().unwrap_or(0) as usize,
            &entities,
            c["id"].as_str(),
        );
        vec![("expected", json!(got))]
    });
}
