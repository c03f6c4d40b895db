//! Verse: runs of short capitalized lines without code or key-value syntax.

use ctxpress_text::bytes::char_count;

/// A line that could be a line of verse: capitalized, a few words, no code or
/// key-value syntax, first word not an all-caps log level.
pub(crate) fn verse_line(t: &str) -> Option<VerseLine> {
    let n = if t.is_ascii() { t.len() } else { char_count(t) };
    if !(8..=80).contains(&n) {
        return None;
    }
    if t.bytes().any(|b| {
        matches!(
            b,
            b'=' | b'('
                | b')'
                | b'{'
                | b'}'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'/'
                | b'\\'
                | b'|'
                | b':'
                | b'#'
                | b'*'
                | b'_'
                | b'`'
                | b'$'
                | b'@'
        )
    }) {
        return None;
    }
    let first = t.chars().next()?;
    if !first.is_uppercase() {
        return None;
    }
    let mut words = t.split_whitespace();
    let w0 = words.next()?;
    if w0.chars().count() >= 2 && w0.chars().all(|c| !c.is_alphabetic() || c.is_uppercase()) {
        return None;
    }
    let (mut rest, mut caps) = (0usize, 0usize);
    for w in words {
        rest += 1;
        if w != "I" && w.chars().next().is_some_and(char::is_uppercase) {
            caps += 1;
        }
    }
    if rest < 1 {
        return None;
    }
    let unterminated = !matches!(t.as_bytes().last(), Some(b'.' | b'!' | b'?' | b':' | b';'));
    Some(VerseLine {
        words: rest + 1,
        caps,
        rest,
        unterminated,
    })
}

pub(crate) struct VerseLine {
    pub(crate) words: usize,
    pub(crate) caps: usize,
    pub(crate) rest: usize,
    pub(crate) unterminated: bool,
}

#[derive(Default)]
pub(crate) struct VerseRun {
    pub(crate) lines: usize,
    pub(crate) words: usize,
    pub(crate) caps: usize,
    pub(crate) rest: usize,
    pub(crate) unterminated: usize,
}

impl VerseRun {
    pub(crate) fn is_verse(&self) -> bool {
        self.lines >= 4
            && self.unterminated * 2 >= self.lines
            && self.words >= self.lines * 3
            && self.caps * 10 <= self.rest * 3
    }
}
