//! Pipeline configuration from TOML or JSON.
//!
//! ```toml
//! version = 1
//! [llm]                      # optional: summarizing stages use this endpoint
//!                            # (only once `base_url` is set, e.g. by --llm-url)
//! base_url = "http://127.0.0.1:8080/v1"
//! model = "smollm2"
//! [[stages]]
//! type = "dedup"
//! fuzzy = true
//! [[stages]]
//! type = "summarizer"
//! enabled = false
//! [window]                   # optional: when to compress and how far
//! size = 128000              # the model's window; trigger/target are shares of it
//! trigger = 0.70
//! target = 0.40
//! ```

use ctxpress_core::config::closest;
use ctxpress_core::{ConfigError, Pipeline, Stage, WindowConfig, registry};
use serde_json::{Map, Value};

/// One stage of a configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct StageConfig {
    /// Strategy name.
    pub kind: String,
    /// False to keep the stage in the file but not run it.
    pub enabled: bool,
    /// The strategy's parameters.
    pub params: Map<String, Value>,
}

/// A whole pipeline configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PipelineConfig {
    /// Format version (1).
    pub version: u32,
    /// Optional description.
    pub description: Option<String>,
    /// Token counter name (`heuristic`, `o200k_base`, `cl100k_base`).
    pub tokenizer: Option<String>,
    /// LLM endpoint for stages that summarize, passed to their `llm` parameter.
    pub llm: Option<Map<String, Value>>,
    /// The stages, in order.
    pub stages: Vec<StageConfig>,
    /// When to compress and how far (window, trigger, target, budget).
    pub window: WindowConfig,
    /// The `[serve]` table: settings of `ctxpress serve` (read by the
    /// proxy, which checks its fields).
    pub serve: Option<Map<String, Value>>,
}

const TOP_KEYS: &[&str] = &[
    "version",
    "description",
    "tokenizer",
    "llm",
    "stages",
    "window",
    "serve",
];

impl PipelineConfig {
    /// Parse TOML.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let v: toml::Value = toml::from_str(text)
            .map_err(|e| ConfigError::Invalid(format!("invalid TOML: {}", e.message().trim())))?;
        let v = serde_json::to_value(v).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Self::from_value(&v)
    }

    /// Parse JSON.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| ConfigError::Invalid(format!("invalid JSON: {e}")))?;
        Self::from_value(&v)
    }

    /// Parse TOML or JSON, by the first non-blank character.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        if text.trim_start().starts_with('{') {
            Self::from_json(text)
        } else {
            Self::from_toml(text)
        }
    }

    /// Read from an already parsed value.
    pub fn from_value(v: &Value) -> Result<Self, ConfigError> {
        let top = v
            .as_object()
            .ok_or_else(|| ConfigError::Invalid("a pipeline config must be a table".into()))?;
        for k in top.keys() {
            if !TOP_KEYS.contains(&k.as_str()) {
                let hint = closest(k, TOP_KEYS.iter().copied())
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(ConfigError::Invalid(format!(
                    "unknown top-level field `{k}`{hint}"
                )));
            }
        }
        let version = match top.get("version") {
            Some(Value::Number(n)) if n.as_u64() == Some(1) => 1,
            Some(other) => {
                return Err(ConfigError::Invalid(format!(
                    "unsupported config version {other}; this build reads version 1"
                )));
            }
            None => return Err(ConfigError::Invalid("missing `version = 1`".into())),
        };
        let description = top
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string);
        let tokenizer = match top.get("tokenizer") {
            None => None,
            Some(Value::String(s)) if ctxpress_core::tokens::counter_by_name(s).is_some() => {
                Some(s.clone())
            }
            Some(other) => {
                return Err(ConfigError::Invalid(format!(
                    "`tokenizer`: expected one of heuristic, o200k_base, cl100k_base, found {other}"
                )));
            }
        };
        let llm = match top.get("llm") {
            None => None,
            Some(Value::Object(m)) => Some(m.clone()),
            Some(_) => return Err(ConfigError::Invalid("`llm` must be a table".into())),
        };
        let window: WindowConfig = match top.get("window") {
            None => WindowConfig::default(),
            Some(v @ Value::Object(_)) => ctxpress_core::parse_params("window", v)?,
            Some(_) => return Err(ConfigError::Invalid("`window` must be a table".into())),
        };
        window.validate()?;
        let mut stages = Vec::new();
        match top.get("stages") {
            None => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    stages.push(stage_config(i, item)?);
                }
            }
            Some(_) => {
                return Err(ConfigError::Invalid(
                    "`stages` must be an array of tables ([[stages]])".into(),
                ));
            }
        }
        let serve = match top.get("serve") {
            None => None,
            Some(Value::Object(m)) => Some(m.clone()),
            Some(_) => return Err(ConfigError::Invalid("`serve` must be a table".into())),
        };
        Ok(PipelineConfig {
            version,
            description,
            tokenizer,
            llm,
            stages,
            window,
            serve,
        })
    }

    /// Build the pipeline: every enabled stage looked up in the registry, its
    /// parameters checked. Errors name the stage index and field.
    pub fn build(&self) -> Result<Pipeline, ConfigError> {
        let mut out = Vec::new();
        for (i, s) in self.stages.iter().enumerate() {
            let factory = registry::find(&s.kind).map_err(|e| e.at_stage(i))?;
            // A disabled stage is built too, so it cannot hide a typo.
            let strategy = (factory.build)(&Value::Object(self.params_of(s, factory)))
                .map_err(|e| e.at_stage(i))?;
            if s.enabled {
                out.push(Stage {
                    name: s.kind.clone(),
                    strategy,
                });
            }
        }
        Ok(Pipeline::new(out))
    }

    /// True when the `[llm]` table names an endpoint (`base_url`, which
    /// `--llm-url` sets): only then do summarizing stages call a model. A
    /// table without one (a preset's prompt settings, say) waits for it.
    pub fn llm_enabled(&self) -> bool {
        self.llm
            .as_ref()
            .is_some_and(|l| l.get("base_url").is_some_and(|u| !u.is_null()))
    }

    /// A stage's parameters with the pipeline's `[llm]` table applied to stages
    /// whose registration takes it (`takes_llm`) and that did not set their
    /// own `llm`, when the table names an endpoint.
    fn params_of(
        &self,
        s: &StageConfig,
        factory: &registry::StrategyFactory,
    ) -> Map<String, Value> {
        let mut p = s.params.clone();
        if let Some(llm) = self.llm.as_ref().filter(|_| self.llm_enabled())
            && factory.takes_llm
            && !p.contains_key("llm")
        {
            p.insert("llm".into(), Value::Object(llm.clone()));
            if !p.contains_key("backend") {
                p.insert("backend".into(), Value::String("openai".into()));
            }
        }
        p
    }

    /// Serialize back to TOML (for `ctxpress presets --show`).
    pub fn to_toml(&self) -> String {
        let mut top = Map::new();
        top.insert("version".into(), Value::from(self.version));
        if let Some(d) = &self.description {
            top.insert("description".into(), Value::String(d.clone()));
        }
        if let Some(t) = &self.tokenizer {
            top.insert("tokenizer".into(), Value::String(t.clone()));
        }
        if let Some(l) = &self.llm {
            top.insert("llm".into(), Value::Object(l.clone()));
        }
        let stages: Vec<Value> = self
            .stages
            .iter()
            .map(|s| {
                let mut m = Map::new();
                m.insert("type".into(), Value::String(s.kind.clone()));
                if !s.enabled {
                    m.insert("enabled".into(), Value::Bool(false));
                }
                m.extend(s.params.clone());
                Value::Object(m)
            })
            .collect();
        top.insert("stages".into(), Value::Array(stages));
        if self.window != WindowConfig::default()
            && let Ok(Value::Object(mut w)) = serde_json::to_value(&self.window)
        {
            w.retain(|_, v| !v.is_null());
            top.insert("window".into(), Value::Object(w));
        }
        if let Some(v) = &self.serve {
            top.insert("serve".into(), Value::Object(v.clone()));
        }
        toml::to_string(&Value::Object(top)).unwrap_or_default()
    }
}

fn stage_config(i: usize, item: &Value) -> Result<StageConfig, ConfigError> {
    let m = item
        .as_object()
        .ok_or_else(|| ConfigError::Invalid(format!("stages[{i}]: expected a table")))?;
    let kind = match m.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ConfigError::Invalid(format!(
                "stages[{i}]: `type` must be a string"
            )));
        }
        None => {
            return Err(ConfigError::Invalid(format!(
                "stages[{i}]: missing `type` (the strategy name)"
            )));
        }
    };
    let enabled = match m.get("enabled") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(ConfigError::Invalid(format!(
                "stages[{i}]: `enabled` must be true or false"
            )));
        }
    };
    let mut params = m.clone();
    params.shift_remove("type");
    params.shift_remove("enabled");
    Ok(StageConfig {
        kind,
        enabled,
        params,
    })
}
