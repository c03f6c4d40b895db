//! End-to-end tests of the `ctxpress` binary.
#![allow(missing_docs)]

use crate::common;

use common::{bin, data};
use predicates::prelude::*;
use std::path::{Path, PathBuf};

const TOOL_DOC: &str = r#"[{"role": "user", "content": "run it"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]"#;

/// `compress ARGS -o OUT FILE` on the shipped document and batch writes
/// each input back byte for byte.
fn assert_compress_writes_input_back(args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    for name in ["single.json", "swe_agent.jsonl"] {
        let out = dir.path().join(name);
        bin()
            .arg("compress")
            .args(args)
            .arg("-o")
            .arg(&out)
            .arg(data(name))
            .assert()
            .success();
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(data(name)).unwrap(),
            "{args:?} {name}"
        );
    }
}

#[test]
fn identity_keeps_documents_and_jsonl_byte_identical() {
    assert_compress_writes_input_back(&["--preset", "identity"]);
}

#[test]
fn stdin_to_stdout() {
    bin()
        .args(["compress", "-"])
        .write_stdin(TOOL_DOC)
        .assert()
        .success()
        .stdout(TOOL_DOC);
}

#[test]
fn malformed_json_names_file_line_column_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("bad.json");
    std::fs::write(&inp, "[\n  {\"role\": \"user\", \"content\": \"x\",}\n]").unwrap();
    let out = dir.path().join("out.json");
    bin()
        .args(["compress", "-o"])
        .arg(&out)
        .arg(&inp)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.json:2:").and(predicate::str::contains("error:")));
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_to_string(&inp).unwrap(),
        "[\n  {\"role\": \"user\", \"content\": \"x\",}\n]"
    );
}

#[test]
fn malformed_jsonl_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("bad.jsonl");
    std::fs::write(
        &inp,
        "{\"id\": 1, \"messages\": []}\n{\"id\": 2, \"messages\": [}\n",
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    bin()
        .args(["compress", "-o"])
        .arg(&out)
        .arg(&inp)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.jsonl:2:"));
    assert!(!out.exists());
}

#[test]
fn wrong_shape_says_what_was_expected() {
    bin()
        .args(["compress", "-"])
        .write_stdin(r#"{"conversation": []}"#)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "expected an object with a `messages` array",
        ));
    bin()
        .args(["compress", "-"])
        .write_stdin("[1, 2]")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "messages[0]: expected a message object",
        ));
}

#[test]
fn missing_file_and_empty_input_exit_2() {
    bin()
        .args(["compress", "/nonexistent/x.json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read"));
    bin()
        .args(["compress", "-"])
        .write_stdin("  \n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("empty input"));
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("e.jsonl");
    std::fs::write(&empty, "").unwrap();
    let out = dir.path().join("o.jsonl");
    bin()
        .args(["compress", "-o"])
        .arg(&out)
        .arg(&empty)
        .assert()
        .code(2);
    assert!(!out.exists());
}

#[test]
fn refuses_to_overwrite_input() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("c.json");
    std::fs::write(&inp, TOOL_DOC).unwrap();
    bin()
        .args(["compress", "-o"])
        .arg(&inp)
        .arg(&inp)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("refusing to overwrite"));
    assert_eq!(std::fs::read_to_string(&inp).unwrap(), TOOL_DOC);
}

#[test]
fn unknown_preset_and_bad_config_suggest() {
    bin()
        .args(["compress", "--preset", "identiy", "-"])
        .write_stdin(TOOL_DOC)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `identity`"));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("p.toml");
    std::fs::write(&cfg, "version = 1\n[[stages]]\ntype = \"identit\"\n").unwrap();
    bin()
        .args(["compress", "--config"])
        .arg(&cfg)
        .arg("-")
        .write_stdin(TOOL_DOC)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "stages[0]: unknown strategy `identit`",
        ));
}

#[test]
fn validate_reports_violations_with_exit_1() {
    bin()
        .args(["validate", "-"])
        .write_stdin(TOOL_DOC)
        .assert()
        .success();
    let broken = r#"[{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "r"}]"#;
    bin()
        .args(["validate", "-"])
        .write_stdin(broken)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("messages[1]").and(predicate::str::contains("zz")));
}

#[test]
fn stats_json_and_listings() {
    let out = bin()
        .args(["stats", "--json"])
        .arg(data("swe_agent.jsonl"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["conversations"], 13);
    assert!(v["tool_output_share"].as_f64().unwrap() > 0.1);
    assert!(v["roles"]["tool"]["messages"].as_u64().unwrap() > 0);
    bin()
        .arg("presets")
        .assert()
        .success()
        .stdout(predicate::str::contains("identity"));
    bin()
        .args(["presets", "--show", "identity"])
        .assert()
        .success()
        .stdout(predicate::str::contains("version = 1"));
    bin().arg("strategies").assert().success();
}

#[test]
fn compress_with_archive_then_expand_restores_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let out = dir.path().join("out.jsonl");
    let back = dir.path().join("back.jsonl");
    let preset = std::env::var("CTXPRESS_TEST_PRESET").unwrap_or_else(|_| "identity".into());
    bin()
        .args(["compress", "--preset", &preset, "--stats", "--archive"])
        .arg(&db)
        .arg("-o")
        .arg(&out)
        .arg(data("swe_agent.jsonl"))
        .assert()
        .success()
        .stderr(predicate::str::contains("total"));
    bin()
        .args(["expand", "--archive"])
        .arg(&db)
        .arg("-o")
        .arg(&back)
        .arg(&out)
        .assert()
        .success();
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(data("swe_agent.jsonl")).unwrap()
    );
    bin()
        .args(["expand", "--archive", "/nonexistent/a.db"])
        .arg(&out)
        .assert()
        .code(2);
}

/// Invariant 4 on real data: every file of the shared corpus, through the
/// compressing presets, expands back to the same bytes.
#[test]
fn corpus_compresses_and_expands_back_byte_identical() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let entries = std::fs::read_dir(&corpus).unwrap_or_else(|e| {
        panic!(
            "corpus folder {} is missing ({e}): this test needs the shared corpus beside the repository",
            corpus.display()
        )
    });
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let dir = tempfile::tempdir().unwrap();
    for f in &files {
        for preset in ["chat", "agent"] {
            let db = dir.path().join(format!("{preset}.db"));
            let out = dir.path().join("out.jsonl");
            let back = dir.path().join("back.jsonl");
            bin()
                .args(["compress", "--preset", preset, "--archive"])
                .arg(&db)
                .arg("-o")
                .arg(&out)
                .arg(f)
                .assert()
                .success();
            bin()
                .args(["expand", "--archive"])
                .arg(&db)
                .arg("-o")
                .arg(&back)
                .arg(&out)
                .assert()
                .success();
            assert!(
                std::fs::read(&back).unwrap() == std::fs::read(f).unwrap(),
                "{} with {preset} does not expand back",
                f.display()
            );
            std::fs::remove_file(&db).unwrap();
        }
    }
}

#[test]
fn classify_prints_one_json_line_per_message() {
    let out = bin()
        .args(["classify"])
        .arg(data("single.json"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["index"], i);
        for k in ["role", "tier", "hard", "soft", "decision", "rule"] {
            assert!(l.get(k).is_some(), "missing {k} in {l}");
        }
    }
    assert_eq!(lines[0]["role"], "system");
    assert_eq!(lines[0]["decision"], "preserve");
}

#[test]
fn under_the_budget_the_output_is_the_input_byte_for_byte() {
    // No --preset: the default (agent) runs, but nothing is over the trigger.
    assert_compress_writes_input_back(&["--budget", "100000000"]);
}

#[test]
fn over_the_budget_it_fits_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (out, stats) = (dir.path().join("o.jsonl"), dir.path().join("s.json"));
    bin()
        .args(["compress", "--budget", "8000", "-o"])
        .arg(&out)
        .arg("--stats-json")
        .arg(&stats)
        .arg(data("swe_agent.jsonl"))
        .assert()
        .success();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(v["fits"], true, "{v}");
    let b = &v["report"]["budget"];
    assert_eq!(b["conversations"], 13);
    assert_eq!(b["fitting"], 13);
    assert!(b["triggered"].as_u64().unwrap() > 0);
    assert!(b["tokens_after"].as_u64().unwrap() < b["tokens_before"].as_u64().unwrap());
    assert!(v["statistics"]["messages_protected"].as_u64().unwrap() > 0);
    // No new pairing violation (the inputs' interrupted last calls stay as
    // they were).
    let (a, b) = (
        std::fs::read_to_string(data("swe_agent.jsonl")).unwrap(),
        std::fs::read_to_string(&out).unwrap(),
    );
    for (x, y) in a.lines().zip(b.lines()) {
        let (x, y) = (
            ctxpress::Conversation::parse(x).unwrap(),
            ctxpress::Conversation::parse(y).unwrap(),
        );
        assert!(!ctxpress::core::validate::introduces_violations(
            &ctxpress::validate(&x),
            &ctxpress::validate(&y)
        ));
    }
}

/// `stats --json FILE`'s token count.
fn stats_tokens(file: &Path) -> (u64, serde_json::Value) {
    let out = bin()
        .args(["stats", "--json"])
        .arg(file)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    (v["tokens"].as_u64().unwrap(), v)
}

/// An Anthropic request with a top-level `system` and tool definitions:
/// `stats` counts them as `compress --budget` does (the run's
/// `tokens_before` is the input's `stats`, its `tokens_after` the output's),
/// and the output is at or under the budget.
#[test]
fn stats_and_budget_count_system_and_tool_definitions_alike() {
    let line = |i: usize| {
        format!(
            "Step {i}: we looked at the parser again, rewrote the error path for unterminated \
             strings and ran the whole suite; {} tests passed and the report was saved.",
            100 + i
        )
    };
    let tools: Vec<serde_json::Value> = (0..20)
        .map(|i| {
            serde_json::json!({"name": format!("tool_{i}"),
                "description": format!("Tool number {i}: reads the file at `path` and returns at most `limit` of its lines, numbered, with a note when it was cut."),
                "input_schema": {"type": "object", "properties": {
                    "path": {"type": "string", "description": "File to read, relative to the workspace."},
                    "limit": {"type": "integer"}}, "required": ["path"]}})
        })
        .collect();
    let messages: Vec<serde_json::Value> = (0..30)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": [{"type": "text", "text": line(i).repeat(3)}]})
        })
        .collect();
    let doc = serde_json::json!({"model": "m", "max_tokens": 512,
        "system": "You are a careful coding assistant. Keep answers short.",
        "tools": tools, "messages": messages});
    let dir = tempfile::tempdir().unwrap();
    let (inp, out, report) = (
        dir.path().join("in.json"),
        dir.path().join("out.json"),
        dir.path().join("s.json"),
    );
    std::fs::write(&inp, doc.to_string()).unwrap();
    let (before, v) = stats_tokens(&inp);
    let (system, tool_defs) = (
        v["system_tokens"].as_u64().unwrap(),
        v["tool_definition_tokens"].as_u64().unwrap(),
    );
    assert!(system > 0 && tool_defs > 1000, "{v}");
    let roles: u64 = v["roles"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(before, roles + system + tool_defs, "{v}");
    let budget = system + tool_defs + 800;
    assert!(budget < before);
    bin()
        .args(["compress", "--budget", &budget.to_string(), "-o"])
        .arg(&out)
        .arg("--stats-json")
        .arg(&report)
        .arg(&inp)
        .assert()
        .success();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let b = &r["report"]["budget"];
    assert_eq!(b["tokens_before"].as_u64(), Some(before), "{r}");
    assert_eq!(b["fits"], true, "{r}");
    let (after, _) = stats_tokens(&out);
    assert_eq!(b["tokens_after"].as_u64(), Some(after), "{r}");
    assert!(after <= budget, "{after} > {budget}");
    let text = bin()
        .arg("stats")
        .arg(&inp)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains(&format!(
            "{system} tokens of top-level system, {tool_defs} of tool definitions"
        )),
        "{text}"
    );
}

#[test]
fn a_budget_the_protected_part_exceeds_exits_3_with_the_output_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    bin()
        .args(["compress", "--budget", "10", "-o"])
        .arg(&out)
        .arg(data("single.json"))
        .assert()
        .code(3)
        .stderr(
            predicate::str::contains("does not fit:")
                .and(predicate::str::contains("over the target of 10"))
                .and(predicate::str::contains("1 of 1 conversations do not fit")),
        );
    assert!(
        out.exists(),
        "the output is written even when it cannot fit"
    );
}

#[test]
fn window_flags_are_checked_and_documented() {
    bin()
        .args(["compress", "--trigger", "0.5", "-"])
        .write_stdin(TOOL_DOC)
        .assert()
        .code(2);
    bin()
        .args([
            "compress",
            "--window",
            "1000",
            "--trigger",
            "0.3",
            "--target",
            "0.6",
            "-",
        ])
        .write_stdin(TOOL_DOC)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--trigger"));
    bin()
        .args(["compress", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("[default: agent]")
                .and(predicate::str::contains("--budget"))
                .and(predicate::str::contains("3 some conversation cannot fit")),
        );
    bin().arg("presets").assert().success().stdout(
        ["identity", "chat", "cce", "agent", "hybrid"]
            .iter()
            .fold(predicate::str::contains("identity").boxed(), |p, n| {
                p.and(predicate::str::contains(*n)).boxed()
            }),
    );
}

/// `strategies --show NAME` prints a `[[stages]]` table of every parameter
/// with its default, which builds as it is; a misspelt name gets the
/// closest one.
#[test]
fn strategies_show_prints_a_stage_that_builds() {
    let list = bin().arg("strategies").output().unwrap();
    let names: Vec<String> = String::from_utf8(list.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    for name in &names {
        let o = bin().args(["strategies", "--show", name]).output().unwrap();
        assert!(o.status.success());
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(text.contains(&format!("type = \"{name}\"")), "{text}");
        // Each parameter comes right under its doc line.
        let f = ctxpress::core::registry::find(name).unwrap();
        for (k, doc) in f.params {
            let under = [format!("# {doc}\n{k} = "), format!("# {doc}\n# {k} = ")];
            assert!(
                under.iter().any(|u| text.contains(u.as_str())),
                "{name}: `{k}` is not under its doc line\n{text}"
            );
        }
        let cfg = ctxpress::PipelineConfig::parse(&format!("version = 1\n{text}"))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        cfg.build()
            .unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    }
    bin()
        .args(["strategies", "--show", "dedpu"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `dedup`"));
}

/// `s` with the time column (the last one) masked: times vary run to run.
fn mask_times(s: &str) -> String {
    let mut out = String::new();
    for l in s.lines() {
        match l.rsplit_once(' ') {
            Some((head, last))
                if last == "time"
                    || last
                        .strip_suffix("ms")
                        .is_some_and(|n| n.parse::<f64>().is_ok()) =>
            {
                out.push_str(head.trim_end());
                out.push_str("  [time]");
            }
            _ => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

/// The `--stats` table, byte for byte but for its times, against
/// `tests/golden/stats_table.txt` (`UPDATE_GOLDEN=1` rewrites it): columns
/// aligned whatever the stage names (ladder steps such as
/// `tool_results:tool_compressor` are long), each row saying how many
/// conversations it counts, `unchanged` for a stage that changed nothing,
/// no zero counters.
#[test]
fn stats_table_matches_golden() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        // One thread: the summarizer's cache is shared by the workers, so
        // its `cache_hits` could depend on their timing.
        .args(["compress", "--budget", "8000", "--stats", "-j", "1", "-o"])
        .arg(dir.path().join("o.jsonl"))
        .arg(data("swe_agent.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let got = mask_times(&String::from_utf8(out.stderr).unwrap());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/stats_table.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        got,
        want,
        "the --stats table differs from {} (UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
    // Aligned: in every row (those with a time), the ratio ends where the
    // header's `ratio` does, and so do the figures before it.
    let rows: Vec<&str> = got.lines().filter(|l| l.ends_with("[time]")).collect();
    let end = rows[0].find("ratio").unwrap() + "ratio".len();
    for l in &rows {
        let c: Vec<char> = l.chars().collect();
        assert!(
            c[end - 1] != ' ' && c[end] == ' ',
            "misaligned row: {l:?}\n{got}"
        );
    }
    assert!(
        got.contains("unchanged") && !got.contains(": 0\n") && !got.contains(" 0,"),
        "{got}"
    );
}

/// Every shipped example is a valid request: `validate` exits 0 on each
/// file of `examples/data` (a trajectory cut after a tool call, before its
/// result, would not be one: OpenAI refuses a call without its result).
#[test]
fn every_shipped_example_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/data");
    let mut checked = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if !matches!(
            p.extension().and_then(|x| x.to_str()),
            Some("json" | "jsonl")
        ) {
            continue;
        }
        let out = bin().arg("validate").arg(&p).output().unwrap();
        assert!(
            out.status.success(),
            "validate {}: {:?}\n{}{}",
            p.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    assert!(checked >= 3, "examples checked: {checked}");
}

/// Configuration errors name the file, the line and column and the field:
/// a broken TOML header, an unknown or mistyped stage parameter, an
/// unknown strategy (found when the pipeline is built), a JSON file's.
#[test]
fn config_errors_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "p.toml",
            "version = 1\n[[stages]\ntype = \"dedup\"\n",
            ":2:9: invalid TOML: invalid table header",
        ),
        (
            "p.toml",
            "version = 1\n[[stages]]\ntype = \"dedup\"\nfuzy = true\n",
            ":4:1: stages[0]: dedup: unknown field `fuzy`; did you mean `fuzzy`?",
        ),
        (
            "p.toml",
            "version = 1\n\n[[stages]]\ntype = \"dedup\"\nthreshold = \"high\"\n",
            ":5:1: stages[0]: dedup: field `threshold`: invalid type",
        ),
        (
            "p.toml",
            "version = 1\n[[stages]]\ntype = \"dedupe\"\n",
            ":3:1: stages[0]: unknown strategy `dedupe`; did you mean `dedup`?",
        ),
        (
            "p.json",
            "{\"version\": 1,\n \"stages\": [{\"type\": \"dedup\", \"fuzy\": 1}]}",
            ":2:31: stages[0]: dedup: unknown field `fuzy`",
        ),
    ];
    for (name, text, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let out = bin()
            .args(["compress", "--config"])
            .arg(&p)
            .arg(data("single.json"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{}{want}", p.display())),
            "{text}\nwant {want}\n got {err}"
        );
    }
    // serve's [serve] table, classify's and compact's parameter files too.
    let p = dir.path().join("s.toml");
    std::fs::write(&p, "version = 1\n[serve]\nupstrem = \"http://x/v1\"\n").unwrap();
    let out = bin()
        .args(["serve", "--window", "1000", "--config"])
        .arg(&p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:3:1: serve: unknown field `upstrem`",
            p.display()
        )),
        "{err}"
    );
    let p = dir.path().join("c.toml");
    std::fs::write(&p, "recency_window = 2\nrecency_windo = 3\n").unwrap();
    let out = bin()
        .args(["classify", "--config"])
        .arg(&p)
        .arg(data("single.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:2:1: classifier: unknown field `recency_windo`",
            p.display()
        )),
        "{err}"
    );
    std::fs::write(&p, "chunk_tokens = 10\nx = [\n").unwrap();
    let out = bin()
        .args(["compact", "--archive"])
        .arg(dir.path().join("a.db"))
        .arg("--config")
        .arg(&p)
        .arg(data("single.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:3:1: invalid TOML", p.display())),
        "{err}"
    );
}
