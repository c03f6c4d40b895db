//! Entity extraction (spec 000 section 5): the key entities of a text in
//! priority order, from the recognizers of [`ctxpress_text::entities`]
//! and the summarizer's own (codes, dates, numbers with units, proper nouns,
//! vowelless abbreviations).

use regex::Regex;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::LazyLock;

use ctxpress_text::ascii_regex as re;
use ctxpress_text::entities as rec;

use super::scoring::NUM_UNIT;
use super::words;

static DATE: LazyLock<Regex> = LazyLock::new(|| re(r"\b\d{4}-\d{2}-\d{2}\b"));

/// Words that start sentences often enough not to count as proper nouns.
const COMMON_CAPITALIZED: &[&str] = &[
    "The",
    "This",
    "That",
    "These",
    "Those",
    "There",
    "Then",
    "Than",
    "They",
    "Their",
    "Them",
    "Here",
    "What",
    "When",
    "Where",
    "Which",
    "Who",
    "Why",
    "How",
    "And",
    "But",
    "For",
    "Not",
    "Now",
    "Yes",
    "Also",
    "Let",
    "Lets",
    "Please",
    "Thanks",
    "Thank",
    "Sure",
    "Great",
    "Okay",
    "However",
    "Its",
    "You",
    "Your",
    "Our",
    "Can",
    "Could",
    "Would",
    "Should",
    "Will",
    "Just",
    "Some",
    "All",
    "Any",
    "Each",
    "Every",
    "Both",
    "First",
    "Second",
    "Third",
    "Next",
    "Finally",
    "After",
    "Before",
    "With",
    "From",
    "Was",
    "Were",
    "Does",
    "Did",
    "Have",
    "Has",
    "Had",
    "Since",
    "Because",
    "While",
    "Once",
    "Note",
    "See",
    "Use",
    "Make",
    "Run",
    "Check",
    "Try",
    "Add",
    "Update",
    "Fix",
    "Good",
    "Perfect",
    "Done",
    "Hello",
    "Hey",
    "One",
    "Two",
    "Yeah",
    "Well",
    "Maybe",
    "Instead",
    "Otherwise",
    "Still",
    "Only",
    "Even",
    "Other",
    "Another",
    "Same",
    "Most",
    "More",
    "Many",
    "Much",
    "Very",
    "Sorry",
    "Based",
    "Looking",
    "Using",
    "Without",
    "Within",
    "Into",
    "Over",
    "Under",
    "Between",
    "Above",
    "Below",
    "Again",
    "Already",
    "Actually",
    "Currently",
    "Overall",
    "Summary",
    "Step",
    "Steps",
    "Important",
    "Alright",
    "Absolutely",
    "Certainly",
    "Are",
    "Is",
    "If",
    "So",
    "Yes",
    "Got",
    "Nice",
    "Cool",
    "Awesome",
    "Understood",
    "Given",
    "Similarly",
    "Additionally",
    "Furthermore",
    "Moreover",
    "Thus",
    "Therefore",
    "Although",
    "Though",
    "Unless",
    "Until",
    "Whether",
    "Either",
    "Neither",
    "Sounds",
    "Okay",
    "Hmm",
    "Wait",
    "Oh",
    "Right",
    "True",
    "False",
    "None",
    "Yet",
    "Such",
    "Like",
    "Per",
    "Via",
    "Let's",
    "I'm",
    "I've",
    "I'll",
    "It's",
    "Don't",
    "Can't",
    "Create",
    "Remove",
    "Read",
    "Write",
    "Edit",
    "Open",
    "Show",
    "Find",
    "Get",
    "Set",
    "Keep",
    "Need",
    "Want",
    "Know",
    "Think",
    "Looks",
    "Seems",
    "Found",
    "Added",
    "Updated",
    "Fixed",
    "Changed",
    "Created",
    "Removed",
    "Everything",
    "Nothing",
    "Something",
    "Anything",
    "Someone",
];

/// True when the text before a word ends where a sentence or line begins.
fn at_sentence_start(before: &str) -> bool {
    let t = before.trim_end_matches([' ', '\t', '*', '_', '-', '>', '#']);
    t.is_empty() || t.ends_with(['.', '!', '?', '\n', ':'])
}

/// True when `STATUS` matches the whole of `s`: a match of it spans
/// one whole word, so only when `s` is one of its words.
fn is_status_word(s: &str) -> bool {
    matches!(
        s,
        "PASS" | "PASSED" | "FAIL" | "FAILED" | "FAILURE" | "ERROR" | "WARN" | "WARNING"
    )
}

/// A span as the `(start, end)` pair [`extract_entities`] sorts.
fn pair(r: Range<usize>) -> (usize, usize) {
    (r.start, r.end)
}

/// The spans of a recognizer as pairs.
fn pairs(it: impl Iterator<Item = Range<usize>>) -> Vec<(usize, usize)> {
    it.map(pair).collect()
}

/// Key entities of a text, at most `max`, in priority order (paths and URLs,
/// then identifiers, versions, numbers with units, proper nouns, vowelless
/// abbreviations), each in order of appearance, without duplicates or pieces
/// of an entity already taken.
pub fn extract_entities(text: &str, max: usize) -> Vec<String> {
    extract_entities_where(text, max, |_| true)
}

/// The entities an unbounded [`extract_entities`] finds, in its order, that
/// `keep` accepts, at most `max` of them: the same as filtering that list
/// and taking `max`, but the recognizers of lower priorities do not run
/// once `max` are kept.
pub fn extract_entities_where(
    text: &str,
    max: usize,
    keep: impl FnMut(&str) -> bool,
) -> Vec<String> {
    let mut t = Taker {
        text,
        max,
        keep,
        spans: std::collections::BTreeMap::new(),
        seen: HashSet::new(),
        out: Vec::new(),
    };
    let found = |r: &Regex| -> Vec<(usize, usize)> {
        r.find_iter(text).map(|m| (m.start(), m.end())).collect()
    };
    // A path span never holds `://` (`:` is not a path byte).
    let mut paths = pairs(rec::paths(text));
    paths.extend(rec::file_names(text).map(pair));
    paths.extend(rec::urls(text).map(pair));
    paths.sort();
    t.take(paths);
    if t.full() {
        return t.out;
    }
    // camelCase, PascalCase and snake_case words (no word is two of them),
    // and the vowelless ones for the last step: whole words, found in one
    // pass, in order.
    let (mut ids, mut codes, mut proper, mut vowelless) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    words::for_each_word(text, |s, e, k| {
        if k & words::IDENT != 0 {
            ids.push((s, e));
        }
        if k & words::CODE != 0 {
            codes.push((s, e));
        }
        if k & words::PROPER != 0 {
            proper.push((s, e));
        }
        if k & words::VOWELLESS != 0 {
            vowelless.push((s, e));
        }
    });
    t.take(ids);
    if t.full() {
        return t.out;
    }
    t.take(
        codes
            .into_iter()
            .filter(|&(s, e)| e - s >= 3 && !text.get(s..e).is_some_and(is_status_word)),
    );
    if t.full() {
        return t.out;
    }
    t.take(pairs(rec::versions(text)));
    if t.full() {
        return t.out;
    }
    let mut nums = found(&DATE);
    nums.extend(found(&NUM_UNIT));
    nums.sort();
    t.take(nums);
    if t.full() {
        return t.out;
    }
    // Filtered as they are taken: none is looked at once `max` are kept.
    t.take(proper.into_iter().filter(|&(s, e)| {
        let w = text.get(s..e).unwrap_or("");
        let verb_like = w.ends_with("ed") || w.ends_with("ing");
        let starter = verb_like && at_sentence_start(text.get(..s).unwrap_or(""));
        let after = text.get(e..).unwrap_or("").trim_start_matches('*');
        let label = after.starts_with(':') && at_sentence_start(text.get(..s).unwrap_or(""));
        !COMMON_CAPITALIZED.contains(&w) && !starter && !label
    }));
    if t.full() {
        return t.out;
    }
    t.take(
        vowelless
            .into_iter()
            .filter(|&(s, e)| !text.get(s..e).is_some_and(is_status_word)),
    );
    t.out
}

/// The state of [`extract_entities_where`]: the spans and texts of every
/// entity taken (kept or not), and the kept ones.
struct Taker<'t, F> {
    text: &'t str,
    max: usize,
    keep: F,
    /// Spans taken, by start: they never overlap, so the one that starts
    /// last before a candidate ends is the only one that can overlap it.
    spans: std::collections::BTreeMap<usize, usize>,
    seen: HashSet<&'t str>,
    out: Vec<String>,
}

impl<'t, F: FnMut(&str) -> bool> Taker<'t, F> {
    fn full(&self) -> bool {
        self.out.len() >= self.max
    }

    /// Take candidates in order: skip those overlapping a span taken, and
    /// repeats; keep those `keep` accepts.
    fn take(&mut self, cands: impl IntoIterator<Item = (usize, usize)>) {
        for (s, e) in cands {
            if self.full() {
                return;
            }
            if self
                .spans
                .range(..e)
                .next_back()
                .is_some_and(|(_, &b)| s < b)
            {
                continue;
            }
            let Some(t) = self.text.get(s..e) else {
                continue;
            };
            let t = t.trim_end_matches(['.', ',', ';', ':', '!', '?']);
            if t.is_empty() || !self.seen.insert(t) {
                continue;
            }
            self.spans.insert(s, e);
            if (self.keep)(t) {
                self.out.push(t.to_string());
            }
        }
    }
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::reference::{CODE, PROPER};
    use super::*;
    use crate::text::scoring::{STATUS, VOWELLESS};

    /// The first test for status words: the pattern matches the whole word.
    fn is_status_word(s: &str) -> bool {
        STATUS.find(s).is_some_and(|m| m.len() == s.len())
    }

    /// The first implementation: every entity, overlap checked against
    /// every span taken.
    fn reference(text: &str, max: usize) -> Vec<String> {
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut out: Vec<String> = Vec::new();
        let mut take = |cands: Vec<(usize, usize)>, out: &mut Vec<String>| {
            for (s, e) in cands {
                if out.len() >= max {
                    return;
                }
                if spans.iter().any(|&(a, b)| s < b && a < e) {
                    continue;
                }
                let Some(t) = text.get(s..e) else { continue };
                let t = t.trim_end_matches(['.', ',', ';', ':', '!', '?']);
                if t.is_empty() || !seen.insert(t.to_string()) {
                    continue;
                }
                spans.push((s, e));
                out.push(t.to_string());
            }
        };
        let found = |r: &Regex| -> Vec<(usize, usize)> {
            r.find_iter(text).map(|m| (m.start(), m.end())).collect()
        };
        let mut paths = pairs(rec::paths(text));
        paths.extend(rec::file_names(text).map(pair));
        paths.extend(rec::urls(text).map(pair));
        paths.sort();
        take(paths, &mut out);
        let mut ids = pairs(rec::camel_case(text));
        ids.extend(rec::pascal_case(text).map(pair));
        ids.extend(rec::snake_case(text).map(pair));
        ids.sort();
        take(ids, &mut out);
        let codes: Vec<(usize, usize)> = CODE
            .find_iter(text)
            .filter(|m| m.len() >= 3 && !is_status_word(m.as_str()))
            .map(|m| (m.start(), m.end()))
            .collect();
        take(codes, &mut out);
        take(pairs(rec::versions(text)), &mut out);
        let mut nums = found(&DATE);
        nums.extend(found(&NUM_UNIT));
        nums.sort();
        take(nums, &mut out);
        let proper: Vec<(usize, usize)> = PROPER
            .find_iter(text)
            .filter(|m| {
                let w = m.as_str();
                let verb_like = w.ends_with("ed") || w.ends_with("ing");
                let starter = verb_like && at_sentence_start(text.get(..m.start()).unwrap_or(""));
                let after = text.get(m.end()..).unwrap_or("").trim_start_matches('*');
                let label = after.starts_with(':')
                    && at_sentence_start(text.get(..m.start()).unwrap_or(""));
                !COMMON_CAPITALIZED.contains(&w) && !starter && !label
            })
            .map(|m| (m.start(), m.end()))
            .collect();
        take(proper, &mut out);
        let abbr: Vec<(usize, usize)> = VOWELLESS
            .find_iter(text)
            .filter(|m| !is_status_word(m.as_str()))
            .map(|m| (m.start(), m.end()))
            .collect();
        take(abbr, &mut out);
        out
    }

    const WORDS: [&str; 24] = [
        "src/auth/jwt.ts",
        "jwt.ts",
        "https://example.com/x.",
        "jwtVerify",
        "UserSession",
        "token_ttl",
        "HTTP2",
        "ABC",
        "v2.1.0",
        "2024-01-02",
        "30 seconds",
        "Alice",
        "The",
        "Fixed",
        "npm",
        "OK",
        "a",
        "and",
        ".",
        ":",
        "\n",
        "Parsing",
        "src/a/b.rs:12",
        "x_y_z",
    ];

    #[test]
    fn status_words_equal_the_pattern() {
        for w in [
            "PASS", "PASSED", "PASSE", "FAILURE", "FAILURES", "ERROR", "WARN", "WARNING", "WARNIN",
            "pass", "", "PASS ", "é",
        ] {
            assert_eq!(super::is_status_word(w), is_status_word(w), "{w:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn entities_match_the_reference(
            picks in proptest::collection::vec((0usize..WORDS.len(), 0usize..4), 0..60),
            max in 0usize..12,
            mask in 0u32..64,
        ) {
            // words side by side, or apart
            let text: String = picks
                .iter()
                .flat_map(|&(i, sep)| [WORDS[i], ["", " ", " ", "-"][sep]])
                .collect();
            proptest::prop_assert_eq!(extract_entities(&text, max), reference(&text, max));
            // keep: an arbitrary filter on the text (as the summarizer's)
            let keep = |e: &str| (e.len() as u32 * 7 + e.as_bytes()[0] as u32) & mask != 0;
            let want: Vec<String> = reference(&text, usize::MAX)
                .into_iter()
                .filter(|e| keep(e))
                .take(max)
                .collect();
            proptest::prop_assert_eq!(extract_entities_where(&text, max, keep), want);
        }
    }

    #[test]
    fn entities_by_priority() {
        let t = "Alice fixed src/auth/jwt.ts so jwtVerify and UserSession use token_ttl; \
                 see https://example.com/x. Bumped to v2.1.0, timeout 30 seconds, via npm.";
        assert_eq!(
            extract_entities(t, 10),
            vec![
                "src/auth/jwt.ts",
                "https://example.com/x",
                "jwtVerify",
                "UserSession",
                "token_ttl",
                "v2.1.0",
                "30 seconds",
                "Alice",
                "npm"
            ]
        );
        assert_eq!(extract_entities(t, 2).len(), 2);
        assert!(extract_entities("and/or 3/4 The This", 10).is_empty());
    }
}
