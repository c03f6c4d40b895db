//! Times `count_message` over every message of a corpus file (heuristic):
//! its cost outside the counter is what a change to the counting rule adds.
//! Instruction counts of the counting alone, parsing left out:
//!
//! ```sh
//! cargo build --release -p ctxpress-core --example count_messages
//! valgrind --tool=callgrind --toggle-collect='*count_all*' \
//!     target/release/examples/count_messages ../shared/corpus/coding_agent_sessions.jsonl 1
//! ```
use ctxpress_core::tokens::count_message;
use ctxpress_core::{Conversation, Heuristic};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or("../shared/corpus/coding_agent_sessions.jsonl".into());
    let reps: usize = std::env::args().nth(2).map_or(20, |s| s.parse().unwrap());
    let text = std::fs::read_to_string(path).unwrap();
    let convs: Vec<Conversation> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Conversation::parse(l).unwrap())
        .collect();
    let n: usize = convs.iter().map(|c| c.messages.len()).sum();
    let t = Instant::now();
    let mut total = 0usize;
    for _ in 0..reps {
        total += count_all(black_box(&convs));
    }
    let dt = t.elapsed();
    println!(
        "{n} messages x {reps}: {total} tokens, {:.1} ns/message",
        dt.as_nanos() as f64 / (n * reps) as f64
    );
}

/// Every message's count (not inlined: `--toggle-collect=*count_all*`).
#[inline(never)]
fn count_all(convs: &[Conversation]) -> usize {
    let mut total = 0;
    for c in convs {
        for m in &c.messages {
            total += count_message(black_box(&Heuristic), black_box(m));
        }
    }
    total
}
