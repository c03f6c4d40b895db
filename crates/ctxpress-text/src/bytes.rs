//! Byte classes the text rules share: word bytes (what a regex's ASCII `\w`
//! and `\b` see) and term bytes (what a path, dotted identifier or version
//! is made of), one table lookup each.
//!
//! Also [`char_count`] and [`fewer_chars_than`]: a text's length in
//! characters, counted without decoding.

/// Bit of [`CLASS`]: `[A-Za-z0-9_]`.
pub const WORD: u8 = 1;
/// Bit of [`CLASS`]: `[A-Za-z0-9_./-]`, the bytes of a term run.
pub const TERM: u8 = 1 << 1;
/// Bit of [`CLASS`]: `.`, `-` or `/`, trimmed from the ends of a term run.
pub const TERM_EDGE: u8 = 1 << 2;

/// The class bits of every byte.
pub static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        let mut k = 0;
        if c.is_ascii_alphanumeric() || c == b'_' {
            k |= WORD | TERM;
        }
        if matches!(c, b'.' | b'-' | b'/') {
            k |= TERM | TERM_EDGE;
        }
        t[i] = k;
        i += 1;
    }
    t
};

/// `[A-Za-z0-9_]`: a byte of an ASCII word.
#[inline]
pub fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `[A-Za-z0-9_./-]`: a byte of a term run (paths, dotted names, versions).
#[inline]
pub fn is_term_byte(b: u8) -> bool {
    CLASS[b as usize] & TERM != 0
}

/// `.`, `-` or `/`: punctuation trimmed from the ends of a term run.
#[inline]
pub fn is_term_edge(b: u8) -> bool {
    CLASS[b as usize] & TERM_EDGE != 0
}

/// Characters of a UTF-8 text (the same as `s.chars().count()`): the length
/// of ASCII text (checked a word at a time), otherwise the bytes that are
/// not continuation bytes, counted eight at a time.
pub fn char_count(s: &str) -> usize {
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
/// four per character) does not settle it.
#[inline]
pub fn fewer_chars_than(s: &str, n: usize) -> bool {
    if s.len() < n {
        return true;
    }
    if s.len() / 4 >= n {
        return false;
    }
    char_count(s) < n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewer_chars_than_counts_chars() {
        for t in [
            "",
            "abc",
            "ééé",
            "€€€€",
            "a€",
            "😀😀x",
            &"é".repeat(60),
            &"x".repeat(230),
        ] {
            for n in [0, 1, 2, 3, 4, 5, 8, 12, 59, 60, 61, 119, 120, 121, 200, 240] {
                assert_eq!(fewer_chars_than(t, n), t.chars().count() < n, "{t:?} {n}");
            }
        }
    }

    #[test]
    fn char_count_counts_chars() {
        let pieces = [
            "", "a", "é", "日本", "😀", "\u{80}", "\u{7ff}", "\u{800}", "\u{ffff}", "abcdefg", "—",
        ];
        let mut state = 11u64;
        for n in 0..400 {
            let t: String = (0..n % 97)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    pieces[(state % pieces.len() as u64) as usize]
                })
                .collect();
            assert_eq!(char_count(&t), t.chars().count(), "{t:?}");
            for limit in [0, 1, 5, 40, 120, 200] {
                assert_eq!(fewer_chars_than(&t, limit), t.chars().count() < limit);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn char_count_is_chars_count(s in "\\PC{0,300}", n in 0usize..400) {
            proptest::prop_assert_eq!(char_count(&s), s.chars().count());
            proptest::prop_assert_eq!(fewer_chars_than(&s, n), s.chars().count() < n);
        }
    }

    #[test]
    fn classes_match_their_definitions() {
        for b in 0..=255u8 {
            let word = b.is_ascii_alphanumeric() || b == b'_';
            assert_eq!(is_word_byte(b), word);
            assert_eq!(CLASS[b as usize] & WORD != 0, word);
            assert_eq!(is_term_byte(b), word || matches!(b, b'.' | b'-' | b'/'));
            assert_eq!(is_term_edge(b), matches!(b, b'.' | b'-' | b'/'));
        }
        for s in ["", "abc", "héllo wörld", "日本語", "a\u{1F600}b"] {
            assert_eq!(char_count(s), s.chars().count());
        }
    }
}
