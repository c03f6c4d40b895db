//! The strategy registry: strategy crates submit a [`StrategyFactory`] with
//! `inventory::submit!`, and pipelines look them up by name.
//!
//! A registration gives the name, a one-line summary, the default config, the
//! builder, one doc line per parameter (exactly the default config's keys: a
//! facade test checks every registration; `ctxpress strategies --show` prints
//! them) and `takes_llm` (whether the facade fills its `llm` / `backend` from
//! the pipeline's `[llm]` table).
//! [`register_strategy!`](crate::register_strategy) submits one; [`strategies`]
//! lists them sorted by name and fails when two share one.

use crate::config::{ConfigError, closest};
use crate::strategy::BuiltStrategy;
use serde_json::Value;

/// Registration of a strategy.
pub struct StrategyFactory {
    /// Unique name used in configs, e.g. `dedup`.
    pub name: &'static str,
    /// One-line description.
    pub summary: &'static str,
    /// The default parameters, as JSON (every field present).
    pub default_config: fn() -> Value,
    /// Build the strategy from its parameters (unknown fields rejected).
    pub build: fn(&Value) -> Result<BuiltStrategy, ConfigError>,
    /// One line of documentation per parameter, `(name, doc)`: exactly the
    /// keys of [`default_config`](Self::default_config) (a facade test checks
    /// every registration). `ctxpress strategies --show` prints them.
    pub params: &'static [(&'static str, &'static str)],
    /// True when the strategy takes the pipeline's `[llm]` table: it has an
    /// `llm` parameter (the backend's settings) and a `backend` one, which
    /// the facade fills in (`llm` from the table, `backend = "openai"`) for a
    /// stage that sets neither, once the table names an endpoint.
    pub takes_llm: bool,
}

impl StrategyFactory {
    /// The documentation line of parameter `name`, if it has one.
    pub fn param_doc(&self, name: &str) -> Option<&'static str> {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| *d)
    }
}

inventory::collect!(StrategyFactory);

/// Every registered strategy, sorted by name. Fails when two share a name.
pub fn strategies() -> Result<Vec<&'static StrategyFactory>, ConfigError> {
    let mut v: Vec<&'static StrategyFactory> =
        inventory::iter::<StrategyFactory>.into_iter().collect();
    v.sort_by_key(|f| f.name);
    if let Some(w) = v.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(ConfigError::DuplicateStrategy(w[0].name.to_string()));
    }
    Ok(v)
}

/// The factory registered under `name`.
pub fn find(name: &str) -> Result<&'static StrategyFactory, ConfigError> {
    let all = strategies()?;
    all.iter()
        .find(|f| f.name == name)
        .copied()
        .ok_or_else(|| ConfigError::UnknownStrategy {
            stage: None,
            name: name.to_string(),
            suggestion: closest(name, all.iter().map(|f| f.name)),
        })
}

/// Build the strategy registered under `name` from its parameters.
pub fn build(name: &str, params: &Value) -> Result<BuiltStrategy, ConfigError> {
    (find(name)?.build)(params)
}

/// Register a sync strategy whose config type is `$cfg` (Default + serde),
/// which is built by `$ctor(cfg) -> Result<S, ConfigError>` and documents
/// each parameter (every key of the default config) with one line. Such a
/// strategy does not take the pipeline's `[llm]` table.
///
/// ```ignore
/// ctxpress_core::register_strategy!(
///     "dedup",
///     "exact and fuzzy dedup",
///     DedupConfig,
///     |c| Ok(Dedup::new(c)),
///     params: &[("fuzzy", "Line-level Jaccard near-duplicates."), ...]
/// );
/// ```
#[macro_export]
macro_rules! register_strategy {
    ($name:literal, $summary:literal, $cfg:ty, $ctor:expr, params: $params:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::StrategyFactory {
                name: $name,
                summary: $summary,
                default_config: || $crate::serde_json::to_value(<$cfg as ::core::default::Default>::default()).unwrap_or_default(),
                build: |params| {
                    let cfg: $cfg = $crate::config::parse_params($name, params)?;
                    let built: ::core::result::Result<_, $crate::ConfigError> = ($ctor)(cfg);
                    Ok($crate::strategy::BuiltStrategy::Sync(Box::new(built?)))
                },
                params: $params,
                takes_llm: false,
            }
        }
    };
}
