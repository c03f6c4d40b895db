//! The plain form of the scan the tests call: [`scan_with`], a fresh set of
//! buffers for each text.

use crate::masks::Masks;

use super::scan_reusing;
use crate::classify::scanned::{Scan, Spare};

/// Line statistics, special characters net of Markdown formatting, and the
/// lines each gate passes (filling `m` for the text on the way).
pub(in crate::classify) fn scan_with(text: &str, m: &mut Masks) -> Scan {
    scan_reusing(text, m, Spare::default())
}
