//! Line-level helpers: line-number prefixes, declarations (the outline of a
//! file), error lines, count lines and the references a text mentions.
//!
//! The code is split by what it does; every item is re-exported here, so
//! the paths stay `lines::…`:
//! - `prefixes.rs`: line-number prefixes (`12→`, `  7\t`) and splitting a
//!   read's text into numbered lines, with the byte-level trims they use;
//! - `outline.rs`: languages by path, and the declarations of a file (its
//!   outline) with their ranks, remembered per distinct line;
//! - `errors.rs`: error, diagnostic and count lines;
//! - `references.rs`: the paths, URLs and exception names a text mentions;
//! - `terms.rs`: the term scan (64-byte blocks read as byte-class bit masks)
//!   that finds the identifiers, paths and versions of a text;
//! - here: cutting a line to a length ([`clip`]) and its shape ([`shape`]).
//!
//! Slow reference implementations the tests compare against live in a
//! `reference` module beside each file, the tests in a `tests` module.

use regex::Regex;

mod errors;
mod outline;
mod prefixes;
mod references;
mod terms;

pub use errors::{error_line_candidates, is_count_line, is_diagnostic, is_error_line};
pub use outline::{Lang, LineRanks, OutlineState, Rank, declaration, is_heading, lang_of};
pub use prefixes::{Line, split_numbered};
pub(crate) use prefixes::{is_blank, trim};
pub use references::{references, references_in_lines, references_outside};
pub(crate) use terms::decodes_to_same_terms;
pub use terms::{for_each_term, terms};

fn re(p: &str) -> Regex {
    // Every pattern is a literal of this module's files, compiled by their
    // tests.
    Regex::new(p).expect("valid built-in regex")
}

/// `s` cut to at most `max` characters, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    let mut out = String::new();
    push_clip(&mut out, s, max);
    out
}

/// Append [`clip`] of `s` to `out`, reading no more of `s` than `max`
/// characters (a line may be megabytes long).
pub fn push_clip(out: &mut String, s: &str, max: usize) {
    // At most `max` bytes: at most `max` characters.
    if s.len() <= max {
        out.push_str(s);
        return;
    }
    let Some(last) = max.checked_sub(1) else {
        // Not empty: cut to nothing.
        out.push('…');
        return;
    };
    // The `max`th character, and whether another follows it.
    match s.char_indices().nth(last) {
        Some((at, c)) if at + c.len_utf8() < s.len() => {
            out.push_str(s.get(..at).unwrap_or(""));
            out.push('…');
        }
        _ => out.push_str(s),
    }
}

/// `s` with runs of digits replaced by `#`, for spotting lines that differ
/// only in numbers (progress bars, timings).
pub fn shape(s: &str) -> String {
    let t = s.trim();
    let b = t.as_bytes();
    let mut out = String::with_capacity(t.len());
    // ASCII digits are whole characters: the text between runs of them is
    // copied as it is.
    let mut from = 0;
    let mut i = 0;
    while let Some(c) = b.get(i) {
        if c.is_ascii_digit() {
            out.push_str(t.get(from..i).unwrap_or(""));
            out.push('#');
            i += b
                .get(i..)
                .map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count());
            from = i;
        } else {
            i += 1;
        }
    }
    out.push_str(t.get(from..).unwrap_or(""));
    out
}

#[cfg(test)]
mod tests;
