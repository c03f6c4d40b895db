//! The slow reference the tests hold `content_fingerprint` to (tests only).

use super::{strip_line_number, trim_end};

/// [`content_fingerprint`] as written before [`push_lines`]: each line
/// found by [`lines`] and copied on its own (the reference the tests hold
/// it to).
pub(super) fn content_fingerprint_by_line(text: &str) -> u64 {
    use ctxpress_text::lines::lines;
    let mut t = text;
    if let Some(p) = memchr::memmem::find(t.as_bytes(), b"<system-reminder>") {
        t = t.get(..p).unwrap_or(t);
    }
    let t = t.trim_end();
    let mut buf: Vec<u8> = Vec::with_capacity(t.len() + 1);
    if !t.is_empty() {
        let numbered = lines(t).all(|l| match strip_line_number(l) {
            Some(body) => {
                buf.extend_from_slice(trim_end(body).as_bytes());
                buf.push(b'\n');
                true
            }
            None => false,
        });
        if numbered {
            return xxhash_rust::xxh3::xxh3_64(&buf);
        }
        buf.clear();
    }
    for l in lines(t) {
        buf.extend_from_slice(trim_end(l).as_bytes());
        buf.push(b'\n');
    }
    xxhash_rust::xxh3::xxh3_64(&buf)
}
