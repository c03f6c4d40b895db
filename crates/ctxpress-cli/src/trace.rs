//! `ctxpress compress --trace`: one line per input message telling what the
//! classifier decided, by which rule, and what became of the message, read
//! from the annotations the stages left on the conversation.
//!
//! ```text
//! # in.jsonl:3 (session-7): 12 -> 9 messages
//! 0    m0-1a2b3c4d  system     preserve    preserved_role  kept
//! 4    m4-9f8e7d6c  assistant  compress    compressible    summarized
//! 5    m5-0a1b2c3d  assistant  compress    compressible    merged into summary-1 (2 messages)
//! 6    call_7       tool       dedup       duplicate       dedup reference to call_9
//! ```

use ctxpress::Conversation;
use ctxpress::core::markers::{Written, written};
use ctxpress::core::{Decision, DecisionRule, Message, MessageId};
use std::collections::HashMap;
use std::fmt::Write as _;

/// The input messages of one conversation, taken before it is compressed.
#[derive(Debug, Clone)]
pub struct Trace {
    before: Vec<Message>,
}

/// What became of one input message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Written unchanged.
    Kept,
    /// Replaced by a summary (`[summary...`) in place.
    Summarized,
    /// Code-split: prose summarized, fences kept.
    CodeSplit,
    /// Replaced by a reference to the kept copy (`[cce:dup of ...]`).
    DedupReference(MessageId),
    /// Changed otherwise (a tool-result summary, an edit made shorter, ...).
    Changed,
    /// Merged, with others, into the new message with this id.
    MergedInto(MessageId, usize),
    /// Dropped from the output.
    Removed,
}

impl std::fmt::Display for Fate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fate::Kept => f.write_str("kept"),
            Fate::Summarized => f.write_str("summarized"),
            Fate::CodeSplit => f.write_str("code-split"),
            Fate::DedupReference(k) => write!(f, "dedup reference to {}", k.as_str()),
            Fate::Changed => f.write_str("changed"),
            Fate::MergedInto(id, n) => write!(f, "merged into {} ({n} messages)", id.as_str()),
            Fate::Removed => f.write_str("removed"),
        }
    }
}

fn snake<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".into(),
    }
}

/// The decision and rule of a message as written by the classifier (`-`
/// when it did not run on it).
pub fn decision_of(conv: &Conversation, id: &MessageId) -> (String, String) {
    match conv.ann(id).and_then(|a| a.decision) {
        Some((d, r)) => (snake::<Decision>(&d), snake::<DecisionRule>(&r)),
        None => ("-".into(), "-".into()),
    }
}

fn starts_summary(m: &Message) -> bool {
    let lead = |t: &str| written(t) == Some(Written::Summary);
    lead(&m.text()) || m.tool_results().iter().any(|r| lead(&r.text))
}

impl Trace {
    /// Remember the input messages of `conv` (cheap: messages are shared).
    pub fn start(conv: &Conversation) -> Self {
        Trace {
            before: conv.messages.clone(),
        }
    }

    /// The fate of every input message, in input order, given the
    /// compressed conversation.
    pub fn fates(&self, after: &Conversation) -> Vec<Fate> {
        let now: HashMap<&MessageId, &Message> =
            after.messages.iter().map(|m| (m.id(), m)).collect();
        let mut merged: HashMap<&MessageId, (&MessageId, usize)> = HashMap::new();
        for m in &after.messages {
            if let Some(a) = after.ann(m.id()) {
                for r in &a.replaces {
                    if r != m.id() {
                        merged.insert(r, (m.id(), a.replaces.len()));
                    }
                }
            }
        }
        self.before
            .iter()
            .map(|m| {
                let ann = after.ann(m.id());
                match now.get(m.id()) {
                    Some(n) if Message::same(m, n) || m.fields() == n.fields() => Fate::Kept,
                    Some(n) => {
                        if let Some(d) = ann.and_then(|a| a.dup.as_ref()) {
                            Fate::DedupReference(d.keep.clone())
                        } else if starts_summary(n) {
                            match ann.and_then(|a| a.decision) {
                                Some((Decision::CodeSplit, _)) => Fate::CodeSplit,
                                _ => Fate::Summarized,
                            }
                        } else {
                            Fate::Changed
                        }
                    }
                    None => match merged.get(m.id()) {
                        Some((id, n)) => Fate::MergedInto((*id).clone(), *n),
                        None => Fate::Removed,
                    },
                }
            })
            .collect()
    }

    /// The trace of one conversation: a `# label: N -> M messages` header
    /// then one tab-separated line per input message: index, id, role,
    /// decision, rule, fate.
    pub fn render(&self, after: &Conversation, label: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# {label}: {} -> {} messages",
            self.before.len(),
            after.messages.len()
        );
        for (i, (m, fate)) in self.before.iter().zip(self.fates(after)).enumerate() {
            let (d, r) = decision_of(after, m.id());
            let role = match m.role_str() {
                "" => "-",
                s => s,
            };
            let _ = writeln!(
                out,
                "{i}\t{}\t{}\t{d}\t{r}\t{fate}",
                crate::io::safe(m.id().as_str()),
                crate::io::safe(role)
            );
        }
        out
    }

    /// Write the trace of `after` to stderr, labelled with the input's name,
    /// the conversation's line and its id.
    pub fn print(&self, after: &Conversation, input: &str, line: impl std::fmt::Display) {
        let id = after.id().map(|i| format!(" ({i})")).unwrap_or_default();
        let label = format!("{input}:{line}{id}");
        eprint!("{}", self.render(after, &crate::io::safe(&label)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress::Compressor;

    const PROSE: &str = "The deployment failed because the healthCheck endpoint timed out after 30 seconds. \
We traced it to the connection_pool being exhausted under load. Increasing the pool size fixed it. \
Remember that the staging cluster uses a different config file than production does.";

    #[test]
    fn every_fate_and_decision() {
        let other = PROSE.replace("deployment", "rollout");
        let doc = serde_json::json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": PROSE},
            {"role": "assistant", "content": other},
            {"role": "assistant", "content": other.replace("rollout", "release")},
            {"role": "user", "content": PROSE},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "and now?"},
            {"role": "assistant", "content": "done"},
        ]);
        let mut conv = Conversation::parse(&doc.to_string()).expect("parses");
        let trace = Trace::start(&conv);
        Compressor::preset("cce")
            .expect("preset")
            .compress(&mut conv)
            .expect("runs");
        let fates = trace.fates(&conv);
        assert_eq!(fates[0], Fate::Kept);
        // The first copy of PROSE became a reference to the recent one.
        assert!(matches!(&fates[1], Fate::DedupReference(k) if k == trace.before[4].id()));
        assert!(matches!(&fates[2], Fate::MergedInto(_, 2)), "{fates:?}");
        assert_eq!(fates[2], fates[3]);
        assert!(fates[4..].iter().all(|f| *f == Fate::Kept), "{fates:?}");
        let text = trace.render(&conv, "t.json");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# t.json: 8 -> 7 messages");
        assert_eq!(lines.len(), 9);
        assert!(
            lines[1].ends_with("\tsystem\tpreserve\tpreserved_role\tkept"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("\tuser\tdedup\tduplicate\tdedup reference to "),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].contains("\tassistant\tcompress\tcompressible\tmerged into "),
            "{}",
            lines[3]
        );
        assert!(lines[5].contains("\trecency_window\tkept"), "{}", lines[5]);
    }

    #[test]
    fn summarized_removed_and_unclassified() {
        let doc = serde_json::json!([
            {"role": "user", "content": PROSE},
            {"role": "assistant", "content": "x"},
        ]);
        let mut conv = Conversation::parse(&doc.to_string()).expect("parses");
        let trace = Trace::start(&conv);
        let first = conv.messages[0].id().clone();
        conv.messages[0].set_text("[summary: short]");
        conv.messages.pop();
        assert_eq!(trace.fates(&conv), vec![Fate::Summarized, Fate::Removed]);
        assert_eq!(
            decision_of(&conv, &first),
            ("-".to_string(), "-".to_string())
        );
    }
}
