//! Compact line diffs for delta references: Myers' O((N+M)·D) algorithm after
//! stripping the common prefix and suffix, giving up beyond a bound on D so the
//! cost stays linear in the text size.
//!
//! [`line_diff`] finds the shared first and last lines on the bytes (lines
//! counted with `ctxpress_text::lines::count_newlines`), then diffs only the
//! middle.

use ctxpress_text::lines::count_newlines;

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
///
/// The lines the two texts share at their start and at their end are found
/// on the bytes (the common byte prefix and suffix, cut back to whole lines)
/// and only the lines between are split and diffed, so the long unchanged
/// runs of a re-read file are never split into lines.
pub fn line_diff<'a>(old: &'a str, new: &'a str, max_edits: usize) -> Option<Vec<Edit<'a>>> {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    // Common whole lines at the start: those whose newline lies inside the
    // common byte prefix, plus the line the prefix ends in when it ends
    // both texts' lines there (at a newline or a text's end).
    let k = common_prefix(a, b);
    let mut pre = count_newlines(a.get(..k).unwrap_or(&[]));
    let start = match (a.get(k), b.get(k)) {
        // Equal texts.
        (None, None) => return Some(Vec::new()),
        // `old`'s last line ends where `new`'s line does: `old` has no
        // line left.
        (None, Some(b'\n')) => {
            pre += 1;
            let bm = split_lines(new.get(k + 1..).unwrap_or(""));
            return finish(pre, &[], &bm, max_edits);
        }
        (Some(b'\n'), None) => {
            pre += 1;
            let am = split_lines(old.get(k + 1..).unwrap_or(""));
            return finish(pre, &am, &[], max_edits);
        }
        // The line `k` falls in differs: both texts' rest starts with it.
        _ => memchr::memrchr(b'\n', a.get(..k).unwrap_or(&[])).map_or(0, |p| p + 1),
    };
    let (x, y) = (a.get(start..).unwrap_or(&[]), b.get(start..).unwrap_or(&[]));
    // Common whole lines at the end of the rests, the same way: a line
    // whose newline before it lies inside the common suffix, plus the line
    // the suffix starts in when it starts both texts' lines there.
    let m = common_suffix(x, y);
    let (xs, ys) = (x.len() - m, y.len() - m);
    let whole_first = match (xs.checked_sub(1), ys.checked_sub(1)) {
        (None, Some(j)) => y.get(j) == Some(&b'\n'),
        (Some(i), None) => x.get(i) == Some(&b'\n'),
        _ => false,
    };
    // Where the middle lines of each rest end: before the first newline of
    // the common suffix, or before the newline ahead of it.
    let (x_end, y_end) = if whole_first {
        (xs.saturating_sub(1), ys.saturating_sub(1))
    } else {
        match x.get(xs..).and_then(|t| memchr::memchr(b'\n', t)) {
            Some(i) => (xs + i, ys + i),
            None => (x.len(), y.len()),
        }
    };
    let middle = |text: &'a str, end: usize, empty: bool| {
        if empty {
            Vec::new()
        } else {
            split_lines(text.get(start..start + end).unwrap_or(""))
        }
    };
    let am = middle(old, x_end, whole_first && xs == 0);
    let bm = middle(new, y_end, whole_first && ys == 0);
    finish(pre, &am, &bm, max_edits)
}

/// The edits between the middle lines `am` and `bm` that follow `pre`
/// common lines, or `None` beyond `max_edits`.
fn finish<'a>(
    pre: usize,
    am: &[&'a str],
    bm: &[&'a str],
    max_edits: usize,
) -> Option<Vec<Edit<'a>>> {
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

/// The length of the longest common prefix of `a` and `b`, eight bytes at a
/// time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0usize;
    while let (Some(x), Some(y)) = (a.get(i..i + 8), b.get(i..i + 8)) {
        let d = word(x) ^ word(y);
        if d != 0 {
            return i + (d.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a.get(i) == b.get(i) {
        i += 1;
    }
    i
}

/// The length of the longest common suffix of `a` and `b`, eight bytes at a
/// time.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0usize;
    while i + 8 <= n {
        let (Some(x), Some(y)) = (
            a.get(a.len() - i - 8..a.len() - i),
            b.get(b.len() - i - 8..b.len() - i),
        ) else {
            break;
        };
        let d = word(x) ^ word(y);
        if d != 0 {
            return i + (d.leading_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a.get(a.len() - i - 1) == b.get(b.len() - i - 1) {
        i += 1;
    }
    i
}

/// Eight bytes as a little-endian word (zero when `b` is shorter).
fn word(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.get(..8).and_then(|w| w.try_into().ok()).unwrap_or([0; 8]))
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
mod reference;

#[cfg(test)]
mod tests {
    use super::reference::line_diff_by_lines;
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

    /// Texts of a few short lines from a small alphabet, so lines repeat,
    /// texts share starts and ends, and one text is often a prefix or a
    /// suffix of the other.
    fn lines_text() -> impl Strategy<Value = String> {
        proptest::collection::vec("[ab\\n]{0,3}", 0..10).prop_map(|v| v.concat())
    }

    #[test]
    fn byte_level_ends_match_the_line_diff_by_lines() {
        let long = "line of a file\n".repeat(30);
        let cases = [
            ("", ""),
            ("", "\n"),
            ("\n", ""),
            ("a", "a\n"),
            ("a\n", "a"),
            ("a\nb", "a\nb\nc"),
            ("a\nb\nc", "a\nb"),
            ("a\nb", "a\nbc"),
            ("ab\nc", "b\nc"),
            ("b\nc", "ab\nc"),
            ("x\nb\nc", "b\nc"),
            ("b\nc", "x\nb\nc"),
            ("a\nb\na", "a\na"),
            ("a\n\na", "a\na"),
            ("abcdefghijklmnop\nq", "abcdefghijklmnoX\nq"),
            (long.as_str(), "line of a file\n"),
        ];
        let edited = format!("{long}one more\n{long}");
        let doubled = format!("{long}{long}");
        let all = cases.iter().copied().chain([
            (long.as_str(), edited.as_str()),
            (doubled.as_str(), edited.as_str()),
        ]);
        for (old, new) in all {
            for max in [0, 1, 2, 40] {
                assert_eq!(
                    line_diff(old, new, max),
                    line_diff_by_lines(old, new, max),
                    "{old:?} -> {new:?} within {max}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]
        #[test]
        fn byte_level_ends_match_by_lines_on_any_texts(
            old in lines_text(),
            new in lines_text(),
            shared_start in lines_text(),
            shared_end in lines_text(),
            max in 0usize..12,
        ) {
            let (old, new) = (
                format!("{shared_start}{old}{shared_end}"),
                format!("{shared_start}{new}{shared_end}"),
            );
            prop_assert_eq!(line_diff(&old, &new, max), line_diff_by_lines(&old, &new, max));
        }

        #[test]
        fn common_ends_are_bytewise(
            a in proptest::collection::vec(0u8..3, 0..40),
            b in proptest::collection::vec(0u8..3, 0..40),
        ) {
            let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            let suf = a.iter().rev().zip(b.iter().rev()).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), pre);
            prop_assert_eq!(common_suffix(&a, &b), suf);
        }
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
