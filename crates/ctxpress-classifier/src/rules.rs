//! The ordered message-level preservation rules (spec 000 section 1, spec 001)
//! and the `classifier` strategy that records them as annotations.
//!
//! As a stage it classifies lazily ([`decide_lazy`]): the message-level rules
//! are decided first, and only a message that reaches the content rules has its
//! text built and classified.

use crate::classify::{classify, is_valid_json, prose_chars};
use ctxpress_core::{
    Classification, ConfigError, Conversation, Decision, DecisionRule, Message, Role, StageContext,
    StageOutcome, Strategy, StrategyError,
};
use ctxpress_dialect::Turns;
use ctxpress_text::bytes::fewer_chars_than;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Parameters of the message-level rules. Every threshold of the spec is a
/// field; missing fields take the spec's defaults, unknown fields are errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassifierConfig {
    /// Roles never compressed. `system` also covers `developer`.
    pub preserve: Vec<String>,
    /// The last this many user/assistant messages, and everything after the
    /// first of them (their tool results), are preserved. 0 disables it.
    pub recency_window: usize,
    /// Messages with fewer characters than this are preserved.
    pub min_chars: usize,
    /// Code-fenced messages with at least this many prose characters are
    /// code-split; with fewer they are preserved.
    pub code_split_min_prose: usize,
    /// Prefixes marking content that is already compressed.
    pub compressed_prefixes: Vec<String>,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            preserve: vec!["system".into()],
            recency_window: 4,
            min_chars: 120,
            code_split_min_prose: 80,
            compressed_prefixes: vec!["[summary:".into(), "[summary#".into(), "[truncated".into()],
        }
    }
}

/// The classification and decision of one message, as `ctxpress classify`
/// prints it: `{"index","role","tier","hard","soft","decision","rule"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageDecision {
    /// Position in the conversation.
    pub index: usize,
    /// Role as written (empty when missing).
    pub role: String,
    /// Tier and reasons of the message text.
    #[serde(flatten)]
    pub classification: Classification,
    /// What the rules decided.
    pub decision: Decision,
    /// The rule that decided it.
    pub rule: DecisionRule,
}

/// The text the rules look at: the message text, plus the result text of any
/// tool results it carries.
pub fn message_text(m: &Message) -> Cow<'_, str> {
    if !m.is_tool_result() {
        return m.text();
    }
    if matches!(m.role_ref(), Role::Tool | Role::Function) {
        return m.text();
    }
    let own = m.text();
    let results = m.tool_results();
    let mut parts: Vec<Cow<'_, str>> = Vec::with_capacity(results.len() + 1);
    if !own.is_empty() {
        parts.push(own);
    }
    parts.extend(results.into_iter().map(|r| r.text));
    match parts.len() {
        0 => Cow::Borrowed(""),
        1 => parts.pop().unwrap_or(Cow::Borrowed("")),
        _ => Cow::Owned(parts.join("\n")),
    }
}

fn role_preserved(m: &Message, cfg: &ClassifierConfig) -> bool {
    let role = m.role_str();
    cfg.preserve
        .iter()
        .any(|p| p == role || (p == "system" && m.role_ref().is_system()))
}

/// Rules 1-6 (role, recency window, tool calls, short, already compressed,
/// duplicate): they decide without looking at the text's tier.
///
/// The duplicate mark is checked before rules 4 and 5: dedup runs before the
/// classifier and has already replaced a marked text with its short
/// `[cce:dup of ...]` reference, while spec 000 applies rules 4 and 5 to the
/// original text, which dedup only replaces when it is at least `min_chars`
/// (200) long and not already compressed, so rules 4 and 5 could not have
/// matched it.
fn early_rule(
    conv: &Conversation,
    index: usize,
    tail: usize,
    text: &str,
    cfg: &ClassifierConfig,
) -> Option<(Decision, DecisionRule)> {
    rule_without_text(conv, index, tail, cfg).or_else(|| text_rule(text, cfg))
}

/// Rules 1-3 and the duplicate mark, the early rules that do not read the
/// text: [`decide_lazy`] builds the text (a copy, for a message carrying
/// several tool results) only when none of them decides.
fn rule_without_text(
    conv: &Conversation,
    index: usize,
    tail: usize,
    cfg: &ClassifierConfig,
) -> Option<(Decision, DecisionRule)> {
    let m = conv.messages.get(index)?;
    if role_preserved(m, cfg) {
        return Some((Decision::Preserve, DecisionRule::PreservedRole));
    }
    if index >= tail {
        return Some((Decision::Preserve, DecisionRule::RecencyWindow));
    }
    if m.has_tool_calls() || ctxpress_dialect::text_results::has_text_call(m) {
        return Some((Decision::Preserve, DecisionRule::HasToolCalls));
    }
    if conv.ann(m.id()).is_some_and(|a| a.dup.is_some()) {
        return Some((Decision::Dedup, DecisionRule::Duplicate));
    }
    None
}

/// Rules 4 and 5 (short, already compressed), after [`rule_without_text`].
fn text_rule(text: &str, cfg: &ClassifierConfig) -> Option<(Decision, DecisionRule)> {
    if fewer_chars_than(text, cfg.min_chars) {
        return Some((Decision::Preserve, DecisionRule::ShortContent));
    }
    let lead = text.trim_start();
    if cfg
        .compressed_prefixes
        .iter()
        .any(|p| !p.is_empty() && lead.starts_with(p.as_str()))
    {
        return Some((Decision::Preserve, DecisionRule::AlreadyCompressed));
    }
    None
}

/// Rules 7-11, which need the classification.
fn content_rule(
    text: &str,
    cls: &Classification,
    cfg: &ClassifierConfig,
) -> (Decision, DecisionRule) {
    if cls.hard.contains(&ctxpress_core::Reason::CodeFence) {
        return if prose_chars(text) >= cfg.code_split_min_prose {
            (Decision::CodeSplit, DecisionRule::CodeWithProse)
        } else {
            (Decision::Preserve, DecisionRule::CodeFences)
        };
    }
    if !cls.hard.is_empty() {
        return (Decision::Preserve, DecisionRule::HardT0);
    }
    // valid JSON opening with `{` or `[` is a `json_structure` (a hard
    // reason), so only a string literal can still be valid JSON here
    if text.trim_start().starts_with('"') && is_valid_json(text) {
        return (Decision::Preserve, DecisionRule::ValidJson);
    }
    (Decision::Compress, DecisionRule::Compressible)
}

/// Classify every message and apply the ordered preservation rules.
pub fn decide(conv: &Conversation, cfg: &ClassifierConfig) -> Vec<MessageDecision> {
    let tail = conv.tail_start(cfg.recency_window);
    conv.messages
        .iter()
        .enumerate()
        .map(|(index, m)| {
            let text = message_text(m);
            let classification = classify(&text);
            let (decision, rule) = early_rule(conv, index, tail, &text, cfg)
                .unwrap_or_else(|| content_rule(&text, &classification, cfg));
            MessageDecision {
                index,
                role: m.role_str().to_string(),
                classification,
                decision,
                rule,
            }
        })
        .collect()
}

/// Like [`decide`], but classifies only the messages whose decision depends
/// on it (rules 7-11); the others get `None`. This is what the strategy runs:
/// tool outputs and the recency window are never scanned.
pub fn decide_lazy(
    conv: &Conversation,
    cfg: &ClassifierConfig,
) -> Vec<(Decision, DecisionRule, Option<Classification>)> {
    let tail = conv.tail_start(cfg.recency_window);
    (0..conv.messages.len())
        .map(|index| decide_one(conv, index, tail, cfg))
        .collect()
}

/// [`decide_lazy`]'s answer for the message at `index` (`tail` is where the
/// recency window starts).
fn decide_one(
    conv: &Conversation,
    index: usize,
    tail: usize,
    cfg: &ClassifierConfig,
) -> (Decision, DecisionRule, Option<Classification>) {
    if let Some((d, r)) = rule_without_text(conv, index, tail, cfg) {
        return (d, r, None);
    }
    // Callers pass the index of a message: not reached.
    let Some(m) = conv.messages.get(index) else {
        return (Decision::Preserve, DecisionRule::ShortContent, None);
    };
    let text = message_text(m);
    match text_rule(&text, cfg) {
        Some((d, r)) => (d, r, None),
        None => {
            let cls = classify(&text);
            let (d, r) = content_rule(&text, &cls, cfg);
            (d, r, Some(cls))
        }
    }
}

/// The `classifier` strategy: writes `classification` and `decision` into every
/// message's annotations and changes no content.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    cfg: ClassifierConfig,
}

impl Classifier {
    /// A classifier with these parameters. As a stage it classifies lazily
    /// (see [`decide_lazy`]).
    pub fn new(cfg: ClassifierConfig) -> Self {
        Classifier { cfg }
    }

    /// The parameters.
    pub fn config(&self) -> &ClassifierConfig {
        &self.cfg
    }
}

fn decision_name(d: Decision) -> &'static str {
    match d {
        Decision::Preserve => "preserve",
        Decision::Dedup => "dedup",
        Decision::CodeSplit => "code_split",
        Decision::Compress => "compress",
    }
}

/// A slot per decision, for counting.
fn decision_index(d: Decision) -> usize {
    match d {
        Decision::Preserve => 0,
        Decision::Dedup => 1,
        Decision::CodeSplit => 2,
        Decision::Compress => 3,
    }
}

impl Strategy for Classifier {
    fn name(&self) -> &str {
        "classifier"
    }

    fn apply(
        &self,
        conv: &mut Conversation,
        _ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let tail = conv.tail_start(self.cfg.recency_window);
        let mut outcome = StageOutcome::default();
        // Counted here, added once per decision kind (the counters are a map).
        let mut counts = [0u64; 4];
        // Message by message, as decide_lazy decides them (each decision
        // reads only its own message and annotations other stages wrote).
        for index in 0..conv.messages.len() {
            let (decision, rule, cls) = decide_one(conv, index, tail, &self.cfg);
            if let Some(n) = counts.get_mut(decision_index(decision)) {
                *n += 1;
            }
            let Some(id) = conv.messages.get(index).map(|m| m.id().clone()) else {
                continue;
            };
            let ann = conv.ann_mut(&id);
            ann.classification = cls;
            ann.decision = Some((decision, rule));
        }
        for d in [
            Decision::Preserve,
            Decision::Dedup,
            Decision::CodeSplit,
            Decision::Compress,
        ] {
            let n = counts.get(decision_index(d)).copied().unwrap_or(0);
            if n > 0 {
                outcome.count(decision_name(d), n);
            }
        }
        Ok(outcome)
    }
}

ctxpress_core::register_strategy!(
    "classifier",
    "classify messages (T0/T2/T3) and apply the ordered preservation rules",
    ClassifierConfig,
    |c: ClassifierConfig| Ok::<_, ConfigError>(Classifier::new(c)),
    params: &[
        ("preserve", "Roles never compressed; `system` also covers `developer`."),
        (
            "recency_window",
            "The last this many user/assistant messages, and everything after the first of them, are preserved (0 disables it).",
        ),
        ("min_chars", "Messages with fewer characters than this are preserved."),
        (
            "code_split_min_prose",
            "Code-fenced messages with at least this many prose characters are code-split; with fewer they are preserved.",
        ),
        ("compressed_prefixes", "Prefixes marking content that is already compressed."),
    ]
);

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_core::{DupMark, MessageId};

    fn msg(i: usize, role: &str, content: &str) -> Message {
        Message::text_message(MessageId::new(format!("m{i}")), role, content)
    }

    fn prose(n: usize) -> String {
        "The team reviewed the quarterly plan and agreed to move the launch later. ".repeat(n)
    }

    fn conv(msgs: Vec<(&str, String)>) -> Conversation {
        Conversation::new(
            msgs.into_iter()
                .enumerate()
                .map(|(i, (r, c))| msg(i, r, &c))
                .collect(),
        )
    }

    fn rules(c: &Conversation, cfg: &ClassifierConfig) -> Vec<DecisionRule> {
        decide(c, cfg).into_iter().map(|d| d.rule).collect()
    }

    #[test]
    fn rule_order_first_match_wins() {
        let cfg = ClassifierConfig {
            recency_window: 1,
            ..Default::default()
        };
        let code_prose = format!("{}\n```rust\nfn main() {{}}\n```\n", prose(2));
        let code_only = format!("Here:\n```rust\n{}\n```\n", "let x = 1;\n".repeat(20));
        let c = conv(vec![
            ("system", prose(3)),
            ("user", "short".into()),
            ("assistant", format!("[summary: {}]", prose(3))),
            ("user", code_prose),
            ("assistant", code_only),
            (
                "user",
                format!("{} SELECT id FROM users GROUP BY id", prose(2)),
            ),
            ("assistant", prose(3)),
            ("user", prose(3)),
        ]);
        assert_eq!(
            rules(&c, &cfg),
            vec![
                DecisionRule::PreservedRole,
                DecisionRule::ShortContent,
                DecisionRule::AlreadyCompressed,
                DecisionRule::CodeWithProse,
                DecisionRule::CodeFences,
                DecisionRule::HardT0,
                DecisionRule::Compressible,
                DecisionRule::RecencyWindow,
            ]
        );
    }

    #[test]
    fn valid_json_is_preserved() {
        // A JSON string literal is valid JSON without any hard reason.
        let text = serde_json::to_string(&prose(3)).unwrap_or_default();
        let c = conv(vec![("user", text), ("user", "x".into())]);
        let cfg = ClassifierConfig {
            recency_window: 1,
            ..Default::default()
        };
        assert_eq!(rules(&c, &cfg)[0], DecisionRule::ValidJson);
    }

    #[test]
    fn duplicate_mark_gives_dedup() {
        let mut c = conv(vec![
            ("user", prose(3)),
            ("user", prose(3)),
            ("user", "x".into()),
        ]);
        let keep = c.messages[0].id().clone();
        let dup = c.messages[1].id().clone();
        c.ann_mut(&dup).dup = Some(DupMark {
            keep,
            similarity: 1.0,
        });
        let cfg = ClassifierConfig {
            recency_window: 1,
            ..Default::default()
        };
        let d = decide(&c, &cfg);
        assert_eq!(d[0].decision, Decision::Compress);
        assert_eq!(d[1].decision, Decision::Dedup);
    }

    #[test]
    fn duplicate_reference_is_dedup_not_short() {
        // Dedup ran first: the marked text is now its short reference.
        let mut c = conv(vec![
            ("user", "[cce:dup of m1 — 300 chars]".into()),
            ("user", prose(3)),
            ("user", "x".into()),
        ]);
        let keep = c.messages[1].id().clone();
        let dup = c.messages[0].id().clone();
        c.ann_mut(&dup).dup = Some(DupMark {
            keep,
            similarity: 1.0,
        });
        let cfg = ClassifierConfig {
            recency_window: 1,
            ..Default::default()
        };
        assert_eq!(rules(&c, &cfg)[0], DecisionRule::Duplicate);
    }

    #[test]
    fn tool_calls_and_tool_results() {
        let raw = serde_json::json!([
            {"role": "user", "content": prose(3)},
            {"role": "assistant", "content": prose(3),
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "ls", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": prose(3)},
            {"role": "user", "content": "thanks"},
        ]);
        let c = Conversation::parse(&raw.to_string()).expect("parses");
        let cfg = ClassifierConfig {
            recency_window: 1,
            ..Default::default()
        };
        assert_eq!(
            rules(&c, &cfg),
            vec![
                DecisionRule::Compressible,
                DecisionRule::HasToolCalls,
                DecisionRule::Compressible,
                DecisionRule::RecencyWindow
            ]
        );
        let with_tool = ClassifierConfig {
            preserve: vec!["system".into(), "tool".into()],
            recency_window: 0,
            ..Default::default()
        };
        assert_eq!(rules(&c, &with_tool)[2], DecisionRule::PreservedRole);
        assert_eq!(rules(&c, &with_tool)[3], DecisionRule::ShortContent);
    }

    #[test]
    fn anthropic_tool_result_text_is_classified() {
        let raw = serde_json::json!({"messages": [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1",
                 "content": "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nKeyError: 'x'"}]},
            {"role": "user", "content": "ok"},
        ]});
        let c = Conversation::parse(&raw.to_string()).expect("parses");
        let d = decide(&c, &ClassifierConfig::default());
        assert!(
            d[1].classification
                .hard
                .contains(&ctxpress_core::Reason::ErrorTraceback)
        );
    }

    #[test]
    fn developer_counts_as_system() {
        let c = conv(vec![("developer", prose(3)), ("user", "x".into())]);
        assert_eq!(
            rules(&c, &ClassifierConfig::default())[0],
            DecisionRule::PreservedRole
        );
    }

    #[test]
    fn strategy_writes_annotations_and_changes_nothing() {
        let mut c = conv(vec![
            ("system", prose(2)),
            ("user", prose(3)),
            ("assistant", prose(3)),
            ("user", "x".into()),
        ]);
        let before = c.to_json_string();
        let s = Classifier::new(ClassifierConfig {
            recency_window: 1,
            ..Default::default()
        });
        let out = s.apply(&mut c, &StageContext::default()).expect("applies");
        assert_eq!(c.to_json_string(), before);
        assert_eq!(out.counters.get("preserve"), Some(&2));
        assert_eq!(out.counters.get("compress"), Some(&2));
        for m in &c.messages {
            let a = c.ann(m.id()).expect("annotated");
            let (decision, _) = a.decision.expect("every message gets a decision");
            // Lazy: only messages that reach the content rules are classified.
            assert_eq!(
                a.classification.is_some(),
                decision == Decision::Compress,
                "{:?}",
                m.role()
            );
        }
    }

    #[test]
    fn registered_and_config_checked() {
        let f = ctxpress_core::registry::find("classifier").expect("registered");
        assert_eq!((f.default_config)()["recency_window"], serde_json::json!(4));
        assert!(
            ctxpress_core::registry::build("classifier", &serde_json::json!({"min_chars": 10}))
                .is_ok()
        );
        let err =
            ctxpress_core::registry::build("classifier", &serde_json::json!({"recency_windw": 2}))
                .expect_err("unknown field");
        assert!(err.to_string().contains("recency_window"), "{err}");
    }

    #[test]
    fn decision_serializes_flat() {
        let c = conv(vec![("user", "see https://example.com".into())]);
        let d = decide(&c, &ClassifierConfig::default());
        let v = serde_json::to_value(&d[0]).expect("serializes");
        assert_eq!(
            v,
            serde_json::json!({"index": 0, "role": "user", "tier": "T0", "hard": [],
                "soft": ["url"], "decision": "preserve", "rule": "recency_window"})
        );
    }

    /// A message built from a role pick, a length, and whether it carries
    /// two Anthropic tool results.
    fn varied(i: usize, role: u8, len: usize, blocks: bool) -> Message {
        let role = ["system", "user", "assistant", "tool", "developer"][usize::from(role % 5)];
        let text = match len % 4 {
            0 => "short".to_string(),
            1 => prose(1 + len % 3),
            2 => format!("[summary: {}]", prose(2)),
            _ => format!("{}\n```rust\nfn main() {{}}\n```\n", prose(2)),
        };
        if !blocks {
            return msg(i, role, &text);
        }
        let v = serde_json::json!({"role": role, "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": text},
            {"type": "tool_result", "tool_use_id": "b", "content": prose(1)},
        ]});
        let mut c = Conversation::parse(&serde_json::json!([v]).to_string())
            .unwrap_or_else(|_| Conversation::new(Vec::new()));
        c.messages.pop().unwrap_or_else(|| msg(i, role, &text))
    }

    /// Rules 7-11 as written before the JSON shortcut: every text the
    /// classifier finds no hard reason in is parsed as JSON.
    fn content_rule_before(
        text: &str,
        cls: &Classification,
        cfg: &ClassifierConfig,
    ) -> (Decision, DecisionRule) {
        if cls.hard.contains(&ctxpress_core::Reason::CodeFence) {
            return if prose_chars(text) >= cfg.code_split_min_prose {
                (Decision::CodeSplit, DecisionRule::CodeWithProse)
            } else {
                (Decision::Preserve, DecisionRule::CodeFences)
            };
        }
        if !cls.hard.is_empty() {
            return (Decision::Preserve, DecisionRule::HardT0);
        }
        if is_valid_json(text) {
            return (Decision::Preserve, DecisionRule::ValidJson);
        }
        (Decision::Compress, DecisionRule::Compressible)
    }

    #[test]
    fn json_shortcut_keeps_the_content_rules() {
        let cfg = ClassifierConfig::default();
        for t in [
            "",
            "  \"a JSON string literal that is long enough\"  ",
            "\"unterminated",
            "{\"a\": 1}",
            " [1, 2, 3] ",
            "[cce:near-dup of m3]",
            "{not json}",
            "[1, 2",
            "{\"a\": [1, 2]} trailing",
            "[]",
            "{}",
            "plain prose",
            "\u{a0}\"x\"",
            "\u{feff}[1]",
        ] {
            let cls = classify(t);
            assert_eq!(
                content_rule(t, &cls, &cfg),
                content_rule_before(t, &cls, &cfg),
                "{t:?}"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        #[test]
        fn json_shortcut_on_random_texts(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::Just("{".to_string()),
                    proptest::prelude::Just("}".to_string()),
                    proptest::prelude::Just("[".to_string()),
                    proptest::prelude::Just("]".to_string()),
                    proptest::prelude::Just("\"".to_string()),
                    proptest::prelude::Just(":".to_string()),
                    proptest::prelude::Just(",".to_string()),
                    proptest::prelude::Just(" ".to_string()),
                    proptest::prelude::Just("\u{a0}".to_string()),
                    proptest::prelude::Just("1".to_string()),
                    "[a-z ]{0,12}",
                    proptest::prelude::any::<String>(),
                ],
                0..16,
            )
        ) {
            let t: String = parts.concat();
            let cfg = ClassifierConfig::default();
            let cls = classify(&t);
            proptest::prop_assert_eq!(content_rule(&t, &cls, &cfg), content_rule_before(&t, &cls, &cfg));
        }

        /// The lazy decisions, which build the text only after the rules
        /// that do not read it, equal `decide`'s, with a classification
        /// exactly where the early rules (on the text) decided nothing.
        #[test]
        fn lazy_decisions_equal_the_early_rules_then_decide(
            picks in proptest::collection::vec(
                (0u8..5, 0usize..12, proptest::prelude::any::<bool>(), proptest::prelude::any::<bool>()),
                0..10,
            ),
            window in 0usize..4,
            preserve_user in proptest::prelude::any::<bool>(),
        ) {
            let mut c = Conversation::new(
                picks
                    .iter()
                    .enumerate()
                    .map(|(i, &(r, l, b, _))| varied(i, r, l, b))
                    .collect(),
            );
            for (i, &(_, _, _, dup)) in picks.iter().enumerate() {
                if dup && let Some(id) = c.messages.get(i).map(|m| m.id().clone()) {
                    c.ann_mut(&id).dup = Some(DupMark { keep: id.clone(), similarity: 1.0 });
                }
            }
            let mut cfg = ClassifierConfig { recency_window: window, ..Default::default() };
            if preserve_user {
                cfg.preserve.push("user".into());
            }
            let tail = c.tail_start(cfg.recency_window);
            let want: Vec<_> = decide(&c, &cfg)
                .into_iter()
                .map(|d| {
                    let text = message_text(&c.messages[d.index]);
                    let early = early_rule(&c, d.index, tail, &text, &cfg).is_some();
                    (d.decision, d.rule, (!early).then_some(d.classification))
                })
                .collect();
            let lazy = decide_lazy(&c, &cfg);
            proptest::prop_assert_eq!(&lazy, &want);
            // The stage, which decides and annotates message by message,
            // writes exactly these answers (messages sharing an id share
            // annotations: the last one's answer).
            let mut applied = c.clone();
            let run = Classifier::new(cfg.clone()).apply(&mut applied, &StageContext::default());
            proptest::prop_assert!(run.is_ok());
            let mut last = std::collections::HashMap::new();
            for (m, (d, r, cls)) in c.messages.iter().zip(lazy) {
                last.insert(m.id().clone(), (Some((d, r)), cls));
            }
            for m in &applied.messages {
                let written = applied.ann(m.id()).map(|a| (a.decision, a.classification.clone()));
                proptest::prop_assert_eq!(written.as_ref(), last.get(m.id()));
            }
        }
    }
}
