//! Every preset on every conversation of the shared corpus, through the
//! facade as a library user would: parse → compress (originals archived in a
//! `MemoryArchive`) → serialize → parse → expand gives back the input bytes;
//! the output adds no pairing or role violation and is never longer (bytes
//! written, characters and tokens measured) than the input.
//!
//! Presets run on parallel threads. A missing corpus fails the test (see
//! `ctxpress_tests::corpus`).

use ctxpress::core::validate::introduces_violations;
use ctxpress::{Compressor, Conversation, MemoryArchive, PRESETS, expand, validate};
use ctxpress_tests::corpus::{self, Line};
use std::sync::Arc;

/// Failures shown in the panic message (the count says how many more).
const SHOWN: usize = 20;

/// Round trip of one conversation through `preset`; `Err` says what broke.
fn round_trip(preset: &str, line: &Line) -> Result<(), String> {
    let at = &line.at;
    let input = Conversation::parse(&line.text).map_err(|e| format!("{at}: parse: {e}"))?;
    let archive = Arc::new(MemoryArchive::new());
    let c = Compressor::preset(preset)
        .map_err(|e| format!("preset {preset}: {e}"))?
        .with_archive(Some(archive.clone()));
    let mut out = input.clone();
    let report = c
        .compress(&mut out)
        .map_err(|e| format!("{at}: {preset}: compress: {e}"))?;
    let before = validate(&input);
    let after = validate(&out);
    if introduces_violations(&before, &after) {
        return Err(format!("{at}: {preset}: new violations {after:?}"));
    }
    if report.chars_after > report.chars_before || report.tokens_after > report.tokens_before {
        return Err(format!(
            "{at}: {preset}: longer: {} -> {} chars, {} -> {} tokens",
            report.chars_before, report.chars_after, report.tokens_before, report.tokens_after
        ));
    }
    let written = out.to_json_string();
    if written.len() > line.text.len() {
        return Err(format!(
            "{at}: {preset}: output is longer: {} -> {} bytes",
            line.text.len(),
            written.len()
        ));
    }
    let reread =
        Conversation::parse(&written).map_err(|e| format!("{at}: {preset}: output: {e}"))?;
    let back = expand(&reread, archive.as_ref())
        .map_err(|e| format!("{at}: {preset}: expand: {e}"))?
        .to_json_string();
    if back != line.text {
        let same = back
            .bytes()
            .zip(line.text.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        return Err(format!(
            "{at}: {preset}: expand differs from the input at byte {same} (lengths {} / {})",
            back.len(),
            line.text.len()
        ));
    }
    Ok(())
}

#[test]
fn every_preset_round_trips_every_corpus_conversation() {
    let lines: Vec<Line> = corpus::files()
        .iter()
        .flat_map(|f| corpus::conversations(f))
        .collect();
    assert!(!lines.is_empty(), "the corpus holds no conversation");
    let results: Vec<(&str, usize, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = PRESETS
            .iter()
            .map(|p| {
                let lines = &lines;
                s.spawn(move || {
                    let failures: Vec<String> = lines
                        .iter()
                        .filter_map(|l| round_trip(p.name, l).err())
                        .collect();
                    (p.name, lines.len(), failures)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a preset thread panicked"))
            .collect()
    });
    let mut failures = Vec::new();
    for (preset, n, f) in results {
        eprintln!("{preset}: {n} conversations, {} failures", f.len());
        failures.extend(f);
    }
    assert!(
        failures.is_empty(),
        "{} failures (first {SHOWN}):\n{}",
        failures.len(),
        failures
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
