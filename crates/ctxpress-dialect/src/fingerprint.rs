//! Fingerprints of file content, equal for a read and the write of the same
//! file content.
//!
//! [`content_fingerprint`] hashes the content lines (their ends found with
//! `ctxpress_text::lines`); [`content_line_count`] counts the lines it hashes,
//! equal for equal fingerprints, so a caller comparing many texts fingerprints
//! only those whose count another one shares.

/// Fingerprint of file content as a read returns or a write writes it:
/// line-number prefixes (`12\t`, `   12→`) removed when every line has one,
/// trailing `<system-reminder>` blocks dropped, trailing whitespace ignored.
pub fn content_fingerprint(text: &str) -> u64 {
    let t = hashed_content(text);
    // The text is hashed in one call at the end: a streaming hasher costs
    // several times more per line than the copy. The copy without the
    // number prefixes is made first (reads, which come numbered, need no
    // other); the first line without one stops it, and the plain copy is
    // made in the same buffer.
    let mut buf: Vec<u8> = Vec::with_capacity(t.len() + 1);
    // Not empty after the trim: at least one line.
    if !t.is_empty() && push_lines(t, &mut buf, true) {
        return xxhash_rust::xxh3::xxh3_64(&buf);
    }
    buf.clear();
    push_lines(t, &mut buf, false);
    xxhash_rust::xxh3::xxh3_64(&buf)
}

/// The part of `text` [`content_fingerprint`] hashes: up to a
/// `<system-reminder>` block, trailing white space trimmed.
fn hashed_content(text: &str) -> &str {
    let mut t = text;
    if let Some(p) = memchr::memmem::find(t.as_bytes(), b"<system-reminder>") {
        t = t.get(..p).unwrap_or(t);
    }
    t.trim_end()
}

/// How many lines [`content_fingerprint`] hashes for `text` (one a line of
/// what it keeps, with or without number prefixes). Texts with equal
/// fingerprints have equal counts (their hashed copies are equal, one `\n`
/// a line), so texts whose counts differ cannot match: a caller comparing
/// many texts fingerprints only those whose count another one shares.
pub fn content_line_count(text: &str) -> usize {
    let b = hashed_content(text).as_bytes();
    if b.is_empty() {
        return 0;
    }
    ctxpress_text::lines::count_newlines(b) + 1
}

/// The index of the first `\n` at or after `from` in `b`, else `b.len()`:
/// sixteen bytes at a time (SSE2), inline (a `memchr` call costs more than
/// the search on lines of a few dozen bytes).
fn line_end(b: &[u8], from: usize) -> usize {
    use ctxpress_text::sse2::{eq, first_marked};
    match first_marked(b, from, |v| eq(v, b'\n')) {
        Ok(nl) => nl,
        Err(tail) => b
            .get(tail..)
            .and_then(|rest| rest.iter().position(|&c| c == b'\n'))
            .map_or(b.len(), |k| tail + k),
    }
}

/// Push each line of `t` ([`str::lines`]), trimmed at its end, and a `\n`
/// after it to `buf`; with `numbered`, each line's body after its number
/// prefix ([`strip_line_number`]), stopping with `false` at the first line
/// without one. Bodies that run on in `t` (a line ending right at its
/// `\n`, the next one starting right after it, as in plain text) are copied
/// in one piece.
fn push_lines(t: &str, buf: &mut Vec<u8>, numbered: bool) -> bool {
    let b = t.as_bytes();
    // The bytes `span.0..span.1` of `t` are still to be copied.
    let mut span = (0usize, 0usize);
    let mut from = 0;
    while from < b.len() {
        let nl = line_end(b, from);
        // The line as `str::lines` gives it: one `\r` before the `\n` dropped.
        let mut line = t.get(from..nl).unwrap_or("");
        line = line.strip_suffix('\r').unwrap_or(line);
        let body = if numbered {
            match strip_line_number(line) {
                Some(body) => body,
                None => return false,
            }
        } else {
            line
        };
        let body = trim_end(body);
        // Where the body lies in `t`: it is a slice of it (an empty one
        // too, see `strip_line_number`).
        let start = body.as_ptr() as usize - b.as_ptr() as usize;
        let end = start + body.len();
        if start != span.1 {
            buf.extend_from_slice(b.get(span.0..span.1).unwrap_or(&[]));
            span = (start, start);
        }
        if end == nl && nl < b.len() {
            // The body and its `\n`, as they are in `t`.
            span.1 = nl + 1;
        } else {
            buf.extend_from_slice(b.get(span.0..end).unwrap_or(&[]));
            buf.push(b'\n');
            span = (nl + 1, nl + 1);
        }
        from = nl + 1;
    }
    buf.extend_from_slice(b.get(span.0..span.1).unwrap_or(&[]));
    true
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

/// The body of `l` after its line-number prefix, a slice of `l` (an empty
/// body is the empty slice at its end), or `None` when it has none.
fn strip_line_number(l: &str) -> Option<&str> {
    let t = trim_start(l);
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = t.get(digits..)?;
    rest.strip_prefix('\t')
        .or_else(|| rest.strip_prefix('→'))
        .or(if rest.is_empty() { Some(rest) } else { None })
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::reference::content_fingerprint_by_line;
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
        fn random_texts_hash_as_line_by_line(
            t in "([ \t\u{a0}]{0,2}[0-9]{0,3}[\t→]?[a é\u{2003}\x0b]{0,24}[ \t]{0,2}[\r]{0,2}\n{0,2}){0,12}(<system-reminder>x)?"
        ) {
            prop_assert_eq!(content_fingerprint(&t), content_fingerprint_by_line(&t));
        }

        #[test]
        fn line_counts_are_those_of_the_hashed_lines(
            t in "([ \t\u{a0}]{0,2}[0-9]{0,3}[\t→]?[a é\u{2003}\x0b]{0,24}[ \t]{0,2}[\r]{0,2}\n{0,2}){0,12}(<system-reminder>x\n)?"
        ) {
            prop_assert_eq!(content_line_count(&t), hashed_lines(&t));
        }

        #[test]
        fn line_ends_are_the_next_newline(
            b in proptest::collection::vec(prop_oneof![8 => 0u8..=255, 1 => Just(b'\n')], 0..70),
            from in 0usize..70,
        ) {
            let from = from.min(b.len());
            let want = b.iter().skip(from).position(|&c| c == b'\n').map_or(b.len(), |k| from + k);
            prop_assert_eq!(line_end(&b, from), want);
        }

        #[test]
        fn the_byte_trims_trim_as_str_does(l in "[ a\t\x0b\x0c\r\u{a0}\u{85}\u{3000}é]{0,6}") {
            prop_assert_eq!(trim_end(&l), l.trim_end());
            prop_assert_eq!(trim_start(&l), l.trim_start());
        }
    }

    /// The lines the streaming fingerprint hashes (`str::lines` of what it
    /// keeps): the reference for [`content_line_count`].
    fn hashed_lines(text: &str) -> usize {
        let mut t = text;
        if let Some(p) = t.find("<system-reminder>") {
            t = t.get(..p).unwrap_or(t);
        }
        t.trim_end().lines().count()
    }

    #[test]
    fn line_counts_on_fixed_texts() {
        let long = "fn main() {}   \r\n".repeat(500);
        for (t, n) in [
            ("", 0),
            ("  \n\t\n", 0),
            ("a", 1),
            ("a\nb  \n\n", 2),
            ("\n\na", 3),
            (
                "     1→a\n     2→b\n<system-reminder>x\ny\n</system-reminder>",
                2,
            ),
            ("a\r\n\r\nb\n\n c  \n\td", 6),
            (long.as_str(), 500),
        ] {
            assert_eq!(content_line_count(t), n, "{t:?}");
            assert_eq!(hashed_lines(t), n, "{t:?}");
        }
        // Equal fingerprints, equal counts: a read and the write it returns.
        let written = "fn a() {}\n\nfn b() {}\n";
        let read = "     1→fn a() {}\n     2→\n     3→fn b() {}\n";
        assert_eq!(content_fingerprint(written), content_fingerprint(read));
        assert_eq!(content_line_count(written), content_line_count(read));
    }

    #[test]
    fn one_call_hash_equals_the_streaming_one() {
        let long = "fn main() {}   \r\n".repeat(500);
        let numbered: String = (1..300)
            .map(|n| format!("{n:>6}→    let x{n} = {n};\n"))
            .collect();
        for t in [
            "",
            "a",
            "a\nb  \n\n",
            "1\tx\n2\ty",
            "     1→a\n     2→b\n<system-reminder>x</system-reminder>",
            "1\ta\nb",
            long.as_str(),
            numbered.as_str(),
            "a\r\n\r\nb\n\n c  \n\td",
            "     1→x\r\n     2→\n     3→  y  \n",
        ] {
            assert_eq!(content_fingerprint(t), streaming(t), "{t:?}");
            assert_eq!(
                content_fingerprint(t),
                content_fingerprint_by_line(t),
                "{t:?}"
            );
        }
        assert_ne!(content_fingerprint("a"), content_fingerprint("b"));
    }
}
