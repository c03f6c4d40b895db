//! Fingerprints of file content, equal for a read and the write of the same
//! file content.

use crate::text::lines::lines;

/// Fingerprint of file content as a read returns or a write writes it:
/// line-number prefixes (`12\t`, `   12→`) removed when every line has one,
/// trailing `<system-reminder>` blocks dropped, trailing whitespace ignored.
pub fn content_fingerprint(text: &str) -> u64 {
    let mut t = text;
    if let Some(p) = memchr::memmem::find(t.as_bytes(), b"<system-reminder>") {
        t = t.get(..p).unwrap_or(t);
    }
    let t = t.trim_end();
    // The text is hashed in one call at the end: a streaming hasher costs
    // several times more per line than the copy. The copy without the
    // number prefixes is made first (reads, which come numbered, need no
    // other); the first line without one stops it, and the plain copy is
    // made in the same buffer.
    let mut buf: Vec<u8> = Vec::with_capacity(t.len() + 1);
    // Not empty after the trim: at least one line.
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

/// True for the ASCII characters [`char::is_whitespace`] accepts.
fn ascii_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// [`str::trim_end`], without decoding the last character when it is an
/// ASCII one that is not white space (nearly every line).
fn trim_end(l: &str) -> &str {
    match l.as_bytes().last() {
        Some(&c) if c.is_ascii() && !ascii_blank(c) => l,
        _ => l.trim_end(),
    }
}

/// [`str::trim_start`], skipping ASCII white space by byte (the first other
/// byte, when not ASCII, leaves the rest to `trim_start`).
fn trim_start(l: &str) -> &str {
    let b = l.as_bytes();
    let k = b.iter().position(|&c| !ascii_blank(c)).unwrap_or(b.len());
    let rest = l.get(k..).unwrap_or("");
    if rest.as_bytes().first().is_some_and(|c| !c.is_ascii()) {
        rest.trim_start()
    } else {
        rest
    }
}

fn strip_line_number(l: &str) -> Option<&str> {
    let t = trim_start(l);
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = t.get(digits..)?;
    rest.strip_prefix('\t')
        .or_else(|| rest.strip_prefix('→'))
        .or(if rest.is_empty() { Some("") } else { None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The fingerprint as first written (a streaming hash line by line):
    /// the one-call hash must give the same values, which archives and
    /// caches may hold.
    fn streaming(text: &str) -> u64 {
        // The number prefix as first stripped (with `str::trim_start`).
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
        let mut t = text;
        if let Some(p) = t.find("<system-reminder>") {
            t = t.get(..p).unwrap_or(t);
        }
        let t = t.trim_end();
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

    proptest! {
        #[test]
        fn random_texts_hash_as_the_streaming_one(
            t in "([ \t\u{a0}\u{3000}]{0,2}[0-9]{0,2}[\t→]?[a é\u{2003}\u{85}\x0b]{0,3}[\r\n]{0,2}){0,8}(<system-reminder>x)?"
        ) {
            prop_assert_eq!(content_fingerprint(&t), streaming(&t));
        }

        #[test]
        fn the_byte_trims_trim_as_str_does(l in "[ a\t\x0b\x0c\r\u{a0}\u{85}\u{3000}é]{0,6}") {
            prop_assert_eq!(trim_end(&l), l.trim_end());
            prop_assert_eq!(trim_start(&l), l.trim_start());
        }
    }

    #[test]
    fn one_call_hash_equals_the_streaming_one() {
        let long = "fn main() {}   \r\n".repeat(500);
        for t in [
            "",
            "a",
            "a\nb  \n\n",
            "1\tx\n2\ty",
            "     1→a\n     2→b\n<system-reminder>x</system-reminder>",
            "1\ta\nb",
            long.as_str(),
        ] {
            assert_eq!(content_fingerprint(t), streaming(t), "{t:?}");
        }
        assert_ne!(content_fingerprint("a"), content_fingerprint("b"));
    }
}
