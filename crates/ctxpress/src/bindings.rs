//! What the language bindings share (`ctxpress-py`, `ctxpress-node`): they
//! take and give JSON text and the same options, so the options' meaning,
//! the report's JSON and the violations' JSON are written once, here, and
//! a Python and a Node user see the same fields and the same errors.

use crate::{Conversation, PipelineConfig, Report};
use ctxpress_core::ConfigError;
use ctxpress_core::tokens::counter_named;
use serde_json::{Value, json};

/// The options a binding's `compress`, `Compressor` and `Session` take.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// A preset's name (`agent` when neither this nor `config` is given).
    pub preset: Option<&'a str>,
    /// A configuration's text (TOML or JSON).
    pub config: Option<&'a str>,
    /// The file `config` was read from: its errors then name it, with the
    /// line and column.
    pub config_name: Option<&'a str>,
    /// A token budget (`[window] budget`).
    pub budget: Option<usize>,
    /// The model's window in tokens (`[window] size`).
    pub window: Option<usize>,
    /// The token counter's name.
    pub tokenizer: Option<&'a str>,
    /// An `[llm]` table as JSON, applied over the configuration's.
    pub llm: Option<&'a str>,
}

impl Options<'_> {
    /// The pipeline configuration these options give, and its text (the
    /// preset's TOML for a preset).
    pub fn load(&self) -> Result<(PipelineConfig, String), ConfigError> {
        let (mut cfg, text) = match (self.preset, self.config) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Invalid(
                    "give a preset or a config, not both".into(),
                ));
            }
            (_, Some(text)) => (
                match self.config_name {
                    Some(name) => PipelineConfig::parse_file(name, text)?,
                    None => PipelineConfig::parse(text)?,
                },
                text.to_string(),
            ),
            (p, None) => {
                let name = p.unwrap_or("agent");
                let cfg = crate::preset(name)?;
                let toml = crate::PRESETS
                    .iter()
                    .find(|p| p.name == name)
                    .map_or(String::new(), |p| p.toml.to_string());
                (cfg, toml)
            }
        };
        if let Some(t) = self.tokenizer {
            counter_named(t).map_err(|e| ConfigError::Invalid(format!("tokenizer: {e}")))?;
            cfg.tokenizer = Some(t.to_string());
        }
        if self.budget.is_some() {
            cfg.window.budget = self.budget;
        }
        if self.window.is_some() {
            cfg.window.size = self.window;
        }
        cfg.window.validate()?;
        if let Some(l) = self.llm {
            let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(l) else {
                return Err(ConfigError::Invalid(
                    "llm: expected a table of [llm] settings (base_url, model, ...)".into(),
                ));
            };
            cfg.llm.get_or_insert_with(Default::default).extend(fields);
        }
        Ok((cfg, text))
    }
}

/// A run's report as the bindings give it (Python's `Result.report`, the
/// Node result's `report`).
pub fn report_json(r: &Report) -> Value {
    json!({
        "messages_before": r.messages_before,
        "messages_after": r.messages_after,
        "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after,
        "chars_before": r.chars_before,
        "chars_after": r.chars_after,
        "ratio": r.ratio(),
        "fits": r.budget.as_ref().map(|b| b.fits),
        "micros": r.micros as u64,
        "stages": r.stages,
        "budget": r.budget,
        "statistics": crate::statistics(r),
    })
}

/// The pairing and role violations of `c`: an array of objects with
/// `index`, `kind`, `detail` and `message`.
pub fn violations_json(c: &Conversation) -> Value {
    crate::validate(c)
        .iter()
        .map(|v| {
            json!({
                "index": v.index,
                "kind": v.kind,
                "detail": v.detail,
                "message": v.to_string(),
            })
        })
        .collect()
}

/// `c` as JSON text, in the layout it was read with.
pub fn write(c: &Conversation) -> String {
    let mut out = Vec::new();
    c.write_to(&mut out).expect("writing to a Vec cannot fail");
    // The parser took UTF-8 text and every writer emits UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_load_presets_configs_and_refuse_both() {
        let (cfg, text) = Options::default().load().unwrap();
        assert!(text.contains("stale_pruner"));
        assert!(cfg.window.budget.is_none());
        let o = Options {
            preset: Some("chat"),
            budget: Some(8000),
            tokenizer: Some("o200k_base"),
            ..Options::default()
        };
        let (cfg, _) = o.load().unwrap();
        assert_eq!(cfg.window.budget, Some(8000));
        assert_eq!(cfg.tokenizer.as_deref(), Some("o200k_base"));
        let both = Options {
            preset: Some("chat"),
            config: Some("version = 1"),
            ..Options::default()
        };
        assert!(both.load().unwrap_err().to_string().contains("not both"));
        let bad = Options {
            tokenizer: Some("nope"),
            ..Options::default()
        };
        assert!(
            bad.load()
                .unwrap_err()
                .to_string()
                .starts_with("tokenizer: ")
        );
        let llm = Options {
            llm: Some("[1]"),
            ..Options::default()
        };
        assert!(llm.load().unwrap_err().to_string().starts_with("llm: "));
    }
}
