//! Secrets in summarized prose: the backend never receives them, and the
//! output never loses them (they stay verbatim on `keep:` lines after the
//! summary), on the LLM and the deterministic paths.

use async_trait::async_trait;
use ctxpress_core::summarize::{SummarizeAsync, SummarizeError, SummaryRequest};
use ctxpress_core::{AsyncStrategy, Conversation, Decision, DecisionRule, StageContext, Strategy};
use ctxpress_summarizer::{AsyncSummarizer, Summarizer, SummarizerConfig};
use serde_json::json;
use std::sync::{Arc, Mutex};

const OPENAI: &str = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z";
const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";

const PROSE: &str = "I looked into the deployment failure on the staging cluster this morning. \
The health check endpoint timed out after 30 seconds because the connection pool was exhausted \
under load, and increasing the pool size from 10 to 50 fixed it. The staging cluster uses a \
different config file than production does, so remember to port the change over before Friday.";

/// A model stand-in: answers a short summary, records what it was sent.
struct Stub {
    seen: Mutex<Vec<String>>,
}

impl Stub {
    fn new() -> Arc<Self> {
        Arc::new(Stub {
            seen: Mutex::new(Vec::new()),
        })
    }

    fn sent(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl SummarizeAsync for Stub {
    async fn summarize_async(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        self.seen.lock().unwrap().push(req.text.to_string());
        Ok("Fixed the staging health check by enlarging the connection pool.".into())
    }
}

fn conv(messages: serde_json::Value) -> Conversation {
    Conversation::parse(&messages.to_string()).expect("parses")
}

fn decide(c: &mut Conversation, decisions: &[Decision]) {
    let ids: Vec<_> = c.messages.iter().map(|m| m.id().clone()).collect();
    for (id, d) in ids.iter().zip(decisions) {
        c.ann_mut(id).decision = Some((*d, DecisionRule::Compressible));
    }
}

async fn run_llm(c: &mut Conversation, cfg: SummarizerConfig) -> Arc<Stub> {
    let stub = Stub::new();
    AsyncSummarizer::with_backend(cfg, stub.clone())
        .apply_async(c, &StageContext::default())
        .await
        .expect("applies");
    stub
}

fn text(c: &Conversation, i: usize) -> String {
    c.messages[i].text().into_owned()
}

/// The issue's case: a provider key in old assistant prose. The model never
/// sees it, the summary replaces the prose, and the key is still in the
/// output, once, on a `keep:` line.
#[tokio::test]
async fn a_key_in_summarized_prose_stays_in_the_output() {
    let msg = format!("{PROSE} I exported OPENAI_API_KEY={OPENAI} for the smoke test.");
    let mut c = conv(json!([{"role": "assistant", "content": msg}]));
    decide(&mut c, &[Decision::Compress]);
    let stub = run_llm(&mut c, SummarizerConfig::default()).await;
    let sent = stub.sent();
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].contains(OPENAI), "{}", sent[0]);
    assert!(sent[0].contains("[REDACTED:openai]"));
    let out = text(&c, 0);
    assert!(
        out.starts_with("[summary: Fixed the staging health check"),
        "{out}"
    );
    assert!(
        out.ends_with(&format!("]\nkeep: OPENAI_API_KEY={OPENAI}")),
        "{out}"
    );
    assert_eq!(out.matches(OPENAI).count(), 1, "{out}");
    assert!(out.chars().count() < msg.chars().count());
}

/// Every class: assignments keep their key, URLs stay whole, tokens stand
/// alone; one line each, in order, with redaction on or off.
#[tokio::test]
async fn every_secret_class_gets_a_keep_line() {
    let msg = format!(
        "{PROSE} For the record: DB_PASSWORD=hunter2hunter2 and the replica is at \
postgres://app:Sup3rS3cret@db.internal:5432/billing, the service token is {JWT}, and \
aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY. {PROSE}"
    );
    for redact_secrets in [true, false] {
        let mut c = conv(json!([{"role": "user", "content": msg}]));
        decide(&mut c, &[Decision::Compress]);
        let cfg = SummarizerConfig {
            redact_secrets,
            ..Default::default()
        };
        let stub = run_llm(&mut c, cfg).await;
        if redact_secrets {
            let sent = &stub.sent()[0];
            for s in ["hunter2hunter2", "Sup3rS3cret", JWT, "wJalrXUtnFEMI"] {
                assert!(!sent.contains(s), "{s} sent: {sent}");
            }
        }
        let out = text(&c, 0);
        let keep: Vec<&str> = out.lines().filter(|l| l.starts_with("keep: ")).collect();
        assert_eq!(
            keep,
            vec![
                "keep: DB_PASSWORD=hunter2hunter2".to_string(),
                "keep: postgres://app:Sup3rS3cret@db.internal:5432/billing,".to_string(),
                format!("keep: {JWT}"),
                "keep: aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY."
                    .to_string(),
            ],
            "{out}"
        );
    }
}

/// A code-split message: the fences stay as they are, the key from the prose
/// goes on a `keep:` line between the summary and the fences.
#[tokio::test]
async fn code_split_prose_keeps_its_key_before_the_fences() {
    let msg = format!(
        "{PROSE} The GitHub token ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r is in the CI secrets.\n\n\
```sh\ncurl -s localhost:8080/health\n```\n\n{PROSE}"
    );
    let mut c = conv(json!([{"role": "assistant", "content": msg}]));
    decide(&mut c, &[Decision::CodeSplit]);
    run_llm(&mut c, SummarizerConfig::default()).await;
    let out = text(&c, 0);
    assert!(
        out.ends_with(
            "]\nkeep: ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r\n\n```sh\ncurl -s localhost:8080/health\n```"
        ),
        "{out}"
    );
}

/// Merged messages and summarized tool results keep theirs too; the same
/// secret twice is kept once.
#[tokio::test]
async fn merged_messages_and_tool_results_keep_theirs() {
    let a = format!("{PROSE} Use password: 'Adm1n!2024' for the admin console.");
    let b = format!("{PROSE} Again, password: 'Adm1n!2024' is the one.");
    let tool = format!("{PROSE} Response header: Authorization: Bearer {JWT}");
    let mut c = conv(json!([
        {"role": "user", "content": a},
        {"role": "user", "content": b},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": tool},
    ]));
    decide(
        &mut c,
        &[
            Decision::Compress,
            Decision::Compress,
            Decision::Preserve,
            Decision::Compress,
        ],
    );
    let cfg = SummarizerConfig {
        tool_results: true,
        ..Default::default()
    };
    run_llm(&mut c, cfg).await;
    assert_eq!(c.messages.len(), 3);
    let merged = text(&c, 0);
    assert!(
        merged.ends_with("]\nkeep: password: 'Adm1n!2024'"),
        "{merged}"
    );
    assert_eq!(merged.matches("Adm1n!2024").count(), 1);
    let t = text(&c, 2);
    assert!(t.ends_with(&format!("]\nkeep: Bearer {JWT}")), "{t}");
}

/// The deterministic path keeps what its extract dropped, and adds nothing
/// when the extract already holds the secret.
#[test]
fn extractive_summaries_keep_dropped_secrets_only() {
    let long = format!("{PROSE} {PROSE} By the way the key is {OPENAI} for now. {PROSE}");
    let mut c = conv(json!([{"role": "assistant", "content": long}]));
    decide(&mut c, &[Decision::Compress]);
    Summarizer::new(SummarizerConfig::default())
        .apply(&mut c, &StageContext::default())
        .unwrap();
    let out = text(&c, 0);
    assert!(out.starts_with("[summary: "), "{out}");
    assert_eq!(out.matches(OPENAI).count(), 1, "{out}");
    // prose without secrets: no keep line
    let mut c = conv(json!([{"role": "assistant", "content": format!("{PROSE} {PROSE}")}]));
    decide(&mut c, &[Decision::Compress]);
    Summarizer::new(SummarizerConfig::default())
        .apply(&mut c, &StageContext::default())
        .unwrap();
    assert!(!text(&c, 0).contains("keep:"));
}

/// When the summary plus its keep lines would not be shorter, the message
/// stays as it was: nothing is lost either way.
#[tokio::test]
async fn no_saving_keeps_the_original() {
    let pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n-----END PRIVATE KEY-----";
    let msg = format!("Here is the key you asked for:\n{pem}\nstore it in the vault please.");
    let mut c = conv(json!([{"role": "user", "content": msg}]));
    decide(&mut c, &[Decision::Compress]);
    run_llm(&mut c, SummarizerConfig::default()).await;
    assert_eq!(text(&c, 0), msg);
}
