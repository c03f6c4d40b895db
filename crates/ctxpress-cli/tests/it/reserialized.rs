//! `expand` matches by meaning (issue #33 item 5): a compressed output that
//! Python's `json` read and wrote again (keys sorted, `ensure_ascii`,
//! pretty-printed, a field added around the messages) expands to the
//! input's messages, byte for byte, for every corpus file (its first MiB
//! of whole conversations) through every preset. Needs python3 and the shared corpus: without them the test
//! prints a SKIP line, and fails when `CI` is set.
#![allow(missing_docs)]

use crate::common;

use common::bin;
use ctxpress::Conversation;
use ctxpress_tests::corpus;
use std::process::Command;

/// A missing prerequisite: a visible SKIP, or a failure on CI.
fn skip(what: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{what} (CI is set: a prerequisite may not be missing there)");
    }
    eprintln!("SKIP: {what}");
}

fn python() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip("python3 not found: cannot re-serialize outputs with Python's json");
    }
    ok
}

fn presets() -> Vec<String> {
    let out = bin().arg("presets").output().unwrap();
    assert!(out.status.success());
    let names: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    names
}

/// Writes `sorted.jsonl` (every line with keys sorted and `ensure_ascii`,
/// then every line again with a field added to the envelope) and
/// `pretty.json` (the first compressed conversation, indent=2), from
/// `out.jsonl` and `in.jsonl` in the folder given as argv[1].
const PY: &str = r#"
import json, os, sys
d = sys.argv[1]
outs = open(os.path.join(d, "out.jsonl"), encoding="utf-8").read().splitlines()
ins = open(os.path.join(d, "in.jsonl"), encoding="utf-8").read().splitlines()
with open(os.path.join(d, "sorted.jsonl"), "w", encoding="utf-8") as f:
    for l in outs:
        f.write(json.dumps(json.loads(l), sort_keys=True, ensure_ascii=True) + "\n")
    for l in outs:
        v = json.loads(l)
        v["reserialized_by"] = "python"
        f.write(json.dumps(v, sort_keys=True, ensure_ascii=True) + "\n")
pretty = -1
for i, (o, n) in enumerate(zip(outs, ins)):
    if o != n:
        pretty = i
        with open(os.path.join(d, "pretty.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(json.loads(o), indent=2, sort_keys=True, ensure_ascii=True))
        break
print(pretty)
"#;

fn messages(text: &str) -> Vec<String> {
    let c = Conversation::parse(text).unwrap();
    c.messages.iter().map(|m| c.message_json(m)).collect()
}

/// The expanded conversation has the input's messages: byte for byte when
/// compression changed the conversation (the archive's originals), by
/// meaning when it left it as it was (nothing was archived for it, and
/// expand gives it back as it was written).
fn check(what: &str, input: &str, output: &str, expanded: &str) {
    let want = messages(input);
    let got = messages(expanded);
    if input == output {
        assert_eq!(got.len(), want.len(), "{what}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                ctxpress::core::canonical::same(g, w),
                "{what}: {g} is not {w}"
            );
        }
    } else {
        assert!(got == want, "{what}: the messages are not the input's");
    }
}

#[test]
fn outputs_rewritten_by_python_json_expand_to_the_input() {
    if !python() {
        return;
    }
    let Some(files) = corpus::files_or_skip() else {
        return;
    };
    let presets = presets();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in &files {
        let input = corpus::head(f, 1 << 20);
        std::fs::write(d.join("in.jsonl"), &input).unwrap();
        let in_lines: Vec<&str> = input.lines().collect();
        for preset in &presets {
            let what = format!("{} through {preset}", f.display());
            let db = d.join(format!("{preset}.db"));
            bin()
                .args(["compress", "--preset", preset, "--archive"])
                .arg(&db)
                .arg("-o")
                .arg(d.join("out.jsonl"))
                .arg(d.join("in.jsonl"))
                .assert()
                .success();
            let py = Command::new("python3")
                .args(["-c", PY])
                .arg(d)
                .output()
                .unwrap();
            assert!(
                py.status.success(),
                "{what}: python: {}",
                String::from_utf8_lossy(&py.stderr)
            );
            let out = std::fs::read_to_string(d.join("out.jsonl")).unwrap();
            let out_lines: Vec<&str> = out.lines().collect();
            assert_eq!(out_lines.len(), in_lines.len(), "{what}");
            let e = bin()
                .args(["expand", "--archive"])
                .arg(&db)
                .arg(d.join("sorted.jsonl"))
                .output()
                .unwrap();
            assert!(
                e.status.success(),
                "{what}: expand of the re-serialized output failed: {}",
                String::from_utf8_lossy(&e.stderr)
            );
            let back = String::from_utf8(e.stdout).unwrap();
            let back: Vec<&str> = back.lines().collect();
            assert_eq!(back.len(), 2 * in_lines.len(), "{what}");
            for (i, b) in back.iter().enumerate() {
                let j = i % in_lines.len();
                let how = if i < in_lines.len() {
                    "sorted keys, ensure_ascii"
                } else {
                    "and an added envelope field"
                };
                check(
                    &format!("{what}, line {} ({how})", j + 1),
                    in_lines[j],
                    out_lines[j],
                    b,
                );
            }
            let pretty: i64 = String::from_utf8(py.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            if let Ok(j) = usize::try_from(pretty) {
                let e = bin()
                    .args(["expand", "--archive"])
                    .arg(&db)
                    .arg(d.join("pretty.json"))
                    .output()
                    .unwrap();
                assert!(
                    e.status.success(),
                    "{what}: expand of line {} pretty-printed failed: {}",
                    j + 1,
                    String::from_utf8_lossy(&e.stderr)
                );
                check(
                    &format!("{what}, line {} pretty-printed", j + 1),
                    in_lines[j],
                    out_lines[j],
                    &String::from_utf8(e.stdout).unwrap(),
                );
            }
            std::fs::remove_file(&db).unwrap();
        }
    }
}

/// A lone surrogate escape (`\ud800`, which Python's `json.dumps` writes for
/// a lone surrogate) no longer fails the batch (issue #33): the
/// conversations that hold one are compressed like the others, written
/// back byte for byte where unchanged, and expand back to the input.
#[test]
fn lone_surrogates_neither_fail_the_batch_nor_change_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: Vec<String> = std::fs::read_to_string(common::data("taubench_airline.jsonl"))
        .unwrap()
        .lines()
        .take(3)
        .map(str::to_string)
        .collect();
    // In a user message early in the conversation (compressed) and in the
    // last one (kept as it was), and in the envelope.
    let first = lines[1].replacen(
        r#""role": "user", "content": ""#,
        r#""role": "user", "content": "\ud800 lone, \udc00\u00e9 too; "#,
        1,
    );
    let at = first.rfind(r#""content": ""#).unwrap() + r#""content": ""#.len();
    let with = format!("{}{}{}", &first[..at], r"end \ud83d ", &first[at..]).replacen(
        '{',
        r#"{"note": "\udbff", "#,
        1,
    );
    assert!(with.matches(r"\ud8").count() >= 2 && with != lines[1]);
    let input = format!("{}\n{with}\n{}\n", lines[0], lines[2]);
    let (inp, out, db) = (d.join("in.jsonl"), d.join("out.jsonl"), d.join("a.db"));
    std::fs::write(&inp, &input).unwrap();
    bin().arg("validate").arg(&inp).assert().success();
    bin()
        .args(["compress", "--archive"])
        .arg(&db)
        .arg("-o")
        .arg(&out)
        .arg(&inp)
        .assert()
        .success();
    let written = std::fs::read_to_string(&out).unwrap();
    let line = written.lines().nth(1).unwrap();
    assert_ne!(line, with, "the conversation is compressed");
    assert!(line.contains(r"end \ud83d "), "kept message: its bytes");
    assert!(
        line.starts_with(r#"{"note": "\udbff", "#),
        "envelope: its bytes"
    );
    let back = bin()
        .args(["expand", "--archive"])
        .arg(&db)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    assert!(
        back.stdout == input.as_bytes(),
        "expand gives back the input"
    );
}
