//! The line index as first written with a table of line slots: a hash map
//! from line hash to slot and per-slot arrays of hash, document frequency
//! and mark. Kept as the reference [`super::LineIndex`] is tested against.

use super::{Limits, NIL, prefix_len, ratio, text_of};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hasher for keys that are line hashes already (xxh3): the key is its own
/// hash, so the map of [`SlotIndex`] skips SipHash.
#[derive(Default, Clone, Copy)]
struct LineHashHasher(u64);

impl Hasher for LineHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by line hashes.
type LineMap<V> = HashMap<u64, V, BuildHasherDefault<LineHashHasher>>;

/// The line sets of many texts over one table of distinct lines.
///
/// Every distinct line hash gets a slot (one hash lookup per line); a text is
/// the list of the slots of its distinct lines, in the order they first occur
/// in it, all texts in one array. The line sets are the same as
/// [`super::LineHasher::hashes_into`] gives, without a sort or a vector per text:
/// repeats within a text are dropped by a per-slot mark, and a similarity
/// marks the lines of one text and counts the other's marked lines.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlotIndex {
    /// The slot of each line hash.
    slot_of: LineMap<u32>,
    /// Per slot: its line hash.
    hash: Vec<u64>,
    /// Per slot: the number of texts holding it (document frequency).
    df: Vec<u32>,
    /// Per slot: the stamp of the last text that marked it.
    mark: Vec<u32>,
    /// The stamp of the latest marking (0 marks nothing).
    stamp: u32,
    /// The slots of every text, text after text.
    slots: Vec<u32>,
    /// Where each text's slots end in `slots`.
    ends: Vec<usize>,
}

impl SlotIndex {
    /// An empty index with room for `lines` line hashes of `texts` texts.
    pub(crate) fn with_capacity(lines: usize, texts: usize) -> Self {
        let mut slot_of = LineMap::default();
        slot_of.reserve(lines);
        SlotIndex {
            slot_of,
            hash: Vec::with_capacity(lines),
            df: Vec::with_capacity(lines),
            mark: Vec::with_capacity(lines),
            stamp: 0,
            slots: Vec::with_capacity(lines),
            ends: Vec::with_capacity(texts),
        }
    }

    /// Add the next text, given the hashes of its lines in any order,
    /// repeats allowed.
    pub(crate) fn push_text(&mut self, hashes: &[u64]) {
        self.stamp += 1;
        let stamp = self.stamp;
        for &h in hashes {
            let next = self.hash.len() as u32;
            let slot = *self.slot_of.entry(h).or_insert(next);
            if slot == next {
                self.hash.push(h);
                self.df.push(0);
                self.mark.push(0);
            }
            let Some(m) = self.mark.get_mut(slot as usize) else {
                continue;
            };
            if *m == stamp {
                continue;
            }
            *m = stamp;
            if let Some(n) = self.df.get_mut(slot as usize) {
                *n += 1;
            }
            self.slots.push(slot);
        }
        self.ends.push(self.slots.len());
    }

    /// Number of texts.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Jaccard similarity of the line sets of texts `a` and `b` (equal to
    /// [`jaccard`] of their [`LineSet`]s).
    pub(crate) fn jaccard(&mut self, a: usize, b: usize) -> f64 {
        self.stamp += 1;
        let stamp = self.stamp;
        let (x, y) = (
            text_of(&self.slots, &self.ends, a),
            text_of(&self.slots, &self.ends, b),
        );
        if x.is_empty() && y.is_empty() {
            return 1.0;
        }
        mark_all(&mut self.mark, x, stamp);
        let inter = count_marked(&self.mark, y, stamp);
        ratio(inter, x.len(), y.len())
    }

    /// Every pair `(earlier, later, similarity)` of texts with similarity
    /// at or above `limits.threshold` that candidate generation finds, plus
    /// the number of similarity computations made (see [`similar_pairs`]).
    ///
    /// A line's document frequency and the head of its posting list are
    /// arrays by slot. A line no other text holds finds nothing and is found
    /// by nothing, so it is neither probed nor indexed. A posting list is a
    /// chain, newest entry first, through one arena; only its first
    /// `max_postings` entries are read, which are the entries a list that
    /// drops its oldest beyond `max_postings` would hold.
    pub(crate) fn similar_pairs(&mut self, limits: Limits) -> (Vec<(usize, usize, f64)>, u64) {
        let n = self.len();
        let mut heads: Vec<u32> = vec![NIL; self.hash.len()];
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
            // which is unique within a text, so the slot never decides the
            // order. It starts with the lines of this text alone (frequency
            // 1): their lists are read and written by this text only, so they
            // are left out (and no text is indexed or probed when they fill
            // the prefix).
            let p = prefix_len(own.len(), limits.threshold).min(own.len());
            keyed.clear();
            let mut alone = 0usize;
            for &slot in own {
                let f = self.df.get(slot as usize).copied().unwrap_or(0);
                if f <= 1 {
                    alone += 1;
                } else {
                    let h = self.hash.get(slot as usize).copied().unwrap_or(0);
                    keyed.push((f, h, slot));
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
                            mark_all(&mut self.mark, own, self.stamp);
                            marked = Some(self.stamp);
                            self.stamp
                        }
                    };
                    let inter = count_marked(&self.mark, other, stamp);
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

/// Give every slot of `slots` the mark `stamp`.
fn mark_all(mark: &mut [u32], slots: &[u32], stamp: u32) {
    for &s in slots {
        if let Some(m) = mark.get_mut(s as usize) {
            *m = stamp;
        }
    }
}

/// The number of slots of `slots` marked `stamp`.
fn count_marked(mark: &[u32], slots: &[u32], stamp: u32) -> usize {
    slots
        .iter()
        .filter(|&&s| mark.get(s as usize) == Some(&stamp))
        .count()
}
