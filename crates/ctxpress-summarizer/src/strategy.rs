//! The `summarizer` strategy: acts on the classifier's decisions, merges
//! consecutive same-role messages, summarizes (deterministically, or through a
//! backend with deterministic fallback), code-splits, and guards sizes.

use crate::backend::{Extractive, FallbackSummary, SummarySource, accept};
use crate::bounded::run_bounded;
use crate::text::{Budget, extract_entities, format_code_split, format_summary, summary_id};
use async_trait::async_trait;
use ctxpress_core::archive::content_hash;
use ctxpress_core::summarize::{SummarizeAsync, SummaryKind, SummaryRequest, build_backend};
use ctxpress_core::{
    AsyncStrategy, BuiltStrategy, ConfigError, Conversation, Decision, DecisionRule, Message,
    MessageId, Role, StageContext, StageOutcome, Strategy, StrategyError, StrategyFactory,
    parse_params,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Name under which the strategy is registered.
pub const NAME: &str = "summarizer";

/// Note written when messages carry no classifier decision.
pub const NO_CLASSIFICATION: &str = "no classification: run the classifier stage first";

/// Configuration of the `summarizer` strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummarizerConfig {
    /// Backend name in core's backend registry (`extractive`, `openai`, ...).
    pub backend: String,
    /// Parameters passed verbatim to the backend factory (a JSON object).
    pub llm: Value,
    /// Requests in flight at once on the async path.
    pub concurrency: usize,
    /// Replace secrets with placeholders before text goes to a non-extractive backend.
    pub redact_secrets: bool,
    /// Write `[summary#{id}: ...]` instead of `[summary: ...]`.
    pub embed_summary_id: bool,
    /// Merge consecutive same-role compressible messages into one summary.
    pub merge_consecutive: bool,
    /// Inputs shorter than this many characters get `short_budget`.
    pub short_threshold: usize,
    /// Summary budget in characters for short inputs.
    pub short_budget: usize,
    /// Summary budget in characters for long inputs.
    pub long_budget: usize,
    /// Most entities appended as ` | entities: ...` (0 disables them).
    pub max_entities: usize,
}

impl Default for SummarizerConfig {
    fn default() -> Self {
        let b = Budget::default();
        SummarizerConfig {
            backend: "extractive".into(),
            llm: Value::Object(Map::new()),
            concurrency: 4,
            redact_secrets: true,
            embed_summary_id: false,
            merge_consecutive: true,
            short_threshold: b.short_threshold,
            short_budget: b.short,
            long_budget: b.long,
            max_entities: 10,
        }
    }
}

impl SummarizerConfig {
    /// The budgets as a [`Budget`].
    pub fn budget(&self) -> Budget {
        Budget {
            short_threshold: self.short_threshold,
            short: self.short_budget,
            long: self.long_budget,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, message: &str| ConfigError::InvalidField {
            stage: None,
            strategy: NAME.into(),
            field: field.into(),
            message: message.into(),
        };
        if !self.llm.is_object() {
            return Err(bad("llm", "must be a table (JSON object)"));
        }
        if self.concurrency == 0 {
            return Err(bad("concurrency", "must be at least 1"));
        }
        if self.short_budget == 0 || self.long_budget == 0 {
            return Err(bad("short_budget", "budgets must be at least 1"));
        }
        Ok(())
    }
}

/// What to do with one unit of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnitKind {
    /// Summarize (one message or a merged group).
    Compress,
    /// Summarize the prose, keep the fences.
    CodeSplit,
}

/// One summary to make: a message index range and the text to summarize.
#[derive(Debug, Clone)]
struct Unit {
    kind: UnitKind,
    /// First message index.
    start: usize,
    /// One past the last message index.
    end: usize,
    /// Full original text (joined texts of a group).
    original: String,
    /// Text to summarize (the prose of a code-split message).
    input: String,
    /// Fences of a code-split message.
    fences: Vec<String>,
    kind_hint: SummaryKind,
}

/// The plan for a conversation: units plus what was skipped.
#[derive(Debug, Default)]
struct Plan {
    units: Vec<Unit>,
    unclassified: u64,
}

fn summary_kind(role: Role) -> SummaryKind {
    match role {
        Role::User => SummaryKind::User,
        _ => SummaryKind::Assistant,
    }
}

fn touchable(conv: &Conversation, m: &Message) -> bool {
    !m.has_tool_calls()
        && !m.is_tool_result()
        && !conv.ann(m.id()).is_some_and(|a| a.protected)
        && !m.text().trim().is_empty()
}

fn decision(conv: &Conversation, m: &Message) -> Option<Decision> {
    conv.ann(m.id()).and_then(|a| a.decision).map(|(d, _)| d)
}

fn plan(conv: &Conversation, cfg: &SummarizerConfig) -> Plan {
    let mut p = Plan::default();
    let msgs = &conv.messages;
    let mut i = 0;
    while let Some(m) = msgs.get(i) {
        if !touchable(conv, m) {
            i += 1;
            continue;
        }
        match decision(conv, m) {
            None => {
                p.unclassified += 1;
                i += 1;
            }
            Some(Decision::Compress) => {
                let mut j = i + 1;
                if cfg.merge_consecutive && m.has_string_content() {
                    while let Some(n) = msgs.get(j) {
                        if touchable(conv, n)
                            && n.has_string_content()
                            && n.role_str() == m.role_str()
                            && decision(conv, n) == Some(Decision::Compress)
                        {
                            j += 1;
                        } else {
                            break;
                        }
                    }
                }
                let original = msgs
                    .get(i..j)
                    .unwrap_or(&[])
                    .iter()
                    .map(|m| m.text().into_owned())
                    .collect::<Vec<_>>()
                    .join("\n\n");
                p.units.push(Unit {
                    kind: UnitKind::Compress,
                    start: i,
                    end: j,
                    input: original.clone(),
                    original,
                    fences: Vec::new(),
                    kind_hint: summary_kind(m.role()),
                });
                i = j;
            }
            Some(Decision::CodeSplit) => {
                let original = m.text().into_owned();
                let split = crate::text::split_code_and_prose(&original);
                if !split.prose.is_empty() && !split.fences.is_empty() {
                    let fences = split.fences.iter().map(|f| f.to_string()).collect();
                    p.units.push(Unit {
                        kind: UnitKind::CodeSplit,
                        start: i,
                        end: i + 1,
                        input: split.prose,
                        original: original.clone(),
                        fences,
                        kind_hint: summary_kind(m.role()),
                    });
                }
                i += 1;
            }
            Some(_) => i += 1,
        }
    }
    p
}

/// Render a unit's final text from its bare summary.
fn render(unit: &Unit, summary: &str, cfg: &SummarizerConfig) -> String {
    let id = cfg.embed_summary_id.then(|| summary_id(&unit.original));
    match unit.kind {
        UnitKind::CodeSplit => {
            let fences: Vec<&str> = unit.fences.iter().map(String::as_str).collect();
            format_code_split(summary, &fences, id.as_deref())
        }
        UnitKind::Compress => {
            // Entities the summary text already holds would be said twice:
            // the slots go to the ones it dropped.
            let entities: Vec<String> = if cfg.max_entities > 0 {
                extract_entities(&unit.original, usize::MAX)
                    .into_iter()
                    .filter(|e| !summary.contains(e.as_str()))
                    .take(cfg.max_entities)
                    .collect()
            } else {
                Vec::new()
            };
            format_summary(summary, unit.end - unit.start, &entities, id.as_deref())
        }
    }
}

/// Apply rendered summaries (`None` = keep) to the conversation, with the size
/// guard, and count what happened.
fn apply(
    conv: &mut Conversation,
    units: &[Unit],
    rendered: Vec<Option<String>>,
    out: &mut StageOutcome,
) {
    let old = std::mem::take(&mut conv.messages);
    let mut new_msgs: Vec<Message> = Vec::with_capacity(old.len());
    let mut by_start: HashMap<usize, (&Unit, Option<String>)> = HashMap::new();
    for (u, r) in units.iter().zip(rendered) {
        by_start.insert(u.start, (u, r));
    }
    let mut i = 0;
    while let Some(m) = old.get(i) {
        let Some((unit, Some(text))) = by_start.remove(&i) else {
            new_msgs.push(m.clone());
            i += 1;
            continue;
        };
        let group = old.get(unit.start..unit.end).unwrap_or(&[]);
        let size: usize = group.iter().map(Message::size).sum();
        if text.chars().count() >= size || group.is_empty() {
            out.count("kept_longer", 1);
            new_msgs.push(m.clone());
            i += 1;
            continue;
        }
        if group.len() == 1 {
            let mut m = m.clone();
            m.set_text(text);
            new_msgs.push(m);
            match unit.kind {
                UnitKind::CodeSplit => out.count("code_split", 1),
                UnitKind::Compress => out.count("summarized", 1),
            }
        } else {
            let id = conv.fresh_id("summary");
            let mut merged = Message::from_fields(id.clone(), m.fields().clone());
            merged.set_text(text);
            let ids: Vec<MessageId> = group.iter().map(|g| g.id().clone()).collect();
            let a = conv.ann_mut(&id);
            a.replaces = ids;
            a.decision = Some((Decision::Preserve, DecisionRule::AlreadyCompressed));
            new_msgs.push(merged);
            out.count("summarized", 1);
            out.count("merged", group.len() as u64);
        }
        i = unit.end.max(i + 1);
    }
    conv.messages = new_msgs;
}

fn note_unclassified(p: &Plan, out: &mut StageOutcome) {
    if p.unclassified > 0 {
        out.count("unclassified", p.unclassified);
        out.notes.push(format!(
            "{NO_CLASSIFICATION} ({} messages left alone)",
            p.unclassified
        ));
    }
}

/// The `summarizer` strategy with the deterministic backend (sync).
#[derive(Debug, Clone)]
pub struct Summarizer {
    cfg: SummarizerConfig,
    extractive: Extractive,
}

impl Summarizer {
    /// A deterministic summarizer with this configuration.
    pub fn new(cfg: SummarizerConfig) -> Self {
        let extractive = Extractive::new(cfg.budget());
        Summarizer { cfg, extractive }
    }

    /// The configuration.
    pub fn config(&self) -> &SummarizerConfig {
        &self.cfg
    }
}

fn deterministic(ex: &Extractive, unit: &Unit) -> String {
    ex.summarize_req(&SummaryRequest {
        text: &unit.input,
        kind: unit.kind_hint,
        budget_chars: None,
        context: None,
    })
}

impl Strategy for Summarizer {
    fn name(&self) -> &str {
        NAME
    }

    fn apply(
        &self,
        conv: &mut Conversation,
        _ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let mut out = StageOutcome::default();
        let p = plan(conv, &self.cfg);
        note_unclassified(&p, &mut out);
        let rendered = p
            .units
            .iter()
            .map(|u| Some(render(u, &deterministic(&self.extractive, u), &self.cfg)))
            .collect();
        apply(conv, &p.units, rendered, &mut out);
        Ok(out)
    }
}

/// The `summarizer` strategy with a backend looked up by name (async): bounded
/// concurrency, a cache, redaction, and deterministic fallback per message.
pub struct AsyncSummarizer {
    cfg: SummarizerConfig,
    extractive: Extractive,
    backend: Arc<dyn SummarizeAsync>,
    backend_key: String,
    cache: Mutex<HashMap<String, Cached>>,
}

impl std::fmt::Debug for AsyncSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSummarizer")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

/// An in-memory cache entry: an accepted answer, or the cause of a fallback.
#[derive(Debug, Clone)]
enum Cached {
    Accepted(String),
    Failed(&'static str, String),
}

impl AsyncSummarizer {
    /// A summarizer over an already built backend (used by tests and by
    /// callers that build backends themselves).
    pub fn with_backend(cfg: SummarizerConfig, backend: Arc<dyn SummarizeAsync>) -> Self {
        let backend_key = format!(
            "{}:{}",
            cfg.backend,
            serde_json::to_string(&cfg.llm).unwrap_or_default()
        );
        AsyncSummarizer {
            extractive: Extractive::new(cfg.budget()),
            cfg,
            backend,
            backend_key,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Build the backend named in `cfg` from `cfg.llm` through core's registry.
    pub fn new(cfg: SummarizerConfig) -> Result<Self, ConfigError> {
        let backend = build_backend(&cfg.backend, &cfg.llm)?.as_async();
        Ok(Self::with_backend(cfg, backend))
    }

    fn cache_key(&self, kind: SummaryKind, budget: usize, text: &str) -> String {
        let h = content_hash(&format!(
            "{kind:?}\u{0}{budget}\u{0}{}\u{0}{text}",
            self.backend_key
        ));
        format!("summarizer:v1:{h}")
    }

    /// Summarize one unit's input through the backend with fallback and cache.
    async fn one(&self, unit: &Unit, ctx: &StageContext) -> (FallbackSummary, bool) {
        let sent = if self.cfg.redact_secrets {
            ctxpress_core::secrets::redact(&unit.input)
        } else {
            unit.input.clone()
        };
        let budget = self.cfg.budget().for_len(unit.input.chars().count());
        let key = self.cache_key(unit.kind_hint, budget, &sent);
        let local = self.cache.lock().ok().and_then(|c| c.get(&key).cloned());
        let stored = match local {
            Some(c) => Some(c),
            None => ctx
                .archive
                .as_ref()
                .and_then(|a| a.cache_get(&key).ok().flatten())
                .and_then(|t| accept(&sent, &t).ok())
                .map(Cached::Accepted),
        };
        let fallback_req = SummaryRequest {
            text: &unit.input,
            kind: unit.kind_hint,
            budget_chars: None,
            context: None,
        };
        if let Some(c) = stored {
            let r = match c {
                Cached::Accepted(text) => FallbackSummary {
                    text,
                    source: SummarySource::Primary,
                },
                Cached::Failed(cause, msg) => FallbackSummary {
                    text: self.extractive.summarize_req(&fallback_req),
                    source: SummarySource::Fallback {
                        cause,
                        error: ctxpress_core::SummarizeError::Other(msg),
                    },
                },
            };
            return (r, true);
        }
        let req = SummaryRequest {
            text: &sent,
            kind: unit.kind_hint,
            budget_chars: Some(budget),
            context: None,
        };
        let answer = self
            .backend
            .summarize_async(&req)
            .await
            .and_then(|a| accept(&sent, &a));
        let (result, entry) = match answer {
            Ok(text) => {
                if let Some(a) = &ctx.archive {
                    let _ = a.cache_put(&key, &text);
                }
                (
                    FallbackSummary {
                        text: text.clone(),
                        source: SummarySource::Primary,
                    },
                    Cached::Accepted(text),
                )
            }
            Err(error) => {
                let cause = error.cause();
                let msg = error.to_string();
                (
                    FallbackSummary {
                        text: self.extractive.summarize_req(&fallback_req),
                        source: SummarySource::Fallback { cause, error },
                    },
                    Cached::Failed(cause, msg),
                )
            }
        };
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, entry);
        }
        (result, false)
    }
}

#[async_trait]
impl AsyncStrategy for AsyncSummarizer {
    fn name(&self) -> &str {
        NAME
    }

    async fn apply_async(
        &self,
        conv: &mut Conversation,
        ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let mut out = StageOutcome::default();
        let p = plan(conv, &self.cfg);
        note_unclassified(&p, &mut out);
        let futs: Vec<_> = p.units.iter().map(|u| self.one(u, ctx)).collect();
        let results = run_bounded(futs, self.cfg.concurrency).await;
        let mut causes: BTreeMap<&'static str, (u64, String)> = BTreeMap::new();
        let mut rendered = Vec::with_capacity(p.units.len());
        for (u, (r, hit)) in p.units.iter().zip(results) {
            if hit {
                out.count("cache_hits", 1);
            }
            match &r.source {
                SummarySource::Primary => out.count("llm_accepted", 1),
                SummarySource::Fallback { cause, error } => {
                    out.count(&format!("fallback_{cause}"), 1);
                    let e = causes.entry(cause).or_insert((0, error.to_string()));
                    e.0 += 1;
                }
            }
            rendered.push(Some(render(u, &r.text, &self.cfg)));
        }
        if !causes.is_empty() {
            let parts: Vec<String> = causes
                .iter()
                .map(|(c, (n, example))| format!("{c} {n} (e.g. {example})"))
                .collect();
            out.notes.push(format!(
                "backend `{}`: deterministic fallback for {} summaries: {}",
                self.cfg.backend,
                causes.values().map(|(n, _)| n).sum::<u64>(),
                parts.join(", ")
            ));
        }
        apply(conv, &p.units, rendered, &mut out);
        Ok(out)
    }
}

/// Build the strategy from its parameters: sync for the `extractive` backend,
/// async for any other.
pub fn build(params: &Value) -> Result<BuiltStrategy, ConfigError> {
    let cfg: SummarizerConfig = parse_params(NAME, params)?;
    cfg.validate()?;
    if cfg.backend == "extractive" {
        // Validate the backend parameters even though the sync path uses them
        // only through the budgets.
        if cfg.llm.as_object().is_some_and(|o| !o.is_empty()) {
            build_backend("extractive", &cfg.llm)?;
        }
        Ok(BuiltStrategy::Sync(Box::new(Summarizer::new(cfg))))
    } else {
        Ok(BuiltStrategy::Async(Box::new(AsyncSummarizer::new(cfg)?)))
    }
}

fn default_config() -> Value {
    serde_json::to_value(SummarizerConfig::default()).unwrap_or_default()
}

ctxpress_core::inventory::submit! {
    StrategyFactory {
        name: NAME,
        summary: "summarize compressible messages (merge same-role runs, code-split, size guard; LLM backends with deterministic fallback)",
        default_config,
        build,
    }
}
