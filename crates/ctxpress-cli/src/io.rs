//! Reading conversations from files or stdin, and writing output atomically.

use ctxpress::Conversation;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A user-facing input error (exit code 2).
#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// One document, or one conversation a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A JSON array of messages or `{"messages": [...]}`.
    Document,
    /// JSONL, one `{"id", "messages", ...}` a line.
    Jsonl,
}

/// One line of a JSONL input, in order, so that it is written back as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    /// The next conversation, then this line ending (`\n`, `\r\n`, or
    /// nothing on a last line without one).
    Item(String),
    /// A blank (or whitespace-only) line, kept verbatim with its ending.
    Blank(String),
}

/// A parsed input.
pub struct Input {
    /// Name for messages (`<stdin>` or the path).
    pub name: String,
    /// The file path, when not stdin.
    pub path: Option<PathBuf>,
    /// Document or JSONL.
    pub kind: Kind,
    /// The conversations, with their 1-based line in the input.
    pub items: Vec<(usize, Conversation)>,
    /// Total input bytes.
    pub bytes: usize,
    /// JSONL only: every line in order (the conversations' line endings and
    /// the blank lines between them).
    layout: Vec<Line>,
}

fn err(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// Read and parse an input path (`-` for stdin). Everything is parsed before
/// anything is written, so bad input never leaves partial output.
pub fn read_input(path: &str) -> anyhow::Result<Input> {
    let (name, file, text) = if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| err(format!("<stdin>: cannot read: {e}")))?;
        ("<stdin>".to_string(), None, s)
    } else {
        let p = PathBuf::from(path);
        let bytes = std::fs::read(&p).map_err(|e| err(format!("{path}: cannot read: {e}")))?;
        let s = String::from_utf8(bytes).map_err(|e| {
            err(format!(
                "{path}: not UTF-8 (byte {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        (path.to_string(), Some(p), s)
    };
    if text.trim().is_empty() {
        return Err(err(format!(
            "{name}: empty input: expected a JSON array of messages, an object with a `messages` array, or JSONL"
        )));
    }
    let kind = match file
        .as_deref()
        .and_then(Path::extension)
        .and_then(|e| e.to_str())
    {
        Some("jsonl") | Some("ndjson") => Kind::Jsonl,
        Some("json") => Kind::Document,
        _ => sniff(&text),
    };
    let bytes = text.len();
    let mut layout = Vec::new();
    let items = match kind {
        Kind::Document => {
            let c = Conversation::parse(&text)
                .map_err(|e| err(format!("{name}:{}:{}: {}", e.line, e.column, e.message)))?;
            vec![(1, c)]
        }
        Kind::Jsonl => {
            let mut items = Vec::new();
            for (i, raw) in text.split_inclusive('\n').enumerate() {
                let (line, ending) = match raw.strip_suffix("\r\n") {
                    Some(l) => (l, "\r\n"),
                    None => match raw.strip_suffix('\n') {
                        Some(l) => (l, "\n"),
                        None => (raw, ""),
                    },
                };
                if line.trim().is_empty() {
                    layout.push(Line::Blank(raw.to_string()));
                    continue;
                }
                let c = Conversation::parse(line).map_err(|e| {
                    err(format!("{name}:{}:{}: {}", i + e.line, e.column, e.message))
                })?;
                items.push((i + 1, c));
                layout.push(Line::Item(ending.to_string()));
            }
            items
        }
    };
    Ok(Input {
        name,
        path: file,
        kind,
        items,
        bytes,
        layout,
    })
}

/// JSONL when there are several non-blank lines and the first is a whole object.
fn sniff(text: &str) -> Kind {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("");
    if lines.next().is_some()
        && first.trim_start().starts_with('{')
        && serde_json::from_str::<serde_json::Value>(first).is_ok()
    {
        Kind::Jsonl
    } else {
        Kind::Document
    }
}

impl Input {
    /// Serialize conversations (one per input conversation, in order) in the
    /// input's layout: a document as it was around its messages; JSONL with
    /// each line's own ending (`\n` or `\r\n`, none on a last line that had
    /// none) and the blank lines where they were. An identity run gives the
    /// input back byte for byte.
    pub fn render(&self, convs: &[&Conversation]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes);
        match self.kind {
            Kind::Document => {
                for c in convs {
                    c.write_to(&mut out).expect("writing to a Vec cannot fail");
                }
            }
            Kind::Jsonl => {
                let mut next = convs.iter();
                for l in &self.layout {
                    match l {
                        Line::Blank(raw) => out.extend_from_slice(raw.as_bytes()),
                        Line::Item(ending) => {
                            if let Some(c) = next.next() {
                                c.write_to(&mut out).expect("writing to a Vec cannot fail");
                                out.extend_from_slice(ending.as_bytes());
                            }
                        }
                    }
                }
                // More conversations than input lines (not done today): one a line.
                for c in next {
                    if out.last().is_some_and(|b| *b != b'\n') {
                        out.push(b'\n');
                    }
                    c.write_to(&mut out).expect("writing to a Vec cannot fail");
                    out.push(b'\n');
                }
            }
        }
        out
    }
}

/// Write to `out` (or stdout when `None` or `-`) through a temporary file that is
/// renamed into place, so a failed run never leaves partial output. Refuses to
/// overwrite the input.
pub fn write_output(out: Option<&str>, input: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    match out {
        None | Some("-") => {
            let mut so = std::io::stdout().lock();
            so.write_all(bytes)?;
            so.flush()?;
            Ok(())
        }
        Some(path) => {
            let p = Path::new(path);
            if let Some(inp) = input
                && let (Ok(a), Ok(b)) = (std::fs::canonicalize(inp), std::fs::canonicalize(p))
                && a == b
            {
                return Err(err(format!("{path}: refusing to overwrite the input file")));
            }
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| {
                err(format!(
                    "{path}: cannot create a temporary file in {}: {e}",
                    dir.display()
                ))
            })?;
            tmp.write_all(bytes)?;
            tmp.as_file().sync_all()?;
            tmp.persist(p)
                .map_err(|e| err(format!("{path}: cannot write: {}", e.error)))?;
            Ok(())
        }
    }
}
