//! The output formats (spec 000): `[summary: ...]` with the merge count,
//! entities and embedded id, the code-split rendering, and the bare
//! deterministic summary of a text.

use ctxpress_text::CodeSplit;

use super::Budget;
use super::chars;
use super::scoring::summarize;
use super::structured::{is_structured, summarize_structured};

/// Render a code-split message from its prose summary and the fences:
/// `[summary: ...]` then each fence verbatim, separated by blank lines. No
/// entities are appended.
pub fn format_code_split(prose_summary: &str, fences: &[&str], id: Option<&str>) -> String {
    let mut out = format_summary(prose_summary, 1, &[], id);
    for f in fences {
        out.push_str("\n\n");
        out.push_str(f);
    }
    out
}

/// Code-split a message deterministically: summarize the prose within its
/// budget, keep the fences verbatim. `None` when there is no prose or fence,
/// or when the result is not strictly shorter than the input.
pub fn code_split(text: &str, budget: &Budget, id: Option<&str>) -> Option<String> {
    let split = CodeSplit::of(text);
    if split.prose.is_empty() || split.fences.is_empty() {
        return None;
    }
    let summary = summarize(&split.prose, budget.for_len(chars(&split.prose)));
    let out = format_code_split(&summary, &split.fences, id);
    (chars(&out) < chars(text)).then_some(out)
}

/// The summary format of spec 000:
/// `[summary: {text}{ (N messages merged)}{ | entities: a, b}]`, or
/// `[summary#{id}: ...]` when an id is embedded. The merge suffix appears when
/// `merged` is 2 or more.
pub fn format_summary(text: &str, merged: usize, entities: &[String], id: Option<&str>) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    match id {
        Some(id) => {
            out.push_str("[summary#");
            out.push_str(id);
            out.push_str(": ");
        }
        None => out.push_str("[summary: "),
    }
    out.push_str(text);
    if merged >= 2 {
        out.push_str(&format!(" ({merged} messages merged)"));
    }
    if !entities.is_empty() {
        out.push_str(" | entities: ");
        out.push_str(&entities.join(", "));
    }
    out.push(']');
    out
}

/// A stable summary id derived from the summarized text (`sum_` + 12 hex digits).
pub fn summary_id(original: &str) -> String {
    let h = ctxpress_core::archive::content_hash(original);
    format!("sum_{}", h.get(..12).unwrap_or(&h))
}

/// The bare deterministic summary of a text (no brackets): the structured
/// summarizer for structured tool output, sentence scoring otherwise.
pub fn summarize_text(text: &str, budget: &Budget) -> String {
    let b = budget.for_len(chars(text));
    if is_structured(text) {
        let s = summarize_structured(text, b);
        if chars(&s) < chars(text.trim()) {
            return s;
        }
        return text.trim().to_string();
    }
    summarize(text, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_split_keeps_fences() {
        let t = "Here is the change you asked for, which replaces the loop with an iterator \
                 chain and removes the manual index bookkeeping entirely.\n\n```rust\nfn a() {}\n```\n\n\
                 After this, run cargo test again; the flaky test should now pass on every run we tried.";
        let sp = CodeSplit::of(t);
        assert_eq!(sp.fences, vec!["```rust\nfn a() {}\n```"]);
        assert!(sp.prose.starts_with("Here is the change") && sp.prose.contains("\n\nAfter this"));
        let out = code_split(t, &Budget::default(), None).unwrap();
        assert!(
            out.starts_with("[summary: ") && out.ends_with("]\n\n```rust\nfn a() {}\n```"),
            "{out}"
        );
        // Unclosed fences run to the end.
        let sp = CodeSplit::of("text\n```\ncode");
        assert_eq!(sp.fences, vec!["```\ncode"]);
        // Kept whole when the result would be longer.
        assert_eq!(
            code_split("Tiny.\n```\nx\n```", &Budget::default(), None),
            None
        );
    }

    #[test]
    fn formats() {
        let e = vec!["a".to_string(), "b".to_string()];
        assert_eq!(format_summary("t", 1, &[], None), "[summary: t]");
        assert_eq!(
            format_summary("t", 3, &e, None),
            "[summary: t (3 messages merged) | entities: a, b]"
        );
        assert_eq!(
            format_summary("t", 1, &e, Some("sum_1")),
            "[summary#sum_1: t | entities: a, b]"
        );
        assert_eq!(
            format_code_split("p", &["```\nx\n```"], None),
            "[summary: p]\n\n```\nx\n```"
        );
        assert_eq!(summary_id("x"), summary_id("x"));
        assert_ne!(summary_id("x"), summary_id("y"));
        assert_eq!(summary_id("x").len(), 16);
    }
}
