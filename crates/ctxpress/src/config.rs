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
use ctxpress_core::tokens::{COUNTERS, counter_by_name};
use ctxpress_core::{ConfigError, Pipeline, Stage, WindowConfig, registry};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// One stage of a configuration. Its `Debug` hides credentials (see
/// [`PipelineConfig`]).
#[derive(Clone, PartialEq)]
pub struct StageConfig {
    /// Strategy name.
    pub kind: String,
    /// False to keep the stage in the file but not run it.
    pub enabled: bool,
    /// The strategy's parameters.
    pub params: Map<String, Value>,
}

/// A whole pipeline configuration. Its `Debug` output hides credentials:
/// values of keys that name a key, token, secret or password (`api_key`,
/// `Authorization`...) show as `"***"`, and user information in URLs as
/// `***@`, at any depth of the `[llm]`, `[serve]` and stage tables.
#[derive(Clone, PartialEq, Default)]
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

/// The file as serde reads it; [`PipelineConfig::from_value`] then checks
/// what needs more than its types (the version, the tokenizer's name, the
/// `[window]` table's fields with suggestions, each stage's `type`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ConfigFile {
    #[serde(deserialize_with = "version_one")]
    version: Option<u32>,
    description: Option<String>,
    tokenizer: Option<String>,
    llm: Option<Map<String, Value>>,
    stages: Vec<StageFile>,
    window: Option<Map<String, Value>>,
    serve: Option<Map<String, Value>>,
}

/// One `[[stages]]` table: `type`, `enabled`, and the strategy's parameters
/// (checked by the strategy when the pipeline is built).
#[derive(Debug, Serialize, Deserialize)]
#[serde(expecting = "a table")]
struct StageFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(flatten)]
    params: Map<String, Value>,
}

fn yes() -> bool {
    true
}

/// `version` must be 1.
fn version_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = Value::deserialize(d)?;
    match v.as_u64() {
        Some(1) => Ok(Some(1)),
        _ => Err(D::Error::custom(format!(
            "unsupported config version {v}; this build reads version 1"
        ))),
    }
}

/// A serde error in `file`, at its path: ``stages[2]: `type`: expected a
/// string, found 3``.
fn file_error(file: &Value, e: serde_path_to_error::Error<serde_json::Error>) -> ConfigError {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = e.path().iter().collect();
    let mut at = String::new();
    let mut field = None;
    let mut found = Some(file);
    for (i, s) in segments.iter().enumerate() {
        match s {
            Segment::Map { key } => {
                found = found.and_then(|v| v.get(key));
                if i + 1 == segments.len() {
                    field = Some(key.as_str());
                } else {
                    if !at.is_empty() {
                        at.push('.');
                    }
                    at.push_str(key);
                }
            }
            Segment::Seq { index } => {
                found = found.and_then(|v| v.get(index));
                at.push_str(&format!("[{index}]"));
            }
            Segment::Enum { .. } | Segment::Unknown => {
                found = None;
                at.push('?');
            }
        }
    }
    let mut message = e.inner().to_string();
    // `invalid type: number, expected a string` (arbitrary-precision numbers
    // are not named): say what was found, as written.
    if let (Some(rest), Some(v)) = (message.strip_prefix("invalid type: "), found)
        && let Some((_, expected)) = rest.rsplit_once(", expected ")
    {
        let mut shown = v.to_string();
        if shown.chars().count() > 60 {
            shown = shown.chars().take(57).collect::<String>() + "...";
        }
        message = format!("expected {expected}, found {shown}");
    }
    // Config files say tables and arrays, not maps and sequences.
    let message = message
        .replace("expected a map", "expected a table")
        .replace(
            "expected a sequence",
            "expected an array of tables ([[stages]])",
        );
    let place = match (at.is_empty(), field) {
        (true, None) => String::new(),
        (true, Some(f)) => format!("`{f}`: "),
        (false, None) => format!("{at}: "),
        (false, Some(f)) => format!("{at}: `{f}`: "),
    };
    ConfigError::Invalid(format!("{place}{message}"))
}

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

    /// Read from an already parsed value. Errors name the field (and the
    /// stage), and an unknown top-level field gets the closest known one.
    pub fn from_value(v: &Value) -> Result<Self, ConfigError> {
        let top = v
            .as_object()
            .ok_or_else(|| ConfigError::Invalid("a pipeline config must be a table".into()))?;
        // The known fields are the typed file's; checked here to suggest one.
        let known = match serde_json::to_value(ConfigFile::default()) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        if let Some(k) = top.keys().find(|k| !known.contains_key(*k)) {
            let hint = closest(k, known.keys().map(String::as_str))
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            return Err(ConfigError::Invalid(format!(
                "unknown top-level field `{k}`{hint}"
            )));
        }
        let file: ConfigFile = serde_path_to_error::deserialize(v).map_err(|e| file_error(v, e))?;
        let version = file
            .version
            .ok_or_else(|| ConfigError::Invalid("missing `version = 1`".into()))?;
        if let Some(s) = file
            .tokenizer
            .as_deref()
            .filter(|s| counter_by_name(s).is_none())
        {
            let hint = closest(s, COUNTERS.iter().copied())
                .map(|c| format!("; did you mean `{c}`?"))
                .unwrap_or_default();
            return Err(ConfigError::Invalid(format!(
                "`tokenizer`: expected one of {}, found {}{hint}",
                COUNTERS.join(", "),
                Value::String(s.to_string())
            )));
        }
        let window: WindowConfig = match file.window {
            None => WindowConfig::default(),
            Some(w) => ctxpress_core::parse_params("window", &Value::Object(w))?,
        };
        window.validate()?;
        let stages = file
            .stages
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let kind = s.kind.ok_or_else(|| {
                    ConfigError::Invalid(format!("stages[{i}]: missing `type` (the strategy name)"))
                })?;
                Ok(StageConfig {
                    kind,
                    enabled: s.enabled,
                    params: s.params,
                })
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(PipelineConfig {
            version,
            description: file.description,
            tokenizer: file.tokenizer,
            llm: file.llm,
            stages,
            window,
            serve: file.serve,
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

/// True for a table key whose value is a credential.
fn secret_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    [
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "authorization",
        "credential",
    ]
    .iter()
    .any(|w| k.contains(w))
        && !k.ends_with("_env")
}

/// `v` with credentials hidden (see [`PipelineConfig`]).
fn redacted(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(redacted_map(m)),
        Value::Array(a) => Value::Array(a.iter().map(redacted).collect()),
        Value::String(s) => Value::String(ctxpress_core::secrets::mask_url_credentials(s)),
        other => other.clone(),
    }
}

fn redacted_map(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(_) | Value::Number(_) if secret_key(k) => Value::String("***".into()),
                _ => redacted(v),
            };
            (k.clone(), v)
        })
        .collect()
}

impl std::fmt::Debug for StageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageConfig")
            .field("kind", &self.kind)
            .field("enabled", &self.enabled)
            .field("params", &redacted_map(&self.params))
            .finish()
    }
}

impl std::fmt::Debug for PipelineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineConfig")
            .field("version", &self.version)
            .field("description", &self.description)
            .field("tokenizer", &self.tokenizer)
            .field("llm", &self.llm.as_ref().map(redacted_map))
            .field("stages", &self.stages)
            .field("window", &self.window)
            .field("serve", &self.serve.as_ref().map(redacted_map))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_credentials() {
        let cfg = PipelineConfig::from_toml(
            r#"
version = 1
[llm]
base_url = "http://user:pa55word@llm.example/v1"
api_key = "sk-live-0123456789abcdef"
api_key_env = "MY_KEY"
model = "m"
[[stages]]
type = "summarizer"
llm = { base_url = "http://h/v1", api_key = "stage-secret-9876" }
"#,
        )
        .unwrap();
        let d = format!("{cfg:?}");
        for secret in ["pa55word", "sk-live-0123456789abcdef", "stage-secret-9876"] {
            assert!(!d.contains(secret), "{secret} in {d}");
        }
        assert!(d.contains("MY_KEY") && d.contains("***"), "{d}");
    }

    fn err(toml: &str) -> String {
        PipelineConfig::from_toml(toml).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_field_and_the_stage() {
        let cases = [
            (
                "stagse = []\n",
                "unknown top-level field `stagse`; did you mean `stages`?",
            ),
            ("", "missing `version = 1`"),
            (
                "version = 2\n",
                "`version`: unsupported config version 2; this build reads version 1",
            ),
            (
                "version = \"1\"\n",
                "`version`: unsupported config version \"1\"; this build reads version 1",
            ),
            (
                "version = 1\ntokenizer = \"o200k_bse\"\n",
                "`tokenizer`: expected one of heuristic, o200k_base, cl100k_base, found \"o200k_bse\"; did you mean `o200k_base`?",
            ),
            (
                "version = 1\ntokenizer = \"gpt\"\n",
                "`tokenizer`: expected one of heuristic, o200k_base, cl100k_base, found \"gpt\"",
            ),
            (
                "version = 1\ntokenizer = 5\n",
                "`tokenizer`: expected a string, found 5",
            ),
            (
                "version = 1\ndescription = 5\n",
                "`description`: expected a string, found 5",
            ),
            (
                "version = 1\nllm = \"x\"\n",
                "`llm`: expected a table, found \"x\"",
            ),
            (
                "version = 1\nserve = 3\n",
                "`serve`: expected a table, found 3",
            ),
            (
                "version = 1\nwindow = 3\n",
                "`window`: expected a table, found 3",
            ),
            (
                "version = 1\n[window]\nsise = 3\n",
                "window: unknown field `sise`; did you mean `size`?",
            ),
            (
                "version = 1\nstages = 3\n",
                "`stages`: expected an array of tables ([[stages]]), found 3",
            ),
            (
                "version = 1\nstages = [3]\n",
                "stages[0]: expected a table, found 3",
            ),
            (
                "version = 1\n[[stages]]\ntype = \"dedup\"\n[[stages]]\nfuzzy = true\n",
                "stages[1]: missing `type` (the strategy name)",
            ),
            (
                "version = 1\n[[stages]]\ntype = 3\n",
                "stages[0]: `type`: expected a string, found 3",
            ),
            (
                "version = 1\n[[stages]]\ntype = \"dedup\"\nenabled = \"no\"\n",
                "stages[0]: `enabled`: expected a boolean, found \"no\"",
            ),
        ];
        for (toml, want) in cases {
            assert_eq!(err(toml), want, "{toml}");
        }
        assert_eq!(
            PipelineConfig::from_json("[1]").unwrap_err().to_string(),
            "a pipeline config must be a table"
        );
    }

    #[test]
    fn stages_keep_their_parameters_and_numbers() {
        let c = PipelineConfig::from_json(
            r#"{"version": 1, "description": "d", "tokenizer": "o200k_base",
                "stages": [{"type": "dedup", "enabled": false, "threshold": 0.85,
                            "min_chars": 12345678901234567890}],
                "window": {"size": 1000}, "serve": {"listen": "x"}}"#,
        )
        .unwrap();
        assert_eq!(c.version, 1);
        assert_eq!(c.description.as_deref(), Some("d"));
        assert_eq!(c.tokenizer.as_deref(), Some("o200k_base"));
        assert_eq!(c.stages.len(), 1);
        let s = &c.stages[0];
        assert_eq!((s.kind.as_str(), s.enabled), ("dedup", false));
        let p = Value::Object(s.params.clone()).to_string();
        assert_eq!(p, r#"{"threshold":0.85,"min_chars":12345678901234567890}"#);
        assert_eq!(c.window.size, Some(1000));
        assert!(c.serve.is_some() && c.llm.is_none());
    }
}
