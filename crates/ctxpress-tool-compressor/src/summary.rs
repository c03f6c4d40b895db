//! Summary texts, one builder per kind of tool result. Every summary starts
//! with `[summary: tool ` so later stages (the classifier's "already
//! compressed" rule) and later runs recognise it.

use crate::lines::{
    Lang, LineRanks, OutlineState, Rank, declaration, error_line_candidates, is_blank,
    is_count_line, is_diagnostic, is_error_line, is_heading, lang_of, push_clip,
    references_outside, shape, split_numbered, trim,
};
use crate::structured;
use crate::subject::{HEAD_ROOM, push_clip_one_line};
pub use crate::subject::{Kind, Limits, PREFIX, Subject};
use foldhash::HashSet;
use std::fmt::Write as _;

/// The summary of `text`, the result of a call described by `subject`.
pub fn summarize(kind: Kind, subject: &Subject, text: &str, limits: &Limits) -> String {
    summarize_with(kind, subject, text, limits, &mut LineRanks::default())
}

/// The summaries of one conversation: their limits, and the ranks of the
/// lines of code and data outlined so far (see [`LineRanks`]), for the
/// files read or written again.
#[derive(Debug)]
pub struct Summaries {
    limits: Limits,
    ranks: LineRanks,
}

impl Summaries {
    /// Summaries within `limits`, no line outlined yet.
    pub fn new(limits: Limits) -> Self {
        Summaries {
            limits,
            ranks: LineRanks::default(),
        }
    }

    /// [`summarize`] within these limits.
    pub fn summarize(&mut self, kind: Kind, subject: &Subject, text: &str) -> String {
        summarize_with(kind, subject, text, &self.limits, &mut self.ranks)
    }

    /// [`summarize_input`] within these limits.
    pub fn summarize_input(&mut self, subject: &Subject, text: &str) -> String {
        summarize_input_with(subject, text, &self.limits, &mut self.ranks)
    }
}

/// [`summarize`], with the ranks of the lines outlined before in `ranks`
/// (and those of `text` added).
fn summarize_with(
    kind: Kind,
    subject: &Subject,
    text: &str,
    limits: &Limits,
    ranks: &mut LineRanks,
) -> String {
    match kind {
        Kind::Read => read(subject, text, limits, ranks),
        Kind::Write | Kind::Edit => change(kind, subject, text, limits),
        Kind::Search => structured::summarize_json(kind, subject, text, limits)
            .or_else(|| search(subject, text, limits, 0.5))
            .or_else(|| structured::summarize_rest(kind, subject, text, limits))
            .unwrap_or_else(|| output(Kind::Search, subject, text, limits)),
        // Data (JSON, CSV, logs) keeps its shape. Commands that search or
        // list (grep, find, rg, search_dir) read as searches; a command that
        // failed is about its errors, whatever its lines look like.
        Kind::Command if subject.exit.is_none_or(|c| c == 0) => {
            structured::summarize_json(kind, subject, text, limits)
                .or_else(|| search(subject, text, limits, 0.75))
                .or_else(|| structured::summarize_rest(kind, subject, text, limits))
                .unwrap_or_else(|| output(kind, subject, text, limits))
        }
        Kind::Command | Kind::Other => structured::summarize_json(kind, subject, text, limits)
            .or_else(|| structured::summarize_rest(kind, subject, text, limits))
            .unwrap_or_else(|| output(kind, subject, text, limits)),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Append `n` in decimal (as `write!(out, "{n}")` does, without the
/// formatting machinery).
fn push_num(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        at -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(digits.get(at..).unwrap_or(&[])).unwrap_or(""));
}

/// Append [`plural`] of `n`.
fn push_plural(out: &mut String, n: usize, one: &str, many: &str) {
    push_num(out, n as u64);
    out.push(' ');
    out.push_str(if n == 1 { one } else { many });
}

/// The summary of the file content a write call carried in its arguments
/// (not its result): path, line count, outline and references, as for a read.
pub fn summarize_input(subject: &Subject, text: &str, limits: &Limits) -> String {
    summarize_input_with(subject, text, limits, &mut LineRanks::default())
}

/// [`summarize_input`], with the ranks of the lines outlined before in
/// `ranks` (and those of `text` added).
fn summarize_input_with(
    subject: &Subject,
    text: &str,
    limits: &Limits,
    ranks: &mut LineRanks,
) -> String {
    let mut head = String::with_capacity(HEAD_ROOM);
    head.push_str(PREFIX);
    push_clip_one_line(&mut head, &subject.tool, 40);
    head.push_str(" input");
    file_outline(head, subject, text, limits, true, ranks)
}

/// A read: path, line count and range, the outline (declarations with their
/// line numbers) and the references of the rest.
fn read(subject: &Subject, text: &str, limits: &Limits, ranks: &mut LineRanks) -> String {
    file_outline(
        subject.head(Kind::Read, 200),
        subject,
        text,
        limits,
        false,
        ranks,
    )
}

/// `head` followed by the line count and range, the outline and the
/// references of file content. With `count_lines`, unnumbered content
/// (a file as written, not as a read tool shows it) gets line numbers.
/// `ranks` remembers the ranks of the lines met before.
fn file_outline(
    mut out: String,
    subject: &Subject,
    text: &str,
    limits: &Limits,
    count_lines: bool,
    ranks: &mut LineRanks,
) -> String {
    let lines = split_numbered(text);
    let lang = subject
        .paths
        .first()
        .map_or(Lang::Code, |p| lang_of(p.as_str()));
    let mut st = OutlineState::default();
    // Room for the declarations of most files (about one line in five).
    let mut decls: Vec<(usize, Rank)> = Vec::with_capacity(lines.len() / 4 + 1);
    // The first and last line numbers and the count of numbered lines, in
    // the same pass.
    let (mut first, mut last, mut numbered) = (None, None, 0usize);
    for (i, l) in lines.iter().enumerate() {
        if let Some(n) = l.number {
            first = first.or(Some(n));
            last = Some(n);
            numbered += 1;
        }
        if let Some(r) = declaration(l.body, lang, &mut st, ranks) {
            decls.push((i, r));
        }
    }
    let total = decls.len();
    let kept: Vec<usize> = pick_by_rank(&decls, limits.max_outline);
    // The summary's room, reserved once: the kept lines (clipped, with
    // their numbers), the header's counts and most `refs:` lines.
    let clip_bytes = limits.max_line_chars.saturating_mul(4).saturating_add(4);
    let room: usize = kept
        .iter()
        .filter_map(|&i| lines.get(i))
        .map(|l| l.body.len().min(clip_bytes) + 24)
        .sum();
    out.reserve(room + 320);
    // Count the file's lines, not a tool's header or footer around them.
    let count = if numbered > 0 { numbered } else { lines.len() };
    out.push_str(": ");
    push_plural(&mut out, count, "line", "lines");
    if let (Some(a), Some(b)) = (first, last)
        && (a != 1 || b as usize != count)
    {
        out.push_str(" (");
        push_num(&mut out, a);
        out.push('-');
        push_num(&mut out, b);
        out.push(')');
    }
    if kept.is_empty() {
        // No declarations: keep the first and last lines.
        out.push(']');
        let picked = head_tail(&lines, limits.head_lines, limits.tail_lines);
        push_lines(&mut out, &lines, &picked, limits);
    } else {
        out.push_str("; outline: ");
        push_plural(&mut out, total, "declaration", "declarations");
        if kept.len() < total {
            out.push_str(", ");
            push_num(&mut out, kept.len() as u64);
            out.push_str(" shown");
        }
        out.push(']');
        for &i in &kept {
            if let Some(l) = lines.get(i) {
                out.push('\n');
                match l.number {
                    Some(n) => {
                        push_num(&mut out, n);
                        out.push_str(": ");
                    }
                    None if count_lines => {
                        push_num(&mut out, i as u64 + 1);
                        out.push_str(": ");
                    }
                    None => {}
                }
                push_clip(&mut out, l.body.trim_end(), limits.max_line_chars);
            }
        }
    }
    push_refs(&mut out, text, &lines, &kept, limits);
    out
}

/// Indices of the declarations to show: all when they fit, else the best
/// ranks, in line order.
fn pick_by_rank(decls: &[(usize, Rank)], max: usize) -> Vec<usize> {
    if decls.len() <= max {
        return decls.iter().map(|(i, _)| *i).collect();
    }
    let mut out = Vec::new();
    for rank in [Rank::Structure, Rank::Member, Rank::Import] {
        for (i, r) in decls {
            if *r == rank && out.len() < max {
                out.push(*i);
            }
        }
    }
    out.sort_unstable();
    out
}

/// The indices of the first `head` and the last `tail` non-empty lines
/// (each once), found from both ends.
fn head_tail(lines: &[crate::lines::Line<'_>], head: usize, tail: usize) -> Vec<usize> {
    let nonempty = |(i, l): (usize, &crate::lines::Line<'_>)| (!is_blank(l.body)).then_some(i);
    let mut out: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter_map(nonempty)
        .take(head)
        .collect();
    let mut last: Vec<usize> = lines
        .iter()
        .enumerate()
        .rev()
        .filter_map(nonempty)
        .take(tail)
        .collect();
    last.reverse();
    for i in last {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// Append the picked lines (in order) with `[… N lines]` where lines are skipped.
fn push_lines(
    out: &mut String,
    lines: &[crate::lines::Line<'_>],
    picked: &[usize],
    limits: &Limits,
) {
    let mut sorted = picked.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    // Room for the lines (clipped, with their numbers and skip notes),
    // reserved once.
    let clip_bytes = limits.max_line_chars.saturating_mul(4).saturating_add(4);
    let room: usize = sorted
        .iter()
        .filter_map(|&i| lines.get(i))
        .map(|l| l.body.len().min(clip_bytes) + 40)
        .sum();
    out.reserve(room + 24);
    let mut next = 0usize;
    for &i in &sorted {
        if i > next {
            out.push_str("\n[… ");
            push_plural(out, i - next, "line", "lines");
            out.push(']');
        }
        if let Some(l) = lines.get(i) {
            out.push('\n');
            if let Some(n) = l.number {
                push_num(out, n);
                out.push_str(": ");
            }
            push_clip(out, l.body.trim_end(), limits.max_line_chars);
        }
        next = i + 1;
    }
    if next < lines.len() && !sorted.is_empty() {
        out.push_str("\n[… ");
        push_plural(out, lines.len() - next, "line", "lines");
        out.push(']');
    }
}

/// Append `refs:` with the paths, URLs and error names of the lines not
/// shown (`shown`: their indices, in increasing order); `lines` are cut
/// from `text` by [`split_numbered`].
fn push_refs(
    out: &mut String,
    text: &str,
    lines: &[crate::lines::Line<'_>],
    shown: &[usize],
    limits: &Limits,
) {
    if limits.max_refs == 0 {
        return;
    }
    let refs: Vec<&str> = references_outside(text, lines, shown, limits.max_refs)
        .into_iter()
        .filter(|r| !out.contains(r))
        .collect();
    if !refs.is_empty() {
        out.push_str("\nrefs: ");
        push_grouped_refs(out, &refs);
    }
}

/// The directory part of a reference (up to its last `/` or `\`), or
/// `None` for a URL or a bare name.
fn ref_dir(r: &str) -> Option<&str> {
    if r.contains("://") {
        return None;
    }
    let cut = r.rfind(['/', '\\'])?;
    r.get(..=cut)
}

/// Append `group_refs(refs).join(", ")` without building its strings: a
/// directory's references are written at its first one, as
/// `dir/{a, b, c}` when there are three or more, else each as it is (a
/// directory and a name are the reference again).
fn push_grouped_refs(out: &mut String, refs: &[&str]) {
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !first {
            out.push_str(", ");
        }
        first = false;
    };
    // Each reference with its directory, found once.
    let dirs: Vec<(&str, Option<&str>)> = refs.iter().map(|r| (*r, ref_dir(r))).collect();
    for (i, &(r, dir)) in dirs.iter().enumerate() {
        let Some(dir) = dir else {
            sep(out);
            out.push_str(r);
            continue;
        };
        let earlier = dirs.get(..i).unwrap_or(&[]);
        if earlier.iter().any(|(_, d)| *d == Some(dir)) {
            continue;
        }
        let later = dirs.get(i..).unwrap_or(&[]);
        let group = || {
            later
                .iter()
                .filter(|(_, d)| *d == Some(dir))
                .map(|(e, _)| *e)
        };
        if group().count() >= 3 {
            sep(out);
            out.push_str(dir);
            out.push('{');
            for (k, e) in group().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                out.push_str(e.get(dir.len()..).unwrap_or(""));
            }
            out.push('}');
        } else {
            for e in group() {
                sep(out);
                out.push_str(e);
            }
        }
    }
}

/// A write or edit: what changed and the tool's own first line, plus errors.
fn change(kind: Kind, subject: &Subject, text: &str, limits: &Limits) -> String {
    let lines = split_numbered(text);
    let mut out = subject.head(kind, 200);
    let first = lines.iter().find(|l| !l.body.trim().is_empty());
    if let Some(f) = first {
        out.push_str(": ");
        push_clip(&mut out, f.body.trim(), limits.max_line_chars);
    }
    out.push_str(" (");
    push_plural(&mut out, lines.len(), "line", "lines");
    out.push_str(")]");
    let errors: Vec<usize> = lines
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, l)| is_error_line(l.body))
        .map(|(i, _)| i)
        .take(limits.max_error_lines)
        .collect();
    push_lines(&mut out, &lines, &errors, limits);
    out
}

/// Command or other output: head, tail, error lines and count lines, lines
/// that differ only in numbers kept once, and the references of the rest.
fn output(kind: Kind, subject: &Subject, text: &str, limits: &Limits) -> String {
    let lines = split_numbered(text);
    let failed = subject.exit.is_some_and(|c| c != 0);
    let mut picked = head_tail(&lines, limits.head_lines, limits.tail_lines);
    let head_and_tail = picked.len();
    // The shapes of the head and tail lines, then of each error or count
    // line met: made at the first such line (many outputs have none).
    let mut shapes: Option<HashSet<String>> = None;
    let mut errors = 0usize;
    let mut counts = 0usize;
    let mut more_errors = 0usize;
    let mut headings = 0usize;
    // The head and tail lines (`picked` before the loop): a line is picked
    // in the loop only at its own turn, so these are the ones to skip.
    let mut head_or_tail = vec![false; lines.len()];
    for &i in &picked {
        if let Some(p) = head_or_tail.get_mut(i) {
            *p = true;
        }
    }
    let maybe_error = error_line_candidates(text, &lines);
    for (i, l) in lines.iter().enumerate() {
        // A blank line is no heading, error, diagnostic nor count line.
        if head_or_tail.get(i).copied().unwrap_or(false) || is_blank(l.body) {
            continue;
        }
        // Reports (sub-agents, docs tools): their headings are the table of contents.
        if kind == Kind::Other && headings < limits.max_outline && is_heading(l.body) {
            headings += 1;
            picked.push(i);
            continue;
        }
        let is_err = (maybe_error.get(i).copied().unwrap_or(true) && is_error_line(l.body))
            || (failed && is_diagnostic(l.body));
        let is_count = !is_err && is_count_line(l.body);
        if !is_err && !is_count {
            continue;
        }
        let shapes = shapes.get_or_insert_with(|| {
            picked
                .iter()
                .take(head_and_tail)
                .filter_map(|&i| lines.get(i))
                .map(|l| shape(l.body))
                .collect()
        });
        if !shapes.insert(shape(l.body)) {
            continue;
        }
        if is_err {
            if errors < limits.max_error_lines {
                errors += 1;
                picked.push(i);
            } else {
                more_errors += 1;
            }
        } else if counts < limits.max_count_lines {
            counts += 1;
            picked.push(i);
        }
    }
    let mut out = subject.head(kind, 200);
    out.push_str(": ");
    push_plural(&mut out, lines.len(), "line", "lines");
    if more_errors > 0 {
        let _ = write!(
            out,
            ", {} not shown",
            plural(more_errors, "more error line", "more error lines")
        );
    }
    out.push(']');
    picked.sort_unstable();
    picked.dedup();
    push_lines(&mut out, &lines, &picked, limits);
    push_refs(&mut out, text, &lines, &picked, limits);
    out
}

/// A search or listing: match and file counts, the files (with match
/// counts), and the first matching lines.
/// `None` when less than `share` of the non-empty lines name a file (not
/// search output), or fewer than three do.
fn search(subject: &Subject, text: &str, limits: &Limits, share: f64) -> Option<String> {
    let lines: Vec<&str> = ctxpress_text::lines::lines(text)
        .filter(|l| !is_blank(l))
        .collect();
    // file -> matches, in order of first appearance
    let mut files: Vec<(String, usize)> = Vec::new();
    let mut matches = 0usize;
    let mut listing = 0usize;
    let mut samples: Vec<&str> = Vec::new();
    let mut index: foldhash::HashMap<&str, usize> = foldhash::HashMap::default();
    let need = share * lines.len() as f64;
    for (k, l) in lines.iter().enumerate() {
        // Stop as soon as the lines left cannot bring the matches up to
        // three and to `share` (the test below).
        let possible = matches + (lines.len() - k);
        if possible < 3 || (possible as f64) < need {
            return None;
        }
        let Some((path, rest)) = match_path(l) else {
            continue;
        };
        matches += 1;
        if !rest.is_empty() && samples.len() < limits.head_lines {
            samples.push(l);
        }
        match index.get(path) {
            Some(&k) => {
                if let Some((_, n)) = files.get_mut(k) {
                    *n += 1;
                }
            }
            None => {
                index.insert(path, files.len());
                files.push((path.to_string(), 1));
            }
        }
        if rest.is_empty() {
            listing += 1;
        }
    }
    if matches < 3 || (matches as f64) < need {
        return None;
    }
    let mut out = subject.head(Kind::Search, 200);
    if listing == matches {
        let _ = write!(out, ": {}]", plural(files.len(), "path", "paths"));
    } else {
        let _ = write!(
            out,
            ": {} in {}]",
            plural(matches, "match", "matches"),
            plural(files.len(), "file", "files")
        );
    }
    let shown = files.len().min(limits.max_list);
    for (f, n) in files.iter().take(shown) {
        out.push('\n');
        push_clip(&mut out, f, limits.max_line_chars);
        if listing != matches {
            out.push_str(" (");
            push_num(&mut out, *n as u64);
            out.push(')');
        }
    }
    if files.len() > shown {
        let _ = write!(out, "\n[… {} more]", files.len() - shown);
    }
    for s in samples {
        out.push('\n');
        push_clip(&mut out, s.trim_end(), limits.max_line_chars);
    }
    // Non-match lines (headers such as "Found 12 files", truncation notes).
    for l in lines.iter().filter(|l| match_path(l).is_none()).take(2) {
        out.push('\n');
        push_clip(&mut out, l.trim(), limits.max_line_chars);
    }
    Some(out)
}

/// The file a search-output line names, and the rest of the line after
/// `path:` / `path:12:` / `path-12-` (empty for a bare path).
fn match_path(line: &str) -> Option<(&str, &str)> {
    let t = trim(line);
    if t.is_empty() || t.len() > 1000 {
        return None;
    }
    // Skip a Windows drive prefix when looking for the separator.
    let start = if t.as_bytes().get(1) == Some(&b':')
        && t.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
    {
        2
    } else {
        0
    };
    let body = t.get(start..).unwrap_or("");
    // SWE-agent: `/repo/a.py (Line 16): text`.
    if let Some(p) = find_line_note(body)
        && let Some(path) = t.get(..start + p)
        && !has_space(path)
    {
        let rest = body.get(p + 1..).unwrap_or("");
        return Some((path, rest));
    }
    let (path, rest) = match body.find(':') {
        Some(p) => (
            t.get(..start + p).unwrap_or(""),
            body.get(p + 1..).unwrap_or(""),
        ),
        None => (t, ""),
    };
    // `a.py::test_x PASSED` (a test id), `std::io::Error`: a `::` is a
    // path inside a program, not `file:` followed by a match.
    if rest.starts_with(':') {
        return None;
    }
    let looks_like_path = !has_space(path)
        && (memchr::memchr2(b'/', b'\\', path.as_bytes()).is_some() || has_extension(path));
    if !looks_like_path {
        return None;
    }
    Some((path, rest))
}

/// The index of the first ` (Line ` of `s` (as `s.find(" (Line ")`),
/// looked for at its `(`s.
fn find_line_note(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    memchr::memchr_iter(b'(', b)
        .find(|&i| {
            i > 0
                && b.get(i - 1) == Some(&b' ')
                && b.get(i + 1..).is_some_and(|r| r.starts_with(b"Line "))
        })
        .map(|i| i - 1)
}

/// True when `s` holds white space (as `s.contains(char::is_whitespace)`),
/// ASCII text read byte by byte.
fn has_space(s: &str) -> bool {
    if s.is_ascii() {
        s.bytes().any(|c| c.is_ascii_whitespace() || c == 0x0b)
    } else {
        s.contains(char::is_whitespace)
    }
}

fn has_extension(p: &str) -> bool {
    let name = p.rsplit(['/', '\\']).next().unwrap_or(p);
    match name.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=6).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::reference::group_refs;
    use super::*;

    fn subj(tool: &str, path: Option<&str>, cmd: Option<&str>, exit: Option<i64>) -> Subject {
        Subject {
            tool: tool.into(),
            paths: path.into_iter().map(String::from).collect(),
            command: cmd.map(String::from),
            exit,
        }
    }

    #[test]
    fn pushed_numbers_are_the_formatted_ones() {
        for n in [
            0,
            1,
            9,
            10,
            11,
            99,
            100,
            101,
            999_999,
            1_000_000,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = String::from("x");
            push_num(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
        for n in [0, 1, 2, 10] {
            let mut out = String::new();
            push_plural(&mut out, n, "line", "lines");
            assert_eq!(out, plural(n, "line", "lines"));
        }
    }

    proptest::proptest! {
        #[test]
        fn pushed_random_numbers_are_the_formatted_ones(n in proptest::num::u64::ANY, k in 0usize..3000) {
            let mut out = String::new();
            push_num(&mut out, n);
            proptest::prop_assert_eq!(out, n.to_string());
            let mut out = String::new();
            push_plural(&mut out, k, "file", "files");
            proptest::prop_assert_eq!(out, plural(k, "file", "files"));
        }
    }

    #[test]
    fn read_summary_is_an_outline() {
        let text = "1\timport { Injectable } from '@angular/core';\n2\t\n3\t@Injectable()\n4\texport class AuthService {\n5\t  private token: string = '';\n6\t  login(user: string): boolean {\n7\t    return callApi(user);\n8\t  }\n9\t}\n";
        let s = summarize(
            Kind::Read,
            &subj("Read", Some("src/app/auth.service.ts"), None, None),
            text,
            &Limits::default(),
        );
        assert_eq!(
            s,
            "[summary: tool Read src/app/auth.service.ts: 9 lines; outline: 5 declarations]\n1: import { Injectable } from '@angular/core';\n3: @Injectable()\n4: export class AuthService {\n5:   private token: string = '';\n6:   login(user: string): boolean {"
        );
    }

    #[test]
    fn one_conversations_summaries_are_the_single_summaries() {
        // Files read and written again (whole, in part, edited), in several
        // kinds of text, through one `Summaries` and one at a time.
        let numbered = |text: &str, from: usize| -> String {
            text.lines()
                .enumerate()
                .map(|(i, l)| format!("{}\t{l}\n", i + from))
                .collect()
        };
        let lines_rs = include_str!("lines/outline.rs");
        let part: String = lines_rs
            .lines()
            .skip(600)
            .take(300)
            .collect::<Vec<_>>()
            .join("\n");
        let edited = part.replace("fn ", "pub fn ");
        let texts: Vec<(bool, &str, String)> = vec![
            (false, "src/lines/outline.rs", numbered(lines_rs, 1)),
            (false, "src/lines/outline.rs", numbered(&part, 601)),
            (true, "src/lines/outline.rs", edited.clone()),
            (false, "src/lines/outline.rs", numbered(&edited, 601)),
            (false, "notes.md", "# A\ntext\n## B\n".into()),
            (false, "c.yml", "a: 1\n  b: 2\n# c\n".into()),
            (
                true,
                "c.json",
                "{\n  \"a\": 1,\n  \"b\": {\"c\": 2}\n}\n".into(),
            ),
            (false, "c.yml", "a: 1\n  b: 2\n".into()),
            (
                false,
                "s.sql",
                "CREATE TABLE t (\n  id int,\n  name text\n);\n".into(),
            ),
            (false, "a.css", ".a {\n  color: red;\n}\n".into()),
            (
                false,
                "src/summary.rs",
                numbered(include_str!("summary.rs"), 1),
            ),
        ];
        let limits = Limits::default();
        let mut sums = Summaries::new(limits);
        for _ in 0..2 {
            for (input, path, text) in &texts {
                let subject = subj("Read", Some(path), None, None);
                if *input {
                    assert_eq!(
                        sums.summarize_input(&subject, text),
                        summarize_input(&subject, text, &limits),
                        "{path}"
                    );
                } else {
                    assert_eq!(
                        sums.summarize(Kind::Read, &subject, text),
                        summarize(Kind::Read, &subject, text, &limits),
                        "{path}"
                    );
                }
            }
        }
    }

    #[test]
    fn read_outline_over_cap_keeps_structure_first() {
        let mut text = String::new();
        for i in 0..30 {
            text.push_str(&format!("import x{i} from 'm{i}';\n"));
        }
        text.push_str("export function main() {\n}\n");
        let limits = Limits {
            max_outline: 3,
            ..Limits::default()
        };
        let s = summarize(
            Kind::Read,
            &subj("Read", Some("a.ts"), None, None),
            &text,
            &limits,
        );
        let body: Vec<&str> = s.lines().collect();
        assert_eq!(
            body[0],
            "[summary: tool Read a.ts: 32 lines; outline: 31 declarations, 3 shown]"
        );
        assert_eq!(body[1], "import x0 from 'm0';");
        assert_eq!(body[3], "export function main() {");
    }

    #[test]
    fn read_without_declarations_keeps_head_and_tail() {
        let text = (1..=20)
            .map(|i| format!("plain words {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let limits = Limits {
            head_lines: 1,
            tail_lines: 1,
            ..Limits::default()
        };
        let s = summarize(
            Kind::Read,
            &subj("fetch", Some("notes"), None, None),
            &text,
            &limits,
        );
        assert_eq!(
            s,
            "[summary: tool fetch read notes: 20 lines]\nplain words 1\n[… 18 lines]\nplain words 20"
        );
    }

    #[test]
    fn command_summary_keeps_errors_counts_head_tail() {
        let mut text = String::from("Compiling app v0.1.0\n");
        for i in 0..40 {
            text.push_str(&format!("   Downloading crate{i} 1.{i}MB\n"));
        }
        text.push_str("error[E0425]: cannot find value `x` in src/main.rs\n");
        text.push_str("test result: FAILED. 3 passed; 1 failed\nDone.\n");
        let limits = Limits {
            head_lines: 1,
            tail_lines: 1,
            ..Limits::default()
        };
        let s = summarize(
            Kind::Command,
            &subj("Bash", None, Some("cargo   test"), Some(101)),
            &text,
            &limits,
        );
        assert_eq!(
            s,
            "[summary: tool Bash `cargo test`, exit 101: 44 lines]\nCompiling app v0.1.0\n[… 40 lines]\nerror[E0425]: cannot find value `x` in src/main.rs\ntest result: FAILED. 3 passed; 1 failed\nDone."
        );
    }

    #[test]
    fn headings_do_not_hide_error_lines_of_their_shape() {
        // The second heading is over the outline cap: an error line, which
        // only the head and tail lines (not the headings) may hide.
        let text = "intro\n## Error 1\n## Error 2\nmiddle\nmore\nend";
        let limits = Limits {
            head_lines: 1,
            tail_lines: 1,
            max_outline: 1,
            ..Limits::default()
        };
        let s = summarize(Kind::Other, &subj("agent", None, None, None), text, &limits);
        assert_eq!(
            s,
            "[summary: tool agent: 6 lines]\nintro\n## Error 1\n## Error 2\n[… 2 lines]\nend"
        );
    }

    #[test]
    fn search_summary_counts_matches_per_file() {
        let text = "src/a.ts:3:const loginUser = 1\nsrc/a.ts:9:loginUser()\nsrc/b.ts:1:loginUser\n";
        let s = summarize(
            Kind::Search,
            &subj("Grep", None, Some("loginUser"), None),
            text,
            &Limits::default(),
        );
        assert_eq!(
            s,
            "[summary: tool Grep `loginUser`: 3 matches in 2 files]\nsrc/a.ts (2)\nsrc/b.ts (1)\nsrc/a.ts:3:const loginUser = 1\nsrc/a.ts:9:loginUser()\nsrc/b.ts:1:loginUser"
        );
        let listing = "Found 3 files\nC:\\r\\a.ts\nC:\\r\\b.ts\nC:\\r\\c.ts\n";
        let s = summarize(
            Kind::Search,
            &subj("Glob", None, Some("**/*.ts"), None),
            listing,
            &Limits {
                max_list: 2,
                ..Limits::default()
            },
        );
        assert_eq!(
            s,
            "[summary: tool Glob `**/*.ts`: 3 paths]\nC:\\r\\a.ts\nC:\\r\\b.ts\n[… 1 more]\nFound 3 files"
        );
    }

    #[test]
    fn change_summary_names_path_and_outcome() {
        let s = summarize(
            Kind::Edit,
            &subj("Edit", Some("/r/src/x.rs"), None, None),
            "The file /r/src/x.rs has been updated successfully.\nsnippet...",
            &Limits::default(),
        );
        assert_eq!(
            s,
            "[summary: tool Edit /r/src/x.rs: The file /r/src/x.rs has been updated successfully. (2 lines)]"
        );
    }

    #[test]
    fn refs_of_one_directory_are_grouped() {
        assert_eq!(
            group_refs(&[
                "src/a.ts",
                "https://x.io/a/b.js",
                "src/b.ts",
                "lib/c.rs",
                "src/c.ts",
                "TypeError"
            ]),
            vec![
                "src/{a.ts, b.ts, c.ts}",
                "https://x.io/a/b.js",
                "lib/c.rs",
                "TypeError"
            ]
        );
    }

    fn assert_grouped_as_joined(refs: &[&str]) {
        let mut out = String::from("x");
        push_grouped_refs(&mut out, refs);
        assert_eq!(out, format!("x{}", group_refs(refs).join(", ")), "{refs:?}");
    }

    #[test]
    fn pushed_groups_are_the_joined_groups() {
        assert_grouped_as_joined(&[]);
        assert_grouped_as_joined(&["a"]);
        assert_grouped_as_joined(&[
            "src/a.ts",
            "https://x.io/a/b.js",
            "src/b.ts",
            "lib/c.rs",
            "src/c.ts",
            "TypeError",
        ]);
        assert_grouped_as_joined(&["a/b", "a\\c", "a/d", "a\\e", "/x", "/y", "/z", "//q"]);
        assert_grouped_as_joined(&["d/1", "e/1", "d/2", "e/2", "d/3", "f://g/h", "e/3", "e/4"]);
    }

    proptest::proptest! {
        #[test]
        fn pushed_groups_of_random_refs(
            refs in proptest::collection::vec("(a|b|/|\\\\|://|\\.rs|é){1,5}", 0..12),
        ) {
            let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
            assert_grouped_as_joined(&refs);
        }
    }

    #[test]
    fn test_ids_and_failed_commands_are_not_search_results() {
        let mut out = String::from("collected 8 items\n");
        for i in 0..6 {
            out.push_str(&format!("tests/test_dates.py::test_shift_{i} PASSED\n"));
        }
        out.push_str("tests/test_dates.py::test_is_leap FAILED\nE       assert False\ntests/test_dates.py:241: AssertionError\nFAILED tests/test_dates.py::test_is_leap - assert False\n1 failed, 6 passed in 0.31s\n");
        for exit in [None, Some(1)] {
            let s = summarize(
                Kind::Command,
                &subj("bash", None, Some("pytest tests/test_dates.py"), exit),
                &out,
                &Limits::default(),
            );
            assert!(!s.contains("matches"), "{s}");
            assert!(s.contains("1 failed, 6 passed"), "{s}");
            if exit.is_some() {
                assert!(
                    s.contains("FAILED tests/test_dates.py::test_is_leap"),
                    "{s}"
                );
            }
        }
        assert_eq!(match_path("src/lib.rs::tests::it_works ok"), None);
    }

    #[test]
    fn path_helpers_are_the_std_searches() {
        for s in [
            "",
            " ",
            "a",
            "a (Line 1)",
            "(Line 2)",
            " (Line",
            "x (Line 3) y (Line 4)",
            "x  (Line 5)",
            "(( (Line 6",
            "a\u{b}b",
            "a\u{c}b",
            "a\u{a0}b",
            "é b",
            "é",
            "a\tb",
            "a\rb",
            "a\u{85}b",
            "a\u{1c}b",
        ] {
            assert_eq!(find_line_note(s), s.find(" (Line "), "{s:?}");
            assert_eq!(has_space(s), s.contains(char::is_whitespace), "{s:?}");
        }
    }

    #[test]
    fn match_path_shapes() {
        assert_eq!(
            match_path("src/a.rs:12:fn x"),
            Some(("src/a.rs", "12:fn x"))
        );
        assert_eq!(match_path("C:\\r\\a.rs:3"), Some(("C:\\r\\a.rs", "3")));
        assert_eq!(match_path("README.md"), Some(("README.md", "")));
        assert_eq!(match_path("Found 3 files"), None);
        assert_eq!(
            match_path("/repo/a.py (Line 16): x = 1"),
            Some(("/repo/a.py", "(Line 16): x = 1"))
        );
        assert_eq!(match_path("1.5"), None);
        assert!(has_extension("a.tsx") && !has_extension("v1.2") && !has_extension(".env"));
    }
}
