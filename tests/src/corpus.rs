//! The shared corpus (`../shared/corpus` beside the repository, or the folder
//! named by `CTXPRESS_CORPUS`): its `.jsonl` files, one conversation a line.
//!
//! The corpus is read at test time, never copied into the repository. Tests
//! use [`files`] / [`file()`], which panic with the folder's name when it is
//! missing: a missing corpus is a failing test, not a silent pass. Benches
//! use [`try_file`] and skip with a message instead.

use std::path::{Path, PathBuf};

/// One conversation of a corpus file: a non-blank line.
#[derive(Debug, Clone)]
pub struct Line {
    /// `file.jsonl:N` (1-based), for messages.
    pub at: String,
    /// The line's text, without its line ending.
    pub text: String,
}

/// The corpus folder: `CTXPRESS_CORPUS` when set, else `../shared/corpus`
/// beside the repository. It may not exist.
pub fn dir() -> PathBuf {
    std::env::var_os("CTXPRESS_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"))
}

/// Every `.jsonl` file of the corpus, sorted by name. Panics, naming the
/// folder, when it is missing or holds no `.jsonl` file.
pub fn files() -> Vec<PathBuf> {
    let dir = dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "corpus folder {} is missing ({e}): this test needs the shared corpus beside the \
             repository (or CTXPRESS_CORPUS set to its folder)",
            dir.display()
        )
    });
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .jsonl file in {}", dir.display());
    files
}

/// Every `.jsonl` file of the corpus, or `None` after a `SKIP:` line naming
/// the folder when it is missing; with `CI` set a missing corpus panics
/// instead (CI always has it). For suites that need more than this crate
/// (Python, a real client) and skip visibly without them.
pub fn files_or_skip() -> Option<Vec<PathBuf>> {
    let dir = dir();
    if dir.is_dir() {
        return Some(files());
    }
    let what = format!("corpus folder {} is missing", dir.display());
    assert!(std::env::var_os("CI").is_none(), "{what} (CI is set)");
    eprintln!("SKIP: {what}");
    None
}

/// The first whole lines of `path` (blank lines too), up to about `cap`
/// bytes and at least one line, or the whole file with
/// `CTXPRESS_TEST_FULL_CORPUS` set or in a release build: a debug build
/// cannot afford the largest files through every preset.
pub fn head(path: &Path, cap: usize) -> String {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read corpus file {}: {e}", path.display()));
    if !cfg!(debug_assertions) || std::env::var_os("CTXPRESS_TEST_FULL_CORPUS").is_some() {
        return text;
    }
    let mut out = String::new();
    for l in text.split_inclusive('\n') {
        if !out.is_empty() && out.len() + l.len() > cap {
            break;
        }
        out.push_str(l);
    }
    out
}

/// The corpus file `name` (e.g. `coding_agent_sessions.jsonl`). Panics,
/// naming the path, when it is missing.
pub fn file(name: &str) -> PathBuf {
    try_file(name).unwrap_or_else(|e| panic!("{e}: this test needs the shared corpus"))
}

/// The corpus file `name`, or why it cannot be read (for benches, which
/// skip instead of failing).
pub fn try_file(name: &str) -> Result<PathBuf, String> {
    let path = dir().join(name);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(path),
        Ok(_) => Err(format!("corpus file {} is not a file", path.display())),
        Err(e) => Err(format!("corpus file {} is missing ({e})", path.display())),
    }
}

/// The conversations of a corpus file: its non-blank lines, in order.
/// Panics, naming the path, when it cannot be read.
pub fn conversations(path: &Path) -> Vec<Line> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read corpus file {}: {e}", path.display()));
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| Line {
            at: format!("{name}:{}", n + 1),
            text: l.to_string(),
        })
        .collect()
}

/// Every `step`-th conversation of `path` (the first included), at most
/// `take` of them: a sample for tests and benches that cannot afford all.
pub fn sample(path: &Path, step: usize, take: usize) -> Vec<Line> {
    conversations(path)
        .into_iter()
        .step_by(step.max(1))
        .take(take)
        .collect()
}
