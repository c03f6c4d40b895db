//! Code fences: what a fence is is [`ctxpress_text::fence`]'s rule;
//! here the prose around the fences is measured for the code-split rule.

use ctxpress_text::bytes::char_count;
use ctxpress_text::split_code_and_prose;

/// Characters of prose outside fenced code blocks (each piece trimmed).
pub fn prose_chars(text: &str) -> usize {
    split_code_and_prose(text)
        .iter()
        .filter(|s| !s.code)
        .map(|s| char_count(s.text.trim()))
        .sum()
}
