//! The `summarizer` strategy: acts on the classifier's decisions, merges
//! consecutive same-role messages, summarizes (deterministically, or through a
//! backend with deterministic fallback), code-splits, and guards sizes.
//!
//! Budgets are by length (`short_budget`, `long_budget`) or per role
//! (`user_budget`, `assistant_budget`). With a backend (an LLM) a summary goes
//! through `with_fallback`: used only when non-empty and shorter than its
//! input, else the extractive one. Opt-in `tool_results`: prose-like tool
//! results summarized in place, never merged, under an information check
//! (`chars_per_lost_term`, terms as `ctxpress_text::terms` finds them). A
//! bounded cache of rendered summaries (`cache_entries`) lets a budget search's
//! reruns summarize nothing twice.

use crate::backend::{Extractive, FallbackSummary, SummarySource, accept};
use crate::bounded::run_bounded;
use crate::text::{Budget, extract_entities_where, format_summary, summary_id};
use async_trait::async_trait;
use ctxpress_core::archive::content_hash;
use ctxpress_core::summarize::{SummarizeAsync, SummaryKind, SummaryRequest, build_backend};
use ctxpress_core::{
    Annotations, AsyncStrategy, BuiltStrategy, ConfigError, Conversation, Decision, DecisionRule,
    Message, MessageId, Role, StageContext, StageOutcome, Strategy, StrategyError, StrategyFactory,
    parse_params,
};
use ctxpress_text::terms::{for_each_term, term_counts};
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
    /// Replace secrets with placeholders before text goes to a non-extractive
    /// backend. (The `openai` and `anthropic` backends also redact every
    /// request themselves unless their own `redact_secrets` is off, so turning
    /// this off alone does not send secrets to them.) Either way the secrets
    /// a summary replaces stay in the output, on `keep:` lines after it.
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
    /// Also summarize tool results in place when the classifier decided
    /// `compress` (or `code_split`) for them, as spec 000's rules do (rule 3
    /// preserves only messages that *carry* tool calls): an OpenAI `tool` /
    /// `function` message, or an Anthropic carrier of exactly one text-only
    /// `tool_result` block. The message keeps its role, `tool_call_id` and
    /// every other field, and is never merged with another message.
    pub tool_results: bool,
    /// Information check on summarized tool results (0 disables it): a tool
    /// result stays verbatim when its summary saves fewer than this many
    /// characters per term it loses (a path, compound identifier or version
    /// found in the result, nowhere else in the conversation, and not in the
    /// summary). Results are taken in order, so a term whose only other
    /// copies were summarized away counts as lost. Not part of spec 000.
    pub chars_per_lost_term: usize,
    /// Summary budget in characters for user messages; `None` uses the
    /// length-based `short_budget` / `long_budget`. Applied to the extractive
    /// path and sent as the request budget to LLM backends.
    pub user_budget: Option<usize>,
    /// Summary budget in characters for assistant messages (and other
    /// non-user, non-tool roles); `None` uses the length-based budgets.
    pub assistant_budget: Option<usize>,
    /// Most rendered summaries the deterministic path keeps in memory, so a
    /// rerun on the same messages (a budget search) never summarizes one
    /// twice; the cache is cleared when full. 0 disables it.
    pub cache_entries: usize,
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
            tool_results: false,
            chars_per_lost_term: 0,
            user_budget: None,
            assistant_budget: None,
            cache_entries: 4096,
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

    /// The fixed budget for a summary of this kind (`user_budget` for user
    /// messages, `assistant_budget` for assistant ones), `None` when the
    /// length-based budget applies.
    pub fn role_budget(&self, kind: SummaryKind) -> Option<usize> {
        match kind {
            SummaryKind::User => self.user_budget,
            SummaryKind::Assistant => self.assistant_budget,
            _ => None,
        }
    }

    /// The budget in characters for a summary of `chars` characters of input
    /// of this kind.
    pub fn budget_for(&self, kind: SummaryKind, chars: usize) -> usize {
        self.role_budget(kind)
            .unwrap_or_else(|| self.budget().for_len(chars))
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
        if self.user_budget == Some(0) {
            return Err(bad("user_budget", "must be at least 1"));
        }
        if self.assistant_budget == Some(0) {
            return Err(bad("assistant_budget", "must be at least 1"));
        }
        Ok(())
    }
}

/// What to do with one unit of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum UnitKind {
    /// Summarize (one message or a merged group).
    Compress,
    /// Summarize the prose, keep the fences.
    CodeSplit,
}

/// Where a unit's rendered text goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// The message text (one message, or a merged group).
    Text,
    /// The content of an OpenAI `tool` / `function` message.
    ToolMessage,
    /// The content of the Anthropic `tool_result` block answering this call.
    ToolBlock(String),
}

/// One summary to make: a message index range and the text to summarize.
#[derive(Debug, Clone)]
struct Unit {
    kind: UnitKind,
    target: Target,
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

/// The text of a tool-result block's `content` when it is a string or text
/// parts only (nothing an in-place replacement would drop).
fn text_only_block(block: &Value) -> Option<String> {
    match block.get("content") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for p in parts {
                if p.get("type").and_then(Value::as_str) != Some("text") {
                    return None;
                }
                texts.push(p.get("text").and_then(Value::as_str)?);
            }
            Some(texts.join("\n"))
        }
        _ => None,
    }
}

/// Whether and how a message may be summarized, with the text to summarize.
fn touch(conv: &Conversation, m: &Message, cfg: &SummarizerConfig) -> Option<(Target, String)> {
    touch_annotated(conv.ann(m.id()), m, cfg)
}

/// [`touch`], given the message's annotations (`ann`).
fn touch_annotated(
    ann: Option<&Annotations>,
    m: &Message,
    cfg: &SummarizerConfig,
) -> Option<(Target, String)> {
    if m.has_tool_calls()
        || ann.is_some_and(|a| a.protected)
        || ctxpress_dialect::text_results::has_text_call(m)
    {
        return None;
    }
    let (target, text) = if m.is_tool_result() {
        if !cfg.tool_results {
            return None;
        }
        if matches!(m.role(), Role::Tool | Role::Function) {
            (Target::ToolMessage, m.text().into_owned())
        } else {
            // An Anthropic carrier of exactly one tool_result block: the
            // classifier's decision was about exactly that block's text.
            let Some(Value::Array(blocks)) = m.content() else {
                return None;
            };
            let [block] = blocks.as_slice() else {
                return None;
            };
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                return None;
            }
            let id = block.get("tool_use_id").and_then(Value::as_str)?;
            (Target::ToolBlock(id.to_string()), text_only_block(block)?)
        }
    } else {
        (Target::Text, m.text().into_owned())
    };
    (!text.trim().is_empty()).then_some((target, text))
}

fn touchable(conv: &Conversation, m: &Message, cfg: &SummarizerConfig) -> bool {
    touch(conv, m, cfg).is_some_and(|(t, _)| t == Target::Text)
}

fn decision(conv: &Conversation, m: &Message) -> Option<Decision> {
    conv.ann(m.id()).and_then(|a| a.decision).map(|(d, _)| d)
}

fn plan(conv: &Conversation, cfg: &SummarizerConfig) -> Plan {
    let mut p = Plan::default();
    let msgs = &conv.messages;
    let mut i = 0;
    while let Some(m) = msgs.get(i) {
        // One look-up of the annotations for the decision and `touch`.
        let ann = conv.ann(m.id());
        let decided = ann.and_then(|a| a.decision).map(|(d, _)| d);
        // Preserved and dedup messages are left alone whatever `touch` says:
        // skipped before their text is copied.
        if matches!(decided, Some(Decision::Preserve | Decision::Dedup)) {
            i += 1;
            continue;
        }
        let Some((target, text)) = touch_annotated(ann, m, cfg) else {
            i += 1;
            continue;
        };
        let kind_hint = if target == Target::Text {
            summary_kind(m.role())
        } else {
            SummaryKind::Tool
        };
        match decided {
            None => {
                p.unclassified += 1;
                i += 1;
            }
            Some(Decision::Compress) if target != Target::Text => {
                // A tool result is summarized alone, in place.
                p.units.push(Unit {
                    kind: UnitKind::Compress,
                    target,
                    start: i,
                    end: i + 1,
                    input: text.clone(),
                    original: text,
                    fences: Vec::new(),
                    kind_hint,
                });
                i += 1;
            }
            Some(Decision::Compress) => {
                let mut j = i + 1;
                if cfg.merge_consecutive && m.has_string_content() {
                    while let Some(n) = msgs.get(j) {
                        if decision(conv, n) == Some(Decision::Compress)
                            && n.has_string_content()
                            && n.role_str() == m.role_str()
                            && touchable(conv, n, cfg)
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
                    target,
                    start: i,
                    end: j,
                    input: original.clone(),
                    original,
                    fences: Vec::new(),
                    kind_hint,
                });
                i = j;
            }
            Some(Decision::CodeSplit) => {
                let original = text;
                let split = ctxpress_text::CodeSplit::of(&original);
                if !split.prose.is_empty() && !split.fences.is_empty() {
                    let fences = split.fences.iter().map(|f| f.to_string()).collect();
                    p.units.push(Unit {
                        kind: UnitKind::CodeSplit,
                        target,
                        start: i,
                        end: i + 1,
                        input: split.prose,
                        original: original.clone(),
                        fences,
                        kind_hint,
                    });
                }
                i += 1;
            }
            Some(_) => i += 1,
        }
    }
    p
}

/// Render a unit's final text from its bare summary. Secrets of the
/// summarized text (provider keys, passwords, credentials in URLs, ... as
/// [`ctxpress_text::secrets::find_sensitive`] finds them) that the summary
/// does not hold verbatim are kept after it, one `keep: {key = value}` line
/// each (before the fences of a code-split message): a summary, above all an
/// LLM's, which never sees them, must not lose them from the output.
fn render(unit: &Unit, summary: &str, cfg: &SummarizerConfig) -> String {
    let id = cfg.embed_summary_id.then(|| summary_id(&unit.original));
    match unit.kind {
        UnitKind::CodeSplit => {
            let mut out = format_summary(summary, 1, &[], id.as_deref());
            let keep = keep_lines(&secrets_of(&unit.input), &out);
            out.push_str(&keep);
            for f in &unit.fences {
                out.push_str("\n\n");
                out.push_str(f);
            }
            out
        }
        UnitKind::Compress => {
            let secrets = secrets_of(&unit.original);
            // Entities the summary text already holds would be said twice:
            // the slots go to the ones it dropped. Pieces of a secret or its
            // key are left to the keep lines, which hold them whole.
            let entities: Vec<String> = if cfg.max_entities > 0 {
                extract_entities_where(&unit.original, cfg.max_entities, |e| {
                    !summary.contains(e) && !secrets.iter().any(|(_, ctx)| ctx.contains(e))
                })
            } else {
                Vec::new()
            };
            let mut out = format_summary(summary, unit.end - unit.start, &entities, id.as_deref());
            let keep = keep_lines(&secrets, &out);
            out.push_str(&keep);
            out
        }
    }
}

/// The secrets of `text` as (value, context) pairs, in order: the context is
/// the assignment, the URL, the PEM block, or the token itself.
fn secrets_of(text: &str) -> Vec<(&str, &str)> {
    ctxpress_text::secrets::find_sensitive(text)
        .into_iter()
        .filter_map(|s| {
            Some((
                text.get(s.start..s.end)?,
                text.get(s.context_start..s.context_end)?.trim(),
            ))
        })
        .collect()
}

/// `\nkeep: {context}` for each secret whose value `rendered` does not hold
/// verbatim, each context once, in order.
fn keep_lines(secrets: &[(&str, &str)], rendered: &str) -> String {
    let mut out = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for &(value, ctx) in secrets {
        if rendered.contains(value) || seen.contains(&ctx) {
            continue;
        }
        seen.push(ctx);
        out.push_str("\nkeep: ");
        out.push_str(ctx);
    }
    out
}

/// Every text a model reads of a message: its text, tool-result texts and
/// tool-call arguments.
fn for_each_text(m: &Message, mut f: impl FnMut(&str)) {
    f(&m.text());
    if m.is_tool_result() && !matches!(m.role(), Role::Tool | Role::Function) {
        for r in m.tool_results() {
            f(&r.text);
        }
    }
    for c in m.tool_calls() {
        f(&c.arguments);
    }
}

/// The information check (`chars_per_lost_term`): drop (set to `None`) the
/// rendered summary of each tool-result unit that loses too many terms for
/// what it saves, in message order, moving the terms of accepted ones.
fn check_information(
    msgs: &[Message],
    units: &[Unit],
    rendered: &mut [Option<Rendered>],
    cfg: &SummarizerConfig,
    out: &mut StageOutcome,
) {
    let k = cfg.chars_per_lost_term;
    if k == 0 || units.iter().all(|u| u.target == Target::Text) {
        return;
    }
    let mut global: HashMap<String, u32> = HashMap::new();
    for m in msgs {
        for_each_text(m, |t| {
            for_each_term(t, |term| match global.get_mut(term) {
                Some(n) => *n += 1,
                None => {
                    global.insert(term.to_string(), 1);
                }
            })
        });
    }
    for (u, r) in units.iter().zip(rendered.iter_mut()) {
        // A unit known not to be shorter is kept, as `after >= size` below.
        let Some(Rendered::Text(text)) = r.as_ref() else {
            continue;
        };
        let size: usize = msgs
            .get(u.start..u.end)
            .unwrap_or(&[])
            .iter()
            .map(Message::size)
            .sum();
        let after = text.chars().count();
        if u.target == Target::Text || after >= size {
            continue;
        }
        let own = term_counts(&u.original);
        let lost = own
            .iter()
            .filter(|(t, n)| global.get(**t).copied().unwrap_or(0) <= **n && !text.contains(**t))
            .count();
        if (size - after) < lost.saturating_mul(k) {
            out.count("kept_dense", 1);
            *r = None;
            continue;
        }
        for (t, n) in own {
            if let Some(g) = global.get_mut(t) {
                *g = g.saturating_sub(n) + u32::from(text.contains(t));
            }
        }
    }
}

/// Apply rendered summaries (`None` = keep) to the conversation, with the size
/// guard and the information check, and count what happened.
fn apply(
    conv: &mut Conversation,
    units: &[Unit],
    mut rendered: Vec<Option<Rendered>>,
    cfg: &SummarizerConfig,
    out: &mut StageOutcome,
) {
    check_information(&conv.messages, units, &mut rendered, cfg, out);
    let old = std::mem::take(&mut conv.messages);
    let mut new_msgs: Vec<Message> = Vec::with_capacity(old.len());
    // Units are planned in message order and never overlap: the next one to
    // apply is the first whose start is not behind `i`.
    let mut pending = units.iter().zip(rendered).peekable();
    let mut i = 0;
    while let Some(m) = old.get(i) {
        while pending.next_if(|(u, _)| u.start < i).is_some() {}
        let Some((unit, Some(rendered))) = pending.next_if(|(u, _)| u.start == i) else {
            new_msgs.push(m.clone());
            i += 1;
            continue;
        };
        let group = old.get(unit.start..unit.end).unwrap_or(&[]);
        let size: usize = group.iter().map(Message::size).sum();
        let text = match rendered {
            Rendered::Text(text) if text.chars().count() < size => Some(text),
            // never made when shorter than `size`
            Rendered::Text(_) | Rendered::AtLeast(_) => None,
        };
        let Some(text) = text.filter(|_| !group.is_empty()) else {
            out.count("kept_longer", 1);
            new_msgs.push(m.clone());
            i += 1;
            continue;
        };
        if group.len() == 1 {
            let mut m = m.clone();
            let placed = match &unit.target {
                Target::Text | Target::ToolMessage => {
                    m.set_text(text);
                    true
                }
                Target::ToolBlock(id) => m.set_tool_result_text(id, text),
            };
            new_msgs.push(m);
            if !placed {
                i += 1;
                continue;
            }
            match unit.kind {
                UnitKind::CodeSplit => out.count("code_split", 1),
                UnitKind::Compress => out.count("summarized", 1),
            }
            if unit.target != Target::Text {
                out.count("tool_results", 1);
            } else {
                count_role(out, m_role(group), 1);
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
            count_role(out, m_role(group), group.len() as u64);
        }
        i = unit.end.max(i + 1);
    }
    conv.messages = new_msgs;
}

/// The role of a unit's messages (they share one).
fn m_role(group: &[Message]) -> Role {
    group.first().map(Message::role).unwrap_or(Role::User)
}

/// Spec 004's statistics: `user_messages_compressed`,
/// `assistant_messages_compressed`.
fn count_role(out: &mut StageOutcome, role: Role, n: u64) {
    match role {
        Role::User => out.count("user_messages_compressed", n),
        Role::Assistant => out.count("assistant_messages_compressed", n),
        _ => {}
    }
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

/// What a rendered deterministic summary depends on besides the (fixed)
/// configuration: the hash of the original text (the input and the fences
/// derive from it), what is made of it, the kind, the number of messages
/// merged and the budget.
type CacheKey = (String, UnitKind, SummaryKind, usize, Option<usize>);

/// A unit's rendered text, or a lower bound on its length in characters
/// that is at least the size of the messages it would replace: those are
/// kept whatever the text, so it is not made (the bound is what the
/// summary, brackets and fences alone take).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rendered {
    /// The rendered text.
    Text(String),
    /// The text would have at least this many characters.
    AtLeast(usize),
}

/// The length in characters that a unit rendered from `summary` has at
/// least, whatever its entities, keep lines and id: `[summary: ` (or
/// `[summary#{id}: `, longer), the summary, `]`, and for a code-split
/// message each fence after a blank line.
fn rendered_at_least(unit: &Unit, summary: &str) -> usize {
    let fences: usize = match unit.kind {
        UnitKind::CodeSplit => unit.fences.iter().map(|f| 2 + f.chars().count()).sum(),
        UnitKind::Compress => 0,
    };
    "[summary: ]".len() + summary.chars().count() + fences
}

/// Rendered deterministic summaries by [`CacheKey`], bounded: cleared when
/// full. Shared by clones of the strategy.
#[derive(Debug, Default)]
struct RenderCache {
    map: Mutex<HashMap<CacheKey, Rendered>>,
}

impl RenderCache {
    fn get(&self, key: &CacheKey) -> Option<Rendered> {
        self.map.lock().ok().and_then(|m| m.get(key).cloned())
    }

    fn put(&self, key: CacheKey, text: Rendered, cap: usize) {
        if let Ok(mut m) = self.map.lock() {
            if m.len() >= cap {
                m.clear();
            }
            m.insert(key, text);
        }
    }

    /// Replace the entry of `key`, if it is still there.
    fn replace(&self, key: &CacheKey, text: Rendered) {
        if let Ok(mut m) = self.map.lock()
            && let Some(e) = m.get_mut(key)
        {
            *e = text;
        }
    }
}

/// The `summarizer` strategy with the deterministic backend (sync). Each
/// unit's rendered summary is cached (see `cache_entries`), so rerunning the
/// stage on the same messages, as a budget search does, summarizes nothing
/// twice; `cache_hits` counts the reuses.
#[derive(Debug, Clone)]
pub struct Summarizer {
    cfg: SummarizerConfig,
    extractive: Extractive,
    cache: Arc<RenderCache>,
}

impl Summarizer {
    /// A deterministic summarizer with this configuration.
    pub fn new(cfg: SummarizerConfig) -> Self {
        let extractive = Extractive::new(cfg.budget());
        Summarizer {
            cfg,
            extractive,
            cache: Arc::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SummarizerConfig {
        &self.cfg
    }

    /// The rendered summary of a unit replacing messages of `size`
    /// characters, or [`Rendered::AtLeast`] when its summary alone shows it
    /// is not shorter than them.
    fn make(&self, unit: &Unit, size: usize) -> Rendered {
        let summary = deterministic(&self.extractive, unit, &self.cfg);
        let least = rendered_at_least(unit, &summary);
        if least >= size {
            return Rendered::AtLeast(least);
        }
        Rendered::Text(render(unit, &summary, &self.cfg))
    }

    /// The rendered summary of a unit replacing messages of `size`
    /// characters (see [`Summarizer::make`]), from the cache when it is
    /// there.
    fn rendered(&self, unit: &Unit, size: usize, out: &mut StageOutcome) -> Rendered {
        if self.cfg.cache_entries == 0 {
            return self.make(unit, size);
        }
        let key: CacheKey = (
            content_hash(&unit.original),
            unit.kind,
            unit.kind_hint,
            unit.end - unit.start,
            self.cfg.role_budget(unit.kind_hint),
        );
        if let Some(hit) = self.cache.get(&key) {
            out.count("cache_hits", 1);
            return match hit {
                // The same text in messages of a larger size (other content
                // blocks): make the text after all (`make` renders it, the
                // bound being below this size).
                Rendered::AtLeast(least) if least < size => {
                    let text = self.make(unit, size);
                    self.cache.replace(&key, text.clone());
                    text
                }
                hit => hit,
            };
        }
        let made = self.make(unit, size);
        self.cache.put(key, made.clone(), self.cfg.cache_entries);
        made
    }
}

fn deterministic(ex: &Extractive, unit: &Unit, cfg: &SummarizerConfig) -> String {
    ex.summarize_req(&SummaryRequest {
        text: &unit.input,
        kind: unit.kind_hint,
        budget_chars: cfg.role_budget(unit.kind_hint),
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
            .map(|u| {
                let size = conv
                    .messages
                    .get(u.start..u.end)
                    .unwrap_or(&[])
                    .iter()
                    .map(Message::size)
                    .sum();
                Some(self.rendered(u, size, &mut out))
            })
            .collect();
        apply(conv, &p.units, rendered, &self.cfg, &mut out);
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
            ctxpress_text::secrets::redact(&unit.input)
        } else {
            unit.input.clone()
        };
        let budget = self
            .cfg
            .budget_for(unit.kind_hint, unit.input.chars().count());
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
            budget_chars: self.cfg.role_budget(unit.kind_hint),
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
            rendered.push(Some(Rendered::Text(render(u, &r.text, &self.cfg))));
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
        apply(conv, &p.units, rendered, &self.cfg, &mut out);
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
        params: &[
            ("backend", "Backend name in core's backend registry (`extractive`, `openai`, ...)."),
            ("llm", "Parameters passed verbatim to the backend factory (a table)."),
            ("concurrency", "Requests in flight at once on the async path."),
            (
                "redact_secrets",
                "Replace secrets with placeholders before text goes to a non-extractive backend (kept on `keep:` lines after the summary).",
            ),
            ("embed_summary_id", "Write `[summary#{id}: ...]` instead of `[summary: ...]`."),
            ("merge_consecutive", "Merge consecutive same-role compressible messages into one summary."),
            ("short_threshold", "Inputs shorter than this many characters get `short_budget`."),
            ("short_budget", "Summary budget in characters for short inputs."),
            ("long_budget", "Summary budget in characters for long inputs."),
            ("max_entities", "Most entities appended as ` | entities: ...` (0 disables them)."),
            (
                "tool_results",
                "Also summarize tool results in place when the classifier decided `compress` (or `code_split`) for them; never merged.",
            ),
            (
                "chars_per_lost_term",
                "Information check on summarized tool results: characters saved per term lost, or the result stays verbatim (0 disables it).",
            ),
            (
                "user_budget",
                "Summary budget in characters for user messages (unset: the length-based budgets).",
            ),
            (
                "assistant_budget",
                "Summary budget in characters for assistant and other non-user, non-tool messages (unset: the length-based budgets).",
            ),
            (
                "cache_entries",
                "Most rendered summaries kept in memory so a budget-search rerun summarizes none twice (0 disables it).",
            ),
        ],
        takes_llm: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{
        Just, ProptestConfig, TestCaseError, any, prop, prop_assert_eq, prop_oneof, proptest,
    };
    use proptest::strategy::Strategy as _;

    /// The stage as it was before [`Rendered::AtLeast`]: every unit rendered.
    fn apply_rendering_all(
        s: &Summarizer,
        conv: &mut Conversation,
    ) -> std::collections::BTreeMap<String, u64> {
        let mut out = StageOutcome::default();
        let p = plan(conv, &s.cfg);
        note_unclassified(&p, &mut out);
        let rendered = p
            .units
            .iter()
            .map(|u| {
                Some(Rendered::Text(render(
                    u,
                    &deterministic(&s.extractive, u, &s.cfg),
                    &s.cfg,
                )))
            })
            .collect();
        apply(conv, &p.units, rendered, &s.cfg, &mut out);
        out.counters
    }

    fn conversation(msgs: &[(bool, u8, String)]) -> Conversation {
        let mut conv = Conversation::new(
            msgs.iter()
                .enumerate()
                .map(|(i, (user, _, text))| {
                    let role = if *user { "user" } else { "assistant" };
                    Message::text_message(MessageId::new(format!("m{i}")), role, text)
                })
                .collect(),
        );
        for (i, (_, d, _)) in msgs.iter().enumerate() {
            let id = MessageId::new(format!("m{i}"));
            let d = match d % 4 {
                0 => (Decision::Preserve, DecisionRule::ShortContent),
                1 => (Decision::CodeSplit, DecisionRule::CodeWithProse),
                _ => (Decision::Compress, DecisionRule::Compressible),
            };
            conv.ann_mut(&id).decision = Some(d);
        }
        conv
    }

    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-z]{1,9} ",
            Just("The parseConfig call fails on src/app/config.ts. ".to_string()),
            Just("Sure! ".to_string()),
            Just("password = hunter2hunter2 ".to_string()),
            Just("\n\n".to_string()),
            Just("\n```rust\nfn main() {}\n```\n".to_string()),
            Just("Uses 500 MB and WebSocket v1.2.3. ".to_string()),
        ];
        prop::collection::vec(piece, 0..60).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Units found not shorter without rendering them are kept as when
        /// they were rendered: same output, same counters, with and without
        /// the cache, first run and rerun.
        #[test]
        fn skipping_longer_renders_changes_nothing(
            msgs in prop::collection::vec((any::<bool>(), any::<u8>(), text()), 0..8),
            embed in any::<bool>(),
            cache in any::<bool>(),
        ) {
            let cfg = SummarizerConfig {
                embed_summary_id: embed,
                cache_entries: if cache { 4096 } else { 0 },
                ..SummarizerConfig::default()
            };
            let s = Summarizer::new(cfg);
            let mut want = conversation(&msgs);
            let want_counts = apply_rendering_all(&s, &mut want);
            for _ in 0..2 {
                let mut got = conversation(&msgs);
                let mut out = s
                    .apply(&mut got, &StageContext::default())
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                out.counters.remove("cache_hits");
                prop_assert_eq!(got.to_json_string(), want.to_json_string());
                prop_assert_eq!(&out.counters, &want_counts);
            }
        }
    }
}
