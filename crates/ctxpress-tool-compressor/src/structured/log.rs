//! Timestamped logs (most lines start with a timestamp): the line count,
//! the time span, the first and last error lines, the distinct lines by
//! shape with their counts, and the last line.

use super::*;

/// The timestamp a log line starts with (after an optional `[`): a date
/// (`2024-05-01`, `2024/05/01`) with an optional time, or a time
/// (`12:30:01`), up to the first space or `]` after it. Its byte length, or
/// `None`.
pub(super) fn timestamp(l: &str) -> Option<usize> {
    let b = l.as_bytes();
    let s = usize::from(b.first() == Some(&b'['));
    let rest = b.get(s..)?;
    let digits = |r: std::ops::Range<usize>| {
        rest.get(r)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let date = digits(0..4)
        && matches!(rest.get(4), Some(b'-' | b'/'))
        && digits(5..7)
        && rest.get(7) == Some(&rest[4])
        && digits(8..10);
    let time =
        digits(0..2) && rest.get(2) == Some(&b':') && digits(3..5) && rest.get(5) == Some(&b':');
    if !date && !time {
        return None;
    }
    // Up to the first space or `]` (a date and a time apart by one space
    // read as one).
    let mut end = b.len();
    let mut i = s + if date { 10 } else { 8 };
    if date && b.get(i) == Some(&b' ') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    while let Some(&c) = b.get(i) {
        if c == b' ' || c == b']' {
            end = i + usize::from(c == b']');
            break;
        }
        i += 1;
    }
    Some(end)
}

/// The body of a log's summary (most lines start with a timestamp): the
/// line count, the time span, the first and last error lines, then the
/// distinct lines (by shape, their timestamps left out), each the first of
/// its kind with its count, as many as a command's summary keeps lines
/// (head, tail and count lines), and the last line.
pub(super) fn log(t: &str, _room: usize, limits: &Limits) -> Option<String> {
    // Most lines of the first 200 start with a timestamp: looked at before
    // anything else is done.
    let (mut sample, mut stamped) = (0usize, 0usize);
    for l in ctxpress_text::lines::lines(t)
        .filter(|l| !is_blank(l))
        .take(200)
    {
        sample += 1;
        stamped += usize::from(timestamp(l).is_some());
        if (sample - stamped) * 10 > 200 * 3 || (sample == 10 && stamped < 5) {
            return None;
        }
    }
    if sample < 6 || stamped * 10 < sample * 7 {
        return None;
    }
    let lines: Vec<&str> = ctxpress_text::lines::lines(t)
        .filter(|l| !is_blank(l))
        .collect();
    // Distinct shapes in order of first appearance, with counts.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut distinct: Vec<(usize, usize)> = Vec::new();
    let (mut first_err, mut last_err, mut errors) = (None, None, 0usize);
    let (mut first_time, mut last_time) = (None, None);
    for (i, l) in lines.iter().enumerate() {
        let stamp = timestamp(l);
        if let Some(p) = stamp {
            let st = l.get(..p).unwrap_or("");
            first_time = first_time.or(Some(st));
            last_time = Some(st);
        }
        let body = stamp.and_then(|p| l.get(p..)).unwrap_or(l);
        if is_error_line(body) {
            errors += 1;
            first_err = first_err.or(Some(i));
            last_err = Some(i);
        }
        let key = shape(body);
        match index.get(&key) {
            Some(&k) => {
                if let Some(d) = distinct.get_mut(k) {
                    d.1 += 1;
                }
            }
            None => {
                index.insert(key, distinct.len());
                distinct.push((i, 1));
            }
        }
    }
    let mut out = format!(
        "log, {}, {} distinct",
        plural(lines.len(), "line", "lines"),
        distinct.len()
    );
    if errors > 0 {
        let _ = write!(out, ", {}", plural(errors, "error line", "error lines"));
    }
    if let (Some(a), Some(b)) = (first_time, last_time) {
        let _ = write!(
            out,
            "; {} to {}",
            a.trim_matches(['[', ']']),
            b.trim_matches(['[', ']'])
        );
    }
    out.push(']');
    let width = limits.max_line_chars;
    let push = |out: &mut String, label: &str, l: &str| {
        out.push('\n');
        out.push_str(label);
        push_clip(out, l.trim_end(), width);
    };
    if let (Some(f), Some(l)) = (first_err, last_err) {
        push(
            &mut out,
            "first error: ",
            lines.get(f).copied().unwrap_or(""),
        );
        if l != f {
            push(
                &mut out,
                "last error: ",
                lines.get(l).copied().unwrap_or(""),
            );
        }
    }
    // The first line of each kind, as many as a command's summary keeps
    // head and count lines; then the last lines.
    let max = (limits.head_lines + limits.max_count_lines).max(2);
    let tail = limits.tail_lines.min(lines.len());
    let tail_from = lines.len() - tail;
    let listed: Vec<(usize, usize)> = distinct
        .iter()
        .copied()
        .filter(|&(i, _)| i < tail_from)
        .collect();
    if !listed.is_empty() {
        out.push_str("\ndistinct lines (the first of each kind):");
    }
    for &(i, c) in listed.iter().take(max) {
        push(&mut out, "", lines.get(i).copied().unwrap_or(""));
        if c > 1 {
            let _ = write!(out, " (×{c})");
        }
    }
    if listed.len() > max {
        let _ = write!(out, "\n[… {} more distinct lines]", listed.len() - max);
    }
    if tail > 0 {
        out.push_str("\nlast lines:");
        for l in lines.get(tail_from..).unwrap_or(&[]) {
            push(&mut out, "", l);
        }
    }
    Some(out)
}
