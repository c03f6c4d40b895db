//! Recall handles on the shared corpus (issue #35): for a sample of every
//! corpus file, every preset, at budgets of 8,000 and 32,000 tokens, with an
//! archive, every handle written in the output recalls originals that are
//! input messages, in input order, and the output with each marked message
//! replaced by what its handles recall is the input again (message by
//! message, compared as JSON by meaning).

use ctxpress::core::canonical;
use ctxpress::core::handle::find_all;
use ctxpress::{Compressor, Conversation, MemoryArchive, PRESETS, recall};
use ctxpress_tests::corpus::{self, Line};
use std::collections::HashSet;
use std::sync::Arc;

/// Failures shown in the panic message.
const SHOWN: usize = 20;
const BUDGETS: [usize; 2] = [8_000, 32_000];

/// Compress `line` with `preset` under `budget`, then check its handles and
/// rebuild the input from them; `Ok` gives how many handles the output has.
fn rebuild(preset: &str, budget: usize, line: &Line) -> Result<usize, String> {
    let at = format!("{} {preset} {budget}", line.at);
    let input = Conversation::parse(&line.text).map_err(|e| format!("{at}: parse: {e}"))?;
    let archive = Arc::new(MemoryArchive::new());
    let c = Compressor::preset(preset)
        .map_err(|e| format!("{at}: {e}"))?
        .with_budget(Some(budget))
        .with_archive(Some(archive.clone()));
    let mut out = input.clone();
    c.compress(&mut out)
        .map_err(|e| format!("{at}: compress: {e}"))?;
    let inputs: Vec<String> = input
        .messages
        .iter()
        .map(|m| input.message_json(m))
        .collect();
    let mut rebuilt: Vec<String> = Vec::new();
    let mut handles = 0;
    for m in &out.messages {
        let text = out.message_json(m);
        let found = find_all(&text);
        if found.is_empty() {
            rebuilt.push(text);
            continue;
        }
        let mut seen = HashSet::new();
        // Two markers of one message may stand for the same original.
        let mut mine: Vec<String> = Vec::new();
        for h in found {
            if !seen.insert(h.clone()) {
                continue;
            }
            handles += 1;
            let r = recall(archive.as_ref(), &h)
                .map_err(|e| format!("{at}: recall {h}: {e}"))?
                .ok_or_else(|| format!("{at}: {h} recalls nothing"))?;
            // The recalled messages are input messages, in input order.
            let mut from = 0;
            for t in &r.messages {
                match inputs[from..].iter().position(|x| x == t) {
                    Some(k) => from += k + 1,
                    None if inputs.contains(t) => {
                        return Err(format!("{at}: {h} recalls messages out of input order"));
                    }
                    None => {
                        return Err(format!(
                            "{at}: {h} recalls a message the input does not hold"
                        ));
                    }
                }
            }
            // A later handle of the same message adds only what the
            // earlier ones did not recall (counted: inputs repeat texts).
            let mut had = mine.clone();
            for t in r.messages {
                match had.iter().position(|x| *x == t) {
                    Some(k) => {
                        had.swap_remove(k);
                    }
                    None => mine.push(t),
                }
            }
        }
        rebuilt.extend(mine);
    }
    if rebuilt.len() != inputs.len() {
        return Err(format!(
            "{at}: the handles rebuild {} messages, the input has {}",
            rebuilt.len(),
            inputs.len()
        ));
    }
    if let Some(i) = (0..inputs.len()).find(|&i| !canonical::same(&rebuilt[i], &inputs[i])) {
        return Err(format!(
            "{at}: the rebuilt message {i} differs from the input's: {:.200}",
            rebuilt[i]
        ));
    }
    Ok(handles)
}

#[test]
fn every_handle_recalls_its_originals_and_together_they_rebuild_the_input() {
    // A sample by default; `CTXPRESS_HANDLES_ALL=1` checks every corpus
    // conversation (about a minute in release on 2 cores).
    let all = std::env::var_os("CTXPRESS_HANDLES_ALL").is_some_and(|v| v == "1");
    let lines: Vec<Line> = corpus::files()
        .iter()
        .flat_map(|f| {
            if all {
                corpus::conversations(f)
            } else {
                corpus::sample(f, 7, 4)
            }
        })
        .collect();
    assert!(!lines.is_empty(), "the corpus holds no conversation");
    let results: Vec<(&str, usize, Vec<String>)> = std::thread::scope(|s| {
        let threads: Vec<_> = PRESETS
            .iter()
            .map(|p| {
                let lines = &lines;
                s.spawn(move || {
                    let mut handles = 0;
                    let mut failures = Vec::new();
                    for b in BUDGETS {
                        for l in lines {
                            match rebuild(p.name, b, l) {
                                Ok(n) => handles += n,
                                Err(e) => failures.push(e),
                            }
                        }
                    }
                    (p.name, handles, failures)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a preset thread panicked"))
            .collect()
    });
    let mut failures = Vec::new();
    let mut total = 0;
    for (preset, n, f) in results {
        eprintln!("{preset}: {n} handles, {} failures", f.len());
        total += n;
        failures.extend(f);
    }
    assert!(
        total > 0,
        "no output carries a handle: the test checks nothing"
    );
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
