//! Every preset on every file of the shared corpus, compared with a golden
//! hash of its output: a refactor that should change nothing must leave
//! every hash as it is (`tests/data/preset_outputs.txt`).
//!
//! One line per (file, preset): `file preset conversations hash`, where the
//! hash is xxh3-128 (`core::archive::content_hash`) of the written outputs of
//! the file's conversations, each followed by a newline, compressed in file
//! order by one `Compressor` per (file, preset), as the CLI does.
//!
//! - `CTXPRESS_BLESS=1` rewrites the golden file from the current code.
//! - `CTXPRESS_CORPUS` points at the corpus folder (default
//!   `../shared/corpus` beside the repository, as the other corpus tests).
//!   A missing corpus fails the test (it is not a silent pass).
//! - In a debug build the large `coding_agent_sessions.jsonl` is checked for
//!   `identity` only (the other presets take minutes without optimization);
//!   `CTXPRESS_PRESET_OUTPUTS_FULL=1`, or a release build
//!   (`cargo test --release`), checks every pair.
//! - `compact` reads the clock for messages without a time of their own (its
//!   batch headers and labels hold `format_iso` times), so in its outputs
//!   every `YYYY-MM-DDTHH:MM:SS.fffZ` is replaced by `<time>` before hashing.

use ctxpress::{Compressor, PRESETS};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/preset_outputs.txt")
}

/// Files too large to run every preset on in an unoptimized build.
const LARGE: u64 = 8 << 20;

fn full() -> bool {
    !cfg!(debug_assertions)
        || std::env::var_os("CTXPRESS_PRESET_OUTPUTS_FULL").is_some_and(|v| v == "1")
        || bless()
}

fn bless() -> bool {
    std::env::var_os("CTXPRESS_BLESS").is_some_and(|v| v == "1")
}

/// `(conversations, hash)` of one preset over one file.
fn run(preset: &str, text: &str) -> (usize, String) {
    let c = Compressor::preset(preset).unwrap_or_else(|e| panic!("preset {preset}: {e}"));
    let mut out = String::with_capacity(text.len());
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut conv =
            ctxpress::Conversation::parse(line).unwrap_or_else(|e| panic!("line {}: {e}", i + 1));
        c.compress(&mut conv)
            .unwrap_or_else(|e| panic!("{preset}, line {}: {e}", i + 1));
        let written = conv.to_json_string();
        if preset == "compact" {
            mask_times(&written, &mut out);
        } else {
            out.push_str(&written);
        }
        out.push('\n');
        n += 1;
    }
    (n, ctxpress::core::archive::content_hash(&out))
}

/// Append `text` to `out` with every ISO time `YYYY-MM-DDTHH:MM:SS.fffZ`
/// (the shape of `core::compaction::format_iso`) replaced by `<time>`.
fn mask_times(text: &str, out: &mut String) {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    let b = text.as_bytes();
    let fits = |at: usize| {
        b.len() >= at + SHAPE.len()
            && SHAPE.iter().zip(&b[at..]).all(|(s, c)| match s {
                b'd' => c.is_ascii_digit(),
                _ => s == c,
            })
    };
    let mut last = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && fits(i) {
            out.push_str(&text[last..i]);
            out.push_str("<time>");
            i += SHAPE.len();
            last = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[last..]);
}

#[test]
fn mask_times_replaces_iso_times_only() {
    let mut out = String::new();
    mask_times(
        "a 2026-11-24T23:40:12.345Z|1999-01-01T00:00:00.000Z b 2026-11-24 é",
        &mut out,
    );
    assert_eq!(out, "a <time>|<time> b 2026-11-24 é");
}

#[test]
fn preset_outputs_match_the_golden_hashes() {
    let files = ctxpress_tests::corpus::files();

    let golden_text = std::fs::read_to_string(golden_path()).unwrap_or_default();
    let golden: BTreeMap<(String, String), String> = golden_text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (f, p) = (w.next()?, w.next()?);
            let rest: Vec<&str> = w.collect();
            Some(((f.to_string(), p.to_string()), rest.join(" ")))
        })
        .collect();

    let mut lines = vec![
        "# file preset conversations xxh3-128 of the outputs (tests/it/preset_outputs.rs; CTXPRESS_BLESS=1 rewrites)".to_string(),
    ];
    let (mut checked, mut skipped, mut differ) = (0, Vec::new(), Vec::new());
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).expect("reads");
        let large = text.len() as u64 > LARGE;
        for p in PRESETS {
            let key = (name.clone(), p.name.to_string());
            if large && p.name != "identity" && !full() {
                skipped.push(format!("{name}/{}", p.name));
                if let Some(g) = golden.get(&key) {
                    lines.push(format!("{name} {} {g}", p.name));
                }
                continue;
            }
            let (n, hash) = run(p.name, &text);
            let got = format!("{n} {hash}");
            if golden.get(&key) != Some(&got) {
                differ.push(format!(
                    "{name} {}: got {got}, golden {}",
                    p.name,
                    golden.get(&key).map_or("(none)", String::as_str)
                ));
            }
            lines.push(format!("{name} {} {got}", p.name));
            checked += 1;
        }
    }
    if !skipped.is_empty() {
        eprintln!(
            "preset_outputs: {} pairs skipped in this debug build (CTXPRESS_PRESET_OUTPUTS_FULL=1 or --release checks them): {}",
            skipped.len(),
            skipped.join(", ")
        );
    }
    if bless() {
        std::fs::create_dir_all(golden_path().parent().unwrap()).unwrap();
        std::fs::write(golden_path(), lines.join("\n") + "\n").unwrap();
        eprintln!("preset_outputs: golden rewritten ({checked} pairs)");
        return;
    }
    assert!(
        differ.is_empty(),
        "{} of {checked} (file, preset) outputs differ from {} (CTXPRESS_BLESS=1 rewrites it):\n{}",
        differ.len(),
        golden_path().display(),
        differ.join("\n")
    );
}
