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
//!
//! The text is read by serde into a typed file ([`PipelineConfig`]): unknown
//! fields are refused with the closest known name, and errors name the field
//! and the stage by path (`serde_path_to_error`). The `[llm]` table is applied
//! only when it names an endpoint (`base_url`), and only to the stages whose
//! registration `takes_llm` and that set neither `llm` nor `backend`;
//! `[window]` is the budget's `WindowConfig`.

use ctxpress_budget::WindowConfig;
use ctxpress_core::config::closest;
use ctxpress_core::tokens::{COUNTERS, counter_by_name};
use ctxpress_core::{ConfigError, Pipeline, Stage, registry};
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
fn file_error(file: &Value, e: serde_path_to_error::Error<serde_json::Error>) -> Located {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = e.path().iter().collect();
    let mut path = Vec::new();
    let mut at = String::new();
    let mut field = None;
    let mut found = Some(file);
    for (i, s) in segments.iter().enumerate() {
        match s {
            Segment::Map { key } => {
                path.push(Seg::Key(key.clone()));
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
                path.push(Seg::Index(*index));
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
    (
        ConfigError::Invalid(format!("{place}{message}")),
        Where::Path(path),
    )
}

/// A step of the path to a place in a configuration: a table's key or an
/// array's index (`stages[1].fuzzy` is `stages`, 1, `fuzzy`).
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Where in a configuration's text an error is.
#[derive(Debug, Clone, PartialEq)]
enum Where {
    /// A line and column (a syntax error).
    At(usize, usize),
    /// What the error is about: the place of its deepest part found in the
    /// text (a key, an array's element, a table header).
    Path(Vec<Seg>),
}

/// An error and where it is.
type Located = (ConfigError, Where);

fn key(k: &str) -> Seg {
    Seg::Key(k.to_string())
}

/// The path a pipeline-building error is about (`stages[2]` and its field,
/// the `[window]` table's field...).
fn error_path(e: &ConfigError) -> Vec<Seg> {
    let stage = |i: Option<usize>, rest: Vec<Seg>| match i {
        Some(i) => [vec![key("stages"), Seg::Index(i)], rest].concat(),
        None => rest,
    };
    match e {
        ConfigError::UnknownStrategy { stage: i, .. } => stage(*i, vec![key("type")]),
        ConfigError::UnknownField {
            stage: i,
            strategy,
            field,
            ..
        }
        | ConfigError::InvalidField {
            stage: i,
            strategy,
            field,
            ..
        } => match i {
            Some(_) => stage(*i, vec![key(field)]),
            // A table of the file's own (`[window]`, `[serve]`).
            None => vec![key(strategy), key(field)],
        },
        ConfigError::Invalid(m) => {
            // `stages[3]: ...` (see `ConfigError::at_stage`), `` `window.size`: ... ``
            if let Some(rest) = m.strip_prefix("stages[")
                && let Some((i, _)) = rest.split_once("]: ")
                && let Ok(i) = i.parse()
            {
                vec![key("stages"), Seg::Index(i)]
            } else if let Some(rest) = m.strip_prefix('`')
                && let Some((dotted, _)) = rest.split_once("`: ")
                && let Some((table, field)) = dotted.split_once('.')
            {
                vec![key(table), key(field)]
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut at = offset.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// Byte offset in a TOML text of the deepest part of `path` it has: a
/// key, the header of an array's table, an array's element.
fn toml_offset(text: &str, path: &[Seg]) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut found = None;
    toml_walk(doc.as_table(), path, &mut found);
    found
}

fn toml_walk(t: &dyn toml_edit::TableLike, path: &[Seg], found: &mut Option<usize>) {
    use toml_edit::{Item, Value as V};
    let Some((Seg::Key(k), rest)) = path.split_first() else {
        return;
    };
    let Some((kk, v)) = t.get_key_value(k) else {
        return;
    };
    if let Some(s) = kk.span() {
        *found = Some(s.start);
    }
    match rest.split_first() {
        Some((Seg::Key(_), _)) => {
            if let Some(t) = v.as_table_like() {
                toml_walk(t, rest, found);
            }
        }
        Some((Seg::Index(i), rest)) => match v {
            Item::ArrayOfTables(a) => {
                if let Some(t) = a.get(*i) {
                    if let Some(s) = t.span() {
                        *found = Some(s.start);
                    }
                    toml_walk(t, rest, found);
                }
            }
            Item::Value(V::Array(a)) => {
                if let Some(e) = a.get(*i) {
                    if let Some(s) = e.span() {
                        *found = Some(s.start);
                    }
                    if let Some(t) = e.as_inline_table() {
                        toml_walk(t, rest, found);
                    }
                }
            }
            _ => {}
        },
        None => {}
    }
}

/// Byte offset in a JSON text of the deepest part of `path` it has: a
/// key's opening quote, an array's element.
fn json_offset(text: &str, path: &[Seg]) -> Option<usize> {
    let b = text.as_bytes();
    let mut at = 0;
    let mut found = None;
    for seg in path {
        at = skip_ws(b, at);
        match (seg, b.get(at)) {
            (Seg::Key(k), Some(b'{')) => {
                at += 1;
                loop {
                    at = skip_ws(b, at);
                    if b.get(at) != Some(&b'"') {
                        return found;
                    }
                    let key_at = at;
                    let end = skip_json(b, at)?;
                    let name: String = serde_json::from_slice(&b[key_at..end]).ok()?;
                    at = skip_ws(b, end);
                    if b.get(at) != Some(&b':') {
                        return found;
                    }
                    at = skip_ws(b, at + 1);
                    if name == *k {
                        found = Some(key_at);
                        break;
                    }
                    at = skip_ws(b, skip_json(b, at)?);
                    match b.get(at) {
                        Some(b',') => at += 1,
                        _ => return found,
                    }
                }
            }
            (Seg::Index(i), Some(b'[')) => {
                at += 1;
                for _ in 0..*i {
                    at = skip_ws(b, skip_json(b, skip_ws(b, at))?);
                    if b.get(at) != Some(&b',') {
                        return found;
                    }
                    at += 1;
                }
                at = skip_ws(b, at);
                found = Some(at);
            }
            _ => return found,
        }
    }
    found
}

fn skip_ws(b: &[u8], mut at: usize) -> usize {
    while b.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The offset just past the JSON value starting at `at` (no checks beyond
/// what finding its end needs).
fn skip_json(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at)? {
        b'"' => {
            let mut i = at + 1;
            loop {
                match b.get(i)? {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match b.get(i)? {
                    b'"' => {
                        i = skip_json(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = at;
            while b
                .get(i)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            {
                i += 1;
            }
            Some(i)
        }
    }
}

/// `e` without a name: a syntax error says its line and column, the others
/// name their field.
fn unnamed((e, w): Located) -> ConfigError {
    match w {
        Where::At(line, column) => {
            ConfigError::Invalid(format!("line {line}, column {column}: {e}"))
        }
        Where::Path(_) => e,
    }
}

/// Parse TOML or JSON (`json`), keeping where each error is.
fn parse_located(text: &str, json: bool) -> Result<PipelineConfig, Located> {
    let v: Value = if json {
        serde_json::from_str(text).map_err(|e| {
            let full = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let bare = full.strip_suffix(&suffix).unwrap_or(&full);
            (
                ConfigError::Invalid(format!("invalid JSON: {bare}")),
                Where::At(e.line(), e.column()),
            )
        })?
    } else {
        let v: toml::Value = toml::from_str(text).map_err(|e| {
            let (line, column) = line_column(text, e.span().map_or(0, |s| s.start));
            (
                ConfigError::Invalid(format!(
                    "invalid TOML: {}",
                    e.message().trim().replace('\n', "; ")
                )),
                Where::At(line, column),
            )
        })?;
        serde_json::to_value(v)
            .map_err(|e| (ConfigError::Invalid(e.to_string()), Where::Path(Vec::new())))?
    };
    PipelineConfig::from_value_located(&v)
}

/// `e`, an error about the configuration file `name` whose text is `text`,
/// prefixed with the place in the file it is about: `NAME:LINE:COLUMN: `.
/// The place of an error about a field is its key (or, when the field is
/// not in the file, the deepest table of its path that is: a stage's
/// `[[stages]]` header, say); that of an error about the whole file is
/// 1:1. For errors of building the pipeline (an unknown strategy or
/// parameter), of the `[window]` and `[serve]` tables.
pub fn error_in_file(name: &str, text: &str, e: &ConfigError) -> ConfigError {
    placed(name, text, (e.clone(), Where::Path(error_path(e))))
}

fn placed(name: &str, text: &str, (e, w): Located) -> ConfigError {
    let (line, column) = match w {
        Where::At(l, c) => (l, c),
        Where::Path(path) => {
            let json = text.trim_start().starts_with('{');
            let offset = if json {
                json_offset(text, &path)
            } else {
                toml_offset(text, &path)
            };
            // A strategy's parameters given as the whole file (`classify
            // --config`, `compact --config`) are at the top, not in a table
            // named after it.
            let offset = offset.or_else(|| match path.split_first() {
                Some((_, rest)) if !rest.is_empty() && !json => toml_offset(text, rest),
                _ => None,
            });
            offset.map_or((1, 1), |o| line_column(text, o))
        }
    };
    ConfigError::Invalid(format!("{name}:{line}:{column}: {e}"))
}

/// Check that the file `name` is TOML; the error says where it is not:
/// `NAME:LINE:COLUMN: invalid TOML: ...`.
pub fn check_toml(name: &str, text: &str) -> Result<toml::Table, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = line_column(text, e.span().map_or(0, |s| s.start));
        ConfigError::Invalid(format!(
            "{name}:{line}:{column}: invalid TOML: {}",
            e.message().trim().replace('\n', "; ")
        ))
    })
}

impl PipelineConfig {
    /// Parse TOML. A syntax error says its line and column.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        parse_located(text, false).map_err(unnamed)
    }

    /// Parse JSON. A syntax error says its line and column.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        parse_located(text, true).map_err(unnamed)
    }

    /// Parse TOML or JSON, by the first non-blank character.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        parse_located(text, text.trim_start().starts_with('{')).map_err(unnamed)
    }

    /// Parse the text of the configuration file `name` (TOML, or JSON when
    /// it starts with `{`) and check that its pipeline builds. Every error
    /// begins with the file and the place in it that it is about,
    /// `NAME:LINE:COLUMN: `, and names the field: ``p.toml:7:1:
    /// stages[1]: dedup: unknown field `fuzy`; did you mean `fuzzy`?``.
    pub fn parse_file(name: &str, text: &str) -> Result<Self, ConfigError> {
        let cfg = parse_located(text, text.trim_start().starts_with('{'))
            .map_err(|l| placed(name, text, l))?;
        crate::Compressor::from_config(&cfg).map_err(|e| error_in_file(name, text, &e))?;
        Ok(cfg)
    }

    /// Read the configuration file at `path` and [`parse_file`](Self::parse_file) it.
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Invalid(format!("{name}: cannot read: {e}")))?;
        Self::parse_file(&name, &text)
    }

    /// Read from an already parsed value. Errors name the field (and the
    /// stage), and an unknown top-level field gets the closest known one.
    pub fn from_value(v: &Value) -> Result<Self, ConfigError> {
        Self::from_value_located(v).map_err(|(e, _)| e)
    }

    /// [`from_value`](Self::from_value), with where each error is.
    fn from_value_located(v: &Value) -> Result<Self, Located> {
        let whole = |e: ConfigError| (e, Where::Path(Vec::new()));
        let top = v.as_object().ok_or_else(|| {
            whole(ConfigError::Invalid(
                "a pipeline config must be a table".into(),
            ))
        })?;
        // The known fields are the typed file's; checked here to suggest one.
        let known = match serde_json::to_value(ConfigFile::default()) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        if let Some(k) = top.keys().find(|k| !known.contains_key(*k)) {
            let hint = closest(k, known.keys().map(String::as_str))
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            return Err((
                ConfigError::Invalid(format!("unknown top-level field `{k}`{hint}")),
                Where::Path(vec![key(k)]),
            ));
        }
        let file: ConfigFile = serde_path_to_error::deserialize(v).map_err(|e| file_error(v, e))?;
        let version = file
            .version
            .ok_or_else(|| whole(ConfigError::Invalid("missing `version = 1`".into())))?;
        if let Some(s) = file
            .tokenizer
            .as_deref()
            .filter(|s| counter_by_name(s).is_none())
        {
            let hint = closest(s, COUNTERS.iter().copied())
                .map(|c| format!("; did you mean `{c}`?"))
                .unwrap_or_default();
            return Err((
                ConfigError::Invalid(format!(
                    "`tokenizer`: expected one of {}, found {}{hint}",
                    COUNTERS.join(", "),
                    Value::String(s.to_string())
                )),
                Where::Path(vec![key("tokenizer")]),
            ));
        }
        let by_path = |e: ConfigError| {
            let path = error_path(&e);
            (e, Where::Path(path))
        };
        let window: WindowConfig = match file.window {
            None => WindowConfig::default(),
            Some(w) => ctxpress_core::parse_params("window", &Value::Object(w)).map_err(by_path)?,
        };
        window.validate().map_err(by_path)?;
        let stages = file
            .stages
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let kind = s.kind.ok_or_else(|| {
                    (
                        ConfigError::Invalid(format!(
                            "stages[{i}]: missing `type` (the strategy name)"
                        )),
                        Where::Path(vec![key("stages"), Seg::Index(i)]),
                    )
                })?;
                Ok(StageConfig {
                    kind,
                    enabled: s.enabled,
                    params: s.params,
                })
            })
            .collect::<Result<_, Located>>()?;
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
        Value::String(s) => Value::String(ctxpress_text::secrets::mask_url_credentials(s)),
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

    /// Errors of a file name it, the line and column of what they are
    /// about, and the field: syntax errors, unknown and mistyped fields at
    /// any depth, unknown strategies, bad `[window]` values; TOML and JSON.
    #[test]
    fn file_errors_name_the_file_line_and_column() {
        let cases = [
            (
                "version = 1\n[[stages]\ntype = \"dedup\"\n",
                "p.toml:2:9: invalid TOML: invalid table header; expected `.`, `]]`",
            ),
            (
                "version = 1\n\n[[stages]]\ntype = \"dedup\"\n\n[[stages]]\ntype = \"dedup\"\n  fuzy = true\n",
                "p.toml:8:3: stages[1]: dedup: unknown field `fuzy`; did you mean `fuzzy`?",
            ),
            (
                "version = 1\n[[stages]]\ntype = \"dedupe\"\n",
                "p.toml:3:1: stages[0]: unknown strategy `dedupe`; did you mean `dedup`?",
            ),
            (
                "version = 1\n[[stages]]\ntype = \"dedup\"\n[[stages]]\nfuzzy = 1\n",
                "p.toml:4:1: stages[1]: missing `type` (the strategy name)",
            ),
            (
                "version = 1\n[[stages]]\ntype = \"dedup\"\nthreshold = \"high\"\n",
                "p.toml:4:1: stages[0]: dedup: field `threshold`: invalid type: string \"high\", expected f64",
            ),
            (
                "version = 1\n[[stages]]\ntype = 3\n",
                "p.toml:3:1: stages[0]: `type`: expected a string, found 3",
            ),
            (
                "version = 1\n[window]\nsize = 100\ntrigger = 2.0\n",
                "p.toml:4:1: `window.trigger`: must be a share between target (0.4) and 1, found 2",
            ),
            (
                "version = 1\n[window]\nsise = 100\n",
                "p.toml:3:1: window: unknown field `sise`; did you mean `size`?",
            ),
            (
                "version = 1\ntokenizer = 5\n",
                "p.toml:2:1: `tokenizer`: expected a string, found 5",
            ),
            (
                "# comment\nstagse = []\n",
                "p.toml:2:1: unknown top-level field `stagse`; did you mean `stages`?",
            ),
            ("", "p.toml:1:1: missing `version = 1`"),
            (
                "{\"version\": 1,\n \"stages\": [\n  {\"type\": \"dedup\"},\n  {\"type\": \"dedup\", \"fuzy\": true}\n ]\n}\n",
                "p.toml:4:21: stages[1]: dedup: unknown field `fuzy`; did you mean `fuzzy`?",
            ),
            (
                "{\"version\": 1,\n \"stages\": [\n  {\"type\": \"dedup\",}\n ]\n}\n",
                "p.toml:3:20: invalid JSON: trailing comma",
            ),
        ];
        for (text, want) in cases {
            let got = PipelineConfig::parse_file("p.toml", text)
                .unwrap_err()
                .to_string();
            assert_eq!(got, want, "{text}");
        }
        // Without a file, a syntax error still says where it is.
        assert_eq!(
            err("version = 1\n[[stages]\n"),
            "line 2, column 9: invalid TOML: invalid table header; expected `.`, `]]`"
        );
        let dir = std::env::temp_dir().join(format!("ctxpress-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.toml");
        std::fs::write(&p, "version = 1\n[[stages]]\ntype = \"dedpu\"\n").unwrap();
        let e = PipelineConfig::load(&p).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}:3:1: ", p.display())) && e.contains("did you mean `dedup`"),
            "{e}"
        );
        assert!(
            PipelineConfig::load(dir.join("none.toml"))
                .unwrap_err()
                .to_string()
                .contains("cannot read")
        );
        std::fs::remove_dir_all(&dir).unwrap();
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
