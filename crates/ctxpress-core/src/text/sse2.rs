//! SSE2 lane helpers for the scanners that look at 16 bytes at a time (the
//! classifier's byte masks, the tool compressor's term search): a byte in
//! every lane, an equality mask and an unsigned range mask, and the walk
//! over a text's full lanes. Safe wrappers
//! over `safe_arch`; x86-64 only (SSE2 is part of its baseline).

use safe_arch::{
    cmp_eq_mask_i8_m128i, cmp_lt_mask_i8_m128i, load_unaligned_m128i, m128i, set_splat_i8_m128i,
    sub_i8_m128i,
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
    use safe_arch::{load_unaligned_m128i, move_mask_i8_m128i};

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
