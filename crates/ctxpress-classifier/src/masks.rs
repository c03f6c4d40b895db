//! Byte-class bit masks of a text, one bit per byte, its class counts and its
//! lower-cased copy, built in one pass over 64-byte blocks (SSSE3 nibble
//! tables or SSE2 compares on x86, a portable multiply-pack elsewhere). Bit
//! `k` of word `w` stands for byte `64 * w + k`; padding past the end of the
//! text is in no class.
//!
//! Which path runs is chosen at compile time: SSSE3 nibble-table lookups
//! (`pshufb`) on x86-64-v2, which `.cargo/config.toml` targets; SSE2 compares
//! on older x86-64; the portable multiply-pack elsewhere. The tests check all
//! three give the same masks. `positions` lists the set bits of a mask (the
//! line ends, from the newline mask) four per word without a branch per bit.

/// The class masks of one text, its class counts and its lower-cased copy.
#[derive(Default)]
pub(crate) struct Masks {
    // the masks, read through the accessors of the same names
    /// ASCII digits.
    dig: Vec<u64>,
    /// Token bytes `[A-Za-z0-9_.-]` (where secrets and hashes can be).
    tok: Vec<u64>,
    /// ASCII upper-case letters.
    upper: Vec<u64>,
    /// `\n`.
    nl: Vec<u64>,
    /// UTF-8 continuation bytes (`0x80..=0xBF`).
    cont: Vec<u64>,
    /// Bytes that make a digit run before them worth a look: token bytes,
    /// space and `0xC2` (the lead byte of `µ` and `°`).
    num_next: Vec<u64>,
    /// How many bytes are special characters (`{}[]<>|\;:@#$%^&*()=+`~`).
    pub(crate) special: usize,
    /// How many bytes are continuation bytes (the text's characters are
    /// its bytes less these).
    pub(crate) cont_count: usize,
    /// How many bytes are `\n`.
    pub(crate) nl_count: usize,
    /// The text with ASCII letters lower-cased (other bytes as they are),
    /// in whole blocks (pushing a block copies it without a `memcpy` call);
    /// see [`Masks::lower`].
    lower: Vec<[u8; 64]>,
    /// The length of the text.
    len: usize,
    /// How many words of each mask (and blocks of `lower`) are the text's:
    /// the buffers only grow, the words past these are stale.
    words: usize,
    /// A buffer for the line pass: where each line ends.
    pub(crate) line_ends: Vec<usize>,
}

/// The masks of one 64-byte block, in [`Masks`] field order, and its counts.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
struct Block {
    dig: u64,
    tok: u64,
    upper: u64,
    nl: u64,
    cont: u64,
    num_next: u64,
    special: u32,
    cont_count: u32,
    nl_count: u32,
}

impl Masks {
    /// Recomputes every mask and the lower-cased copy for `b`, reusing the
    /// buffers.
    pub(crate) fn fill(&mut self, b: &[u8]) {
        // every buffer sized first and written in place: a `push` per mask
        // and block was a capacity check each, and the checks kept the
        // block's lanes from staying in registers. The buffers only grow
        // (to the longest text yet) and the first `words` words are
        // overwritten below: sizing them to each text (clearing or
        // truncating, then filling) cost a `memset` of every buffer
        let n = b.len().div_ceil(64);
        if self.dig.len() < n {
            for v in [
                &mut self.dig,
                &mut self.tok,
                &mut self.upper,
                &mut self.nl,
                &mut self.cont,
                &mut self.num_next,
            ] {
                v.resize(n, 0);
            }
            self.lower.resize(n, [0u8; 64]);
        }
        self.words = n;
        self.len = b.len();
        let (mut special, mut cont_count, mut nl_count) = (0usize, 0usize, 0usize);
        let mut chunks = b.chunks_exact(64);
        let mut padded = [0u8; 64];
        let rest = chunks.remainder();
        if let Some(d) = padded.get_mut(..rest.len()) {
            // zero padding is in no class
            d.copy_from_slice(rest);
        }
        let blocks = (&mut chunks)
            .filter_map(|c| <&[u8; 64]>::try_from(c).ok())
            .chain((!rest.is_empty()).then_some(&padded));
        let outs = self
            .dig
            .iter_mut()
            .zip(self.tok.iter_mut())
            .zip(self.upper.iter_mut())
            .zip(self.nl.iter_mut())
            .zip(self.cont.iter_mut())
            .zip(self.num_next.iter_mut())
            .zip(self.lower.iter_mut());
        for (block, ((((((dig, tok), upper), nl), cont), num_next), lower)) in blocks.zip(outs) {
            let k = lanes::block_classes(block, lower);
            *dig = k.dig;
            *tok = k.tok;
            *upper = k.upper;
            *nl = k.nl;
            *cont = k.cont;
            *num_next = k.num_next;
            special += k.special as usize;
            cont_count += k.cont_count as usize;
            nl_count += k.nl_count as usize;
        }
        self.special = special;
        self.cont_count = cont_count;
        self.nl_count = nl_count;
    }

    /// The text with ASCII letters lower-cased (other bytes as they are).
    pub(crate) fn lower(&self) -> &[u8] {
        self.lower.as_flattened().get(..self.len).unwrap_or(&[])
    }

    /// The text's words of a mask buffer.
    fn mask<'m>(&self, v: &'m [u64]) -> &'m [u64] {
        v.get(..self.words).unwrap_or(&[])
    }

    /// ASCII digits.
    pub(crate) fn dig(&self) -> &[u64] {
        self.mask(&self.dig)
    }

    /// Token bytes `[A-Za-z0-9_.-]`.
    pub(crate) fn tok(&self) -> &[u64] {
        self.mask(&self.tok)
    }

    /// ASCII upper-case letters.
    pub(crate) fn upper(&self) -> &[u64] {
        self.mask(&self.upper)
    }

    /// `\n`.
    pub(crate) fn nl(&self) -> &[u64] {
        self.mask(&self.nl)
    }

    /// UTF-8 continuation bytes.
    pub(crate) fn cont(&self) -> &[u64] {
        self.mask(&self.cont)
    }

    /// Bytes that make a digit run before them worth a look.
    pub(crate) fn num_next(&self) -> &[u64] {
        self.mask(&self.num_next)
    }
}

/// Number of set bits of `m` at positions `a..e`.
pub(crate) fn count_in(m: &[u64], a: usize, e: usize) -> usize {
    if a >= e {
        return 0;
    }
    let (wa, wb) = (a / 64, (e - 1) / 64);
    let lo = u64::MAX << (a % 64);
    let hi = u64::MAX >> (63 - (e - 1) % 64);
    if wa == wb {
        return m.get(wa).map_or(0, |x| (x & lo & hi).count_ones() as usize);
    }
    let mut n = m.get(wa).map_or(0, |x| (x & lo).count_ones() as usize);
    n += m
        .get(wa + 1..wb)
        .map_or(0, |r| r.iter().map(|x| x.count_ones() as usize).sum());
    n + m.get(wb).map_or(0, |x| (x & hi).count_ones() as usize)
}

/// Bit `i` of `m` (clear past the end).
pub(crate) fn bit(m: &[u64], i: usize) -> bool {
    m.get(i / 64).is_some_and(|x| x >> (i % 64) & 1 == 1)
}

/// Start of the run of set bits through bit `p` (which is set).
pub(crate) fn run_start(m: &[u64], p: usize) -> usize {
    let (mut w, bit) = (p / 64, p % 64);
    // clear bits at and above `p`, look for the last zero below it
    let mut gaps = !m.get(w).copied().unwrap_or(0) & ((1u64 << bit) - 1);
    loop {
        if gaps != 0 {
            return w * 64 + 64 - gaps.leading_zeros() as usize;
        }
        if w == 0 {
            return 0;
        }
        w -= 1;
        gaps = !m.get(w).copied().unwrap_or(0);
    }
}

/// End (exclusive) of the run of set bits through bit `p` (padding bits
/// past the text are clear, so a run ends by the text's end).
pub(crate) fn run_end(m: &[u64], p: usize) -> usize {
    let (mut w, bit) = (p / 64, p % 64);
    let mut gaps = !m.get(w).copied().unwrap_or(0) & (u64::MAX << bit);
    loop {
        if gaps != 0 {
            return w * 64 + gaps.trailing_zeros() as usize;
        }
        w += 1;
        let Some(&x) = m.get(w) else {
            return w * 64;
        };
        gaps = !x;
    }
}

/// Replaces `out` with the positions of the set bits of `m`, in order. Four
/// positions are written per word whatever its count, so only words with more
/// than four set bits take a loop (no branch per bit).
pub(crate) fn positions(m: &[u64], out: &mut Vec<usize>) {
    out.clear();
    for (w, &x) in m.iter().enumerate() {
        let n = x.count_ones() as usize;
        let mut y = x;
        let mut four = [0usize; 4];
        for slot in &mut four {
            *slot = w * 64 + y.trailing_zeros() as usize;
            y &= y.wrapping_sub(1);
        }
        let k = out.len();
        out.extend_from_slice(&four);
        out.truncate(k + n);
        out.extend(bits_of(w, y));
    }
}

/// Positions of the set bits of `x`, the `w`-th word, in order.
fn bits_of(w: usize, mut x: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if x == 0 {
            return None;
        }
        let p = x.trailing_zeros() as usize;
        x &= x - 1;
        Some(w * 64 + p)
    })
}

/// Words of ASCII text (runs of non-whitespace) counted up to `limit`, from
/// a whitespace mask of 16 bytes at a time.
pub(crate) fn ascii_words(b: &[u8], limit: usize) -> usize {
    let mut words = 0;
    // bit 0: the byte before the lane is whitespace (the text start counts)
    let mut prev_ws = 1u32;
    let mut lanes = b.chunks_exact(16);
    for lane in &mut lanes {
        let ws = lane
            .try_into()
            .map_or(0, |l: &[u8; 16]| u32::from(lanes::whitespace16(l)));
        let starts = !ws & ((ws << 1) | prev_ws) & 0xFFFF;
        words += starts.count_ones() as usize;
        prev_ws = ws >> 15;
        if words >= limit {
            return limit;
        }
    }
    for &c in lanes.remainder() {
        let ws = u32::from(c.is_ascii_whitespace());
        words += (prev_ws & (ws ^ 1)) as usize;
        prev_ws = ws;
    }
    words.min(limit)
}

/// The numbered 16-byte lanes of a block, each with the same lane of the
/// block's lower-cased copy.
#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
))]
#[inline(always)]
fn lanes16<'a>(
    c: &'a [u8; 64],
    lower: &'a mut [u8; 64],
) -> impl Iterator<Item = (usize, &'a [u8; 16], &'a mut [u8; 16])> {
    c.chunks_exact(16)
        .zip(lower.chunks_exact_mut(16))
        .enumerate()
        .filter_map(|(i, (lane, out))| Some((i, lane.try_into().ok()?, out.try_into().ok()?)))
}

// The SIMD lanes: SSSE3 nibble tables where the target has them (every
// x86-64-v2 CPU, the level this repository builds for), SSE2 compares on
// every other x86-64, the portable code elsewhere.
#[cfg(not(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
)))]
use portable as lanes;
#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2",
    not(target_feature = "ssse3")
))]
use sse2 as lanes;
#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "ssse3"
))]
use ssse3 as lanes;

/// SSSE3: each byte's classes looked up by its two nibbles (`pshufb`), two
/// table pairs of eight class bits each.
#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "ssse3"
))]
mod ssse3 {
    use super::Block;
    pub(super) use super::sse2::whitespace16;

    /// A class bit: the bytes whose high nibble is in `hi` and low nibble in
    /// `lo` (each a set of nibbles as 16 bits).
    struct Class {
        bit: u8,
        hi: u16,
        lo: u16,
    }

    /// Nibbles `a..=b` as a set.
    const fn span(a: u8, b: u8) -> u16 {
        let mut m = 0u16;
        let mut i = a;
        while i <= b {
            m |= 1 << i;
            i += 1;
        }
        m
    }

    /// Nibble `a` alone.
    const fn one(a: u8) -> u16 {
        1 << a
    }

    // first table pair: token bytes
    const DIGIT: u8 = 1;
    const UPPER_A_O: u8 = 1 << 1;
    const UPPER_P_Z: u8 = 1 << 2;
    const LOWER_A_O: u8 = 1 << 3;
    const LOWER_P_Z: u8 = 1 << 4;
    const UNDERSCORE: u8 = 1 << 5;
    const DASH_DOT: u8 = 1 << 6;
    const UPPER: u8 = UPPER_A_O | UPPER_P_Z;
    const TOKEN: u8 = DIGIT | UPPER | LOWER_A_O | LOWER_P_Z | UNDERSCORE | DASH_DOT;
    const TOKEN_CLASSES: [Class; 7] = [
        Class {
            bit: DIGIT,
            hi: one(3),
            lo: span(0, 9),
        },
        Class {
            bit: UPPER_A_O,
            hi: one(4),
            lo: span(1, 15),
        },
        Class {
            bit: UPPER_P_Z,
            hi: one(5),
            lo: span(0, 10),
        },
        Class {
            bit: LOWER_A_O,
            hi: one(6),
            lo: span(1, 15),
        },
        Class {
            bit: LOWER_P_Z,
            hi: one(7),
            lo: span(0, 10),
        },
        Class {
            bit: UNDERSCORE,
            hi: one(5),
            lo: one(15),
        },
        Class {
            bit: DASH_DOT,
            hi: one(2),
            lo: span(13, 14),
        },
    ];

    // second table pair: special characters, and what may follow a number
    const SPECIAL_2X: u8 = 1;
    const SPECIAL_BRACKETS: u8 = 1 << 1;
    const COLON: u8 = 1 << 2;
    const AT_BACKTICK: u8 = 1 << 3;
    const SPACE: u8 = 1 << 4;
    const C2: u8 = 1 << 5;
    const SPECIAL: u8 = SPECIAL_2X | SPECIAL_BRACKETS | COLON | AT_BACKTICK;
    const OTHER_CLASSES: [Class; 6] = [
        // `#$%&` and `()*+`
        Class {
            bit: SPECIAL_2X,
            hi: one(2),
            lo: span(3, 6) | span(8, 11),
        },
        // `;<=>`, `[\]^`, `{|}~`
        Class {
            bit: SPECIAL_BRACKETS,
            hi: one(3) | one(5) | one(7),
            lo: span(11, 14),
        },
        Class {
            bit: COLON,
            hi: one(3),
            lo: one(10),
        },
        Class {
            bit: AT_BACKTICK,
            hi: one(4) | one(6),
            lo: one(0),
        },
        Class {
            bit: SPACE,
            hi: one(2),
            lo: one(0),
        },
        Class {
            bit: C2,
            hi: one(12),
            lo: one(2),
        },
    ];

    /// The low-nibble and high-nibble tables of a class list.
    const fn tables(classes: &[Class]) -> ([u8; 16], [u8; 16]) {
        let (mut lo, mut hi) = ([0u8; 16], [0u8; 16]);
        let mut i = 0;
        while i < classes.len() {
            let c = &classes[i];
            let mut n = 0;
            while n < 16 {
                if c.lo >> n & 1 == 1 {
                    lo[n] |= c.bit;
                }
                if c.hi >> n & 1 == 1 {
                    hi[n] |= c.bit;
                }
                n += 1;
            }
            i += 1;
        }
        (lo, hi)
    }

    const TOKEN_TABLES: ([u8; 16], [u8; 16]) = tables(&TOKEN_CLASSES);
    const OTHER_TABLES: ([u8; 16], [u8; 16]) = tables(&OTHER_CLASSES);

    /// The masks and counts of one 64-byte block, 16 bytes at a time; writes
    /// the block lower-cased to `lower`.
    #[inline(always)]
    pub(super) fn block_classes(c: &[u8; 64], lower: &mut [u8; 64]) -> Block {
        use safe_arch::{
            bitand_m128i, bitandnot_m128i, bitor_m128i, cmp_eq_mask_i8_m128i, cmp_lt_mask_i8_m128i,
            load_unaligned_m128i, m128i, move_mask_i8_m128i, set_splat_i8_m128i, shr_imm_u16_m128i,
            shuffle_av_i8z_all_m128i, store_unaligned_m128i, sub_i8_m128i, zeroed_m128i,
        };
        let splat = |x: u8| set_splat_i8_m128i(x as i8);
        // lanes whose class byte has none of `bits`
        let none =
            |c: m128i, bits: u8| cmp_eq_mask_i8_m128i(bitand_m128i(c, splat(bits)), zeroed_m128i());
        let bits = |v: m128i| u64::from(move_mask_i8_m128i(v) as u16);
        let (token_lo, token_hi) = (m128i::from(TOKEN_TABLES.0), m128i::from(TOKEN_TABLES.1));
        let (other_lo, other_hi) = (m128i::from(OTHER_TABLES.0), m128i::from(OTHER_TABLES.1));
        // per-lane counts of the bytes that are not special, of continuation
        // bytes and of newlines (a true compare is -1: subtracting it adds one)
        let (mut plain_n, mut cont_n, mut nl_n) = (zeroed_m128i(), zeroed_m128i(), zeroed_m128i());
        // the masks' complements, made whole after the four lanes
        let (mut not_dig, mut not_upper, mut not_tok, mut not_next) = (0u64, 0u64, 0u64, 0u64);
        let mut k = Block::default();
        for (i, lane, out) in super::lanes16(c, lower) {
            let v = load_unaligned_m128i(lane);
            let shift = 16 * i;
            let lo_nib = bitand_m128i(v, splat(0x0F));
            let hi_nib = bitand_m128i(shr_imm_u16_m128i::<4>(v), splat(0x0F));
            let token = bitand_m128i(
                shuffle_av_i8z_all_m128i(token_lo, lo_nib),
                shuffle_av_i8z_all_m128i(token_hi, hi_nib),
            );
            let other = bitand_m128i(
                shuffle_av_i8z_all_m128i(other_lo, lo_nib),
                shuffle_av_i8z_all_m128i(other_hi, hi_nib),
            );
            let no_upper = none(token, UPPER);
            store_unaligned_m128i(out, bitor_m128i(v, bitandnot_m128i(no_upper, splat(0x20))));
            let no_tok = none(token, TOKEN);
            not_dig |= bits(none(token, DIGIT)) << shift;
            not_upper |= bits(no_upper) << shift;
            not_tok |= bits(no_tok) << shift;
            not_next |= bits(bitand_m128i(no_tok, none(other, SPACE | C2))) << shift;
            // continuation bytes are -128..=-65 as signed bytes
            let cont = cmp_lt_mask_i8_m128i(v, splat(0xC0));
            let nl = cmp_eq_mask_i8_m128i(v, splat(b'\n'));
            plain_n = sub_i8_m128i(plain_n, none(other, SPECIAL));
            cont_n = sub_i8_m128i(cont_n, cont);
            nl_n = sub_i8_m128i(nl_n, nl);
            k.nl |= bits(nl) << shift;
            k.cont |= bits(cont) << shift;
        }
        k.dig = !not_dig;
        k.upper = !not_upper;
        k.tok = !not_tok;
        k.num_next = !not_next;
        k.special = 64 - super::sse2::lane_total(plain_n);
        k.cont_count = super::sse2::lane_total(cont_n);
        k.nl_count = super::sse2::lane_total(nl_n);
        k
    }
}

/// SSE2 compares and move-masks through `safe_arch`.
#[cfg_attr(all(target_feature = "ssse3", not(test)), allow(dead_code))]
#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
))]
mod sse2 {
    use super::Block;

    /// Bit `k` set when byte `k` is ASCII whitespace (`\t \n \x0C \r` and space).
    #[inline(always)]
    pub(super) fn whitespace16(l: &[u8; 16]) -> u16 {
        use safe_arch::{
            bitor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, move_mask_i8_m128i,
            set_splat_i8_m128i,
        };
        let v = load_unaligned_m128i(l);
        let eq = |x: u8| cmp_eq_mask_i8_m128i(v, set_splat_i8_m128i(x as i8));
        let ws = bitor_m128i(
            bitor_m128i(eq(b' '), eq(b'\n')),
            bitor_m128i(bitor_m128i(eq(b'\t'), eq(b'\r')), eq(0x0C)),
        );
        move_mask_i8_m128i(ws) as u16
    }

    /// The sum of the 16 byte lanes of `acc`.
    #[inline(always)]
    pub(super) fn lane_total(acc: safe_arch::m128i) -> u32 {
        use safe_arch::{sum_of_u8_abs_diff_m128i, zeroed_m128i};
        let [lo, hi]: [u64; 2] = sum_of_u8_abs_diff_m128i(acc, zeroed_m128i()).into();
        (lo + hi) as u32
    }

    /// The masks and counts of one 64-byte block, 16 bytes at a time; writes
    /// the block lower-cased to `lower`.
    #[inline(always)]
    pub(super) fn block_classes(c: &[u8; 64], lower: &mut [u8; 64]) -> Block {
        use ctxpress_text::sse2::{eq, in_range as range, splat};
        use safe_arch::{
            bitand_m128i, bitor_m128i, cmp_lt_mask_i8_m128i, load_unaligned_m128i, m128i,
            move_mask_i8_m128i, store_unaligned_m128i, sub_i8_m128i, zeroed_m128i,
        };
        let bits = |v: m128i| u64::from(move_mask_i8_m128i(v) as u16);
        // per-lane counts: a true compare is -1, so subtracting it adds one
        let (mut special_n, mut cont_n, mut nl_n) =
            (zeroed_m128i(), zeroed_m128i(), zeroed_m128i());
        let mut k = Block::default();
        for (i, lane, out) in super::lanes16(c, lower) {
            let v = load_unaligned_m128i(lane);
            let shift = 16 * i;
            let dig = range(v, b'0', 10);
            let upper = range(v, b'A', 26);
            // clearing bit 5 folds `a-z` onto `A-Z`, `{|}~` onto `[\]^` and
            // `` ` `` onto `@`
            let folded = bitand_m128i(v, splat(0xDF));
            store_unaligned_m128i(out, bitor_m128i(v, bitand_m128i(upper, splat(0x20))));
            let tok = bitor_m128i(
                bitor_m128i(dig, range(folded, b'A', 26)),
                bitor_m128i(
                    eq(v, b'_'),
                    // `-` and `.` are adjacent
                    range(v, b'-', 2),
                ),
            );
            let special = bitor_m128i(
                bitor_m128i(range(v, b'#', 4), range(v, b'(', 4)),
                bitor_m128i(
                    range(v, b':', 5),
                    bitor_m128i(range(folded, b'[', 4), eq(folded, b'@')),
                ),
            );
            // continuation bytes are -128..=-65 as signed bytes
            let cont = cmp_lt_mask_i8_m128i(v, splat(0xC0));
            let nl = eq(v, b'\n');
            let num_next = bitor_m128i(tok, bitor_m128i(eq(v, b' '), eq(v, 0xC2)));
            special_n = sub_i8_m128i(special_n, special);
            cont_n = sub_i8_m128i(cont_n, cont);
            nl_n = sub_i8_m128i(nl_n, nl);
            k.dig |= bits(dig) << shift;
            k.tok |= bits(tok) << shift;
            k.upper |= bits(upper) << shift;
            k.nl |= bits(nl) << shift;
            k.cont |= bits(cont) << shift;
            k.num_next |= bits(num_next) << shift;
        }
        k.special = lane_total(special_n);
        k.cont_count = lane_total(cont_n);
        k.nl_count = lane_total(nl_n);
        k
    }
}

/// The same classes without SIMD: byte compares, packed into bits by
/// multiplication (also the tests' check of the SIMD lanes).
#[cfg_attr(
    all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse2",
        not(test)
    ),
    allow(dead_code)
)]
mod portable {
    use super::Block;

    /// Bit `k` set when byte `k` is ASCII whitespace.
    pub(super) fn whitespace16(l: &[u8; 16]) -> u16 {
        l.iter()
            .enumerate()
            .fold(0, |m, (k, c)| m | (u16::from(c.is_ascii_whitespace()) << k))
    }

    /// `{}[]<>|\;:@#$%^&*()=+`~` as byte ranges.
    fn is_special(c: u8) -> bool {
        (c.wrapping_sub(b'#') < 4)
            | (c.wrapping_sub(b'(') < 4)
            | (c.wrapping_sub(b':') < 5)
            | (c == b'@')
            | (c.wrapping_sub(b'[') < 4)
            | (c == b'`')
            | (c.wrapping_sub(b'{') < 4)
    }

    /// The same masks without SIMD: byte compares packed into bits by
    /// multiplication.
    pub(super) fn block_classes(c: &[u8; 64], lower: &mut [u8; 64]) -> Block {
        for (o, x) in lower.iter_mut().zip(c) {
            *o = x.to_ascii_lowercase();
        }
        let mut flags = [[0u8; 64]; 6];
        let mut special = 0u32;
        for (k, &x) in c.iter().enumerate() {
            let d = x.wrapping_sub(b'0') < 10;
            let u = x.wrapping_sub(b'A') < 26;
            let l = x.wrapping_sub(b'a') < 26;
            flags[0][k] = u8::from(d);
            let tok = d || u || l || x == b'_' || x == b'-' || x == b'.';
            flags[1][k] = u8::from(tok);
            flags[2][k] = u8::from(u);
            flags[3][k] = u8::from(x == b'\n');
            flags[4][k] = u8::from(x & 0xC0 == 0x80);
            flags[5][k] = u8::from(tok || x == b' ' || x == 0xC2);
            special += u32::from(is_special(x));
        }
        let [dig, tok, upper, nl, cont, num_next] = flags.map(|f| pack(&f));
        Block {
            dig,
            tok,
            upper,
            nl,
            cont,
            num_next,
            special,
            cont_count: cont.count_ones(),
            nl_count: nl.count_ones(),
        }
    }

    /// Packs 64 bytes of 0 or 1 into a bit mask (byte `k` to bit `k`).
    #[inline(always)]
    fn pack(v: &[u8; 64]) -> u64 {
        let mut m = 0u64;
        for (g, chunk) in v.chunks_exact(8).enumerate() {
            let w = chunk.try_into().map(u64::from_le_bytes).unwrap_or_default();
            m |= (w.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (g * 8);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: &[u64], a: usize, e: usize) -> usize {
        (a..e).filter(|&i| m[i / 64] >> (i % 64) & 1 == 1).count()
    }

    #[test]
    fn simd_and_portable_blocks_agree() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..2000 {
            let mut block = [0u8; 64];
            for (i, x) in block.iter_mut().enumerate() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // every byte value, and runs of the interesting ASCII range
                *x = if round % 2 == 0 {
                    (state >> 24) as u8
                } else {
                    let pick = b" \n-._09AZaz#$(@[`{~\x80\xbf\xc0/:@\t\r\x0b\x0c\"\xc2?JOPopz]^|}'&,;<=>+*%!";
                    pick[(state as usize ^ i) % pick.len()]
                };
            }
            let (mut simd_lower, mut portable_lower) = ([0u8; 64], [0u8; 64]);
            let expected = portable::block_classes(&block, &mut portable_lower);
            assert_eq!(
                lanes::block_classes(&block, &mut simd_lower),
                expected,
                "{block:?}"
            );
            assert_eq!(simd_lower, portable_lower, "{block:?}");
            // the SSE2 lanes, also where SSSE3 ones are in use
            #[cfg(all(
                any(target_arch = "x86", target_arch = "x86_64"),
                target_feature = "sse2"
            ))]
            {
                let mut sse2_lower = [0u8; 64];
                assert_eq!(
                    sse2::block_classes(&block, &mut sse2_lower),
                    expected,
                    "{block:?}"
                );
                assert_eq!(sse2_lower, portable_lower, "{block:?}");
            }
            for lane in block.chunks_exact(16) {
                let lane: &[u8; 16] = lane.try_into().expect("16 bytes");
                assert_eq!(lanes::whitespace16(lane), portable::whitespace16(lane));
            }
        }
    }

    #[test]
    fn classes_of_known_bytes() {
        let mut m = Masks::default();
        let text = "ab1\nZ-é{";
        m.fill(text.as_bytes());
        assert_eq!(m.dig(), [0b100]);
        assert_eq!(m.tok(), [0b11_0111]);
        assert_eq!(m.upper(), [0b1_0000]);
        assert_eq!(m.nl(), [0b1000]);
        assert_eq!(m.cont(), [0b1000_0000]);
        assert_eq!(m.num_next(), [0b11_0111]);
        assert_eq!(m.special, 1);
        assert_eq!((m.cont_count, m.nl_count), (1, 1));
        assert_eq!(m.lower(), "ab1\nz-é{".as_bytes());
        // a second text reuses the buffers
        m.fill(&[b'Q'; 70]);
        assert_eq!((m.dig().len(), m.lower().len()), (2, 70));
        assert!(m.lower().iter().all(|&c| c == b'q'));
        assert_eq!(m.upper(), [u64::MAX, 0b11_1111]);
        // a shorter text after a longer one sees only its own words
        m.fill(b"x\n");
        assert_eq!(
            (m.dig(), m.tok(), m.nl(), m.upper()),
            (&[0][..], &[1][..], &[2][..], &[0][..])
        );
        assert_eq!(
            (m.cont(), m.num_next(), m.lower()),
            (&[0][..], &[1][..], &b"x\n"[..])
        );
        assert_eq!((m.special, m.cont_count, m.nl_count), (0, 0, 1));
    }

    #[test]
    fn ascii_words_match_a_plain_count() {
        let plain = |t: &str| t.split_ascii_whitespace().count();
        let mut state = 7u64;
        for n in 0..300 {
            let t: String = (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    [' ', 'a', '\n', 'b', '\t', '\u{c}', '\r', '\u{b}', 'x'][(state % 9) as usize]
                })
                .collect();
            assert_eq!(ascii_words(t.as_bytes(), usize::MAX), plain(&t), "{t:?}");
            assert_eq!(ascii_words(t.as_bytes(), 5), plain(&t).min(5), "{t:?}");
        }
    }

    #[test]
    fn counts_runs_and_ones() {
        let m = [0xF0F0_0000_0000_000Fu64, u64::MAX, 1];
        for (a, e) in [
            (0, 0),
            (0, 4),
            (2, 70),
            (60, 130),
            (64, 128),
            (127, 129),
            (0, 192),
        ] {
            assert_eq!(count_in(&m, a, e), naive(&m, a, e), "{a}..{e}");
        }
        for p in [0, 1, 3, 60, 70, 128] {
            let set = |i: usize| m[i / 64] >> (i % 64) & 1 == 1;
            if !set(p) {
                continue;
            }
            let a = (0..=p).rev().take_while(|&i| set(i)).last().unwrap_or(p);
            let e = (p..192).take_while(|&i| set(i)).last().map_or(p, |i| i + 1);
            assert_eq!((run_start(&m, p), run_end(&m, p)), (a, e), "{p}");
        }
        assert_eq!(run_end(&[u64::MAX], 5), 64);
        for i in 0..200 {
            assert_eq!(bit(&m, i), i < 192 && m[i / 64] >> (i % 64) & 1 == 1, "{i}");
        }
        // words with no, four, five and 64 set bits, and stale contents
        let words = [0b1001, 0, 1 << 63, 0b1111 << 8, 0b11111 << 2, u64::MAX, 0];
        let mut out = vec![7; 3];
        positions(&words, &mut out);
        let naive: Vec<usize> = (0..64 * words.len())
            .filter(|&i| words[i / 64] >> (i % 64) & 1 == 1)
            .collect();
        assert_eq!(out, naive);
    }
}
