//! Search and recall latency over the whole corpus archive (issue #35):
//! every conversation of the shared corpus compressed by `agent` at an
//! 8,000-token budget into one SQLite archive (made afresh in a temporary
//! folder), then each query timed on its own: one word, two words, and one
//! word within its conversation (drawn from the archived originals, spread
//! over the corpus), and `recall` of every handle the outputs carry. Prints
//! the median, p90, p99 and maximum of each kind; `cargo bench -p
//! ctxpress-benches --bench search`. Not criterion: the claim is a
//! percentile of single queries, not a mean of batches. A missing corpus
//! fails (see `ctxpress_tests::corpus`).
#![allow(missing_docs)]

use ctxpress::core::handle;
use ctxpress::store::SqliteArchive;
use ctxpress::{Archive, Compressor, Conversation};
use ctxpress_tests::corpus;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Hits asked for per query (the CLI's default).
const LIMIT: usize = 10;
/// Queries drawn per conversation, at most.
const PER_CONVERSATION: usize = 2;

/// Words of `text` worth searching: letters only, 6 to 20 of them, which is
/// what a model looks for (names, not numbers or punctuation).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| (6..=20).contains(&w.len()))
}

/// Median, p90, p99 and maximum of `t`, in milliseconds.
fn report(what: &str, t: &mut [Duration]) {
    t.sort();
    let at = |q: f64| t[((t.len() as f64 * q).ceil() as usize).clamp(1, t.len()) - 1];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what:<28} n={:>5}  median {:>7.3} ms  p90 {:>7.3} ms  p99 {:>7.3} ms  max {:>7.3} ms",
        t.len(),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(0.99)),
        ms(*t.last().unwrap()),
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let db = dir.path().join("corpus.db");
    let archive = Arc::new(SqliteArchive::open(&db).expect("the archive"));
    let agent = Compressor::preset("agent")
        .expect("agent")
        .with_budget(Some(8000))
        .with_archive(Some(archive.clone() as Arc<dyn Archive>));

    // One query source per conversation: its id and a few of its words.
    let mut sources: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let mut handles = Vec::new();
    let started = Instant::now();
    let mut conversations = 0;
    for f in corpus::files() {
        for line in corpus::conversations(&f) {
            let conv = Conversation::parse(&line.text).expect("a corpus conversation");
            let mut out = conv.clone();
            agent.compress(&mut out).expect("compress");
            handles.extend(handle::find_all(&out.to_json_string()));
            conversations += 1;
            // Words from the middle of the input, where a budget evicts.
            let mut third = line.text.len() / 3;
            while !line.text.is_char_boundary(third) {
                third += 1;
            }
            let text = &line.text[third..];
            let mut w: Vec<String> = Vec::new();
            for word in words(text).step_by(97) {
                if !w.iter().any(|x| x == word) {
                    w.push(word.to_string());
                }
                if w.len() == PER_CONVERSATION + 1 {
                    break;
                }
            }
            sources.push((conv.id(), w));
        }
    }
    handles.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    handles.dedup();
    let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(db.with_extension("db-wal"))
            .map(|m| m.len())
            .unwrap_or(0);
    println!(
        "archive: {conversations} conversations of {} files, {:.1} MB, {} handles, made in {:.1} s",
        corpus::files().len(),
        size as f64 / 1e6,
        handles.len(),
        started.elapsed().as_secs_f64()
    );

    let mut one = Vec::new();
    let mut two = Vec::new();
    let mut within = Vec::new();
    let mut found = 0usize;
    let mut asked = 0usize;
    for (id, w) in &sources {
        for (i, word) in w.iter().take(PER_CONVERSATION).enumerate() {
            let t = Instant::now();
            let hits = archive.search(word, None, LIMIT).expect("search");
            one.push(t.elapsed());
            asked += 1;
            found += usize::from(!hits.is_empty());
            if let Some(next) = w.get(i + 1) {
                let q = format!("{word} {next}");
                let t = Instant::now();
                std::hint::black_box(archive.search(&q, None, LIMIT).expect("search"));
                two.push(t.elapsed());
            }
            if let Some(id) = id {
                let t = Instant::now();
                std::hint::black_box(archive.search(word, Some(id), LIMIT).expect("search"));
                within.push(t.elapsed());
            }
        }
    }
    let mut recall = Vec::new();
    let mut recalled = 0usize;
    for h in &handles {
        let t = Instant::now();
        let got = archive.recall(h).expect("recall");
        recall.push(t.elapsed());
        recalled += usize::from(got.is_some());
    }
    println!(
        "one-word queries with a hit: {found} of {asked}; handles recalled: {recalled} of {}",
        handles.len()
    );
    report("search, one word", &mut one);
    report("search, two words", &mut two);
    report("search, one conversation", &mut within);
    report("recall", &mut recall);
    assert_eq!(
        recalled,
        handles.len(),
        "every handle in the outputs recalls"
    );
}
