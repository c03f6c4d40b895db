//! ctxpress: compress LLM conversation and agent histories so they fit a context
//! window while keeping what the model needs.
//!
//! This facade builds pipelines of the strategy crates from TOML/JSON configs
//! or presets, runs them with the core's invariant guard, and archives originals
//! so [`expand`] can restore the input. Each strategy crate is re-exported here;
//! those `pub use` lines are also what link their registrations in.
//!
//! ```
//! let cfg = ctxpress::preset("identity").unwrap();
//! let c = ctxpress::Compressor::from_config(&cfg).unwrap();
//! let mut conv = ctxpress::Conversation::parse(r#"[{"role":"user","content":"hi"}]"#).unwrap();
//! let report = c.compress(&mut conv).unwrap();
//! assert_eq!(report.messages_after, 1);
//! ```
//!
//! The budget's ladder: the rungs after a preset's stages are built from the
//! registry ([`LADDER`]), and [`Compressor`] runs `budget::window::fit` when a
//! window or budget is set. The README's Rust code blocks are doc tests of this
//! crate. Every crate is re-exported, and the modules that moved out of core at
//! their old paths too (`ctxpress::core::{text, secrets, dialect, traffic,
//! window, ledger}`).

pub mod bindings;
pub mod config;
pub mod presets;
pub mod recall;
pub mod restore;
pub mod session;
pub mod stats;

/// The README's Rust code blocks, compiled and run as doc tests (its shell
/// and TOML blocks are checked by the CLI's `readme` test).
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// docs/library.md's Rust code blocks (the library guide), compiled and run
/// as doc tests.
#[doc = include_str!("../../../docs/library.md")]
#[cfg(doctest)]
pub struct LibraryDoctests;

pub use config::{PipelineConfig, StageConfig};
pub use ctxpress_budget as budget;
pub use ctxpress_budget::{Limits, WindowConfig};
pub use ctxpress_core::handle::Handle;
pub use ctxpress_core::{
    Archive, BudgetReport, Conversation, MemoryArchive, Pipeline, Report, StageContext, expand,
    validate,
};
pub use ctxpress_dialect as dialect;
pub use ctxpress_text as text;

/// `ctxpress-core`, with the modules that were part of it before session 30
/// split it by concern (`text` and `secrets` are now `ctxpress-text`,
/// `dialect` and `traffic` `ctxpress-dialect`, `window` and `ledger`
/// `ctxpress-budget`) at their old paths, so `ctxpress::core::dialect::...`
/// keeps working. New code can name the crates ([`text`], [`dialect`],
/// [`budget`]).
///
/// Two more moves: `handle::{tag_markers, mark, handle_of}` are
/// `markers::...` now (the deprecated forwards below keep the old paths),
/// and `Conversation::tail_start` / `turn_starts` are methods of the trait
/// [`dialect::Turns`] (import it: `use ctxpress::dialect::Turns;`).
///
/// ```
/// // The paths from before the split still name the same items.
/// #![allow(deprecated)]
/// use ctxpress::core::dialect::{DialectTable, parse_shell};
/// use ctxpress::core::handle::{Handle, mark};
/// use ctxpress::core::ledger::Ledger;
/// use ctxpress::core::secrets::redact;
/// use ctxpress::core::text::message_ref;
/// use ctxpress::core::traffic::Traffic;
/// use ctxpress::core::window::{BudgetReport, fit};
/// use ctxpress::core::{Conversation, Limits, WindowConfig};
/// use ctxpress::dialect::Turns;
///
/// let conv = Conversation::parse(r#"[{"role":"user","content":"hi"}]"#).unwrap();
/// assert_eq!(conv.turn_starts(), vec![0]);
/// assert_eq!(redact("key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"), redact(&redact("key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789")));
/// ```
pub mod core {
    pub use ctxpress_budget::{Limits, WindowConfig, ledger, window};
    pub use ctxpress_core::*;
    pub use ctxpress_dialect as dialect;
    pub use ctxpress_dialect::traffic;
    pub use ctxpress_text as text;
    pub use ctxpress_text::secrets;

    /// `ctxpress_core::handle`, with forwards to what moved to
    /// `ctxpress_core::markers`.
    pub mod handle {
        pub use ctxpress_core::handle::*;
        use ctxpress_core::{Conversation, MessageId, TokenCounter};

        /// Moved: [`ctxpress_core::markers::tag_markers`].
        #[deprecated(since = "0.1.0", note = "moved to `core::markers::tag_markers`")]
        pub fn tag_markers(
            before: &Conversation,
            conv: &mut Conversation,
            counter: &dyn TokenCounter,
        ) -> usize {
            ctxpress_core::markers::tag_markers(before, conv, counter)
        }

        /// Moved: [`ctxpress_core::markers::mark`].
        #[deprecated(since = "0.1.0", note = "moved to `core::markers::mark`")]
        pub fn mark(
            conv: &mut Conversation,
            carrier: &MessageId,
            handle: Handle,
            stands_for: Vec<MessageId>,
        ) {
            ctxpress_core::markers::mark(conv, carrier, handle, stands_for)
        }

        /// Moved: [`ctxpress_core::markers::handle_of`].
        #[deprecated(since = "0.1.0", note = "moved to `core::markers::handle_of`")]
        pub fn handle_of(conv: &Conversation, ids: &[MessageId]) -> Handle {
            ctxpress_core::markers::handle_of(conv, ids)
        }
    }
}
pub use presets::{PRESETS, Preset, preset};
pub use recall::{Recalled, recall};
pub use restore::{looks_generated, unrestored};
pub use session::{Session, TurnReport};
pub use stats::Stats;

pub use ctxpress_classifier as classifier;
pub use ctxpress_compactor as compactor;
pub use ctxpress_dedup as dedup;
pub use ctxpress_llm as llm;
pub use ctxpress_stale_pruner as stale_pruner;
pub use ctxpress_store as store;
pub use ctxpress_summarizer as summarizer;
pub use ctxpress_tool_compressor as tool_compressor;

use ctxpress_budget::window::{EvictOldest, Rung, fit, ready};
use ctxpress_core::strategy::BuiltStrategy;
use ctxpress_core::{ConfigError, Strategy, TokenCounter};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Facade error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Archive failure.
    #[error(transparent)]
    Archive(#[from] ctxpress_core::ArchiveError),
    /// The pipeline has async stages; use `compress_async`.
    #[error("the pipeline has async stages (e.g. an LLM summarizer): use compress_async")]
    NeedsAsync,
}

/// The ladder's rungs after a preset's stages, in order of information lost:
/// `(name, stages as TOML)`, where `None` is [`EvictOldest`].
pub const LADDER: &[(&str, Option<&str>)] = &[
    // Old tool results summarized with no information check and no kept
    // recent results, a read's outline cut to 8 declarations (spec 004: a
    // 20k-token read becomes ~150 tokens). The recent tail stays.
    (
        "tool_results",
        Some(
            "[[stages]]\ntype = \"tool_compressor\"\nkeep_last = 0\nprotected_tail = 5\nmin_chars = 200\nmin_saving = 0.0\nchars_per_lost_term = 0\nkeep_unresolved_errors = false\ninputs = true\nmax_outline = 8\n",
        ),
    ),
    // Old assistant prose (code, JSON, keys and tracebacks stay verbatim).
    (
        "assistant_prose",
        Some(
            "[[stages]]\ntype = \"classifier\"\npreserve = [\"system\", \"developer\", \"user\", \"tool\"]\nrecency_window = 0\n[[stages]]\ntype = \"summarizer\"\nmerge_consecutive = false\n",
        ),
    ),
    // Old user prose (never the last user message: it is protected).
    (
        "user_prose",
        Some(
            "[[stages]]\ntype = \"classifier\"\npreserve = [\"system\", \"developer\", \"assistant\", \"tool\"]\nrecency_window = 0\n[[stages]]\ntype = \"summarizer\"\nmerge_consecutive = false\n",
        ),
    ),
    // The oldest whole exchanges into the archive, behind one note.
    (ctxpress_budget::window::EVICT, None),
    // Last: tool results inside the recent tail (spec 004 compresses those
    // too), oldest first; the protected messages themselves still stay.
    (
        "tail_tool_results",
        Some(
            "[[stages]]\ntype = \"tool_compressor\"\nkeep_last = 0\nprotected_tail = 0\nmin_chars = 200\nmin_saving = 0.0\nchars_per_lost_term = 0\nkeep_unresolved_errors = false\ninputs = true\nmax_outline = 8\n",
        ),
    ),
];

/// The ladder: [`LADDER`]'s rungs, summarizing through `llm` when given.
pub fn ladder(llm: Option<&Map<String, Value>>) -> Result<Vec<Rung>, ConfigError> {
    let mut out = Vec::new();
    for (name, stages) in LADDER {
        let Some(stages) = stages else {
            out.push(Rung::of(name, Box::new(EvictOldest)));
            continue;
        };
        let mut cfg = PipelineConfig::from_toml(&format!("version = 1\n{stages}"))?;
        cfg.llm = llm.cloned();
        out.push(Rung {
            name: (*name).to_string(),
            pipeline: cfg.build()?,
        });
    }
    Ok(out)
}

/// Spec 004's statistics of a run, from its stage counters and budget:
/// `tool_results_compressed`, `user_messages_compressed`,
/// `assistant_messages_compressed`, `display_data_deleted`,
/// `messages_protected` (ladder rungs included).
pub fn statistics(r: &Report) -> std::collections::BTreeMap<&'static str, u64> {
    let mut out = std::collections::BTreeMap::new();
    let strategy = |name: &str| name.rsplit(':').next().unwrap_or(name).to_string();
    for key in [
        "tool_results_compressed",
        "user_messages_compressed",
        "assistant_messages_compressed",
        "display_data_deleted",
        "messages_protected",
    ] {
        out.insert(key, 0u64);
    }
    for st in &r.stages {
        let c = &st.outcome.counters;
        let get = |k: &str| c.get(k).copied().unwrap_or(0);
        let add = |out: &mut std::collections::BTreeMap<&'static str, u64>, k, n| {
            *out.entry(k).or_default() += n;
        };
        match strategy(&st.name).as_str() {
            "tool_compressor" => add(
                &mut out,
                "tool_results_compressed",
                ["reads", "writes", "commands", "searches", "other"]
                    .iter()
                    .map(|k| get(k))
                    .sum(),
            ),
            "summarizer" => {
                add(&mut out, "tool_results_compressed", get("tool_results"));
                add(
                    &mut out,
                    "user_messages_compressed",
                    get("user_messages_compressed"),
                );
                add(
                    &mut out,
                    "assistant_messages_compressed",
                    get("assistant_messages_compressed"),
                );
            }
            "stale_pruner" => add(
                &mut out,
                "display_data_deleted",
                get("display_data_deleted"),
            ),
            _ => {}
        }
    }
    if let Some(b) = &r.budget {
        out.insert("messages_protected", b.protected_messages as u64);
    }
    out
}

/// A configured pipeline plus its run context, window and optional archive.
pub struct Compressor {
    pipeline: Pipeline,
    ctx: StageContext,
    window: WindowConfig,
    ladder: Vec<Rung>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor")
            .field("pipeline", &self.pipeline)
            .field("ctx", &self.ctx)
            .field("window", &self.window)
            .finish()
    }
}

impl Compressor {
    /// Build from a configuration.
    pub fn from_config(cfg: &PipelineConfig) -> Result<Self, ConfigError> {
        let mut ctx = StageContext::default();
        if let Some(t) = &cfg.tokenizer
            && let Some(c) = ctxpress_core::tokens::counter_by_name(t)
        {
            ctx.counter = c;
        }
        ctx.window = cfg.window.size;
        Ok(Compressor {
            pipeline: cfg.build()?,
            ctx,
            window: cfg.window.clone(),
            ladder: ladder(cfg.llm.as_ref().filter(|_| cfg.llm_enabled()))?,
        })
    }

    /// Build from a preset name.
    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        Self::from_config(&preset(name)?)
    }

    /// Start an empty pipeline to fill programmatically (no registry needed).
    pub fn builder() -> Builder {
        Builder {
            pipeline: Pipeline::default(),
            ctx: StageContext::default(),
        }
    }

    /// Target token count for the output (trigger = target = budget; with a
    /// window too, the lower of each). `None` keeps the configured one.
    pub fn with_budget(mut self, budget: Option<usize>) -> Self {
        if budget.is_some() {
            self.window.budget = budget;
        }
        self
    }

    /// The model's context window in tokens: compress above its trigger
    /// share, down to its target share. `None` keeps the configured one.
    pub fn with_window(mut self, window: Option<usize>) -> Self {
        if window.is_some() {
            self.window.size = window;
            self.ctx.window = window;
        }
        self
    }

    /// Replace the whole window configuration.
    pub fn with_window_config(mut self, window: WindowConfig) -> Result<Self, ConfigError> {
        window.validate()?;
        self.ctx.window = window.size;
        self.window = window;
        Ok(self)
    }

    /// The window configuration in force.
    pub fn window(&self) -> &WindowConfig {
        &self.window
    }

    /// Archive originals here, so `expand` can restore inputs.
    pub fn with_archive(mut self, archive: Option<Arc<dyn Archive>>) -> Self {
        self.ctx.archive = archive;
        self
    }

    /// Count tokens with this counter.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.ctx.counter = counter;
        self
    }

    /// The token counter in force.
    pub fn counter(&self) -> &Arc<dyn TokenCounter> {
        &self.ctx.counter
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// True when `compress_async` is required.
    pub fn needs_async(&self) -> bool {
        self.pipeline.needs_async()
            || (self.window.limits().is_some()
                && self.window.force_converge
                && self.ladder.iter().any(|r| r.pipeline.needs_async()))
    }

    /// Compress in place and archive the originals when an archive is set
    /// (when that fails, the error is returned and the conversation is left
    /// as it was). With a window or budget, the report's `budget` says
    /// whether it fits.
    /// A pipeline of sync stages runs through the async path without a
    /// runtime: every step is ready at once.
    pub fn compress(&self, conv: &mut Conversation) -> Result<Report, Error> {
        if self.needs_async() {
            return Err(Error::NeedsAsync);
        }
        ready(self.compress_async(conv)).ok_or(Error::NeedsAsync)?
    }

    /// Compress in place, awaiting async stages. On an error (the archive
    /// cannot be written) the conversation is left as it was.
    pub async fn compress_async(&self, conv: &mut Conversation) -> Result<Report, Error> {
        let input = conv.clone();
        let report = match self.window.limits() {
            Some(limits) => {
                fit(
                    conv,
                    &self.ctx,
                    &self.pipeline,
                    &self.ladder,
                    &self.window,
                    limits,
                )
                .await
            }
            None => self.pipeline.run_async(conv, &self.ctx).await,
        };
        if let Err(e) = self.archive(&input, conv) {
            // Its originals are archived nowhere: hand back the conversation
            // as it was, never one that lost them.
            *conv = input;
            return Err(e);
        }
        Ok(report)
    }

    fn archive(&self, input: &Conversation, output: &Conversation) -> Result<(), Error> {
        if let Some(a) = &self.ctx.archive {
            // Like `core::archive::archive`, with the conversation's id for the
            // archive's search index.
            let records = ctxpress_core::archive::records(input, output);
            if !records.is_empty() {
                a.put_for(input.id().as_deref(), &records)?;
            }
        }
        Ok(())
    }
}

/// Programmatic pipeline construction.
pub struct Builder {
    pipeline: Pipeline,
    ctx: StageContext,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("pipeline", &self.pipeline)
            .finish()
    }
}

impl Builder {
    /// Append a registered strategy by name with JSON parameters.
    pub fn stage(mut self, name: &str, params: serde_json::Value) -> Result<Self, ConfigError> {
        let i = self.pipeline.stages.len();
        let s = ctxpress_core::registry::build(name, &params).map_err(|e| e.at_stage(i))?;
        self.pipeline.stages.push(ctxpress_core::Stage {
            name: name.to_string(),
            strategy: s,
        });
        Ok(self)
    }

    /// Append a strategy value directly (no registry).
    pub fn strategy(mut self, s: Box<dyn Strategy>) -> Self {
        let name = s.name().to_string();
        self.pipeline.stages.push(ctxpress_core::Stage {
            name,
            strategy: BuiltStrategy::Sync(s),
        });
        self
    }

    /// Finish. The window is the default (none); set one with
    /// [`Compressor::with_budget`] or [`Compressor::with_window`].
    pub fn build(self) -> Result<Compressor, ConfigError> {
        Ok(Compressor {
            pipeline: self.pipeline,
            ctx: self.ctx,
            window: WindowConfig::default(),
            ladder: ladder(None)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strategies the facade must link in; extend as strategy crates land.
    const EXPECTED: &[&str] = &[
        "classifier",
        "compactor",
        "dedup",
        "stale_pruner",
        "summarizer",
        "tool_compressor",
    ];
    /// Summarizer backends the facade must link in.
    const BACKENDS: &[&str] = &["anthropic", "extractive", "openai"];

    #[test]
    fn every_expected_strategy_is_registered() {
        let names: Vec<&str> = ctxpress_core::registry::strategies()
            .unwrap()
            .iter()
            .map(|f| f.name)
            .collect();
        for e in EXPECTED {
            assert!(
                names.contains(e),
                "strategy `{e}` is not registered; registered: {names:?}"
            );
        }
    }

    /// Every registered strategy documents exactly the parameters of its
    /// default config, one non-empty line each, so `strategies --show` and
    /// the docs cannot drift from the config structs.
    #[test]
    fn every_strategy_documents_exactly_its_parameters() {
        for f in ctxpress_core::registry::strategies().unwrap() {
            let defaults = (f.default_config)();
            let keys: Vec<&str> = defaults
                .as_object()
                .unwrap_or_else(|| panic!("{}: the default config is not a table", f.name))
                .keys()
                .map(String::as_str)
                .collect();
            let documented: Vec<&str> = f.params.iter().map(|(n, _)| *n).collect();
            assert_eq!(
                documented, keys,
                "{}: the documented parameters (left) must be the default config's keys, in order",
                f.name
            );
            for (n, d) in f.params {
                assert!(
                    !d.trim().is_empty() && !d.contains('\n'),
                    "{}: `{n}` needs one non-empty doc line",
                    f.name
                );
            }
        }
    }

    /// `takes_llm` is declared exactly by the strategies with an `llm` and a
    /// `backend` parameter, which the `[llm]` table fills in.
    #[test]
    fn takes_llm_is_declared_by_the_strategies_with_an_llm_parameter() {
        for f in ctxpress_core::registry::strategies().unwrap() {
            let d = (f.default_config)();
            assert_eq!(
                f.takes_llm,
                d.get("llm").is_some(),
                "{}: takes_llm disagrees with its `llm` parameter",
                f.name
            );
            if f.takes_llm {
                assert!(d.get("backend").is_some(), "{}: no `backend`", f.name);
            }
        }
    }

    #[test]
    fn every_expected_backend_is_registered() {
        let names: Vec<&str> = ctxpress_core::summarize::backends()
            .iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, BACKENDS, "registered backends");
    }

    #[test]
    fn llm_table_switches_summarizing_stages_to_the_openai_backend() {
        let cfg = PipelineConfig::from_toml(
            "version = 1\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n[[stages]]\ntype = \"classifier\"\n[[stages]]\ntype = \"summarizer\"\n",
        )
        .unwrap();
        let p = cfg.build().unwrap();
        assert!(
            p.needs_async(),
            "the summarizer must become an async LLM stage"
        );
        let local =
            PipelineConfig::from_toml("version = 1\n[[stages]]\ntype = \"summarizer\"\n").unwrap();
        assert!(!local.build().unwrap().needs_async());
        // A table without an endpoint waits for one (--llm-url sets it).
        let waiting = PipelineConfig::from_toml(
            "version = 1\n[llm]\nmodel = \"m\"\n[[stages]]\ntype = \"summarizer\"\n",
        )
        .unwrap();
        assert!(!waiting.llm_enabled());
        assert!(!waiting.build().unwrap().needs_async());
        let c = Compressor::from_config(&waiting)
            .unwrap()
            .with_budget(Some(10));
        assert!(!c.needs_async(), "the ladder's summarizers stay local too");
    }

    #[test]
    fn hybrid_reports_spec_004_statistics() {
        let prose = |i: usize| {
            format!(
                "Turn {i}: we looked at how the queue hands work from the primary loop to the \
                 secondary loop and decided to keep the lock-free ring buffer for now, because \
                 it measured well under load and the alternative needs a rewrite of the scheduler."
            )
        };
        let mut msgs = vec![serde_json::json!({"role": "system", "content": "be brief"})];
        for i in 0..12 {
            msgs.push(serde_json::json!({"role": "user", "content": prose(i)}));
            msgs.push(serde_json::json!({"role": "assistant", "content": prose(i + 100)}));
        }
        msgs.insert(
            3,
            serde_json::json!({"role": "display_only_data", "content": "progress bar"}),
        );
        let doc = serde_json::Value::Array(msgs).to_string();
        let c = Compressor::preset("hybrid")
            .unwrap()
            .with_window(Some(2000));
        let mut conv = Conversation::parse(&doc).unwrap();
        let r = c.compress(&mut conv).unwrap();
        let s = statistics(&r);
        assert!(r.budget.as_ref().unwrap().fits, "{:?}", r.budget);
        assert_eq!(s["display_data_deleted"], 1, "{s:?}");
        assert_eq!(s["messages_protected"], 6, "system, last 5: {s:?}");
        assert!(s["user_messages_compressed"] > 0, "{s:?}");
        assert!(s["assistant_messages_compressed"] > 0, "{s:?}");
    }

    #[test]
    fn every_preset_builds() {
        for p in PRESETS {
            let cfg = preset(p.name).unwrap_or_else(|e| panic!("preset {}: {e}", p.name));
            cfg.build()
                .unwrap_or_else(|e| panic!("preset {}: {e}", p.name));
        }
    }

    #[test]
    fn config_errors_name_stage_and_suggest() {
        let e = PipelineConfig::from_toml("version = 1\n[[stages]]\ntype = \"identity_not\"\n")
            .unwrap()
            .build()
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("stages[0]: unknown strategy `identity_not`"),
            "{e}"
        );
        let e = PipelineConfig::from_toml("version = 1\nstagse = []\n").unwrap_err();
        assert!(e.to_string().contains("did you mean `stages`?"), "{e}");
        let e = PipelineConfig::from_toml("version = 2\n").unwrap_err();
        assert!(e.to_string().contains("version"), "{e}");
        let e = preset("identiy").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown preset `identiy`; did you mean `identity`?"
        );
    }

    #[test]
    fn agent_preset_summarizes_old_tool_results_and_expands_back() {
        // Files that differ on every line (no duplicates for dedup) and hold
        // no term found only there (the information check lets them go).
        let source = |f: usize| -> String {
            (1..=80)
                .map(|i| {
                    if i % 10 == 1 {
                        format!("{i}\texport function handler(req) {{\n")
                    } else {
                        format!("{i}\t  const value = compute(req) + {};\n", f * 100 + i)
                    }
                })
                .collect()
        };
        let mut msgs = vec![serde_json::json!({"role": "user", "content": "fix the handlers"})];
        for i in 0..14 {
            msgs.push(serde_json::json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": format!("c{i}"), "type": "function", "function": {"name": "Read",
                 "arguments": serde_json::json!({"file_path": format!("/r/src/f{i}.js")}).to_string()}}]}));
            msgs.push(serde_json::json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": source(i)}));
        }
        for i in 0..3 {
            msgs.push(serde_json::json!({"role": "user", "content": format!("next {i}")}));
            msgs.push(serde_json::json!({"role": "assistant", "content": format!("ok {i}")}));
        }
        let doc = serde_json::json!({"id": "s", "messages": msgs}).to_string();
        let arch = Arc::new(MemoryArchive::new());
        let c = Compressor::preset("agent")
            .unwrap()
            .with_archive(Some(arch.clone()));
        let mut conv = Conversation::parse(&doc).unwrap();
        let report = c.compress(&mut conv).unwrap();
        let tc = report
            .stages
            .iter()
            .find(|s| s.name == "tool_compressor")
            .expect("the agent preset runs tool_compressor");
        // 14 reads, the last 10 kept: four summarized.
        assert_eq!(tc.outcome.counters.get("reads"), Some(&4));
        assert!(conv.size() < Conversation::parse(&doc).unwrap().size());
        assert!(ctxpress_core::validate(&conv).is_empty());
        assert_eq!(expand(&conv, arch.as_ref()).unwrap().to_json_string(), doc);
    }

    #[test]
    fn identity_round_trips_and_archives_nothing() {
        let doc = r#"{"id": "x", "messages": [{"role": "user", "content": "hi"}]}"#;
        let arch = Arc::new(MemoryArchive::new());
        let c = Compressor::preset("identity")
            .unwrap()
            .with_archive(Some(arch.clone()));
        let mut conv = Conversation::parse(doc).unwrap();
        c.compress(&mut conv).unwrap();
        assert_eq!(conv.to_json_string(), doc);
        assert!(arch.is_empty());
    }
}
