//! Fenced code blocks: the one rule for what a code fence is, and the split
//! of a text into prose and fenced code that the classifier and the
//! summarizer share.
//!
//! The rule is CommonMark's, with list items as the only containers (block
//! quotes are not followed). A fence line is some spaces of indent, then a
//! run of three or more `` ` `` or `~`, then anything (the info string); it
//! opens a block when its indent is at most three spaces past the content
//! column of the list item it is in (the column of the text after the
//! marker, `1.  ` or `- `), or at most three spaces outside any list. So a
//! fence nested in a list item (`1. Run:` then `    ```bash`) is one, and a
//! line indented four or more spaces past its container (an indented code
//! line) is not. A block ends at a line holding only a run of the same byte
//! at least as long as the opening one (white space around it allowed),
//! indented at most three spaces past the column the block opened in; an
//! unclosed block runs to the end of the text. Lines inside a block are not
//! looked at for list items. Tabs are not indent (a tab-indented run of
//! backticks is no fence), and lazy continuation lines end a list item.
//!
//! API: [`Fence`] (one fence line), [`split_code_and_prose`] (→ [`Segment`]s
//! that tile the text), [`has_code_fence`], and [`CodeSplit`] (the trimmed
//! prose and the fences of a code-split summary).

use std::sync::LazyLock;

/// A run of fence bytes after the leading spaces of a line: its byte (`` ` ``
/// or `~`), its length and its indent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    /// `` b'`' `` or `b'~'`.
    pub byte: u8,
    /// Length of the run of [`Fence::byte`], 3 or more.
    pub run: usize,
    /// Spaces before the run.
    pub indent: usize,
}

impl Fence {
    /// The fence marker after the leading spaces of `line` (any number of
    /// them), if any. Whether it opens or closes a block depends on the list
    /// item it is in: see [`split_code_and_prose`].
    pub fn of_line(line: &str) -> Option<Fence> {
        let t = line.trim_start_matches(' ');
        let c = *t.as_bytes().first()?;
        if c != b'`' && c != b'~' {
            return None;
        }
        let n = t.bytes().take_while(|&b| b == c).count();
        (n >= 3).then_some(Fence {
            byte: c,
            run: n,
            indent: line.len() - t.len(),
        })
    }

    /// True when `line` closes a block this fence opened with its container's
    /// content at column `base`: a fence of the same byte, at least as long,
    /// with nothing but white space around it, indented at most 3 spaces
    /// past `base`.
    pub fn closed_by(self, line: &str, base: usize) -> bool {
        Fence::of_line(line).is_some_and(|f| {
            f.byte == self.byte
                && f.run >= self.run
                && f.indent <= base + 3
                && line.trim().trim_start_matches(self.byte as char).is_empty()
        })
    }
}

/// The content column of a list item opening `line` (after `indent`
/// spaces): a bullet (`-`, `*`, `+`) or an ordinal (1 to 9 digits, then `.`
/// or `)`), then a space. The text starts after 1 to 4 spaces; after more, or
/// on an empty item, one column after the marker.
fn list_item_column(line: &[u8], indent: usize) -> Option<usize> {
    let rest = line.get(indent..)?;
    let marker = match rest.first()? {
        b'-' | b'*' | b'+' => 1,
        b'0'..=b'9' => {
            let d = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            if d > 9 || !matches!(rest.get(d), Some(b'.' | b')')) {
                return None;
            }
            d + 1
        }
        _ => return None,
    };
    let after = rest.get(marker..).unwrap_or(&[]);
    let spaces = after.iter().take_while(|&&b| b == b' ').count();
    let empty = after
        .get(spaces..)
        .is_none_or(|r| r.iter().all(u8::is_ascii_whitespace));
    match (spaces, empty) {
        (_, true) => Some(indent + marker + 1),
        (0, false) => None,
        (1..=4, false) => Some(indent + marker + spaces),
        (_, false) => Some(indent + marker + 1),
    }
}

/// The content columns of the list items the current line is inside of,
/// innermost last.
#[derive(Default)]
struct Lists(Vec<usize>);

impl Lists {
    /// Takes in a non-blank line outside any block: closes the items it is
    /// not indented into, opens the item it starts. Returns the content
    /// column the line's indent counts from (0 outside any list).
    fn enter(&mut self, line: &str) -> usize {
        let b = line.as_bytes();
        let indent = b.iter().take_while(|&&c| c == b' ').count();
        while self.0.last().is_some_and(|&c| c > indent) {
            self.0.pop();
        }
        let base = self.0.last().copied().unwrap_or(0);
        if let Some(col) = list_item_column(b, indent) {
            self.0.push(col);
        }
        base
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
    let mut lists = Lists::default();
    // The open block's fence and the column it counts from.
    let mut open: Option<(Fence, usize)> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        match open {
            None => {
                if line.trim().is_empty() {
                    continue;
                }
                let base = lists.enter(line);
                if let Some(f) = Fence::of_line(line)
                    && f.indent <= base + 3
                {
                    if start > seg_start {
                        out.push(Segment {
                            code: false,
                            text: text.get(seg_start..start).unwrap_or(""),
                        });
                    }
                    seg_start = start;
                    open = Some((f, base));
                }
            }
            Some((f, base)) => {
                if f.closed_by(line, base) {
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
/// as looking for a code segment of [`split_code_and_prose`], splitting
/// only when a fence-like line is indented 4 spaces or more).
pub fn has_code_fence(text: &str) -> bool {
    // A fence line at most 3 spaces in always opens a block (when no block
    // is open already): one is enough. A deeper one opens a block only
    // inside a list item, which takes the whole split to know.
    let b = text.as_bytes();
    let mut deeper = false;
    for fence in FENCE_FINDERS.iter() {
        for h in fence.find_iter(b) {
            let spaces = b
                .get(..h)
                .map_or(0, |r| r.iter().rev().take_while(|&&c| c == b' ').count());
            if h == spaces || b.get(h - spaces - 1) == Some(&b'\n') {
                if spaces <= 3 {
                    return true;
                }
                deeper = true;
            }
        }
    }
    deeper && split_code_and_prose(text).iter().any(|s| s.code)
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
            Some(Fence {
                byte: b'`',
                run: 3,
                indent: 0
            })
        );
        assert_eq!(
            Fence::of_line("   ~~~~").map(|f| (f.run, f.indent)),
            Some((4, 3))
        );
        assert_eq!(Fence::of_line("      ```").map(|f| f.indent), Some(6));
        assert_eq!(Fence::of_line("\t```"), None);
        assert_eq!(Fence::of_line("``"), None);
        assert_eq!(Fence::of_line("x```"), None);
        let f = Fence::of_line("````").unwrap();
        assert!(f.closed_by("````\n", 0) && f.closed_by("  `````  \n", 0));
        assert!(!f.closed_by("```", 0) && !f.closed_by("````x", 0) && !f.closed_by("~~~~", 0));
        assert!(!f.closed_by("    ````", 0) && f.closed_by("    ````", 2));
    }

    #[test]
    fn list_items() {
        assert_eq!(list_item_column(b"- a", 0), Some(2));
        assert_eq!(list_item_column(b"  1.  **a**", 2), Some(6));
        assert_eq!(list_item_column(b"10) a", 0), Some(4));
        assert_eq!(list_item_column(b"-      code", 0), Some(2));
        assert_eq!(list_item_column(b"-\n", 0), Some(2));
        for l in ["-a", "1.a", "1234567890. a", "x. a", "---", "# h"] {
            assert_eq!(list_item_column(l.as_bytes(), 0), None, "{l}");
        }
    }

    #[test]
    fn fences_nested_in_list_items() {
        // The content of `1.  ` starts at column 4: a fence there is one.
        let t = "Steps:\n1.  **Run:**\n    ```bash\n    npm i\n    ```\n2. Done\n";
        assert_eq!(
            kinds(t),
            vec![
                (false, "Steps:\n1.  **Run:**\n"),
                (true, "    ```bash\n    npm i\n    ```\n"),
                (false, "2. Done\n"),
            ]
        );
        assert!(has_code_fence(t));
        // Nested items, blank lines inside the item.
        let t = "- a\n  - b:\n\n     ```js\n     x\n     ```\n";
        assert_eq!(kinds(t)[1], (true, "     ```js\n     x\n     ```\n"));
        // Four or more spaces past the item's column: indented code.
        let t = "- a\n\n      ```\n      x\n";
        assert!(!has_code_fence(t) && kinds(t).iter().all(|k| !k.0));
        // A line back at the margin ends the item.
        let t = "- a\nb\n    ```\nx\n";
        assert!(!has_code_fence(t));
        // Inside a block opened at the margin, a deeper run closes nothing.
        let t = "```md\n- a\n    ```ts\n    x\n    ```\n```\nafter";
        assert_eq!(
            kinds(t),
            vec![
                (true, "```md\n- a\n    ```ts\n    x\n    ```\n```\n"),
                (false, "after")
            ]
        );
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
            "- a\n    ```",
            "- a\n        ```",
            "1. a\nb\n    ~~~",
        ] {
            let split = split_code_and_prose(t).iter().any(|s| s.code);
            assert_eq!(has_code_fence(t), split, "{t:?}");
        }
        // Random texts from fence-ish lines.
        const LINES: &[&str] = &[
            "",
            "text",
            "- item",
            "1. item",
            "  - sub",
            "    ```",
            "  ```",
            "```js",
            "~~~",
            "     ```",
            "\t```",
            "        ~~~~",
            "10) x",
            "x ```",
            "-",
            "  ",
        ];
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            let mut t = String::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % 9) as usize;
            for k in 0..n {
                let pick = ((x >> (8 + 4 * k)) % LINES.len() as u64) as usize;
                t.push_str(LINES[pick]);
                t.push('\n');
            }
            let split = split_code_and_prose(&t);
            assert_eq!(split.iter().map(|s| s.text).collect::<String>(), t);
            assert_eq!(has_code_fence(&t), split.iter().any(|s| s.code), "{t:?}");
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
