//! What a summary is about and how much it keeps: the kind of call
//! ([`Kind`]), its [`Subject`], the [`Limits`], and the head line every
//! summary starts with. Shared by the plain-text summaries and the
//! structured ones.

use crate::lines::push_clip;
use std::fmt::Write as _;

/// The prefix every summary starts with.
pub const PREFIX: &str = "[summary: tool ";

/// What a tool result is the result of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file read (read tool, `cat`, `sed -n`, editor `view`).
    Read,
    /// A whole-file write or create.
    Write,
    /// A partial edit or patch.
    Edit,
    /// A shell command.
    Command,
    /// A search (grep, glob, find).
    Search,
    /// Any other tool.
    Other,
}

/// How much of a result a summary keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Declarations listed in a read's outline.
    pub max_outline: usize,
    /// Characters of one kept line.
    pub max_line_chars: usize,
    /// First non-empty lines kept of command and other output.
    pub head_lines: usize,
    /// Last non-empty lines kept of command and other output.
    pub tail_lines: usize,
    /// Error lines kept.
    pub max_error_lines: usize,
    /// Count / outcome lines kept.
    pub max_count_lines: usize,
    /// Files or paths listed for searches and listings.
    pub max_list: usize,
    /// Paths, URLs and error names listed as `refs:`.
    pub max_refs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_outline: 40,
            max_line_chars: 160,
            head_lines: 3,
            tail_lines: 3,
            max_error_lines: 8,
            max_count_lines: 6,
            max_list: 20,
            max_refs: 12,
        }
    }
}

/// What the summary says about the call that produced the result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    /// Tool name as called.
    pub tool: String,
    /// File paths the call names (as written in its arguments).
    pub paths: Vec<String>,
    /// The command or search pattern, when there is one.
    pub command: Option<String>,
    /// Exit code stated by the result.
    pub exit: Option<i64>,
}

impl Subject {
    pub(crate) fn head(&self, kind: Kind, max: usize) -> String {
        // Room for most heads at once (the tool, a verb, a path or command
        // and an exit code), not grown a part at a time.
        let mut h = String::with_capacity(HEAD_ROOM);
        h.push_str(PREFIX);
        push_clip_one_line(&mut h, &self.tool, 40);
        let file_op = matches!(kind, Kind::Read | Kind::Write | Kind::Edit);
        if let (true, None) = (file_op, &self.command) {
            let lower = self.tool.to_lowercase();
            let (verb, stems): (&str, &[&str]) = match kind {
                Kind::Read => ("read", &["read", "view", "open", "cat"]),
                Kind::Write => ("wrote", &["write", "create"]),
                _ => ("edited", &["edit", "replace", "patch", "insert"]),
            };
            if !stems.iter().any(|s| lower.contains(s)) {
                h.push(' ');
                h.push_str(verb);
            }
            for p in self.paths.iter().take(3) {
                h.push(' ');
                push_clip(&mut h, p, max);
            }
            if self.paths.len() > 3 {
                let _ = write!(h, " (+{} more)", self.paths.len() - 3);
            }
        } else if let Some(c) = &self.command {
            h.push_str(" `");
            push_clip_one_line(&mut h, c, 80);
            h.push('`');
        }
        if let Some(code) = self.exit {
            let _ = write!(h, ", exit {code}");
        }
        h
    }
}

/// The head of a summary of `kind` about `subject`, without its closing `]`.
pub(crate) fn head_of(kind: Kind, subject: &Subject) -> String {
    subject.head(kind, 200)
}

/// The capacity a summary's head starts with.
pub(crate) const HEAD_ROOM: usize = 256;

/// `push_clip(out, &one_line(s), max)`, joining only the words the clip
/// can keep: once the joined words are over `max` characters, the clip is
/// their first `max - 1` and `…` whatever follows (a command's heredoc, a
/// long script), so the rest is not read.
pub(crate) fn push_clip_one_line(out: &mut String, s: &str, max: usize) {
    // The joined words are never longer than `s`, and rarely longer than
    // `max` characters and a word: room for them at once.
    let mut line = String::with_capacity(s.len().min(max.saturating_mul(4).saturating_add(64)));
    let mut chars = 0usize;
    for w in s.split_whitespace() {
        if !line.is_empty() {
            line.push(' ');
            chars += 1;
        }
        line.push_str(w);
        chars += w.chars().count();
        if chars > max {
            break;
        }
    }
    push_clip(out, &line, max);
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::reference::one_line;
    use super::*;
    use crate::lines::push_clip;

    /// [`push_clip_one_line`] and the clip of the whole joined line.
    fn assert_clip_one_line_as_joined(s: &str, max: usize) {
        let (mut new, mut old) = (String::from("x"), String::from("x"));
        push_clip_one_line(&mut new, s, max);
        push_clip(&mut old, &one_line(s), max);
        assert_eq!(new, old, "{s:?} {max}");
    }

    #[test]
    fn clipped_one_line_is_the_clip_of_the_joined_line() {
        for s in [
            "",
            " ",
            "a",
            "  cargo   test \n -- --nocapture ",
            "cat <<'EOF' > a.rs\nfn main() {}\nEOF",
            "é é é é é é é é é é",
            "\u{a0}a\u{2003}b\u{85}c",
            "abcdefghijklmnopqrstuvwxyz0123456789",
        ] {
            for max in 0..40 {
                assert_clip_one_line_as_joined(s, max);
            }
            assert_clip_one_line_as_joined(s, 80);
        }
    }

    proptest::proptest! {
        #[test]
        fn clipped_one_line_on_random_texts(
            s in "(a|é|→| |\t|\n|\u{a0}|\u{2003}|bc){0,30}",
            max in 0usize..24,
        ) {
            let (mut new, mut old) = (String::new(), String::new());
            push_clip_one_line(&mut new, &s, max);
            push_clip(&mut old, &one_line(&s), max);
            proptest::prop_assert_eq!(new, old);
        }
    }
}
