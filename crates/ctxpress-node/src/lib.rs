//! The native half of the npm package `ctxpress` (Node-API, napi-rs).
//!
//! Like the Python extension (`crates/ctxpress-py`), everything here takes
//! and returns JSON text; the JavaScript half (`index.js`) turns objects into
//! text and back, so the output has the shape the caller gave. `compress`
//! runs on libuv's thread pool (an `AsyncTask`), so the JavaScript thread is
//! free and several compressions run in parallel.
//!
//! Errors cross as a plain `Error` whose message is `ctxpress:` followed by
//! a JSON object (`kind`, `message`, and `line`/`column` for input errors);
//! `index.js` rethrows it as `InputError`, `ConfigError`, `ArchiveError` or
//! `CtxpressError`.
//!
//! Beside this crate: `index.js` / `index.d.ts` (the JavaScript half),
//! `ai-sdk.js`, the Vercel AI SDK middleware `ctxpress/ai-sdk` (the prompt
//! becomes an OpenAI or Anthropic conversation with a `ctxpress_ref` per
//! message, is compressed, and is rebuilt from the original messages and
//! parts), and `test/`, the `node --test` suite `.ci/run` runs (API, corpus
//! round trip, threads, the middleware with the real `ai` package and its mock
//! model, types by `tsc`, README blocks, `npm pack` installed offline).

use ctxpress::core::tokens::counter_named;
use ctxpress::{Archive, Compressor, Conversation, PipelineConfig, Report};
use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Task};
use napi_derive::napi;
use serde_json::{Value, json};
use std::sync::Arc;

/// What went wrong, before it becomes a JavaScript error.
enum Fail {
    /// Bad input: what was wrong and, for text input, where.
    Input {
        message: String,
        line: usize,
        column: usize,
    },
    /// Bad configuration (with the "did you mean" text).
    Config(String),
    /// The archive failed, or could not restore what it was asked to.
    Archive(String),
    /// Anything else.
    Other(String),
}

impl From<Fail> for napi::Error {
    fn from(f: Fail) -> Self {
        let body = match f {
            Fail::Input {
                message,
                line,
                column,
            } => json!({"kind": "InputError", "message": message, "line": line, "column": column}),
            Fail::Config(m) => json!({"kind": "ConfigError", "message": m}),
            Fail::Archive(m) => json!({"kind": "ArchiveError", "message": m}),
            Fail::Other(m) => json!({"kind": "CtxpressError", "message": m}),
        };
        napi::Error::from_reason(format!("ctxpress:{body}"))
    }
}

type Res<T> = Result<T, Fail>;

/// Parse one conversation; `positions` says whether line and column mean
/// anything to the caller (they do for text it gave, not for text made from
/// its objects).
fn parse(text: &str, positions: bool) -> Res<Conversation> {
    Conversation::parse(text).map_err(|e| Fail::Input {
        message: if positions {
            e.to_string()
        } else {
            e.message.clone()
        },
        line: e.line,
        column: e.column,
    })
}

fn write(c: &Conversation) -> String {
    ctxpress::bindings::write(c)
}

/// The report as JSON text (the same fields as the Python `Result.report`).
fn report_json(r: &Report) -> String {
    ctxpress::bindings::report_json(r).to_string()
}

/// A store of originals: what `compress` archives and `expand` reads.
#[napi]
pub struct NativeArchive {
    inner: Arc<dyn Archive>,
    what: String,
}

#[napi]
impl NativeArchive {
    /// Originals kept in a SQLite file (created if missing), the same
    /// archive the CLI's `--archive` writes.
    #[napi(factory)]
    pub fn sqlite(path: String) -> napi::Result<Self> {
        match ctxpress::store::SqliteArchive::open(std::path::Path::new(&path)) {
            Ok(a) => Ok(NativeArchive {
                inner: Arc::new(a),
                what: format!("SqliteArchive({path:?})"),
            }),
            Err(e) => Err(Fail::Archive(format!("{path}: cannot open archive: {e}")).into()),
        }
    }

    /// Originals kept in memory for the life of this object.
    #[napi(factory)]
    pub fn memory() -> Self {
        NativeArchive {
            inner: Arc::new(ctxpress::MemoryArchive::default()),
            what: "MemoryArchive()".into(),
        }
    }

    /// `SqliteArchive("path")` or `MemoryArchive()`.
    #[napi]
    pub fn describe(&self) -> String {
        self.what.clone()
    }
}

/// A configured pipeline, parsed once and reused across calls.
#[napi]
pub struct NativeCompressor {
    shared: Arc<Shared>,
    config: String,
}

/// What a compression on another thread needs.
struct Shared {
    inner: Compressor,
    /// For pipelines with an LLM stage.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Shared {
    fn run(&self, text: &str, positions: bool) -> Res<(String, String)> {
        let mut conv = parse(text, positions)?;
        let r = match &self.runtime {
            Some(rt) => rt.block_on(self.inner.compress_async(&mut conv)),
            None => self.inner.compress(&mut conv),
        }
        .map_err(|e| match e {
            ctxpress::Error::Config(c) => Fail::Config(c.to_string()),
            ctxpress::Error::Archive(a) => Fail::Archive(a.to_string()),
            other => Fail::Other(other.to_string()),
        })?;
        Ok((write(&conv), report_json(&r)))
    }
}

/// One compression on libuv's thread pool.
pub struct CompressTask {
    shared: Arc<Shared>,
    text: String,
    positions: bool,
}

impl Task for CompressTask {
    type Output = (String, String);
    type JsValue = Vec<String>;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let text = std::mem::take(&mut self.text);
        Ok(self.shared.run(&text, self.positions)?)
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        Ok(vec![output.0, output.1])
    }
}

#[allow(clippy::too_many_arguments)]
fn load_config(
    preset: Option<&str>,
    config: Option<&str>,
    config_name: Option<&str>,
    budget: Option<u32>,
    window: Option<u32>,
    tokenizer: Option<&str>,
    llm: Option<&str>,
) -> Res<(PipelineConfig, String)> {
    ctxpress::bindings::Options {
        preset,
        config,
        config_name,
        budget: budget.map(|b| b as usize),
        window: window.map(|w| w as usize),
        tokenizer,
        llm,
    }
    .load()
    .map_err(|e| Fail::Config(e.to_string()))
}

#[napi]
impl NativeCompressor {
    /// Parse the configuration (a preset name, or TOML/JSON text read from
    /// `config_name` when given) and build the pipeline.
    #[napi(constructor)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        preset: Option<String>,
        config: Option<String>,
        config_name: Option<String>,
        budget: Option<u32>,
        window: Option<u32>,
        tokenizer: Option<String>,
        archive: Option<&NativeArchive>,
        llm: Option<String>,
    ) -> napi::Result<Self> {
        let (cfg, text) = load_config(
            preset.as_deref(),
            config.as_deref(),
            config_name.as_deref(),
            budget,
            window,
            tokenizer.as_deref(),
            llm.as_deref(),
        )?;
        let inner = Compressor::from_config(&cfg)
            .map_err(|e| Fail::Config(e.to_string()))?
            .with_archive(archive.map(|a| a.inner.clone()));
        let runtime = if inner.needs_async() {
            Some(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| Fail::Other(format!("starting the async runtime: {e}")))?,
            )
        } else {
            None
        };
        Ok(NativeCompressor {
            shared: Arc::new(Shared { inner, runtime }),
            config: text,
        })
    }

    /// Compress one conversation (JSON text) on this thread: `[output,
    /// report]`, both JSON text.
    #[napi]
    pub fn compress_sync(&self, text: String, positions: bool) -> napi::Result<Vec<String>> {
        let (out, report) = self.shared.run(&text, positions)?;
        Ok(vec![out, report])
    }

    /// Compress one conversation (JSON text) on libuv's thread pool.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn compress(&self, text: String, positions: bool) -> AsyncTask<CompressTask> {
        AsyncTask::new(CompressTask {
            shared: self.shared.clone(),
            text,
            positions,
        })
    }

    /// True when the pipeline calls an LLM.
    #[napi(getter)]
    pub fn needs_llm(&self) -> bool {
        self.shared.runtime.is_some()
    }

    /// The configuration in force, as TOML or JSON text.
    #[napi(getter)]
    pub fn config(&self) -> String {
        self.config.clone()
    }

    /// The window configuration, for display.
    #[napi]
    pub fn describe(&self) -> String {
        format!("{:?}", self.shared.inner.window())
    }
}

/// Restore the originals of a compressed conversation from `archive`:
/// `[restored text, JSON array of the positions it could not restore]`.
#[napi]
pub fn expand(text: String, archive: &NativeArchive, positions: bool) -> napi::Result<Vec<String>> {
    let c = parse(&text, positions)?;
    let e =
        ctxpress::expand(&c, archive.inner.as_ref()).map_err(|e| Fail::Archive(e.to_string()))?;
    let left = ctxpress::unrestored(&e);
    Ok(vec![write(&e), json!(left).to_string()])
}

/// The originals a recall handle stands for, as a JSON array of the
/// messages exactly as archived; `null` when `archive` does not hold it.
#[napi]
pub fn recall(handle: String, archive: &NativeArchive) -> napi::Result<Option<String>> {
    let Some(h) = ctxpress::Handle::parse(&handle) else {
        return Err(Fail::Input {
            message: format!(
                "{handle:?} is not a handle (`#h` and 10 hex digits, as in [summary#h7f3a2c91d0: ...])"
            ),
            line: 0,
            column: 0,
        }
        .into());
    };
    Ok(ctxpress::recall(archive.inner.as_ref(), &h)
        .map(|r| r.map(|r| r.to_json()))
        .map_err(|e| Fail::Archive(e.to_string()))?)
}

/// Pairing and role violations as JSON: an array of objects with `index`,
/// `kind`, `detail` and `message`.
#[napi]
pub fn validate(text: String, positions: bool) -> napi::Result<String> {
    let c = parse(&text, positions)?;
    Ok(ctxpress::bindings::violations_json(&c).to_string())
}

/// Messages and tokens by role and the tool-output share, as JSON.
#[napi]
pub fn stats(text: String, tokenizer: Option<String>, positions: bool) -> napi::Result<String> {
    let name = tokenizer.as_deref().unwrap_or("heuristic");
    let counter = counter_named(name).map_err(|e| Fail::Config(format!("tokenizer: {e}")))?;
    let mut s = ctxpress::Stats::new(counter);
    s.add(&parse(&text, positions)?);
    Ok(s.to_json().to_string())
}

/// The presets as JSON: an array of `{name, summary, config}`.
#[napi]
pub fn presets() -> String {
    let all: Vec<Value> = ctxpress::PRESETS
        .iter()
        .map(|p| json!({"name": p.name, "summary": p.summary, "config": p.toml}))
        .collect();
    Value::Array(all).to_string()
}

/// The registered strategies as JSON: an array of `{name, summary,
/// defaults, params, takes_llm}`.
#[napi]
pub fn strategies() -> napi::Result<String> {
    let all = ctxpress::core::registry::strategies().map_err(|e| Fail::Config(e.to_string()))?;
    let out: Vec<Value> = all
        .iter()
        .map(|f| {
            let params: serde_json::Map<String, Value> = f
                .params
                .iter()
                .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
                .collect();
            json!({
                "name": f.name,
                "summary": f.summary,
                "defaults": (f.default_config)(),
                "params": params,
                "takes_llm": f.takes_llm,
            })
        })
        .collect();
    Ok(Value::Array(out).to_string())
}

/// The crate's version (the package's).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
