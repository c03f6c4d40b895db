//! The properties the fuzz targets check, shared with the regression test in
//! `tests/tests/it/fuzz_regressions.rs` (which includes this file), so that an
//! input kept from a fuzzing run is checked the same way by `cargo test`.
//!
//! Each check panics (a finding) when an invariant breaks; input that is not
//! a conversation is fine as long as it is refused with an error.

use ctxpress::core::archive::{MemoryArchive, expand};
use ctxpress::core::validate::introduces_violations;
use ctxpress::{Compressor, Conversation, validate};
use std::sync::Arc;

/// The presets a pipeline input is run through (the first byte picks one,
/// so a corpus entry exercises all of them over a run).
pub const PRESETS: &[&str] = &["identity", "chat", "cce", "agent", "hybrid", "compact"];

/// Bytes → parse → a preset (with a small budget every other time) →
/// serialize → parse → expand: no panic, no new violation, never more
/// characters, and expand gives back the input text.
pub fn pipeline(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    roundtrip(text, pick);
}

/// [`pipeline`] on a text: `pick` chooses the preset and whether a budget is set.
pub fn roundtrip(text: &str, pick: u8) {
    let Ok(input) = Conversation::parse(text) else {
        return;
    };
    // An identity run reproduces the input byte for byte.
    assert_eq!(
        input.to_json_string(),
        text,
        "parse → serialize changed the input"
    );
    let preset = PRESETS[usize::from(pick) % PRESETS.len()];
    let budget = (pick & 0x80 != 0).then_some(200 + usize::from(pick & 0x3f) * 40);
    let archive = Arc::new(MemoryArchive::new());
    let c = Compressor::preset(preset)
        .expect("a shipped preset builds")
        .with_budget(budget)
        .with_archive(Some(archive.clone()));
    let mut out = input.clone();
    let report = match c.compress(&mut out) {
        Ok(r) => r,
        // A budget that cannot be met is reported, not a finding.
        Err(_) => return,
    };
    assert!(
        !introduces_violations(&validate(&input), &validate(&out)),
        "{preset}: new violations {:?}",
        validate(&out)
    );
    assert!(
        report.chars_after <= report.chars_before,
        "{preset}: longer"
    );
    let written = out.to_json_string();
    let reparsed = Conversation::parse(&written).expect("the output parses");
    let back = expand(&reparsed, archive.as_ref()).expect("expand");
    assert_eq!(back.to_json_string(), text, "{preset}: expand differs");
}

/// Text rules on arbitrary UTF-8: the classifier, the extractive summarizer
/// and the secret detector never panic; redaction is idempotent, removes
/// every secret it found and never grows a text without secrets.
pub fn text(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ctxpress::classifier::classify(s);
    let budget = 1 + s.len() / 3;
    let summary = ctxpress::summarizer::summarize(s, budget);
    assert!(
        summary.chars().count() <= s.chars().count().max(budget) + 64,
        "summary longer than its text and budget"
    );
    let redacted = ctxpress::core::secrets::redact(s);
    assert_eq!(
        ctxpress::core::secrets::redact(&redacted),
        redacted,
        "redact is not idempotent"
    );
    assert!(
        ctxpress::core::secrets::find_secrets(&redacted).is_empty(),
        "a secret is left after redaction: {redacted:?}"
    );
}

/// Config parsing: any text is accepted or refused with an error; what is
/// accepted builds or is refused with an error.
pub fn config(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = ctxpress::PipelineConfig::parse(s) {
        let _ = cfg.build();
    }
}

/// A structure-aware session: what `structured` generates.
pub mod session {
    use arbitrary::Arbitrary;
    use serde_json::{Value, json};

    const TOOLS: &[&str] = &[
        "Read",
        "Edit",
        "Write",
        "Bash",
        "Grep",
        "Glob",
        "TodoWrite",
        "read_file",
        "str_replace_editor",
        "shell",
        "apply_patch",
        "run_terminal_cmd",
    ];
    const KEYS: &[&str] = &[
        "file_path",
        "path",
        "command",
        "content",
        "old_string",
        "new_string",
        "pattern",
        "cmd",
        "todos",
    ];
    const PATHS: &[&str] = &[
        "/r/src/main.rs",
        "/r/src/lib.rs",
        "src/a.py",
        "README.md",
        "/r/x",
    ];

    /// One step of a session.
    #[derive(Arbitrary, Debug)]
    pub enum Step {
        /// A system message.
        System(String),
        /// A user message.
        User(String),
        /// Assistant prose.
        Assistant(String),
        /// A tool call, answered (or not) by a result.
        Call {
            /// Index into the tool names.
            tool: u8,
            /// Arguments: (index into the keys, value; a small index picks a path).
            args: Vec<(u8, u8, String)>,
            /// Whether a result follows.
            answered: bool,
            /// The result text.
            result: String,
            /// Marked as an error.
            error: bool,
            /// Prose before the call.
            prose: Option<String>,
        },
    }

    /// A session in one of the two dialects.
    #[derive(Arbitrary, Debug)]
    pub struct Session {
        /// Anthropic content blocks instead of OpenAI messages.
        pub anthropic: bool,
        /// Preset and budget choice.
        pub pick: u8,
        /// The steps.
        pub steps: Vec<Step>,
    }

    fn args(a: &[(u8, u8, String)]) -> Value {
        let mut m = serde_json::Map::new();
        for (k, v, text) in a {
            let key = KEYS[usize::from(*k) % KEYS.len()];
            let value = if *v < 128 {
                PATHS[usize::from(*v) % PATHS.len()].to_string()
            } else {
                text.clone()
            };
            m.insert(key.to_string(), Value::String(value));
        }
        Value::Object(m)
    }

    impl Session {
        /// The session as a JSON document.
        pub fn render(&self) -> String {
            let mut msgs = Vec::new();
            for (i, s) in self.steps.iter().enumerate() {
                match s {
                    Step::System(t) => msgs.push(json!({"role": "system", "content": t})),
                    Step::User(t) => msgs.push(json!({"role": "user", "content": t})),
                    Step::Assistant(t) => msgs.push(json!({"role": "assistant", "content": t})),
                    Step::Call {
                        tool,
                        args: a,
                        answered,
                        result,
                        error,
                        prose,
                    } => {
                        let id = format!("call_{i}");
                        let name = TOOLS[usize::from(*tool) % TOOLS.len()];
                        if self.anthropic {
                            let mut blocks = Vec::new();
                            if let Some(p) = prose {
                                blocks.push(json!({"type": "text", "text": p}));
                            }
                            blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": args(a)}));
                            msgs.push(json!({"role": "assistant", "content": blocks}));
                            if *answered {
                                msgs.push(
                                    json!({"role": "user", "content": [{"type": "tool_result",
                                    "tool_use_id": id, "content": result, "is_error": error}]}),
                                );
                            }
                        } else {
                            msgs.push(
                                json!({"role": "assistant", "content": prose, "tool_calls": [{
                                "id": id, "type": "function", "function": {"name": name,
                                "arguments": args(a).to_string()}}]}),
                            );
                            if *answered {
                                msgs.push(
                                    json!({"role": "tool", "tool_call_id": id, "content": result}),
                                );
                            }
                        }
                    }
                }
            }
            json!({"messages": msgs}).to_string()
        }
    }
}
