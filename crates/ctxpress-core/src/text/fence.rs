//! Fenced code blocks: the one rule for what a code fence is, and the split
//! of a text into prose and fenced code that the classifier and the
//! summarizer share.
//!
//! The rule is CommonMark's, without container blocks: a fence line is up to
//! three spaces of indent (spaces only: a tab is four columns), then a run of
//! three or more `` ` `` or `~`, then anything (the info string). A block
//! ends at a line of at most three spaces of indent holding only a run of the
//! same character at least as long as the opening one (white space around
//! it allowed); an unclosed block runs to the end of the text. A line
//! indented four or more spaces is never a fence: it is an indented code line
//! (or the continuation of a paragraph) that merely starts with backticks.

use std::sync::LazyLock;

/// An opening or closing fence marker: its byte (`` ` `` or `~`) and how
/// many of them open the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    /// `` b'`' `` or `b'~'`.
    pub byte: u8,
    /// Length of the run of [`Fence::byte`], 3 or more.
    pub run: usize,
}

impl Fence {
    /// The fence marker opening `line` (up to 3 spaces of indent), if any.
    pub fn of_line(line: &str) -> Option<Fence> {
        let t = line.trim_start_matches(' ');
        if line.len() - t.len() > 3 {
            return None;
        }
        let c = *t.as_bytes().first()?;
        if c != b'`' && c != b'~' {
            return None;
        }
        let n = t.bytes().take_while(|&b| b == c).count();
        (n >= 3).then_some(Fence { byte: c, run: n })
    }

    /// True when `line` closes a block this fence opened: a fence of the same
    /// byte, at least as long, with nothing but white space around it.
    pub fn closed_by(self, line: &str) -> bool {
        Fence::of_line(line).is_some_and(|f| {
            f.byte == self.byte
                && f.run >= self.run
                && line.trim().trim_start_matches(self.byte as char).is_empty()
        })
    }
}

/// A piece of a text: prose or a fenced code block (fence lines included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    /// True for a fenced code block.
    pub code: bool,
    /// The text of the piece, untrimmed: the pieces of a text concatenate
    /// back to it.
    pub text: &'a str,
}

/// Split a text into prose and fenced code blocks, in order, none empty. A
/// code segment runs from the start of its opening fence line through the
/// line break of its closing one; an unclosed fence runs to the end of the
/// text.
pub fn split_code_and_prose(text: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    let mut seg_start = 0;
    let mut open: Option<Fence> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        match open {
            None => {
                if let Some(f) = Fence::of_line(line) {
                    if start > seg_start {
                        out.push(Segment {
                            code: false,
                            text: text.get(seg_start..start).unwrap_or(""),
                        });
                    }
                    seg_start = start;
                    open = Some(f);
                }
            }
            Some(f) => {
                if f.closed_by(line) {
                    out.push(Segment {
                        code: true,
                        text: text.get(seg_start..pos).unwrap_or(""),
                    });
                    seg_start = pos;
                    open = None;
                }
            }
        }
    }
    if seg_start < text.len() {
        out.push(Segment {
            code: open.is_some(),
            text: text.get(seg_start..).unwrap_or(""),
        });
    }
    out
}

/// `` ``` `` and `~~~` searchers, built once (building one costs more than
/// searching a short text).
static FENCE_FINDERS: LazyLock<[memchr::memmem::Finder<'static>; 2]> = LazyLock::new(|| {
    [
        memchr::memmem::Finder::new(b"```").into_owned(),
        memchr::memmem::Finder::new(b"~~~").into_owned(),
    ]
});

/// True when the text has at least one fenced code block (the same answer
/// as looking for a code segment of [`split_code_and_prose`], without
/// splitting).
pub fn has_code_fence(text: &str) -> bool {
    // The first fence line opens a block, so a block exists iff a fence line
    // does: three fence bytes at a line start, after at most 3 spaces.
    let b = text.as_bytes();
    FENCE_FINDERS.iter().any(|fence| {
        fence.find_iter(b).any(|h| {
            let spaces = b
                .get(h.saturating_sub(4)..h)
                .map_or(0, |r| r.iter().rev().take_while(|&&c| c == b' ').count());
            spaces <= 3 && (h == spaces || b.get(h - spaces - 1) == Some(&b'\n'))
        })
    })
}

/// A text split into its fenced code blocks (verbatim) and the prose around
/// them, as a code-split summary uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSplit<'a> {
    /// Prose outside the fences: each piece trimmed, empty ones dropped,
    /// joined by blank lines.
    pub prose: String,
    /// The fences, each trimmed: from its opening marker to its closing
    /// marker inclusive (to the end of the text when unclosed).
    pub fences: Vec<&'a str>,
}

impl<'a> CodeSplit<'a> {
    /// The prose and fences of `text` (see [`split_code_and_prose`]).
    pub fn of(text: &'a str) -> CodeSplit<'a> {
        let mut prose: Vec<&str> = Vec::new();
        let mut fences = Vec::new();
        for s in split_code_and_prose(text) {
            let t = s.text.trim();
            if s.code {
                fences.push(t);
            } else if !t.is_empty() {
                prose.push(t);
            }
        }
        CodeSplit {
            prose: prose.join("\n\n"),
            fences,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(t: &str) -> Vec<(bool, &str)> {
        split_code_and_prose(t)
            .into_iter()
            .map(|s| (s.code, s.text))
            .collect()
    }

    #[test]
    fn fence_lines() {
        assert_eq!(
            Fence::of_line("```rust\n"),
            Some(Fence { byte: b'`', run: 3 })
        );
        assert_eq!(Fence::of_line("   ~~~~").map(|f| f.run), Some(4));
        assert_eq!(Fence::of_line("    ```"), None);
        assert_eq!(Fence::of_line("\t```"), None);
        assert_eq!(Fence::of_line("``"), None);
        assert_eq!(Fence::of_line("x```"), None);
        let f = Fence::of_line("````").unwrap();
        assert!(f.closed_by("````\n") && f.closed_by("  `````  \n"));
        assert!(!f.closed_by("```") && !f.closed_by("````x") && !f.closed_by("~~~~"));
        assert!(!f.closed_by("    ````"));
    }

    #[test]
    fn splits_in_order_and_concatenates_back() {
        let t = "intro\n```rust\nfn a() {}\n```\nmiddle\n  ~~~\nx\n  ~~~\nend";
        let k = kinds(t);
        assert_eq!(
            k,
            vec![
                (false, "intro\n"),
                (true, "```rust\nfn a() {}\n```\n"),
                (false, "middle\n"),
                (true, "  ~~~\nx\n  ~~~\n"),
                (false, "end"),
            ]
        );
        assert_eq!(k.iter().map(|(_, s)| *s).collect::<String>(), t);
        // Unclosed fences run to the end; a longer run is needed to close.
        assert_eq!(
            kinds("a\n````\nb\n```\n"),
            vec![(false, "a\n"), (true, "````\nb\n```\n")]
        );
        // Four spaces of indent: not a fence, not a closing fence.
        assert_eq!(kinds("a\n    ```\nb\n"), vec![(false, "a\n    ```\nb\n")]);
        assert_eq!(
            kinds("```\n    ```\n```"),
            vec![(true, "```\n    ```\n```")]
        );
        assert!(kinds("").is_empty());
    }

    #[test]
    fn split_handles_unclosed_and_nested_fences() {
        let t = "intro\n```rs\nfn a() {}\n```\nmid\n````md\n```\ninner\n```\n````\nend";
        let segs = split_code_and_prose(t);
        let kinds: Vec<bool> = segs.iter().map(|s| s.code).collect();
        assert_eq!(kinds, vec![false, true, false, true, false]);
        assert_eq!(segs.iter().map(|s| s.text).collect::<String>(), t);
        let u = split_code_and_prose("text\n```\ncode without end");
        assert_eq!(u.len(), 2);
        assert!(u[1].code);
    }

    #[test]
    fn has_code_fence_agrees_with_the_split() {
        for t in [
            "",
            "```",
            "x```",
            "a\n   ```\n",
            "a\n    ```\n",
            " \n```",
            "``` ~~~",
            "a ~~~\n",
            "\t~~~",
            "no fence here",
        ] {
            let split = split_code_and_prose(t).iter().any(|s| s.code);
            assert_eq!(has_code_fence(t), split, "{t:?}");
        }
    }

    #[test]
    fn code_split_trims_and_joins() {
        let t = "Intro.\n\n```rust\nfn a() {}\n```  \n\n  \nAfter.\n```\nopen";
        let sp = CodeSplit::of(t);
        assert_eq!(sp.prose, "Intro.\n\nAfter.");
        assert_eq!(sp.fences, vec!["```rust\nfn a() {}\n```", "```\nopen"]);
        let sp = CodeSplit::of("just prose  ");
        assert_eq!((sp.prose.as_str(), sp.fences.len()), ("just prose", 0));
    }
}
