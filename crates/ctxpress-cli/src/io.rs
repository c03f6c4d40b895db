//! Reading conversations from files or stdin, checking the paths a command
//! reads and writes, and writing output atomically.

use ctxpress::Conversation;
use std::ffi::OsString;
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
    /// Document or JSONL.
    pub kind: Kind,
    /// The conversations, with their 1-based line in the input.
    pub items: Vec<(usize, Conversation)>,
    /// Total input bytes.
    pub bytes: usize,
    /// JSONL only: every line in order (the conversations' line endings and
    /// the blank lines between them).
    layout: Vec<Line>,
    /// The input started with a UTF-8 byte-order mark.
    bom: bool,
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
    // A byte-order mark (Windows editors) is kept aside and written back.
    let mut text = text;
    let bom = text.starts_with('\u{feff}');
    if bom {
        text.drain(..'\u{feff}'.len_utf8());
    }
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
    let bytes = text.len() + if bom { 3 } else { 0 };
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
        kind,
        items,
        bytes,
        layout,
        bom,
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
        if self.bom {
            out.extend_from_slice("\u{feff}".as_bytes());
        }
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

/// Print to stdout and flush, returning errors (a closed pipe among them)
/// instead of panicking as `print!` does.
pub fn print_out(s: &str) -> anyhow::Result<()> {
    let mut so = std::io::stdout().lock();
    so.write_all(s.as_bytes())?;
    so.flush()?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Paths a command reads and writes.

/// How a command uses a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only read.
    Read,
    /// Written (replaced through a temporary file, or a database updated in place).
    Write,
}

/// One path a command uses: the flag that names it (for messages), the path
/// as given, and whether it is written.
#[derive(Debug, Clone)]
pub struct PathUse {
    /// `INPUT`, `-o`, `--stats-json`, `--archive`, `--config`, ...
    pub flag: String,
    /// The path as given (`-` is stdin or stdout).
    pub path: String,
    /// Read or written.
    pub access: Access,
}

impl PathUse {
    /// A path read.
    pub fn read(flag: &str, path: &str) -> Self {
        Self {
            flag: flag.into(),
            path: path.into(),
            access: Access::Read,
        }
    }
    /// A path written.
    pub fn write(flag: &str, path: &str) -> Self {
        Self {
            flag: flag.into(),
            path: path.into(),
            access: Access::Write,
        }
    }
}

/// What a path names, for comparing two of them.
#[derive(Debug)]
struct Ident {
    /// The path with every symbolic link resolved (for a file that does not
    /// exist yet: its resolved folder joined with its name).
    canon: PathBuf,
    /// Device and inode of an existing file (hard links compare equal).
    node: Option<(u64, u64)>,
    /// An existing file that is neither a regular file nor a folder (a
    /// terminal, `/dev/null`, a pipe): writing to it replaces nothing.
    special: bool,
}

impl Ident {
    fn same(&self, other: &Ident) -> bool {
        self.canon == other.canon || (self.node.is_some() && self.node == other.node)
    }
}

#[cfg(unix)]
fn node(md: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((md.dev(), md.ino()))
}

#[cfg(not(unix))]
fn node(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// Follow symbolic links as far as they go, also a dangling one (whose
/// target a write creates, as a shell redirect does), at most 40 deep.
fn resolve_links(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            break;
        };
        if !md.file_type().is_symlink() {
            break;
        }
        let Ok(target) = std::fs::read_link(&p) else {
            break;
        };
        p = match p.parent() {
            Some(d) => d.join(target),
            None => target,
        };
    }
    p
}

/// The absolute form of `p` with its folder's links resolved.
fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(d), Some(n)) => std::fs::canonicalize(d)
            .map(|d| d.join(n))
            .unwrap_or_else(|_| abs.clone()),
        _ => abs,
    }
}

fn ident(path: &str) -> Ident {
    let p = resolve_links(Path::new(path));
    match std::fs::metadata(&p) {
        Ok(md) => Ident {
            canon: canonical(&p),
            node: node(&md),
            special: !md.is_file() && !md.is_dir(),
        },
        Err(_) => Ident {
            canon: canonical(&p),
            node: None,
            special: false,
        },
    }
}

/// Standard input when it is redirected from a file (`< FILE`).
fn stdin_ident() -> Option<Ident> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
        let md = std::fs::File::from(fd).metadata().ok()?;
        if !md.is_file() {
            return None;
        }
        Some(Ident {
            canon: PathBuf::new(),
            node: node(&md),
            special: false,
        })
    }
    #[cfg(not(unix))]
    None
}

/// Refuse (exit 2, before anything is read or written) when a path the
/// command writes names the same file as another path it reads or writes:
/// through symbolic links, `..`, or hard links. A SQLite archive also writes
/// its `-wal`, `-shm` and `-journal` files next to it. Existing files that are
/// not regular files (`/dev/null`, a terminal, a pipe) are not compared:
/// writing to them replaces nothing. Then the temporary files that killed
/// earlier runs left beside each output are removed.
pub fn check_paths(uses: &[PathUse]) -> anyhow::Result<()> {
    let mut all: Vec<(PathUse, Option<Ident>)> = Vec::new();
    let mut stdout: Option<&PathUse> = None;
    for u in uses {
        if u.path == "-" {
            // stdin; stdout is not compared with files (the shell opened it
            // already), but two outputs on it would be mixed.
            if u.access == Access::Read {
                all.push((u.clone(), stdin_ident()));
            } else if let Some(first) = stdout.replace(u) {
                return Err(err(format!(
                    "{} and {} both write to stdout: refusing to mix them",
                    first.flag, u.flag
                )));
            }
            continue;
        }
        if u.access == Access::Write && !u.flag.starts_with("--archive") {
            let p = resolve_links(Path::new(&u.path));
            let dir = folder(&p);
            if !dir.is_dir() {
                return Err(err(format!(
                    "{} {}: no such directory {}",
                    u.flag,
                    u.path,
                    dir.display()
                )));
            }
        }
        all.push((u.clone(), Some(ident(&u.path))));
        if u.flag == "--archive" && u.access == Access::Write {
            for ext in ["-wal", "-shm", "-journal"] {
                let side = format!("{}{ext}", u.path);
                let flag = format!("--archive (its {ext} file)");
                let id = ident(&side);
                all.push((PathUse::write(&flag, &side), Some(id)));
            }
        }
    }
    for (i, (a, ia)) in all.iter().enumerate() {
        for (b, ib) in &all[i + 1..] {
            if a.access == Access::Read && b.access == Access::Read {
                continue;
            }
            let (Some(ia), Some(ib)) = (ia, ib) else {
                continue;
            };
            if ia.special || ib.special || !ia.same(ib) {
                continue;
            }
            if a.flag.starts_with("--archive (") && b.flag.starts_with("--archive (") {
                continue;
            }
            let (w, o) = if b.access == Access::Write {
                (b, a)
            } else {
                (a, b)
            };
            let what = if o.flag == "INPUT" {
                "the input".to_string()
            } else {
                format!("{} {}", o.flag, o.path)
            };
            let shown = |u: &PathUse| {
                if u.path == "-" {
                    format!("{} (stdin)", u.flag)
                } else {
                    format!("{} {}", u.flag, u.path)
                }
            };
            return Err(err(format!(
                "{} and {} name the same file: refusing to overwrite {what}",
                shown(o),
                shown(w),
            )));
        }
    }
    for (u, _) in &all {
        if u.access == Access::Write && u.path != "-" && !u.flag.starts_with("--archive") {
            remove_stale_temps(Path::new(&u.path));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Writing output.

const TEMP_TAG: &str = ".ctxpress-";
const TEMP_EXT: &str = ".tmp";

/// The start of the temporary file names for `name`: `.{name}.ctxpress-`
/// (the name cut to 200 bytes, so that the whole stays a legal file name).
fn temp_prefix(name: &std::ffi::OsStr) -> OsString {
    let mut s = OsString::from(".");
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let b = name.as_bytes();
        s.push(std::ffi::OsStr::from_bytes(&b[..b.len().min(200)]));
    }
    #[cfg(not(unix))]
    s.push(name);
    s.push(TEMP_TAG);
    s
}

/// Whether process `pid` is alive, when that can be known (Linux `/proc`).
fn pid_alive(pid: u32) -> Option<bool> {
    if !Path::new("/proc/self").exists() {
        return None;
    }
    Some(Path::new(&format!("/proc/{pid}")).exists())
}

/// Remove the temporary files of earlier runs writing `out` that were
/// killed before they could rename or remove them: `.{name}.ctxpress-{pid}.tmp`
/// in its folder, for a `pid` that no longer runs (or is ours: this run has
/// not made it yet).
fn remove_stale_temps(out: &Path) {
    let dest = resolve_links(out);
    let (dir, Some(name)) = (folder(&dest), dest.file_name()) else {
        return;
    };
    let prefix = temp_prefix(name);
    let Some(prefix) = prefix.to_str() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let me = std::process::id();
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let Some(pid) = n
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(TEMP_EXT))
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || pid_alive(pid) == Some(false) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn folder(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The permissions of the file being replaced, without set-user-id,
/// set-group-id and sticky bits (writing a file clears the first two).
fn kept_mode(md: &std::fs::Metadata) -> std::fs::Permissions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::Permissions::from_mode(md.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    md.permissions()
}

/// A temporary file removed when dropped, unless it was renamed.
struct Temp(Option<PathBuf>);

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Write to `out` (or stdout when `None` or `-`).
///
/// A file is replaced atomically: the bytes go to `.{name}.ctxpress-{pid}.tmp`
/// in its folder, which is then renamed over it, so a failed run never leaves
/// partial output (and removes its temporary file). A new file gets the mode
/// a shell redirect gives (0666 less the umask); an existing one keeps its
/// mode. A symbolic link is followed (its target is replaced, not the link).
/// An existing file that is not a regular file (`/dev/null`, a pipe, a
/// terminal) is written in place. The paths were checked by [`check_paths`].
pub fn write_output(out: Option<&str>, bytes: &[u8]) -> anyhow::Result<()> {
    let path = match out {
        None | Some("-") => {
            let mut so = std::io::stdout().lock();
            so.write_all(bytes)?;
            so.flush()?;
            return Ok(());
        }
        Some(path) => path,
    };
    let dest = resolve_links(Path::new(path));
    let existing = std::fs::metadata(&dest).ok();
    if let Some(md) = &existing
        && !md.is_file()
        && !md.is_dir()
    {
        // The io::Error stays in the chain: a pipe whose reader went away
        // ends the run quietly, as on stdout.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&dest)
            .map_err(|e| anyhow::Error::new(e).context(format!("{path}: cannot write")))?;
        f.write_all(bytes)
            .and_then(|()| f.flush())
            .map_err(|e| anyhow::Error::new(e).context(format!("{path}: cannot write")))?;
        return Ok(());
    }
    let dir = folder(&dest);
    let Some(name) = dest.file_name() else {
        return Err(err(format!("{path}: not a file name")));
    };
    let mut tmp_name = temp_prefix(name);
    tmp_name.push(format!("{}{TEMP_EXT}", std::process::id()));
    let tmp_path = dir.join(tmp_name);
    // Ours only if a killed earlier process with our pid left it.
    let _ = std::fs::remove_file(&tmp_path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp_path)
        .map_err(|e| {
            err(format!(
                "{path}: cannot create a temporary file in {}: {e}",
                dir.display()
            ))
        })?;
    let mut tmp = Temp(Some(tmp_path.clone()));
    let fail = |e: std::io::Error| err(format!("{path}: cannot write: {e}"));
    f.write_all(bytes).map_err(fail)?;
    if let Some(md) = existing.as_ref().filter(|m| m.is_file()) {
        f.set_permissions(kept_mode(md)).map_err(fail)?;
    }
    f.sync_all().map_err(fail)?;
    drop(f);
    std::fs::rename(&tmp_path, &dest).map_err(fail)?;
    tmp.0 = None;
    Ok(())
}
