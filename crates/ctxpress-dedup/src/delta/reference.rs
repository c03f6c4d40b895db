//! The reference the tests hold the line diff to: [`super::line_diff`] as
//! first written, splitting both texts into lines.

use super::*;

/// [`line_diff`] as first written: both texts split into lines and the
/// common lines at the start and the end compared line by line.
pub(super) fn line_diff_by_lines<'a>(
    old: &'a str,
    new: &'a str,
    max_edits: usize,
) -> Option<Vec<Edit<'a>>> {
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
