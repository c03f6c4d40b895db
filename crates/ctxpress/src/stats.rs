//! Figures of conversations before any compression: messages and tokens by
//! role, characters, and the share of them that is tool output (what
//! `ctxpress stats` prints and the Python `stats()` returns).
//!
//! Tokens are counted as `compress` counts them against a budget: each
//! message by `tokens::count_message`, plus what a request sends outside its
//! messages (an Anthropic top-level `system`, tool definitions) by
//! `tokens::fixed_tokens`, the function `window::fit` uses.

use ctxpress_core::tokens::{count_message, fixed_tokens};
use ctxpress_core::{Conversation, Role, TokenCounter};
use ctxpress_dialect::text_results::{environment_blocks, part_text, text_parts, text_results};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Messages and tokens of one role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RoleStats {
    /// Messages of this role.
    pub messages: usize,
    /// Their tokens.
    pub tokens: usize,
}

/// Running figures over one or more conversations; [`Stats::add`] each.
#[derive(Clone, Serialize)]
pub struct Stats {
    /// Conversations added.
    pub conversations: usize,
    /// Messages in them.
    pub messages: usize,
    /// Tokens, by [`Stats::tokenizer`]: the messages' and the text sent
    /// outside them ([`Stats::system_tokens`], [`Stats::tool_definition_tokens`]),
    /// as a budget counts them.
    pub tokens: usize,
    /// Tokens of the top-level `system` of Anthropic requests (not a message,
    /// so in no role).
    pub system_tokens: usize,
    /// Tokens of the tool definitions (`tools`, legacy `functions`).
    pub tool_definition_tokens: usize,
    /// The counter's name.
    pub tokenizer: String,
    /// Characters of the messages (their text, as `Message::size` counts).
    pub chars: usize,
    /// Characters of tool output among them: tool messages and
    /// `tool_result` blocks, and in user text the results and environment
    /// blocks of agents that send them there (Cline, Roo Code).
    pub tool_chars: usize,
    /// Messages and tokens by role.
    pub roles: BTreeMap<String, RoleStats>,
    #[serde(skip)]
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_json().to_string())
    }
}

impl Stats {
    /// Empty figures counted with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        Stats {
            conversations: 0,
            messages: 0,
            tokens: 0,
            system_tokens: 0,
            tool_definition_tokens: 0,
            tokenizer: counter.name().to_string(),
            chars: 0,
            tool_chars: 0,
            roles: BTreeMap::new(),
            counter,
        }
    }

    /// Add one conversation.
    pub fn add(&mut self, c: &Conversation) {
        self.conversations += 1;
        let fixed = fixed_tokens(c, self.counter.as_ref());
        self.system_tokens += fixed.system;
        self.tool_definition_tokens += fixed.tools;
        self.tokens += fixed.total();
        for m in &c.messages {
            self.messages += 1;
            let t = count_message(self.counter.as_ref(), m);
            self.tokens += t;
            let e = self.roles.entry(m.role_str().to_string()).or_default();
            e.messages += 1;
            e.tokens += t;
            let size = m.size();
            self.chars += size;
            if m.is_tool_result() {
                self.tool_chars += if matches!(m.role(), Role::Tool | Role::Function) {
                    size
                } else {
                    m.tool_results()
                        .iter()
                        .map(|r| r.text.chars().count())
                        .sum()
                };
            } else if m.role() == Role::User {
                // Results sent back as user text (Cline, Roo Code) and the
                // environment blocks those agents add to every turn.
                let parts = text_parts(m);
                let env: usize = parts
                    .iter()
                    .flat_map(|(_, t)| {
                        environment_blocks(t)
                            .into_iter()
                            .map(|r| t[r].chars().count())
                    })
                    .sum();
                let results: usize = text_results(m)
                    .iter()
                    .filter_map(|r| part_text(m, r.part)?.get(r.body.clone()))
                    .map(|b| b.chars().count())
                    .sum();
                self.tool_chars += (env + results).min(size);
            }
        }
    }

    /// Tool output's share of the characters (0 when there are none).
    pub fn tool_output_share(&self) -> f64 {
        if self.chars == 0 {
            0.0
        } else {
            self.tool_chars as f64 / self.chars as f64
        }
    }

    /// The figures as the JSON `ctxpress stats --json` prints.
    pub fn to_json(&self) -> serde_json::Value {
        let roles: serde_json::Map<String, serde_json::Value> = self
            .roles
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    serde_json::json!({"messages": v.messages, "tokens": v.tokens}),
                )
            })
            .collect();
        serde_json::json!({
            "conversations": self.conversations,
            "messages": self.messages,
            "tokens": self.tokens,
            "system_tokens": self.system_tokens,
            "tool_definition_tokens": self.tool_definition_tokens,
            "tokenizer": self.tokenizer,
            "chars": self.chars,
            "tool_output_share": self.tool_output_share(),
            "roles": roles,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_roles_and_tool_output() {
        let c = Conversation::parse(
            r#"[{"role":"user","content":"list"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a.rs b.rs"}]"#,
        )
        .unwrap();
        let mut s = Stats::new(Arc::new(ctxpress_core::tokens::Heuristic));
        s.add(&c);
        s.add(&c);
        assert_eq!(s.conversations, 2);
        assert_eq!(s.messages, 6);
        assert_eq!(s.roles["tool"].messages, 2);
        assert_eq!(s.tool_chars, 18);
        assert!(s.tool_output_share() > 0.0 && s.tool_output_share() < 1.0);
        let j = s.to_json();
        assert_eq!(j["roles"]["user"]["messages"], 2);
        assert_eq!(j["tokenizer"], "heuristic");
    }

    #[test]
    fn results_and_environment_blocks_in_user_text_are_tool_output() {
        let c = Conversation::parse(
            r#"[{"role":"user","content":"<task>fix</task>"},{"role":"assistant","content":"<read_file><path>a.rs</path></read_file>"},{"role":"user","content":[{"type":"text","text":"[read_file for 'a.rs'] Result:"},{"type":"text","text":"fn a() {}"},{"type":"text","text":"<environment_details>x</environment_details>"}]}]"#,
        )
        .unwrap();
        let mut s = Stats::new(Arc::new(ctxpress_core::tokens::Heuristic));
        s.add(&c);
        assert_eq!(
            s.tool_chars,
            "fn a() {}".len() + "<environment_details>x</environment_details>".len()
        );
    }

    #[test]
    fn counts_a_top_level_system_and_tool_definitions_as_compress_does() {
        let c = Conversation::parse(
            r#"{"model":"m","system":"Be brief.","tools":[{"name":"ls","description":"List files","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"list"}]}"#,
        )
        .unwrap();
        let h = ctxpress_core::tokens::Heuristic;
        let mut s = Stats::new(Arc::new(h));
        s.add(&c);
        let fixed = fixed_tokens(&c, &h);
        assert!(fixed.system > 0 && fixed.tools > 0, "{fixed:?}");
        assert_eq!(
            (s.system_tokens, s.tool_definition_tokens),
            (fixed.system, fixed.tools)
        );
        let messages = count_message(&h, &c.messages[0]);
        assert_eq!(s.tokens, messages + fixed.total());
        assert_eq!(
            s.tokens,
            messages + ctxpress_budget::window::envelope_tokens(&c, &h),
            "what window::fit counts"
        );
        assert_eq!(
            s.roles["user"].tokens, messages,
            "not a message: in no role"
        );
        let j = s.to_json();
        assert_eq!(j["system_tokens"], fixed.system);
        assert_eq!(j["tool_definition_tokens"], fixed.tools);
    }
}
