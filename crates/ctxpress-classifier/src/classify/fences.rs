//! Code fences: what a fence is is [`ctxpress_core::text::fence`]'s rule;
//! here the prose around the fences is measured for the code-split rule.

use ctxpress_core::text::split_code_and_prose;

/// Characters of prose outside fenced code blocks (each piece trimmed).
pub fn prose_chars(text: &str) -> usize {
    split_code_and_prose(text)
        .iter()
        .filter(|s| !s.code)
        .map(|s| char_len(s.text.trim()))
        .sum()
}

/// `s.chars().count()`: the length of ASCII text (checked a word at a
/// time), otherwise the bytes that are not UTF-8 continuation bytes,
/// counted eight at a time (`char_count` widened every byte to a 64-bit
/// lane, about two instructions a byte).
pub(crate) fn char_len(s: &str) -> usize {
    if s.is_ascii() {
        return s.len();
    }
    let b = s.as_bytes();
    let mut chunks = b.chunks_exact(8);
    let mut cont = 0usize;
    for c in &mut chunks {
        let w = c.try_into().map(u64::from_le_bytes).unwrap_or(0);
        // continuation bytes are 0b10xxxxxx: bit 7 set, bit 6 (moved up
        // to bit 7 by the shift) clear
        cont += (w & !(w << 1) & 0x8080_8080_8080_8080).count_ones() as usize;
    }
    cont += chunks
        .remainder()
        .iter()
        .filter(|&&c| c & 0xC0 == 0x80)
        .count();
    s.len() - cont
}

/// `s.chars().count() < n`, counting only when the length in bytes (one to
/// four per character) does not settle it (as
/// `ctxpress_core::text::bytes::fewer_chars_than`, counting with
/// [`char_len`]).
pub(crate) fn fewer_chars_than(s: &str, n: usize) -> bool {
    if s.len() < n {
        return true;
    }
    if s.len() / 4 >= n {
        return false;
    }
    char_len(s) < n
}
