//! SSE2 lane helpers for the scanners that look at 16 bytes at a time (the
//! classifier's byte masks, the tool compressor's term search): a byte in
//! every lane, an equality mask and an unsigned range mask, the walk over a
//! text's full lanes, and the search for a text's first marked byte. Safe wrappers
//! over `safe_arch`; x86-64 only (SSE2 is part of its baseline).
//!
//! Who uses what: [`splat`], [`eq`] and [`in_range`] build the masks of the
//! classifier's byte classes, the tool compressor's term search and the
//! dialect's path scan; [`lanes`], the walk over a text's full lanes, serves
//! the exit-status anchor scan (`dialect::status`) and dedup's line hashing;
//! [`first_marked`], the first marked byte of the full lanes from an offset,
//! serves the traffic index's string scan and the fingerprints' line ends.

use safe_arch::{
    cmp_eq_mask_i8_m128i, cmp_lt_mask_i8_m128i, load_unaligned_m128i, m128i, move_mask_i8_m128i,
    set_splat_i8_m128i, sub_i8_m128i,
};

/// Each full 16-byte lane of `b` with its offset, in order; the bytes from
/// `b.len() / 16 * 16` on (fewer than 16) are the caller's.
#[inline(always)]
pub fn lanes(b: &[u8]) -> impl Iterator<Item = (usize, m128i)> + '_ {
    b.chunks_exact(16).enumerate().filter_map(|(k, lane)| {
        let lane = <&[u8; 16]>::try_from(lane).ok()?;
        Some((k * 16, load_unaligned_m128i(lane)))
    })
}

/// The first byte of `b` at or after `from` that `marks` sets in its lane
/// (`marks` maps a lane to all ones in the bytes wanted), searched over the
/// full 16-byte lanes from `from` on: `Ok(index)`, or `Err(at)` when none
/// of them holds one, `at` being where the bytes left (fewer than 16) start,
/// for the caller's own walk.
#[inline(always)]
pub fn first_marked(b: &[u8], from: usize, marks: impl Fn(m128i) -> m128i) -> Result<usize, usize> {
    let rest = b.get(from..).unwrap_or(&[]);
    for (at, v) in lanes(rest) {
        let bits = move_mask_i8_m128i(marks(v));
        if bits != 0 {
            return Ok(from + at + bits.trailing_zeros() as usize);
        }
    }
    Err(from + rest.len() / 16 * 16)
}

/// `x` in every lane.
#[inline(always)]
pub fn splat(x: u8) -> m128i {
    set_splat_i8_m128i(x as i8)
}

/// All ones in the lanes of `v` equal to `x`.
#[inline(always)]
pub fn eq(v: m128i, x: u8) -> m128i {
    cmp_eq_mask_i8_m128i(v, splat(x))
}

/// All ones in the lanes of `v` with `lo <= v < lo + n` (unsigned): a
/// signed compare of `v - (lo - 128)` with `n - 128`.
#[inline(always)]
pub fn in_range(v: m128i, lo: u8, n: u8) -> m128i {
    cmp_lt_mask_i8_m128i(
        sub_i8_m128i(v, splat(lo.wrapping_sub(128))),
        splat(n.wrapping_sub(128)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use safe_arch::load_unaligned_m128i;

    #[test]
    fn first_marked_is_the_first_wanted_byte_of_the_full_lanes() {
        for n in [0usize, 1, 15, 16, 17, 31, 32, 47, 100] {
            for hit in 0..=n {
                let mut b = vec![b'a'; n];
                if let Some(c) = b.get_mut(hit) {
                    *c = b'\n';
                }
                for from in [0, 1, 3, 16, 17, n, n + 2] {
                    let tail = from + n.saturating_sub(from) / 16 * 16;
                    let want = match b.iter().skip(from).position(|&c| c == b'\n') {
                        Some(k) if from + k < tail => Ok(from + k),
                        _ => Err(tail),
                    };
                    assert_eq!(
                        first_marked(&b, from, |v| eq(v, b'\n')),
                        want,
                        "{n} {hit} {from}"
                    );
                }
            }
        }
    }

    #[test]
    fn lanes_are_the_full_16_byte_chunks() {
        for n in [0usize, 1, 15, 16, 17, 31, 32, 47, 100] {
            let b: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let got: Vec<(usize, [u8; 16])> = lanes(&b).map(|(at, v)| (at, v.into())).collect();
            let want: Vec<(usize, [u8; 16])> = b
                .chunks_exact(16)
                .enumerate()
                .map(|(k, c)| (k * 16, <[u8; 16]>::try_from(c).expect("16 bytes")))
                .collect();
            assert_eq!(got, want, "{n}");
        }
    }

    #[test]
    fn masks_match_the_scalar_answers() {
        let mut lanes = [0u8; 16];
        for start in (0..=255u8).step_by(16) {
            for (k, b) in lanes.iter_mut().enumerate() {
                *b = start.wrapping_add(k as u8);
            }
            let v = load_unaligned_m128i(&lanes);
            let bits = |m: m128i| move_mask_i8_m128i(m) as u32;
            for (k, &b) in lanes.iter().enumerate() {
                let bit = |m: u32| m >> k & 1 == 1;
                assert_eq!(bit(bits(eq(v, b'_'))), b == b'_', "{b}");
                assert_eq!(bit(bits(in_range(v, b'0', 10))), b.is_ascii_digit(), "{b}");
                assert_eq!(
                    bit(bits(in_range(v, b'A', 26))),
                    b.is_ascii_uppercase(),
                    "{b}"
                );
                assert_eq!(bit(bits(in_range(v, 0xC0, 64))), b >= 0xC0, "{b}");
            }
        }
    }
}
