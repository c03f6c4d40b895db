//! Presets: named pipeline configurations shipped with ctxpress.

use crate::config::PipelineConfig;
use ctxpress_core::ConfigError;
use ctxpress_core::config::closest;

/// A named, shipped configuration.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// Name used with `--preset`.
    pub name: &'static str,
    /// One-line description.
    pub summary: &'static str,
    /// The configuration, as TOML.
    pub toml: &'static str,
}

/// Every preset, in the order `ctxpress presets` lists them.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "identity",
        summary: "parse and serialize only (the speed floor)",
        toml: include_str!("../presets/identity.toml"),
    },
    Preset {
        name: "chat",
        summary: "chat histories: exact dedup, then extractive summaries of old prose",
        toml: include_str!("../presets/chat.toml"),
    },
    Preset {
        name: "cce",
        summary: "spec 000 pipeline: exact dedup, the 11 preservation rules, merged extractive summaries of old prose and prose-like tool results",
        toml: include_str!("../presets/cce.toml"),
    },
    Preset {
        name: "agent",
        summary: "agent trajectories: stale-op pruning, fuzzy dedup with deltas, tool-result summaries, prose summaries",
        toml: include_str!("../presets/agent.toml"),
    },
    Preset {
        name: "hybrid",
        summary: "spec 004: over 70% of a 128k window, down to 40%; display-only messages dropped, tool results by kind, old user/assistant messages summarized (LLM when configured)",
        toml: include_str!("../presets/hybrid.toml"),
    },
    Preset {
        name: "compact",
        summary: "spec 003 compaction: everything before the recent tail folded into archived summary batches, behind one [Context Summary] message with the session ledger",
        toml: include_str!("../presets/compact.toml"),
    },
];

/// The preset named `name`, parsed.
pub fn preset(name: &str) -> Result<PipelineConfig, ConfigError> {
    match PRESETS.iter().find(|p| p.name == name) {
        Some(p) => PipelineConfig::from_toml(p.toml),
        None => Err(ConfigError::UnknownPreset {
            name: name.into(),
            suggestion: closest(name, PRESETS.iter().map(|p| p.name)),
        }),
    }
}
