//! The straightforward classifier this crate shipped first (one pass per
//! detector over the whole text), kept for tests: the fast [`crate::classify`]
//! must agree with it on every input.
//!
//! Every pattern is compiled once; every detector is a linear scan (byte loops,
//! line loops, or `regex`/`aho-corasick` automata with ASCII word boundaries so
//! the lazy DFA applies to any input).
#![allow(dead_code)]

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use ctxpress_core::{Classification, Reason, Tier};
use regex::{Regex, RegexSet};

use crate::classify::json::is_json_structure;
use crate::classify::lines::{has_code_chars, is_identifier_key, is_list_item};
use crate::classify::math::has_unicode_math;
use crate::classify::re;
use crate::classify::soft::{SOFT_PATTERNS, SOFT_REASONS, inside_longer_dotted};
use crate::classify::sql::{SQL_OTHER, SQL_STATEMENT_SHAPES, SQL_STRONG_PATTERN, SQL_WEAK};
use crate::classify::traceback::{TRACE_FRAME, TRACE_HEADER};
use crate::classify::verse::{VerseRun, verse_line};
use ctxpress_text::bytes::{char_count, is_word_byte};
use ctxpress_text::split_code_and_prose;
use std::sync::LazyLock;

/// Prose with fewer words than this is T2, otherwise T3.
pub const T3_MIN_WORDS: usize = 20;

/// Special-character ratio above which text is `high_special_char_ratio`.
const SPECIAL_RATIO: f64 = 0.15;
/// Coefficient of variation above which line lengths are `high_line_length_variance`.
const LINE_CV: f64 = 1.2;

/// Classify one text: its tier and the hard and soft T0 reasons it carries.
pub fn classify(text: &str) -> Classification {
    let mut hard = Vec::new();
    let mut soft = Vec::new();
    let stats = scan_bytes(text);
    let lines = scan_lines(text);

    if has_code_fence(text) {
        hard.push(Reason::CodeFence);
    }
    if lines.indented_code {
        hard.push(Reason::IndentedCode);
    }
    if is_json_structure(text) {
        hard.push(Reason::JsonStructure);
    }
    if lines.yaml {
        hard.push(Reason::YamlStructure);
    }
    if stats.chars > 0 && stats.special as f64 / stats.chars as f64 > SPECIAL_RATIO {
        hard.push(Reason::HighSpecialCharRatio);
    }
    if lines.high_variance() {
        hard.push(Reason::HighLineLengthVariance);
    }
    if ctxpress_text::secrets::has_secret(text) {
        hard.push(Reason::ApiKey);
    }
    if stats.dollar_or_backslash && has_latex(text) {
        hard.push(Reason::LatexMath);
    }
    if stats.e2_bytes && has_unicode_math(text) {
        hard.push(Reason::UnicodeMath);
    }
    if is_sql(text) {
        hard.push(Reason::SqlContent);
    }
    if lines.verse {
        hard.push(Reason::VersePattern);
    }
    if has_traceback(text) {
        hard.push(Reason::ErrorTraceback);
    }
    soft_reasons(text, &stats, &mut soft);

    hard.sort();
    soft.sort();
    let tier = if !hard.is_empty() || !soft.is_empty() {
        Tier::T0
    } else if stats.words < T3_MIN_WORDS {
        Tier::T2
    } else {
        Tier::T3
    };
    Classification { tier, hard, soft }
}

// ---------------------------------------------------------------- byte scan

#[derive(Default)]
struct ByteStats {
    chars: usize,
    special: usize,
    words: usize,
    dollar_or_backslash: bool,
    e2_bytes: bool,
    non_ascii: bool,
    digit: bool,
    at: bool,
    slash: bool,
    quote: bool,
}

const fn is_special(b: u8) -> bool {
    matches!(
        b,
        b'{' | b'}'
            | b'['
            | b']'
            | b'<'
            | b'>'
            | b'|'
            | b'\\'
            | b';'
            | b':'
            | b'@'
            | b'#'
            | b'$'
            | b'%'
            | b'^'
            | b'&'
            | b'*'
            | b'('
            | b')'
            | b'='
            | b'+'
            | b'`'
            | b'~'
    )
}

const K_WORD: u8 = 0;
const K_SPACE: u8 = 1;
const K_NEWLINE: u8 = 2;
const K_SPECIAL: u8 = 3;
const K_CONT: u8 = 4;
const K_CJK: u8 = 5;
const K_LEAD: u8 = 6;

/// Byte classes for [`scan_bytes`].
static BYTE_CLASS: [u8; 256] = {
    let mut t = [K_WORD; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = if b == b'\n' {
            K_NEWLINE
        } else if b.is_ascii_whitespace() {
            K_SPACE
        } else if is_special(b) {
            K_SPECIAL
        } else if b & 0xC0 == 0x80 {
            K_CONT
        } else if b >= 0xE3 && b <= 0xE9 {
            // U+3000..U+9FFF: kana and CJK ideographs, written without spaces.
            K_CJK
        } else if b >= 0x80 {
            K_LEAD
        } else {
            K_WORD
        };
        i += 1;
    }
    t
};

/// One pass over the bytes: character count, special characters (ignoring
/// Markdown emphasis `**`, headings and bullets), words (CJK ideographs and kana
/// count one word each) and prefilter flags.
fn scan_bytes(text: &str) -> ByteStats {
    let b = text.as_bytes();
    let mut s = ByteStats::default();
    let mut cont = 0usize;
    let mut in_word = false;
    let mut line_start = true;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match BYTE_CLASS[c as usize] {
            K_WORD => {
                s.digit |= c.is_ascii_digit();
                s.slash |= c == b'/';
                s.quote |= c == b'"';
                s.words += usize::from(!in_word);
                in_word = true;
                line_start = false;
            }
            K_SPACE => in_word = false,
            K_NEWLINE => {
                in_word = false;
                line_start = true;
            }
            K_CONT => cont += 1,
            K_CJK => {
                s.non_ascii = true;
                s.words += 1;
                in_word = false;
                line_start = false;
            }
            K_LEAD => {
                s.non_ascii = true;
                s.e2_bytes |= c == 0xE2;
                s.words += usize::from(!in_word);
                in_word = true;
                line_start = false;
            }
            _ => {
                s.words += usize::from(!in_word);
                in_word = true;
                if line_start {
                    line_start = false;
                    // Markdown heading marks and bullets are formatting, not syntax.
                    let mut j = i;
                    while j < b.len() && b[j] == b'#' {
                        j += 1;
                    }
                    let bullet = j == i && (c == b'*' || c == b'+') && b.get(i + 1) == Some(&b' ');
                    if (j > i && b.get(j) == Some(&b' ')) || bullet {
                        i = if bullet { i + 1 } else { j };
                        continue;
                    }
                }
                if c == b'*' && b.get(i + 1) == Some(&b'*') {
                    i += 2;
                    continue;
                }
                s.special += 1;
                s.at |= c == b'@';
                s.dollar_or_backslash |= c == b'$' || c == b'\\';
            }
        }
        i += 1;
    }
    s.chars = b.len() - cont;
    s
}

// ---------------------------------------------------------------- line scan

#[derive(Default)]
struct LineStats {
    n: usize,
    sum: f64,
    sumsq: f64,
    indented_code: bool,
    yaml: bool,
    verse: bool,
}

impl LineStats {
    fn high_variance(&self) -> bool {
        if self.n <= 3 || self.sum <= 0.0 {
            return false;
        }
        let n = self.n as f64;
        let mean = self.sum / n;
        let var = (self.sumsq / n - mean * mean).max(0.0);
        var.sqrt() / mean > LINE_CV
    }
}

fn is_key_value_line(line: &str) -> bool {
    let t = line.trim();
    let t = t.strip_prefix("- ").unwrap_or(t);
    if let Some(inner) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return is_identifier_key(inner.trim_matches('['));
    }
    if let Some(p) = t.find(':') {
        let (k, rest) = t.split_at(p);
        let rest = rest.get(1..).unwrap_or("");
        if is_identifier_key(k) && (rest.is_empty() || rest.starts_with(' ')) {
            return true;
        }
    }
    if let Some(p) = t.find('=') {
        let (k, rest) = t.split_at(p);
        let rest = rest.get(1..).unwrap_or("").trim();
        return is_identifier_key(k.trim_end()) && !rest.is_empty() && !rest.starts_with('=');
    }
    false
}

/// One pass over the lines: line-length moments (non-blank lines), code outside
/// fences (indented blocks, unified diff hunks, shell transcripts with two or
/// more `$ ` prompts; all reported as `indented_code`), YAML/TOML key-value
/// runs and verse.
fn scan_lines(text: &str) -> LineStats {
    let mut s = LineStats::default();
    let mut prev_blank = true;
    // indented block state
    let (mut ind_lines, mut ind_all_list, mut ind_code, mut ind_open) =
        (0usize, true, false, false);
    let mut kv_run = 0usize;
    let mut prompts = 0usize;
    let mut verse = VerseRun::default();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let blank = line.trim().is_empty();
        if !blank {
            let len = char_count(line) as f64;
            s.n += 1;
            s.sum += len;
            s.sumsq += len * len;
        }

        // indented code: >= 2 consecutive indented lines after a blank line
        let indented = !blank && (line.starts_with("    ") || line.starts_with('\t'));
        if indented && (ind_open || prev_blank) {
            ind_open = true;
            ind_lines += 1;
            let t = line.trim_start();
            ind_all_list &= is_list_item(t);
            ind_code |= has_code_chars(t) || t.starts_with("$ ");
            if ind_lines >= 2 && !ind_all_list && ind_code {
                s.indented_code = true;
            }
        } else if !blank || !ind_open {
            (ind_lines, ind_all_list, ind_code, ind_open) = (0, true, false, false);
        }

        if line.starts_with("@@ -") && line.get(4..).is_some_and(|r| r.contains(" @@")) {
            // unified diff hunk header
            s.indented_code = true;
        }
        if line.starts_with("$ ") && line.as_bytes().get(2).is_some_and(u8::is_ascii_alphabetic) {
            prompts += 1;
            s.indented_code |= prompts >= 2;
        }

        if !s.yaml {
            if !blank && is_key_value_line(line) {
                kv_run += 1;
                s.yaml = kv_run >= 3;
            } else if !(kv_run > 0 && line.trim_start().starts_with("- ")) {
                kv_run = 0;
            }
        }

        if !s.verse {
            match verse_line(line.trim()) {
                Some(v) => {
                    verse.lines += 1;
                    verse.words += v.words;
                    verse.caps += v.caps;
                    verse.rest += v.rest;
                    verse.unterminated += usize::from(v.unterminated);
                    s.verse = verse.is_verse();
                }
                None => verse = VerseRun::default(),
            }
        }
        prev_blank = blank;
    }
    s
}

// ---------------------------------------------------------------- fences

/// True when the text has at least one fenced code block.
pub fn has_code_fence(text: &str) -> bool {
    let b = text.as_bytes();
    (memchr::memmem::find(b, b"```").is_some() || memchr::memmem::find(b, b"~~~").is_some())
        && split_code_and_prose(text).iter().any(|s| s.code)
}

// ---------------------------------------------------------------- math

fn has_latex(text: &str) -> bool {
    latex_matches(text)
}

// ---------------------------------------------------------------- SQL

/// Strong anchors: one alone is SQL (upper case as written in SQL), or a
/// statement shape in any case.
static SQL_STRONG: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        "{SQL_STRONG_PATTERN}|(?i-u:(?-u:\\b)(?:{SQL_STATEMENT_SHAPES}))"
    ))
});

static SQL_WORDS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasickBuilder::new()
        .match_kind(MatchKind::LeftmostLongest)
        .build(SQL_WEAK.iter().chain(SQL_OTHER))
        .expect("sql keywords compile")
});

fn is_sql(text: &str) -> bool {
    if SQL_STRONG.is_match(text) {
        return true;
    }
    let b = text.as_bytes();
    let mut seen = 0u64;
    for m in SQL_WORDS.find_iter(text) {
        let before = m.start().checked_sub(1).and_then(|i| b.get(i));
        let after = b.get(m.end());
        if before.is_some_and(|&c| is_word_byte(c)) || after.is_some_and(|&c| is_word_byte(c)) {
            continue;
        }
        seen |= 1u64 << m.pattern().as_usize();
        let weak_mask = (1u64 << SQL_WEAK.len()) - 1;
        if seen & weak_mask != 0 && seen.count_ones() >= 3 {
            return true;
        }
    }
    false
}

// ---------------------------------------------------------------- tracebacks

fn has_traceback(text: &str) -> bool {
    TRACE_HEADER.is_match(text) || TRACE_FRAME.find_iter(text).nth(1).is_some()
}

// ---------------------------------------------------------------- soft

/// Candidate patterns, one per soft reason, in [`SOFT_REASONS`] order.
/// Indices into [`SOFT_PATTERNS`] of the patterns that need an ASCII digit.
const DIGIT_SOFT: [usize; 5] = [2, 3, 4, 6, 10];

static DIGIT_SET: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(DIGIT_SOFT.iter().filter_map(|&i| SOFT_PATTERNS.get(i)))
        .expect("soft patterns compile")
});
static SOFT_RES: LazyLock<Vec<Regex>> =
    LazyLock::new(|| SOFT_PATTERNS.iter().map(|p| re(p)).collect());

fn soft_reasons(text: &str, stats: &ByteStats, out: &mut Vec<Reason>) {
    let mut candidates: Vec<usize> = Vec::new();
    let b = text.as_bytes();
    if stats.slash && memchr::memmem::find(b, b"://").is_some() {
        candidates.push(0);
    }
    if stats.at {
        candidates.push(1);
    }
    if stats.slash {
        candidates.push(5);
    }
    if stats.quote {
        candidates.push(7);
    }
    candidates.push(8);
    if stats.quote || stats.non_ascii {
        candidates.push(9);
    }
    let mut hits: Vec<usize> = Vec::new();
    for i in candidates {
        if SOFT_RES.get(i).is_some_and(|rx| rx.is_match(text)) {
            hits.push(i);
        }
    }
    if stats.digit {
        hits.extend(
            DIGIT_SET
                .matches(text)
                .iter()
                .filter_map(|k| DIGIT_SOFT.get(k).copied()),
        );
    }
    for i in hits {
        let (Some(&reason), Some(rx)) = (SOFT_REASONS.get(i), SOFT_RES.get(i)) else {
            continue;
        };
        let ok = match reason {
            Reason::VersionNumber => rx.find_iter(text).any(|m| {
                m.as_str().starts_with('v') || !inside_longer_dotted(text, m.start(), m.end())
            }),
            Reason::HashOrSha => rx.find_iter(text).any(|m| {
                let s = m.as_str().as_bytes();
                s.iter().any(u8::is_ascii_digit) && s.iter().any(u8::is_ascii_alphabetic)
            }),
            _ => true,
        };
        if ok {
            out.push(reason);
        }
    }
}

static LATEX: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"\$\$[^$]+\$\$",
        r"|\\\[[^\]]+\\\]",
        r"|\\\([^)\n]+\\\)",
        r"|\\begin\{(?:equation|align|gather|math|displaymath|multline)\*?\}",
        r"|\\(?:frac|dfrac|sqrt|sum|prod|int|iint|oint|lim|mathbb|mathrm|mathcal|alpha|beta|gamma|delta|epsilon|theta|lambda|sigma|omega|infty|partial|nabla|cdot|leq|geq|neq|approx|forall|exists)(?-u:\b)",
        r"|\$[A-Za-z]\$",
        r"|\$[^[ \t\r\n]$[0-9]{(][^$\n]*?[^[ \t\r\n]$\\]\$",
    ))
});

/// Some [`LATEX`] match that is math: display math, a command, `$x$`, or
/// inline `$...$` with math syntax inside and no identifier right after
/// (shell `$A_B $C` is not math).
fn latex_matches(text: &str) -> bool {
    LATEX.find_iter(text).any(|m| {
        let s = m.as_str();
        if s.starts_with("$$") || s.starts_with('\\') || s.len() == 3 {
            return true;
        }
        let inner = s.get(1..s.len() - 1).unwrap_or("");
        let after = text.as_bytes().get(m.end());
        inner
            .bytes()
            .any(|b| matches!(b, b'\\' | b'^' | b'_' | b'=' | b'{' | b'+'))
            && !after.is_some_and(|b| b.is_ascii_alphanumeric())
    })
}
