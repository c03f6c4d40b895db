//! Typed parameters of the `dedup` stage.

use ctxpress_core::ConfigError;
use serde::{Deserialize, Serialize};

/// Parameters of the `dedup` stage. Missing fields take their defaults; unknown
/// fields are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DedupConfig {
    /// Minimum content length (chars) for a text to take part at all.
    pub min_chars: usize,
    /// Exact dedup (djb2 grouping confirmed by full comparison).
    pub exact: bool,
    /// Fuzzy dedup: line-level Jaccard near-duplicates.
    pub fuzzy: bool,
    /// Jaccard similarity at or above which two texts are near-duplicates.
    pub threshold: f64,
    /// Write near-duplicates as a reference plus a compact line diff.
    pub delta: bool,
    /// Lowest Jaccard similarity at which a delta reference is tried (delta
    /// loses nothing, so it may go below `threshold`).
    pub delta_threshold: f64,
    /// Most changed lines (`-` plus `+`) a delta reference may carry.
    pub delta_max_lines: usize,
    /// With `delta`, a near-duplicate whose diff is over `delta_max_lines`
    /// still becomes a plain `near-dup` reference (the lines that differ are
    /// then only in the archive). `false` keeps such a text as it is, so no
    /// reference says "~99% match" over differences the model cannot see.
    pub near_without_diff: bool,
    /// The last this many messages are never replaced; a copy inside them is
    /// the preferred keep target.
    pub recency_window: usize,
    /// Marker prefix of references, as in `[cce:dup of ...]`.
    pub prefix: String,
    /// Roles never replaced besides `system` and `developer`, which always are.
    pub preserve: Vec<String>,
    /// Longest posting list of one fingerprint line (most recent entries kept),
    /// so a very common line cannot make candidate generation quadratic.
    pub max_postings: usize,
    /// Most candidates one text is compared with.
    pub max_candidates: usize,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            min_chars: 200,
            exact: true,
            fuzzy: false,
            threshold: 0.85,
            delta: false,
            delta_threshold: 0.5,
            delta_max_lines: 40,
            near_without_diff: true,
            recency_window: 4,
            prefix: "cce".into(),
            preserve: Vec::new(),
            max_postings: 64,
            max_candidates: 128,
        }
    }
}

fn invalid(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::InvalidField {
        stage: None,
        strategy: "dedup".into(),
        field: field.into(),
        message: message.into(),
    }
}

impl DedupConfig {
    /// Check value ranges that serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("threshold", self.threshold),
            ("delta_threshold", self.delta_threshold),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(invalid(name, format!("must be in (0, 1], got {v}")));
            }
        }
        if self.prefix.is_empty() || self.prefix.contains([']', '\n', ':']) {
            return Err(invalid(
                "prefix",
                "must be non-empty and contain no `]`, `:` or newline",
            ));
        }
        if self.max_postings == 0 {
            return Err(invalid("max_postings", "must be at least 1"));
        }
        if self.max_candidates == 0 {
            return Err(invalid("max_candidates", "must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_core::parse_params;
    use serde_json::json;

    #[test]
    fn defaults_match_the_issue() {
        let c: DedupConfig = parse_params("dedup", &json!(null)).unwrap();
        assert_eq!(c.min_chars, 200);
        assert!(c.exact && !c.fuzzy && !c.delta);
        assert_eq!(c.threshold, 0.85);
        assert_eq!(c.recency_window, 4);
        assert_eq!(c.prefix, "cce");
        c.validate().unwrap();
    }

    #[test]
    fn unknown_and_bad_fields_are_rejected() {
        let e = parse_params::<DedupConfig>("dedup", &json!({"treshold": 0.9})).unwrap_err();
        assert!(e.to_string().contains("did you mean `threshold`"), "{e}");
        let c: DedupConfig = parse_params("dedup", &json!({"threshold": 1.5})).unwrap();
        let e = c.validate().unwrap_err();
        assert!(e.to_string().contains("threshold"), "{e}");
        let c: DedupConfig = parse_params("dedup", &json!({"prefix": "a]b"})).unwrap();
        assert!(c.validate().is_err());
    }
}
