//! Reading conversations from files or stdin, checking the paths a command
//! reads and writes, and writing output atomically.

use ctxpress::Conversation;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
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

fn err(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// Parse one conversation's text (a JSONL line without its ending, or a
/// whole document) that starts on 1-based `line` of input `name`; errors
/// name the file, line and column (exit 2).
pub fn parse_item(name: &str, line: usize, text: &str) -> anyhow::Result<Conversation> {
    Conversation::parse(text).map_err(|e| {
        err(format!(
            "{name}:{}:{}: {}",
            line + e.line - 1,
            e.column,
            e.message
        ))
    })
}

/// One piece of an input, in order: a conversation's text or a blank line.
#[derive(Debug)]
pub enum Piece {
    /// A conversation: a JSONL line without its ending, or the whole
    /// document (line 1, no ending).
    Item {
        /// 1-based line where it starts.
        line: usize,
        /// Its text.
        text: String,
        /// `\n`, `\r\n`, or nothing (a last line without one; a document).
        ending: &'static str,
    },
    /// A blank or whitespace-only JSONL line, verbatim with its ending.
    Blank(String),
}

/// An input read piece by piece: a JSONL batch one line at a time (only the
/// lines asked for are held), a document whole. The kind comes from the
/// extension (`.jsonl`/`.ndjson`, `.json`) or, for stdin and other names,
/// from the first lines: JSONL when there are several non-blank lines and
/// the first is a whole object.
pub struct Reader {
    /// Name for messages (`<stdin>` or the path).
    pub name: String,
    /// Document or JSONL.
    pub kind: Kind,
    /// The size of the input file, when it is one (for progress).
    pub size: Option<u64>,
    src: Box<dyn BufRead>,
    /// Raw lines read ahead while sniffing the kind, in order.
    ahead: VecDeque<(usize, Vec<u8>)>,
    /// A document's text, until it is handed out.
    doc: Option<String>,
    /// Raw lines read so far (the next line's 0-based index).
    lines: usize,
    /// Bytes read so far.
    offset: usize,
    /// Conversations handed out so far.
    items: usize,
    bom: bool,
    eof: bool,
    buf: Vec<u8>,
}

/// The UTF-8 byte-order mark, kept aside when an input starts with it and
/// written back first.
pub const BOM: &[u8] = b"\xef\xbb\xbf";

impl Reader {
    /// Open an input path (`-` for stdin) and find its kind. A document is
    /// read whole here; a JSONL batch only as far as its kind needs.
    pub fn open(path: &str) -> anyhow::Result<Reader> {
        let (name, src, size, ext): (String, Box<dyn BufRead>, _, _) = if path == "-" {
            let src = std::io::BufReader::with_capacity(1 << 16, std::io::stdin());
            ("<stdin>".to_string(), Box::new(src), None, None)
        } else {
            let p = PathBuf::from(path);
            let f =
                std::fs::File::open(&p).map_err(|e| err(format!("{path}: cannot read: {e}")))?;
            let size = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
            let ext = match p.extension().and_then(|e| e.to_str()) {
                Some("jsonl") | Some("ndjson") => Some(Kind::Jsonl),
                Some("json") => Some(Kind::Document),
                _ => None,
            };
            let src = std::io::BufReader::with_capacity(1 << 16, f);
            (path.to_string(), Box::new(src), size, ext)
        };
        let mut r = Reader {
            name,
            kind: Kind::Jsonl,
            size,
            src,
            ahead: VecDeque::new(),
            doc: None,
            lines: 0,
            offset: 0,
            items: 0,
            bom: false,
            eof: false,
            buf: Vec::new(),
        };
        r.kind = match ext {
            Some(k) => k,
            None => r.sniff()?,
        };
        match r.kind {
            Kind::Document => r.read_document()?,
            // The first line, to know about a byte-order mark from the start.
            Kind::Jsonl if r.ahead.is_empty() => {
                if let Some(l) = r.read_raw()? {
                    r.ahead.push_back(l);
                }
            }
            Kind::Jsonl => {}
        }
        Ok(r)
    }

    /// The input started with a UTF-8 byte-order mark (kept aside and
    /// written back).
    pub fn bom(&self) -> bool {
        self.bom
    }

    /// Input bytes read so far (all of them once [`Reader::next_piece`]
    /// returned `None`).
    pub fn bytes(&self) -> usize {
        self.offset
    }

    /// The next raw line (with its ending) and the offset of its first byte,
    /// from the lines read ahead first.
    fn raw_line(&mut self) -> anyhow::Result<Option<(usize, Vec<u8>)>> {
        if let Some(l) = self.ahead.pop_front() {
            return Ok(Some(l));
        }
        self.read_raw()
    }

    /// Read one raw line from the source (with its ending) and the offset of
    /// its first byte, the byte-order mark taken off the first line.
    fn read_raw(&mut self) -> anyhow::Result<Option<(usize, Vec<u8>)>> {
        if self.eof {
            return Ok(None);
        }
        self.buf.clear();
        let n = self
            .src
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| err(format!("{}: cannot read: {e}", self.name)))?;
        if n == 0 {
            self.eof = true;
            return Ok(None);
        }
        let mut from = 0;
        if self.offset == 0 && self.buf.starts_with(BOM) {
            self.bom = true;
            from = BOM.len();
        }
        let start = self.offset + from;
        self.offset += n;
        Ok(Some((start, self.buf[from..].to_vec())))
    }

    /// JSONL when there are several non-blank lines and the first is a
    /// whole object; the lines read to decide are kept for the reading.
    fn sniff(&mut self) -> anyhow::Result<Kind> {
        let mut first = None;
        while let Some((start, l)) = self.read_raw()? {
            let blank = is_blank(&l);
            self.ahead.push_back((start, l));
            if blank {
                continue;
            }
            if first.is_some() {
                return Ok(Kind::Jsonl);
            }
            let line = self
                .ahead
                .back()
                .map(|l| l.1.as_slice())
                .unwrap_or_default();
            let whole = std::str::from_utf8(line).is_ok_and(|t| {
                t.trim_start().starts_with('{')
                    && serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()
            });
            if !whole {
                return Ok(Kind::Document);
            }
            first = Some(());
        }
        Ok(Kind::Document)
    }

    /// Read the rest of a document and check it.
    fn read_document(&mut self) -> anyhow::Result<()> {
        let mut bytes: Vec<u8> = self.ahead.drain(..).flat_map(|l| l.1).collect();
        if !self.eof {
            let first = self.offset == 0;
            let start = bytes.len();
            self.src
                .read_to_end(&mut bytes)
                .map_err(|e| err(format!("{}: cannot read: {e}", self.name)))?;
            self.offset += bytes.len() - start;
            self.eof = true;
            if first && bytes.starts_with(BOM) {
                self.bom = true;
                bytes.drain(..BOM.len());
            }
        }
        let mark = if self.bom { BOM.len() } else { 0 };
        let text = String::from_utf8(bytes).map_err(|e| {
            err(format!(
                "{}: not UTF-8 (byte {})",
                self.name,
                e.utf8_error().valid_up_to() + mark
            ))
        })?;
        if text.trim().is_empty() {
            return Err(self.empty());
        }
        self.doc = Some(text);
        Ok(())
    }

    fn empty(&self) -> anyhow::Error {
        err(format!(
            "{}: empty input: expected a JSON array of messages, an object with a `messages` array, or JSONL",
            self.name
        ))
    }

    /// The next conversation or blank line, in input order; `None` at the
    /// end. A JSONL input without any conversation is an error (exit 2).
    pub fn next_piece(&mut self) -> anyhow::Result<Option<Piece>> {
        if self.kind == Kind::Document {
            return Ok(self.doc.take().map(|text| {
                self.items += 1;
                Piece::Item {
                    line: 1,
                    text,
                    ending: "",
                }
            }));
        }
        let Some((start, raw)) = self.raw_line()? else {
            if self.items == 0 {
                return Err(self.empty());
            }
            return Ok(None);
        };
        self.lines += 1;
        let line = self.lines;
        let raw = String::from_utf8(raw).map_err(|e| {
            err(format!(
                "{}: not UTF-8 (line {line}, byte {})",
                self.name,
                start + e.utf8_error().valid_up_to()
            ))
        })?;
        let (body, ending) = match raw.strip_suffix("\r\n") {
            Some(l) => (l.len(), "\r\n"),
            None => match raw.strip_suffix('\n') {
                Some(l) => (l.len(), "\n"),
                None => (raw.len(), ""),
            },
        };
        if raw[..body].trim().is_empty() {
            return Ok(Some(Piece::Blank(raw)));
        }
        let mut text = raw;
        text.truncate(body);
        self.items += 1;
        Ok(Some(Piece::Item { line, text, ending }))
    }
}

fn is_blank(raw: &[u8]) -> bool {
    std::str::from_utf8(raw).is_ok_and(|t| t.trim().is_empty())
}

/// Write one piece of output in the input's layout: a conversation then its
/// line ending, or a blank line as it was.
pub fn write_piece(out: &mut Vec<u8>, conv: &Conversation, ending: &str) {
    conv.write_to(&mut *out)
        .expect("writing to a Vec cannot fail");
    out.extend_from_slice(ending.as_bytes());
}

/// `s` safe to print to a terminal: control characters (escape sequences
/// start with one) and the invisible characters that reorder or hide text
/// (bidirectional overrides, zero-width marks) written as `\u{1b}` and the
/// like; line breaks too, so one item stays on one line. Ids, file names
/// and texts from the input go through this wherever they are printed.
pub fn safe(s: &str) -> std::borrow::Cow<'_, str> {
    let risky = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    };
    if !s.chars().any(risky) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if risky(c) {
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                _ => out.extend(c.escape_unicode()),
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`safe`], line by line: for messages whose line breaks are meant.
pub fn safe_lines(s: &str) -> String {
    s.split('\n')
        .map(|l| safe(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Print to stdout and flush, returning errors (a closed pipe among them)
/// instead of panicking as `print!` does.
pub fn print_out(s: &str) -> anyhow::Result<()> {
    let mut so = std::io::stdout().lock();
    so.write_all(s.as_bytes())
        .and_then(|()| so.flush())
        .map_err(stdout_error)
}

/// A failed write to stdout, named (`stdout: cannot write: ...`; a full
/// disk under a redirect). The io::Error stays in the chain: a reader that
/// went away still ends the run quietly.
pub fn stdout_error(e: std::io::Error) -> anyhow::Error {
    anyhow::Error::new(e).context("stdout: cannot write")
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
pub(crate) fn node(md: &std::fs::Metadata) -> Option<(u64, u64)> {
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
pub(crate) fn pid_alive(pid: u32) -> Option<bool> {
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

/// Bytes an output holds in memory before it spills to a spool file.
const SPOOL_IN_MEMORY: usize = 8 << 20;

/// An output being written, piece by piece, that appears only when it is
/// committed: dropped uncommitted (an error), it leaves nothing behind.
///
/// A file is replaced atomically: the bytes go to `.{name}.ctxpress-{pid}.tmp`
/// in its folder, which is then renamed over it, so a failed run never leaves
/// partial output (and removes its temporary file). A new file gets the mode
/// a shell redirect gives (0666 less the umask); an existing one keeps its
/// mode. A symbolic link is followed (its target is replaced, not the link).
/// Stdout and an existing file that is not a regular file (`/dev/null`, a
/// pipe, a terminal) are written in place at commit; until then the bytes
/// are held, in memory up to 8 MiB and beyond that in an unlinked spool file
/// in the temporary folder, so memory stays bounded. The paths were checked
/// by [`check_paths`].
pub struct Output {
    sink: Sink,
}

enum Sink {
    /// A temporary file beside the destination, renamed over it on commit.
    File {
        file: std::io::BufWriter<std::fs::File>,
        tmp: Temp,
        dest: PathBuf,
        path: String,
        mode: Option<std::fs::Permissions>,
    },
    /// Held, then written in place on commit.
    Spool {
        held: Vec<u8>,
        file: Option<std::io::BufWriter<std::fs::File>>,
        _guard: Temp,
        to: Option<(PathBuf, String)>,
    },
}

/// Spool files made by this process, for unique names.
static SPOOLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Output {
    /// Start writing `out` (stdout when `None` or `-`).
    pub fn create(out: Option<&str>) -> anyhow::Result<Output> {
        let path = match out {
            None | Some("-") => return Ok(Output::spool(None)),
            Some(path) => path,
        };
        let dest = resolve_links(Path::new(path));
        let existing = std::fs::metadata(&dest).ok();
        if let Some(md) = &existing
            && !md.is_file()
            && !md.is_dir()
        {
            return Ok(Output::spool(Some((dest, path.to_string()))));
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
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp_path)
            .map_err(|e| {
                err(format!(
                    "{path}: cannot create a temporary file in {}: {e}",
                    dir.display()
                ))
            })?;
        Ok(Output {
            sink: Sink::File {
                file: std::io::BufWriter::with_capacity(1 << 16, f),
                tmp: Temp(Some(tmp_path)),
                dest,
                path: path.to_string(),
                mode: existing.as_ref().filter(|m| m.is_file()).map(kept_mode),
            },
        })
    }

    fn spool(to: Option<(PathBuf, String)>) -> Output {
        Output {
            sink: Sink::Spool {
                held: Vec::new(),
                file: None,
                _guard: Temp(None),
                to,
            },
        }
    }

    /// Append bytes.
    pub fn write(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        match &mut self.sink {
            Sink::File { file, path, .. } => file
                .write_all(bytes)
                .map_err(|e| err(format!("{path}: cannot write: {e}"))),
            Sink::Spool {
                held, file, _guard, ..
            } => {
                if let Some(f) = file {
                    return f
                        .write_all(bytes)
                        .map_err(|e| err(format!("cannot write the spool file: {e}")));
                }
                held.extend_from_slice(bytes);
                if held.len() > SPOOL_IN_MEMORY
                    && let Some((f, guard)) = spool_file()
                {
                    let mut f = std::io::BufWriter::with_capacity(1 << 16, f);
                    f.write_all(held)
                        .map_err(|e| err(format!("cannot write the spool file: {e}")))?;
                    *held = Vec::new();
                    *file = Some(f);
                    *_guard = guard;
                }
                Ok(())
            }
        }
    }

    /// Write out what a file output holds (flushed and synced to its
    /// temporary file), so that a full disk fails here and not at
    /// [`Output::commit`]; stdout and devices are written at commit.
    pub fn prepare(&mut self) -> anyhow::Result<()> {
        if let Sink::File { file, path, .. } = &mut self.sink {
            let fail = |e: std::io::Error| err(format!("{path}: cannot write: {e}"));
            file.flush().map_err(fail)?;
            file.get_ref().sync_data().map_err(fail)?;
        }
        Ok(())
    }

    /// A file output's temporary file and destination (both absolute) and
    /// the temporary file's `(device, inode)`, which the destination has
    /// once [`Output::commit`] renamed it; `None` for stdout and devices.
    pub fn file_identity(&self) -> Option<(PathBuf, PathBuf, (u64, u64))> {
        let Sink::File {
            file, tmp, dest, ..
        } = &self.sink
        else {
            return None;
        };
        let md = file.get_ref().metadata().ok()?;
        let temp = std::path::absolute(tmp.0.as_ref()?).ok()?;
        let dest = std::path::absolute(dest).ok()?;
        Some((temp, dest, node(&md)?))
    }

    /// Make the output appear: rename the temporary file over the
    /// destination, or write what was held to stdout or the device.
    pub fn commit(self) -> anyhow::Result<()> {
        match self.sink {
            Sink::File {
                file,
                mut tmp,
                dest,
                path,
                mode,
            } => {
                let fail = |e: std::io::Error| err(format!("{path}: cannot write: {e}"));
                let f = file.into_inner().map_err(|e| fail(e.into_error()))?;
                if let Some(m) = mode {
                    f.set_permissions(m).map_err(fail)?;
                }
                f.sync_all().map_err(fail)?;
                drop(f);
                let Some(tmp_path) = tmp.0.clone() else {
                    return Ok(());
                };
                std::fs::rename(&tmp_path, &dest).map_err(fail)?;
                tmp.0 = None;
                Ok(())
            }
            Sink::Spool {
                held,
                file,
                _guard,
                to,
            } => {
                let mut spooled = match file {
                    Some(f) => {
                        let mut f = f
                            .into_inner()
                            .map_err(|e| err(format!("cannot write the spool file: {e}")))?;
                        std::io::Seek::rewind(&mut f)
                            .map_err(|e| err(format!("cannot read the spool file: {e}")))?;
                        Some(f)
                    }
                    None => None,
                };
                let mut copy = |w: &mut dyn Write| -> std::io::Result<()> {
                    w.write_all(&held)?;
                    if let Some(f) = spooled.as_mut() {
                        std::io::copy(f, w)?;
                    }
                    w.flush()
                };
                match to {
                    None => {
                        let mut so = std::io::stdout().lock();
                        copy(&mut so).map_err(stdout_error)?;
                    }
                    Some((dest, path)) => {
                        // The io::Error stays in the chain: a pipe whose
                        // reader went away ends the run quietly, as on stdout.
                        let mut f = std::fs::OpenOptions::new()
                            .write(true)
                            .open(&dest)
                            .map_err(|e| {
                                anyhow::Error::new(e).context(format!("{path}: cannot write"))
                            })?;
                        copy(&mut f).map_err(|e| {
                            anyhow::Error::new(e).context(format!("{path}: cannot write"))
                        })?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// A spool file in the temporary folder, unlinked at once where the system
/// allows (it goes away with the process), else removed when dropped.
/// `None` when none can be made: the output is then held in memory.
fn spool_file() -> Option<(std::fs::File, Temp)> {
    let n = SPOOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!(
        ".ctxpress-spool-{}-{n}{TEMP_EXT}",
        std::process::id()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&p)
        .ok()?;
    if cfg!(unix) && std::fs::remove_file(&p).is_ok() {
        return Some((f, Temp(None)));
    }
    Some((f, Temp(Some(p))))
}
