//! Structured tool output (spec 000): whether a text is line-structured
//! (grep hits, bullet lists, `key: value` lines, status lines) and its
//! summary (line count, files, status lines first).

use regex::Regex;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::LazyLock;

use ctxpress_text::ascii_regex as re;
use ctxpress_text::entities as rec;

use super::chars;
use super::scoring::truncate_words;
use super::sentences::BULLET;

static FILE_LINE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:[A-Za-z0-9_-]+[./])+[A-Za-z0-9_-]+:\d+"));
static KEY_VALUE: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*[A-Za-z0-9_ .-]{1,40}:\s+\S"));
static STATUS_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:pass(?:ed)?|fail(?:ed|ure|ures)?|error|errors|warn(?:ing)?|ok|panicked|exception)\b",
    )
});

/// non-empty lines, more than one newline per 80 characters, and more than half
/// of the lines structural (`file:line`, bullets, `key: value`, status words).
///
/// The cheap tests come first, and the lines are tested only until the
/// majority is decided either way.
pub fn is_structured(text: &str) -> bool {
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    if newlines * 80 <= text.len() {
        return false;
    }
    let lines = || text.lines().filter(|l| !l.trim().is_empty());
    let total = lines().count();
    if total < 6 {
        return false;
    }
    let (mut structural, mut left) = (0usize, total);
    for l in lines() {
        if structural * 2 > total || (structural + left) * 2 <= total {
            break;
        }
        left -= 1;
        if is_structural_line(l) {
            structural += 1;
        }
    }
    structural * 2 > total
}

fn is_structural_line(l: &str) -> bool {
    FILE_LINE.is_match(l) || BULLET.is_match(l) || KEY_VALUE.is_match(l) || STATUS_LINE.is_match(l)
}

/// Summary of structured tool output within `budget` characters: the line
/// count, the files involved, then status lines (errors and failures first,
/// then warnings, then other status lines), then other informative lines, each
/// kept in its original order.
pub fn summarize_structured(text: &str, budget: usize) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.trim().replace("**", ""))
        .filter(|l| !l.is_empty())
        .collect();
    let mut files: Vec<&str> = Vec::new();
    for l in &lines {
        let urls: Vec<Range<usize>> = rec::urls(l).collect();
        let overlaps = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
        let paths: Vec<Range<usize>> = rec::paths(l)
            .filter(|m| !urls.iter().any(|u| overlaps(u, m)))
            .collect();
        let names = rec::file_names(l).filter(|n| {
            !paths.iter().any(|m| overlaps(m, n)) && !urls.iter().any(|u| overlaps(u, n))
        });
        let mut found: Vec<Range<usize>> = paths.iter().cloned().chain(names).collect();
        found.sort_by_key(|m| m.start);
        for m in found {
            let f = l
                .get(m)
                .unwrap_or("")
                .trim_end_matches(['.', ',', ':', ';']);
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    let mut head = format!("{} lines", lines.len());
    if !files.is_empty() {
        let shown: Vec<&str> = files.iter().take(6).copied().collect();
        head.push_str("; files: ");
        head.push_str(&shown.join(", "));
        if files.len() > shown.len() {
            head.push_str(&format!(" (+{} more)", files.len() - shown.len()));
        }
    }
    let mut head = truncate_words(&head, budget);
    let rank = |l: &str| -> u8 {
        let u = l.to_ascii_uppercase();
        if u.contains("ERROR") || u.contains("FAIL") || u.contains("PANICKED") {
            0
        } else if u.contains("WARN") {
            1
        } else if STATUS_LINE.is_match(l) {
            2
        } else {
            3
        }
    };
    // Lines that carry more than a label ("Flights:") are worth keeping.
    let informative = |l: &str| {
        let t = l.trim_start_matches(|c: char| !c.is_alphanumeric());
        t.chars().count() >= 12 && !t.trim_end().ends_with(':')
    };
    let mut cands: Vec<(u8, usize, &str)> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (rank(l), i, l.as_str()))
        .filter(|(r, _, l)| !l.ends_with(':') && (*r < 3 || informative(l)))
        .collect();
    cands.sort();
    let mut seen = HashSet::new();
    let mut picked: Vec<(usize, String)> = Vec::new();
    let mut used = chars(&head);
    for (_, i, l) in cands {
        if !seen.insert(l) {
            continue;
        }
        let item = truncate_words(l, 120);
        let add = chars(&item) + 2;
        if used + add <= budget {
            used += add;
            picked.push((i, item));
        }
    }
    picked.sort();
    for (_, item) in picked {
        head.push_str("; ");
        head.push_str(&item);
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_detection() {
        let grep = "src/a.rs:10: fn main\nsrc/a.rs:20: let x\nsrc/b.rs:3: use y\n\
                    src/b.rs:9: mod z\nsrc/c.rs:1: //!\nsrc/c.rs:2: //!\n";
        assert!(is_structured(grep));
        let prose = "one\ntwo\nthree\nfour\nfive\nsix\n";
        assert!(!is_structured(prose));
        assert!(!is_structured("src/a.rs:1: x\nsrc/a.rs:2: y\n"));
        let s = summarize_structured(grep, 200);
        assert_eq!(
            s,
            "6 lines; files: src/a.rs, src/b.rs, src/c.rs; src/a.rs:10: fn main; \
             src/a.rs:20: let x; src/b.rs:3: use y; src/b.rs:9: mod z; src/c.rs:1: //!; src/c.rs:2: //!"
        );
        // Errors first when the budget is tight, kept in original order.
        let out = "ok: a.rs\nok: b.rs\nok: c.rs\nERROR: d.rs broke\nok: e.rs\nWARN: f.rs slow\n";
        assert!(is_structured(out));
        assert_eq!(
            summarize_structured(out, 70),
            "6 lines; files: a.rs, b.rs, c.rs, d.rs, e.rs, f.rs; ERROR: d.rs broke"
        );
    }
}
