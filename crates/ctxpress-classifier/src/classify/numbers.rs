//! Numbers: the digit runs of the scan, the units after them
//! (`numeric_with_units`) and the lines the phone and dotted-number gates
//! pass.

use crate::masks;
use crate::masks::Masks;
use ctxpress_text::bytes::is_word_byte;

use super::scanned::{Scan, mark_line};

/// First bytes of a unit right after a number (`5ms`, `2h`, `3°C`).
static UNIT_FIRST: [bool; 256] = unit_table(b"mnsdhwKMGTPkbHcprfgVWABe\xC2");

/// First bytes of a unit after a number and a space (`5 ms`, `10 MB`).
static UNIT_FIRST_SPACED: [bool; 256] = unit_table(b"mnsdhwKMGTPkbHcprf\xC2");

const fn unit_table(bytes: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        t[bytes[i] as usize] = true;
        i += 1;
    }
    t
}

/// Numbers with units, and the lines the phone and dotted-number gates pass,
/// from the ends of the digit runs.
///
/// Only runs followed by a [`Masks::num_next`] byte are looked at: a unit
/// starts with a letter, `µ`, `°` or a space, and the phone and dotted-number
/// gates need `.`, `-` or a space after some run of the match (a `+` prefix
/// included: `+1 555`, `+44-20`).
pub(super) fn digit_runs(b: &[u8], m: &Masks, s: &mut Scan) {
    let [phone, dotnum] = &mut s.spans;
    let mut carry = 0u64;
    for (w, (&x, &next_ok)) in m.dig().iter().zip(m.num_next()).enumerate() {
        // bit `e`: the first byte after a run
        let ends = !x & ((x << 1) | carry);
        carry = x >> 63;
        let mut candidates = ends & next_ok;
        while candidates != 0 {
            let e = w * 64 + candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            let a = masks::run_start(m.dig(), e - 1);
            let next = b.get(e).copied().unwrap_or(0);
            let after = b.get(e + 1).copied().unwrap_or(0);
            let before = a.checked_sub(1).and_then(|i| b.get(i)).copied();
            if !s.units
                && (UNIT_FIRST[next as usize]
                    || (next == b' ' && UNIT_FIRST_SPACED[after as usize]))
                && before.is_none_or(|c| !is_word_byte(c))
            {
                s.units = unit_at(b, e);
            }
            if (e - a == 3 && matches!(next, b' ' | b'.' | b'-') && after.is_ascii_digit())
                || before == Some(b'+')
            {
                mark_line(phone, b, a);
            }
            if next == b'.' && after.is_ascii_digit() {
                let f = e
                    + 1
                    + b.get(e + 1..)
                        .map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count());
                if before == Some(b'v')
                    || (b.get(f) == Some(&b'.') && b.get(f + 1).is_some_and(u8::is_ascii_digit))
                {
                    mark_line(dotnum, b, a);
                }
            }
        }
    }
}

/// The unit word at `p`: an optional `µ`/`°`, then the word bytes up to the
/// end of the word (a unit must end its word, so this is all a unit can be).
fn unit_word(b: &[u8], p: usize) -> &[u8] {
    let start = if matches!(b.get(p..p + 2), Some([0xC2, 0xB5 | 0xB0])) {
        p + 2
    } else {
        p
    };
    let n = b.get(start..).map_or(0, |r| {
        r.iter().take(8).take_while(|&&c| is_word_byte(c)).count()
    });
    b.get(p..start + n).unwrap_or(&[])
}

/// Units after a number, with an optional space (`5 ms`, `10MB`, `20°C`).
fn long_unit(w: &[u8]) -> bool {
    matches!(
        w,
        b"ms"
            | b"ns"
            | b"\xC2\xB5s"
            | b"sec"
            | b"secs"
            | b"second"
            | b"seconds"
            | b"min"
            | b"mins"
            | b"minute"
            | b"minutes"
            | b"hr"
            | b"hrs"
            | b"hour"
            | b"hours"
            | b"day"
            | b"days"
            | b"week"
            | b"weeks"
            | b"KB"
            | b"KiB"
            | b"MB"
            | b"MiB"
            | b"GB"
            | b"GiB"
            | b"TB"
            | b"TiB"
            | b"PB"
            | b"PiB"
            | b"kB"
            | b"byte"
            | b"bytes"
            | b"Hz"
            | b"kHz"
            | b"MHz"
            | b"GHz"
            | b"km"
            | b"cm"
            | b"mm"
            | b"kg"
            | b"mg"
            | b"kW"
            | b"mV"
            | b"mA"
            | b"\xC2\xB0C"
            | b"\xC2\xB0F"
            | b"px"
            | b"rem"
            | b"fps"
            | b"rpm"
            | b"Kbps"
            | b"Mbps"
            | b"Gbps"
    )
}

/// Units written right after a number only (`5s`, `2h`, `3em`).
fn short_unit(w: &[u8]) -> bool {
    matches!(
        w,
        b"s" | b"h" | b"m" | b"g" | b"V" | b"W" | b"A" | b"K" | b"B" | b"em"
    )
}

/// The `numeric_with_units` pattern after a number ending at `u` (the number
/// starting at a word boundary): a unit, then the end of the word.
fn unit_at(b: &[u8], u: usize) -> bool {
    let w = unit_word(b, u);
    long_unit(w) || short_unit(w) || (b.get(u) == Some(&b' ') && long_unit(unit_word(b, u + 1)))
}

/// True when no word byte follows position `i`.
pub(super) fn ends_word(b: &[u8], i: usize) -> bool {
    b.get(i).is_none_or(|&c| !is_word_byte(c))
}
