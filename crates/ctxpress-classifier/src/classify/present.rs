//! Which anchor bytes a short text holds (one table pass), so that the
//! searches for absent anchors are skipped.

pub(super) fn has(b: &[u8], c: u8) -> bool {
    memchr::memchr(c, b).is_some()
}

/// Which anchor bytes a text has, as `P_*` bits: found by one table pass for
/// short texts (where a `memchr` call per byte costs more than the text);
/// all bits set (unknown) for longer ones, whose searches are worth a call.
#[derive(Clone, Copy)]
pub(super) struct Present(pub(super) u16);

/// `` ` `` or `~` (fences).
pub(super) const P_FENCE: u16 = 1;

/// `$` or `\` (LaTeX).
pub(super) const P_MATH: u16 = 1 << 1;

/// `0xE2`, the lead byte of the math symbols.
pub(super) const P_E2: u16 = 1 << 2;

/// `"`.
pub(super) const P_QUOTE: u16 = 1 << 3;

/// `@` (emails).
pub(super) const P_AT: u16 = 1 << 4;

/// `:` (URL schemes).
pub(super) const P_COLON: u16 = 1 << 5;

/// `*` (Markdown emphasis).
pub(super) const P_STAR: u16 = 1 << 6;

/// `/` (paths).
pub(super) const P_SLASH: u16 = 1 << 7;

/// `0xC2`, the lead byte of the guillemets.
pub(super) const P_C2: u16 = 1 << 8;

/// Texts shorter than this get a presence pass.
const PRESENCE_MAX: usize = 256;

static PRESENT_BITS: [u16; 256] = {
    let mut t = [0u16; 256];
    t[b'`' as usize] = P_FENCE;
    t[b'~' as usize] = P_FENCE;
    t[b'$' as usize] = P_MATH;
    t[b'\\' as usize] = P_MATH;
    t[0xE2] = P_E2;
    t[0xC2] = P_C2;
    t[b'"' as usize] = P_QUOTE;
    t[b'@' as usize] = P_AT;
    t[b':' as usize] = P_COLON;
    t[b'*' as usize] = P_STAR;
    t[b'/' as usize] = P_SLASH;
    t
};

impl Present {
    pub(super) fn of(b: &[u8]) -> Present {
        if b.len() >= PRESENCE_MAX {
            return Present(u16::MAX);
        }
        Present(b.iter().fold(0, |a, &c| a | PRESENT_BITS[c as usize]))
    }

    /// False only when none of `bits` occurs.
    pub(super) fn may(self, bits: u16) -> bool {
        self.0 & bits != 0
    }
}
