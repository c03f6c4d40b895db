//! Golden tests of the structured summaries (JSON, CSV, logs): each
//! `tests/golden/NAME.in` summarized with the default limits must give
//! `tests/golden/NAME.out`. A name ending in `.log` is a command's output
//! (`tail -n 200 app.log`), any other the result of a tool `api_call`. Set
//! `UPDATE_GOLDEN=1` to rewrite the `.out` files after a reviewed change.
#![allow(missing_docs)]

use ctxpress_tool_compressor::{Kind, Limits, Subject, summarize};
use std::path::PathBuf;

fn summary_of(name: &str, text: &str, limits: &Limits) -> String {
    let (kind, subject) = if name.ends_with(".log") {
        (
            Kind::Command,
            Subject {
                tool: "Bash".into(),
                command: Some("tail -n 200 app.log".into()),
                ..Subject::default()
            },
        )
    } else {
        (
            Kind::Other,
            Subject {
                tool: "api_call".into(),
                ..Subject::default()
            },
        )
    };
    summarize(kind, &subject, text, limits)
}

#[test]
fn structured_summaries_match_the_golden_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            Some(name.strip_suffix(".in")?.to_string())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut differ = Vec::new();
    for name in &names {
        let text = std::fs::read_to_string(dir.join(format!("{name}.in"))).unwrap();
        let got = summary_of(name, &text, &Limits::default());
        assert!(got.starts_with("[summary: tool "), "{name}: {got}");
        assert!(
            got.chars().count() < text.chars().count(),
            "{name}: summary not shorter"
        );
        let out = dir.join(format!("{name}.out"));
        if update {
            std::fs::write(&out, format!("{got}\n")).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&out).unwrap_or_default();
        if got != want.trim_end_matches('\n') {
            differ.push(format!("{name}:\n--- got\n{got}\n--- want\n{want}"));
        }
    }
    assert!(
        differ.is_empty(),
        "summaries differ from tests/golden/*.out (UPDATE_GOLDEN=1 rewrites them):\n{}",
        differ.join("\n")
    );
}

/// Tight limits (the ladder's `max_outline = 8`) give shorter summaries of
/// the same texts, each still labeled and never longer than its text.
#[test]
fn tight_limits_give_shorter_summaries() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let tight = Limits {
        max_outline: 8,
        ..Limits::default()
    };
    for name in ["records", "nested_api", "flat_object", "sales.csv"] {
        let text = std::fs::read_to_string(dir.join(format!("{name}.in"))).unwrap();
        let wide = summary_of(name, &text, &Limits::default());
        let narrow = summary_of(name, &text, &tight);
        assert!(narrow.len() <= wide.len(), "{name}:\n{narrow}\n{wide}");
        assert!(narrow.len() <= 8 * 160 / 2 + 200, "{name}: {narrow}");
    }
}
