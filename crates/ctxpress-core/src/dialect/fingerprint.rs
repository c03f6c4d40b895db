//! Fingerprints of file content, equal for a read and the write of the same
//! file content.

/// Fingerprint of file content as a read returns or a write writes it:
/// line-number prefixes (`12\t`, `   12→`) removed when every line has one,
/// trailing `<system-reminder>` blocks dropped, trailing whitespace ignored.
pub fn content_fingerprint(text: &str) -> u64 {
    let mut t = text;
    if let Some(p) = t.find("<system-reminder>") {
        t = t.get(..p).unwrap_or(t);
    }
    let t = t.trim_end();
    // Not empty after the trim: at least one line.
    let numbered = !t.is_empty() && t.lines().all(|l| strip_line_number(l).is_some());
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for l in t.lines() {
        let body = if numbered {
            strip_line_number(l).unwrap_or(l)
        } else {
            l
        };
        h.update(body.trim_end().as_bytes());
        h.update(b"\n");
    }
    h.digest()
}

fn strip_line_number(l: &str) -> Option<&str> {
    let t = l.trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = t.get(digits..)?;
    rest.strip_prefix('\t')
        .or_else(|| rest.strip_prefix('→'))
        .or(if rest.is_empty() { Some("") } else { None })
}
