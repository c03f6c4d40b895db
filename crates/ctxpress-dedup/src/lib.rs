//! ctxpress strategy `dedup`: replaces repeated content with compact references
//! (spec 000 section 2 and its dedup output format).
//!
//! Used alone: the older of two identical long messages becomes a reference to
//! the later one.
//!
//! ```rust
//! use ctxpress_core::{Conversation, Pipeline, StageContext};
//! use serde_json::json;
//! use ctxpress_dedup::{Dedup, DedupConfig};
//!
//! let log = "error: connection refused while fetching the build cache; retrying. ".repeat(4);
//! let text = json!([
//!     {"role": "user", "content": log},
//!     {"role": "assistant", "content": "The cache server is down; I will retry."},
//!     {"role": "user", "content": log},
//! ])
//! .to_string();
//! let mut conv = Conversation::parse(&text)?;
//! let cfg = DedupConfig { recency_window: 0, ..DedupConfig::default() };
//! let mut pipeline = Pipeline::new(Vec::new());
//! pipeline.push(Box::new(Dedup::new(cfg)?));
//! let report = pipeline.run(&mut conv, &StageContext::default());
//! assert!(conv.messages[0].text().starts_with("[cce:dup of"));
//! assert_eq!(conv.messages[2].text(), log);
//! assert!(report.chars_after < report.chars_before);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - **Exact** (on by default): texts are grouped by a 32-bit hash and every
//!   group is confirmed by full string comparison, so a hash collision never
//!   merges different texts. The spec names djb2 ([`djb2`]); the groups do
//!   not depend on the hash, so a faster one ([`fast_hash`]) is used.
//! - **Fuzzy** (`fuzzy = true`): line-level Jaccard similarity of normalized
//!   lines, with candidates drawn from an inverted index over fingerprint lines
//!   (see [`fuzzy`]); similar texts form transitive groups (union-find).
//! - **Delta** (`delta = true`): a near-duplicate becomes a reference plus a
//!   compact `-`/`+` line diff against its keep target, when that is strictly
//!   shorter than the text it replaces.
//!
//! The unit of dedup is a *text*: the text of an ordinary message, or one tool
//! result (an OpenAI `tool` message, or one Anthropic `tool_result` block; a
//! carrier with several results dedups each separately). Messages keep their
//! ids, roles and tool-call ids, so pairing is untouched and the pipeline's
//! provenance sends originals to the archive.
//!
//! Keep target of a group: its latest occurrence, or the first occurrence
//! inside the recency window when there is one. Texts inside the window are
//! never replaced.
//!
//! A reference names its keep target as the reader sees it, never by
//! ctxpress's internal message ids: a tool result by its call id, which is in
//! the conversation (`[cce:dup of call_7 — 345 chars]`), any other text by
//! its message's role and first words (`[cce:dup of the user message "Fix
//! the failing test in src/app.py" — 272 chars]`, see
//! [`ctxpress_text::message_ref`]).
//!
//! Layout of the work: exact classes are chained through one array per hash
//! bucket (no map of lists), and the groups of every kind are laid out by
//! counting (each group a range of one array), so both are linear and allocate
//! little.

pub mod config;
pub mod delta;
pub mod fuzzy;

pub use config::DedupConfig;

use ctxpress_core::markers::{Written, written};
use ctxpress_core::{
    ConfigError, Conversation, DupMark, MessageId, StageContext, StageOutcome, Strategy,
    StrategyError,
};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;

ctxpress_core::register_strategy!(
    "dedup",
    "replace exact and near-duplicate texts with references to a kept copy",
    DedupConfig,
    Dedup::new,
    params: &[
        ("min_chars", "Minimum content length (chars) for a text to take part at all."),
        ("exact", "Exact dedup (djb2 grouping confirmed by full comparison)."),
        ("fuzzy", "Fuzzy dedup: line-level Jaccard near-duplicates."),
        ("threshold", "Jaccard similarity at or above which two texts are near-duplicates."),
        ("delta", "Write near-duplicates as a reference plus a compact line diff."),
        (
            "delta_threshold",
            "Lowest Jaccard similarity at which a delta reference is tried (may go below `threshold`: delta loses nothing).",
        ),
        ("delta_max_lines", "Most changed lines (`-` plus `+`) a delta reference may carry."),
        (
            "near_without_diff",
            "With `delta`, a near-duplicate whose diff is over `delta_max_lines` still becomes a plain `near-dup` reference; false keeps it as it is.",
        ),
        (
            "recency_window",
            "The last this many messages are never replaced; a copy inside them is the preferred keep target.",
        ),
        ("prefix", "Marker prefix of references, as in `[cce:dup of ...]`."),
        ("preserve", "Roles never replaced besides `system` and `developer`, which always are."),
        (
            "max_postings",
            "Longest posting list of one fingerprint line (most recent kept), so a common line cannot make candidate generation quadratic.",
        ),
        ("max_candidates", "Most candidates one text is compared with."),
    ]
);

/// The grouping hash used by default: xxh3 cut to 32 bits. It gives the
/// same groups as the spec's [`djb2`] (every group is confirmed by full
/// comparison) at a fraction of the cost on long texts.
pub fn fast_hash(text: &str) -> u32 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes()) as u32
}

/// The djb2 hash (`h = h * 33 + byte`, starting at 5381) the spec groups
/// exact duplicates by (see [`Dedup::with_hash`]).
pub fn djb2(text: &str) -> u32 {
    text.bytes().fold(5381u32, |h, b| {
        h.wrapping_mul(33).wrapping_add(u32::from(b))
    })
}

/// Where a text lives in its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// The message's own text (string content or its text parts).
    Text,
    /// The tool result answering this call id.
    ToolResult(String),
}

/// Where a unit's text lives: [`Slot`] with the call id borrowed from the
/// message (a [`Slot`] is made only for a replacement).
#[derive(Debug, Clone, PartialEq, Eq)]
enum UnitSlot<'a> {
    Text,
    ToolResult(Cow<'a, str>),
}

impl UnitSlot<'_> {
    fn to_slot(&self) -> Slot {
        match self {
            UnitSlot::Text => Slot::Text,
            UnitSlot::ToolResult(id) => Slot::ToolResult(id.to_string()),
        }
    }
}

/// One text taking part in dedup (borrowed from its message when it can be).
#[derive(Debug, Clone)]
struct Unit<'a> {
    msg: usize,
    slot: UnitSlot<'a>,
    text: Cow<'a, str>,
    /// False inside the recency window: a keep target only.
    replaceable: bool,
}

/// How a text is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `[cce:dup of ...]`.
    Exact,
    /// `[cce:near-dup of ...]`.
    Near,
    /// Near-dup reference with a line diff.
    Delta,
}

/// One planned replacement.
#[derive(Debug, Clone)]
pub struct Replacement {
    /// Index of the message.
    pub index: usize,
    /// Which text of the message.
    pub slot: Slot,
    /// The message kept as the canonical copy.
    pub keep: MessageId,
    /// Line-level Jaccard similarity to the keep target (1.0 when exact).
    pub similarity: f64,
    /// Kind of reference.
    pub kind: Kind,
    /// The reference text.
    pub text: String,
    /// Chars of the replaced text.
    pub original_chars: usize,
}

/// What [`Dedup::analyze`] found.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Planned replacements, in message order.
    pub replacements: Vec<Replacement>,
    /// Texts that took part (eligible or keep-only).
    pub units: usize,
    /// Line-set similarity computations made (candidate comparisons).
    pub comparisons: u64,
    /// Full string comparisons made to confirm exact hash groups.
    pub string_compares: u64,
}

/// The `dedup` strategy.
#[derive(Debug, Clone)]
pub struct Dedup {
    cfg: DedupConfig,
    hash: fn(&str) -> u32,
}

impl Dedup {
    /// Build from a config (value ranges are checked).
    pub fn new(cfg: DedupConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Dedup {
            cfg,
            hash: fast_hash,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &DedupConfig {
        &self.cfg
    }

    /// Use another exact-grouping hash (tests force collisions with it).
    pub fn with_hash(mut self, hash: fn(&str) -> u32) -> Self {
        self.hash = hash;
        self
    }

    fn already_compressed(&self, text: &str) -> bool {
        let t = text.trim_start();
        matches!(written(t), Some(Written::Summary | Written::Truncated))
            || t.strip_prefix('[')
                .and_then(|r| r.strip_prefix(self.cfg.prefix.as_str()))
                .is_some_and(|r| r.starts_with(':'))
    }

    fn units<'a>(&self, conv: &'a Conversation) -> Vec<Unit<'a>> {
        let n = conv.messages.len();
        let window_start = n.saturating_sub(self.cfg.recency_window);
        let mut out = Vec::new();
        for (i, m) in conv.messages.iter().enumerate() {
            let role = m.role();
            if role.is_system()
                || self.cfg.preserve.iter().any(|r| r == m.role_str())
                || m.has_tool_calls()
                || ctxpress_dialect::text_results::has_text_call(m)
                || conv.ann(m.id()).is_some_and(|a| a.protected)
            {
                continue;
            }
            let replaceable = i < window_start;
            let mut push = |slot: UnitSlot<'a>, text: Cow<'a, str>| {
                if !ctxpress_text::bytes::fewer_chars_than(&text, self.cfg.min_chars)
                    && !self.already_compressed(&text)
                {
                    out.push(Unit {
                        msg: i,
                        slot,
                        text,
                        replaceable,
                    });
                }
            };
            let is_openai = matches!(
                role,
                ctxpress_core::Role::Tool | ctxpress_core::Role::Function
            );
            if is_openai {
                // One result, its id the message's: found in place, with no
                // vector of results.
                if let Some(r) = m.tool_result_ids().next().and_then(|id| m.tool_result(id))
                    && !r.call_id.is_empty()
                {
                    push(UnitSlot::ToolResult(r.call_id), r.text);
                }
            } else if m.is_tool_result() {
                let mut results = m.tool_results();
                // The result blocks, in the order of `results`: how many
                // answer each id and whether each holds text only, in one
                // walk (a message may carry thousands of results: asking
                // per result was quadratic). Each text is moved out once
                // judged.
                let blocks: Vec<&Value> = match m.content() {
                    Some(Value::Array(b)) => b
                        .iter()
                        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                        .collect(),
                    _ => Vec::new(),
                };
                let mut answers: HashMap<&str, usize> = HashMap::with_capacity(blocks.len());
                for b in &blocks {
                    let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                    *answers.entry(id).or_default() += 1;
                }
                for k in 0..results.len() {
                    let Some(id) = results.get(k).map(|r| r.call_id.clone()) else {
                        continue;
                    };
                    let unique = answers.get(id.as_ref()) == Some(&1);
                    let text_only = blocks.get(k).is_some_and(|b| text_only_result(b));
                    if id.is_empty() || !unique || (!is_openai && !text_only) {
                        continue;
                    }
                    if let Some(r) = results.get_mut(k) {
                        push(UnitSlot::ToolResult(id), std::mem::take(&mut r.text));
                    }
                }
                if !is_openai {
                    let t = m.text();
                    if !t.is_empty() {
                        push(UnitSlot::Text, t);
                    }
                }
            } else {
                push(UnitSlot::Text, m.text());
            }
        }
        out
    }

    /// Plan the replacements for a conversation without changing it.
    pub fn analyze(&self, conv: &Conversation) -> Analysis {
        let units = self.units(conv);
        let mut an = Analysis {
            units: units.len(),
            ..Analysis::default()
        };
        if units.is_empty() || !(self.cfg.exact || self.cfg.fuzzy || self.cfg.delta) {
            return an;
        }
        // Exact classes: djb2 buckets split by full comparison. A bucket is
        // a chain of classes, newest first (a text equals at most one class,
        // so the order never decides its class); a class is known by its
        // first unit.
        let mut buckets: HashMap<u32, usize> = HashMap::with_capacity(units.len());
        let mut class_of = vec![0usize; units.len()];
        // Per class: its first unit and the next class of its bucket.
        let mut reps: Vec<usize> = Vec::with_capacity(units.len());
        let mut next_in_bucket: Vec<usize> = Vec::with_capacity(units.len());
        for (u, unit) in units.iter().enumerate() {
            let head = buckets.entry((self.hash)(&unit.text)).or_insert(usize::MAX);
            let mut found = None;
            let mut c = *head;
            while let (Some(&rep), Some(&next)) = (reps.get(c), next_in_bucket.get(c)) {
                an.string_compares += 1;
                if units.get(rep).is_some_and(|r| r.text == unit.text) {
                    found = Some(c);
                    break;
                }
                c = next;
            }
            let c = match found {
                Some(c) => c,
                None => {
                    reps.push(u);
                    next_in_bucket.push(*head);
                    *head = reps.len() - 1;
                    reps.len() - 1
                }
            };
            if let Some(slot) = class_of.get_mut(u) {
                *slot = c;
            }
        }
        // `uf` joins every accepted pair; `uf_near` only pairs at or above
        // `threshold`, whose members may take a plain near-dup reference.
        let mut uf = fuzzy::UnionFind::new(reps.len());
        let mut uf_near = fuzzy::UnionFind::new(reps.len());
        let near = self.cfg.fuzzy || self.cfg.delta;
        // The line sets of the classes (of their first text), when needed.
        let mut sets = fuzzy::LineIndex::default();
        if near {
            let mut hasher = fuzzy::LineHasher::default();
            let mut hashes: Vec<u64> = Vec::new();
            let mut ends: Vec<usize> = Vec::with_capacity(reps.len());
            for &rep in &reps {
                if let Some(u) = units.get(rep) {
                    hasher.push_hashes(&u.text, &mut hashes);
                }
                ends.push(hashes.len());
            }
            sets = fuzzy::LineIndex::with_capacity(hashes.len(), reps.len());
            let mut start = 0usize;
            for end in ends {
                sets.push_text(hashes.get(start..end).unwrap_or(&[]));
                start = end;
            }
            let t = match (self.cfg.fuzzy, self.cfg.delta) {
                (true, true) => self.cfg.threshold.min(self.cfg.delta_threshold),
                (false, true) => self.cfg.delta_threshold,
                _ => self.cfg.threshold,
            };
            let (pairs, comparisons) = sets.similar_pairs(fuzzy::Limits {
                threshold: t,
                max_postings: self.cfg.max_postings,
                max_candidates: self.cfg.max_candidates,
            });
            an.comparisons += comparisons;
            for (a, b, j) in pairs {
                uf.union(a, b);
                if self.cfg.fuzzy && j >= self.cfg.threshold {
                    uf_near.union(a, b);
                }
            }
        }
        let (starts, members) = group_units(&class_of, reps.len(), |c| uf.find(c));
        for w in starts.windows(2) {
            let (Some(&a), Some(&b)) = (w.first(), w.get(1)) else {
                continue;
            };
            let Some(g) = members.get(a..b).filter(|g| g.len() > 1) else {
                continue;
            };
            let keep = g
                .iter()
                .copied()
                .find(|&u| units.get(u).is_some_and(|x| !x.replaceable))
                .or_else(|| g.last().copied());
            let Some(keep) = keep else { continue };
            let (Some(ku), Some(&kc)) = (units.get(keep), class_of.get(keep)) else {
                continue;
            };
            let Some(keep_msg) = conv.messages.get(ku.msg) else {
                continue;
            };
            let keep_id = keep_msg.id().clone();
            // What the reader sees: the call id of a result (it is in the
            // conversation), else the kept message's role and first words.
            let label = match &ku.slot {
                UnitSlot::ToolResult(id) => id.to_string(),
                UnitSlot::Text => ctxpress_text::message_ref(keep_msg.role_str(), &ku.text),
            };
            for &u in g {
                let Some(unit) = units.get(u) else { continue };
                if u == keep || !unit.replaceable || unit.msg == ku.msg {
                    continue;
                }
                let same_class = class_of.get(u) == Some(&kc);
                let r = if same_class && self.cfg.exact {
                    // Never longer than what it replaces (a small `min_chars`).
                    Some(self.exact_ref(&label, unit, &keep_id))
                        .filter(|r| r.text.chars().count() < r.original_chars)
                } else {
                    // Without line sets (neither fuzzy nor delta) a text
                    // has no near reference.
                    let Some(&a) = class_of.get(u).filter(|&&c| c < sets.len()) else {
                        continue;
                    };
                    if kc >= sets.len() {
                        continue;
                    }
                    an.comparisons += 1;
                    let s = if same_class { 1.0 } else { sets.jaccard(a, kc) };
                    let transitive = class_of
                        .get(u)
                        .is_some_and(|&c| uf_near.find(c) == uf_near.find(kc));
                    self.near_ref(&label, unit, ku, &keep_id, s, transitive)
                };
                if let Some(r) = r {
                    an.replacements.push(r);
                }
            }
        }
        an.replacements.sort_by_key(|r| r.index);
        an
    }

    fn exact_ref(&self, label: &str, unit: &Unit<'_>, keep: &MessageId) -> Replacement {
        let chars = unit.text.chars().count();
        Replacement {
            index: unit.msg,
            slot: unit.slot.to_slot(),
            keep: keep.clone(),
            similarity: 1.0,
            kind: Kind::Exact,
            text: format!("[{}:dup of {label} — {} chars]", self.cfg.prefix, chars),
            original_chars: chars,
        }
    }

    fn near_ref(
        &self,
        label: &str,
        unit: &Unit<'_>,
        keep_unit: &Unit<'_>,
        keep: &MessageId,
        s: f64,
        near_group: bool,
    ) -> Option<Replacement> {
        let chars = unit.text.chars().count();
        let pct = (s * 100.0).round() as u32;
        let head = format!(
            "[{}:near-dup of {label} — {} chars, ~{pct}% match",
            self.cfg.prefix, chars
        );
        let mk = |kind, text: String| Replacement {
            index: unit.msg,
            slot: unit.slot.to_slot(),
            keep: keep.clone(),
            similarity: s,
            kind,
            text,
            original_chars: chars,
        };
        if self.cfg.delta
            && s >= self.cfg.delta_threshold
            && let Some(edits) =
                delta::line_diff(&keep_unit.text, &unit.text, self.cfg.delta_max_lines)
        {
            let text = if edits.is_empty() {
                format!("{head}]")
            } else {
                format!("{head}; diff:\n{}]", delta::render(&edits))
            };
            if text.chars().count() < chars {
                return Some(mk(Kind::Delta, text));
            }
        }
        if self.cfg.fuzzy
            && (near_group || s >= self.cfg.threshold)
            && (self.cfg.near_without_diff || !self.cfg.delta)
        {
            let text = format!("{head}]");
            if text.chars().count() < chars {
                return Some(mk(Kind::Near, text));
            }
        }
        None
    }
}

/// The units of each group (the units whose classes have the same root), in
/// unit order, the groups numbered by their first unit: `members` holds them
/// group after group, group `g` at `starts[g]..starts[g + 1]`.
fn group_units(
    class_of: &[usize],
    classes: usize,
    mut root: impl FnMut(usize) -> usize,
) -> (Vec<usize>, Vec<usize>) {
    let mut group_of_root = vec![usize::MAX; classes];
    let mut group_of = Vec::with_capacity(class_of.len());
    let mut sizes: Vec<usize> = Vec::new();
    for &c in class_of {
        let g = match group_of_root.get_mut(root(c)) {
            Some(g) if *g == usize::MAX => {
                *g = sizes.len();
                sizes.push(0);
                *g
            }
            Some(g) => *g,
            None => usize::MAX,
        };
        group_of.push(g);
        if let Some(n) = sizes.get_mut(g) {
            *n += 1;
        }
    }
    let mut starts = Vec::with_capacity(sizes.len() + 1);
    let mut at = 0usize;
    for &n in &sizes {
        starts.push(at);
        at += n;
    }
    starts.push(at);
    let mut fill = starts.clone();
    let mut members = vec![0usize; at];
    for (u, &g) in group_of.iter().enumerate() {
        if let Some(f) = fill.get_mut(g) {
            if let Some(m) = members.get_mut(*f) {
                *m = u;
            }
            *f += 1;
        }
    }
    (starts, members)
}

/// True when an Anthropic `tool_result` block holds text only, so replacing
/// its content with a string loses nothing but text.
fn text_only_result(b: &Value) -> bool {
    match b.get("content") {
        Some(Value::String(_)) | None => true,
        Some(Value::Array(parts)) => parts
            .iter()
            .all(|p| p.get("type").and_then(Value::as_str) == Some("text")),
        _ => false,
    }
}

impl Strategy for Dedup {
    fn name(&self) -> &str {
        "dedup"
    }

    fn apply(
        &self,
        conv: &mut Conversation,
        _ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let an = self.analyze(conv);
        let mut out = StageOutcome::default();
        out.count("units", an.units as u64);
        out.count("comparisons", an.comparisons);
        for r in an.replacements {
            let Some(m) = conv.messages.get_mut(r.index) else {
                continue;
            };
            let ok = match &r.slot {
                Slot::Text => {
                    m.set_text(r.text.clone());
                    true
                }
                Slot::ToolResult(id) => m.set_tool_result_text(id, r.text.clone()),
            };
            if !ok {
                continue;
            }
            let id = m.id().clone();
            let ann = conv.ann_mut(&id);
            if ann.dup.is_none() {
                ann.dup = Some(DupMark {
                    keep: r.keep.clone(),
                    similarity: r.similarity,
                });
            }
            out.count(
                match r.kind {
                    Kind::Exact => "exact_dups",
                    Kind::Near => "near_dups",
                    Kind::Delta => "delta_refs",
                },
                1,
            );
            let saved = r.original_chars.saturating_sub(r.text.chars().count());
            out.count("chars_saved", saved as u64);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
