//! Typed stage configuration: unknown fields are rejected with the closest known
//! name, and errors name the stage and the field.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::fmt;

/// A configuration error. `stage` is filled in by the pipeline builder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No strategy is registered under this name.
    #[error("{}unknown strategy `{name}`{}", at(*stage), did_you_mean(suggestion))]
    UnknownStrategy {
        /// Stage index.
        stage: Option<usize>,
        /// The name given.
        name: String,
        /// Closest registered name.
        suggestion: Option<String>,
    },
    /// A stage parameter the strategy does not have.
    #[error("{}{strategy}: unknown field `{field}`{}", at(*stage), did_you_mean(suggestion))]
    UnknownField {
        /// Stage index.
        stage: Option<usize>,
        /// Strategy name.
        strategy: String,
        /// The field given.
        field: String,
        /// Closest known field.
        suggestion: Option<String>,
    },
    /// A stage parameter with a bad value.
    #[error("{}{strategy}: field `{field}`: {message}", at(*stage))]
    InvalidField {
        /// Stage index.
        stage: Option<usize>,
        /// Strategy name.
        strategy: String,
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// No summarizer backend under this name.
    #[error("unknown summarizer backend `{name}`{}", did_you_mean(suggestion))]
    UnknownBackend {
        /// The name given.
        name: String,
        /// Closest registered name.
        suggestion: Option<String>,
    },
    /// No preset under this name.
    #[error("unknown preset `{name}`{}", did_you_mean(suggestion))]
    UnknownPreset {
        /// The name given.
        name: String,
        /// Closest preset name.
        suggestion: Option<String>,
    },
    /// Two registrations share a name.
    #[error("strategy `{0}` is registered twice")]
    DuplicateStrategy(String),
    /// Anything else wrong with a configuration (message says where).
    #[error("{0}")]
    Invalid(String),
}

fn at(stage: Option<usize>) -> String {
    stage.map(|i| format!("stages[{i}]: ")).unwrap_or_default()
}

fn did_you_mean(s: &Option<String>) -> String {
    s.as_ref()
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

impl ConfigError {
    /// Attach the stage index.
    pub fn at_stage(mut self, i: usize) -> Self {
        match &mut self {
            ConfigError::UnknownStrategy { stage, .. }
            | ConfigError::UnknownField { stage, .. }
            | ConfigError::InvalidField { stage, .. } => *stage = Some(i),
            ConfigError::Invalid(m) => *m = format!("stages[{i}]: {m}"),
            _ => {}
        }
        self
    }
}

/// The known name closest to `given`, if one is close enough to be a typo.
pub fn closest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let g = given.to_lowercase();
    known
        .into_iter()
        .map(|k| (strsim::damerau_levenshtein(&g, &k.to_lowercase()), k))
        .filter(|(d, k)| *d <= (k.len().max(given.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.to_string())
}

/// Deserialize a strategy's typed config from its stage parameters. Missing
/// fields take their defaults; unknown fields are errors naming the closest
/// known field. `T`'s default must serialize every field.
pub fn parse_params<T>(strategy: &str, params: &Value) -> Result<T, ConfigError>
where
    T: DeserializeOwned + Serialize + Default,
{
    let defaults = match serde_json::to_value(T::default()) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let given = match params {
        Value::Null => Map::new(),
        Value::Object(m) => m.clone(),
        other => {
            return Err(ConfigError::Invalid(format!(
                "{strategy}: parameters must be a table, found {}",
                kind(other)
            )));
        }
    };
    for k in given.keys() {
        if !defaults.contains_key(k) {
            return Err(ConfigError::UnknownField {
                stage: None,
                strategy: strategy.into(),
                field: k.clone(),
                suggestion: closest(k, defaults.keys().map(String::as_str)),
            });
        }
    }
    let mut merged = defaults.clone();
    for (k, v) in &given {
        merged.insert(k.clone(), v.clone());
    }
    serde_json::from_value(Value::Object(merged)).map_err(|e| {
        // Find the field to blame by trying each given field alone.
        let field = given
            .iter()
            .find(|(k, v)| {
                let mut one = defaults.clone();
                one.insert((*k).clone(), (*v).clone());
                serde_json::from_value::<T>(Value::Object(one)).is_err()
            })
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| "?".into());
        ConfigError::InvalidField {
            stage: None,
            strategy: strategy.into(),
            field,
            message: e.to_string(),
        }
    })
}

fn kind(v: &Value) -> impl fmt::Display {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Cfg {
        fuzzy: bool,
        threshold: f64,
    }

    #[test]
    fn unknown_field_suggests() {
        let e = parse_params::<Cfg>("dedup", &json!({"fuzy": true}))
            .unwrap_err()
            .at_stage(1);
        assert_eq!(
            e.to_string(),
            "stages[1]: dedup: unknown field `fuzy`; did you mean `fuzzy`?"
        );
    }

    #[test]
    fn invalid_field_is_named() {
        let e =
            parse_params::<Cfg>("dedup", &json!({"fuzzy": true, "threshold": "high"})).unwrap_err();
        assert!(e.to_string().contains("field `threshold`"), "{e}");
    }

    #[test]
    fn defaults_fill_in() {
        let c = parse_params::<Cfg>("dedup", &json!({"threshold": 0.5})).unwrap();
        assert_eq!(
            c,
            Cfg {
                fuzzy: false,
                threshold: 0.5
            }
        );
    }

    #[test]
    fn closest_rejects_far_names() {
        assert_eq!(
            closest("dedupe", ["dedup", "classifier"]),
            Some("dedup".into())
        );
        assert_eq!(closest("zzzzzzzz", ["dedup", "classifier"]), None);
    }
}
