//! Reference implementations for the tests of the term scan (the slow or
//! plain forms the faster code is compared with): the scans the block scan
//! replaced (a trigger search, SIMD or a byte at a time, with a byte walk to
//! the run's ends, and the scan before its loops were tightened), the split
//! of a run before the identifier automaton, and the identifier patterns as
//! plain functions.

use super::*;

pub(super) fn is_snake(w: &[u8]) -> bool {
    // [a-z][a-z0-9]*(_[a-z0-9]+)+, in one pass: lower-case letters and
    // digits, single underscores between them, at least one.
    if !w.first().is_some_and(u8::is_ascii_lowercase) || w.last() == Some(&b'_') {
        return false;
    }
    let mut underscores = 0;
    let mut prev_underscore = false;
    for &c in w {
        if c == b'_' {
            if prev_underscore {
                return false;
            }
            underscores += 1;
            prev_underscore = true;
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            prev_underscore = false;
        } else {
            return false;
        }
    }
    underscores > 0
}

pub(super) fn humps(w: &[u8]) -> usize {
    // Count [A-Z][a-z0-9]+ humps covering the rest of `w`; 0 when it does not fit.
    let mut n = 0;
    let mut i = 0;
    while i < w.len() {
        if !w.get(i).is_some_and(u8::is_ascii_uppercase) {
            return 0;
        }
        let start = i;
        i += 1;
        while w
            .get(i)
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            i += 1;
        }
        if i == start + 1 {
            return 0;
        }
        n += 1;
    }
    n
}

pub(super) fn is_camel_or_pascal(w: &[u8]) -> bool {
    match w.first() {
        Some(c) if c.is_ascii_lowercase() => {
            // [a-z]+ then humps
            let k = w.iter().take_while(|c| c.is_ascii_lowercase()).count();
            w.get(k..).is_some_and(|rest| humps(rest) >= 1)
        }
        Some(c) if c.is_ascii_uppercase() => humps(w) >= 2,
        _ => false,
    }
}

/// Where the scan of [`for_each_term`] must look: the first byte at or
/// after `from` that is `_`, `/`, an upper-case letter after a lower-case
/// letter or a digit, a dot after a digit, or (`JSON_ESCAPED`) a
/// backslash. Every run holding a term holds one (a path has a slash, a
/// version a digit before a dot, snake_case an underscore, camelCase and
/// PascalCase a capital after a letter or digit), so the runs before it
/// are skipped unread. `from` must not be inside a run (the byte before
/// it is not looked at).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub(super) fn next_trigger<const JSON_ESCAPED: bool>(bytes: &[u8], from: usize) -> Option<usize> {
    use ctxpress_text::sse2::{eq, in_range as range};
    use safe_arch::{
        bitand_m128i, bitor_m128i, byte_shl_imm_u128_m128i, load_unaligned_m128i, m128i,
        move_mask_i8_m128i,
    };
    // The triggers of the lane `v`, whose bytes are preceded by those of
    // `prev` (the lane one byte earlier): one mask, one move.
    let hits = |v: m128i, prev: m128i| {
        let mut direct = bitor_m128i(eq(v, b'/'), eq(v, b'_'));
        if JSON_ESCAPED {
            direct = bitor_m128i(direct, eq(v, b'\\'));
        }
        let digit_before = range(prev, b'0', 10);
        let word_before = bitor_m128i(digit_before, range(prev, b'a', 26));
        let hit = bitor_m128i(
            direct,
            bitor_m128i(
                bitand_m128i(range(v, b'A', 26), word_before),
                bitand_m128i(eq(v, b'.'), digit_before),
            ),
        );
        move_mask_i8_m128i(hit) as u32
    };
    let rest = bytes.get(from..)?;
    if let Some(first) = rest.first_chunk::<16>() {
        // The byte before `from` is not looked at: the first lane's
        // previous bytes are its own, shifted, after a zero.
        let v = load_unaligned_m128i(first);
        let hit = hits(v, byte_shl_imm_u128_m128i::<1>(v));
        if hit != 0 {
            return Some(from + hit.trailing_zeros() as usize);
        }
        let mut at = from + 16;
        // Each lane with the sixteen bytes that end one byte later.
        while let Some(pair) = bytes.get(at - 1..).and_then(|r| r.first_chunk::<17>()) {
            let (Some(prev), Some(lane)) = (pair.first_chunk::<16>(), pair.last_chunk::<16>())
            else {
                break;
            };
            let hit = hits(load_unaligned_m128i(lane), load_unaligned_m128i(prev));
            if hit != 0 {
                return Some(at + hit.trailing_zeros() as usize);
            }
            at += 16;
        }
        // The last bytes (fewer than sixteen), after the byte before them,
        // padded with zeros (no zero byte is a trigger).
        let tail = bytes.get(at - 1..)?;
        let mut pair = [0u8; 17];
        pair.get_mut(..tail.len())?.copy_from_slice(tail);
        let (Some(prev), Some(lane)) = (pair.first_chunk::<16>(), pair.last_chunk::<16>()) else {
            return None;
        };
        let hit = hits(load_unaligned_m128i(lane), load_unaligned_m128i(prev));
        return (hit != 0).then(|| at + hit.trailing_zeros() as usize);
    }
    // Fewer than sixteen bytes in all, padded with zeros.
    let mut lane = [0u8; 16];
    lane.get_mut(..rest.len())?.copy_from_slice(rest);
    let v = load_unaligned_m128i(&lane);
    let hit = hits(v, byte_shl_imm_u128_m128i::<1>(v));
    (hit != 0).then(|| from + hit.trailing_zeros() as usize)
}

/// [`next_trigger`] a byte at a time (elsewhere than on x86-64, and the
/// tests' check of the SIMD lanes).
pub(super) fn next_trigger_bytes<const JSON_ESCAPED: bool>(
    bytes: &[u8],
    from: usize,
) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let mut prev = 0u8;
    rest.iter()
        .position(|&c| {
            let hit = matches!(c, b'_' | b'/')
                || (JSON_ESCAPED && c == b'\\')
                || (c.is_ascii_uppercase() && (prev.is_ascii_lowercase() || prev.is_ascii_digit()))
                || (c == b'.' && prev.is_ascii_digit());
            prev = c;
            hit
        })
        .map(|k| from + k)
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
pub(super) use next_trigger_bytes as next_trigger;

/// The scan of [`for_each_term`] as it was before it read the classes of
/// 64 bytes at a time ([`Block`]): it searched the next trigger
/// ([`next_trigger`]) and walked a byte at a time to the start and the end
/// of its run (the tests compare the two). `FAST` takes the short cut for
/// plain words.
pub(super) fn scan_terms_walk<'a, const JSON_ESCAPED: bool, const FAST: bool>(
    text: &'a str,
    mut f: impl FnMut(&'a str),
) {
    let bytes = text.as_bytes();
    // Never inside a run.
    let mut i = 0;
    loop {
        let Some(p) = next_trigger::<JSON_ESCAPED>(bytes, i) else {
            return;
        };
        let c = bytes.get(p).copied().unwrap_or(0);
        if JSON_ESCAPED && c == b'\\' {
            i = p + if bytes.get(p + 1) == Some(&b'u') {
                6
            } else {
                2
            };
            continue;
        }
        // The run through `p` starts after the last non-run byte before it
        // (no escape lies between `i` and `p`). Only runs with an
        // underscore, a slash, an inner capital or a dotted number can hold
        // a term: plain words are skipped without splitting. The classes of
        // the bytes from the run's second through `p` are or-ed on the way
        // back to its start (`first`: those of the byte reached last), those
        // after `p` on the way to its end: each byte is read once.
        let mut start = p;
        let mut first = TERM_BYTES[c as usize];
        let mut upper_inside = 0u8;
        while start > i {
            let k = bytes.get(start - 1).map_or(0, |b| TERM_BYTES[*b as usize]);
            if k & T_TOK == 0 {
                break;
            }
            upper_inside |= first;
            first = k;
            start -= 1;
        }
        i = p + 1;
        while let Some(&c) = bytes.get(i) {
            let k = TERM_BYTES[c as usize];
            if k & T_TOK == 0 {
                break;
            }
            upper_inside |= k;
            i += 1;
        }
        let seen = first | upper_inside;
        let interesting = seen & T_MARK != 0 || upper_inside & T_UPPER != 0;
        if !(interesting || (seen & T_DIGIT != 0 && seen & T_DOT != 0)) {
            continue;
        }
        // Most runs are one plain word (no `-`, `/` or `.`): nothing to trim
        // or split, no path and no version, only an identifier.
        if FAST && seen & T_SPLIT == 0 {
            // Without `/`, the mark is an underscore: only snake_case can
            // hold one, and only camelCase or PascalCase can do without.
            if let (Some(run), Some(run_str)) = (bytes.get(start..i), text.get(start..i))
                && is_identifier(run)
            {
                f(run_str);
            }
            continue;
        }
        // Trim punctuation at the ends (sentence dots, leading slashes).
        let mut a = start;
        let mut b = i;
        while a < b
            && bytes
                .get(a)
                .is_some_and(|c| matches!(c, b'.' | b'-' | b'/'))
        {
            a += 1;
        }
        while b > a
            && bytes
                .get(b - 1)
                .is_some_and(|c| matches!(c, b'.' | b'-' | b'/'))
        {
            b -= 1;
        }
        let (Some(run), Some(run_str)) = (bytes.get(a..b), text.get(a..b)) else {
            continue;
        };
        // A path has a slash; an identifier an underscore or a capital after
        // the run's first byte; a version digits and dots.
        if seen & T_MARK != 0 && is_path(run) {
            f(run_str);
        }
        let identifiers = seen & T_UNDERSCORE != 0 || upper_inside & T_UPPER != 0;
        if identifiers || (seen & T_DIGIT != 0 && seen & T_DOT != 0) {
            split_run(run, run_str, identifiers, &mut f);
        }
    }
}

/// [`split_run`] as it was before its one pass (the tests compare the
/// two): the versions and identifiers of a trimmed run (which neither starts nor
/// ends with `.`, `-` or `/`): its segments between `/` and `-`, each a
/// version or split at dots into identifiers (only looked for with
/// `identifiers`).
pub(super) fn split_run_reference<'a>(
    run: &[u8],
    run_str: &'a str,
    identifiers: bool,
    f: &mut impl FnMut(&'a str),
) {
    let mut w0 = 0;
    while w0 < run.len() {
        let e = run
            .get(w0..)
            .and_then(|r| r.iter().position(|c| matches!(c, b'/' | b'-')))
            .map_or(run.len(), |k| w0 + k);
        if let (Some(seg), Some(seg_str)) = (run.get(w0..e), run_str.get(w0..e)) {
            if seg
                .first()
                .is_some_and(|c| c.is_ascii_digit() || *c == b'v')
                && is_version(seg)
            {
                f(seg_str);
            } else if identifiers {
                let mut s0 = 0;
                while s0 < seg.len() {
                    let s1 = seg
                        .get(s0..)
                        .and_then(|r| r.iter().position(|c| *c == b'.'))
                        .map_or(seg.len(), |k| s0 + k);
                    if let (Some(w), Some(ws)) = (seg.get(s0..s1), seg_str.get(s0..s1))
                        && identifier(w)
                    {
                        f(ws);
                    }
                    s0 = s1 + 1;
                }
            }
        }
        w0 = e + 1;
    }
}

/// The scan of [`for_each_term`] as it was before its loops were tightened
/// (the tests compare the two).
pub(super) fn scan_terms_reference<'a, const JSON_ESCAPED: bool, const FAST: bool>(
    text: &'a str,
    mut f: impl FnMut(&'a str),
) {
    let json_escaped = JSON_ESCAPED;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes.get(i).copied().unwrap_or(0);
        if json_escaped && c == b'\\' {
            i += if bytes.get(i + 1) == Some(&b'u') {
                6
            } else {
                2
            };
            continue;
        }
        if TERM_BYTES[c as usize] & T_TOK == 0 {
            i += 1;
            continue;
        }
        let start = i;
        // Only runs with an underscore, a slash, an inner capital or a dotted
        // number can hold a term: plain words are skipped without splitting.
        let mut seen = 0u8;
        let mut upper_inside = 0u8;
        i += 1;
        seen |= TERM_BYTES[c as usize];
        while let Some(&c) = bytes.get(i) {
            let k = TERM_BYTES[c as usize];
            if k & T_TOK == 0 {
                break;
            }
            seen |= k;
            upper_inside |= k;
            i += 1;
        }
        let interesting = seen & T_MARK != 0 || upper_inside & T_UPPER != 0;
        if !(interesting || (seen & T_DIGIT != 0 && seen & T_DOT != 0)) {
            continue;
        }
        // Most runs are one plain word (no `-`, `/` or `.`): nothing to trim
        // or split, no path and no version, only an identifier.
        if FAST && seen & T_SPLIT == 0 {
            // Without `/`, the mark is an underscore: only snake_case can
            // hold one, and only camelCase or PascalCase can do without.
            if let (Some(run), Some(run_str)) = (bytes.get(start..i), text.get(start..i))
                && if seen & T_MARK != 0 {
                    is_snake(run)
                } else {
                    is_camel_or_pascal(run)
                }
            {
                f(run_str);
            }
            continue;
        }
        // Trim punctuation at the ends (sentence dots, leading slashes).
        let mut a = start;
        let mut b = i;
        while a < b
            && bytes
                .get(a)
                .is_some_and(|c| matches!(c, b'.' | b'-' | b'/'))
        {
            a += 1;
        }
        while b > a
            && bytes
                .get(b - 1)
                .is_some_and(|c| matches!(c, b'.' | b'-' | b'/'))
        {
            b -= 1;
        }
        let (Some(run), Some(run_str)) = (bytes.get(a..b), text.get(a..b)) else {
            continue;
        };
        if is_path(run) {
            f(run_str);
        }
        let mut w0 = a;
        for (k, ch) in run.iter().enumerate() {
            let end = a + k;
            let last = k + 1 == run.len();
            if matches!(ch, b'/' | b'-') || last {
                let e = if last && !matches!(ch, b'/' | b'-') {
                    end + 1
                } else {
                    end
                };
                if let (Some(seg), Some(seg_str)) = (bytes.get(w0..e), text.get(w0..e)) {
                    if seg
                        .first()
                        .is_some_and(|c| c.is_ascii_digit() || *c == b'v')
                        && is_version(seg)
                    {
                        f(seg_str);
                    } else {
                        let mut s0 = 0;
                        for (k, c) in seg.iter().enumerate() {
                            if *c == b'.' || k + 1 == seg.len() {
                                let s1 = if *c == b'.' { k } else { k + 1 };
                                if let (Some(w), Some(ws)) = (seg.get(s0..s1), seg_str.get(s0..s1))
                                    && identifier(w)
                                {
                                    f(ws);
                                }
                                s0 = k + 1;
                            }
                        }
                    }
                }
                w0 = end + 1;
            }
        }
    }
}

/// A compound identifier: snake_case, camelCase or PascalCase (the
/// reference for [`is_identifier`]).
pub(super) fn identifier(w: &[u8]) -> bool {
    // Fast reject: plain words have no underscore and no capital after the first letter.
    let compound = w.first() == Some(&b'_')
        || w.iter()
            .skip(1)
            .any(|c| *c == b'_' || c.is_ascii_uppercase());
    compound && (is_snake(w) || is_camel_or_pascal(w))
}
