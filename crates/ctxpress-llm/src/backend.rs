//! The backends: OpenAI Chat Completions and Anthropic Messages behind
//! [`SummarizeAsync`].

use async_trait::async_trait;
use ctxpress_core::{SummarizeAsync, SummarizeError, SummaryRequest};
use serde_json::{Value, json};
use std::sync::Arc;

use crate::config::{LlmConfig, LlmConfigError, Provider, Resolved, check_transport, display_url};
use crate::http::{Http, Stats, run_detached};
use crate::prompt::{clean_answer, max_tokens, user_prompt};

/// Version header sent to the Anthropic Messages API.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// An LLM summarizer backend: one HTTP endpoint, one model, prompts by kind.
/// Cheap to clone; clones share the connection pool and the [`Stats`].
#[derive(Clone)]
pub struct LlmBackend {
    inner: Arc<Inner>,
}

/// The OpenAI-compatible chat-completions client (OpenAI, vLLM, llama.cpp
/// server, Ollama, ...): an [`LlmBackend`] built with [`LlmBackend::openai`].
pub type OpenAiBackend = LlmBackend;

struct Inner {
    provider: Provider,
    resolved: Resolved,
    url: String,
    http: Http,
}

impl std::fmt::Debug for LlmBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmBackend")
            .field("provider", &self.inner.provider)
            .field("url", &display_url(&self.inner.url))
            .field("model", &self.inner.resolved.model)
            .finish_non_exhaustive()
    }
}

impl LlmBackend {
    /// An OpenAI-compatible backend; the environment fills unset fields.
    pub fn openai(cfg: LlmConfig) -> Result<Self, LlmConfigError> {
        Self::new(Provider::OpenAi, cfg.resolve(Provider::OpenAi)?)
    }

    /// An Anthropic Messages backend; the environment fills unset fields.
    pub fn anthropic(cfg: LlmConfig) -> Result<Self, LlmConfigError> {
        Self::new(Provider::Anthropic, cfg.resolve(Provider::Anthropic)?)
    }

    /// A backend from an already resolved configuration.
    ///
    /// Refuses an API key with a plain `http://` URL off loopback unless
    /// `allow_insecure_http` is set (as [`LlmConfig::resolve`] does, for a
    /// [`Resolved`] built by hand).
    pub fn new(provider: Provider, resolved: Resolved) -> Result<Self, LlmConfigError> {
        check_transport(
            &resolved.base_url,
            resolved.api_key.is_some(),
            resolved.config.allow_insecure_http,
        )?;
        let http = Http::new(&resolved.config)?;
        let path = match provider {
            Provider::Anthropic => "messages",
            _ => "chat/completions",
        };
        let url = format!("{}/{path}", resolved.base_url);
        Ok(LlmBackend {
            inner: Arc::new(Inner {
                provider,
                resolved,
                url,
                http,
            }),
        })
    }

    /// The endpoint requests are posted to (with any `user:pass@` in it:
    /// show [`LlmBackend::display_url`] instead).
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The endpoint as it may be shown: user information replaced by `***`.
    pub fn display_url(&self) -> String {
        display_url(&self.inner.url)
    }

    /// The model asked for.
    pub fn model(&self) -> &str {
        &self.inner.resolved.model
    }

    /// Which API this backend speaks.
    pub fn provider(&self) -> Provider {
        self.inner.provider
    }

    /// Counters of requests, attempts, retries and failures so far.
    pub fn stats(&self) -> Stats {
        self.inner.http.counters.snapshot()
    }

    /// The JSON body that would be sent for `req` (redacted as it would be).
    pub fn request_body(&self, req: &SummaryRequest<'_>) -> Value {
        self.inner.body(req)
    }
}

impl Inner {
    fn cfg(&self) -> &LlmConfig {
        &self.resolved.config
    }

    /// The request body. Every text in it that can come from a conversation
    /// (the rendered prompt with its text and context, the system message)
    /// is redacted here, so no caller can send a secret by forgetting to.
    fn body(&self, req: &SummaryRequest<'_>) -> Value {
        let cfg = self.cfg();
        let redact = |s: String| {
            if cfg.redact_secrets {
                ctxpress_text::secrets::redact(&s)
            } else {
                s
            }
        };
        let prompt = redact(user_prompt(cfg, req));
        let system = redact(cfg.prompts.system.trim().to_string());
        let system = system.as_str();
        let mut body = match self.provider {
            Provider::Anthropic => {
                let mut b = json!({
                    "model": self.resolved.model,
                    "max_tokens": max_tokens(cfg, req),
                    "temperature": 0,
                    "messages": [{"role": "user", "content": prompt}],
                });
                if !system.is_empty() {
                    b["system"] = Value::String(system.to_string());
                }
                b
            }
            _ => {
                let mut messages = Vec::new();
                if !system.is_empty() {
                    messages.push(json!({"role": "system", "content": system}));
                }
                messages.push(json!({"role": "user", "content": prompt}));
                let mut b = json!({
                    "model": self.resolved.model,
                    "messages": messages,
                    "temperature": 0,
                    "max_tokens": max_tokens(cfg, req),
                    "stream": false,
                });
                // api.openai.com rejects fields it does not know.
                if let Some(c) = cfg.cache_prompt
                    && !self.resolved.base_url.contains("://api.openai.com")
                {
                    b["cache_prompt"] = Value::Bool(c);
                }
                b
            }
        };
        if let Value::Object(m) = &mut body {
            for (k, v) in &cfg.extra_body {
                m.insert(k.clone(), v.clone());
            }
        }
        body
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let key = self.resolved.api_key.as_deref();
        match self.provider {
            Provider::Anthropic => {
                let mut h = vec![("anthropic-version", ANTHROPIC_VERSION.to_string())];
                if let Some(k) = key {
                    h.push(("x-api-key", k.to_string()));
                }
                h
            }
            _ => key
                .map(|k| vec![("authorization", format!("Bearer {k}"))])
                .unwrap_or_default(),
        }
    }

    /// `e` with the API key and any URL credentials masked (a transport
    /// error names the URL; a server may echo what it was sent).
    fn scrub(&self, e: SummarizeError) -> SummarizeError {
        let clean = |s: String| {
            let mut s = display_url(&s);
            if let Some(k) = self.resolved.api_key.as_deref().filter(|k| k.len() >= 4) {
                s = s.replace(k, "***");
            }
            s
        };
        match e {
            SummarizeError::Transport(s) => SummarizeError::Transport(clean(s)),
            SummarizeError::BadResponse(s) => SummarizeError::BadResponse(clean(s)),
            SummarizeError::Rejected(s) => SummarizeError::Rejected(clean(s)),
            SummarizeError::Other(s) => SummarizeError::Other(clean(s)),
            other => other,
        }
    }

    async fn call(&self, body: Value) -> Result<String, SummarizeError> {
        self.call_raw(body).await.map_err(|e| self.scrub(e))
    }

    async fn call_raw(&self, body: Value) -> Result<String, SummarizeError> {
        let answer = self
            .http
            .post_json(&self.url, &self.headers(), &body)
            .await?;
        let raw = match self.provider {
            Provider::Anthropic => parse_anthropic(&answer)?,
            _ => parse_openai(&answer)?,
        };
        let text = clean_answer(&raw);
        if text.is_empty() {
            return Err(SummarizeError::Rejected("empty answer".into()));
        }
        Ok(text)
    }
}

#[async_trait]
impl SummarizeAsync for LlmBackend {
    async fn summarize_async(&self, req: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        let body = self.inner.body(req);
        let inner = self.inner.clone();
        run_detached(async move { inner.call(body).await }).await
    }
}

fn api_error(v: &Value) -> Option<String> {
    let e = v.get("error")?;
    Some(
        e.get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string()),
    )
}

/// Text of a content value: a string, or an array of `{type: text, text}` parts.
fn content_text(c: &Value) -> Option<String> {
    match c {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str).unwrap_or("text") == "text")
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join(""))
        }
        _ => None,
    }
}

/// The answer text of a chat-completions response.
pub fn parse_openai(v: &Value) -> Result<String, SummarizeError> {
    if let Some(e) = api_error(v) {
        return Err(SummarizeError::BadResponse(format!("error object: {e}")));
    }
    let choices = v
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(|| SummarizeError::BadResponse("no `choices` array".into()))?;
    let first = choices
        .first()
        .ok_or_else(|| SummarizeError::BadResponse("empty `choices`".into()))?;
    let content = first
        .get("message")
        .and_then(|m| m.get("content"))
        .or_else(|| first.get("text"))
        .ok_or_else(|| SummarizeError::BadResponse("choice has no message content".into()))?;
    match content {
        Value::Null => Err(SummarizeError::Rejected("null content".into())),
        c => content_text(c)
            .ok_or_else(|| SummarizeError::BadResponse("message content is not text".into())),
    }
}

/// The answer text of an Anthropic Messages response.
pub fn parse_anthropic(v: &Value) -> Result<String, SummarizeError> {
    if let Some(e) = api_error(v) {
        return Err(SummarizeError::BadResponse(format!("error object: {e}")));
    }
    let content = v
        .get("content")
        .ok_or_else(|| SummarizeError::BadResponse("no `content`".into()))?;
    content_text(content).ok_or_else(|| SummarizeError::BadResponse("no text block".into()))
}

/// Shared by the registry entries: typed config, then the backend.
pub(crate) fn build(
    provider: Provider,
    params: &Value,
) -> Result<ctxpress_core::Backend, ctxpress_core::ConfigError> {
    let cfg: LlmConfig = ctxpress_core::parse_params(provider.name(), params)?;
    let resolved = cfg.resolve(provider).map_err(|e| match e {
        LlmConfigError::Invalid { field, message } => ctxpress_core::ConfigError::InvalidField {
            stage: None,
            strategy: provider.name().into(),
            field,
            message,
        },
        other => ctxpress_core::ConfigError::Invalid(format!("{}: {other}", provider.name())),
    })?;
    let b = LlmBackend::new(provider, resolved)
        .map_err(|e| ctxpress_core::ConfigError::Invalid(format!("{}: {e}", provider.name())))?;
    Ok(ctxpress_core::Backend::Async(Arc::new(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_core::SummaryKind;

    fn resolved(url: &str, key: Option<&str>) -> Resolved {
        let cfg = LlmConfig {
            base_url: Some(url.into()),
            model: Some("m".into()),
            api_key: key.map(str::to_string),
            ..LlmConfig::default()
        };
        cfg.resolve_with(Provider::OpenAi, |_| None).unwrap()
    }

    fn req(text: &str) -> SummaryRequest<'_> {
        SummaryRequest {
            text,
            kind: SummaryKind::Assistant,
            budget_chars: Some(300),
            context: None,
        }
    }

    #[test]
    fn openai_body_has_the_required_fields() {
        let b =
            LlmBackend::new(Provider::OpenAi, resolved("http://127.0.0.1:1/v1/", None)).unwrap();
        assert_eq!(b.url(), "http://127.0.0.1:1/v1/chat/completions");
        let body = b.request_body(&req("the text"));
        assert_eq!(body["model"], "m");
        assert_eq!(body["temperature"], 0);
        assert_eq!(body["cache_prompt"], false);
        assert_eq!(body["stream"], false);
        assert_eq!(body["max_tokens"], 116);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][1]["role"], "user");
        assert!(
            body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .contains("the text")
        );
        assert!(b.inner.headers().is_empty());
    }

    #[test]
    fn cache_prompt_is_not_sent_to_openai_and_extra_body_merges() {
        let mut r = resolved("https://api.openai.com/v1", Some("sk-x"));
        r.config.extra_body.insert("top_p".into(), Value::from(0.5));
        let b = LlmBackend::new(Provider::OpenAi, r).unwrap();
        let body = b.request_body(&req("t"));
        assert!(body.get("cache_prompt").is_none());
        assert_eq!(body["top_p"], 0.5);
        assert_eq!(
            b.inner.headers(),
            vec![("authorization", "Bearer sk-x".to_string())]
        );
    }

    #[test]
    fn anthropic_body_and_headers() {
        let r = LlmConfig {
            base_url: Some("http://127.0.0.1:1/v1".into()),
            api_key: Some("ak".into()),
            ..LlmConfig::default()
        }
        .resolve_with(Provider::Anthropic, |_| None)
        .unwrap();
        let b = LlmBackend::new(Provider::Anthropic, r).unwrap();
        assert_eq!(b.url(), "http://127.0.0.1:1/v1/messages");
        let body = b.request_body(&req("t"));
        assert_eq!(body["messages"][0]["role"], "user");
        assert!(body["system"].as_str().unwrap().contains("compression"));
        assert!(body.get("cache_prompt").is_none());
        let h = b.inner.headers();
        assert!(h.contains(&("x-api-key", "ak".to_string())));
        assert!(h.contains(&("anthropic-version", ANTHROPIC_VERSION.to_string())));
    }

    #[test]
    fn openai_parsing() {
        let ok = json!({"choices": [{"message": {"role": "assistant", "content": "x"}}]});
        assert_eq!(parse_openai(&ok).unwrap(), "x");
        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]});
        assert_eq!(parse_openai(&parts).unwrap(), "ab");
        let legacy = json!({"choices": [{"text": "old"}]});
        assert_eq!(parse_openai(&legacy).unwrap(), "old");
        let cause = |v: Value| parse_openai(&v).unwrap_err().cause();
        assert_eq!(cause(json!({"choices": []})), "bad_response");
        assert_eq!(cause(json!({"id": 1})), "bad_response");
        assert_eq!(cause(json!([1, 2])), "bad_response");
        assert_eq!(
            cause(json!({"error": {"message": "overloaded"}})),
            "bad_response"
        );
        assert_eq!(
            cause(json!({"choices": [{"message": {"content": null}}]})),
            "rejected"
        );
        assert_eq!(
            cause(json!({"choices": [{"message": {"content": 5}}]})),
            "bad_response"
        );
    }

    #[test]
    fn anthropic_parsing() {
        let ok = json!({"content": [{"type": "text", "text": "sum"}], "stop_reason": "end_turn"});
        assert_eq!(parse_anthropic(&ok).unwrap(), "sum");
        assert!(parse_anthropic(&json!({"content": []})).is_err());
        assert!(parse_anthropic(&json!({"type": "error", "error": {"message": "x"}})).is_err());
    }

    #[test]
    fn registry_builds_both_backends_and_rejects_typos() {
        let p = json!({"base_url": "http://127.0.0.1:1/v1", "model": "m"});
        for name in ["openai", "anthropic"] {
            let b = ctxpress_core::summarize::build_backend(name, &p).unwrap();
            assert!(matches!(b, ctxpress_core::Backend::Async(_)));
        }
        let e = ctxpress_core::summarize::build_backend("openai", &json!({"modle": "x"}))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("did you mean `model`"), "{e}");
        let e = ctxpress_core::summarize::build_backend("openai", &json!({"base_url": "ftp://x"}))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("base_url"), "{e}");
    }
}
