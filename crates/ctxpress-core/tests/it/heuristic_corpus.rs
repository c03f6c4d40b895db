//! The heuristic token counter errs high on real conversations: for every
//! conversation of every corpus file, its total over the messages (with
//! `count_message`) is at least 0.98 times the exact `o200k_base` total.
//!
//! Every conversation is checked (under ten seconds in a debug build). The
//! test fails, naming the folder, when the corpus
//! (`../shared/corpus` beside the repository) is missing.

use ctxpress_core::tokens::{Bpe, TokenCounter, count_message};
use ctxpress_core::{Conversation, Heuristic};

#[test]
fn heuristic_is_never_more_than_two_percent_low_on_a_corpus_conversation() {
    let files = ctxpress_tests::corpus::files();
    let exact = Bpe::new("o200k_base").unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in &files {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into());
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        assert!(!lines.is_empty(), "{name} holds no conversation");
        for &(n, line) in &lines {
            let conv = Conversation::parse(line)
                .unwrap_or_else(|e| panic!("{name}:{}: does not parse: {e}", n + 1));
            let total = |c: &dyn TokenCounter| -> usize {
                conv.messages.iter().map(|m| count_message(c, m)).sum()
            };
            let (got, want) = (total(&Heuristic), total(&exact));
            if (got as f64) < 0.98 * want as f64 {
                failures.push(format!(
                    "{name}:{}: heuristic {got}, o200k_base {want} ({:.3})",
                    n + 1,
                    got as f64 / want as f64
                ));
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "heuristic more than 2% low:\n{}",
        failures.join("\n")
    );
    eprintln!("{checked} conversations in {} files checked", files.len());
}
