//! The term scan: the information-bearing terms of a text (paths, compound
//! identifiers, versions) as the information check counts them
//! ([`for_each_term`]). It reads the text 64 bytes at a time as byte-class
//! bit masks ([`Block`]), finds the runs that hold a trigger byte and splits
//! them with an identifier automaton; JSON-escaped text reads like its
//! decoded strings ([`decodes_to_same_terms`]).

/// The classes of bytes the identifier automaton reads ([`WORD_CLASS`]).
const W_OTHER: u8 = 0;
const W_LOWER: u8 = 1;
const W_UPPER: u8 = 2;
const W_DIGIT: u8 = 3;
const W_UNDERSCORE: u8 = 4;
/// `.`: ends a word of a run.
const W_DOT: u8 = 5;
/// `/` or `-`: ends a word and a segment of a run.
const W_SEP: u8 = 6;

/// The class of each byte for the identifier automaton ([`IDENT`]).
static WORD_CLASS: [u8; 256] = {
    let mut t = [W_OTHER; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = if c.is_ascii_lowercase() {
            W_LOWER
        } else if c.is_ascii_uppercase() {
            W_UPPER
        } else if c.is_ascii_digit() {
            W_DIGIT
        } else if c == b'_' {
            W_UNDERSCORE
        } else if c == b'.' {
            W_DOT
        } else if c == b'/' || c == b'-' {
            W_SEP
        } else {
            W_OTHER
        };
        i += 1;
    }
    t
};

/// States of the identifier automaton: no identifier whatever follows.
const I_REJECT: u8 = 0;
/// Nothing read.
const I_START: u8 = 1;
/// `[a-z]+`: the head of a snake_case or camelCase word.
const I_LOWER: u8 = 2;
/// `[a-z][a-z0-9]*` with a digit: only snake_case can follow.
const I_SNAKE_HEAD: u8 = 3;
/// snake_case just after an underscore.
const I_SNAKE_MARK: u8 = 4;
/// `[a-z][a-z0-9]*(_[a-z0-9]+)+`: snake_case (accepting).
const I_SNAKE: u8 = 5;
/// The capital of a hump after the first of camelCase or PascalCase.
const I_HUMP_START: u8 = 6;
/// `[a-z]+([A-Z][a-z0-9]+)+` or `([A-Z][a-z0-9]+){2,}`: camelCase or
/// PascalCase (accepting).
const I_HUMP: u8 = 7;
/// The capital of the first hump of PascalCase.
const I_FIRST_CAP: u8 = 8;
/// The first hump of PascalCase, `[A-Z][a-z0-9]+`.
const I_FIRST_HUMP: u8 = 9;

/// The identifier automaton: the next state by state and [`WORD_CLASS`]
/// (rows padded to sixteen states and eight classes, so that indexing
/// needs no check). It reads snake_case, camelCase and PascalCase at
/// once: [`is_identifier`] and the words of [`split_run`].
static IDENT: [[u8; 8]; 16] = {
    let mut t = [[I_REJECT; 8]; 16];
    let (l, u, d, us) = (
        W_LOWER as usize,
        W_UPPER as usize,
        W_DIGIT as usize,
        W_UNDERSCORE as usize,
    );
    t[I_START as usize][l] = I_LOWER;
    t[I_START as usize][u] = I_FIRST_CAP;
    t[I_LOWER as usize][l] = I_LOWER;
    t[I_LOWER as usize][u] = I_HUMP_START;
    t[I_LOWER as usize][d] = I_SNAKE_HEAD;
    t[I_LOWER as usize][us] = I_SNAKE_MARK;
    t[I_SNAKE_HEAD as usize][l] = I_SNAKE_HEAD;
    t[I_SNAKE_HEAD as usize][d] = I_SNAKE_HEAD;
    t[I_SNAKE_HEAD as usize][us] = I_SNAKE_MARK;
    t[I_SNAKE_MARK as usize][l] = I_SNAKE;
    t[I_SNAKE_MARK as usize][d] = I_SNAKE;
    t[I_SNAKE as usize][l] = I_SNAKE;
    t[I_SNAKE as usize][d] = I_SNAKE;
    t[I_SNAKE as usize][us] = I_SNAKE_MARK;
    t[I_HUMP_START as usize][l] = I_HUMP;
    t[I_HUMP_START as usize][d] = I_HUMP;
    t[I_HUMP as usize][l] = I_HUMP;
    t[I_HUMP as usize][d] = I_HUMP;
    t[I_HUMP as usize][u] = I_HUMP_START;
    t[I_FIRST_CAP as usize][l] = I_FIRST_HUMP;
    t[I_FIRST_CAP as usize][d] = I_FIRST_HUMP;
    t[I_FIRST_HUMP as usize][l] = I_FIRST_HUMP;
    t[I_FIRST_HUMP as usize][d] = I_FIRST_HUMP;
    t[I_FIRST_HUMP as usize][u] = I_HUMP_START;
    t
};

/// Not a state: the byte read was `.` (a word of a run ends).
const I_DOT_END: u8 = 14;
/// Not a state: the byte read was `/` or `-` (a word and a segment end).
const I_SEP_END: u8 = 15;

/// [`IDENT`] by byte rather than class: one look-up a byte. `.`, `/` and
/// `-` lead from every state to [`I_DOT_END`] or [`I_SEP_END`], which lead
/// nowhere ([`I_REJECT`] on any byte).
static IDENT_BYTES: [[u8; 256]; 16] = {
    let mut t = [[I_REJECT; 256]; 16];
    let mut state = 0;
    while state < 14 {
        let mut c = 0;
        while c < 256 {
            let class = WORD_CLASS[c];
            t[state][c] = if class == W_DOT {
                I_DOT_END
            } else if class == W_SEP {
                I_SEP_END
            } else {
                IDENT[state][class as usize]
            };
            c += 1;
        }
        state += 1;
    }
    t
};

/// One step of the identifier automaton: the state after `state` reads `c`
/// (or [`I_DOT_END`], [`I_SEP_END`] at a word's end).
#[inline(always)]
fn ident_step(state: u8, c: u8) -> u8 {
    IDENT_BYTES[(state & 15) as usize][c as usize]
}

/// Whether the automaton accepts in `state`.
#[inline(always)]
fn ident_accepts(state: u8) -> bool {
    state == I_SNAKE || state == I_HUMP
}

/// A compound identifier: snake_case, camelCase or PascalCase, read in one
/// pass (a word's first byte that fits none ends the reading).
fn is_identifier(w: &[u8]) -> bool {
    let mut state = I_START;
    for &c in w {
        state = ident_step(state, c);
        if state == I_REJECT {
            return false;
        }
    }
    ident_accepts(state)
}

fn is_version(w: &[u8]) -> bool {
    // v?\d+.\d+.\d+
    let w = w.strip_prefix(b"v").unwrap_or(w);
    let mut parts = 0;
    let mut len = 0;
    for c in w {
        if *c == b'.' {
            if len == 0 {
                return false;
            }
            parts += 1;
            len = 0;
        } else if c.is_ascii_digit() {
            len += 1;
        } else {
            return false;
        }
    }
    len > 0 && parts == 2
}

fn is_path(run: &[u8]) -> bool {
    let Some(slash) = run.iter().rposition(|c| *c == b'/') else {
        return false;
    };
    let name = run.get(slash + 1..).unwrap_or(&[]);
    match name.iter().rposition(|c| *c == b'.') {
        Some(dot) if dot > 0 => {
            let ext = name.get(dot + 1..).unwrap_or(&[]);
            (1..=6).contains(&ext.len())
                && ext.iter().all(u8::is_ascii_alphanumeric)
                && ext.iter().any(u8::is_ascii_alphabetic)
        }
        _ => false,
    }
}

const T_TOK: u8 = 1;
/// `_` or `/`.
const T_MARK: u8 = 2;
const T_UPPER: u8 = 4;
const T_DIGIT: u8 = 8;
const T_DOT: u8 = 16;
/// `-`, `/` or `.`: the bytes that split a run into segments and parts.
const T_SPLIT: u8 = 32;
/// `_`.
const T_UNDERSCORE: u8 = 64;
/// ASCII letters and digits, `_` and `$`: the bytes of a first word.
pub(super) const T_WORD: u8 = 128;

/// Byte classes for [`for_each_term`].
pub(super) static TERM_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        let mut k = 0;
        if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'/') {
            k |= T_TOK;
        }
        if c == b'_' || c == b'/' {
            k |= T_MARK;
        }
        if c.is_ascii_uppercase() {
            k |= T_UPPER;
        }
        if c.is_ascii_digit() {
            k |= T_DIGIT;
        }
        if c == b'.' {
            k |= T_DOT;
        }
        if matches!(c, b'-' | b'/' | b'.') {
            k |= T_SPLIT;
        }
        if c == b'_' {
            k |= T_UNDERSCORE;
        }
        if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$') {
            k |= T_WORD;
        }
        t[i] = k;
        i += 1;
    }
    t
};

/// Call `f` with each information-bearing term of `text`: paths (with an
/// extension), compound identifiers (camelCase, PascalCase, snake_case,
/// which covers error names) and versions. Bare numbers, sizes and hashes
/// are left out: in tool output they are mostly progress and timing noise.
/// With `json_escaped`, backslash escapes (`\n`, `\"`, `\u00e9`) separate
/// terms, so raw JSON argument text reads like its decoded strings.
pub fn for_each_term<'a>(text: &'a str, json_escaped: bool, f: impl FnMut(&'a str)) {
    // One copy of the scan per mode: the escape test is not made on every
    // byte of plain text.
    if json_escaped {
        scan_terms::<true, true>(text, f);
    } else {
        scan_terms::<false, true>(text, f);
    }
}

/// The classes of 64 bytes of a text, a bit a byte (bit `k`: the block's
/// byte `k`; bytes past the text's end are zeros, in no class). The scan
/// of [`for_each_term`] finds runs, their triggers and their terms with
/// bit operations on these instead of a loop over the bytes.
#[derive(Clone, Copy, Default)]
struct Block {
    lower: u64,
    upper: u64,
    digit: u64,
    under: u64,
    slash: u64,
    dot: u64,
    /// Term bytes ([`T_TOK`]): ASCII letters and digits, `_`, `.`, `-`, `/`.
    tok: u64,
    /// `\`: only looked for in JSON-escaped text.
    escape: u64,
}

/// The bits below bit `n` (all of them from 64 on).
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    if n >= 64 { !0 } else { (1u64 << n) - 1 }
}

/// The bits from bit `n` on (none from 64 on).
#[inline(always)]
fn bits_from(n: usize) -> u64 {
    if n >= 64 { 0 } else { !0u64 << n }
}

impl Block {
    /// The classes of the 64 bytes of `bytes` from `at` (zeros past its end).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn of<const JSON_ESCAPED: bool>(bytes: &[u8], at: usize) -> Block {
        use ctxpress_text::sse2::{eq, in_range};
        use safe_arch::{load_unaligned_m128i, m128i, move_mask_i8_m128i};
        let mut buf = [0u8; 64];
        let rest = bytes.get(at..).unwrap_or(&[]);
        let chunk = match rest.first_chunk::<64>() {
            Some(c) => c,
            None => {
                if let Some(head) = buf.get_mut(..rest.len()) {
                    head.copy_from_slice(rest);
                }
                &buf
            }
        };
        let mut b = Block::default();
        let mut dash = 0u64;
        for (k, lane) in chunk.chunks_exact(16).enumerate() {
            let Ok(lane) = <&[u8; 16]>::try_from(lane) else {
                continue;
            };
            let v = load_unaligned_m128i(lane);
            let at = 16 * k;
            let bits = |m: m128i| u64::from(move_mask_i8_m128i(m) as u16) << at;
            b.lower |= bits(in_range(v, b'a', 26));
            b.upper |= bits(in_range(v, b'A', 26));
            b.digit |= bits(in_range(v, b'0', 10));
            b.under |= bits(eq(v, b'_'));
            b.slash |= bits(eq(v, b'/'));
            b.dot |= bits(eq(v, b'.'));
            dash |= bits(eq(v, b'-'));
            if JSON_ESCAPED {
                b.escape |= bits(eq(v, b'\\'));
            }
        }
        b.tok = b.lower | b.upper | b.digit | b.under | b.slash | b.dot | dash;
        b
    }

    /// The classes of the 64 bytes of `bytes` from `at` (zeros past its
    /// end), a byte at a time (elsewhere than on x86-64).
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    fn of<const JSON_ESCAPED: bool>(bytes: &[u8], at: usize) -> Block {
        Block::of_bytes::<JSON_ESCAPED>(bytes, at)
    }

    /// [`Block::of`] a byte at a time (elsewhere than on x86-64, and the
    /// tests' check of the SIMD lanes).
    #[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
    fn of_bytes<const JSON_ESCAPED: bool>(bytes: &[u8], at: usize) -> Block {
        let mut b = Block::default();
        for (k, &c) in bytes.get(at..).unwrap_or(&[]).iter().take(64).enumerate() {
            let bit = 1u64 << k;
            let set = |m: &mut u64, yes: bool| {
                if yes {
                    *m |= bit;
                }
            };
            set(&mut b.lower, c.is_ascii_lowercase());
            set(&mut b.upper, c.is_ascii_uppercase());
            set(&mut b.digit, c.is_ascii_digit());
            set(&mut b.under, c == b'_');
            set(&mut b.slash, c == b'/');
            set(&mut b.dot, c == b'.');
            set(&mut b.tok, TERM_BYTES[c as usize] & T_TOK != 0);
            set(&mut b.escape, JSON_ESCAPED && c == b'\\');
        }
        b
    }

    /// The triggers of the block (see [`for_each_term`]'s scan): `_`, `/`,
    /// a capital after a lower-case letter or a digit, a dot after a digit,
    /// and (`JSON_ESCAPED`) `\`; `before` is the block before it.
    #[inline(always)]
    fn triggers<const JSON_ESCAPED: bool>(&self, before: &Block) -> u64 {
        let word = self.lower | self.digit;
        let word_before = word << 1 | (before.lower | before.digit) >> 63;
        let digit_before = self.digit << 1 | before.digit >> 63;
        let mut t =
            self.under | self.slash | (self.upper & word_before) | (self.dot & digit_before);
        if JSON_ESCAPED {
            t |= self.escape;
        }
        t
    }

    /// The classes a run needs of the 64 bytes from bit `off` (0 to 63) of
    /// `self` on, `next` being the block after it (`tok` and `escape` left
    /// out: every byte of a run is a term byte).
    #[inline(always)]
    fn window(&self, next: &Block, off: usize) -> Block {
        // `b << (64 - off)` in two steps, so that `off == 0` shifts out all.
        let w = |a: u64, b: u64| a >> off | (b << 1) << (63 - off);
        Block {
            lower: w(self.lower, next.lower),
            upper: w(self.upper, next.upper),
            digit: w(self.digit, next.digit),
            under: w(self.under, next.under),
            slash: w(self.slash, next.slash),
            dot: w(self.dot, next.dot),
            tok: 0,
            escape: 0,
        }
    }
}

/// Whether the word of `n` bytes (1 to 64) whose classes are `lower`,
/// `upper`, `digit` and `under` (bit 0: its first byte; every byte in one
/// of them) is a compound identifier: [`is_identifier`] by bit operations.
#[inline(always)]
fn is_identifier_bits(lower: u64, upper: u64, digit: u64, under: u64, n: usize) -> bool {
    let Some(last) = n.checked_sub(1).and_then(|k| 1u64.checked_shl(k as u32)) else {
        return false;
    };
    if under != 0 {
        // snake_case: `[a-z][a-z0-9]*(_[a-z0-9]+)+`.
        return upper == 0 && lower & 1 != 0 && under & (under >> 1) == 0 && under & last == 0;
    }
    // camelCase `[a-z]+([A-Z][a-z0-9]+)+`, PascalCase `([A-Z][a-z0-9]+){2,}`:
    // no capital after another nor last.
    if upper & (upper >> 1) != 0 || upper & last != 0 {
        return false;
    }
    if lower & 1 != 0 {
        // A capital, and no digit before the first.
        upper != 0 && digit & ((upper & upper.wrapping_neg()) - 1) == 0
    } else {
        // Two capitals, the first first.
        upper & 1 != 0 && upper & (upper - 1) != 0
    }
}

/// The terms of the run `start..start + n` of `text` (1 to 64 bytes; not
/// a term byte either side, or the scan's start before it), whose classes
/// are `w` (bit 0: its first byte): as [`run_terms_bytes`] finds them.
#[inline(always)]
fn run_terms_bits<'a, const FAST: bool>(
    text: &'a str,
    start: usize,
    n: usize,
    w: &Block,
    f: &mut impl FnMut(&'a str),
) {
    let r = low_bits(n);
    let (lower, upper, digit, under) = (w.lower & r, w.upper & r, w.digit & r, w.under & r);
    let (slash, dot) = (w.slash & r, w.dot & r);
    let mark = under | slash;
    let upper_inside = upper & !1;
    let dotted_number = digit != 0 && dot != 0;
    if mark == 0 && upper_inside == 0 && !dotted_number {
        return;
    }
    // `-`, `/` and `.`.
    let split = r & !(lower | upper | digit | under);
    let term = |a: usize, b: usize| text.get(start + a..start + b);
    if FAST && split == 0 {
        if is_identifier_bits(lower, upper, digit, under, n)
            && let Some(t) = term(0, n)
        {
            f(t);
        }
        return;
    }
    // Trimmed of `.`, `-` and `/` at both ends.
    let keep = r & !split;
    if keep == 0 {
        return;
    }
    let a = keep.trailing_zeros() as usize;
    let b = 64 - keep.leading_zeros() as usize;
    if mark != 0
        && is_path_bits(lower | upper | digit, lower | upper, slash, dot, a, b)
        && let Some(t) = term(a, b)
    {
        f(t);
    }
    let identifiers = under != 0 || upper_inside != 0;
    if !(identifiers || dotted_number) {
        return;
    }
    // As `split_run`: each word between splits an identifier or not, each
    // segment between `/` and `-` a version or not (reported as it ends).
    let seps = split & !dot;
    let bytes = text.as_bytes();
    let version = |s: usize, e: usize| {
        let seg = bytes.get(start + s..start + e)?;
        (seg.first()
            .is_some_and(|c| c.is_ascii_digit() || *c == b'v')
            && is_version(seg))
        .then(|| term(s, e))
        .flatten()
    };
    // The splits inside the trimmed run: its last byte is none, so a word
    // after one starts before bit 64.
    let inner = split & low_bits(b);
    let mut seg = a;
    let mut word = a;
    loop {
        let ends = inner & u64::MAX.wrapping_shl(word as u32);
        let end = if ends == 0 {
            b
        } else {
            ends.trailing_zeros() as usize
        };
        if identifiers && end > word {
            // One to 64 bits.
            let wm = u64::MAX.wrapping_shr((64 - (end - word)) as u32);
            let at = |m: u64| (m >> word) & wm;
            if is_identifier_bits(at(lower), at(upper), at(digit), at(under), end - word)
                && let Some(t) = term(word, end)
            {
                f(t);
            }
        }
        if end >= b {
            break;
        }
        if seps >> end & 1 != 0 {
            if let Some(t) = version(seg, end) {
                f(t);
            }
            seg = end + 1;
        }
        word = end + 1;
    }
    if let Some(t) = version(seg, b) {
        f(t);
    }
}

/// [`is_path`] of the trimmed run `a..b` of a window by its classes:
/// a slash, then a name with a dot after its first byte, then an extension
/// of one to six letters and digits with a letter.
#[inline(always)]
fn is_path_bits(alnum: u64, alpha: u64, slash: u64, dot: u64, a: usize, b: usize) -> bool {
    let run = bits_from(a) & low_bits(b);
    let slashes = slash & run;
    if slashes == 0 {
        return false;
    }
    let name = (64 - slashes.leading_zeros() as usize).min(b);
    let dots = dot & bits_from(name + 1) & low_bits(b);
    if dots == 0 {
        return false;
    }
    let ext_start = 64 - dots.leading_zeros() as usize;
    let ext = bits_from(ext_start) & low_bits(b);
    let len = b - ext_start;
    (1..=6).contains(&len) && alnum & ext == ext && alpha & ext != 0
}

/// The terms of the run `start..end` of `text` read a byte at a time: the
/// scan's way with a run longer than 64 bytes.
fn run_terms_bytes<'a, const FAST: bool>(
    text: &'a str,
    start: usize,
    end: usize,
    f: &mut impl FnMut(&'a str),
) {
    let bytes = text.as_bytes();
    let Some(run) = bytes.get(start..end) else {
        return;
    };
    let first = run.first().map_or(0, |c| TERM_BYTES[*c as usize]);
    let upper_inside = run
        .iter()
        .skip(1)
        .fold(0u8, |k, c| k | TERM_BYTES[*c as usize]);
    let seen = first | upper_inside;
    let interesting = seen & T_MARK != 0 || upper_inside & T_UPPER != 0;
    if !(interesting || (seen & T_DIGIT != 0 && seen & T_DOT != 0)) {
        return;
    }
    if FAST && seen & T_SPLIT == 0 {
        if is_identifier(run)
            && let Some(t) = text.get(start..end)
        {
            f(t);
        }
        return;
    }
    let split = |c: &u8| matches!(c, b'.' | b'-' | b'/');
    let a = start + run.iter().take_while(|c| split(c)).count();
    let b = (end - run.iter().rev().take_while(|c| split(c)).count()).max(a);
    let (Some(run), Some(run_str)) = (bytes.get(a..b), text.get(a..b)) else {
        return;
    };
    if seen & T_MARK != 0 && is_path(run) {
        f(run_str);
    }
    let identifiers = seen & T_UNDERSCORE != 0 || upper_inside & T_UPPER != 0;
    if identifiers || (seen & T_DIGIT != 0 && seen & T_DOT != 0) {
        split_run(run, run_str, identifiers, f);
    }
}

/// The scan of [`for_each_term`]; `FAST` takes the short cut for plain
/// words (the tests compare it with the long way).
///
/// The text is read 64 bytes at a time ([`Block`]): the triggers of a
/// block are its bits, and the run through a trigger ends at the nearest
/// non-term bytes either side of it, found in the block's bits or its
/// neighbours'; a run of at most 64 bytes is judged and split on the bits
/// of a window over the two blocks it lies in, a longer one a byte at a
/// time ([`run_terms_bytes`]). `scan_terms_walk` (tests) is the scan it
/// answers as.
fn scan_terms<'a, const JSON_ESCAPED: bool, const FAST: bool>(
    text: &'a str,
    mut f: impl FnMut(&'a str),
) {
    let bytes = text.as_bytes();
    let len = bytes.len();
    let is_tok = |k: usize| {
        bytes
            .get(k)
            .is_some_and(|c| TERM_BYTES[*c as usize] & T_TOK != 0)
    };
    let mut prev = Block::default();
    let mut cur = Block::of::<JSON_ESCAPED>(bytes, 0);
    let mut base = 0usize;
    // Everything before `i` is done: it is never inside a run, except
    // after an escape (a run then starts at `i`).
    let mut i = 0usize;
    while base < len {
        let next = if base + 64 < len {
            Block::of::<JSON_ESCAPED>(bytes, base + 64)
        } else {
            Block::default()
        };
        let mut triggers = cur.triggers::<JSON_ESCAPED>(&prev);
        loop {
            triggers &= bits_from(i.saturating_sub(base));
            if triggers == 0 {
                break;
            }
            let t = triggers.trailing_zeros() as usize;
            // The bits below the trigger's.
            let below = (triggers & triggers.wrapping_neg()).wrapping_sub(1);
            let p = base + t;
            if JSON_ESCAPED && cur.escape >> t & 1 != 0 {
                i = p + if bytes.get(p + 1) == Some(&b'u') {
                    6
                } else {
                    2
                };
                continue;
            }
            // The run's start: after the last non-term byte before `p`.
            let before = !cur.tok & below;
            let start = if before != 0 {
                base + 64 - before.leading_zeros() as usize
            } else if i >= base {
                i
            } else if !prev.tok != 0 {
                base - (!prev.tok).leading_zeros() as usize
            } else {
                // Longer than the block before: walked back.
                let mut s = base - 64;
                while s > i && is_tok(s - 1) {
                    s -= 1;
                }
                s
            }
            .max(i);
            // Its end: the first non-term byte after `p`.
            let after = !cur.tok & !below;
            let end = if after != 0 {
                base + after.trailing_zeros() as usize
            } else if !next.tok != 0 {
                base + 64 + (!next.tok).trailing_zeros() as usize
            } else {
                let mut e = base + 128;
                while is_tok(e) {
                    e += 1;
                }
                e
            };
            let n = end - start;
            if n <= 64 && start + 64 >= base {
                let w = if start < base {
                    prev.window(&cur, start + 64 - base)
                } else {
                    cur.window(&next, start - base)
                };
                run_terms_bits::<FAST>(text, start, n, &w, &mut f);
            } else {
                run_terms_bytes::<FAST>(text, start, end, &mut f);
            }
            i = end;
        }
        prev = cur;
        cur = next;
        base += 64;
    }
}

/// The versions and identifiers of a trimmed run (which neither starts nor
/// ends with `.`, `-` or `/`): its segments between `/` and `-`, each a
/// version or split at dots into identifiers (only looked for with
/// `identifiers`). One pass: each word is read by the identifier automaton
/// as the bytes go by, and reported when it ends (the words of a version,
/// digits or `v` and digits, are never identifiers, so a segment reports
/// either its version or its identifiers, as `split_run_reference` (tests) does).
fn split_run<'a>(run: &[u8], run_str: &'a str, identifiers: bool, f: &mut impl FnMut(&'a str)) {
    let mut seg = 0;
    let mut word = 0;
    // The segment `seg..end` ends: reported if a version.
    #[inline(always)]
    fn end_segment<'a>(
        run: &[u8],
        run_str: &'a str,
        seg: usize,
        end: usize,
        f: &mut impl FnMut(&'a str),
    ) {
        if let (Some(s), Some(s_str)) = (run.get(seg..end), run_str.get(seg..end))
            && s.first().is_some_and(|c| c.is_ascii_digit() || *c == b'v')
            && is_version(s)
        {
            f(s_str);
        }
    }
    loop {
        // The word from `word`: read to its end, or to the run's.
        let mut state = I_START;
        let len = run.get(word..).and_then(|rest| {
            rest.iter().position(|&c| {
                let next = ident_step(state, c);
                if next >= I_DOT_END {
                    return true;
                }
                state = next;
                false
            })
        });
        let end = len.map_or(run.len(), |k| word + k);
        if identifiers
            && ident_accepts(state)
            && let Some(w) = run_str.get(word..end)
        {
            f(w);
        }
        if len.is_none() {
            break;
        }
        if matches!(run.get(end), Some(b'/' | b'-')) {
            end_segment(run, run_str, seg, end, f);
            seg = end + 1;
        }
        word = end + 1;
    }
    end_segment(run, run_str, seg, run.len(), f);
}

/// True when the raw JSON string content `raw` (between its quotes)
/// decodes to `text`, and every escape in it stands for a character that
/// is not a term byte: then [`for_each_term`] finds the same terms, in the
/// same order, in `raw` read as escaped JSON and in `text` read plain
/// (an escape and the character it stands for both end a term).
pub(crate) fn decodes_to_same_terms(raw: &str, text: &str) -> bool {
    let (r, t) = (raw.as_bytes(), text.as_bytes());
    let (mut i, mut j) = (0usize, 0usize);
    while i < r.len() {
        // The bytes up to the next escape are the text's own.
        let plain = r
            .get(i..)
            .and_then(|rest| memchr::memchr(b'\\', rest))
            .unwrap_or(r.len() - i);
        if plain > 0 {
            if t.get(j..j + plain) != r.get(i..i + plain) {
                return false;
            }
            i += plain;
            j += plain;
            continue;
        }
        let one = match r.get(i + 1) {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0c,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                let Some(cp) = hex4(r, i + 2) else {
                    return false;
                };
                let (ch, used) = if (0xd800..0xdc00).contains(&cp) {
                    // A surrogate pair: `\uD83D\uDE00`.
                    match (r.get(i + 6), r.get(i + 7), hex4(r, i + 8)) {
                        (Some(b'\\'), Some(b'u'), Some(lo)) if (0xdc00..0xe000).contains(&lo) => (
                            char::from_u32(0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00)),
                            12,
                        ),
                        _ => (None, 6),
                    }
                } else {
                    (char::from_u32(cp), 6)
                };
                let Some(ch) = ch else {
                    return false;
                };
                if ch.is_ascii() && TERM_BYTES[ch as usize] & T_TOK != 0 {
                    return false;
                }
                let mut buf = [0u8; 4];
                let enc = ch.encode_utf8(&mut buf).as_bytes();
                if t.get(j..j + enc.len()) != Some(enc) {
                    return false;
                }
                i += used;
                j += enc.len();
                continue;
            }
            // `\/` stands for a term byte; anything else is not JSON.
            _ => return false,
        };
        if t.get(j) != Some(&one) {
            return false;
        }
        i += 2;
        j += 1;
    }
    j == t.len()
}

/// The four hex digits at `i` of `b` as a number.
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let h = std::str::from_utf8(b.get(i..i + 4)?).ok()?;
    if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(h, 16).ok()
}

/// The terms of `text` (see [`for_each_term`]), in order.
pub fn terms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_term(text, false, |t| out.push(t));
    out
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests;
