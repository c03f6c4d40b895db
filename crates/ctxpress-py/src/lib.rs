//! `ctxpress._native`: the Rust half of the Python package `ctxpress`.
//!
//! Everything here takes and returns JSON text; the Python half
//! (`python/ctxpress/__init__.py`) turns dicts into text and back, so the
//! output has the shape and types the caller gave. The interpreter lock is
//! released while Rust works, so Python threads compress in parallel.
//! Errors are raised as the exception classes of `ctxpress._errors`.
//!
//! Exposed: `Compressor` (its config parsed once; `compress_many` on scoped
//! threads), `Session` (the facade's `Session` behind a mutex: one
//! conversation's turns, the report of each as JSON), `expand`, `validate`,
//! `stats`, `presets`, `strategies`, and the archives `SqliteArchive` /
//! `MemoryArchive` over `Arc<dyn Archive>`. Beside this crate:
//! `python/ctxpress/__init__.py` (the Python half, with the docstrings),
//! `_native.pyi` (the stubs), `python/ctxpress/integrations/` (LiteLLM and
//! LangChain hooks, each importing its framework only when imported itself),
//! and `pytests/`, the pytest suite `.ci/run` runs in a venv it makes.

use ctxpress::core::tokens::counter_named;
use ctxpress::{Archive, Compressor, Conversation, PipelineConfig, Report, Session, TurnReport};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// An error made without the interpreter lock, raised once it is held again.
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

impl Fail {
    fn raise(self, py: Python<'_>) -> PyErr {
        let errors = match py.import("ctxpress._errors") {
            Ok(m) => m,
            Err(e) => return e,
        };
        let made = match self {
            Fail::Input {
                message,
                line,
                column,
            } => errors
                .getattr("InputError")
                .and_then(|c| c.call1((message, line, column))),
            Fail::Config(m) => errors.getattr("ConfigError").and_then(|c| c.call1((m,))),
            Fail::Archive(m) => errors.getattr("ArchiveError").and_then(|c| c.call1((m,))),
            Fail::Other(m) => errors.getattr("Error").and_then(|c| c.call1((m,))),
        };
        match made {
            Ok(e) => PyErr::from_value(e),
            Err(e) => e,
        }
    }
}

type Res<T> = Result<T, Fail>;

/// Parse one conversation; `positions` says whether line and column mean
/// anything to the caller (they do for text it gave, not for text made from
/// its dicts).
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

/// The report as the JSON the Python `Result.report` is made from.
fn report_json(r: &Report) -> String {
    report_value(r).to_string()
}

fn report_value(r: &Report) -> Value {
    ctxpress::bindings::report_json(r)
}

/// A session turn's report as JSON: the pipeline's report (when the turn
/// compacted) in the shape of `report_json`.
fn turn_json(t: &TurnReport, s: &Session) -> String {
    json!({
        "tokens_given": t.tokens_given,
        "tokens_request": t.tokens_request,
        "tokens_saved": t.tokens_saved,
        "tokens_prefix_kept": t.tokens_prefix_kept,
        "tokens_prefix_changed": t.tokens_prefix_changed,
        "compacted": t.compacted,
        "fits": t.fits,
        "reset": t.reset,
        "trigger": s.trigger(),
        "target": s.target(),
        "compactions": s.compactions(),
        "report": t.report.as_ref().map(report_value),
    })
    .to_string()
}

fn pipeline_fail(e: ctxpress::Error) -> Fail {
    match e {
        ctxpress::Error::Config(c) => Fail::Config(c.to_string()),
        ctxpress::Error::Archive(a) => Fail::Archive(a.to_string()),
        other => Fail::Other(other.to_string()),
    }
}

fn async_runtime() -> PyResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("starting the async runtime: {e}")))
}

/// A store of originals: what `compress` archives and `expand` reads.
#[pyclass(name = "Archive", module = "ctxpress._native", subclass, frozen)]
struct PyArchive {
    inner: Arc<dyn Archive>,
    what: String,
}

#[pymethods]
impl PyArchive {
    fn __repr__(&self) -> String {
        self.what.clone()
    }
}

/// Originals kept in a SQLite file (created if missing), the same archive
/// the CLI's `--archive` writes.
#[pyclass(name = "SqliteArchive", module = "ctxpress._native", extends = PyArchive, frozen)]
struct PySqliteArchive {
    #[pyo3(get)]
    path: String,
}

#[pymethods]
impl PySqliteArchive {
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyClassInitializer<Self>> {
        let shown = path.display().to_string();
        let opened = py.detach(|| ctxpress::store::SqliteArchive::open(&path));
        match opened {
            Ok(a) => Ok(PyClassInitializer::from(PyArchive {
                inner: Arc::new(a),
                what: format!("SqliteArchive({shown:?})"),
            })
            .add_subclass(PySqliteArchive { path: shown })),
            Err(e) => Err(Fail::Archive(format!("{shown}: cannot open archive: {e}")).raise(py)),
        }
    }

    /// Pickled as its path: the other process opens the same file.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, pyo3::types::PyType>, (String,)) {
        (slf.get_type(), (slf.get().path.clone(),))
    }
}

/// Originals kept in memory for the life of this object.
#[pyclass(name = "MemoryArchive", module = "ctxpress._native", extends = PyArchive, frozen)]
struct PyMemoryArchive;

#[pymethods]
impl PyMemoryArchive {
    #[new]
    fn new() -> PyClassInitializer<Self> {
        PyClassInitializer::from(PyArchive {
            inner: Arc::new(ctxpress::MemoryArchive::default()),
            what: "MemoryArchive()".into(),
        })
        .add_subclass(PyMemoryArchive)
    }

    /// A memory archive lives in one process.
    fn __reduce__(&self) -> PyResult<()> {
        Err(pyo3::exceptions::PyTypeError::new_err(
            "a MemoryArchive lives in one process and cannot be pickled; \
             use SqliteArchive(path) to share originals between processes",
        ))
    }
}

/// A configured pipeline, parsed once and reused across calls and threads.
#[pyclass(name = "Compressor", module = "ctxpress._native", frozen)]
struct PyCompressor {
    inner: Compressor,
    /// For pipelines with an LLM stage.
    runtime: Option<tokio::runtime::Runtime>,
    /// The configuration as TOML or JSON text.
    #[pyo3(get)]
    config: String,
}

fn load_config(
    preset: Option<&str>,
    config: Option<&str>,
    config_name: Option<&str>,
    budget: Option<usize>,
    window: Option<usize>,
    tokenizer: Option<&str>,
    llm: Option<&str>,
) -> Res<(PipelineConfig, String)> {
    ctxpress::bindings::Options {
        preset,
        config,
        config_name,
        budget,
        window,
        tokenizer,
        llm,
    }
    .load()
    .map_err(|e| Fail::Config(e.to_string()))
}

impl PyCompressor {
    fn run(&self, text: &str, positions: bool) -> Res<(String, String)> {
        let mut conv = parse(text, positions)?;
        let r = match &self.runtime {
            Some(rt) => rt.block_on(self.inner.compress_async(&mut conv)),
            None => self.inner.compress(&mut conv),
        }
        .map_err(pipeline_fail)?;
        Ok((write(&conv), report_json(&r)))
    }
}

#[pymethods]
impl PyCompressor {
    #[new]
    #[pyo3(signature = (preset=None, config=None, budget=None, window=None, tokenizer=None, archive=None, llm=None, config_name=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        preset: Option<&str>,
        config: Option<&str>,
        budget: Option<usize>,
        window: Option<usize>,
        tokenizer: Option<&str>,
        archive: Option<PyRef<'_, PyArchive>>,
        llm: Option<&str>,
        config_name: Option<&str>,
    ) -> PyResult<Self> {
        let (cfg, text) = load_config(preset, config, config_name, budget, window, tokenizer, llm)
            .map_err(|f| f.raise(py))?;
        let inner = Compressor::from_config(&cfg)
            .map_err(|e| Fail::Config(e.to_string()).raise(py))?
            .with_archive(archive.map(|a| a.inner.clone()));
        let runtime = if inner.needs_async() {
            Some(async_runtime()?)
        } else {
            None
        };
        Ok(PyCompressor {
            inner,
            runtime,
            config: text,
        })
    }

    /// Compress one conversation given as JSON text; returns the output text
    /// and the report as JSON text.
    #[pyo3(signature = (text, positions=true))]
    fn compress(&self, py: Python<'_>, text: &str, positions: bool) -> PyResult<(String, String)> {
        py.detach(|| self.run(text, positions))
            .map_err(|f| f.raise(py))
    }

    /// Compress many conversations (JSON texts) on up to `jobs` threads.
    /// Returns, in input order, an `(output, report)` tuple for each one
    /// that was compressed and the exception for each one that was not
    /// (its message starts with `item N: `). `positions[i]` says whether
    /// line and column mean anything for item `i` (default: yes).
    #[pyo3(signature = (texts, jobs=None, positions=None))]
    fn compress_many(
        &self,
        py: Python<'_>,
        texts: Vec<String>,
        jobs: Option<usize>,
        positions: Option<Vec<bool>>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let jobs = jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, texts.len().max(1));
        let positions = positions.unwrap_or_default();
        let done = py.detach(|| {
            let next = std::sync::atomic::AtomicUsize::new(0);
            let mut slots: Vec<Option<Res<(String, String)>>> = Vec::new();
            slots.resize_with(texts.len(), || None);
            let slots = std::sync::Mutex::new(slots);
            std::thread::scope(|s| {
                for _ in 0..jobs {
                    s.spawn(|| {
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(t) = texts.get(i) else { break };
                            let r = self.run(t, positions.get(i).copied().unwrap_or(true));
                            if let Ok(mut g) = slots.lock() {
                                g[i] = Some(r);
                            }
                        }
                    });
                }
            });
            slots.into_inner().unwrap_or_default()
        });
        done.into_iter()
            .enumerate()
            .map(|(i, r)| {
                let item = |m: String| format!("item {i}: {m}");
                let failed = match r {
                    Some(Ok(pair)) => return Ok(pair.into_pyobject(py)?.into_any().unbind()),
                    Some(Err(Fail::Input {
                        message,
                        line,
                        column,
                    })) => Fail::Input {
                        message: item(message),
                        line,
                        column,
                    },
                    Some(Err(Fail::Config(m))) => Fail::Config(item(m)),
                    Some(Err(Fail::Archive(m))) => Fail::Archive(item(m)),
                    Some(Err(Fail::Other(m))) => Fail::Other(item(m)),
                    None => Fail::Other(item("not compressed".into())),
                };
                Ok(failed.raise(py).into_value(py).into_any())
            })
            .collect()
    }

    /// True when the pipeline calls an LLM.
    #[getter]
    fn needs_llm(&self) -> bool {
        self.runtime.is_some()
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner.window())
    }
}

/// One growing conversation compressed so the provider's prompt cache stays
/// warm (the Rust `ctxpress::Session`): compacts only when the history
/// crosses the trigger, then keeps the compressed messages as a fixed
/// prefix that later turns append to. A lock makes it safe to share
/// between threads; turns of one session run one at a time.
#[pyclass(name = "Session", module = "ctxpress._native", frozen)]
struct PySession {
    inner: Mutex<Session>,
    runtime: Option<tokio::runtime::Runtime>,
    #[pyo3(get)]
    config: String,
    #[pyo3(get)]
    trigger: usize,
    #[pyo3(get)]
    target: usize,
}

#[pymethods]
impl PySession {
    #[new]
    #[pyo3(signature = (preset=None, config=None, budget=None, window=None, tokenizer=None, archive=None, llm=None, config_name=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        preset: Option<&str>,
        config: Option<&str>,
        budget: Option<usize>,
        window: Option<usize>,
        tokenizer: Option<&str>,
        archive: Option<PyRef<'_, PyArchive>>,
        llm: Option<&str>,
        config_name: Option<&str>,
    ) -> PyResult<Self> {
        let (cfg, text) = load_config(preset, config, config_name, budget, window, tokenizer, llm)
            .map_err(|f| f.raise(py))?;
        let inner = Session::new(&cfg)
            .map_err(|e| Fail::Config(e.to_string()).raise(py))?
            .with_archive(archive.map(|a| a.inner.clone()));
        let runtime = if inner.needs_async() {
            Some(async_runtime()?)
        } else {
            None
        };
        Ok(PySession {
            trigger: inner.trigger(),
            target: inner.target(),
            inner: Mutex::new(inner),
            runtime,
            config: text,
        })
    }

    /// The request for this turn's history (JSON text): the request as
    /// JSON text and the turn's report as JSON text.
    #[pyo3(signature = (text, positions=true))]
    fn prepare(&self, py: Python<'_>, text: &str, positions: bool) -> PyResult<(String, String)> {
        py.detach(|| {
            let history = parse(text, positions)?;
            // A turn that panicked left the session as it was before it.
            let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let (req, r) = match &self.runtime {
                Some(rt) => rt.block_on(s.prepare_async(&history)),
                None => s.prepare(&history),
            }
            .map_err(pipeline_fail)?;
            Ok((write(&req), turn_json(&r, &s)))
        })
        .map_err(|f: Fail| f.raise(py))
    }

    /// Compactions so far (waits for a turn in progress, without the
    /// interpreter lock).
    #[getter]
    fn compactions(&self, py: Python<'_>) -> usize {
        py.detach(|| {
            self.inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .compactions()
        })
    }

    /// True when the pipeline calls an LLM.
    #[getter]
    fn needs_llm(&self) -> bool {
        self.runtime.is_some()
    }

    fn __repr__(&self) -> String {
        format!("Session(trigger={}, target={})", self.trigger, self.target)
    }
}

/// Restore the originals of a compressed conversation from `archive`.
/// Returns the restored text and the positions of compressed messages the
/// archive could not restore.
#[pyfunction]
#[pyo3(signature = (text, archive, positions=true))]
fn expand(
    py: Python<'_>,
    text: &str,
    archive: PyRef<'_, PyArchive>,
    positions: bool,
) -> PyResult<(String, Vec<usize>)> {
    let a = archive.inner.clone();
    py.detach(|| {
        let c = parse(text, positions)?;
        let e = ctxpress::expand(&c, a.as_ref()).map_err(|e| Fail::Archive(e.to_string()))?;
        let left = ctxpress::unrestored(&e);
        Ok((write(&e), left))
    })
    .map_err(|f: Fail| f.raise(py))
}

/// The originals a recall handle (`#h` and ten hex digits, written in the
/// markers of a conversation compressed with an archive) stands for, as a
/// JSON array of the messages exactly as archived; `None` when `archive`
/// does not hold it. A text that is not a handle is an `InputError`.
#[pyfunction]
fn recall(py: Python<'_>, handle: &str, archive: PyRef<'_, PyArchive>) -> PyResult<Option<String>> {
    let a = archive.inner.clone();
    let Some(h) = ctxpress::Handle::parse(handle) else {
        return Err(Fail::Input {
            message: format!(
                "{handle:?} is not a handle (`#h` and 10 hex digits, as in [summary#h7f3a2c91d0: ...])"
            ),
            line: 0,
            column: 0,
        }
        .raise(py));
    };
    py.detach(|| {
        ctxpress::recall(a.as_ref(), &h)
            .map(|r| r.map(|r| r.to_json()))
            .map_err(|e| Fail::Archive(e.to_string()))
    })
    .map_err(|f: Fail| f.raise(py))
}

/// Pairing and role violations as JSON: a list of objects with `index`,
/// `kind`, `detail` and `message`.
#[pyfunction]
#[pyo3(signature = (text, positions=true))]
fn validate(py: Python<'_>, text: &str, positions: bool) -> PyResult<String> {
    py.detach(|| {
        let c = parse(text, positions)?;
        Ok(ctxpress::bindings::violations_json(&c).to_string())
    })
    .map_err(|f: Fail| f.raise(py))
}

/// Messages and tokens by role and the tool-output share, as JSON.
#[pyfunction]
#[pyo3(signature = (texts, tokenizer="heuristic", positions=true))]
fn stats(py: Python<'_>, texts: Vec<String>, tokenizer: &str, positions: bool) -> PyResult<String> {
    py.detach(|| {
        let counter =
            counter_named(tokenizer).map_err(|e| Fail::Config(format!("tokenizer: {e}")))?;
        let mut s = ctxpress::Stats::new(counter);
        for t in &texts {
            s.add(&parse(t, positions)?);
        }
        Ok(s.to_json().to_string())
    })
    .map_err(|f: Fail| f.raise(py))
}

/// The presets: (name, summary, TOML) each.
#[pyfunction]
fn presets() -> Vec<(&'static str, &'static str, &'static str)> {
    ctxpress::PRESETS
        .iter()
        .map(|p| (p.name, p.summary, p.toml))
        .collect()
}

/// The registered strategies: (name, summary, default parameters as JSON,
/// (parameter, documentation line) pairs, whether it takes an `[llm]` table).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn strategies(
    py: Python<'_>,
) -> PyResult<
    Vec<(
        &'static str,
        &'static str,
        String,
        Vec<(&'static str, &'static str)>,
        bool,
    )>,
> {
    let all = ctxpress::core::registry::strategies()
        .map_err(|e| Fail::Config(e.to_string()).raise(py))?;
    Ok(all
        .iter()
        .map(|f| {
            (
                f.name,
                f.summary,
                (f.default_config)().to_string(),
                f.params.to_vec(),
                f.takes_llm,
            )
        })
        .collect())
}

/// The extension module.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<PyArchive>()?;
    m.add_class::<PySqliteArchive>()?;
    m.add_class::<PyMemoryArchive>()?;
    m.add_class::<PyCompressor>()?;
    m.add_class::<PySession>()?;
    m.add_function(wrap_pyfunction!(expand, m)?)?;
    m.add_function(wrap_pyfunction!(recall, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(stats, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(strategies, m)?)?;
    Ok(())
}
