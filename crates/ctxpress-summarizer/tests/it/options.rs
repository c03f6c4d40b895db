//! Summarizer options used by the `cce` and `hybrid` presets: tool results
//! summarized in place, the information check on them, the cache of the
//! deterministic path, and per-role budgets.

use async_trait::async_trait;
use ctxpress_core::summarize::{SummarizeAsync, SummarizeError, SummaryKind, SummaryRequest};
use ctxpress_core::{AsyncStrategy, Conversation, Decision, DecisionRule, StageContext, Strategy};
use ctxpress_summarizer::{AsyncSummarizer, Summarizer, SummarizerConfig};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Prose-like tool output: a sub-agent's report.
const REPORT: &str = "I looked through the repository and the deployment scripts. \
The service starts fine on a clean machine, but the health check waits for the database \
before it answers, and on the staging cluster the database comes up last. \
That explains the restarts you saw during the night. Nothing in the application itself \
needs to change; the fix belongs in the startup order of the cluster configuration. \
I would also raise the probe timeout a little so a slow start does not kill the pod.";

const PROSE_A: &str = "The deployment failed because the healthCheck endpoint timed out after 30 seconds. \
We traced it to the connection_pool being exhausted under load. Increasing the pool size fixed it. \
Remember that the staging cluster uses a different config file than production does.";
const PROSE_B: &str = "Next I looked at the metrics dashboard for the last week of traffic. \
Memory use grew by 200 MB per day, which suggests a leak in the SessionCache eviction logic. \
The eviction timer is never rescheduled after a panic in the callback, so entries pile up.";

fn conv(messages: Value) -> Conversation {
    Conversation::parse(&messages.to_string()).expect("parses")
}

fn decide_all(c: &mut Conversation, d: Decision) {
    let ids: Vec<_> = c.messages.iter().map(|m| m.id().clone()).collect();
    for id in ids {
        c.ann_mut(&id).decision = Some((d, DecisionRule::Compressible));
    }
}

fn tool_cfg() -> SummarizerConfig {
    SummarizerConfig {
        tool_results: true,
        ..SummarizerConfig::default()
    }
}

fn run(s: &Summarizer, c: &mut Conversation) -> ctxpress_core::StageOutcome {
    s.apply(c, &StageContext::default()).expect("applies")
}

fn openai_exchange() -> Conversation {
    conv(json!([
        {"role": "user", "content": "why does the service restart?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Agent", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "Agent", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "Agent", "content": REPORT, "extra": 7},
        {"role": "tool", "tool_call_id": "c2", "name": "Agent", "content": REPORT.replace("night", "day")},
        {"role": "assistant", "content": "done"},
    ]))
}

#[test]
fn tool_results_are_left_alone_by_default() {
    let mut c = openai_exchange();
    decide_all(&mut c, Decision::Compress);
    let before = c.to_json_string();
    let out = run(&Summarizer::new(SummarizerConfig::default()), &mut c);
    assert_eq!(c.to_json_string(), before);
    assert_eq!(out.counters.get("tool_results"), None);
}

#[test]
fn tool_results_summarized_in_place_never_merged() {
    let mut c = openai_exchange();
    decide_all(&mut c, Decision::Compress);
    let out = run(&Summarizer::new(tool_cfg()), &mut c);
    assert_eq!(c.messages.len(), 5, "nothing merged");
    assert_eq!(out.counters.get("tool_results"), Some(&2));
    assert_eq!(out.counters.get("merged"), None);
    for (i, id) in [(2, "c1"), (3, "c2")] {
        let m = &c.messages[i];
        assert_eq!(m.role_str(), "tool");
        assert_eq!(m.fields()["tool_call_id"], json!(id));
        assert_eq!(m.fields()["name"], json!("Agent"));
        let t = m.text();
        assert!(t.starts_with("[summary: ") && t.ends_with(']'), "{t}");
        assert!(!t.contains("messages merged"), "{t}");
    }
    assert_eq!(c.messages[2].fields()["extra"], json!(7));
    assert!(ctxpress_core::validate(&c).is_empty());
}

#[test]
fn tool_results_only_when_the_decision_says_compress() {
    let mut c = openai_exchange();
    decide_all(&mut c, Decision::Preserve);
    let before = c.to_json_string();
    run(&Summarizer::new(tool_cfg()), &mut c);
    assert_eq!(c.to_json_string(), before);
}

#[test]
fn anthropic_single_text_result_block_in_place() {
    let mut c = conv(json!({"messages": [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Agent", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "Agent", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": REPORT}]}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": REPORT},
            {"type": "tool_result", "tool_use_id": "t3", "content": REPORT}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t4", "content": [
                {"type": "text", "text": REPORT}, {"type": "image", "source": {}}]}]},
    ]}));
    decide_all(&mut c, Decision::Compress);
    let carriers_before: Vec<String> = (2..4).map(|i| c.message_json(&c.messages[i])).collect();
    let out = run(&Summarizer::new(tool_cfg()), &mut c);
    assert_eq!(out.counters.get("tool_results"), Some(&1));
    let r = &c.messages[1].tool_results()[0];
    assert_eq!(r.call_id, "t1");
    assert!(r.text.starts_with("[summary: "), "{}", r.text);
    // Two results in one carrier, or a block with an image: left alone.
    let after: Vec<String> = (2..4).map(|i| c.message_json(&c.messages[i])).collect();
    assert_eq!(after, carriers_before);
}

#[test]
fn information_check_keeps_dense_results() {
    // A listing of names found nowhere else: its summary would lose most of them.
    let listing: String = (0..40)
        .map(|i| format!("The handler for route number {i} is defined in handleRoute{i} here.\n"))
        .collect();
    let mk = || {
        let mut c = conv(json!([
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "Agent", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": listing},
            {"role": "tool", "tool_call_id": "c2", "content": REPORT},
        ]));
        decide_all(&mut c, Decision::Compress);
        c
    };
    let mut off = mk();
    let out = run(&Summarizer::new(tool_cfg()), &mut off);
    assert_eq!(out.counters.get("tool_results"), Some(&2));
    let mut on = mk();
    let s = Summarizer::new(SummarizerConfig {
        chars_per_lost_term: 800,
        ..tool_cfg()
    });
    let out = run(&s, &mut on);
    assert_eq!(out.counters.get("kept_dense"), Some(&1));
    assert_eq!(out.counters.get("tool_results"), Some(&1));
    assert_eq!(on.messages[1].text(), listing);
    assert!(on.messages[2].text().starts_with("[summary: "));
}

#[test]
fn second_run_hits_the_cache() {
    let c0 = {
        let mut c = conv(json!([
            {"role": "user", "content": PROSE_A},
            {"role": "assistant", "content": PROSE_B},
        ]));
        decide_all(&mut c, Decision::Compress);
        c
    };
    let s = Summarizer::new(SummarizerConfig::default());
    let mut first = c0.clone();
    let out1 = run(&s, &mut first);
    assert_eq!(out1.counters.get("cache_hits"), None);
    assert_eq!(out1.counters.get("summarized"), Some(&2));
    let mut second = c0.clone();
    let out2 = run(&s, &mut second);
    assert_eq!(out2.counters.get("cache_hits"), Some(&2));
    assert_eq!(second.to_json_string(), first.to_json_string());
    // A clone of the strategy shares the cache; a disabled cache never hits.
    let mut third = c0.clone();
    assert_eq!(
        run(&s.clone(), &mut third).counters.get("cache_hits"),
        Some(&2)
    );
    let off = Summarizer::new(SummarizerConfig {
        cache_entries: 0,
        ..SummarizerConfig::default()
    });
    let mut fourth = c0.clone();
    run(&off, &mut fourth);
    let out4 = run(&off, &mut c0.clone());
    assert_eq!(out4.counters.get("cache_hits"), None);
    assert_eq!(fourth.to_json_string(), first.to_json_string());
}

#[test]
fn cache_is_bounded() {
    let s = Summarizer::new(SummarizerConfig {
        cache_entries: 1,
        ..SummarizerConfig::default()
    });
    let mk = |t: &str| {
        let mut c = conv(json!([{"role": "assistant", "content": t}]));
        decide_all(&mut c, Decision::Compress);
        c
    };
    run(&s, &mut mk(PROSE_A));
    run(&s, &mut mk(PROSE_B)); // clears the full cache, then holds B
    assert_eq!(run(&s, &mut mk(PROSE_A)).counters.get("cache_hits"), None);
    assert_eq!(
        run(&s, &mut mk(PROSE_A)).counters.get("cache_hits"),
        Some(&1)
    );
}

fn body_len(t: &str) -> usize {
    // "[summary: {body} | entities: ...]"
    let t = t.strip_prefix("[summary: ").unwrap_or(t);
    let body = t.split(" | entities: ").next().unwrap_or(t);
    body.trim_end_matches(']').chars().count()
}

#[test]
fn per_role_budgets_extractive() {
    let long_user = format!("{PROSE_A} {PROSE_B}");
    let mk = || {
        let mut c = conv(json!([
            {"role": "user", "content": long_user},
            {"role": "assistant", "content": format!("{PROSE_B} {PROSE_A}")},
        ]));
        decide_all(&mut c, Decision::Compress);
        c
    };
    let mut default = mk();
    run(&Summarizer::new(SummarizerConfig::default()), &mut default);
    let mut c = mk();
    let cfg = SummarizerConfig {
        user_budget: Some(100),
        assistant_budget: Some(300),
        ..SummarizerConfig::default()
    };
    assert_eq!(cfg.role_budget(SummaryKind::User), Some(100));
    assert_eq!(cfg.role_budget(SummaryKind::Assistant), Some(300));
    assert_eq!(cfg.role_budget(SummaryKind::Tool), None);
    assert_eq!(cfg.budget_for(SummaryKind::Tool, 1000), 400);
    run(&Summarizer::new(cfg), &mut c);
    let (u, a) = (c.messages[0].text(), c.messages[1].text());
    assert!(body_len(&u) <= 100, "{u}");
    assert!(body_len(&a) <= 300, "{a}");
    assert!(body_len(&u) < body_len(&default.messages[0].text()), "{u}");
    // A zero budget is rejected.
    let e = ctxpress_core::registry::build("summarizer", &json!({"user_budget": 0}))
        .expect_err("invalid");
    assert!(e.to_string().contains("user_budget"), "{e}");
    assert!(ctxpress_core::registry::build("summarizer", &json!({"assistant_budget": 50})).is_ok());
}

/// Records the budget and kind of every request; answers with a short text.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(SummaryKind, Option<usize>)>>,
}

#[async_trait]
impl SummarizeAsync for Recorder {
    async fn summarize_async(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        self.seen
            .lock()
            .expect("lock")
            .push((req.kind, req.budget_chars));
        Ok("short answer".into())
    }
}

#[tokio::test]
async fn per_role_budgets_sent_to_backends() {
    let mut c = conv(json!([
        {"role": "user", "content": PROSE_A},
        {"role": "assistant", "content": PROSE_B},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Agent", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": REPORT},
    ]));
    decide_all(&mut c, Decision::Compress);
    let rec = Arc::new(Recorder::default());
    let cfg = SummarizerConfig {
        user_budget: Some(200),
        assistant_budget: Some(800),
        tool_results: true,
        merge_consecutive: false,
        ..SummarizerConfig::default()
    };
    let s = AsyncSummarizer::with_backend(cfg, rec.clone());
    s.apply_async(&mut c, &StageContext::default())
        .await
        .expect("applies");
    let mut seen = rec.seen.lock().expect("lock").clone();
    seen.sort_by_key(|(k, _)| format!("{k:?}"));
    assert_eq!(
        seen,
        vec![
            (SummaryKind::Assistant, Some(800)),
            (
                SummaryKind::Tool,
                Some(ctxpress_summarizer::Budget::default().for_len(REPORT.chars().count()))
            ),
            (SummaryKind::User, Some(200)),
        ]
    );
    assert!(c.messages[3].text().starts_with("[summary: short answer"));
}
