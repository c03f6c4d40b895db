//! Near-duplicate candidate generation and line-level Jaccard similarity.
//!
//! Each text becomes the set of hashes of its normalized lines (trimmed,
//! lower-cased, empty lines dropped). Lines are ordered by rarity (fewest texts
//! first) and each text is indexed under its first `|A| - ceil(t·|A|) + 1`
//! lines (prefix filtering): two texts with Jaccard ≥ t always share one of
//! those fingerprint lines, so only texts that share one are compared.
//! Posting lists keep only their most recent entries and each text is compared
//! with a bounded number of candidates, so the work is linear in the input.
//!
//! [`LineHasher`] lower-cases a text and finds its line ends and non-ASCII
//! lines in one SSE2 pass (`ctxpress_text::sse2`). [`LineIndex`] gives each
//! distinct line a slot: one 16-byte entry (hash, document frequency, mark) in
//! an open-addressing table, so line sets and similarities need no sort.

/// The normalized line set of one text.
#[derive(Debug, Clone, Default)]
pub struct LineSet {
    /// Distinct line hashes, sorted ascending (for merging).
    pub sorted: Vec<u64>,
}

/// Hashes of the normalized lines of `text`, sorted and deduplicated.
///
/// Each normalized line is `line.trim().to_lowercase()` over `text.lines()`,
/// empty ones dropped, hashed with xxh3. [`LineHasher`] computes the same
/// with reused buffers.
pub fn line_set(text: &str) -> LineSet {
    LineHasher::default().line_set(text)
}

/// Builds line sets ([`line_set`]) with buffers reused from one text to the
/// next.
///
/// The text is lower-cased ASCII-wise into one buffer in a single pass; an
/// ASCII line is then trimmed and hashed in place. A line with other
/// characters is trimmed as `str::trim` does and only its non-ASCII
/// characters are mapped through `char::to_lowercase` (which is what
/// `str::to_lowercase` does with every character but a capital sigma; a line
/// with one takes `str::to_lowercase` itself).
#[derive(Debug, Clone, Default)]
pub struct LineHasher {
    /// The text with ASCII letters lower-cased.
    lower: Vec<u8>,
    /// A line whose non-ASCII characters change when lower-cased.
    scratch: Vec<u8>,
    /// The hashes of a text before they are copied out at their final size.
    hashes: Vec<u64>,
}

/// `char::is_whitespace` for an ASCII byte (note `\x0B`, which
/// `u8::is_ascii_whitespace` leaves out).
#[inline]
fn ascii_ws(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

/// `b` without leading and trailing ASCII whitespace ([`ascii_ws`]).
#[inline]
fn trim_ascii_ws(b: &[u8]) -> &[u8] {
    // Leading spaces (indentation) eight at a time, then any whitespace.
    let mut start = 0usize;
    while let Some(w) = b.get(start..start + 8) {
        let y = u64::from_le_bytes(w.try_into().unwrap_or([0; 8])) ^ 0x2020_2020_2020_2020;
        if y != 0 {
            start += (y.trailing_zeros() / 8) as usize;
            break;
        }
        start += 8;
    }
    while b.get(start).is_some_and(|&c| ascii_ws(c)) {
        start += 1;
    }
    let mut end = b.len();
    while end > start && b.get(end - 1).is_some_and(|&c| ascii_ws(c)) {
        end -= 1;
    }
    b.get(start..end).unwrap_or(&[])
}

impl LineHasher {
    /// The line set of `text` (equal to [`line_set`]).
    pub fn line_set(&mut self, text: &str) -> LineSet {
        let mut hashes = std::mem::take(&mut self.hashes);
        self.hashes_into(text, &mut hashes);
        let set = LineSet {
            sorted: hashes.as_slice().to_vec(),
        };
        self.hashes = hashes;
        set
    }

    /// Replace `out` with the sorted, distinct hashes of the normalized lines
    /// of `text`.
    pub fn hashes_into(&mut self, text: &str, out: &mut Vec<u64>) {
        out.clear();
        self.push_hashes(text, out);
        out.sort_unstable();
        out.dedup();
    }

    /// Append the hashes of the normalized lines of `text` to `out`, in line
    /// order, repeats included (blank lines have none).
    pub fn push_hashes(&mut self, text: &str, out: &mut Vec<u64>) {
        let scratch = &mut self.scratch;
        lower_lines(
            text.as_bytes(),
            &mut self.lower,
            |lower, start, end, ascii| {
                let lowered = lower.get(start..end).unwrap_or(&[]);
                if ascii {
                    let l = trim_ascii_ws(lowered);
                    if !l.is_empty() {
                        out.push(xxhash_rust::xxh3::xxh3_64(l));
                    }
                } else if let Some(h) = text
                    .get(start..end)
                    .and_then(|raw| non_ascii_line(raw, lowered, scratch))
                {
                    out.push(h);
                }
            },
        );
    }
}

/// Copy `b` into the start of `lower` (grown to fit) with its ASCII letters
/// lower-cased and call `f(lower, start, end, ascii)` with the byte range of every piece of `b`
/// split at `\n` (as [`for_each_line`] gives them), `ascii` telling whether
/// the piece is all ASCII; `lower` holds at least the bytes up to `end`.
///
/// One pass over 16 bytes at a time: each lane is lower-cased and stored,
/// and its newline and non-ASCII bits are taken as masks.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn lower_lines(b: &[u8], lower: &mut Vec<u8>, mut f: impl FnMut(&[u8], usize, usize, bool)) {
    use ctxpress_text::sse2::{eq, in_range, lanes, splat};
    use safe_arch::{bitand_m128i, bitor_m128i, load_unaligned_m128i, m128i, move_mask_i8_m128i};
    // Grown, never shrunk: only the new part is zeroed before it is
    // written over.
    if lower.len() < b.len() {
        lower.resize(b.len(), 0);
    }
    let mut start = 0usize;
    // One past the last non-ASCII byte seen (0: none).
    let mut last_high = 0usize;
    // The lower-cased lane, its non-ASCII bits and its newline bits.
    let lane = |v: m128i| {
        let lowered: [u8; 16] =
            bitor_m128i(v, bitand_m128i(in_range(v, b'A', 26), splat(0x20))).into();
        let high = move_mask_i8_m128i(v) as u32;
        let newlines = move_mask_i8_m128i(eq(v, b'\n')) as u32;
        (lowered, high, newlines)
    };
    let mut lines = |lower: &[u8], base: usize, high: u32, mut newlines: u32| {
        while newlines != 0 {
            let k = newlines.trailing_zeros();
            let before = high & ((1u32 << k) - 1);
            if before != 0 {
                last_high = base + (32 - before.leading_zeros()) as usize;
            }
            let p = base + k as usize;
            f(lower, start, p, last_high <= start);
            start = p + 1;
            newlines &= newlines - 1;
        }
        if high != 0 {
            last_high = base + (32 - high.leading_zeros()) as usize;
        }
    };
    for (base, v) in lanes(b) {
        let (lowered, high, newlines) = lane(v);
        if let Some(dst) = lower
            .get_mut(base..base + 16)
            .and_then(|d| <&mut [u8; 16]>::try_from(d).ok())
        {
            *dst = lowered;
        }
        lines(lower, base, high, newlines);
    }
    let full = b.len() / 16 * 16;
    if let Some(rest) = b.get(full..).filter(|r| !r.is_empty()) {
        // The padding lanes are zero: neither newline nor non-ASCII.
        let mut padded = [0u8; 16];
        if let Some(dst) = padded.get_mut(..rest.len()) {
            dst.copy_from_slice(rest);
        }
        let (lowered, high, newlines) = lane(load_unaligned_m128i(&padded));
        if let (Some(dst), Some(src)) = (lower.get_mut(full..b.len()), lowered.get(..rest.len())) {
            dst.copy_from_slice(src);
        }
        lines(lower, full, high, newlines);
    }
    f(lower, start, b.len(), last_high <= start);
}

/// [`lower_lines`] without SSE2: the text lower-cased at once, the lines
/// found by [`for_each_line`].
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn lower_lines_scalar(b: &[u8], lower: &mut Vec<u8>, mut f: impl FnMut(&[u8], usize, usize, bool)) {
    lower.clear();
    lower.extend_from_slice(b);
    lower.make_ascii_lowercase();
    let all_ascii = b.is_ascii();
    for_each_line(b, |start, end| {
        let ascii = all_ascii || b.get(start..end).is_some_and(<[u8]>::is_ascii);
        f(lower, start, end, ascii);
    });
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
use lower_lines_scalar as lower_lines;

/// Calls `f(start, end)` with the byte range of every piece of `b` split
/// at `\n` (as `str::split('\n')` gives them, the last one possibly empty).
/// Newlines are found by `memchr` (vectorized).
pub(crate) fn for_each_line(b: &[u8], mut f: impl FnMut(usize, usize)) {
    let mut start = 0usize;
    for p in memchr::memchr_iter(b'\n', b) {
        f(start, p);
        start = p + 1;
    }
    f(start, b.len());
}

/// The hash of one line holding non-ASCII characters (`lowered` is the
/// same bytes with ASCII letters lower-cased), `None` when it is blank;
/// `scratch` holds the lower-cased line when a non-ASCII character changes.
fn non_ascii_line(raw: &str, lowered: &[u8], scratch: &mut Vec<u8>) -> Option<u64> {
    // `str::trim`, each end once
    let rest = raw.trim_start();
    let lead = raw.len() - rest.len();
    let t = rest.trim_end();
    if t.is_empty() {
        return None;
    }
    let lo = lowered.get(lead..lead + t.len()).unwrap_or(&[]);
    let tb = t.as_bytes();
    let mut copied = 0usize;
    let mut changed = false;
    let mut i = 0usize;
    while let Some(off) = tb.get(i..).and_then(first_non_ascii) {
        let p = i + off;
        let Some(c) = t.get(p..).and_then(|r| r.chars().next()) else {
            break;
        };
        let n = c.len_utf8();
        if c == 'Σ' {
            // final-sigma rule: only `str::to_lowercase` knows it
            return Some(xxhash_rust::xxh3::xxh3_64(t.to_lowercase().as_bytes()));
        }
        if !lowers_to_itself(c) {
            if !changed {
                scratch.clear();
                changed = true;
            }
            scratch.extend_from_slice(lo.get(copied..p).unwrap_or(&[]));
            let mut enc = [0u8; 4];
            for ch in c.to_lowercase() {
                scratch.extend_from_slice(ch.encode_utf8(&mut enc).as_bytes());
            }
            copied = p + n;
        }
        i = p + n;
    }
    if !changed {
        return Some(xxhash_rust::xxh3::xxh3_64(lo));
    }
    scratch.extend_from_slice(lo.get(copied..).unwrap_or(&[]));
    Some(xxhash_rust::xxh3::xxh3_64(scratch))
}

/// Blocks of characters none of which has a lower-case mapping
/// (punctuation, symbols, arrows, box drawing, dingbats, CJK, emoji): the
/// characters an agent's output is full of are found here without a look
/// in the case tables. A test checks every one against `char::to_lowercase`.
const CASELESS: [(u32, u32); 6] = [
    (0xA0, 0xBF),
    (0x2000, 0x20FF),
    (0x2190, 0x23FF),
    (0x2500, 0x2BFF),
    (0x3000, 0x9FFF),
    (0x1F000, 0x1FAFF),
];

/// True when `c.to_lowercase()` is `c` itself.
#[inline]
fn lowers_to_itself(c: char) -> bool {
    let u = c as u32;
    if CASELESS.iter().any(|&(lo, hi)| (lo..=hi).contains(&u)) {
        return true;
    }
    let mut lc = c.to_lowercase();
    lc.len() == 1 && lc.next() == Some(c)
}

/// The index of the first byte of `b` at or above `0x80`, eight at a time.
#[inline]
fn first_non_ascii(b: &[u8]) -> Option<usize> {
    let mut i = 0usize;
    while let Some(w) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(w.try_into().unwrap_or([0; 8])) & 0x8080_8080_8080_8080;
        if x != 0 {
            return Some(i + (x.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b.get(i..)
        .and_then(|r| r.iter().position(|&x| x >= 0x80))
        .map(|k| i + k)
}

/// Jaccard similarity of two line sets (1.0 for two empty sets).
pub fn jaccard(a: &LineSet, b: &LineSet) -> f64 {
    let (x, y) = (&a.sorted, &b.sorted);
    if x.is_empty() && y.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while let (Some(p), Some(q)) = (x.get(i), y.get(j)) {
        match p.cmp(q) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = x.len() + y.len() - inter;
    inter as f64 / union as f64
}

/// Number of fingerprint lines a set of `len` lines is indexed under for
/// threshold `t`.
pub fn prefix_len(len: usize, t: f64) -> usize {
    if len == 0 {
        return 0;
    }
    let need = (t * len as f64 - 1e-9).ceil().max(0.0) as usize;
    (len - need.min(len) + 1).min(len)
}

/// Bounds on candidate generation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Lowest similarity of interest.
    pub threshold: f64,
    /// Longest posting list.
    pub max_postings: usize,
    /// Most candidates compared per text.
    pub max_candidates: usize,
}

/// Union-find over text indices.
#[derive(Debug, Clone)]
pub struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    /// `n` singletons.
    pub fn new(n: usize) -> Self {
        UnionFind {
            parent: (0..n).collect(),
        }
    }
    /// Representative of `x`.
    pub fn find(&mut self, mut x: usize) -> usize {
        while let Some(&p) = self.parent.get(x) {
            if p == x {
                break;
            }
            let gp = self.parent.get(p).copied().unwrap_or(p);
            if let Some(slot) = self.parent.get_mut(x) {
                *slot = gp;
            }
            x = p;
        }
        x
    }
    /// Merge the sets of `a` and `b` (the smaller root joins the larger index).
    pub fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb
            && let Some(slot) = self.parent.get_mut(ra.min(rb))
        {
            *slot = ra.max(rb);
        }
    }
}

/// No posting: the end of a posting list.
const NIL: u32 = u32::MAX;

/// One distinct line of a [`LineIndex`]: its hash, the number of texts
/// holding it (its document frequency, 0 for a free entry) and the stamp of
/// the last text or similarity that marked it, in one 16-byte entry, so a
/// line is one memory access wherever it is looked at.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(16))]
struct Line {
    hash: u64,
    df: u32,
    mark: u32,
}

/// The line sets of many texts over one table of distinct lines.
///
/// The table is open addressing by the line hash (linear probing, at most
/// three quarters full), an entry per distinct line holding its hash,
/// document frequency and mark (`Line`); a text is the list of the entries
/// of its distinct lines, in the order they first occur in it, all texts in
/// one array. The line sets are the same as [`LineHasher::hashes_into`]
/// gives, without a sort or a vector per text: repeats within a text are
/// dropped by the entry's mark, and a similarity marks the lines of one text
/// and counts the other's marked lines.
#[derive(Debug, Clone, Default)]
pub struct LineIndex {
    /// The distinct lines; empty or a power of two long.
    table: Vec<Line>,
    /// The number of distinct lines in `table`.
    distinct: usize,
    /// The stamp of the latest marking (0 marks nothing).
    stamp: u32,
    /// The table entries of every text, text after text.
    slots: Vec<u32>,
    /// Where each text's entries end in `slots`.
    ends: Vec<usize>,
}

/// The table length that holds `lines` distinct lines at most three
/// quarters full.
fn table_len(lines: usize) -> usize {
    lines
        .saturating_add(lines / 3 + 1)
        .next_power_of_two()
        .max(16)
}

impl LineIndex {
    /// An empty index with room for `lines` line hashes of `texts` texts.
    pub fn with_capacity(lines: usize, texts: usize) -> Self {
        LineIndex {
            table: vec![Line::default(); table_len(lines)],
            distinct: 0,
            stamp: 0,
            slots: Vec::with_capacity(lines),
            ends: Vec::with_capacity(texts),
        }
    }

    /// Make room for `more` new distinct lines: a larger table, every entry
    /// moved and every text's entries renumbered (the table at least
    /// doubles, so the moves cost linear time over all texts).
    fn reserve(&mut self, more: usize) {
        let need = self.distinct.saturating_add(more);
        if need <= self.table.len() / 4 * 3 {
            return;
        }
        let len = table_len(need).max(self.table.len() * 2);
        let old = std::mem::replace(&mut self.table, vec![Line::default(); len]);
        let mask = len - 1;
        let mut moved = vec![0u32; old.len()];
        for (line, to) in old.iter().zip(moved.iter_mut()) {
            if line.df == 0 {
                continue;
            }
            let mut at = line.hash as usize & mask;
            while self.table.get(at).is_some_and(|l| l.df != 0) {
                at = (at + 1) & mask;
            }
            if let Some(free) = self.table.get_mut(at) {
                *free = *line;
            }
            *to = at as u32;
        }
        for s in &mut self.slots {
            *s = moved.get(*s as usize).copied().unwrap_or(0);
        }
    }

    /// Add the next text, given the hashes of its lines in any order,
    /// repeats allowed.
    pub fn push_text(&mut self, hashes: &[u64]) {
        self.reserve(hashes.len());
        self.stamp += 1;
        let stamp = self.stamp;
        let mask = self.table.len().wrapping_sub(1);
        for &h in hashes {
            // From the hash's home entry to the line or a free entry (there
            // is one: the table is at most three quarters full).
            let mut at = h as usize & mask;
            while self.table.get(at).is_some_and(|l| l.df != 0 && l.hash != h) {
                at = (at + 1) & mask;
            }
            let Some(line) = self.table.get_mut(at) else {
                continue;
            };
            if line.df == 0 {
                *line = Line {
                    hash: h,
                    df: 1,
                    mark: stamp,
                };
                self.distinct += 1;
            } else if line.mark == stamp {
                continue;
            } else {
                line.mark = stamp;
                line.df += 1;
            }
            self.slots.push(at as u32);
        }
        self.ends.push(self.slots.len());
    }

    /// Number of texts.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no text.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Jaccard similarity of the line sets of texts `a` and `b` (equal to
    /// [`jaccard`] of their [`LineSet`]s).
    pub fn jaccard(&mut self, a: usize, b: usize) -> f64 {
        self.stamp += 1;
        let stamp = self.stamp;
        let (x, y) = (
            text_of(&self.slots, &self.ends, a),
            text_of(&self.slots, &self.ends, b),
        );
        if x.is_empty() && y.is_empty() {
            return 1.0;
        }
        mark_all(&mut self.table, x, stamp);
        let inter = count_marked(&self.table, y, stamp);
        ratio(inter, x.len(), y.len())
    }

    /// Every pair `(earlier, later, similarity)` of texts with similarity
    /// at or above `limits.threshold` that candidate generation finds, plus
    /// the number of similarity computations made (see [`similar_pairs`]).
    ///
    /// The head of a line's posting list is in an array by table entry. A
    /// line no other text holds finds nothing and is found by nothing, so it
    /// is neither probed nor indexed. A posting list is a chain, newest entry
    /// first, through one arena; only its first `max_postings` entries are
    /// read, which are the entries a list that drops its oldest beyond
    /// `max_postings` would hold.
    pub fn similar_pairs(&mut self, limits: Limits) -> (Vec<(usize, usize, f64)>, u64) {
        let n = self.len();
        let mut heads: Vec<u32> = vec![NIL; self.table.len()];
        // The arena of `(text, next)` posting entries.
        let mut arena: Vec<(u32, u32)> = Vec::new();
        let mut keyed: Vec<(u32, u64, u32)> = Vec::new();
        let mut seen: Vec<usize> = vec![usize::MAX; n];
        let mut pairs = Vec::new();
        let mut comparisons = 0u64;
        for c in 0..n {
            let own = text_of(&self.slots, &self.ends, c);
            if own.is_empty() {
                continue;
            }
            // The prefix is the first `p` lines by (document frequency, hash),
            // which is unique within a text, so the entry never decides the
            // order. It starts with the lines of this text alone (frequency
            // 1): their lists are read and written by this text only, so they
            // are left out (and no text is indexed or probed when they fill
            // the prefix).
            let p = prefix_len(own.len(), limits.threshold).min(own.len());
            keyed.clear();
            let mut alone = 0usize;
            for &slot in own {
                let line = self.table.get(slot as usize).copied().unwrap_or_default();
                if line.df <= 1 {
                    alone += 1;
                } else {
                    keyed.push((line.df, line.hash, slot));
                }
            }
            if alone >= p {
                continue;
            }
            let q = (p - alone).min(keyed.len());
            if q > 0 && q < keyed.len() {
                keyed.select_nth_unstable(q - 1);
            }
            let head = keyed.get_mut(..q).unwrap_or_default();
            head.sort_unstable();
            let mut compared = 0usize;
            let mut probing = true;
            // The stamp `c`'s lines carry once they are marked for a
            // similarity.
            let mut marked = None;
            for &(_, _, slot) in head.iter() {
                let Some(first) = heads.get_mut(slot as usize) else {
                    continue;
                };
                // `c` joins this list only after it is read, and the other
                // lists it joins are other lines', so it never meets itself.
                let mut node = *first;
                let mut read = 0usize;
                while probing && node != NIL && read < limits.max_postings {
                    let Some(&(d, next)) = arena.get(node as usize) else {
                        break;
                    };
                    node = next;
                    read += 1;
                    let d = d as usize;
                    let Some(slot) = seen.get_mut(d) else {
                        continue;
                    };
                    if *slot == c {
                        continue;
                    }
                    *slot = c;
                    let other = text_of(&self.slots, &self.ends, d);
                    let (lo, hi) = (own.len().min(other.len()), own.len().max(other.len()));
                    if (lo as f64) < limits.threshold * hi as f64 - 1e-9 {
                        continue;
                    }
                    if compared >= limits.max_candidates {
                        probing = false;
                        break;
                    }
                    compared += 1;
                    comparisons += 1;
                    let stamp = match marked {
                        Some(s) => s,
                        None => {
                            self.stamp += 1;
                            mark_all(&mut self.table, own, self.stamp);
                            marked = Some(self.stamp);
                            self.stamp
                        }
                    };
                    let inter = count_marked(&self.table, other, stamp);
                    let j = ratio(inter, own.len(), other.len());
                    if j >= limits.threshold {
                        pairs.push((d, c, j));
                    }
                }
                arena.push((c as u32, *first));
                *first = (arena.len() - 1) as u32;
            }
        }
        (pairs, comparisons)
    }
}

/// The slots of text `i` of a [`LineIndex`].
fn text_of<'a>(slots: &'a [u32], ends: &[usize], i: usize) -> &'a [u32] {
    let start = match i.checked_sub(1) {
        Some(k) => ends.get(k).copied().unwrap_or(0),
        None => 0,
    };
    let end = ends.get(i).copied().unwrap_or(start);
    slots.get(start..end).unwrap_or(&[])
}

/// Give the lines of entries `slots` the mark `stamp`.
fn mark_all(table: &mut [Line], slots: &[u32], stamp: u32) {
    for &s in slots {
        if let Some(l) = table.get_mut(s as usize) {
            l.mark = stamp;
        }
    }
}

/// The number of the lines of entries `slots` marked `stamp`.
fn count_marked(table: &[Line], slots: &[u32], stamp: u32) -> usize {
    slots
        .iter()
        .filter(|&&s| table.get(s as usize).is_some_and(|l| l.mark == stamp))
        .count()
}

/// `inter / union` for sets of `a` and `b` elements sharing `inter`, as
/// [`jaccard`] computes it.
fn ratio(inter: usize, a: usize, b: usize) -> f64 {
    let union = a + b - inter;
    inter as f64 / union as f64
}

/// Every pair `(earlier, later, similarity)` of texts with similarity at or
/// above `limits.threshold` that candidate generation finds, plus the number
/// of similarity computations made ([`LineIndex::similar_pairs`] over these
/// line sets).
pub fn similar_pairs(sets: &[LineSet], limits: Limits) -> (Vec<(usize, usize, f64)>, u64) {
    let total: usize = sets.iter().map(|s| s.sorted.len()).sum();
    let mut index = LineIndex::with_capacity(total, sets.len());
    for s in sets {
        index.push_text(&s.sorted);
    }
    index.similar_pairs(limits)
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn file(n: usize, tag: &str) -> String {
        (0..n)
            .map(|i| format!("line {i} of {tag} with some text"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The straightforward normalization: every line of `text.lines()`
    /// trimmed and lower-cased by `str`, blank ones dropped.
    fn reference_line_set(text: &str) -> Vec<u64> {
        let mut v: Vec<u64> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| xxhash_rust::xxh3::xxh3_64(l.to_lowercase().as_bytes()))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Pieces texts are made of: ASCII of both cases, every kind of ASCII
    /// and Unicode whitespace, `\r\n`, characters that lower-case to
    /// themselves, to another char, to two chars (`İ`), and the capital sigma
    /// with its final-form rule.
    const PIECES: [&str; 24] = [
        "a", "B", "Fn", " ", "\t", "\x0b", "\x0c", "\r", "\n", "\r\n", "\u{85}", "\u{a0}",
        "\u{3000}", "É", "é", "Ω", "ω", "İ", "Σ", "ΣΑΣ ", "─", "✓", "Ǆ", "ß",
    ];

    fn text_of(picks: &[usize]) -> String {
        picks
            .iter()
            .map(|&i| PIECES.get(i % PIECES.len()).copied().unwrap_or(""))
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn line_hasher_matches_the_reference(
            texts in proptest::collection::vec(
                proptest::collection::vec(0usize..PIECES.len(), 0..60), 1..6)
        ) {
            // One hasher over several texts: buffers reused across texts.
            let mut hasher = LineHasher::default();
            for picks in &texts {
                let t = text_of(picks);
                proptest::prop_assert_eq!(
                    &hasher.line_set(&t).sorted,
                    &reference_line_set(&t),
                    "{:?}",
                    t
                );
            }
        }
    }

    /// Every call of a line callback: the range, the ASCII flag and the
    /// lower-cased bytes of the line.
    type Calls = Vec<(usize, usize, bool, Vec<u8>)>;

    fn lane_calls(text: &str) -> (Calls, Calls, Vec<u8>, Vec<u8>) {
        let (mut lanes, mut scalar) = (Vec::new(), Vec::new());
        let (mut lower_a, mut lower_b) = (b"stale".to_vec(), Vec::new());
        lower_lines(text.as_bytes(), &mut lower_a, |l, a, b, ascii| {
            lanes.push((a, b, ascii, l[a..b].to_vec()))
        });
        lower_lines_scalar(text.as_bytes(), &mut lower_b, |l, a, b, ascii| {
            scalar.push((a, b, ascii, l[a..b].to_vec()))
        });
        // A longer buffer from before keeps its tail.
        assert!(lower_a.len() >= text.len());
        lower_a.truncate(text.len());
        (lanes, scalar, lower_a, lower_b)
    }

    proptest::proptest! {
        #[test]
        fn lane_lines_match_the_scalar_pass(picks in proptest::collection::vec(0usize..PIECES.len(), 0..90)) {
            let text = text_of(&picks);
            let (lanes, scalar, lower_a, lower_b) = lane_calls(&text);
            proptest::prop_assert_eq!(lanes, scalar);
            proptest::prop_assert_eq!(lower_a, lower_b);
        }

        #[test]
        fn lane_lines_match_on_any_bytes(text in "[a-zA-Z@\\[`{\n\r é\u{100}✓]{0,70}") {
            let (lanes, scalar, lower_a, lower_b) = lane_calls(&text);
            proptest::prop_assert_eq!(lanes, scalar);
            proptest::prop_assert_eq!(lower_a, lower_b);
        }
    }

    #[test]
    fn caseless_blocks_lower_to_themselves() {
        for &(lo, hi) in &CASELESS {
            for c in (lo..=hi).filter_map(char::from_u32) {
                let mut lc = c.to_lowercase();
                assert!(lc.len() == 1 && lc.next() == Some(c), "{c:?}");
            }
        }
        for c in [
            'A', 'É', 'Ω', 'İ', 'Σ', 'Ǆ', '\u{2126}', '\u{212A}', '\u{24B6}', '\u{2C00}',
        ] {
            assert!(!lowers_to_itself(c), "{c:?}");
        }
        for c in ['a', 'é', 'ß', '─', '✓', '→', '…', '中', '🚀', '\u{a0}'] {
            assert!(lowers_to_itself(c), "{c:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn first_non_ascii_is_position(text in "[ax\u{e9}\u{2500}]{0,40}") {
            let b = text.as_bytes();
            proptest::prop_assert_eq!(first_non_ascii(b), b.iter().position(|&x| x >= 0x80));
        }
    }

    #[test]
    fn lane_lines_edge_cases() {
        let long = "x".repeat(15);
        for t in [
            String::new(),
            "\n".into(),
            "A".repeat(16),
            format!("{long}\n"),
            format!("{long}é\nZ"),
            format!("{long}\né"),
            "é\n".repeat(9),
            format!("{}\n{}", "Q".repeat(31), "ü".repeat(20)),
            "@[`{AZaz".repeat(5),
        ] {
            let (lanes, scalar, lower_a, lower_b) = lane_calls(&t);
            assert_eq!(lanes, scalar, "{t:?}");
            assert_eq!(lower_a, lower_b, "{t:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn lines_split_as_str_split(text in "[a\\n\\r]{0,80}") {
            let mut got = Vec::new();
            for_each_line(text.as_bytes(), |a, b| got.push(&text[a..b]));
            let want: Vec<&str> = text.split('\n').collect();
            proptest::prop_assert_eq!(got, want);
        }
    }

    proptest::proptest! {
        #[test]
        fn ascii_trim_is_str_trim(text in "[ \\t\\x0b\\x0c\\r\\nax]{0,40}") {
            let got = trim_ascii_ws(text.as_bytes());
            proptest::prop_assert_eq!(got, text.trim().as_bytes());
        }

        #[test]
        fn ascii_trim_after_long_indentation(
            indent in 0usize..40, rest in "[ \\t\\x0bax]{0,12}"
        ) {
            let text = format!("{}{rest}", " ".repeat(indent));
            let got = trim_ascii_ws(text.as_bytes());
            proptest::prop_assert_eq!(got, text.trim().as_bytes());
        }
    }

    #[test]
    fn line_hasher_edge_cases() {
        for t in [
            "",
            "\n",
            "\r",
            "abc\r",
            "  A\r\n\x0bB\x0b\n\u{a0}C\u{a0}\n",
            "ΟΔΟΣ\nΣ\n Σ \nΑΣ.\nσ",
            "İstanbul\nISTANBUL\n\u{85}x\u{85}",
            "MIXED ascii and ÜMLAUT\n  ✓ Done  \n─── Table ───",
        ] {
            assert_eq!(line_set(t).sorted, reference_line_set(t), "{t:?}");
        }
    }

    #[test]
    fn normalization_and_jaccard() {
        let a = line_set("  Foo\n\nbar  \nBAZ");
        let b = line_set("foo\nbar\nbaz\n\n");
        assert_eq!(jaccard(&a, &b), 1.0);
        let c = line_set("foo\nbar\nqux");
        assert!((jaccard(&a, &c) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn one_line_changed_in_ten_is_nine_elevenths() {
        let a = file(10, "x");
        let b = a.replace("line 6 of x", "line six of x");
        let j = jaccard(&line_set(&a), &line_set(&b));
        assert!((j - 9.0 / 11.0).abs() < 1e-12, "{j}");
    }

    #[test]
    fn prefix_lengths() {
        assert_eq!(prefix_len(10, 0.85), 2);
        assert_eq!(prefix_len(10, 0.5), 6);
        assert_eq!(prefix_len(1, 0.85), 1);
        assert_eq!(prefix_len(20, 1.0), 1);
    }

    #[test]
    fn prefix_filter_finds_every_qualifying_pair() {
        // Brute force agrees with the index on a small family of texts.
        let texts: Vec<String> = (0..30)
            .map(|i| {
                (0..12)
                    .map(|l| format!("l{}", (l * (i % 5 + 1) + i / 7) % 17))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect();
        let sets: Vec<LineSet> = texts.iter().map(|t| line_set(t)).collect();
        for t in [0.5, 0.7, 0.85] {
            let limits = Limits {
                threshold: t,
                max_postings: 1000,
                max_candidates: 1000,
            };
            let (mut got, _) = similar_pairs(&sets, limits);
            got.sort_by_key(|a| (a.0, a.1));
            let mut want = Vec::new();
            for i in 0..sets.len() {
                for j in i + 1..sets.len() {
                    if jaccard(&sets[i], &sets[j]) >= t {
                        want.push((i, j));
                    }
                }
            }
            let got: Vec<(usize, usize)> = got.iter().map(|p| (p.0, p.1)).collect();
            assert_eq!(got, want, "threshold {t}");
        }
    }

    /// Candidate generation as first written: one `VecDeque` per posting
    /// list, dropping its oldest entry beyond `max_postings`.
    fn reference_similar_pairs(
        sets: &[LineSet],
        limits: Limits,
    ) -> (Vec<(usize, usize, f64)>, u64) {
        let mut df: HashMap<u64, u32> = HashMap::new();
        for s in sets {
            for h in &s.sorted {
                *df.entry(*h).or_default() += 1;
            }
        }
        let mut index: HashMap<u64, std::collections::VecDeque<usize>> = HashMap::new();
        let mut seen = vec![usize::MAX; sets.len()];
        let mut pairs = Vec::new();
        let mut comparisons = 0u64;
        for (c, s) in sets.iter().enumerate() {
            if s.sorted.is_empty() {
                continue;
            }
            let mut keyed: Vec<(u32, u64)> = s.sorted.iter().map(|h| (df[h], *h)).collect();
            keyed.sort_unstable();
            let p = prefix_len(keyed.len(), limits.threshold);
            let prefix: Vec<u64> = keyed[..p].iter().map(|&(_, h)| h).collect();
            let mut compared = 0usize;
            'probe: for h in &prefix {
                let Some(post) = index.get(h) else { continue };
                for &d in post.iter().rev() {
                    if seen[d] == c {
                        continue;
                    }
                    seen[d] = c;
                    let other = &sets[d];
                    let lo = s.sorted.len().min(other.sorted.len());
                    let hi = s.sorted.len().max(other.sorted.len());
                    if (lo as f64) < limits.threshold * hi as f64 - 1e-9 {
                        continue;
                    }
                    if compared >= limits.max_candidates {
                        break 'probe;
                    }
                    compared += 1;
                    comparisons += 1;
                    let j = jaccard(s, other);
                    if j >= limits.threshold {
                        pairs.push((d, c, j));
                    }
                }
            }
            for h in &prefix {
                let post = index.entry(*h).or_default();
                if post.len() >= limits.max_postings {
                    post.pop_front();
                }
                post.push_back(c);
            }
        }
        (pairs, comparisons)
    }

    proptest::proptest! {
        #[test]
        fn similar_pairs_match_the_reference(
            texts in proptest::collection::vec(
                (proptest::collection::vec(0u8..24, 0..14), 0usize..8), 1..40),
            t in 0.3f64..1.0,
            max_postings in 1usize..6,
            max_candidates in 1usize..6,
        ) {
            // Few distinct shared lines, so lists overflow and both caps bind,
            // and some lines no other text holds (which may fill a prefix).
            let sets: Vec<LineSet> = texts
                .iter()
                .enumerate()
                .map(|(i, (ls, alone))| {
                    let mut t: Vec<String> = ls.iter().map(|l| format!("line {l}")).collect();
                    t.extend((0..*alone).map(|k| format!("text {i} alone {k}")));
                    line_set(&t.join("\n"))
                })
                .collect();
            for limits in [
                Limits { threshold: t, max_postings, max_candidates },
                Limits { threshold: t, max_postings: 1000, max_candidates: 1000 },
            ] {
                proptest::prop_assert_eq!(
                    similar_pairs(&sets, limits),
                    reference_similar_pairs(&sets, limits)
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn line_index_of_raw_hashes_matches_sorted_sets(
            texts in proptest::collection::vec(
                proptest::collection::vec(0u8..12, 0..16), 1..24),
            t in 0.3f64..1.0,
            max_postings in 1usize..6,
            max_candidates in 1usize..6,
        ) {
            // Lines repeat within a text, in any order, some blank or only
            // differing in case and indentation.
            let texts: Vec<String> = texts
                .iter()
                .map(|ls| {
                    ls.iter()
                        .map(|l| match l % 4 {
                            0 => format!("  Line {}", l / 4),
                            1 => format!("line {}", l / 4),
                            2 => String::new(),
                            _ => format!("other {l}"),
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .collect();
            let sets: Vec<LineSet> = texts.iter().map(|t| line_set(t)).collect();
            let mut hasher = LineHasher::default();
            let mut raw = Vec::new();
            let mut index = LineIndex::default();
            for text in &texts {
                raw.clear();
                hasher.push_hashes(text, &mut raw);
                index.push_text(&raw);
            }
            proptest::prop_assert_eq!(index.len(), sets.len());
            for limits in [
                Limits { threshold: t, max_postings, max_candidates },
                Limits { threshold: t, max_postings: 1000, max_candidates: 1000 },
            ] {
                proptest::prop_assert_eq!(
                    index.similar_pairs(limits),
                    reference_similar_pairs(&sets, limits)
                );
            }
            for a in 0..sets.len() {
                for b in 0..sets.len() {
                    proptest::prop_assert_eq!(
                        index.jaccard(a, b).to_bits(),
                        jaccard(&sets[a], &sets[b]).to_bits()
                    );
                }
            }
        }
    }

    /// Raw line hashes that crowd the table: small values, values sharing
    /// their low bits (one home entry), zero, the largest values and
    /// scattered ones.
    fn crowded_hash(k: u8) -> u64 {
        match k % 5 {
            0 => u64::from(k),
            1 => u64::from(k) << 40,
            2 => u64::MAX - u64::from(k),
            3 => 0,
            _ => u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        }
    }

    /// Both indexes over the same texts of raw hashes, the new one sized
    /// in advance or grown from empty.
    fn both_indexes(texts: &[Vec<u64>], sized: bool) -> (LineIndex, reference::SlotIndex) {
        let total = texts.iter().map(Vec::len).sum();
        let mut new = if sized {
            LineIndex::with_capacity(total, texts.len())
        } else {
            LineIndex::default()
        };
        let mut old = reference::SlotIndex::with_capacity(total, texts.len());
        for t in texts {
            new.push_text(t);
            old.push_text(t);
        }
        (new, old)
    }

    proptest::proptest! {
        #[test]
        fn line_index_matches_the_slot_index(
            texts in proptest::collection::vec(
                proptest::collection::vec(0u8..60, 0..40), 1..30),
            t in 0.3f64..1.0,
            max_postings in 1usize..6,
            max_candidates in 1usize..6,
            sized in proptest::bool::ANY,
        ) {
            let texts: Vec<Vec<u64>> = texts
                .iter()
                .map(|t| t.iter().map(|&k| crowded_hash(k)).collect())
                .collect();
            let (mut new, mut old) = both_indexes(&texts, sized);
            proptest::prop_assert_eq!(new.len(), old.len());
            for limits in [
                Limits { threshold: t, max_postings, max_candidates },
                Limits { threshold: t, max_postings: 1000, max_candidates: 1000 },
            ] {
                proptest::prop_assert_eq!(new.similar_pairs(limits), old.similar_pairs(limits));
            }
            for a in 0..texts.len() {
                for b in 0..texts.len() {
                    proptest::prop_assert_eq!(
                        new.jaccard(a, b).to_bits(),
                        old.jaccard(a, b).to_bits()
                    );
                }
            }
        }
    }

    #[test]
    fn line_index_grows_and_matches_the_slot_index() {
        // Texts of new lines and lines of earlier texts, from an empty
        // table through several growths, and a text of one line repeated.
        let mut texts: Vec<Vec<u64>> = (0..60u64)
            .map(|i| {
                (0..40u64)
                    .map(|l| (i * 17 + l * 31) % 900 * 0x1_0000_0001)
                    .collect()
            })
            .collect();
        texts.push(vec![7; 50]);
        texts.push(Vec::new());
        texts.push((0..3000u64).map(|l| l << 33).collect());
        for sized in [false, true] {
            let (mut new, mut old) = both_indexes(&texts, sized);
            assert!(new.table.len().is_power_of_two());
            assert!(new.distinct * 4 <= new.table.len() * 3);
            let limits = Limits {
                threshold: 0.5,
                max_postings: 64,
                max_candidates: 128,
            };
            assert_eq!(new.similar_pairs(limits), old.similar_pairs(limits));
            for a in 0..texts.len() {
                for b in 0..texts.len() {
                    assert_eq!(new.jaccard(a, b).to_bits(), old.jaccard(a, b).to_bits());
                }
            }
        }
    }

    #[test]
    fn union_find_is_transitive() {
        let mut u = UnionFind::new(4);
        u.union(0, 1);
        u.union(2, 1);
        assert_eq!(u.find(0), u.find(2));
        assert_ne!(u.find(0), u.find(3));
    }
}
