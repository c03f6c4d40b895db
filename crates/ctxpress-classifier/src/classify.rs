//! Text classification: tier plus hard and soft T0 reasons (spec 001).
//!
//! The work is arranged so that each byte is looked at by few, cheap passes:
//!
//! - [`scan_with`]: one SIMD pass over 64-byte blocks ([`crate::masks`])
//!   builds bit masks of digits, token bytes, capitals, newlines,
//!   continuation bytes and the bytes worth a look after a number, counts
//!   special characters, and makes the lower-cased copy. Lines (from the
//!   newline mask) feed the line statistics: length moments, indented code,
//!   key-value runs, verse, frame-like lines. Digit runs followed by a
//!   `num_next` byte are where numbers with units, phones, versions and IPs
//!   can be; runs of 20+ token bytes (shift-and over the mask) are where
//!   secrets and hashes can be; slashes are where paths can be; runs of
//!   three or more capitals are where upper-case SQL keywords can be.
//! - Patterns with a literal anchor (URLs, quoted keys, quotations, fences,
//!   LaTeX, SQL statement words, legal terms, traceback headers) are found
//!   through that literal (`memchr`, `memmem`, one `aho-corasick` Teddy pass
//!   over the lower-cased copy) and checked by hand or by an anchored regex
//!   there.
//! - The remaining regexes (phone, version, IP, email, legal term, traceback)
//!   run only over the lines or texts their gate lets through.
//!
//! A gate only ever skips text in which its pattern cannot match, and the hand
//! matchers implement the same patterns, so the result equals running every
//! pattern over the whole text: `crate::reference` (test-only) is that
//! straightforward implementation, and tests check both agree on the whole
//! corpus and on random texts. Every step is linear in the text.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use ctxpress_core::{Classification, Reason, Tier};
use regex::Regex;
use std::sync::{LazyLock, OnceLock};

use crate::masks::{self, Masks};
use ctxpress_core::text::bytes::{char_count, is_word_byte};
use ctxpress_core::text::{has_code_fence, split_code_and_prose};

/// Prose with fewer words than this is T2, otherwise T3.
pub const T3_MIN_WORDS: usize = 20;

/// Special-character ratio above which text is `high_special_char_ratio`.
const SPECIAL_RATIO: f64 = 0.15;
/// Coefficient of variation above which line lengths are `high_line_length_variance`.
const LINE_CV: f64 = 1.2;

pub(crate) fn re(p: &str) -> Regex {
    // Patterns are constants: a failure is a programming error every test hits.
    Regex::new(p).expect("classifier pattern compiles")
}

/// Classify one text: its tier and the hard and soft T0 reasons it carries.
pub fn classify(text: &str) -> Classification {
    let mut hard = Vec::new();
    let mut soft = Vec::new();
    let b = text.as_bytes();
    let (s, words) = MASKS.with_borrow_mut(|m| {
        let s = scan_with(text, m);
        (s, LowerWords::find_in(b, m.lower()))
    });
    let runs = TokenRuns::find(text, &s);

    let present = s.present;
    if present.may(P_FENCE) && memchr::memchr2(b'`', b'~', b).is_some() && has_code_fence(text) {
        hard.push(Reason::CodeFence);
    }
    if s.lines.indented_code {
        hard.push(Reason::IndentedCode);
    }
    if is_json_structure(text) {
        hard.push(Reason::JsonStructure);
    }
    if s.lines.yaml {
        hard.push(Reason::YamlStructure);
    }
    if s.chars > 0 && s.special as f64 / s.chars as f64 > SPECIAL_RATIO {
        hard.push(Reason::HighSpecialCharRatio);
    }
    if s.lines.high_variance() {
        hard.push(Reason::HighLineLengthVariance);
    }
    if runs.secret {
        hard.push(Reason::ApiKey);
    }
    // both start by searching their anchor bytes (`$` `\`, 0xE2): no separate check first
    if present.may(P_MATH) && has_latex(text) {
        hard.push(Reason::LatexMath);
    }
    if !s.ascii && present.may(P_E2) && has_unicode_math(text) {
        hard.push(Reason::UnicodeMath);
    }
    if is_sql(text, &words, &s.sql) {
        hard.push(Reason::SqlContent);
    }
    if s.lines.verse {
        hard.push(Reason::VersePattern);
    }
    if has_traceback(text, s.lines.frame_like, words.trace) {
        hard.push(Reason::ErrorTraceback);
    }
    soft_reasons(text, &s, &runs, &words, &mut soft);

    hard.sort();
    soft.sort();
    let tier = if !hard.is_empty() || !soft.is_empty() {
        Tier::T0
    } else if count_words(text, T3_MIN_WORDS) < T3_MIN_WORDS {
        Tier::T2
    } else {
        Tier::T3
    };
    Classification { tier, hard, soft }
}

/// Long token runs: the only places secrets and hashes can be.
struct TokenRuns {
    secret: bool,
    hash: bool,
}

impl TokenRuns {
    fn find(text: &str, s: &Scan) -> TokenRuns {
        let mut r = TokenRuns {
            secret: false,
            hash: false,
        };
        for &(a, e) in &s.long_runs {
            let Some(run) = text.get(a..e) else {
                continue;
            };
            r.secret = r.secret || ctxpress_core::secrets::run_has_secret(run);
            r.hash = r.hash || (e - a >= 40 && is_hash(run));
            if r.secret && r.hash {
                break;
            }
        }
        r
    }
}

/// A word of 40 to 64 hex digits with at least one digit and one letter
/// (inside a token run, words end at `.` and `-`).
fn is_hash(run: &str) -> bool {
    run.split(['.', '-']).any(|w| {
        (40..=64).contains(&w.len())
            && w.bytes().all(|c| c.is_ascii_hexdigit())
            && w.bytes().any(|c| c.is_ascii_digit())
            && w.bytes().any(|c| c.is_ascii_alphabetic())
    })
}

/// Keywords found in one pass over an ASCII-lower-cased copy: SQL statement
/// words and legal terms in any case, traceback header literals as written.
struct LowerWords {
    /// Starts of SQL statement words.
    statements: Vec<usize>,
    legal: bool,
    /// A literal of a traceback header that needs no frame line.
    trace: bool,
}

/// What a [`LOWER_WORDS`] entry is evidence of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keyword {
    /// An SQL statement word (`select`, ...), in any case.
    Statement,
    /// A literal one of which every `legal_term` match contains, in any case.
    Legal,
    /// A literal of [`TRACE_HEADER`], exactly as written.
    Trace,
}

/// The keywords: each word, the lower-case part searched for and its offset
/// in the word (`indemnif` is found by `demnif`).
const LOWER_WORDS: &[(Keyword, &str, &str, usize)] = &[
    (Keyword::Statement, "select", "select", 0),
    (Keyword::Statement, "insert", "insert", 0),
    (Keyword::Statement, "create", "create", 0),
    (Keyword::Statement, "delete", "delete", 0),
    (Keyword::Statement, "update", "update", 0),
    (Keyword::Legal, "shall", "shall", 0),
    (Keyword::Legal, "notwithstanding", "notwith", 0),
    (Keyword::Legal, "whereas", "whereas", 0),
    (Keyword::Legal, "herein", "herein", 0),
    (Keyword::Legal, "hereby", "hereby", 0),
    (Keyword::Legal, "hereto", "hereto", 0),
    (Keyword::Legal, "thereof", "thereof", 0),
    (Keyword::Legal, "pursuant", "pursuant", 0),
    (Keyword::Legal, "indemnif", "demnif", 2),
    (Keyword::Legal, "witness", "witness", 0),
    (
        Keyword::Trace,
        "Traceback (most recent call last):",
        "traceback (most recent call last):",
        0,
    ),
    (
        Keyword::Trace,
        "Exception in thread \"",
        "exception in thread \"",
        0,
    ),
    (Keyword::Trace, "panicked at ", "panicked at ", 0),
    (Keyword::Trace, "goroutine ", "goroutine ", 0),
];

static LOWER_AC: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasickBuilder::new()
        .kind(Some(AhoCorasickKind::DFA))
        .match_kind(MatchKind::LeftmostFirst)
        .build(LOWER_WORDS.iter().map(|w| w.2))
        .expect("keywords compile")
});

/// True when a traceback literal starts at `p` of `text`, as written.
fn trace_literal_at(text: &[u8], p: usize) -> bool {
    let rest = text.get(p..).unwrap_or(&[]);
    LOWER_WORDS
        .iter()
        .any(|&(kind, word, _, _)| kind == Keyword::Trace && rest.starts_with(word.as_bytes()))
}

thread_local! {
    /// Reused class masks and lower-cased copy.
    static MASKS: std::cell::RefCell<Masks> = std::cell::RefCell::new(Masks::default());
}

impl LowerWords {
    /// The keywords of `text`, given its lower-cased copy.
    fn find_in(text: &[u8], lower: &[u8]) -> LowerWords {
        let mut w = LowerWords {
            statements: Vec::new(),
            legal: false,
            trace: false,
        };
        for m in LOWER_AC.find_iter(lower) {
            let Some(&(kind, word, _, offset)) = LOWER_WORDS.get(m.pattern().as_usize()) else {
                continue;
            };
            // a match hides the ones that start inside it: for the statement
            // and legal words that is harmless (each needs a word start), but
            // a keyword can end where a traceback literal begins
            // (`selecTraceback`)
            w.trace = w.trace || (m.start() + 1..m.end()).any(|q| trace_literal_at(text, q));
            let start = m.start().wrapping_sub(offset);
            let haystack = if kind == Keyword::Trace { text } else { lower };
            if m.start() < offset
                || haystack.get(start..start + word.len()) != Some(word.as_bytes())
            {
                continue;
            }
            match kind {
                Keyword::Statement => w.statements.push(start),
                Keyword::Legal => w.legal = true,
                Keyword::Trace => w.trace = true,
            }
        }
        w
    }
}

// ---------------------------------------------------------------- byte facts

fn has(b: &[u8], c: u8) -> bool {
    memchr::memchr(c, b).is_some()
}

/// Which anchor bytes a text has, as `P_*` bits: found by one table pass for
/// short texts (where a `memchr` call per byte costs more than the text);
/// all bits set (unknown) for longer ones, whose searches are worth a call.
#[derive(Clone, Copy)]
struct Present(u16);

/// `` ` `` or `~` (fences).
const P_FENCE: u16 = 1;
/// `$` or `\` (LaTeX).
const P_MATH: u16 = 1 << 1;
/// `0xE2`, the lead byte of the math symbols.
const P_E2: u16 = 1 << 2;
/// `"`.
const P_QUOTE: u16 = 1 << 3;
/// `@` (emails).
const P_AT: u16 = 1 << 4;
/// `:` (URL schemes).
const P_COLON: u16 = 1 << 5;
/// `*` (Markdown emphasis).
const P_STAR: u16 = 1 << 6;
/// `/` (paths).
const P_SLASH: u16 = 1 << 7;

/// Texts shorter than this get a presence pass.
const PRESENCE_MAX: usize = 256;

static PRESENT_BITS: [u16; 256] = {
    let mut t = [0u16; 256];
    t[b'`' as usize] = P_FENCE;
    t[b'~' as usize] = P_FENCE;
    t[b'$' as usize] = P_MATH;
    t[b'\\' as usize] = P_MATH;
    t[0xE2] = P_E2;
    t[b'"' as usize] = P_QUOTE;
    t[b'@' as usize] = P_AT;
    t[b':' as usize] = P_COLON;
    t[b'*' as usize] = P_STAR;
    t[b'/' as usize] = P_SLASH;
    t
};

impl Present {
    fn of(b: &[u8]) -> Present {
        if b.len() >= PRESENCE_MAX {
            return Present(u16::MAX);
        }
        Present(b.iter().fold(0, |a, &c| a | PRESENT_BITS[c as usize]))
    }

    /// False only when none of `bits` occurs.
    fn may(self, bits: u16) -> bool {
        self.0 & bits != 0
    }
}

/// First bytes of a unit right after a number (`5ms`, `2h`, `3°C`).
static UNIT_FIRST: [bool; 256] = unit_table(b"mnsdhwKMGTPkbHcprfgVWABe\xC2");
/// First bytes of a unit after a number and a space (`5 ms`, `10 MB`).
static UNIT_FIRST_SPACED: [bool; 256] = unit_table(b"mnsdhwKMGTPkbHcprf\xC2");

const fn unit_table(bytes: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        t[bytes[i] as usize] = true;
        i += 1;
    }
    t
}

/// Bit `i` set when bits `i..i + 20` of `lo` (continued by `hi`) are all set.
fn runs_of_20(lo: u64, hi: u64) -> u64 {
    let v = u128::from(lo) | (u128::from(hi) << 64);
    let a = v & (v >> 1);
    let b = a & (a >> 2);
    let c = b & (b >> 4);
    let d = c & (c >> 8);
    (d & (d >> 4)) as u64
}

// ---------------------------------------------------------------- scan

/// Line gates: which lines a single-line pattern must look at.
#[derive(Clone, Copy)]
enum Gate {
    /// A 3-digit group, a separator and a digit, or `+` and a digit: phones.
    Phone,
    /// `v1.2` or `1.2.3`: version numbers, IPs and semvers.
    DotNum,
}

const GATES: usize = 2;

/// What the scan learned about a text.
struct Scan {
    chars: usize,
    special: usize,
    lines: LineStats,
    /// Per gate: byte ranges of consecutive lines that passed it.
    spans: [Vec<(usize, usize)>; GATES],
    /// A number with a unit (`numeric_with_units`).
    units: bool,
    /// A file path (`file_path`).
    path: bool,
    /// The text is all ASCII.
    ascii: bool,
    /// Maximal runs of 20+ token bytes (`[A-Za-z0-9_.-]`): where secrets and
    /// hashes can be.
    long_runs: Vec<(usize, usize)>,
    /// Upper-case SQL keywords.
    sql: SqlKeywords,
    /// Which anchor bytes occur.
    present: Present,
}

impl Scan {
    /// True when `f` holds for one of the line runs of `gate`.
    fn any(&self, gate: Gate, text: &str, f: impl Fn(&str) -> bool) -> bool {
        self.spans[gate as usize]
            .iter()
            .any(|&(a, b)| text.get(a..b).is_some_and(&f))
    }
}

/// Records the line around byte `p` for `gate` (positions arrive in order).
fn mark_line(spans: &mut Vec<(usize, usize)>, b: &[u8], p: usize) {
    if spans.last().is_some_and(|l| p < l.1) {
        return;
    }
    let start = memchr::memrchr(b'\n', b.get(..p).unwrap_or(&[])).map_or(0, |q| q + 1);
    let end = memchr::memchr(b'\n', b.get(p..).unwrap_or(&[])).map_or(b.len(), |q| p + q);
    match spans.last_mut() {
        Some(last) if last.1 + 1 == start => last.1 = end,
        _ => spans.push((start, end)),
    }
}

/// Line statistics, special characters net of Markdown formatting, and the
/// lines each gate passes (filling `m` for the text on the way).
fn scan_with(text: &str, m: &mut Masks) -> Scan {
    let b = text.as_bytes();
    m.fill(b);
    let cont = m.cont_count;
    // every non-ASCII character of valid UTF-8 has a continuation byte
    let ascii = cont == 0;
    let mut s = Scan {
        chars: b.len() - cont,
        special: m.special,
        lines: LineStats::default(),
        spans: Default::default(),
        units: false,
        path: false,
        ascii,
        long_runs: Vec::new(),
        sql: SqlKeywords::default(),
        present: Present::of(b),
    };
    let stars = if s.present.may(P_STAR) {
        markdown_stars(b)
    } else {
        0
    };
    let markdown = line_pass(text, m, &mut s.lines, ascii) + stars;
    s.special -= markdown.min(s.special);
    digit_runs(b, m, &mut s);
    s.path = s.present.may(P_SLASH)
        && memchr::memchr_iter(b'/', b).any(|p| masks::bit(&m.tok, p + 1) && path_at(b, &m.tok, p));
    s.long_runs = long_token_runs(&m.tok);
    s.sql = sql_keywords(b, &m.upper);
    s
}

/// Runs the line statistics over every line; returns the Markdown heading and
/// bullet marks found (special characters that are formatting).
fn line_pass(text: &str, m: &mut Masks, stats: &mut LineStats, ascii: bool) -> usize {
    let mut markdown = 0usize;
    // a YAML run needs 3 lines and verse 4: shorter texts skip those checks
    let lines = 1 + m.nl_count;
    stats.yaml_possible = lines >= 3;
    stats.verse_possible = lines >= 4;
    let mut ls = LineState::default();
    let mut start = 0usize;
    let mut ends = std::mem::take(&mut m.line_ends);
    masks::positions(&m.nl, &mut ends);
    ends.push(text.len());
    for &end in &ends {
        let cont = if ascii {
            0
        } else {
            masks::count_in(&m.cont, start, end)
        };
        markdown += ls.line(stats, text, (start, end), cont, &m.tok);
        start = end + 1;
    }
    m.line_ends = ends;
    markdown
}

/// `**` emphasis pairs and `* ` bullets: special characters that are formatting.
fn markdown_stars(b: &[u8]) -> usize {
    let mut markdown = 0usize;
    let mut k = 0;
    while let Some(p) = b.get(k..).and_then(|r| memchr::memchr(b'*', r)) {
        let at = k + p;
        let run = b
            .get(at..)
            .map_or(0, |r| r.iter().take_while(|&&c| c == b'*').count());
        markdown += 2 * (run / 2);
        if run == 1 && b.get(at + 1) == Some(&b' ') && starts_line(b, at) {
            markdown += 1;
        }
        k = at + run.max(1);
    }
    markdown
}

/// Numbers with units, and the lines the phone and dotted-number gates pass,
/// from the ends of the digit runs.
///
/// Only runs followed by a [`Masks::num_next`] byte are looked at: a unit
/// starts with a letter, `µ`, `°` or a space, and the phone and dotted-number
/// gates need `.`, `-` or a space after some run of the match (a `+` prefix
/// included: `+1 555`, `+44-20`).
fn digit_runs(b: &[u8], m: &Masks, s: &mut Scan) {
    let [phone, dotnum] = &mut s.spans;
    let mut carry = 0u64;
    for (w, (&x, &next_ok)) in m.dig.iter().zip(&m.num_next).enumerate() {
        // bit `e`: the first byte after a run
        let ends = !x & ((x << 1) | carry);
        carry = x >> 63;
        let mut candidates = ends & next_ok;
        while candidates != 0 {
            let e = w * 64 + candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            let a = masks::run_start(&m.dig, e - 1);
            let next = b.get(e).copied().unwrap_or(0);
            let after = b.get(e + 1).copied().unwrap_or(0);
            let before = a.checked_sub(1).and_then(|i| b.get(i)).copied();
            if !s.units
                && (UNIT_FIRST[next as usize]
                    || (next == b' ' && UNIT_FIRST_SPACED[after as usize]))
                && before.is_none_or(|c| !is_word_byte(c))
            {
                s.units = unit_at(b, e);
            }
            if (e - a == 3 && matches!(next, b' ' | b'.' | b'-') && after.is_ascii_digit())
                || before == Some(b'+')
            {
                mark_line(phone, b, a);
            }
            if next == b'.' && after.is_ascii_digit() {
                let f = e
                    + 1
                    + b.get(e + 1..)
                        .map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count());
                if before == Some(b'v')
                    || (b.get(f) == Some(&b'.') && b.get(f + 1).is_some_and(u8::is_ascii_digit))
                {
                    mark_line(dotnum, b, a);
                }
            }
        }
    }
}

/// Maximal runs of 20+ token bytes, from the token mask.
fn long_token_runs(tok: &[u64]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0usize;
    let mut w = 0usize;
    while let Some(&x) = tok.get(w) {
        let lo = x & (u64::MAX << (from.saturating_sub(w * 64) & 63));
        let long = runs_of_20(lo, tok.get(w + 1).copied().unwrap_or(0));
        if long == 0 {
            w += 1;
            continue;
        }
        let p = w * 64 + long.trailing_zeros() as usize;
        let (start, end) = (masks::run_start(tok, p), masks::run_end(tok, p));
        out.push((start, end));
        from = end;
        w = end / 64;
    }
    out
}

/// The unit word at `p`: an optional `µ`/`°`, then the word bytes up to the
/// end of the word (a unit must end its word, so this is all a unit can be).
fn unit_word(b: &[u8], p: usize) -> &[u8] {
    let start = if matches!(b.get(p..p + 2), Some([0xC2, 0xB5 | 0xB0])) {
        p + 2
    } else {
        p
    };
    let n = b.get(start..).map_or(0, |r| {
        r.iter().take(8).take_while(|&&c| is_word_byte(c)).count()
    });
    b.get(p..start + n).unwrap_or(&[])
}

/// Units after a number, with an optional space (`5 ms`, `10MB`, `20°C`).
fn long_unit(w: &[u8]) -> bool {
    matches!(
        w,
        b"ms"
            | b"ns"
            | b"\xC2\xB5s"
            | b"sec"
            | b"secs"
            | b"second"
            | b"seconds"
            | b"min"
            | b"mins"
            | b"minute"
            | b"minutes"
            | b"hr"
            | b"hrs"
            | b"hour"
            | b"hours"
            | b"day"
            | b"days"
            | b"week"
            | b"weeks"
            | b"KB"
            | b"KiB"
            | b"MB"
            | b"MiB"
            | b"GB"
            | b"GiB"
            | b"TB"
            | b"TiB"
            | b"PB"
            | b"PiB"
            | b"kB"
            | b"byte"
            | b"bytes"
            | b"Hz"
            | b"kHz"
            | b"MHz"
            | b"GHz"
            | b"km"
            | b"cm"
            | b"mm"
            | b"kg"
            | b"mg"
            | b"kW"
            | b"mV"
            | b"mA"
            | b"\xC2\xB0C"
            | b"\xC2\xB0F"
            | b"px"
            | b"rem"
            | b"fps"
            | b"rpm"
            | b"Kbps"
            | b"Mbps"
            | b"Gbps"
    )
}

/// Units written right after a number only (`5s`, `2h`, `3em`).
fn short_unit(w: &[u8]) -> bool {
    matches!(
        w,
        b"s" | b"h" | b"m" | b"g" | b"V" | b"W" | b"A" | b"K" | b"B" | b"em"
    )
}

/// The `numeric_with_units` pattern after a number ending at `u` (the number
/// starting at a word boundary): a unit, then the end of the word.
fn unit_at(b: &[u8], u: usize) -> bool {
    let w = unit_word(b, u);
    long_unit(w) || short_unit(w) || (b.get(u) == Some(&b' ') && long_unit(unit_word(b, u + 1)))
}

/// True when no word byte follows position `i`.
fn ends_word(b: &[u8], i: usize) -> bool {
    b.get(i).is_none_or(|&c| !is_word_byte(c))
}

/// The `file_path` pattern through the `/` at `p` (`tok_mask` is the token
/// mask of `b`): `[~|.|..]/seg/seg` after a delimiter, or `seg/seg[/seg...]`
/// ending in `.ext` (1-8 letters or digits).
fn path_at(b: &[u8], tok_mask: &[u64], p: usize) -> bool {
    let tok = |i: usize| masks::bit(tok_mask, i);
    let seg_end = |i: usize| {
        if tok(i) {
            masks::run_end(tok_mask, i)
        } else {
            i
        }
    };
    let after_delim = |q: usize, delims: &[u8]| {
        q == 0
            || b.get(q - 1)
                .is_some_and(|c| *c == b'\n' || delims.contains(c))
    };
    let byte = |i: Option<usize>| i.and_then(|i| b.get(i)).copied();
    // `(?:~|\.{1,2})?/seg(/seg)+` after `^` or one of ` \t(['`=,:`
    let e1 = seg_end(p + 1);
    if e1 > p + 1 && b.get(e1) == Some(&b'/') && tok(e1 + 1) {
        const D1: &[u8] = b" \t(['`=,:";
        let prev = byte(p.checked_sub(1));
        let prev2 = byte(p.checked_sub(2));
        if after_delim(p, D1)
            || (matches!(prev, Some(b'~' | b'.')) && after_delim(p - 1, D1))
            || (prev == Some(b'.') && prev2 == Some(b'.') && after_delim(p - 2, D1))
        {
            return true;
        }
    }
    // `seg(/seg)+\.ext\b` after `^` or one of ` \t(['`=,`
    let s = if p > 0 && tok(p - 1) {
        masks::run_start(tok_mask, p - 1)
    } else {
        p
    };
    if s == p || !after_delim(s, b" \t(['`=,") {
        return false;
    }
    let mut i = p;
    while b.get(i) == Some(&b'/') {
        let (start, end) = (i + 1, seg_end(i + 1));
        if end == start {
            return false;
        }
        let ext = (start + 1..end).any(|d| {
            b.get(d) == Some(&b'.') && {
                let n = b.get(d + 1..).map_or(0, |r| {
                    r.iter().take_while(|c| c.is_ascii_alphanumeric()).count()
                });
                (1..=8).contains(&n) && ends_word(b, d + 1 + n)
            }
        });
        if ext {
            return true;
        }
        i = end;
    }
    false
}

/// True when only ASCII whitespace precedes byte `p` on its line.
fn starts_line(b: &[u8], p: usize) -> bool {
    b.get(..p)
        .unwrap_or(&[])
        .iter()
        .rev()
        .find(|c| !(c.is_ascii_whitespace() && **c != b'\n'))
        .is_none_or(|&c| c == b'\n')
}

/// Words for the T2/T3 split, counted up to `limit`: runs of non-whitespace,
/// where each CJK ideograph or kana counts as one word.
fn count_words(text: &str, limit: usize) -> usize {
    if text.is_ascii() {
        return masks::ascii_words(text.as_bytes(), limit);
    }
    let mut words = 0;
    let mut in_word = false;
    for &c in text.as_bytes() {
        if c.is_ascii_whitespace() {
            in_word = false;
        } else if c & 0xC0 == 0x80 {
            // continuation byte: the state of its lead byte holds
        } else if (0xE3..=0xE9).contains(&c) {
            // U+3000..U+9FFF: kana and CJK ideographs, written without spaces.
            words += 1;
            in_word = false;
        } else {
            words += usize::from(!in_word);
            in_word = true;
        }
        if words >= limit {
            break;
        }
    }
    words
}

// ---------------------------------------------------------------- line stats

#[derive(Default)]
struct LineStats {
    n: usize,
    sum: u64,
    sumsq: u128,
    indented_code: bool,
    yaml: bool,
    verse: bool,
    /// Some line starts like a stack frame ([`frame_like_line`]).
    frame_like: bool,
    /// Enough lines for a YAML run / for verse.
    yaml_possible: bool,
    verse_possible: bool,
}

impl LineStats {
    fn high_variance(&self) -> bool {
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
struct LineState<'t> {
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
    fn line(
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

// ---------------------------------------------------------------- line helpers

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
fn trim_start(s: &str) -> &str {
    let k = s.bytes().take_while(u8::is_ascii_whitespace).count();
    let rest = s.get(k..).unwrap_or("");
    match rest.as_bytes().first() {
        // `\x0B` and non-ASCII characters may be Unicode whitespace
        Some(&c) if c >= 0x80 || c == 0x0B => rest.trim_start(),
        _ => rest,
    }
}

/// A line that could be a line of verse: capitalized, a few words, no code or
/// key-value syntax, first word not an all-caps log level.
pub(crate) fn verse_line(t: &str) -> Option<VerseLine> {
    let n = if t.is_ascii() { t.len() } else { char_count(t) };
    if !(8..=80).contains(&n) {
        return None;
    }
    if t.bytes().any(|b| {
        matches!(
            b,
            b'=' | b'('
                | b')'
                | b'{'
                | b'}'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'/'
                | b'\\'
                | b'|'
                | b':'
                | b'#'
                | b'*'
                | b'_'
                | b'`'
                | b'$'
                | b'@'
        )
    }) {
        return None;
    }
    let first = t.chars().next()?;
    if !first.is_uppercase() {
        return None;
    }
    let mut words = t.split_whitespace();
    let w0 = words.next()?;
    if w0.chars().count() >= 2 && w0.chars().all(|c| !c.is_alphabetic() || c.is_uppercase()) {
        return None;
    }
    let (mut rest, mut caps) = (0usize, 0usize);
    for w in words {
        rest += 1;
        if w != "I" && w.chars().next().is_some_and(char::is_uppercase) {
            caps += 1;
        }
    }
    if rest < 1 {
        return None;
    }
    let unterminated = !matches!(t.as_bytes().last(), Some(b'.' | b'!' | b'?' | b':' | b';'));
    Some(VerseLine {
        words: rest + 1,
        caps,
        rest,
        unterminated,
    })
}

pub(crate) struct VerseLine {
    pub(crate) words: usize,
    pub(crate) caps: usize,
    pub(crate) rest: usize,
    pub(crate) unterminated: bool,
}

#[derive(Default)]
pub(crate) struct VerseRun {
    pub(crate) lines: usize,
    pub(crate) words: usize,
    pub(crate) caps: usize,
    pub(crate) rest: usize,
    pub(crate) unterminated: usize,
}

impl VerseRun {
    pub(crate) fn is_verse(&self) -> bool {
        self.lines >= 4
            && self.unterminated * 2 >= self.lines
            && self.words >= self.lines * 3
            && self.caps * 10 <= self.rest * 3
    }
}

// ---------------------------------------------------------------- fences

/// Characters of prose outside fenced code blocks (each piece trimmed).
pub fn prose_chars(text: &str) -> usize {
    split_code_and_prose(text)
        .iter()
        .filter(|s| !s.code)
        .map(|s| char_count(s.text.trim()))
        .sum()
}

/// Substring searchers built once (building one costs more than searching a
/// short text).
struct Finders {
    scheme: memchr::memmem::Finder<'static>,
    quotes: [(
        memchr::memmem::Finder<'static>,
        memchr::memmem::Finder<'static>,
    ); 3],
}

static FINDERS: LazyLock<Finders> = LazyLock::new(|| {
    let f = |s: &[u8]| memchr::memmem::Finder::new(s).into_owned();
    Finders {
        scheme: f(b"://"),
        quotes: [
            (f(b"\""), f(b"\"")),
            (f("\u{201c}".as_bytes()), f("\u{201d}".as_bytes())),
            (f("\u{ab}".as_bytes()), f("\u{bb}".as_bytes())),
        ],
    }
});

// ---------------------------------------------------------------- JSON

/// Starts with `{` or `[` followed by JSON-like content: valid JSON, or an
/// object/array opening with a quoted key or nested structure.
pub(crate) fn is_json_structure(text: &str) -> bool {
    let t = text.trim();
    let b = t.as_bytes();
    let Some(&first) = b.first() else {
        return false;
    };
    if first != b'{' && first != b'[' {
        return false;
    }
    let next = t.get(1..).unwrap_or("").trim_start();
    let looks = if first == b'{' {
        next.starts_with('"') || next.starts_with('}')
    } else {
        next.starts_with('{')
            || next.starts_with('"')
            || next.starts_with('[')
            || next.starts_with(']')
    };
    if looks && (first == b'{' || next.starts_with('{') || next.starts_with('[')) {
        return true;
    }
    let closes = matches!((first, b.last()), (b'{', Some(b'}')) | (b'[', Some(b']')));
    closes && is_valid_json(t)
}

/// True when `text` (trimmed) parses as a JSON object or array.
pub fn is_valid_json(text: &str) -> bool {
    let t = text.trim();
    matches!(t.as_bytes().first(), Some(b'{' | b'[' | b'"'))
        && serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()
}

// ---------------------------------------------------------------- math

/// A command name of the `\\name` alternative of the reference's LaTeX
/// pattern.
fn is_latex_command(name: &[u8]) -> bool {
    matches!(
        name,
        b"frac"
            | b"dfrac"
            | b"sqrt"
            | b"sum"
            | b"prod"
            | b"int"
            | b"iint"
            | b"oint"
            | b"lim"
            | b"mathbb"
            | b"mathrm"
            | b"mathcal"
            | b"alpha"
            | b"beta"
            | b"gamma"
            | b"delta"
            | b"epsilon"
            | b"theta"
            | b"lambda"
            | b"sigma"
            | b"omega"
            | b"infty"
            | b"partial"
            | b"nabla"
            | b"cdot"
            | b"leq"
            | b"geq"
            | b"neq"
            | b"approx"
            | b"forall"
            | b"exists"
    )
}

/// The first position at or after `from` of `needle` or `stop` (`None`
/// when neither follows), cached in `at`: with growing `from` every byte is
/// looked at once, so many openers before one closer stay linear.
fn next_of(
    b: &[u8],
    at: &mut Option<Option<usize>>,
    from: usize,
    needle: u8,
    stop: u8,
) -> Option<usize> {
    if let Some(cached) = *at
        && cached.is_none_or(|q| q >= from)
    {
        return cached;
    }
    let found = b
        .get(from..)
        .and_then(|r| memchr::memchr2(needle, stop, r))
        .map(|q| from + q);
    *at = Some(found);
    found
}

/// The length of the UTF-8 sequence a lead byte starts (1 for others).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// Some match of the reference's LaTeX pattern is math, found by hand at each
/// `$` and `\` (the reference's answer without a regex over the text): every
/// match that starts with `\`, `$$` or is `$x$` is math; an inline `$...$` is
/// math when [`inline_math`] says so, and otherwise the search resumes after
/// it, as the regex's would.
fn has_latex(text: &str) -> bool {
    let b = text.as_bytes();
    let (mut bracket, mut paren) = (None, None);
    let mut from = 0;
    for p in memchr::memchr2_iter(b'$', b'\\', b) {
        if p < from {
            continue;
        }
        let byte = |i: usize| b.get(i).copied().unwrap_or(0);
        if byte(p) == b'\\' {
            let found = match byte(p + 1) {
                // `\[[^\]]+\\\]`, `\([^)\n]+\\\)`
                b'[' => next_of(b, &mut bracket, p + 2, b']', b']')
                    .is_some_and(|q| q >= p + 4 && byte(q - 1) == b'\\'),
                b'(' => next_of(b, &mut paren, p + 2, b')', b'\n')
                    .is_some_and(|q| q >= p + 4 && byte(q) == b')' && byte(q - 1) == b'\\'),
                _ => {
                    let rest = b.get(p + 1..).unwrap_or(&[]);
                    let n = rest.iter().take_while(|&&c| is_word_byte(c)).count();
                    let name = rest.get(..n).unwrap_or(&[]);
                    is_latex_command(name)
                        || (name == b"begin" && latex_environment(rest.get(n..).unwrap_or(&[])))
                }
            };
            if found {
                return true;
            }
            continue;
        }
        let Some(&after) = b.get(p + 1) else {
            continue;
        };
        if after == b'$' {
            // `\$\$[^$]+\$\$`: the closing pair is the next `$`
            let q = memchr::memchr(b'$', b.get(p + 2..).unwrap_or(&[])).map(|q| p + 2 + q);
            if q.is_some_and(|q| q >= p + 3 && byte(q + 1) == b'$') {
                return true;
            }
        } else if after.is_ascii_alphabetic() && byte(p + 2) == b'$' {
            return true;
        } else if !matches!(
            after,
            b' ' | b'\t' | b'\r' | b'\n' | b'0'..=b'9' | b'{' | b'('
        ) {
            // `\$[^[ \t\r\n]$[0-9]{(][^$\n]*?[^[ \t\r\n]$\\]\$`: up to the next `$`
            let Some(q) =
                memchr::memchr2(b'$', b'\n', b.get(p + 2..).unwrap_or(&[])).map(|q| p + 2 + q)
            else {
                continue;
            };
            if byte(q) == b'$'
                && q > p + 1 + utf8_len(after)
                && !matches!(byte(q - 1), b' ' | b'\t' | b'\r' | b'\n' | b'$' | b'\\')
            {
                if inline_math(b, p + 1, q) {
                    return true;
                }
                from = q + 1;
            }
        }
    }
    false
}

/// `{env}` or `{env*}` after `\begin`, for the display-math environments.
fn latex_environment(rest: &[u8]) -> bool {
    let Some(inner) = rest.strip_prefix(b"{") else {
        return false;
    };
    let n = inner.iter().take_while(|c| c.is_ascii_lowercase()).count();
    let name = inner.get(..n).unwrap_or(&[]);
    let tail = inner.get(n..).unwrap_or(&[]);
    matches!(
        name,
        b"equation" | b"align" | b"gather" | b"math" | b"displaymath" | b"multline"
    ) && (tail.starts_with(b"}") || tail.starts_with(b"*}"))
}

/// An inline `$...$` (inner bytes `a..q`, closing `$` at `q`) is math when its
/// inside has math syntax and no identifier follows (`$A_B $C` in shell is not).
fn inline_math(b: &[u8], a: usize, q: usize) -> bool {
    b.get(a..q).is_some_and(|inner| {
        inner
            .iter()
            .any(|c| matches!(c, b'\\' | b'^' | b'_' | b'=' | b'{' | b'+'))
    }) && !b.get(q + 1).is_some_and(u8::is_ascii_alphanumeric)
}

const MATH_SYMBOLS: &[char] = &[
    '∑', '∏', '∫', '∬', '∮', '∂', '∇', '√', '∞', '≠', '≈', '≡', '≤', '≥', '∈', '∉', '∋', '⊂', '⊃',
    '⊆', '⊇', '∪', '∩', '∀', '∃', '∄', '∅', '∧', '∨', '⊕', '⊗', 'ℝ', 'ℕ', 'ℤ', 'ℚ', 'ℂ', '∝', '∠',
    '⊥', '∴', '∵', '∘', '⊢', '⊨',
];

/// Second bytes of the UTF-8 of [`MATH_SYMBOLS`] (all `0xE2 ..`): most
/// `0xE2` characters in text (quotes, dashes, box drawing) fail this.
static MATH_SECOND: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < MATH_SYMBOLS.len() {
        let c = MATH_SYMBOLS[i] as u32;
        assert!(c >= 0x2000 && c <= 0x2FFF);
        t[(0x80 | ((c >> 6) & 0x3F)) as usize] = true;
        i += 1;
    }
    t
};

/// Two or more mathematical symbols (a single `≥` in prose is not math).
pub(crate) fn has_unicode_math(text: &str) -> bool {
    let b = text.as_bytes();
    let mut n = 0;
    for p in memchr::memchr_iter(0xE2, b) {
        if !b.get(p + 1).is_some_and(|&c| MATH_SECOND[c as usize]) {
            continue;
        }
        if let Some(c) = text.get(p..).and_then(|s| s.chars().next())
            && MATH_SYMBOLS.contains(&c)
        {
            n += 1;
            if n >= 2 {
                return true;
            }
        }
    }
    false
}

// ---------------------------------------------------------------- SQL

/// Upper-case strong anchors (as written in SQL): one alone is SQL.
pub(crate) const SQL_STRONG_PATTERN: &str = concat!(
    r"(?-u:\b)(?:GROUP[ \t\r\n]+BY|ORDER[ \t\r\n]+BY|PRIMARY[ \t\r\n]+KEY|FOREIGN[ \t\r\n]+KEY|NOT[ \t\r\n]+NULL|VARCHAR|",
    r"INNER[ \t\r\n]+JOIN|LEFT[ \t\r\n]+(?:OUTER[ \t\r\n]+)?JOIN|RIGHT[ \t\r\n]+(?:OUTER[ \t\r\n]+)?JOIN|FULL[ \t\r\n]+OUTER[ \t\r\n]+JOIN|CROSS[ \t\r\n]+JOIN|",
    r"CREATE[ \t\r\n]+(?:TABLE|INDEX|VIEW|UNIQUE[ \t\r\n]+INDEX)|ALTER[ \t\r\n]+TABLE|DROP[ \t\r\n]+TABLE|INSERT[ \t\r\n]+INTO|",
    r"DELETE[ \t\r\n]+FROM|AUTO_INCREMENT|SELECT[ \t\r\n]+[^\n;]+?[ \t\r\n]+FROM[ \t\r\n]+[A-Za-z0-9_]+|UPDATE[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]+SET)(?-u:\b)",
);

static SQL_STRONG: LazyLock<Regex> = LazyLock::new(|| re(SQL_STRONG_PATTERN));

/// First words of the [`SQL_STRONG`] alternatives.
const SQL_STRONG_FIRST: &[&str] = &[
    "GROUP",
    "ORDER",
    "PRIMARY",
    "FOREIGN",
    "NOT",
    "VARCHAR",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "CREATE",
    "ALTER",
    "DROP",
    "INSERT",
    "DELETE",
    "AUTO_INCREMENT",
    "SELECT",
    "UPDATE",
];

/// Statement shapes unmistakable in any case, anchored at a statement word
/// found by [`LowerWords`].
static SQL_ANY_CASE: LazyLock<Regex> =
    LazyLock::new(|| re(&format!("^(?i-u:{SQL_STATEMENT_SHAPES})")));

/// Statement shapes unmistakable in any case (without the case flag).
pub(crate) const SQL_STATEMENT_SHAPES: &str = concat!(
    r"select[ \t\r\n]+(?:\*|count[ \t\r\n]*\(|distinct[ \t\r\n])|insert[ \t\r\n]+into[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]*(?:\(|values)",
    r"|create[ \t\r\n]+table[ \t\r\n]+(?:if[ \t\r\n]+not[ \t\r\n]+exists[ \t\r\n]+)?[A-Za-z0-9_]+[ \t\r\n]*\(|delete[ \t\r\n]+from[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]+where[ \t\r\n]",
    r"|update[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]+set[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]*=",
);

pub(crate) const SQL_WEAK: &[&str] = &[
    "WHERE",
    "JOIN",
    "HAVING",
    "UNION",
    "DISTINCT",
    "EXCEPT",
    "INTERSECT",
];
pub(crate) const SQL_OTHER: &[&str] = &[
    "SELECT",
    "FROM",
    "INSERT",
    "INTO",
    "UPDATE",
    "DELETE",
    "SET",
    "VALUES",
    "CREATE",
    "TABLE",
    "DROP",
    "ALTER",
    "INDEX",
    "LIMIT",
    "OFFSET",
    "VIEW",
    "SCHEMA",
    "FETCH",
    "COMMIT",
    "ROLLBACK",
    "TRIGGER",
    "PROCEDURE",
    "DATABASE",
    "GRANT",
    "REVOKE",
    "TRUNCATE",
    "BETWEEN",
    "LIKE",
];

/// Upper-case SQL keywords written as whole words.
#[derive(Default)]
struct SqlKeywords {
    /// Bit `k` for the `k`-th keyword of [`SQL_WEAK`] then [`SQL_OTHER`].
    seen: u64,
    /// Some word of [`SQL_STRONG_FIRST`].
    strong: bool,
}

/// A word of at most 16 bytes as one number (zero-padded).
const fn word_key(w: &[u8]) -> u128 {
    let mut k = 0u128;
    let mut i = 0;
    while i < w.len() && i < 16 {
        k |= (w[i] as u128) << (8 * i);
        i += 1;
    }
    k
}

/// How many keywords [`SqlKeywords::seen`] has bits for.
const SQL_SEEN_N: usize = SQL_WEAK.len() + SQL_OTHER.len();

/// The `i`-th word of [`SQL_WEAK`], [`SQL_OTHER`] (the bit order of
/// [`SqlKeywords::seen`]), then [`SQL_STRONG_FIRST`].
const fn sql_word(i: usize) -> &'static [u8] {
    if i < SQL_WEAK.len() {
        SQL_WEAK[i].as_bytes()
    } else if i < SQL_SEEN_N {
        SQL_OTHER[i - SQL_WEAK.len()].as_bytes()
    } else {
        SQL_STRONG_FIRST[i - SQL_SEEN_N].as_bytes()
    }
}

/// [`word_key`]s of the [`sql_word`]s.
static SQL_KEYS: [u128; SQL_SEEN_N + SQL_STRONG_FIRST.len()] = {
    let mut t = [0u128; SQL_SEEN_N + SQL_STRONG_FIRST.len()];
    let mut i = 0;
    while i < t.len() {
        t[i] = word_key(sql_word(i));
        i += 1;
    }
    t
};

const _: () = assert!(SQL_KEYS.len() <= 64);

/// Longest [`sql_word`] (words are compared as `u128`s).
const SQL_MAX_LEN: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < SQL_KEYS.len() {
        if sql_word(i).len() > n {
            n = sql_word(i).len();
        }
        i += 1;
    }
    assert!(n <= 16);
    n
};

/// By first capital and length: bit `i` set when [`SQL_KEYS`]`[i]` has that
/// shape. Most upper-case words have no candidate at all.
static SQL_SHAPES: [[u64; SQL_MAX_LEN + 1]; 26] = {
    let mut t = [[0u64; SQL_MAX_LEN + 1]; 26];
    let mut i = 0;
    while i < SQL_KEYS.len() {
        let w = sql_word(i);
        t[(w[0] - b'A') as usize][w.len()] |= 1 << i;
        i += 1;
    }
    t
};

/// The keywords among the whole words of three or more upper-case letters
/// (from the upper-case mask; every keyword is such a word).
fn sql_keywords(b: &[u8], upper: &[u64]) -> SqlKeywords {
    let mut k = SqlKeywords::default();
    let mut carry = 0u64;
    for (w, &x) in upper.iter().enumerate() {
        let next = upper.get(w + 1).copied().unwrap_or(0);
        let three = x & ((x >> 1) | (next << 63)) & ((x >> 2) | (next << 62));
        // runs of upper-case letters that start here
        let mut starts = three & !((x << 1) | carry);
        carry = x >> 63;
        while starts != 0 {
            let p = w * 64 + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            if p > 0 && b.get(p - 1).is_some_and(|&c| is_word_byte(c)) {
                continue;
            }
            let mut e = masks::run_end(upper, p);
            if b.get(e).is_some_and(|&c| is_word_byte(c)) {
                // the word goes on past its capitals (`AUTO_INCREMENT`, `HTTPServer`)
                e = p + b.get(p..).map_or(0, |r| {
                    r.iter()
                        .take(SQL_MAX_LEN + 1)
                        .take_while(|&&c| is_word_byte(c))
                        .count()
                });
            }
            let mut candidates = b
                .get(p)
                .and_then(|c| SQL_SHAPES.get(usize::from(c.wrapping_sub(b'A'))))
                .and_then(|by_len| by_len.get(e - p))
                .copied()
                .unwrap_or(0);
            if candidates == 0 {
                continue;
            }
            let key = word_key(b.get(p..e).unwrap_or(&[]));
            while candidates != 0 {
                let i = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if SQL_KEYS.get(i) == Some(&key) {
                    if i < SQL_SEEN_N {
                        k.seen |= 1 << i;
                    } else {
                        k.strong = true;
                    }
                }
            }
        }
    }
    k
}

/// Whether the six-letter statement word at `p` is followed by whitespace
/// and a byte that can begin the rest of its [`SQL_ANY_CASE`] shape
/// (`select *|count|distinct`, `insert into`, `create table`, `delete from`,
/// `update name`): most statement words are English or code, not SQL.
fn statement_continues(b: &[u8], p: usize) -> bool {
    let end = p + 6;
    let ws = b.get(end..).map_or(0, |r| {
        r.iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
            .count()
    });
    let Some(next) = b.get(end + ws).map(u8::to_ascii_lowercase) else {
        return false;
    };
    ws > 0
        && match b.get(p).map(u8::to_ascii_lowercase) {
            Some(b's') => matches!(next, b'*' | b'c' | b'd'),
            Some(b'i') => next == b'i',
            Some(b'c') => next == b't',
            Some(b'd') => next == b'f',
            _ => is_word_byte(next),
        }
}

/// Strong anchors, or three distinct keywords one of which is weak.
fn is_sql(text: &str, words: &LowerWords, k: &SqlKeywords) -> bool {
    let b = text.as_bytes();
    let starts_word = |p: usize| p == 0 || b.get(p - 1).is_none_or(|&c| !is_word_byte(c));
    for &p in &words.statements {
        if starts_word(p)
            && statement_continues(b, p)
            && text.get(p..).is_some_and(|r| SQL_ANY_CASE.is_match(r))
        {
            return true;
        }
    }
    let weak = (1u64 << SQL_WEAK.len()) - 1;
    (k.seen & weak != 0 && k.seen.count_ones() >= 3) || (k.strong && SQL_STRONG.is_match(text))
}
// ---------------------------------------------------------------- tracebacks

pub(crate) static TRACE_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?m)Traceback \(most recent call last\):",
        r#"|Exception in thread "[^"\n]*" "#,
        r"|thread '[^'\n]*' panicked at ",
        r"|panicked at [^\n]*\.rs:[0-9]+:[0-9]+",
        r"|^goroutine [0-9]+ \[[a-z ]+\]:",
        r"|^[[A-Za-z0-9_].$]*(?:Error|Exception)(?::[^\n]*)?\r?\n[ \t]+at [^\n]+(?:\.(?:java|kt|scala|groovy):[0-9]+\)|:[0-9]+:[0-9]+\)?)",
    ))
});

pub(crate) static TRACE_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?m)^[ \t]+at [^\n]*?(?:\.(?:java|kt|scala|groovy):[0-9]+\)|\(Native Method\)|\(Unknown Source\)|:[0-9]+:[0-9]+\)?)\r?$",
        r#"|^[ \t]*File "[^"\n]+", line [0-9]+"#,
        r"|^[ \t]+[0-9]+: [[A-Za-z0-9_]:<>${}\[\] ]+?::[[A-Za-z0-9_]:<>${}\[\] ]+\r?$",
    ))
});

/// Python, Java/Kotlin, Rust, Node and Go stack traces: a header, or two
/// frame lines. `frame_like` says whether some line starts like a frame (the
/// scan's gate for the patterns without a literal), `literal` whether a
/// header literal occurs ([`LowerWords`]).
fn has_traceback(text: &str, frame_like: bool, literal: bool) -> bool {
    (frame_like || literal)
        && (TRACE_HEADER.is_match(text) || TRACE_FRAME.find_iter(text).nth(1).is_some())
}

/// A line that starts like a stack frame: `File "`, or indented `at ` or
/// `12: ` (the Java header alternative has such a line too).
fn frame_like_line(lb: &[u8]) -> bool {
    let k = lb.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
    let rest = lb.get(k..).unwrap_or(&[]);
    if rest.starts_with(b"File \"") {
        return true;
    }
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    k > 0
        && (rest.starts_with(b"at ")
            || (digits > 0 && rest.get(digits..).is_some_and(|r| r.starts_with(b": "))))
}

// ---------------------------------------------------------------- soft

/// Candidate patterns, one per soft reason, in [`SOFT_REASONS`] order.
pub(crate) const SOFT_PATTERNS: &[&str] = &[
    // url
    r"(?-u:\b)https?://[A-Za-z0-9\[]",
    // email
    r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}(?-u:\b)",
    // phone
    r"(?:(?:\+[0-9]{1,3}[ .\-]?)?(?:\([0-9]{3}\) ?|(?-u:\b)[0-9]{3}[ .\-])[0-9]{3}[ .\-][0-9]{4}|\+[0-9]{1,3}[ .\-][0-9]{1,4}(?:[ .\-][0-9]{2,4}){2,3})(?-u:\b)",
    // version_number
    r"(?-u:\b)(?:v[0-9]+(?:\.[0-9]+){1,3}|[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?)(?-u:\b)",
    // hash_or_sha
    r"(?-u:\b)[0-9a-fA-F]{40,64}(?-u:\b)",
    // file_path
    r"(?m)(?:^|[ \t(\['`=,:])(?:~|\.{1,2})?/[[A-Za-z0-9_].\-]+(?:/[[A-Za-z0-9_].\-]+)+|(?:^|[ \t(\['`=,])[[A-Za-z0-9_].\-]+(?:/[[A-Za-z0-9_].\-]+)+\.[A-Za-z0-9]{1,8}(?-u:\b)",
    // ip_or_semver
    r"(?-u:\b)[0-9]+(?:\.[0-9]+){2,}(?-u:\b)",
    // quoted_key
    r#""[A-Za-z_$][[A-Za-z0-9_]$.\-]*"[ \t\r\n]*:"#,
    // legal_term
    r"(?i-u:(?-u:\b)(?:shall|notwithstanding|whereas|hereinafter|hereby|herein|hereto|thereof|pursuant[ \t\r\n]+to|indemnif(?:y|ies|ied|ication)|in[ \t\r\n]+witness[ \t\r\n]+whereof)(?-u:\b))",
    // direct_quote
    "\"[^\"\n]{11,}\"|\u{201c}[^\u{201d}\n]{11,}\u{201d}|\u{ab}[^\u{bb}\n]{11,}\u{bb}",
    // numeric_with_units
    r"(?-u:\b)[0-9]+(?:\.[0-9]+)?(?:[ ]?(?:ms|ns|µs|sec|secs|seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|[KMGTP]i?B|kB|bytes?|[kMG]?Hz|km|cm|mm|kg|mg|kW|mV|mA|°[CF]|px|rem|fps|rpm|[KMG]bps)|(?:s|h|m|g|V|W|A|K|B|em))(?-u:\b)",
];

pub(crate) const SOFT_REASONS: &[Reason] = &[
    Reason::Url,
    Reason::Email,
    Reason::Phone,
    Reason::VersionNumber,
    Reason::HashOrSha,
    Reason::FilePath,
    Reason::IpOrSemver,
    Reason::QuotedKey,
    Reason::LegalTerm,
    Reason::DirectQuote,
    Reason::NumericWithUnits,
];

/// The [`SOFT_PATTERNS`] compiled on first use: several reasons are matched
/// by hand and never need theirs.
static SOFT_RES: [OnceLock<Regex>; SOFT_PATTERNS.len()] =
    [const { OnceLock::new() }; SOFT_PATTERNS.len()];

const _: () = assert!(SOFT_PATTERNS.len() == SOFT_REASONS.len());

/// The compiled pattern of the soft reason at index `reason` (< the number of
/// soft reasons).
fn soft_re(reason: usize) -> &'static Regex {
    SOFT_RES[reason].get_or_init(|| re(SOFT_PATTERNS[reason]))
}

/// Index of a soft reason in [`SOFT_REASONS`] (for use in `const` blocks).
const fn soft_index(r: Reason) -> usize {
    let mut i = 0;
    while i < SOFT_REASONS.len() {
        if SOFT_REASONS[i] as u8 == r as u8 {
            return i;
        }
        i += 1;
    }
    panic!("not a soft reason")
}

/// The soft reasons of `text`, each looked for only where its anchor or gate
/// says it can be. Written out one by one, not as a loop over the reasons: a
/// `match` per reason was an indirect jump that mispredicted most calls.
fn soft_reasons(text: &str, s: &Scan, runs: &TokenRuns, words: &LowerWords, out: &mut Vec<Reason>) {
    let b = text.as_bytes();
    let quote = s.present.may(P_QUOTE) && has(b, b'"');
    let found = [
        (Reason::Url, s.present.may(P_COLON) && has_url(b)),
        (
            Reason::Email,
            s.present.may(P_AT)
                && has(b, b'@')
                && soft_re(const { soft_index(Reason::Email) }).is_match(text),
        ),
        (
            Reason::Phone,
            s.any(Gate::Phone, text, |t| {
                soft_re(const { soft_index(Reason::Phone) }).is_match(t)
            }),
        ),
        (
            Reason::VersionNumber,
            s.any(Gate::DotNum, text, |t| {
                soft_re(const { soft_index(Reason::VersionNumber) })
                    .find_iter(t)
                    .any(|m| {
                        m.as_str().starts_with('v') || !inside_longer_dotted(t, m.start(), m.end())
                    })
            }),
        ),
        (Reason::HashOrSha, runs.hash),
        (Reason::FilePath, s.path),
        (
            Reason::IpOrSemver,
            s.any(Gate::DotNum, text, |t| {
                soft_re(const { soft_index(Reason::IpOrSemver) }).is_match(t)
            }),
        ),
        (Reason::QuotedKey, quote && has_quoted_key(b)),
        (
            Reason::LegalTerm,
            words.legal && soft_re(const { soft_index(Reason::LegalTerm) }).is_match(text),
        ),
        (Reason::DirectQuote, has_direct_quote(b, quote, s.ascii)),
        (Reason::NumericWithUnits, s.units),
    ];
    out.extend(found.iter().filter(|f| f.1).map(|f| f.0));
}

/// `http://` or `https://` at a word start, then a letter, digit or `[`.
fn has_url(b: &[u8]) -> bool {
    FINDERS.scheme.find_iter(b).any(|p| {
        let host = b
            .get(p + 3)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'[');
        let scheme = |n: usize, s: &[u8]| {
            p >= n
                && b.get(p - n..p) == Some(s)
                && (p == n || b.get(p - n - 1).is_none_or(|&c| !is_word_byte(c)))
        };
        host && (scheme(4, b"http") || scheme(5, b"https"))
    })
}

/// `"key":` (JSON-style quoted key, whitespace allowed before the colon).
fn has_quoted_key(b: &[u8]) -> bool {
    memchr::memchr_iter(b'"', b).any(|q| {
        if !b
            .get(q + 1)
            .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_' || c == b'$')
        {
            return false;
        }
        let mut j = q + 2;
        while b
            .get(j)
            .is_some_and(|&c| is_word_byte(c) || matches!(c, b'$' | b'.' | b'-'))
        {
            j += 1;
        }
        if b.get(j) != Some(&b'"') {
            return false;
        }
        j += 1;
        while b
            .get(j)
            .is_some_and(|&c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        {
            j += 1;
        }
        b.get(j) == Some(&b':')
    })
}

/// A quotation of 11+ characters on one line: `"..."`, curly or guillemets.
fn has_direct_quote(b: &[u8], quote: bool, ascii: bool) -> bool {
    let [plain, curly, guillemets] = &FINDERS.quotes;
    (quote && quoted(b, plain)) || (!ascii && (quoted(b, curly) || quoted(b, guillemets)))
}

/// Some `open`, then 11+ characters without `close` or a newline, then
/// `close`. The next close and newline are found once per stretch between
/// them, so many openers before one close stay linear.
fn quoted(
    b: &[u8],
    (open, close_finder): &(
        memchr::memmem::Finder<'static>,
        memchr::memmem::Finder<'static>,
    ),
) -> bool {
    let (mut next_close, mut next_nl) = (None::<usize>, None::<usize>);
    open.find_iter(b).any(|q| {
        let start = q + open.needle().len();
        if next_close.is_none_or(|c| c < start) {
            next_close = Some(
                b.get(start..)
                    .and_then(|r| close_finder.find(r))
                    .map_or(usize::MAX, |c| start + c),
            );
        }
        if next_nl.is_none_or(|n| n < start) {
            next_nl = Some(
                b.get(start..)
                    .and_then(|r| memchr::memchr(b'\n', r))
                    .map_or(usize::MAX, |n| start + n),
            );
        }
        let (c, n) = (
            next_close.unwrap_or(usize::MAX),
            next_nl.unwrap_or(usize::MAX),
        );
        c < n
            && c != usize::MAX
            && b.get(start..c).is_some_and(|inner| {
                inner.len() >= 44 || inner.iter().filter(|&&x| x & 0xC0 != 0x80).count() >= 11
            })
    })
}

/// True when `start..end` continues a longer dotted number (`192.168.1` in
/// `192.168.1.1`).
pub(crate) fn inside_longer_dotted(text: &str, start: usize, end: usize) -> bool {
    let b = text.as_bytes();
    let after = b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit);
    let before = start >= 2
        && b.get(start - 1) == Some(&b'.')
        && b.get(start - 2).is_some_and(u8::is_ascii_digit);
    after || before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Scan {
        MASKS.with_borrow_mut(|m| scan_with(text, m))
    }

    #[test]
    fn long_token_runs_are_the_maximal_runs_of_20() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3000 {
            // dense words (three draws or-ed) make long runs and runs across words
            let words: Vec<u64> = (0..next() % 5)
                .map(|_| match next() % 4 {
                    0 => u64::MAX,
                    1 => next(),
                    _ => next() | next() | next(),
                })
                .collect();
            let set = |i: usize| words[i / 64] >> (i % 64) & 1 == 1;
            let mut naive = Vec::new();
            let mut i = 0;
            while i < 64 * words.len() {
                let e = (i..64 * words.len())
                    .find(|&j| !set(j))
                    .unwrap_or(64 * words.len());
                if e - i >= 20 {
                    naive.push((i, e));
                }
                i = e + 1;
            }
            assert_eq!(long_token_runs(&words), naive, "{words:x?}");
        }
    }

    #[test]
    fn trim_start_is_the_std_trim() {
        for t in [
            "",
            "   ",
            "a",
            " a ",
            "\t\r\n x",
            "\u{b} x",
            " \u{a0}x",
            "\t\u{3000}y",
            "\u{1c}z",
            "é",
        ] {
            assert_eq!(trim_start(t), t.trim_start(), "{t:?}");
        }
    }

    #[test]
    fn prose_chars_counts_outside_fences() {
        assert_eq!(prose_chars("ab\n```\nxxxxxxxx\n```\n cd "), 4);
        assert_eq!(prose_chars(""), 0);
    }

    #[test]
    fn word_counts_cjk() {
        assert_eq!(count_words("one two  three", usize::MAX), 3);
        assert_eq!(count_words("日本語です", usize::MAX), 5);
        assert_eq!(count_words("", usize::MAX), 0);
        assert_eq!(count_words(" a\tb\n\nc ", usize::MAX), 3);
        assert_eq!(count_words(&"w ".repeat(100), 20), 20);
        assert_eq!(count_words("é a", usize::MAX), 2);
    }

    #[test]
    fn special_ratio_ignores_markdown_emphasis() {
        let s = scan("# Title\n* **Bold**: text");
        assert_eq!(s.special, 1);
    }

    #[test]
    fn line_variance_needs_more_than_three_lines() {
        let t = format!("a\n{}\nb", "x".repeat(500));
        assert!(!scan(&t).lines.high_variance());
        let t = format!("a\nb\nc\nd\ne\n{}", "x".repeat(500));
        assert!(scan(&t).lines.high_variance());
    }

    /// Every text of every message of the shared corpus: string contents and
    /// the text of content blocks (empty when `../shared` is absent).
    fn corpus_texts() -> Vec<String> {
        fn collect(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::String(s) if !s.is_empty() => out.push(s.clone()),
                serde_json::Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
                serde_json::Value::Object(o) => {
                    for k in ["text", "content"] {
                        if let Some(x) = o.get(k) {
                            collect(x, out);
                        }
                    }
                }
                _ => {}
            }
        }
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus");
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return out;
        };
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            for line in std::fs::read_to_string(&p).unwrap_or_default().lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                for m in v["messages"].as_array().into_iter().flatten() {
                    collect(&m["content"], &mut out);
                }
            }
        }
        out
    }

    #[test]
    fn agrees_with_reference_on_the_corpus() {
        let texts = corpus_texts();
        let mut differ = Vec::new();
        for t in &texts {
            let (fast, slow) = (classify(t), crate::reference::classify(t));
            if fast != slow {
                differ.push(format!(
                    "{:?}\n  fast {fast:?}\n  ref  {slow:?}",
                    t.chars().take(160).collect::<String>()
                ));
            }
        }
        assert!(
            differ.is_empty(),
            "{} of {} texts differ:\n{}",
            differ.len(),
            texts.len(),
            differ
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// Pieces that trigger (or nearly trigger) every detector and gate.
    const PIECES: &[&str] = &[
        " ",
        " ",
        " ",
        "\n",
        "\n",
        "\r\n",
        "\t",
        "    ",
        "\u{b}",
        "\u{a0}",
        "\u{3000}",
        "word",
        "the",
        "Light",
        "I",
        "é",
        "日本",
        "≥",
        "∑",
        "→",
        ".",
        ",",
        ":",
        ";",
        "=",
        "-",
        "_",
        "/",
        "\\",
        "$",
        "$$",
        "\"",
        "'",
        "`",
        "```",
        "~~~",
        "~",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "<",
        "@",
        "#",
        "# ",
        "* ",
        "+ ",
        "- ",
        "*",
        "**",
        "***",
        "1",
        "42",
        "2024",
        "3.",
        "1.2",
        "1.2.3",
        "v1.2",
        "192.168.0.1",
        "555-123-4567",
        "(555) 123-4567",
        "+44 20 7946 0958",
        "+44-20-7946-0958",
        "+49.30.1234.5678",
        "+1(555) 123-4567",
        "+1",
        "(",
        ")",
        "3ms",
        "10 MB",
        "5 µs",
        "20°C",
        "7s",
        "/usr/bin/env",
        "src/main.rs",
        "~/a/b",
        "./x/y",
        "a@b.com",
        "https://x.io/a",
        "\"key\": ",
        "\"a quoted sentence here\"",
        "“a curly quoted text”",
        "shall",
        "Pursuant to",
        "hereby",
        "SELECT",
        "select * from t",
        "GROUP BY",
        "NOT NULL",
        "WHERE",
        "JOIN",
        "FROM",
        "update t set x =",
        "delete from t where ",
        "AKIAIOSFODNN7EXAMPLE",
        "AUTO_INCREMENT",
        "XSELECT",
        "SELECTED",
        "MAX_SIZE",
        "INTO",
        "VARCHAR(20)",
        "selec",
        "Traceback",
        "goroutine 1 [running]:",
        "panicked at ",
        "selecTraceback (most recent call last):",
        "updatException in thread \"main\" ",
        "thereof",
        "whereas",
        "herein",
        "indemnify",
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
        "token_9fK2mQ7xR4tB8wN1pL6vC3jH5d",
        "3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
        "abcdefghijklmnopqrstuvwxyz_0123456789",
        "\\frac{a}{b}",
        "\\(x\\)",
        "\\[x\\]",
        "$x^2$",
        "$a$",
        "$é$",
        "$ab$",
        "$a b+c$",
        "\\begin{align*}",
        "\\begin{equation}",
        "\\begin{foo}",
        "\\sum_",
        "\\alpha",
        "\\integral",
        "\\n",
        "$HOME",
        "@@ -1,2 +1,2 @@",
        "$ ls",
        "key: value",
        "[section]",
        "a = b",
        "Traceback (most recent call last):",
        "  File \"x.py\", line 3",
        "\tat Foo.bar(Foo.java:12)",
        "panicked at src/a.rs:1:2",
        "{\"a\": 1}",
        "[1, 2]",
        "«",
        "»",
        "“",
        "”",
        "https://",
        "http://[",
        "xhttps://a",
        "\"k\"",
        "\"$k-1.x\"",
        "«un texte entre guillemets»",
        "a/b.tar.gz",
        "x/y_z.c_d",
        "(src/a.rs)",
        "=./p/q",
        "..",
        ":/a/b",
        "5 seconds",
        "3 files",
        "1.5ms",
        "10 MiB",
        "2kHz",
        "3em",
        "3 em",
        "2 h",
        "5µs",
        "µ",
        "4KiB",
        "9 secondsx",
        "7sx",
        "°F",
        "12345678901",
        "````",
        "   ```",
        "    ```",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        #[test]
        fn agrees_with_reference_on_random_texts(
            picks in proptest::collection::vec(0..PIECES.len(), 0..80)
        ) {
            let t: String = picks.iter().filter_map(|&i| PIECES.get(i).copied()).collect();
            proptest::prop_assert_eq!(classify(&t), crate::reference::classify(&t), "{:?}", t);
        }

        #[test]
        fn agrees_with_reference_on_random_lines(
            picks in proptest::collection::vec(0..LINES.len(), 0..14)
        ) {
            let t = picks.iter().filter_map(|&i| LINES.get(i).copied()).collect::<Vec<_>>().join("\n");
            proptest::prop_assert_eq!(classify(&t), crate::reference::classify(&t), "{:?}", t);
        }
    }

    /// Whole lines for the line-to-line state: verse, YAML, indented code,
    /// prompts, frames, and lines that break each run.
    const LINES: &[&str] = &[
        "The woods are lovely, dark and deep",
        "But I have promises to keep",
        "And miles to go before I sleep",
        "And Miles To Go Before I Sleep",
        "Whose woods these are I think I know.",
        "Short",
        "ALL CAPS LINE here again",
        "A line with = sign inside it",
        "",
        "   ",
        "name: ctxpress",
        "version: 1",
        "- item: one",
        "- plain item",
        "key = value",
        "[section]",
        "    let x = f(y);",
        "    return x;",
        "\tindented()",
        "$ ls -la",
        "@@ -1,2 +1,3 @@",
        "  File \"a.py\", line 3, in f",
        "    at Foo.bar(Foo.java:12)",
        "  12: core::panicking::panic",
        "Traceback (most recent call last):",
        "ordinary lower-case prose line here",
        "Ünïcödé Line With Accents In It",
        "\u{b}Vertical tab line starts here",
        "key:\t",
        "key:   ",
        "key:\u{a0}",
        "key:value",
        "https://example.com/path",
        "key =  ",
        "key = =x",
        "key =\u{3000}v",
        "[section]  \t",
        "- [a]",
        "-  ",
        "\u{c} at Foo.bar(Foo.java:12)",
        "\u{c}File \"a.py\", line 3",
        "File \"a.py\", line 3, in f",
        "at the start of a line",
        "12: not indented",
        "\t3: tab indented",
        "1984 was a year",
        "+ bullet",
        "## Heading",
        "#hashtag",
        "Whose woods these are I think I know.\u{b}",
        "Whose woods these are I think I know.\u{a0}",
        "Whose woods these are I think I know. ",
    ];
}
