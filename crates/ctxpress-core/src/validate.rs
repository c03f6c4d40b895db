//! The invariant checker: tool-call pairing for both dialects and legal roles.
//!
//! Roles, per dialect: OpenAI Chat takes `system`, `developer`, `user`,
//! `assistant`, `tool` and the legacy `function` anywhere (pairing aside);
//! Anthropic Messages takes `user` and `assistant`, and `system` messages
//! inside `messages` too, anywhere, as Claude Code sends them (its
//! environment, mid-conversation) to the API it talks to. Anything else is
//! an [`ViolationKind::IllegalRole`].
//!
//! [`introduces_violations`] compares two lists of violations (a violation
//! already in the input is tolerated, never added); [`same_violations`] tells,
//! message for message ([`Message::same_shape`](crate::Message::same_shape):
//! what [`validate`] reads is unchanged), that a stage cannot have changed the
//! violations, so the pipeline skips a second walk.

use crate::conversation::{Conversation, Format};
use crate::message::Role;
use std::collections::HashSet;

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ViolationKind {
    /// A tool call has no result right after it.
    MissingResult,
    /// A tool result answers no call right before it.
    OrphanResult,
    /// A call is answered twice.
    DuplicateResult,
    /// A role the provider does not accept.
    IllegalRole,
    /// A message with no content and no tool calls.
    EmptyMessage,
}

/// One violation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Violation {
    /// Message index.
    pub index: usize,
    /// What is wrong.
    pub kind: ViolationKind,
    /// The call id or role concerned.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            ViolationKind::MissingResult => "tool call without a result right after it",
            ViolationKind::OrphanResult => "tool result that answers no preceding call",
            ViolationKind::DuplicateResult => "tool call answered twice",
            ViolationKind::IllegalRole => "illegal role",
            ViolationKind::EmptyMessage => "empty message",
        };
        write!(f, "messages[{}]: {what} ({})", self.index, self.detail)
    }
}

/// Check a conversation. An empty result means it is valid for its provider.
pub fn validate(conv: &Conversation) -> Vec<Violation> {
    match conv.format {
        Format::OpenAi => validate_openai(conv),
        Format::Anthropic => validate_anthropic(conv),
    }
}

fn v(index: usize, kind: ViolationKind, detail: impl Into<String>) -> Violation {
    Violation {
        index,
        kind,
        detail: detail.into(),
    }
}

/// A set of call ids: an inline array while small (most messages carry a
/// few calls, and the set is built per message: no allocation for them),
/// hashed beyond that.
#[derive(Default)]
struct Ids<'a> {
    small: [&'a str; Ids::SMALL],
    len: usize,
    set: Option<HashSet<&'a str>>,
}

impl<'a> Ids<'a> {
    const SMALL: usize = 8;

    fn contains(&self, id: &str) -> bool {
        match &self.set {
            Some(s) => s.contains(id),
            None => self.small.iter().take(self.len).any(|x| *x == id),
        }
    }

    /// Add `id`; false when it was there already.
    fn insert(&mut self, id: &'a str) -> bool {
        if self.contains(id) {
            return false;
        }
        match &mut self.set {
            Some(s) => {
                s.insert(id);
            }
            None => match self.small.get_mut(self.len) {
                Some(slot) => {
                    *slot = id;
                    self.len += 1;
                }
                None => {
                    let mut s: HashSet<&'a str> = self.small.iter().copied().collect();
                    s.insert(id);
                    self.set = Some(s);
                }
            },
        }
        true
    }
}

fn validate_openai(conv: &Conversation) -> Vec<Violation> {
    let msgs = &conv.messages;
    let mut out = Vec::new();
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        let role = m.role_ref();
        if let Role::Other(r) = role {
            out.push(v(i, ViolationKind::IllegalRole, r.clone()));
        }
        if *role == Role::Assistant && m.has_tool_calls() {
            // The calls are few: their ids are searched in place, with no
            // set of them to build.
            let mut got = Ids::default();
            let mut j = i + 1;
            while j < msgs.len() && *msgs[j].role_ref() == Role::Tool {
                let id = msgs[j].tool_result_ids().next().unwrap_or_default();
                if !m.tool_call_ids().any(|w| w == id) {
                    out.push(v(j, ViolationKind::OrphanResult, id));
                } else if !got.insert(id) {
                    out.push(v(j, ViolationKind::DuplicateResult, id));
                }
                j += 1;
            }
            for id in m.tool_call_ids() {
                if !got.contains(id) {
                    out.push(v(i, ViolationKind::MissingResult, id));
                }
            }
            i = j;
            continue;
        }
        if *role == Role::Tool {
            let id = m.tool_result_ids().next().unwrap_or_default();
            out.push(v(i, ViolationKind::OrphanResult, id));
        } else if m.is_empty() && *role == Role::Assistant {
            out.push(v(i, ViolationKind::EmptyMessage, role.as_str()));
        }
        i += 1;
    }
    out
}

fn validate_anthropic(conv: &Conversation) -> Vec<Violation> {
    let msgs = &conv.messages;
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.role();
        if !matches!(role, Role::User | Role::Assistant | Role::System) {
            out.push(v(i, ViolationKind::IllegalRole, role.as_str()));
        }
        if m.is_empty() {
            out.push(v(i, ViolationKind::EmptyMessage, role.as_str()));
        }
        // Results must answer the calls of the message right before.
        let mut results = m.tool_result_ids().peekable();
        if results.peek().is_some() {
            let mut prev = Ids::default();
            if let Some(p) = i.checked_sub(1).map(|p| &msgs[p])
                && p.role() == Role::Assistant
            {
                for id in p.tool_call_ids() {
                    prev.insert(id);
                }
            }
            let mut seen = Ids::default();
            for id in results {
                if !prev.contains(id) {
                    out.push(v(i, ViolationKind::OrphanResult, id));
                } else if !seen.insert(id) {
                    out.push(v(i, ViolationKind::DuplicateResult, id));
                }
            }
        }
        if role == Role::Assistant && m.has_tool_calls() {
            let mut answered = Ids::default();
            if let Some(n) = msgs.get(i + 1)
                && n.role() == Role::User
            {
                for id in n.tool_result_ids() {
                    answered.insert(id);
                }
            }
            for id in m.tool_call_ids() {
                if !answered.contains(id) {
                    out.push(v(i, ViolationKind::MissingResult, id));
                }
            }
        }
    }
    out
}

/// True when [`validate`] answers the same for `after` as for `before`
/// without running it: the same format, and message for message the same
/// shape ([`crate::Message::same_shape`]: role and pairing facts, all the
/// checks read). A stage that only rewrote texts in place passes.
pub fn same_violations(before: &Conversation, after: &Conversation) -> bool {
    before.format == after.format
        && before.messages.len() == after.messages.len()
        && before
            .messages
            .iter()
            .zip(&after.messages)
            .all(|(a, b)| crate::Message::same_shape(a, b))
}

/// True when `after` has a violation `before` did not have (compared as
/// multisets of kind and detail, ignoring positions, which stages may shift).
pub fn introduces_violations(before: &[Violation], after: &[Violation]) -> bool {
    let mut pool: Vec<(&ViolationKind, &str)> = before
        .iter()
        .map(|v| (&v.kind, v.detail.as_str()))
        .collect();
    for a in after {
        match pool.iter().position(|p| *p == (&a.kind, a.detail.as_str())) {
            Some(p) => {
                pool.swap_remove(p);
            }
            None => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(doc: &str) -> Vec<ViolationKind> {
        validate(&Conversation::parse(doc).unwrap())
            .into_iter()
            .map(|v| v.kind)
            .collect()
    }

    #[test]
    fn openai_pairing() {
        let call = r#"{"role":"assistant","content":"","tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}}]}"#;
        let res = r#"{"role":"tool","tool_call_id":"a","content":"r"}"#;
        let user = r#"{"role":"user","content":"q"}"#;
        assert!(kinds(&format!("[{user},{call},{res}]")).is_empty());
        assert_eq!(
            kinds(&format!("[{user},{call},{user}]")),
            vec![ViolationKind::MissingResult]
        );
        assert_eq!(
            kinds(&format!("[{user},{res}]")),
            vec![ViolationKind::OrphanResult]
        );
        assert_eq!(
            kinds(&format!("[{call},{res},{res}]")),
            vec![ViolationKind::DuplicateResult]
        );
        assert_eq!(
            kinds(r#"[{"role":"robot","content":"x"}]"#),
            vec![ViolationKind::IllegalRole]
        );
    }

    /// System messages are legal anywhere in both dialects (Claude Code
    /// sends one after its first user message); `developer` and `tool`
    /// are OpenAI's only.
    #[test]
    fn system_messages_anywhere() {
        let user = r#"{"role":"user","content":[{"type":"text","text":"q"}]}"#;
        let system = r##"{"role":"system","content":"# Environment"}"##;
        let call = r#"{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}"#;
        let res =
            r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}"#;
        let anthropic = |msgs: &str| {
            let c =
                Conversation::parse(&format!(r#"{{"system":"s","messages":[{msgs}]}}"#)).unwrap();
            assert_eq!(c.format, Format::Anthropic, "{msgs}");
            validate(&c).into_iter().map(|v| v.kind).collect::<Vec<_>>()
        };
        assert!(anthropic(&format!("{user},{system},{call},{res},{system}")).is_empty());
        assert_eq!(
            anthropic(&format!(
                r#"{user},{{"role":"developer","content":"d"}},{call},{res}"#
            )),
            vec![ViolationKind::IllegalRole]
        );
        // Between a call and its result, it still breaks the pairing.
        assert_eq!(
            anthropic(&format!("{user},{call},{system},{res}")),
            vec![ViolationKind::MissingResult, ViolationKind::OrphanResult]
        );
        let ocall = r#"{"role":"assistant","content":"","tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}}]}"#;
        let ores = r#"{"role":"tool","tool_call_id":"a","content":"r"}"#;
        let dev = r#"{"role":"developer","content":"d"}"#;
        assert!(
            kinds(&format!(
                r#"[{{"role":"user","content":"q"}},{system},{ocall},{ores},{dev},{system}]"#
            ))
            .is_empty()
        );
    }

    #[test]
    fn anthropic_pairing() {
        let call = r#"{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}"#;
        let res =
            r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}"#;
        let user = r#"{"role":"user","content":"q"}"#;
        assert!(kinds(&format!("[{user},{call},{res}]")).is_empty());
        assert_eq!(
            kinds(&format!("[{user},{call},{user}]")),
            vec![ViolationKind::MissingResult]
        );
        assert_eq!(
            kinds(&format!("[{user},{res}]")),
            vec![ViolationKind::OrphanResult]
        );
    }

    proptest::proptest! {
        /// The inline set answers as a hash set does, below and past its
        /// inline size.
        #[test]
        fn ids_answer_as_a_hash_set(ops in proptest::collection::vec((proptest::bool::ANY, 0u8..24), 0..60)) {
            let names: Vec<String> = (0..24).map(|k| format!("call_{k}")).collect();
            let mut ids = Ids::default();
            let mut model: HashSet<&str> = HashSet::new();
            for (insert, k) in ops {
                let id = names[usize::from(k)].as_str();
                if insert {
                    proptest::prop_assert_eq!(ids.insert(id), model.insert(id));
                } else {
                    proptest::prop_assert_eq!(ids.contains(id), model.contains(id));
                }
            }
            for n in &names {
                proptest::prop_assert_eq!(ids.contains(n), model.contains(n.as_str()));
            }
        }
    }

    #[test]
    fn ids_hold_many_calls() {
        let names: Vec<String> = (0..40).map(|k| format!("c{k}")).collect();
        let mut ids = Ids::default();
        for n in &names {
            assert!(ids.insert(n));
            assert!(!ids.insert(n));
        }
        assert!(names.iter().all(|n| ids.contains(n)));
        assert!(!ids.contains("c40"));
        assert!(!ids.contains(""));
    }

    #[test]
    fn introduced_is_multiset_difference() {
        let a = v(1, ViolationKind::MissingResult, "x");
        let b = v(5, ViolationKind::MissingResult, "x");
        assert!(!introduces_violations(
            std::slice::from_ref(&a),
            std::slice::from_ref(&b)
        ));
        assert!(introduces_violations(
            std::slice::from_ref(&a),
            &[a.clone(), b]
        ));
        assert!(!introduces_violations(&[a], &[]));
    }

    /// One message of a random conversation: (role, text, call ids, result
    /// id), written in the OpenAI or the Anthropic shape.
    type Piece = (usize, bool, Vec<usize>, Option<usize>);

    fn piece_json(p: &Piece, anthropic: bool) -> serde_json::Value {
        use serde_json::json;
        let role = ["user", "assistant", "tool", "system", "critic"][p.0 % 5];
        let text = if p.1 { "some text" } else { "" };
        let id = |k: &usize| ["a", "b", "c"][*k % 3];
        if anthropic {
            let mut blocks = vec![json!({"type": "text", "text": text})];
            blocks.extend(
                p.2.iter()
                    .map(|k| json!({"type": "tool_use", "id": id(k), "name": "x", "input": {}})),
            );
            blocks
                .extend(p.3.iter().map(
                    |k| json!({"type": "tool_result", "tool_use_id": id(k), "content": text}),
                ));
            return json!({"role": role, "content": blocks});
        }
        let mut m = json!({"role": role, "content": text});
        if !p.2.is_empty() {
            m["tool_calls"] = p
                .2
                .iter()
                .map(|k| json!({"id": id(k), "type": "function", "function": {"name": "x", "arguments": "{}"}}))
                .collect();
        }
        if let Some(k) = &p.3 {
            m["tool_call_id"] = json!(id(k));
        }
        m
    }

    fn conv_of(pieces: &[Piece], anthropic: bool) -> Conversation {
        let v: Vec<_> = pieces.iter().map(|p| piece_json(p, anthropic)).collect();
        Conversation::parse(&serde_json::Value::Array(v).to_string()).unwrap()
    }

    fn piece() -> impl proptest::strategy::Strategy<Value = Piece> {
        use proptest::prelude::*;
        (
            0usize..5,
            any::<bool>(),
            proptest::collection::vec(0usize..3, 0..3),
            proptest::option::of(0usize..3),
        )
    }

    #[test]
    fn same_shapes_are_told_apart_from_changed_ones() {
        let pieces: Vec<Piece> = vec![
            (0, true, vec![], None),
            (1, true, vec![0], None),
            (2, true, vec![], Some(0)),
        ];
        let c = conv_of(&pieces, false);
        let mut rewritten = c.clone();
        rewritten.messages[0].set_text("other words");
        rewritten.messages[2].set_tool_result_text("a", "[summary]");
        assert!(same_violations(&c, &rewritten));
        let mut emptied = c.clone();
        emptied.messages[1].set_text("");
        assert!(same_violations(&c, &emptied), "calls keep it non-empty");
        let mut dropped = c.clone();
        dropped.messages.remove(2);
        assert!(!same_violations(&c, &dropped));
        let other = conv_of(
            &[
                (0, true, vec![], None),
                (1, true, vec![1], None),
                (2, true, vec![], Some(0)),
            ],
            false,
        );
        assert!(!same_violations(&c, &other));
    }

    proptest::proptest! {
        /// Whenever `same_violations` says so, `validate` answers the same
        /// for both conversations (same violations at the same places).
        #[test]
        fn same_violations_means_validate_agrees(
            before in proptest::collection::vec(piece(), 0..8),
            after in proptest::collection::vec(piece(), 0..8),
            anthropic in proptest::bool::ANY,
            texts_only in proptest::bool::ANY,
        ) {
            let a = conv_of(&before, anthropic);
            // Either a random other conversation or the same one with its
            // texts flipped (the case the pipeline skips validation for).
            let after: Vec<Piece> = if texts_only {
                before.iter().map(|p| (p.0, !p.1, p.2.clone(), p.3)).collect()
            } else {
                after
            };
            let b = conv_of(&after, anthropic);
            if same_violations(&a, &b) {
                proptest::prop_assert_eq!(validate(&a), validate(&b));
            }
        }
    }
}
