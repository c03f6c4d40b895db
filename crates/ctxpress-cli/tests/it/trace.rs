//! `ctxpress compress --trace`: one line per input message on stderr, the
//! output unchanged by the flag.
#![allow(missing_docs)]

use assert_cmd::Command;

const PROSE: &str = "The deployment failed because the healthCheck endpoint timed out after 30 seconds. \
We traced it to the connection_pool being exhausted under load. Increasing the pool size fixed it. \
Remember that the staging cluster uses a different config file than production does.";

fn input() -> String {
    let conv = |id: &str| {
        serde_json::json!({"id": id, "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": PROSE},
            {"role": "assistant", "content": PROSE.replace("deployment", "rollout")},
            {"role": "user", "content": "and now?"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "bye"},
        ]})
        .to_string()
    };
    format!("{}\n{}\n", conv("a"), conv("b"))
}

#[test]
fn trace_prints_every_message_and_leaves_output_alone() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    std::fs::write(&inp, input()).unwrap();
    let run = |trace: bool| {
        let mut c = Command::cargo_bin("ctxpress").unwrap();
        c.args(["compress", "--preset", "cce"]).arg(&inp);
        if trace {
            c.arg("--trace");
        }
        c.assert().success().get_output().clone()
    };
    let plain = run(false);
    let traced = run(true);
    assert_eq!(plain.stdout, traced.stdout);
    assert!(plain.stderr.is_empty());
    let err = String::from_utf8(traced.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2 * 8, "{err}");
    assert!(lines[0].starts_with("# "), "{}", lines[0]);
    assert!(
        lines[0].ends_with("in.jsonl:1 (a): 7 -> 7 messages"),
        "{}",
        lines[0]
    );
    assert!(
        lines[8].ends_with("in.jsonl:2 (b): 7 -> 7 messages"),
        "{}",
        lines[8]
    );
    let fields: Vec<&str> = lines[1].split('\t').collect();
    assert_eq!(fields[0], "0");
    assert_eq!(
        &fields[2..],
        ["system", "preserve", "preserved_role", "kept"]
    );
    let f: Vec<&str> = lines[2].split('\t').collect();
    assert_eq!(&f[2..], ["user", "compress", "compressible", "summarized"]);
    let f: Vec<&str> = lines[7].split('\t').collect();
    assert_eq!(&f[2..], ["assistant", "preserve", "recency_window", "kept"]);
}
