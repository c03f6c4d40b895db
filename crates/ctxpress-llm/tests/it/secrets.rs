//! Credentials never leave the process through the backend: every request is
//! redacted (whatever the caller sent), an API key is not sent over plain
//! http off loopback, and neither the key nor a base URL's `user:pass@`
//! shows in errors or `Debug` output.

use crate::common;

use common::{Reply, Stub};
use ctxpress_core::{SummarizeAsync, SummaryKind, SummaryRequest};
use ctxpress_llm::{LlmBackend, LlmConfig, Provider};

/// One secret of each class the redactor knows, with the text around it.
const SECRETS: &[(&str, &str)] = &[
    (
        "aws_secret_access_key = ",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("the access key id is ", "AKIAIOSFODNN7EXAMPLE"),
    (
        "Authorization: Bearer ",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    ),
    ("DATABASE_URL=postgres://app:", "Sup3rS3cretPw"),
    ("DB_PASSWORD=", "hunter2hunter2"),
    ("password: '", "Admin1234!"),
    ("\"client_secret\": \"", "cs_9f8e7d6c5b4a"),
    ("GITHUB_TOKEN=", "ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r"),
    (
        "OPENAI_API_KEY=",
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    ),
    ("stripe ", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    (
        "slack ",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    ("google ", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HcBqn",
    ),
];

/// A text that holds every secret of [`SECRETS`].
fn leaky_text() -> String {
    let mut t = String::from(
        "I set up the deployment for the billing service and checked the configuration. ",
    );
    for (before, secret) in SECRETS {
        t.push_str(before);
        t.push_str(secret);
        if before.ends_with('\'') {
            t.push('\'');
        } else if before.ends_with('"') {
            t.push('"');
        } else if before.starts_with("DATABASE_URL") {
            t.push_str("@db.internal:5432/billing");
        } else if before.starts_with("-----BEGIN") {
            t.push_str("\n-----END RSA PRIVATE KEY-----");
        }
        t.push('\n');
    }
    t.push_str("All 42 tests pass and the service is healthy again after the restart.");
    t
}

fn config(stub: &Stub) -> LlmConfig {
    LlmConfig {
        base_url: Some(stub.base_url()),
        model: Some("stub-model".into()),
        api_key: Some("sk-test-key-0123456789".into()),
        timeout_ms: 2_000,
        max_retries: 0,
        ..LlmConfig::default()
    }
}

fn assert_clean(what: &str, s: &str) {
    for (_, secret) in SECRETS {
        assert!(!s.contains(secret), "{what} leaks {secret}: {s}");
    }
}

/// Every kind of request (the summarizer's per-message ones, the compactor's
/// chunks with the summary so far as context, a system prompt that quotes a
/// secret) reaches the server with no secret in it, on both APIs, even though
/// the caller redacted nothing.
#[tokio::test]
async fn no_request_carries_a_secret() {
    let stub = Stub::start(|_, seen| {
        if seen.path.ends_with("/messages") {
            Reply::json(
                200,
                serde_json::json!({"content": [{"type": "text", "text": "ok"}]}),
            )
        } else {
            Reply::chat("ok")
        }
    })
    .await;
    let text = leaky_text();
    let context = format!("Earlier: {}", leaky_text());
    let mut cfg = config(&stub);
    cfg.prompts.system = format!("Summarize. Never repeat DB_PASSWORD={}", "hunter2hunter2");
    let openai = LlmBackend::openai(cfg.clone()).unwrap();
    let anthropic = LlmBackend::anthropic(cfg).unwrap();
    assert_eq!(anthropic.provider(), Provider::Anthropic);
    let kinds = [
        SummaryKind::User,
        SummaryKind::Assistant,
        SummaryKind::Tool,
        SummaryKind::Chunk,
    ];
    for b in [&openai, &anthropic] {
        for kind in kinds {
            let req = SummaryRequest {
                text: &text,
                kind,
                budget_chars: Some(200),
                context: (kind == SummaryKind::Chunk).then_some(context.as_str()),
            };
            b.summarize_async(&req).await.unwrap();
            assert_clean("request_body", &b.request_body(&req).to_string());
        }
    }
    let seen = stub.seen();
    assert_eq!(seen.len(), 8);
    for s in &seen {
        let body = s.body.to_string();
        assert_clean(&s.path, &body);
        // what the secrets were is still said
        for kind in ["aws_secret", "jwt", "url_password", "password", "github"] {
            assert!(
                body.contains(&format!("[REDACTED:{kind}]")),
                "{kind}: {body}"
            );
        }
        // the rest of the text is sent as written
        assert!(body.contains("All 42 tests pass"), "{body}");
        assert!(body.contains("postgres://app:[REDACTED:url_password]@db.internal:5432/billing"));
        assert!(body.contains("-----BEGIN RSA PRIVATE KEY-----"));
    }
    // the compactor's context went out redacted too
    let chunk = &seen[3].body.to_string();
    assert!(
        chunk.contains("Earlier: I set up the deployment"),
        "{chunk}"
    );
}

/// `redact_secrets = false` is the one way to send text as is.
#[tokio::test]
async fn redaction_can_be_turned_off_explicitly() {
    let stub = Stub::start(|_, _| Reply::chat("ok")).await;
    let b = LlmBackend::openai(LlmConfig {
        redact_secrets: false,
        ..config(&stub)
    })
    .unwrap();
    let text = leaky_text();
    let req = SummaryRequest {
        text: &text,
        kind: SummaryKind::Assistant,
        budget_chars: Some(200),
        context: None,
    };
    b.summarize_async(&req).await.unwrap();
    assert!(stub.seen()[0].body.to_string().contains("hunter2hunter2"));
}

/// A base URL with credentials shows as `***@host` in Debug output, in a
/// config error and in a transport error; the API key shows nowhere.
#[tokio::test]
async fn credentials_in_the_base_url_are_never_shown() {
    // a closed port on loopback: the request fails with a transport error
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cfg = LlmConfig {
        base_url: Some(format!("http://alice:pa55w0rd-xyz@127.0.0.1:{port}/v1")),
        model: Some("m".into()),
        api_key: Some("sk-test-key-0123456789".into()),
        timeout_ms: 1_000,
        max_retries: 0,
        ..LlmConfig::default()
    };
    let shown = |s: &str| {
        assert!(!s.contains("pa55w0rd-xyz"), "password shown: {s}");
        assert!(!s.contains("alice"), "user shown: {s}");
        assert!(!s.contains("sk-test-key-0123456789"), "key shown: {s}");
    };
    shown(&format!("{cfg:?}"));
    assert!(format!("{cfg:?}").contains("http://***@127.0.0.1"));
    let b = LlmBackend::openai(cfg.clone()).unwrap();
    shown(&format!("{b:?}"));
    assert_eq!(
        b.display_url(),
        format!("http://***@127.0.0.1:{port}/v1/chat/completions")
    );
    let resolved = cfg.resolve(Provider::OpenAi).unwrap();
    shown(&format!("{resolved:?}"));
    let req = SummaryRequest {
        text: "some text to summarize that is long enough to matter here",
        kind: SummaryKind::Assistant,
        budget_chars: Some(20),
        context: None,
    };
    let e = b.summarize_async(&req).await.unwrap_err();
    assert_eq!(e.cause(), "transport");
    shown(&e.to_string());
    shown(&format!("{e:?}"));
    // a config error that quotes the URL
    let e = LlmConfig {
        base_url: Some("ftp://alice:pa55w0rd-xyz@files.example.com/v1".into()),
        ..cfg.clone()
    }
    .resolve(Provider::OpenAi)
    .unwrap_err();
    shown(&e.to_string());
    assert!(e.to_string().contains("ftp://***@files.example.com"), "{e}");
    // through the registry (how the CLI and the presets build it)
    let e = ctxpress_core::summarize::build_backend(
        "openai",
        &serde_json::json!({"base_url": "http://alice:pa55w0rd-xyz@10.0.0.7:8080/v1", "api_key": "sk-test-key-0123456789"}),
    )
    .err()
    .unwrap()
    .to_string();
    shown(&e);
}

/// The API key is not sent in clear text off loopback: such a configuration
/// is refused (whether the key is configured or comes from the environment)
/// unless `allow_insecure_http` is set; loopback http, https and keyless
/// http are fine.
#[test]
fn api_key_over_plain_http_needs_loopback_or_an_opt_in() {
    let with = |url: &str, key: Option<&str>, allow: bool| LlmConfig {
        base_url: Some(url.into()),
        model: Some("m".into()),
        api_key: key.map(str::to_string),
        allow_insecure_http: allow,
        ..LlmConfig::default()
    };
    let key = Some("sk-test-key-0123456789");
    for url in [
        "http://10.0.0.7:8080/v1",
        "http://llm.example.com/v1",
        "http://user:pw@llm.example.com/v1",
        "http://[2001:db8::1]:8000/v1",
        "http://127.0.0.1.nip.io/v1",
        "http://0.0.0.0:8080/v1",
    ] {
        for provider in [Provider::OpenAi, Provider::Anthropic] {
            let e = with(url, key, false)
                .resolve_with(provider, |_| None)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("base_url")
                    && e.contains("allow_insecure_http")
                    && e.contains("clear text"),
                "{url}: {e}"
            );
            assert!(!e.contains("sk-test-key") && !e.contains(":pw@"), "{e}");
            // the key from the environment counts the same
            let e = with(url, None, false).resolve_with(provider, |k| {
                (k == "OPENAI_API_KEY" || k == "ANTHROPIC_API_KEY").then(|| "sk-env-123".into())
            });
            assert!(e.is_err(), "{url}");
            // opting in, or sending no key, is fine
            assert!(
                with(url, key, true)
                    .resolve_with(provider, |_| None)
                    .is_ok()
            );
            assert!(
                with(url, None, false)
                    .resolve_with(provider, |_| None)
                    .is_ok()
            );
        }
        // the registry reports it as a config error naming the field
        let e = ctxpress_core::summarize::build_backend(
            "openai",
            &serde_json::json!({"base_url": url, "api_key": "sk-test-key-0123456789"}),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("base_url") && e.contains("allow_insecure_http"),
            "{e}"
        );
        let ok = ctxpress_core::summarize::build_backend(
            "openai",
            &serde_json::json!({"base_url": url, "api_key": "sk-test-key-0123456789", "allow_insecure_http": true}),
        );
        assert!(ok.is_ok(), "{url}");
    }
    for url in [
        "http://127.0.0.1:8080/v1",
        "http://127.1.2.3/v1",
        "http://localhost:11434/v1",
        "http://LOCALHOST/v1",
        "http://[::1]:8000/v1",
        "http://[::ffff:127.0.0.1]:8000/v1",
        "https://api.openai.com/v1",
        "https://10.0.0.7/v1",
    ] {
        assert!(
            with(url, key, false)
                .resolve_with(Provider::OpenAi, |_| None)
                .is_ok(),
            "{url}"
        );
        assert!(LlmBackend::openai(with(url, key, false)).is_ok(), "{url}");
    }
    // a Resolved built by hand is checked by the backend too
    let mut r = with("http://127.0.0.1:1/v1", key, false)
        .resolve_with(Provider::OpenAi, |_| None)
        .unwrap();
    r.base_url = "http://10.0.0.7:8080/v1".into();
    assert!(LlmBackend::new(Provider::OpenAi, r).is_err());
}
