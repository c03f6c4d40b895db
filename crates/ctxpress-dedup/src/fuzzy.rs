//! Near-duplicate candidate generation and line-level Jaccard similarity.
//!
//! Each text becomes the set of hashes of its normalized lines (trimmed,
//! lower-cased, empty lines dropped). Lines are ordered by rarity (fewest texts
//! first) and each text is indexed under its first `|A| - ceil(t·|A|) + 1`
//! lines (prefix filtering): two texts with Jaccard ≥ t always share one of
//! those fingerprint lines, so only texts that share one are compared.
//! Posting lists keep only their most recent entries and each text is compared
//! with a bounded number of candidates, so the work is linear in the input.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hasher for keys that are line hashes already (xxh3): the key is its own
/// hash, so the maps of [`similar_pairs`] skip SipHash.
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

/// The normalized line set of one text.
#[derive(Debug, Clone, Default)]
pub struct LineSet {
    /// Distinct line hashes, sorted ascending (for merging).
    pub sorted: Vec<u64>,
}

/// Hashes of the normalized lines of `text`, sorted and deduplicated.
pub fn line_set(text: &str) -> LineSet {
    let mut v: Vec<u64> = Vec::new();
    // ASCII lines are lower-cased into one reused buffer (for ASCII,
    // `to_lowercase` is the ASCII mapping); others allocate.
    let mut buf: Vec<u8> = Vec::new();
    for l in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let h = if l.is_ascii() {
            // One pass: copy lower-cased (cheaper than looking for a
            // capital first and copying only then).
            buf.clear();
            buf.extend(l.bytes().map(|b| b.to_ascii_lowercase()));
            xxhash_rust::xxh3::xxh3_64(&buf)
        } else {
            xxhash_rust::xxh3::xxh3_64(l.to_lowercase().as_bytes())
        };
        v.push(h);
    }
    v.sort_unstable();
    v.dedup();
    LineSet { sorted: v }
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

/// Every pair `(earlier, later, similarity)` of texts with similarity at or
/// above `limits.threshold` that candidate generation finds, plus the number
/// of similarity computations made.
pub fn similar_pairs(sets: &[LineSet], limits: Limits) -> (Vec<(usize, usize, f64)>, u64) {
    let mut df: LineMap<u32> = LineMap::default();
    df.reserve(sets.iter().map(|s| s.sorted.len()).sum());
    for s in sets {
        for h in &s.sorted {
            *df.entry(*h).or_default() += 1;
        }
    }
    let mut index: LineMap<std::collections::VecDeque<usize>> = LineMap::default();
    let mut seen: Vec<usize> = vec![usize::MAX; sets.len()];
    let mut pairs = Vec::new();
    let mut comparisons = 0u64;
    for (c, s) in sets.iter().enumerate() {
        if s.sorted.is_empty() {
            continue;
        }
        // Rarest lines first (document frequency looked up once per line).
        let mut keyed: Vec<(u32, u64)> = s
            .sorted
            .iter()
            .map(|h| (df.get(h).copied().unwrap_or(0), *h))
            .collect();
        let p = prefix_len(keyed.len(), limits.threshold).min(keyed.len());
        if p > 0 && p < keyed.len() {
            keyed.select_nth_unstable(p - 1);
        }
        let head = keyed.get_mut(..p).unwrap_or_default();
        head.sort_unstable();
        let order: Vec<u64> = head.iter().map(|&(_, h)| h).collect();
        let prefix = order.as_slice();
        let mut compared = 0usize;
        'probe: for h in prefix {
            let Some(post) = index.get(h) else { continue };
            for &d in post.iter().rev() {
                let Some(slot) = seen.get_mut(d) else {
                    continue;
                };
                if *slot == c {
                    continue;
                }
                *slot = c;
                let Some(other) = sets.get(d) else { continue };
                let (lo, hi) = (
                    s.sorted.len().min(other.sorted.len()),
                    s.sorted.len().max(other.sorted.len()),
                );
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
        for h in prefix {
            let post = index.entry(*h).or_default();
            if post.len() >= limits.max_postings {
                post.pop_front();
            }
            post.push_back(c);
        }
    }
    (pairs, comparisons)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: usize, tag: &str) -> String {
        (0..n)
            .map(|i| format!("line {i} of {tag} with some text"))
            .collect::<Vec<_>>()
            .join("\n")
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

    #[test]
    fn union_find_is_transitive() {
        let mut u = UnionFind::new(4);
        u.union(0, 1);
        u.union(2, 1);
        assert_eq!(u.find(0), u.find(2));
        assert_ne!(u.find(0), u.find(3));
    }
}
