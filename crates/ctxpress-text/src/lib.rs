//! Text rules of ctxpress, one answer each: what a code fence is and how a
//! text splits into prose and code ([`fence`]), which words are
//! identifiers, paths and versions ([`ident`] for one token, [`entities`]
//! for spans in running text, [`terms`] for the information-bearing terms
//! of a text), the byte classes those scans use ([`bytes`], with SSE2 lane
//! helpers on x86-64), `str::lines` by `memchr` ([`lines`]), how a
//! reference names a message ([`message_ref`]), and the secret detector
//! ([`secrets`]).
//!
//! It works on `&str` and bytes only: it must never depend on another
//! ctxpress crate (the message model, the dialects and every strategy build
//! on it).

pub mod bytes;
pub mod entities;
pub mod fence;
pub mod ident;
pub mod lines;
pub mod secrets;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub mod sse2;
pub mod terms;

pub use entities::ascii_regex;
pub use fence::{CodeSplit, Fence, Segment, has_code_fence, split_code_and_prose};
pub use terms::{for_each_term, term_counts, term_spans};

/// Characters of a message's first line that [`message_ref`] quotes.
pub const REF_QUOTE_CHARS: usize = 40;

/// How a reference names a message so that whoever reads the conversation
/// can find it: a model sees roles and texts, not ctxpress's message ids.
/// Its role and the start of its first non-blank line, quoted, white space
/// collapsed, `…` when cut: `the user message "Fix the failing test in
/// src/app.py"`. Brackets and double quotes are left out of the quote, so
/// the reference stays one bracketed note (`[cce:dup of ... — 300 chars]`).
pub fn message_ref(role: &str, text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut quote = String::new();
    let mut cut = false;
    for w in line.split_whitespace() {
        let w: String = w
            .chars()
            .filter(|c| !matches!(c, '[' | ']' | '"'))
            .collect();
        if w.is_empty() {
            continue;
        }
        let room = REF_QUOTE_CHARS.saturating_sub(quote.chars().count());
        let need = w.chars().count() + usize::from(!quote.is_empty());
        if need > room {
            if quote.is_empty() {
                quote = w.chars().take(REF_QUOTE_CHARS).collect();
            }
            cut = true;
            break;
        }
        if !quote.is_empty() {
            quote.push(' ');
        }
        quote.push_str(&w);
    }
    if cut {
        quote.push('…');
    }
    if quote.is_empty() {
        format!("the {role} message")
    } else {
        format!("the {role} message \"{quote}\"")
    }
}

#[cfg(test)]
mod ref_tests {
    use super::message_ref;

    #[test]
    fn a_message_is_named_by_its_role_and_first_words() {
        assert_eq!(
            message_ref(
                "user",
                "Fix the failing test in src/app.py\nIt fails on CI."
            ),
            "the user message \"Fix the failing test in src/app.py\""
        );
        assert_eq!(
            message_ref(
                "assistant",
                "\n\n  I looked at the [logs] and the \"cache\" server is down again, so I will retry"
            ),
            "the assistant message \"I looked at the logs and the cache…\""
        );
        assert_eq!(message_ref("user", "   \n "), "the user message");
        let long = "x".repeat(100);
        assert_eq!(
            message_ref("user", &long),
            format!("the user message \"{}…\"", "x".repeat(40))
        );
    }
}
