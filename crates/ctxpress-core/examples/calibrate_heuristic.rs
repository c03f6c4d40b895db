//! How far [`Heuristic`] is from the exact `o200k_base` count, per conversation.
//!
//! For every conversation of every `.jsonl` file in the corpus folder (default
//! `../shared/corpus` beside the repository, or the folder given as the first
//! argument), totals [`count_message`] over its messages with the heuristic,
//! with the former four-bytes-a-token rule and with `o200k_base`, and prints
//! per file the min / median / max of the ratio heuristic / `o200k_base`.
//! A ratio below 1 means the heuristic under-counts (a budget it meets is
//! missed by the model). The weights in `src/tokens.rs` were fitted on
//! these figures; rerun this after changing them:
//!
//! ```sh
//! cargo run --release -p ctxpress-core --example calibrate_heuristic
//! ```

use ctxpress_core::tokens::{Bpe, TokenCounter, count_message};
use ctxpress_core::{Conversation, Heuristic};
use std::path::PathBuf;

/// The rule `Heuristic` followed before: four bytes a token.
struct QuarterBytes;

impl TokenCounter for QuarterBytes {
    fn name(&self) -> &str {
        "bytes/4"
    }
    fn count(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }
}

fn spread(mut ratios: Vec<f64>) -> String {
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = if n % 2 == 1 {
        ratios[n / 2]
    } else {
        (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0
    };
    format!("{:.3} {:.3} {:.3}", ratios[0], median, ratios[n - 1])
}

fn main() {
    let dir = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
        PathBuf::from,
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus folder {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let exact = Bpe::new("o200k_base").expect("o200k_base is embedded");
    let counters: [&dyn TokenCounter; 2] = [&QuarterBytes, &Heuristic];
    println!(
        "{:<30} {:>6}  {:<20}  {:<20}  {:>8}",
        "file", "convs", "bytes/4 min med max", "heuristic min med max", "heur/o200k total"
    );
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable corpus file");
        let mut ratios = [Vec::new(), Vec::new()];
        let mut totals = [0usize; 3];
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let conv = Conversation::parse(line)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1));
            let sum = |c: &dyn TokenCounter| -> usize {
                conv.messages.iter().map(|m| count_message(c, m)).sum()
            };
            let want = sum(&exact);
            totals[2] += want;
            for (i, c) in counters.iter().enumerate() {
                let got = sum(*c);
                totals[i] += got;
                ratios[i].push(got as f64 / want.max(1) as f64);
            }
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let [quarter, heuristic] = ratios;
        println!(
            "{:<30} {:>6}  {:<20}  {:<20}  {:>8.3}",
            name,
            heuristic.len(),
            spread(quarter),
            spread(heuristic),
            totals[1] as f64 / totals[2].max(1) as f64
        );
    }
}
