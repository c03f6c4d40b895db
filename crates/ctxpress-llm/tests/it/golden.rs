//! Golden request bodies: the exact JSON sent for each kind with the default
//! prompts, and for old user and assistant messages with the `hybrid` ones. Regenerate with `UPDATE_GOLDEN=1 cargo test -p ctxpress-llm --test golden`.

use ctxpress_core::{SummaryKind, SummaryRequest};
use ctxpress_llm::{LlmBackend, LlmConfig, PromptStyle, Provider};
use std::path::PathBuf;

const TEXT: &str = "I refactored src/auth/jwt.ts so that jwt.verify runs once per request. \
All 42 tests pass; refreshSession still throws TokenExpiredError when the clock skew exceeds 30 s.";

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
    assert_eq!(actual, want, "{name} differs from the golden file");
}

fn backend(provider: Provider) -> LlmBackend {
    backend_with(provider, PromptStyle::Default)
}

fn backend_with(provider: Provider, prompt_style: PromptStyle) -> LlmBackend {
    let cfg = LlmConfig {
        base_url: Some("http://127.0.0.1:1/v1".into()),
        model: Some("smollm2".into()),
        prompt_style,
        ..LlmConfig::default()
    };
    let resolved = cfg.resolve_with(provider, |_| None).unwrap();
    LlmBackend::new(provider, resolved).unwrap()
}

#[test]
fn openai_request_bodies() {
    let b = backend(Provider::OpenAi);
    let mut all = serde_json::Map::new();
    for (name, kind, budget, context) in [
        ("user", SummaryKind::User, None, None),
        ("assistant", SummaryKind::Assistant, Some(120), None),
        ("tool", SummaryKind::Tool, None, None),
        (
            "chunk",
            SummaryKind::Chunk,
            Some(400),
            Some("User wants faster auth."),
        ),
    ] {
        let req = SummaryRequest {
            text: TEXT,
            kind,
            budget_chars: budget,
            context,
        };
        all.insert(name.into(), b.request_body(&req));
    }
    let text = serde_json::to_string_pretty(&all).unwrap() + "\n";
    check("openai_requests.json", &text);
}

#[test]
fn anthropic_request_body() {
    let b = backend(Provider::Anthropic);
    let req = SummaryRequest {
        text: TEXT,
        kind: SummaryKind::Assistant,
        budget_chars: None,
        context: None,
    };
    let text = serde_json::to_string_pretty(&b.request_body(&req)).unwrap() + "\n";
    check("anthropic_request.json", &text);
}

#[test]
fn openai_hybrid_request_bodies() {
    let b = backend_with(Provider::OpenAi, PromptStyle::Hybrid);
    let mut all = serde_json::Map::new();
    for (name, kind, budget) in [
        ("user", SummaryKind::User, Some(200)),
        ("assistant", SummaryKind::Assistant, None),
    ] {
        let req = SummaryRequest {
            text: TEXT,
            kind,
            budget_chars: budget,
            context: None,
        };
        all.insert(name.into(), b.request_body(&req));
    }
    let text = serde_json::to_string_pretty(&all).unwrap() + "\n";
    check("openai_hybrid_requests.json", &text);
}
