//! The `summarizer` strategy: decisions, merging, tool exchanges, size guard,
//! registration, and the async path with fake backends.

use async_trait::async_trait;
use ctxpress_core::summarize::{SummarizeAsync, SummarizeError, SummaryRequest};
use ctxpress_core::{
    BuiltStrategy, Conversation, Decision, DecisionRule, MemoryArchive, Pipeline, StageContext,
    StageStatus, Strategy,
};
use ctxpress_summarizer::{
    AsyncSummarizer, Extractive, NO_CLASSIFICATION, Summarizer, SummarizerConfig, SummarySource,
    with_fallback,
};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PROSE_A: &str = "The deployment failed because the healthCheck endpoint timed out after 30 seconds. \
We traced it to the connection_pool being exhausted under load. Increasing the pool size fixed it. \
Remember that the staging cluster uses a different config file than production does.";
const PROSE_B: &str = "Next I looked at the metrics dashboard for the last week of traffic. \
Memory use grew by 200 MB per day, which suggests a leak in the SessionCache eviction logic. \
The eviction timer is never rescheduled after a panic in the callback, so entries pile up.";
const PROSE_C: &str = "Finally, the flaky integration test was caused by a shared temp directory. \
Each test now creates its own directory with a unique name, and the suite passes 50 times in a row \
on the CI runners without a single failure, which is a clear improvement over last month.";

fn conv(messages: serde_json::Value) -> Conversation {
    Conversation::parse(&messages.to_string()).expect("parses")
}

fn decide(c: &mut Conversation, decisions: &[Option<Decision>]) {
    let ids: Vec<_> = c.messages.iter().map(|m| m.id().clone()).collect();
    for (id, d) in ids.iter().zip(decisions) {
        if let Some(d) = d {
            c.ann_mut(id).decision = Some((*d, DecisionRule::Compressible));
        }
    }
}

fn run_sync(c: &mut Conversation, cfg: SummarizerConfig) -> ctxpress_core::StageOutcome {
    Summarizer::new(cfg)
        .apply(c, &StageContext::default())
        .expect("applies")
}

fn text(c: &Conversation, i: usize) -> String {
    c.messages[i].text().into_owned()
}

use Decision::*;

#[test]
fn compresses_single_message_and_keeps_id() {
    let mut c = conv(json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": PROSE_A},
        {"role": "user", "content": "thanks"},
    ]));
    decide(&mut c, &[Some(Preserve), Some(Compress), Some(Preserve)]);
    let id = c.messages[1].id().clone();
    let out = run_sync(&mut c, SummarizerConfig::default());
    assert_eq!(out.counters.get("summarized"), Some(&1));
    assert_eq!(c.messages.len(), 3);
    assert_eq!(c.messages[1].id(), &id);
    let t = text(&c, 1);
    assert!(t.starts_with("[summary: ") && t.ends_with(']'), "{t}");
    assert!(t.contains(" | entities: "), "{t}");
    assert!(t.contains("healthCheck"), "{t}");
    // Entities the summary text holds are not listed again.
    let (body, listed) = t.trim_end_matches(']').split_once(" | entities: ").unwrap();
    for e in listed.split(", ") {
        assert!(!body.contains(e), "{e} twice in {t}");
    }
    assert!(t.chars().count() < PROSE_A.chars().count());
    assert_eq!(text(&c, 0), "hi");
    assert!(out.notes.is_empty(), "{:?}", out.notes);
}

#[test]
fn merges_consecutive_same_role_into_new_message() {
    let mut c = conv(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": PROSE_A},
        {"role": "assistant", "content": PROSE_B},
        {"role": "assistant", "content": PROSE_C},
        {"role": "user", "content": PROSE_A},
    ]));
    decide(
        &mut c,
        &[
            Some(Preserve),
            Some(Compress),
            Some(Compress),
            Some(Compress),
            Some(Compress),
        ],
    );
    let merged_ids: Vec<_> = c.messages[1..4].iter().map(|m| m.id().clone()).collect();
    let out = run_sync(&mut c, SummarizerConfig::default());
    assert_eq!(c.messages.len(), 3, "{}", c.to_json_string());
    assert_eq!(out.counters.get("summarized"), Some(&2));
    assert_eq!(out.counters.get("merged"), Some(&3));
    let m = &c.messages[1];
    assert!(!merged_ids.contains(m.id()));
    assert_eq!(c.ann(m.id()).unwrap().replaces, merged_ids);
    let t = text(&c, 1);
    assert!(t.contains(" (3 messages merged)"), "{t}");
    assert_eq!(m.role_str(), "assistant");
    // The user message is its own unit (different role).
    assert!(text(&c, 2).starts_with("[summary: "));
    // Annotations never leak into JSON.
    assert!(!c.to_json_string().contains("replaces"));
}

#[test]
fn merge_can_be_disabled() {
    let mut c = conv(json!([
        {"role": "assistant", "content": PROSE_A},
        {"role": "assistant", "content": PROSE_B},
    ]));
    decide(&mut c, &[Some(Compress), Some(Compress)]);
    let cfg = SummarizerConfig {
        merge_consecutive: false,
        ..Default::default()
    };
    let out = run_sync(&mut c, cfg);
    assert_eq!(c.messages.len(), 2);
    assert_eq!(out.counters.get("summarized"), Some(&2));
    assert_eq!(out.counters.get("merged"), None);
}

#[test]
fn never_touches_or_merges_across_tool_exchanges() {
    let mut c = conv(json!([
        {"role": "assistant", "content": PROSE_A},
        {"role": "assistant", "content": PROSE_B, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": PROSE_C},
        {"role": "assistant", "content": PROSE_C},
    ]));
    // Even a (wrong) Compress decision on tool-carrying messages is ignored.
    decide(&mut c, &[Some(Compress); 4]);
    let before: Vec<String> = (0..4).map(|i| text(&c, i)).collect();
    let out = run_sync(&mut c, SummarizerConfig::default());
    assert_eq!(c.messages.len(), 4);
    assert_eq!(out.counters.get("summarized"), Some(&2));
    assert_eq!(out.counters.get("merged"), None);
    assert_eq!(text(&c, 1), before[1]);
    assert_eq!(text(&c, 2), before[2]);
    assert!(text(&c, 0).starts_with("[summary: "));
    assert!(text(&c, 3).starts_with("[summary: "));
    assert!(ctxpress_core::validate(&c).is_empty());
}

#[test]
fn preserve_dedup_and_unclassified_are_left_alone() {
    let mut c = conv(json!([
        {"role": "assistant", "content": PROSE_A},
        {"role": "assistant", "content": PROSE_B},
        {"role": "assistant", "content": PROSE_C},
    ]));
    decide(&mut c, &[Some(Preserve), Some(Dedup), None]);
    let out = run_sync(&mut c, SummarizerConfig::default());
    assert_eq!(text(&c, 0), PROSE_A);
    assert_eq!(text(&c, 1), PROSE_B);
    assert_eq!(text(&c, 2), PROSE_C);
    assert_eq!(out.counters.get("unclassified"), Some(&1));
    assert!(
        out.notes.iter().any(|n| n.contains(NO_CLASSIFICATION)),
        "{:?}",
        out.notes
    );
}

#[test]
fn code_split_keeps_fences_verbatim() {
    let msg = format!("{PROSE_A}\n\n```rust\nfn main() {{ println!(\"x\"); }}\n```\n\n{PROSE_B}");
    let mut c = conv(json!([{"role": "assistant", "content": msg}]));
    decide(&mut c, &[Some(CodeSplit)]);
    let out = run_sync(&mut c, SummarizerConfig::default());
    assert_eq!(out.counters.get("code_split"), Some(&1));
    let t = text(&c, 0);
    assert!(t.starts_with("[summary: "), "{t}");
    assert!(
        t.ends_with("]\n\n```rust\nfn main() { println!(\"x\"); }\n```"),
        "{t}"
    );
    assert!(!t.contains("entities:"), "{t}");
}

#[test]
fn size_guard_keeps_original() {
    // One 125-char sentence full of entities: the formatted summary is longer.
    let s = "The fooBar and bazQux with my_var call UserSession for src/a.ts using npm at 10 MB and 5 seconds in v1.2.3 for Alice";
    let mut c = conv(json!([{"role": "user", "content": s}]));
    decide(&mut c, &[Some(Compress)]);
    let out = run_sync(&mut c, SummarizerConfig::default());
    assert_eq!(text(&c, 0), s);
    assert_eq!(out.counters.get("kept_longer"), Some(&1));
    assert_eq!(out.counters.get("summarized"), None);
}

#[test]
fn embeds_summary_ids() {
    let mut c = conv(json!([{"role": "assistant", "content": PROSE_A}]));
    decide(&mut c, &[Some(Compress)]);
    let cfg = SummarizerConfig {
        embed_summary_id: true,
        max_entities: 0,
        ..Default::default()
    };
    run_sync(&mut c, cfg);
    let t = text(&c, 0);
    assert!(t.starts_with("[summary#sum_"), "{t}");
    assert!(!t.contains("entities"), "{t}");
}

#[test]
fn registered_sync_for_extractive_and_config_checked() {
    let b = ctxpress_core::registry::build("summarizer", &json!({})).unwrap();
    assert!(matches!(b, BuiltStrategy::Sync(_)));
    let e = ctxpress_core::registry::build("summarizer", &json!({"concurency": 2})).unwrap_err();
    assert!(e.to_string().contains("did you mean `concurrency`"), "{e}");
    let e = ctxpress_core::registry::build("summarizer", &json!({"llm": 3})).unwrap_err();
    assert!(e.to_string().contains("`llm`"), "{e}");
    let e = ctxpress_core::registry::build("summarizer", &json!({"backend": "nope"})).unwrap_err();
    assert!(
        e.to_string().contains("unknown summarizer backend `nope`"),
        "{e}"
    );
    let d = (ctxpress_core::registry::find("summarizer")
        .unwrap()
        .default_config)();
    assert_eq!(d["backend"], "extractive");
    assert_eq!(d["concurrency"], 4);
    assert_eq!(d["redact_secrets"], true);
}

#[test]
fn pipeline_keeps_the_stage() {
    let mut c = conv(json!([
        {"role": "system", "content": "sys"},
        {"role": "user", "content": PROSE_A},
        {"role": "assistant", "content": PROSE_B},
        {"role": "assistant", "content": PROSE_C},
        {"role": "user", "content": "ok"},
    ]));
    decide(
        &mut c,
        &[
            Some(Preserve),
            Some(Compress),
            Some(Compress),
            Some(Compress),
            Some(Preserve),
        ],
    );
    let mut p = Pipeline::new(Vec::new());
    p.push(Box::new(Summarizer::new(SummarizerConfig::default())));
    let r = p.run(&mut c, &StageContext::default());
    assert_eq!(
        r.stages[0].status,
        StageStatus::Applied,
        "{:?}",
        r.stages[0]
    );
    assert!(r.chars_after < r.chars_before);
    assert_eq!(r.messages_after, 4);
}

// ---- async path -----------------------------------------------------------

/// A fake backend: answers by `mode`, counts calls and the most requests in flight.
struct Fake {
    mode: &'static str,
    calls: AtomicUsize,
    now: AtomicUsize,
    max: AtomicUsize,
    seen: Mutex<Vec<String>>,
}

impl Fake {
    fn new(mode: &'static str) -> Arc<Self> {
        Arc::new(Fake {
            mode,
            calls: AtomicUsize::new(0),
            now: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl SummarizeAsync for Fake {
    async fn summarize_async(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(req.text.to_string());
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        match self.mode {
            "fail" => Err(SummarizeError::Http(500)),
            "timeout" => Err(SummarizeError::Timeout(10)),
            "longer" => Ok(format!("{} and more", req.text)),
            "empty" => Ok("  ".into()),
            // Alternate: odd-length texts fail, even ones get a good answer.
            "mixed" if req.text.len() % 2 == 1 => Err(SummarizeError::BadResponse("junk".into())),
            _ => Ok(format!(
                "LLM: {}",
                req.text.chars().take(40).collect::<String>()
            )),
        }
    }
}

fn many(n: usize) -> Conversation {
    let texts = [PROSE_A, PROSE_B, PROSE_C];
    let msgs: Vec<_> = (0..n)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("{} Item {i}.", texts[i % 3])})
        })
        .collect();
    let mut c = conv(serde_json::Value::Array(msgs));
    decide(&mut c, &vec![Some(Compress); n]);
    c
}

async fn run_async(
    fake: &Arc<Fake>,
    cfg: SummarizerConfig,
    c: &mut Conversation,
    ctx: &StageContext,
) -> (AsyncSummarizer, ctxpress_core::StageOutcome) {
    use ctxpress_core::AsyncStrategy;
    let s = AsyncSummarizer::with_backend(cfg, fake.clone());
    let out = s.apply_async(c, ctx).await.expect("applies");
    (s, out)
}

#[tokio::test]
async fn async_good_answers_are_accepted_with_bounded_concurrency() {
    let fake = Fake::new("good");
    let mut c = many(12);
    let (_, out) = run_async(
        &fake,
        SummarizerConfig::default(),
        &mut c,
        &StageContext::default(),
    )
    .await;
    assert_eq!(out.counters.get("llm_accepted"), Some(&12));
    assert_eq!(out.counters.get("summarized"), Some(&12));
    assert_eq!(fake.max.load(Ordering::SeqCst), 4, "concurrency bound");
    assert!(
        text(&c, 0).starts_with("[summary: LLM: "),
        "{}",
        text(&c, 0)
    );
    assert!(text(&c, 0).contains(" | entities: "));

    let fake1 = Fake::new("good");
    let cfg = SummarizerConfig {
        concurrency: 1,
        ..Default::default()
    };
    run_async(&fake1, cfg, &mut many(6), &StageContext::default()).await;
    assert_eq!(fake1.max.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn async_falls_back_by_cause() {
    for (mode, cause) in [
        ("fail", "fallback_http"),
        ("timeout", "fallback_timeout"),
        ("longer", "fallback_rejected"),
        ("empty", "fallback_rejected"),
    ] {
        let fake = Fake::new(mode);
        let mut c = many(5);
        let mut expected = many(5);
        run_sync(&mut expected, SummarizerConfig::default());
        let (_, out) = run_async(
            &fake,
            SummarizerConfig::default(),
            &mut c,
            &StageContext::default(),
        )
        .await;
        assert_eq!(
            out.counters.get(cause),
            Some(&5),
            "{mode}: {:?}",
            out.counters
        );
        assert_eq!(out.counters.get("llm_accepted"), None);
        assert!(
            out.notes
                .iter()
                .any(|n| n.contains("deterministic fallback for 5")),
            "{:?}",
            out.notes
        );
        // The fallback is exactly the deterministic summary.
        assert_eq!(c.to_json_string(), expected.to_json_string(), "{mode}");
    }
    let fake = Fake::new("mixed");
    let mut c = many(9);
    let (_, out) = run_async(
        &fake,
        SummarizerConfig::default(),
        &mut c,
        &StageContext::default(),
    )
    .await;
    let bad = out
        .counters
        .get("fallback_bad_response")
        .copied()
        .unwrap_or(0);
    let ok = out.counters.get("llm_accepted").copied().unwrap_or(0);
    assert!(bad > 0 && ok > 0 && bad + ok == 9, "{:?}", out.counters);
}

#[tokio::test]
async fn async_cache_memory_and_archive() {
    let fake = Fake::new("good");
    let archive = Arc::new(MemoryArchive::new());
    let ctx = StageContext {
        archive: Some(archive.clone()),
        ..Default::default()
    };
    let s = AsyncSummarizer::with_backend(SummarizerConfig::default(), fake.clone());
    use ctxpress_core::AsyncStrategy;
    let mut c1 = many(6);
    s.apply_async(&mut c1, &ctx).await.unwrap();
    assert_eq!(fake.calls.load(Ordering::SeqCst), 6);
    // Same instance, same texts: served from memory.
    let mut c2 = many(6);
    let out = s.apply_async(&mut c2, &ctx).await.unwrap();
    assert_eq!(out.counters.get("cache_hits"), Some(&6));
    assert_eq!(fake.calls.load(Ordering::SeqCst), 6);
    assert_eq!(c1.to_json_string(), c2.to_json_string());
    // A new instance finds the answers in the archive.
    let fake2 = Fake::new("fail");
    let mut c3 = many(6);
    let (_, out) = run_async(&fake2, SummarizerConfig::default(), &mut c3, &ctx).await;
    assert_eq!(out.counters.get("cache_hits"), Some(&6));
    assert_eq!(out.counters.get("llm_accepted"), Some(&6));
    assert_eq!(fake2.calls.load(Ordering::SeqCst), 0);
    // Different backend params: a different key.
    let cfg = SummarizerConfig {
        llm: json!({"model": "other"}),
        ..Default::default()
    };
    let fake3 = Fake::new("good");
    run_async(&fake3, cfg, &mut many(6), &ctx).await;
    assert_eq!(fake3.calls.load(Ordering::SeqCst), 6);
    // Failures are not persisted: a fresh instance asks again.
    let fake4 = Fake::new("fail");
    let cfg = SummarizerConfig {
        llm: json!({"model": "x"}),
        ..Default::default()
    };
    run_async(&fake4, cfg.clone(), &mut many(3), &ctx).await;
    let fake5 = Fake::new("good");
    let (_, out) = run_async(&fake5, cfg, &mut many(3), &ctx).await;
    assert_eq!(out.counters.get("llm_accepted"), Some(&3));
}

#[tokio::test]
async fn async_sends_redacted_text_only() {
    let secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGh";
    let body = format!("{PROSE_A} The key {secret} was pasted by mistake, rotate it.");
    let fake = Fake::new("good");
    let mut c = conv(json!([{"role": "user", "content": body}]));
    decide(&mut c, &[Some(Compress)]);
    run_async(
        &fake,
        SummarizerConfig::default(),
        &mut c,
        &StageContext::default(),
    )
    .await;
    let seen = fake.seen.lock().unwrap().clone();
    assert_eq!(seen, vec![ctxpress_text::secrets::redact(&body)]);
    for s in &seen {
        assert!(ctxpress_text::secrets::find_secrets(s).is_empty(), "{s}");
    }
    // With redaction off the text goes as is.
    let fake = Fake::new("good");
    let mut c = conv(json!([{"role": "user", "content": body}]));
    decide(&mut c, &[Some(Compress)]);
    let cfg = SummarizerConfig {
        redact_secrets: false,
        ..Default::default()
    };
    run_async(&fake, cfg, &mut c, &StageContext::default()).await;
    assert_eq!(fake.seen.lock().unwrap().clone(), vec![body]);
}

#[tokio::test]
async fn with_fallback_reports_path_and_cause() {
    let req = SummaryRequest {
        text: PROSE_A,
        kind: ctxpress_core::SummaryKind::Assistant,
        budget_chars: None,
        context: None,
    };
    let ex = Extractive::default();
    let r = with_fallback(Fake::new("good").as_ref(), &req, &ex).await;
    assert_eq!(r.source, SummarySource::Primary);
    assert!(r.text.starts_with("LLM: "));
    let r = with_fallback(Fake::new("fail").as_ref(), &req, &ex).await;
    assert_eq!(r.cause(), Some("http"));
    assert_eq!(r.text, ex.summarize_req(&req));
    let r = with_fallback(Fake::new("longer").as_ref(), &req, &ex).await;
    assert_eq!(r.cause(), Some("rejected"));
    // A sync backend is an async one too.
    let r = with_fallback(&ex, &req, &ex).await;
    assert_eq!(r.source, SummarySource::Primary);
}
