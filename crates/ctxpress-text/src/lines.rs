//! The lines of a text as [`str::lines`] gives them, each line end found
//! with `memchr` (several times cheaper per line than `str::lines`, which
//! the fingerprints and result checks of long tool outputs and the tool
//! compressor's summaries walk a lot).
//!
//! Users: the dialect's fingerprints and result checks, the tool compressor's
//! summaries. [`count_newlines`] counts sixteen bytes at a time on x86-64, for
//! the fingerprints' `content_line_count` and dedup's line diff.

/// The line of `t` starting at byte `from` as [`str::lines`] gives it (up
/// to the next `\n`, a `\r` before it dropped), and where the line after it
/// starts; `None` at the end of `t`.
pub fn next_line(t: &str, from: usize) -> Option<(&str, usize)> {
    let rest = t.get(from..).filter(|r| !r.is_empty())?;
    Some(match memchr::memchr(b'\n', rest.as_bytes()) {
        Some(k) => {
            let l = rest.get(..k)?;
            (l.strip_suffix('\r').unwrap_or(l), from + k + 1)
        }
        None => (rest, t.len()),
    })
}

/// [`str::lines`] of `t`, by [`next_line`].
pub fn lines(t: &str) -> impl Iterator<Item = &str> {
    let mut from = 0;
    std::iter::from_fn(move || {
        let (l, next) = next_line(t, from)?;
        from = next;
        Some(l)
    })
}

/// The number of `\n` bytes in `b`: sixteen bytes at a time on x86-64
/// (one compare and a bit count a lane, no branch a line), for counts of
/// lines of whole texts.
pub fn count_newlines(b: &[u8]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use crate::sse2::{eq, lanes};
        let full: usize = lanes(b)
            .map(|(_, v)| safe_arch::move_mask_i8_m128i(eq(v, b'\n')).count_ones() as usize)
            .sum();
        let tail = b.get(b.len() / 16 * 16..).unwrap_or(&[]);
        full + tail.iter().filter(|&&c| c == b'\n').count()
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        b.iter().filter(|&&c| c == b'\n').count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lines_split_as_str_lines() {
        for t in [
            "",
            "\n",
            "a",
            "a\n",
            "a\r\nb\r",
            "\r\n\n\rx\n\ny",
            "é\r\n→\n",
        ] {
            assert_eq!(
                lines(t).collect::<Vec<_>>(),
                t.lines().collect::<Vec<_>>(),
                "{t:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn random_texts_split_as_str_lines(t in "[a\r\né]{0,12}") {
            prop_assert_eq!(lines(&t).collect::<Vec<_>>(), t.lines().collect::<Vec<_>>());
        }

        #[test]
        fn newlines_are_counted_at_every_length(
            b in proptest::collection::vec(prop_oneof![3 => 0u8..=255, 1 => Just(b'\n')], 0..80),
        ) {
            prop_assert_eq!(count_newlines(&b), b.iter().filter(|&&c| c == b'\n').count());
        }
    }
}
