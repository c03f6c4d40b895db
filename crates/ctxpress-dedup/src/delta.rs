//! Compact line diffs for delta references: Myers' O((N+M)·D) algorithm after
//! stripping the common prefix and suffix, giving up beyond a bound on D so the
//! cost stays linear in the text size.

/// One edit of a line diff. Line numbers are 1-based: a deletion numbers the
/// line in the keep target, an insertion numbers it in the replaced text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit<'a> {
    /// A line of the keep target missing from this text.
    Del(usize, &'a str),
    /// A line of this text missing from the keep target.
    Ins(usize, &'a str),
}

/// The edits turning `old` into `new` (lines split on `\n`), or `None` when
/// more than `max_edits` lines differ.
pub fn line_diff<'a>(old: &'a str, new: &'a str, max_edits: usize) -> Option<Vec<Edit<'a>>> {
    let a = split_lines(old);
    let b = split_lines(new);
    let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let a_rest = a.get(pre..).unwrap_or(&[]);
    let b_rest = b.get(pre..).unwrap_or(&[]);
    let suf = a_rest
        .iter()
        .rev()
        .zip(b_rest.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let am = a_rest.get(..a_rest.len() - suf).unwrap_or(&[]);
    let bm = b_rest.get(..b_rest.len() - suf).unwrap_or(&[]);
    if am.len().abs_diff(bm.len()) > max_edits {
        return None;
    }
    let script = myers(am, bm, max_edits)?;
    Some(
        script
            .into_iter()
            .map(|e| match e {
                Op::Del(i) => Edit::Del(pre + i + 1, am.get(i).copied().unwrap_or("")),
                Op::Ins(j) => Edit::Ins(pre + j + 1, bm.get(j).copied().unwrap_or("")),
            })
            .collect(),
    )
}

/// `text.split('\n').collect()`, with the newlines found by `memchr`
/// ([`crate::fuzzy::for_each_line`]).
fn split_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    crate::fuzzy::for_each_line(text.as_bytes(), |a, b| {
        out.push(text.get(a..b).unwrap_or(""));
    });
    out
}

enum Op {
    Del(usize),
    Ins(usize),
}

fn myers(a: &[&str], b: &[&str], max_d: usize) -> Option<Vec<Op>> {
    let n = a.len() as isize;
    let m = b.len() as isize;
    let max = (a.len() + b.len()).min(max_d) as isize;
    let off = max + 1;
    let width = (2 * max + 3) as usize;
    let mut v = vec![0isize; width];
    let idx = |k: isize| (k + off) as usize;
    let mut trace: Vec<Vec<isize>> = Vec::new();
    for d in 0..=max {
        trace.push(v.clone());
        let mut k = -d;
        while k <= d {
            let down = k == -d || (k != d && v[idx(k - 1)] < v[idx(k + 1)]);
            let mut x = if down {
                v[idx(k + 1)]
            } else {
                v[idx(k - 1)] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[idx(k)] = x;
            if x >= n && y >= m {
                return Some(backtrack(&trace, d, n, m, idx));
            }
            k += 2;
        }
    }
    None
}

fn backtrack(
    trace: &[Vec<isize>],
    found: isize,
    n: isize,
    m: isize,
    idx: impl Fn(isize) -> usize,
) -> Vec<Op> {
    let (mut x, mut y) = (n, m);
    let mut ops = Vec::new();
    let mut d = found;
    while d > 0 {
        let v = &trace[d as usize];
        let k = x - y;
        let down = k == -d || (k != d && v[idx(k - 1)] < v[idx(k + 1)]);
        let prev_k = if down { k + 1 } else { k - 1 };
        let prev_x = v[idx(prev_k)];
        let prev_y = prev_x - prev_k;
        if down {
            ops.push(Op::Ins(prev_y as usize));
        } else {
            ops.push(Op::Del(prev_x as usize));
        }
        x = prev_x;
        y = prev_y;
        d -= 1;
    }
    ops.reverse();
    ops
}

/// Write the edits as `-N: line` / `+N: line` lines joined by newlines.
pub fn render(edits: &[Edit<'_>]) -> String {
    let mut out = String::new();
    for (i, e) in edits.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let (sign, n, line) = match e {
            Edit::Del(n, l) => ('-', n, l),
            Edit::Ins(n, l) => ('+', n, l),
        };
        out.push(sign);
        out.push_str(&n.to_string());
        out.push_str(": ");
        out.push_str(line);
    }
    out
}

/// Rebuild the new text from the old one and the edits (the reading rule a
/// model follows; used by tests to prove deltas are exact).
pub fn apply(old: &str, edits: &[Edit<'_>]) -> String {
    let a: Vec<&str> = old.split('\n').collect();
    let dels: std::collections::HashSet<usize> = edits
        .iter()
        .filter_map(|e| match e {
            Edit::Del(n, _) => Some(*n),
            Edit::Ins(..) => None,
        })
        .collect();
    let ins: std::collections::BTreeMap<usize, &str> = edits
        .iter()
        .filter_map(|e| match e {
            Edit::Ins(n, l) => Some((*n, *l)),
            Edit::Del(..) => None,
        })
        .collect();
    let mut kept = a
        .iter()
        .enumerate()
        .filter(|(i, _)| !dels.contains(&(i + 1)))
        .map(|(_, l)| *l);
    let total = a.len() - dels.len() + ins.len();
    let mut out: Vec<&str> = Vec::with_capacity(total);
    for pos in 1..=total {
        match ins.get(&pos) {
            Some(l) => out.push(l),
            None => out.push(kept.next().unwrap_or("")),
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn split_lines_is_str_split() {
        for t in [
            "",
            "\n",
            "a",
            "a\n",
            "\na\r\nb",
            "é\n✓ long line of text\n\n",
            &"x\n".repeat(40),
        ] {
            assert_eq!(split_lines(t), t.split('\n').collect::<Vec<_>>(), "{t:?}");
        }
    }

    #[test]
    fn one_changed_line() {
        let old = "a\nb\nc\nd";
        let new = "a\nb\nX\nd";
        let e = line_diff(old, new, 10).unwrap();
        assert_eq!(e, vec![Edit::Del(3, "c"), Edit::Ins(3, "X")]);
        assert_eq!(render(&e), "-3: c\n+3: X");
        assert_eq!(apply(old, &e), new);
    }

    #[test]
    fn identical_and_bounded() {
        assert_eq!(line_diff("a\nb", "a\nb", 0).unwrap(), vec![]);
        assert!(line_diff("a\nb\nc", "x\ny\nz", 5).is_none());
        assert!(line_diff("a\nb\nc", "x\ny\nz", 6).is_some());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn diffs_rebuild_exactly(
            old in proptest::collection::vec("[abc]{0,2}", 0..12),
            new in proptest::collection::vec("[abc]{0,2}", 0..12),
        ) {
            let (old, new) = (old.join("\n"), new.join("\n"));
            let e = line_diff(&old, &new, 100).unwrap();
            prop_assert_eq!(apply(&old, &e), new.clone());
            // minimal: never more edits than delete-all + insert-all
            prop_assert!(e.len() <= old.split('\n').count() + new.split('\n').count());
        }
    }
}
