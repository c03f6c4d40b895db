//! Line statistics and line-to-line state: length moments, indented code
//! (indented blocks, diff hunks, shell transcripts), YAML/TOML key-value
//! runs, frame-like lines, and the line helpers they use.
//!
//! Each line's checks are picked by one lookup of its first non-blank byte in a
//! class table, so most lines skip most checks.

use crate::masks;

use super::LINE_CV;
use super::traceback::frame_like_line;
use super::verse::{VerseRun, verse_line};

#[derive(Default)]
pub(super) struct LineStats {
    n: usize,
    sum: u64,
    sumsq: u128,
    pub(super) indented_code: bool,
    pub(super) yaml: bool,
    pub(super) verse: bool,
    /// Some line starts like a stack frame ([`frame_like_line`]).
    pub(super) frame_like: bool,
    /// Enough lines for a YAML run / for verse.
    pub(super) yaml_possible: bool,
    pub(super) verse_possible: bool,
}

impl LineStats {
    pub(super) fn high_variance(&self) -> bool {
        if self.n <= 3 || self.sum == 0 {
            return false;
        }
        let n = self.n as f64;
        let mean = self.sum as f64 / n;
        let var = (self.sumsq as f64 / n - mean * mean).max(0.0);
        var.sqrt() / mean > LINE_CV
    }
}

/// Line-to-line state: code outside fences (indented blocks, unified diff
/// hunks, shell transcripts with two or more `$ ` prompts; all reported as
/// `indented_code`), YAML/TOML key-value runs and verse.
pub(super) struct LineState<'t> {
    prev_blank: bool,
    ind_lines: usize,
    ind_all_list: bool,
    ind_code: bool,
    ind_open: bool,
    kv_run: usize,
    prompts: usize,
    verse: VerseRun,
    /// Consecutive lines that may be verse, the first three kept until a
    /// fourth comes (verse needs four, so shorter runs are never checked).
    verse_streak: usize,
    verse_pending: [&'t str; 3],
}

impl Default for LineState<'_> {
    fn default() -> Self {
        LineState {
            prev_blank: true,
            ind_lines: 0,
            ind_all_list: true,
            ind_code: false,
            ind_open: false,
            kv_run: 0,
            prompts: 0,
            verse: VerseRun::default(),
            verse_streak: 0,
            verse_pending: [""; 3],
        }
    }
}

/// Classes of the first byte of a line that is not ASCII whitespace: which
/// line checks it may pass.
const L_KV: u8 = 1;

/// A capital: may start a line of verse.
const L_VERSE: u8 = 1 << 1;

/// `\x0B` or a non-ASCII byte: may be Unicode whitespace, so the line is
/// trimmed the Unicode way (and may pass every check that trims).
const L_UNI: u8 = 1 << 2;

/// `#` or `+`: may be a Markdown heading mark or bullet.
const L_MD: u8 = 1 << 3;

/// `F`: may start a `File "` frame line.
const L_FRAME: u8 = 1 << 4;

/// `a` or a digit: may start an indented `at ` or `12: ` frame line.
const L_FRAME_INDENTED: u8 = 1 << 5;

/// `@` or `$`: may open a diff hunk header or a shell prompt.
const L_CODE: u8 = 1 << 6;

/// The `L_*` classes of each byte (`L_KV`: a letter, `_`, `[` or `-`).
static LINE_FIRST: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        let mut k = 0;
        if b.is_ascii_alphabetic() || matches!(b, b'_' | b'[' | b'-') {
            k |= L_KV;
        }
        if b.is_ascii_uppercase() {
            k |= L_VERSE;
        }
        if b >= 0x80 || b == 0x0B {
            k |= L_UNI;
        }
        if matches!(b, b'#' | b'+') {
            k |= L_MD;
        }
        if b == b'F' {
            k |= L_FRAME;
        }
        if b == b'a' || b.is_ascii_digit() {
            k |= L_FRAME_INDENTED;
        }
        if matches!(b, b'@' | b'$') {
            k |= L_CODE;
        }
        t[c] = k;
        c += 1;
    }
    t
};

/// [`str::trim_end`], skipping the Unicode trim when the last byte is
/// neither whitespace nor possibly part of some.
fn trim_end(s: &str) -> &str {
    match s.as_bytes().last() {
        Some(&c) if c < 0x80 && c != 0x0B && !c.is_ascii_whitespace() => s,
        _ => s.trim_end(),
    }
}

impl<'t> LineState<'t> {
    /// Takes the line `text[start..end]` (without its `\n`), which has `cont`
    /// continuation bytes; returns how many of its special characters are
    /// Markdown heading marks or a `+ ` bullet. `tok` is the text's token
    /// mask.
    pub(super) fn line(
        &mut self,
        s: &mut LineStats,
        text: &'t str,
        (start, end): (usize, usize),
        cont: usize,
        tok: &[u64],
    ) -> usize {
        let raw = text.as_bytes().get(start..end).unwrap_or(&[]);
        let lb = raw.strip_suffix(b"\r").unwrap_or(raw);
        // `\r` is ASCII: the end stays a character boundary
        let line = text.get(start..start + lb.len()).unwrap_or("");
        let first = lb
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .unwrap_or(lb.len());
        let class = lb.get(first).map_or(0, |&c| LINE_FIRST[usize::from(c)]);
        let uni = class & L_UNI != 0;
        // the line from its first byte that is not whitespace (Unicode trim)
        let rest = match line.get(first..) {
            Some(r) if uni => r.trim_start(),
            Some(r) => r,
            None => "",
        };
        let blank = rest.is_empty();
        let mut markdown = 0;
        if class & L_MD != 0 {
            let rb = rest.as_bytes();
            if rb.first() == Some(&b'#') {
                let j = rb.iter().take_while(|&&c| c == b'#').count();
                if rb.get(j) == Some(&b' ') {
                    markdown = j;
                }
            } else if rb.get(1) == Some(&b' ') {
                markdown = 1;
            }
        }
        let chars = lb.len() - cont;
        let counted = u64::from(!blank);
        s.n += counted as usize;
        s.sum += chars as u64 * counted;
        s.sumsq += (chars as u128) * (chars as u128) * u128::from(counted);

        if !s.indented_code {
            self.code_outside_fences(s, line, rest, blank, class & L_CODE != 0 && first == 0);
        }
        // a frame line starts `File`, or is indented and starts `at` or a number
        if !s.frame_like && (class & L_FRAME != 0 || (first > 0 && class & L_FRAME_INDENTED != 0)) {
            s.frame_like = frame_like_line(lb);
        }

        if !s.yaml && s.yaml_possible {
            // a key-value line starts with a key, `- ` or `[`
            if class & (L_KV | L_UNI) != 0
                && !blank
                && is_key_value_line(rest, (start + line.len() - rest.len(), tok))
            {
                self.kv_run += 1;
                s.yaml = self.kv_run >= 3;
            } else if !(self.kv_run > 0 && rest.starts_with("- ")) {
                self.kv_run = 0;
            }
        }

        if !s.verse && s.verse_possible {
            // verse lines start with a capital (after the whitespace trim)
            let may_verse = chars >= 8 && class & (L_VERSE | L_UNI) != 0;
            // 80 characters are at most 320 bytes
            match may_verse.then(|| trim_end(rest)).filter(|t| t.len() <= 320) {
                None => {
                    self.verse = VerseRun::default();
                    self.verse_streak = 0;
                }
                Some(t) => {
                    if let Some(slot) = self.verse_pending.get_mut(self.verse_streak) {
                        *slot = t;
                    } else {
                        if self.verse_streak == 3 {
                            for p in self.verse_pending {
                                self.add_verse_line(s, p);
                            }
                        }
                        self.add_verse_line(s, t);
                    }
                    self.verse_streak += 1;
                }
            }
        }
        self.prev_blank = blank;
        markdown
    }
}

impl LineState<'_> {
    /// Adds a line that may be verse to the current verse run.
    fn add_verse_line(&mut self, s: &mut LineStats, t: &str) {
        match verse_line(t) {
            Some(v) => {
                self.verse.lines += 1;
                self.verse.words += v.words;
                self.verse.caps += v.caps;
                self.verse.rest += v.rest;
                self.verse.unterminated += usize::from(v.unterminated);
                s.verse = s.verse || self.verse.is_verse();
            }
            None => self.verse = VerseRun::default(),
        }
    }

    /// Indented blocks, diff hunks and shell prompts (until one is found).
    /// `rest` is `line` trimmed at the start; `marked` says the line starts
    /// with `@` or `$`.
    fn code_outside_fences(
        &mut self,
        s: &mut LineStats,
        line: &str,
        rest: &str,
        blank: bool,
        marked: bool,
    ) {
        // indented code: >= 2 consecutive indented lines after a blank line
        let indented = !blank && (line.starts_with("    ") || line.starts_with('\t'));
        if indented && (self.ind_open || self.prev_blank) {
            self.ind_open = true;
            self.ind_lines += 1;
            self.ind_all_list &= is_list_item(rest);
            self.ind_code |= has_code_chars(rest) || rest.starts_with("$ ");
            if self.ind_lines >= 2 && !self.ind_all_list && self.ind_code {
                s.indented_code = true;
            }
        } else if !blank || !self.ind_open {
            (
                self.ind_lines,
                self.ind_all_list,
                self.ind_code,
                self.ind_open,
            ) = (0, true, false, false);
        }
        if !marked {
            return;
        }
        if line.starts_with("@@ -") && line.get(4..).is_some_and(|r| r.contains(" @@")) {
            // unified diff hunk header
            s.indented_code = true;
        }
        if line.starts_with("$ ") && line.as_bytes().get(2).is_some_and(u8::is_ascii_alphabetic) {
            self.prompts += 1;
            s.indented_code |= self.prompts >= 2;
        }
    }
}

pub(crate) fn has_code_chars(s: &str) -> bool {
    s.bytes().any(|b| {
        matches!(
            b,
            b'(' | b')' | b'{' | b'}' | b'[' | b']' | b';' | b'=' | b'<' | b'>'
        )
    })
}

pub(crate) fn is_list_item(t: &str) -> bool {
    let b = t.as_bytes();
    match b.first() {
        Some(b'-' | b'*' | b'+') => b.get(1) == Some(&b' '),
        Some(d) if d.is_ascii_digit() => {
            let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
            matches!(b.get(n), Some(b'.' | b')')) && b.get(n + 1) == Some(&b' ')
        }
        _ => false,
    }
}

pub(crate) fn is_identifier_key(k: &str) -> bool {
    let b = k.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

/// `key: value`, `key:`, `- key: value`, `key = value` or a `[section]` header.
/// `at` is where `line` starts in its text, and the text's token mask (key
/// bytes are token bytes).
fn is_key_value_line(line: &str, (at, tok): (usize, &[u64])) -> bool {
    // the checks are those of the trimmed line; only the start is trimmed
    // here, and each check that reads the end of the line says what trailing
    // whitespace means to it
    let t = trim_start(line);
    let t = t.strip_prefix("- ").unwrap_or(t);
    let b = t.as_bytes();
    match b.first() {
        Some(b'[') => {
            return t
                .trim_end()
                .strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .is_some_and(|inner| is_identifier_key(inner.trim_matches('[')));
        }
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return false,
    }
    // the key: the token bytes from the start (one longer than 40 is no key)
    let key_at = at + line.len() - t.len();
    let n = masks::run_end(tok, key_at) - key_at;
    if n > 40 {
        return false;
    }
    let after = t.get(n..).unwrap_or("");
    match after.as_bytes().first() {
        Some(b':') => {
            // nothing but whitespace after the colon trims to nothing
            let rest = after.get(1..).unwrap_or("");
            rest.starts_with(' ') || rest.chars().all(char::is_whitespace)
        }
        // `key = value`: only whitespace between the key and the first `=`,
        // and a value that does not start with `=`
        Some(&c) if c == b'=' || c.is_ascii_whitespace() || c == 0x0B || c >= 0x80 => {
            trim_start(after)
                .strip_prefix('=')
                .map(trim_start)
                .is_some_and(|r| !r.is_empty() && !r.starts_with('='))
        }
        _ => false,
    }
}

/// [`str::trim_start`], with ASCII whitespace skipped byte by byte first.
pub(super) fn trim_start(s: &str) -> &str {
    let k = s.bytes().take_while(u8::is_ascii_whitespace).count();
    let rest = s.get(k..).unwrap_or("");
    match rest.as_bytes().first() {
        // `\x0B` and non-ASCII characters may be Unicode whitespace
        Some(&c) if c >= 0x80 || c == 0x0B => rest.trim_start(),
        _ => rest,
    }
}
