//! Configuration of the LLM backends: typed, with defaults, unknown fields rejected.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::sync::OnceLock;

use ctxpress_core::SummaryKind;

/// Environment variable that supplies the base URL when none is configured.
pub const ENV_URL: &str = "CTXPRESS_LLM_URL";
/// Environment variable that supplies the model name when none is configured.
pub const ENV_MODEL: &str = "CTXPRESS_LLM_MODEL";

/// Configuration of an LLM summarizer backend (the `openai` and `anthropic`
/// backends share it; only the defaults of `api_key_env`, `base_url` and
/// `model` differ by provider).
///
/// Credentials are guarded:
/// - every request's text (prompt, context, system message) has its secrets
///   replaced by `[REDACTED:kind]` placeholders first
///   ([`ctxpress_text::secrets::redact`]: provider keys, JWTs, password /
///   token / secret assignments, passwords in URLs, private keys, ...), unless
///   `redact_secrets = false`;
/// - an API key is never sent over plain `http://` to a host that is not
///   loopback (`127.0.0.0/8`, `::1`, `localhost`): resolving such a
///   configuration fails with an error on `base_url`, unless
///   `allow_insecure_http = true` says the network is trusted (use `https://`,
///   or no key, otherwise);
/// - the API key is never shown, and a base URL with credentials in it
///   (`https://user:pass@host/`) is shown as `https://***@host/` in every
///   error, `Debug` output and note.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// API base, e.g. `http://127.0.0.1:8080/v1`; requests go to
    /// `{base_url}/chat/completions`. Unset: `$CTXPRESS_LLM_URL`, then the provider's public API.
    pub base_url: Option<String>,
    /// Model name. Unset: `$CTXPRESS_LLM_MODEL`, then the provider default.
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (unset: the provider's usual one).
    pub api_key_env: Option<String>,
    /// API key given directly (takes precedence over `api_key_env`). No key is fine for local servers.
    pub api_key: Option<String>,
    /// Timeout of one HTTP attempt, in milliseconds.
    pub timeout_ms: u64,
    /// Retries after the first attempt, on 429, 5xx and connection errors.
    pub max_retries: u32,
    /// First backoff delay in milliseconds; doubles on each retry, plus jitter.
    pub backoff_ms: u64,
    /// Upper bound of one backoff delay (also caps a server's `Retry-After`).
    pub max_backoff_ms: u64,
    /// After this many requests in a row fail with a connection error or a
    /// timeout, fail requests at once for `breaker_cooldown_ms` (0: never).
    pub breaker_after: u32,
    /// How long requests fail at once after the endpoint was found unreachable.
    pub breaker_cooldown_ms: u64,
    /// Value of the llama.cpp `cache_prompt` request field; `null` omits the field.
    /// Never sent to api.openai.com, which rejects unknown fields.
    pub cache_prompt: Option<bool>,
    /// Extra top-level fields merged into every request body (e.g. vLLM or Ollama options).
    pub extra_body: Map<String, Value>,
    /// Completion token limits by kind of text.
    pub max_tokens: MaxTokens,
    /// Prompt templates by kind of text.
    pub prompts: Prompts,
    /// Named prompt set for the kinds whose template `prompts` leaves at its
    /// default (a template set in `prompts` always wins).
    pub prompt_style: PromptStyle,
    /// Send the API key over plain `http://` to a host that is not loopback
    /// (default `false`: such a configuration is refused, since anyone on
    /// the path can read the key). Loopback `http://` is always allowed.
    pub allow_insecure_http: bool,
    /// Replace secrets in every request's text with `[REDACTED:kind]`
    /// placeholders before it is sent (default `true`).
    pub redact_secrets: bool,
}

/// A named set of prompt templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptStyle {
    /// The [`Prompts::default`] templates.
    #[default]
    Default,
    /// Spec 004 ("hybrid"): its user-message and assistant-message
    /// compression prompts ([`HYBRID_USER`], [`HYBRID_ASSISTANT`]); tool
    /// results and chunks keep the default templates.
    Hybrid,
}

/// Spec 004's user-message compression prompt (~50 tokens: the default user
/// budget is 200 characters).
pub const HYBRID_USER: &str = "You are a conversation compression assistant. Your job is to \
compress user messages into concise summaries that preserve the key intent and questions.

Original message:
{{text}}

Compress this to 1-2 sentences (at most {{budget_chars}} characters) that captures:
- Main topic/question
- Key concerns or requests
- Technical specifics mentioned (file paths, identifiers, numbers, error messages: exactly as written)

Compressed summary:";

/// Spec 004's assistant-message compression prompt: like the user one, with
/// more room (~200 tokens: the default assistant budget is 800 characters).
pub const HYBRID_ASSISTANT: &str = "You are a conversation compression assistant. Your job is \
to compress assistant responses into concise summaries that preserve what was explained, \
done and decided.

Original message:
{{text}}

Compress this to a few sentences (at most {{budget_chars}} characters) that captures:
- What was explained or answered
- What was changed or done, and why
- Decisions, suggestions and open problems
- Technical specifics mentioned (file paths, identifiers, numbers, error messages: exactly as written)

Compressed summary:";

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_url: None,
            model: None,
            api_key_env: None,
            api_key: None,
            timeout_ms: 30_000,
            max_retries: 2,
            backoff_ms: 250,
            max_backoff_ms: 8_000,
            breaker_after: 5,
            breaker_cooldown_ms: 30_000,
            cache_prompt: Some(false),
            extra_body: Map::new(),
            max_tokens: MaxTokens::default(),
            prompts: Prompts::default(),
            prompt_style: PromptStyle::Default,
            allow_insecure_http: false,
            redact_secrets: true,
        }
    }
}

impl fmt::Debug for LlmConfig {
    // Hand-written so that an API key never ends up in a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url.as_deref().map(display_url))
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout_ms", &self.timeout_ms)
            .field("max_retries", &self.max_retries)
            .field("backoff_ms", &self.backoff_ms)
            .field("max_backoff_ms", &self.max_backoff_ms)
            .field("breaker_after", &self.breaker_after)
            .field("breaker_cooldown_ms", &self.breaker_cooldown_ms)
            .field("cache_prompt", &self.cache_prompt)
            .field("extra_body", &self.extra_body)
            .field("max_tokens", &self.max_tokens)
            .field("prompts", &self.prompts)
            .field("prompt_style", &self.prompt_style)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("redact_secrets", &self.redact_secrets)
            .finish()
    }
}

/// Completion token limits (`max_tokens`) by kind of text; the limit sent is
/// also lowered to fit the request's character budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaxTokens {
    /// Old user messages (~50 tokens wanted).
    pub user: u32,
    /// Old assistant messages (~200 tokens wanted).
    pub assistant: u32,
    /// Tool results.
    pub tool: u32,
    /// Chunks of several messages.
    pub chunk: u32,
}

impl Default for MaxTokens {
    fn default() -> Self {
        MaxTokens {
            user: 80,
            assistant: 256,
            tool: 192,
            chunk: 384,
        }
    }
}

impl MaxTokens {
    /// The limit for `kind`.
    pub fn for_kind(&self, kind: SummaryKind) -> u32 {
        match kind {
            SummaryKind::User => self.user,
            SummaryKind::Assistant => self.assistant,
            SummaryKind::Tool => self.tool,
            _ => self.chunk,
        }
    }
}

/// Prompt templates. Each per-kind template is sent as the user turn after
/// `system`; `{{text}}`, `{{context}}` and `{{budget_chars}}` are replaced
/// (once, so placeholders inside the text itself are left alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prompts {
    /// System message of every request (empty: none is sent).
    pub system: String,
    /// Template for old user messages.
    pub user: String,
    /// Template for old assistant messages.
    pub assistant: String,
    /// Template for tool results.
    pub tool: String,
    /// Template for chunks (chunk-and-fold: `{{context}}` is the summary so far).
    pub chunk: String,
}

const KEEP: &str = "Keep file paths, identifiers (function, variable and type names), \
numbers with their units, error messages and decisions exactly as written.";

impl Default for Prompts {
    fn default() -> Self {
        Prompts {
            system: "You are a conversation compression assistant. You rewrite one message \
of a conversation between a user and a coding assistant into a short summary that keeps \
what is needed to continue the work. Answer with the summary only, without a preamble."
                .into(),
            user: format!(
                "Compress this user message to 1-2 sentences (at most {{{{budget_chars}}}} \
characters) that capture the main question or request, key concerns, and technical \
specifics. {KEEP}\n\nMessage:\n{{{{text}}}}\n\nCompressed summary:"
            ),
            assistant: format!(
                "Compress this assistant response to at most {{{{budget_chars}}}} characters. \
Keep what was explained, what was changed and why, decisions, and open problems. {KEEP}\n\n\
Response:\n{{{{text}}}}\n\nCompressed summary:"
            ),
            tool: format!(
                "Compress this tool output to at most {{{{budget_chars}}}} characters: which \
files, commands and results it shows, and whether it succeeded or failed. {KEEP}\n\n\
Tool output:\n{{{{text}}}}\n\nCompressed summary:"
            ),
            chunk: format!(
                "Summary of the earlier part of the conversation (may be empty):\n{{{{context}}}}\n\n\
Continue that summary with the next part of the conversation below, in at most \
{{{{budget_chars}}}} characters in total. Keep the user's goals, what was done, decisions and \
open problems. {KEEP}\n\nNext part:\n{{{{text}}}}\n\nUpdated summary:"
            ),
        }
    }
}

impl Prompts {
    /// The template for `kind`.
    pub fn for_kind(&self, kind: SummaryKind) -> &str {
        match kind {
            SummaryKind::User => &self.user,
            SummaryKind::Assistant => &self.assistant,
            SummaryKind::Tool => &self.tool,
            _ => &self.chunk,
        }
    }

    /// The templates of a named style: the defaults with that style's
    /// templates in place.
    pub fn of_style(style: PromptStyle) -> Prompts {
        let mut p = Prompts::default();
        if style == PromptStyle::Hybrid {
            p.user = HYBRID_USER.into();
            p.assistant = HYBRID_ASSISTANT.into();
        }
        p
    }
}

fn default_prompts() -> &'static Prompts {
    static P: OnceLock<Prompts> = OnceLock::new();
    P.get_or_init(Prompts::default)
}

impl LlmConfig {
    /// The template used for `kind`: the one set in `prompts`, or, where that
    /// is the default, the one of `prompt_style`.
    pub fn template(&self, kind: SummaryKind) -> &str {
        let set = self.prompts.for_kind(kind);
        if self.prompt_style == PromptStyle::Default || set != default_prompts().for_kind(kind) {
            return set;
        }
        match (self.prompt_style, kind) {
            (PromptStyle::Hybrid, SummaryKind::User) => HYBRID_USER,
            (PromptStyle::Hybrid, SummaryKind::Assistant) => HYBRID_ASSISTANT,
            _ => set,
        }
    }
}

/// The API dialect of a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI Chat Completions (OpenAI, vLLM, llama.cpp server, Ollama, ...).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl Provider {
    /// Registry name of the backend.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    fn default_url(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com/v1",
        }
    }

    fn default_model(self) -> &'static str {
        match self {
            Provider::OpenAi => "gpt-4o-mini",
            Provider::Anthropic => "claude-3-5-haiku-latest",
        }
    }

    fn default_key_env(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

/// A configuration with the environment applied: what a backend actually uses.
#[derive(Clone)]
pub struct Resolved {
    /// Base URL without a trailing slash.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// API key, if any.
    pub api_key: Option<String>,
    /// The rest of the configuration.
    pub config: LlmConfig,
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolved")
            .field("base_url", &display_url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// Why a configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmConfigError {
    /// A field has a value the backend cannot use.
    #[error("field `{field}`: {message}")]
    Invalid {
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(String),
}

impl LlmConfig {
    /// Apply the environment (`CTXPRESS_LLM_URL`, `CTXPRESS_LLM_MODEL`, the key
    /// variable) and the provider defaults, and check the values.
    pub fn resolve(&self, provider: Provider) -> Result<Resolved, LlmConfigError> {
        self.resolve_with(provider, |k| std::env::var(k).ok())
    }

    /// [`LlmConfig::resolve`] with an explicit environment lookup (for tests).
    pub fn resolve_with(
        &self,
        provider: Provider,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Resolved, LlmConfigError> {
        let nonempty = |s: Option<String>| s.filter(|v| !v.trim().is_empty());
        let base_url = nonempty(self.base_url.clone())
            .or_else(|| nonempty(env(ENV_URL)))
            .unwrap_or_else(|| provider.default_url().to_string());
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(invalid(
                "base_url",
                format!(
                    "`{}` is not an http:// or https:// URL",
                    display_url(&base_url)
                ),
            ));
        }
        let model = nonempty(self.model.clone())
            .or_else(|| nonempty(env(ENV_MODEL)))
            .unwrap_or_else(|| provider.default_model().to_string());
        let key_env = self
            .api_key_env
            .clone()
            .unwrap_or_else(|| provider.default_key_env().to_string());
        let api_key = nonempty(self.api_key.clone()).or_else(|| nonempty(env(&key_env)));
        if self.timeout_ms == 0 {
            return Err(invalid("timeout_ms", "must be at least 1".into()));
        }
        if self.max_retries > 10 {
            return Err(invalid("max_retries", "must be at most 10".into()));
        }
        for (name, t) in [
            ("prompts.user", &self.prompts.user),
            ("prompts.assistant", &self.prompts.assistant),
            ("prompts.tool", &self.prompts.tool),
            ("prompts.chunk", &self.prompts.chunk),
        ] {
            if !t.contains("{{text}}") {
                return Err(invalid(name, "template must contain `{{text}}`".into()));
            }
        }
        check_transport(&base_url, api_key.is_some(), self.allow_insecure_http)?;
        Ok(Resolved {
            base_url,
            model,
            api_key,
            config: self.clone(),
        })
    }
}

/// `url` as it may be shown: user information (`user:pass@`) replaced by
/// `***` (`https://***@host/v1`).
pub fn display_url(url: &str) -> String {
    ctxpress_text::secrets::mask_url_credentials(url)
}

/// The host of an `http(s)://` URL, without port, brackets or user information.
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = hostport.strip_prefix('[') {
        return &v6[..v6.find(']').unwrap_or(v6.len())];
    }
    &hostport[..hostport.find(':').unwrap_or(hostport.len())]
}

/// True for `localhost`, `127.0.0.0/8` and `::1` (also IPv4-mapped).
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_end_matches('.');
    if h.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match h.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => a.is_loopback(),
        Ok(std::net::IpAddr::V6(a)) => {
            a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// Refuse to send an API key in clear text over the network: a key with a
/// plain `http://` URL whose host is not loopback needs `allow_insecure_http`.
pub(crate) fn check_transport(
    base_url: &str,
    has_key: bool,
    allow_insecure_http: bool,
) -> Result<(), LlmConfigError> {
    let plain = base_url
        .get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    if has_key && plain && !allow_insecure_http && !is_loopback_host(url_host(base_url)) {
        return Err(invalid(
            "base_url",
            format!(
                "refusing to send the API key in clear text to `{}` (plain http:// to a host \
that is not loopback); use https://, or no API key, or set `allow_insecure_http = true` \
if this network is trusted",
                display_url(base_url)
            ),
        ));
    }
    Ok(())
}

fn invalid(field: &str, message: String) -> LlmConfigError {
    LlmConfigError::Invalid {
        field: field.into(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn defaults_without_env_are_the_provider_ones() {
        let r = LlmConfig::default()
            .resolve_with(Provider::OpenAi, env_of(&[]))
            .unwrap();
        assert_eq!(r.base_url, "https://api.openai.com/v1");
        assert_eq!(r.model, "gpt-4o-mini");
        assert_eq!(r.api_key, None);
        let r = LlmConfig::default()
            .resolve_with(Provider::Anthropic, env_of(&[("ANTHROPIC_API_KEY", "k")]))
            .unwrap();
        assert_eq!(r.base_url, "https://api.anthropic.com/v1");
        assert_eq!(r.api_key.as_deref(), Some("k"));
    }

    #[test]
    fn env_fills_what_config_leaves_unset() {
        let env = env_of(&[
            (ENV_URL, "http://127.0.0.1:9/v1/"),
            (ENV_MODEL, "smollm2"),
            ("OPENAI_API_KEY", "sk-env"),
            ("MY_KEY", "sk-mine"),
        ]);
        let r = LlmConfig::default()
            .resolve_with(Provider::OpenAi, &env)
            .unwrap();
        assert_eq!(r.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(r.model, "smollm2");
        assert_eq!(r.api_key.as_deref(), Some("sk-env"));

        let cfg = LlmConfig {
            base_url: Some("https://example.invalid/api".into()),
            model: Some("m".into()),
            api_key_env: Some("MY_KEY".into()),
            ..LlmConfig::default()
        };
        let r = cfg.resolve_with(Provider::OpenAi, &env).unwrap();
        assert_eq!(r.base_url, "https://example.invalid/api");
        assert_eq!(r.model, "m");
        assert_eq!(r.api_key.as_deref(), Some("sk-mine"));

        let cfg = LlmConfig {
            api_key: Some("sk-direct".into()),
            ..cfg
        };
        let r = cfg.resolve_with(Provider::OpenAi, &env).unwrap();
        assert_eq!(r.api_key.as_deref(), Some("sk-direct"));
    }

    #[test]
    fn bad_values_are_named() {
        let bad = |cfg: LlmConfig| {
            cfg.resolve_with(Provider::OpenAi, env_of(&[]))
                .unwrap_err()
                .to_string()
        };
        let e = bad(LlmConfig {
            base_url: Some("localhost:8080".into()),
            ..LlmConfig::default()
        });
        assert!(e.contains("base_url"), "{e}");
        let e = bad(LlmConfig {
            timeout_ms: 0,
            ..LlmConfig::default()
        });
        assert!(e.contains("timeout_ms"), "{e}");
        let mut cfg = LlmConfig::default();
        cfg.prompts.tool = "no placeholder".into();
        let e = bad(cfg);
        assert!(e.contains("prompts.tool"), "{e}");
    }

    #[test]
    fn parse_params_rejects_unknown_and_keeps_nested_defaults() {
        let e = ctxpress_core::parse_params::<LlmConfig>("openai", &json!({"timeout": 5}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `timeout_ms`"), "{e}");
        let e = ctxpress_core::parse_params::<LlmConfig>(
            "openai",
            &json!({"prompts": {"usr": "x {{text}}"}}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("prompts"), "{e}");

        let cfg: LlmConfig = ctxpress_core::parse_params(
            "openai",
            &json!({"timeout_ms": 5, "prompts": {"user": "U {{text}}"}, "max_tokens": {"user": 10}}),
        )
        .unwrap();
        assert_eq!(cfg.timeout_ms, 5);
        assert_eq!(cfg.prompts.user, "U {{text}}");
        assert_eq!(cfg.prompts.assistant, Prompts::default().assistant);
        assert_eq!(cfg.max_tokens.user, 10);
        assert_eq!(cfg.max_tokens.chunk, MaxTokens::default().chunk);
        assert_eq!(cfg.cache_prompt, Some(false));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let cfg = LlmConfig {
            api_key: Some("sk-secret-value".into()),
            ..LlmConfig::default()
        };
        let s = format!("{cfg:?}");
        assert!(!s.contains("sk-secret-value"), "{s}");
        let r = cfg.resolve_with(Provider::OpenAi, env_of(&[])).unwrap();
        assert!(!format!("{r:?}").contains("sk-secret-value"));
    }

    #[test]
    fn hybrid_style_selects_the_spec_templates_where_prompts_are_default() {
        let cfg: LlmConfig =
            ctxpress_core::parse_params("openai", &json!({"prompt_style": "hybrid"})).unwrap();
        assert_eq!(cfg.prompt_style, PromptStyle::Hybrid);
        assert_eq!(cfg.template(SummaryKind::User), HYBRID_USER);
        assert_eq!(cfg.template(SummaryKind::Assistant), HYBRID_ASSISTANT);
        // Tool results and chunks keep the default templates.
        let d = Prompts::default();
        assert_eq!(cfg.template(SummaryKind::Tool), d.tool);
        assert_eq!(cfg.template(SummaryKind::Chunk), d.chunk);
        assert_eq!(Prompts::of_style(PromptStyle::Hybrid).user, HYBRID_USER);
        assert_eq!(Prompts::of_style(PromptStyle::Default), d);
        // A template set explicitly wins over the style.
        let cfg: LlmConfig = ctxpress_core::parse_params(
            "openai",
            &json!({"prompt_style": "hybrid", "prompts": {"user": "U {{text}}"}}),
        )
        .unwrap();
        assert_eq!(cfg.template(SummaryKind::User), "U {{text}}");
        assert_eq!(cfg.template(SummaryKind::Assistant), HYBRID_ASSISTANT);
        // The default style is the default templates.
        let cfg = LlmConfig::default();
        assert_eq!(cfg.prompt_style, PromptStyle::Default);
        assert_eq!(cfg.template(SummaryKind::User), d.user);
        assert_eq!(cfg.template(SummaryKind::Assistant), d.assistant);
        let e = ctxpress_core::parse_params::<LlmConfig>("openai", &json!({"prompt_style": "cce"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("prompt_style"), "{e}");
        for t in [HYBRID_USER, HYBRID_ASSISTANT] {
            assert!(
                t.contains("{{text}}") && t.contains("{{budget_chars}}"),
                "{t}"
            );
            assert!(t.starts_with("You are a conversation compression assistant."));
            assert!(t.ends_with("Compressed summary:"));
        }
    }

    #[test]
    fn default_prompts_have_the_placeholders() {
        let p = Prompts::default();
        for t in [&p.user, &p.assistant, &p.tool, &p.chunk] {
            assert!(t.contains("{{text}}"), "{t}");
            assert!(t.contains("{{budget_chars}}"), "{t}");
            assert!(t.contains("identifiers"), "{t}");
        }
        assert!(p.chunk.contains("{{context}}"));
    }
}
