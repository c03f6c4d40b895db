//! Where user turns start and where the protected tail begins, counting
//! tool results sent back as user text ([`is_text_result_carrier`]) as
//! results, not as turns: the message model alone cannot tell them apart,
//! so these live here as the [`Turns`] extension of `Conversation`.

use crate::text_results::is_text_result_carrier;
use ctxpress_core::conversation::Conversation;
use ctxpress_core::message::{Message, Role};

/// Turn boundaries of a conversation (import the trait to call them as
/// methods: `conv.tail_start(2)`).
pub trait Turns {
    /// Index where the protected tail starts: the `n`-th last user or
    /// assistant message (tool-result carriers, and user messages that only
    /// carry results as text, do not count). `messages.len()` when `n` is 0.
    fn tail_start(&self, n: usize) -> usize;

    /// Indices of messages that open a user turn (user messages that are not
    /// tool-result carriers, in blocks or as text).
    fn turn_starts(&self) -> Vec<usize>;
}

impl Turns for Conversation {
    fn tail_start(&self, n: usize) -> usize {
        if n == 0 {
            return self.messages.len();
        }
        let mut count = 0;
        for (i, m) in self.messages.iter().enumerate().rev() {
            if matches!(m.role(), Role::User | Role::Assistant) && !carries_results(m) {
                count += 1;
                if count == n {
                    return i;
                }
            }
        }
        0
    }

    fn turn_starts(&self) -> Vec<usize> {
        self.messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role() == Role::User && !carries_results(m))
            .map(|(i, _)| i)
            .collect()
    }
}

/// Whether `m` only sends tool results back, in blocks or as text: such a
/// message neither opens a turn nor counts toward the tail.
pub fn carries_results(m: &Message) -> bool {
    m.is_tool_result_carrier() || is_text_result_carrier(m)
}

#[cfg(test)]
mod tests {
    use super::Turns;
    use ctxpress_core::Conversation;

    #[test]
    fn tool_results_do_not_start_turns() {
        let c = Conversation::parse(r#"{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]},{"role":"assistant","content":"done"}]}"#).unwrap();
        assert_eq!(c.tail_start(2), 1);
        assert_eq!(c.tail_start(0), 4);
        assert_eq!(c.turn_starts(), vec![0]);
        // Cline's results as user text are results too.
        let t = Conversation::parse(r#"[{"role":"user","content":"fix it"},{"role":"assistant","content":"<read_file>\n<path>a.py</path>\n</read_file>"},{"role":"user","content":"[read_file for 'a.py'] Result:\nprint(1)"},{"role":"assistant","content":"done"}]"#).unwrap();
        assert_eq!(t.turn_starts(), vec![0]);
        assert_eq!(t.tail_start(2), 1);
    }
}
