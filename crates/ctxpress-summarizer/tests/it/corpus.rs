//! A sample of the real corpus (read from ../shared at test time, never copied):
//! every prose message summarizes without panic, shorter than its input, and
//! the strategy over whole conversations keeps the pipeline's invariants.

use ctxpress_core::{
    Conversation, Decision, DecisionRule, Pipeline, Role, StageContext, StageStatus,
};
use ctxpress_summarizer::text::{Budget, summarize_text};
use ctxpress_summarizer::{Summarizer, SummarizerConfig};
use std::path::PathBuf;

fn corpus_lines(file: &str, every: usize, max: usize) -> Vec<String> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus")
        .join(file);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
        panic!(
            "corpus file {} is missing ({e}): this test needs the shared corpus beside the repository",
            p.display()
        )
    });
    text.lines()
        .step_by(every.max(1))
        .take(max)
        .map(String::from)
        .collect()
}

#[test]
fn corpus_sample_summaries_and_pipeline() {
    let mut lines = corpus_lines("coding_agent_sessions.jsonl", 9, 5);
    lines.extend(corpus_lines("aider_chats.jsonl", 3, 5));
    lines.extend(corpus_lines("taubench_airline.jsonl", 31, 5));
    assert!(
        !lines.is_empty(),
        "corpus not found: this test needs the shared corpus beside the repository"
    );
    let mut summarized = 0u64;
    for line in &lines {
        let mut c = Conversation::parse(line).expect("corpus line parses");
        // A crude classifier stand-in: long user/assistant prose without tool
        // traffic or fences is compressible.
        let ids: Vec<_> = c
            .messages
            .iter()
            .filter(|m| {
                matches!(m.role(), Role::User | Role::Assistant)
                    && !m.has_tool_calls()
                    && !m.is_tool_result()
                    && m.text().chars().count() >= 120
                    && !m.text().contains("```")
            })
            .map(|m| m.id().clone())
            .collect();
        for m in c.messages.iter().filter(|m| ids.contains(m.id())).take(60) {
            let t = m.text();
            let s = summarize_text(&t, &Budget::default());
            assert!(s.chars().count() <= t.trim().chars().count());
        }
        for id in &ids {
            c.ann_mut(id).decision = Some((Decision::Compress, DecisionRule::Compressible));
        }
        let mut p = Pipeline::new(Vec::new());
        p.push(Box::new(Summarizer::new(SummarizerConfig::default())));
        let r = p.run(&mut c, &StageContext::default());
        let st = &r.stages[0];
        assert_eq!(st.status, StageStatus::Applied, "{st:?}");
        assert!(r.chars_after <= r.chars_before);
        summarized += st.outcome.counters.get("summarized").copied().unwrap_or(0);
    }
    assert!(summarized > 0);
}
