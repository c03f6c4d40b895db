//! Sentence scoring and packing (spec 000 sections 4 and 5): the weights
//! of a sentence, the primary sentence of each paragraph, the greedy packing
//! into a budget and the extractive summary of prose.
//!
//! [`score_all`] runs each counting pattern once over the whole text, not once
//! per sentence, with the same scores as [`score_sentence`].

use regex::Regex;
use std::sync::LazyLock;

use ctxpress_text::ascii_regex as re;
use ctxpress_text::entities::{camel_case, pascal_case, snake_case};

use super::chars;
use super::sentences::{Sentence, sentences};
use super::words;

/// Separator between selected sentences.
pub const JOIN: &str = " ... ";

static EMPHASIS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:importantly|important|however|critical|critically|crucial|essential|must|never|always|required|caution|note that|make sure|be sure|ensure|do not|don't|cannot|breaking)\b",
    )
});
/// A number with a unit (`10 seconds`, `500 MB`, `20%`).
pub(super) static NUM_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b\d+(?:\.\d+)?(?:%|\s?(?:ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|ns|us|[KMGT]i?B|[kmgt]b|bytes?|px|em|rem|pt|lines?|files?|tokens?|chars?|characters?|requests?|rps|qps|times|x|k|K|M|percent|[kMG]?Hz|cores?|threads?|rows?|items?|tests?|errors?|users?|messages?|steps?|calls?|retries|attempts?|USD|EUR|dollars?)\b)",
    )
});
/// A word of three or more consonants (`npm`, `ssh`).
pub(super) static VOWELLESS: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b[bcdfghjklmnpqrstvwxzBCDFGHJKLMNPQRSTVWXZ]{3,}\b"));
/// A status word as written (`PASS`, `FAILED`, `ERROR`, `WARNING`).
pub(super) static STATUS: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b(?:PASS(?:ED)?|FAIL(?:ED|URE)?|ERROR|WARN(?:ING)?)\b"));
static GREP_REF: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:[A-Za-z0-9_-]+[./])+[A-Za-z0-9_-]+:\d+:"));
static FILLER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^[\s*_>#-]*(?:great|sure|ok|okay|thanks|thank you|got it|alright|all right|of course|absolutely|certainly|no problem|perfect|awesome|cool|nice|hi|hello|hey|understood|sounds good|you're welcome)\b",
    )
});

/// Score a sentence by the weights of spec 000: +3 per camelCase, PascalCase
/// and snake_case identifier, +4 for an emphasis phrase, +2 per number with a
/// unit, +2 per vowelless abbreviation, +3 per status word, +2 per grep-style
/// `file:line:` reference, +2 for a length of 40 to 120 characters, and -10 when
/// it starts with a filler word.
pub fn score_sentence(s: &str) -> i32 {
    let c = |k: usize| i32::try_from(k).unwrap_or(i32::MAX / 64);
    let n = |r: &Regex| c(r.find_iter(s).count());
    let mut score =
        3 * c(camel_case(s).count()) + 3 * c(pascal_case(s).count()) + 3 * c(snake_case(s).count());
    if EMPHASIS.is_match(s) {
        score += 4;
    }
    score += 2 * n(&NUM_UNIT);
    score += 2 * n(&VOWELLESS);
    score += 3 * n(&STATUS);
    score += 2 * n(&GREP_REF);
    let len = s.chars().count();
    if (40..=120).contains(&len) {
        score += 2;
    }
    if FILLER.is_match(s) {
        score -= 10;
    }
    score
}

/// A scored sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scored<'a> {
    /// The sentence.
    pub sentence: Sentence<'a>,
    /// Its score.
    pub score: i32,
    /// True for the highest-scored sentence of its paragraph (first on ties).
    pub primary: bool,
}

/// Score every sentence and mark the primary sentence of each paragraph.
///
/// The scores are [`score_sentence`]'s, but each counting pattern runs once
/// over the whole text instead of once per sentence, and its matches are
/// credited to the sentence they start in. That is exact: sentences are
/// separated by white space only (a sentence ends before the white space
/// after its punctuation, or at a newline), none of the counted patterns
/// can match across such a break (the only white space they hold is a
/// single space inside an emphasis phrase, or the one `\s` of a number with
/// a unit, which a letter must follow, while a break is followed by more
/// white space, punctuation's next sentence or a list marker), and a word
/// boundary at a sentence's edge sees white space in the whole text as it
/// sees the end of the text in the sentence alone.
pub fn score_all(text: &str) -> Vec<Scored<'_>> {
    let sents = sentences(text);
    let scores = scores_in_one_pass(text, &sents);
    let mut v: Vec<Scored<'_>> = sents
        .into_iter()
        .zip(scores)
        .map(|(s, score)| Scored {
            sentence: s,
            score,
            primary: false,
        })
        .collect();
    let mut i = 0;
    while i < v.len() {
        let para = v.get(i).map_or(0, |s| s.sentence.paragraph);
        let mut j = i;
        let mut best = i;
        while let Some(s) = v.get(j) {
            if s.sentence.paragraph != para {
                break;
            }
            if v.get(best).is_some_and(|b| s.score > b.score) {
                best = j;
            }
            j += 1;
        }
        if let Some(b) = v.get_mut(best) {
            b.primary = true;
        }
        i = j.max(i + 1);
    }
    v
}

/// [`score_sentence`] of each of `sents` (the sentences of `text`, in
/// order), with every counting pattern run once over `text`.
fn scores_in_one_pass(text: &str, sents: &[Sentence<'_>]) -> Vec<i32> {
    let mut scores: Vec<i32> = sents
        .iter()
        .map(|s| {
            let mut score = 0;
            if (40..=120).contains(&s.text.chars().count()) {
                score += 2;
            }
            if may_be_filler(s.text) && FILLER.is_match(s.text) {
                score -= 10;
            }
            score
        })
        .collect();
    let mut credit = |spans: &mut dyn Iterator<Item = usize>, weight: i32, once: bool| {
        let mut j = 0usize;
        let mut last: Option<usize> = None;
        for start in spans {
            while sents
                .get(j)
                .is_some_and(|s| s.start + s.text.len() <= start)
            {
                j += 1;
            }
            let Some(s) = sents.get(j) else { break };
            if start < s.start || (once && last == Some(j)) {
                continue;
            }
            last = Some(j);
            if let Some(x) = scores.get_mut(j) {
                *x = x.saturating_add(weight);
            }
        }
    };
    credit(&mut EMPHASIS.find_iter(text).map(|m| m.start()), 4, true);
    credit(&mut NUM_UNIT.find_iter(text).map(|m| m.start()), 2, false);
    credit(&mut GREP_REF.find_iter(text).map(|m| m.start()), 2, false);
    // The identifiers (+3), vowelless abbreviations (+2) and status words
    // (+3): whole words, classified in one pass.
    let mut j = 0usize;
    words::for_each_word(text, |start, _, k| {
        while sents
            .get(j)
            .is_some_and(|s| s.start + s.text.len() <= start)
        {
            j += 1;
        }
        let Some(s) = sents.get(j) else { return };
        if start < s.start {
            return;
        }
        let mut w = 0;
        if k & words::IDENT != 0 {
            w += 3;
        }
        if k & words::VOWELLESS != 0 {
            w += 2;
        }
        if k & words::STATUS != 0 {
            w += 3;
        }
        if let Some(x) = scores.get_mut(j) {
            *x = x.saturating_add(w);
        }
    });
    scores
}

/// False only when [`FILLER`] cannot match `s`: after the leading white
/// space and markers it skips, the first character is an ASCII one that
/// starts none of its words (in either case). A non-ASCII character (other
/// white space, or a letter that case-folds to an ASCII one) is left to the
/// pattern.
fn may_be_filler(s: &str) -> bool {
    let rest = s.trim_start_matches(|c: char| {
        matches!(
            c,
            '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '*' | '_' | '>' | '#' | '-'
        )
    });
    match rest.chars().next() {
        None => false,
        Some(c) if c.is_ascii() => matches!(
            c.to_ascii_lowercase(),
            'g' | 's' | 'o' | 't' | 'a' | 'c' | 'n' | 'p' | 'h' | 'u' | 'y'
        ),
        Some(_) => true,
    }
}

/// Cut `s` to at most `max` characters at a word boundary, marking the cut with
/// `...`.
pub fn truncate_words(s: &str, max: usize) -> String {
    if chars(s) <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(3);
    let cut = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
    let head = s.get(..cut).unwrap_or("");
    let head = match head.rfind(char::is_whitespace) {
        Some(ws) if ws > cut / 2 => head.get(..ws).unwrap_or(head),
        _ => head,
    };
    format!("{}...", head.trim_end())
}

/// Greedy packing of scored sentences into `budget` characters: primary
/// sentences first (by score, best first), then the others; sentences with a
/// negative score (fillers) only when nothing else fits. The chosen sentences
/// are returned in their original order.
pub fn pack<'a>(scored: &[Scored<'a>], budget: usize) -> Vec<Sentence<'a>> {
    let mut order: Vec<&Scored<'a>> = scored.iter().collect();
    order.sort_by(|a, b| {
        b.primary
            .cmp(&a.primary)
            .then(b.score.cmp(&a.score))
            .then(a.sentence.start.cmp(&b.sentence.start))
    });
    let sep = chars(JOIN);
    let mut chosen: Vec<Sentence<'a>> = Vec::new();
    let mut used = 0usize;
    for pass_negative in [false, true] {
        if pass_negative && !chosen.is_empty() {
            break;
        }
        for s in &order {
            if (s.score < 0) != pass_negative {
                continue;
            }
            let len = chars(s.sentence.text);
            let add = if chosen.is_empty() { len } else { len + sep };
            if used + add <= budget {
                used += add;
                chosen.push(s.sentence);
            }
        }
    }
    chosen.sort_by_key(|s| s.start);
    chosen
}

/// Deterministic extractive summary of prose within `budget` characters: score
/// sentences, pack them, restore order, join with ` ... `. When no sentence
/// fits, the best one is cut at a word boundary. The result is never longer than
/// the trimmed input.
pub fn summarize(text: &str, budget: usize) -> String {
    let trimmed = text.trim();
    let scored = score_all(trimmed);
    let chosen = pack(&scored, budget);
    let out = if chosen.is_empty() {
        let best = scored.iter().max_by(|a, b| {
            a.primary
                .cmp(&b.primary)
                .then(a.score.cmp(&b.score))
                .then(b.sentence.start.cmp(&a.sentence.start))
        });
        match best {
            Some(s) => truncate_words(s.sentence.text, budget),
            None => String::new(),
        }
    } else {
        chosen.iter().map(|s| s.text).collect::<Vec<_>>().join(JOIN)
    };
    if chars(&out) >= chars(trimmed) {
        trimmed.to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_weight_counts() {
        let base = "plain words here";
        assert_eq!(score_sentence(base), 0);
        assert_eq!(score_sentence("call myFunction now"), 3);
        assert_eq!(score_sentence("open a WebSocket now"), 3);
        assert_eq!(score_sentence("set my_var now"), 3);
        assert_eq!(score_sentence("set my_var and other_var"), 6);
        assert_eq!(score_sentence("however it works"), 4);
        assert_eq!(score_sentence("you must, however, never"), 4);
        assert_eq!(score_sentence("wait 10 seconds"), 2);
        assert_eq!(score_sentence("uses 500 MB and 20%"), 4);
        assert_eq!(score_sentence("run npm via ssh"), 4);
        assert_eq!(score_sentence("tests FAIL here"), 3);
        assert_eq!(score_sentence("PASS and WARNING"), 6);
        assert_eq!(score_sentence("see lib/foo.ts:42: here"), 2);
        // `src` is also a vowelless abbreviation.
        assert_eq!(score_sentence("see src/foo.ts:42: here"), 4);
        let forty = "a sentence that is long enough to count x";
        assert_eq!(forty.chars().count(), 41);
        assert_eq!(score_sentence(forty), 2);
        assert_eq!(score_sentence(&"a ".repeat(70)), 0);
        assert_eq!(score_sentence("Sure thing"), -10);
        assert_eq!(score_sentence("Thanks a lot"), -10);
        assert_eq!(score_sentence("okay then"), -10);
        assert_eq!(score_sentence("Okayish things"), 0);
    }

    /// The scores sentence by sentence, as [`score_all`] gave them before it
    /// ran each pattern once over the whole text.
    fn reference_scores(text: &str) -> Vec<i32> {
        sentences(text)
            .into_iter()
            .map(|s| score_sentence(s.text))
            .collect()
    }

    fn one_pass_scores(text: &str) -> Vec<i32> {
        score_all(text).into_iter().map(|s| s.score).collect()
    }

    #[test]
    fn one_pass_scores_equal_per_sentence_scores() {
        for t in [
            "",
            "Sure thing! The build is fine now.",
            "Wait 10\nseconds. Then 5\n- files here. Note that the fetchUser call is important.",
            "Uses 500 MB.  And 20%! Then src/foo.ts:42: fails. PASS\nFAIL and ERROR.",
            "  > ok then. ** Thanks, my_var is set. however, note that it must work.\n1. npm\n2. ssh",
            "Do not stop.\tMake sure. Be sure to note that x. e.g. DON'T fail.",
            "\u{a0}okay. \u{17f}ure. \u{212a}ay. Okayish. Ok.",
            "He said \"stop.\" Then left.) Next 3 s. v1.2 x",
        ] {
            assert_eq!(one_pass_scores(t), reference_scores(t), "{t:?}");
        }
    }

    fn piece() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            "[a-zA-Z_ ]{0,12}",
            "[0-9]{1,3}",
            prop::sample::select(vec![
                ". ",
                "! ",
                "? ",
                ".) ",
                ".\" ",
                "\n",
                "\n\n",
                "\n- ",
                "\n1. ",
                "\n# ",
                "\n> ",
                "\n| ",
                " ",
                "\t",
                "\u{a0}",
                "e.g. ",
                "Dr. ",
                "J. ",
                "2. ",
                "fooBar ",
                "WebSocket ",
                "my_var ",
                "MAX_SIZE ",
                "however ",
                "note that ",
                "make sure ",
                "don't ",
                "Don't ",
                "must",
                "never ",
                "ms",
                " MB",
                "%",
                "s ",
                " seconds",
                " files",
                "\nms ",
                "\nfiles",
                "npm ",
                "ssh",
                "PASS",
                "FAILED ",
                "ERROR",
                "WARNING ",
                "src/foo.ts:42: ",
                "a.b:1:",
                "Sure ",
                "sure",
                "ok",
                "Okay ",
                "thanks ",
                "Thank you",
                "hi",
                "hey ",
                "* ",
                "_",
                "> ",
                "#",
                "-",
                "\u{17f}ure ",
                "\u{212a}",
                "é",
                "…",
                "“",
                "”",
                "’",
                "`",
                "*",
                "3.5",
            ])
            .prop_map(str::to_string),
            "\\PC{0,4}",
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn one_pass_scores_equal_per_sentence_scores_on_any_text(
            parts in proptest::collection::vec(piece(), 0..40)
        ) {
            let text = parts.concat();
            proptest::prop_assert_eq!(one_pass_scores(&text), reference_scores(&text));
            let trimmed = text.trim();
            proptest::prop_assert_eq!(one_pass_scores(trimmed), reference_scores(trimmed));
        }

        #[test]
        fn filler_prefilter_is_a_necessary_condition(s in "\\PC{0,12}", p in piece()) {
            for t in [s.clone(), format!("{p}{s}")] {
                if FILLER.is_match(&t) {
                    proptest::prop_assert!(may_be_filler(&t), "{t:?}");
                }
            }
        }
    }

    #[test]
    fn primary_per_paragraph_and_packing() {
        let t = "Plain intro. The parseConfig call fails.\n\nAnother one. Uses 5 MB.";
        let s = score_all(t);
        let prim: Vec<&str> = s
            .iter()
            .filter(|x| x.primary)
            .map(|x| x.sentence.text)
            .collect();
        assert_eq!(prim, vec!["The parseConfig call fails.", "Uses 5 MB."]);
        // Budget for both primaries and the separator only; order restored.
        let b = "The parseConfig call fails.".len() + JOIN.len() + "Uses 5 MB.".len();
        let got: Vec<&str> = pack(&s, b).iter().map(|x| x.text).collect();
        assert_eq!(got, vec!["The parseConfig call fails.", "Uses 5 MB."]);
        // A tiny budget takes the best primary alone.
        let got: Vec<&str> = pack(&s, 30).iter().map(|x| x.text).collect();
        assert_eq!(got, vec!["The parseConfig call fails."]);
        // Fillers are left out when anything else fits.
        let s = score_all("Sure thing! The build is fine now.");
        let got: Vec<&str> = pack(&s, 400).iter().map(|x| x.text).collect();
        assert_eq!(got, vec!["The build is fine now."]);
    }

    #[test]
    fn summarize_joins_and_truncates() {
        let t = "First plain sentence here. The fetchUser call returns 404 errors. Middle filler text. \
                 Finally the retry_count must be 3 times.";
        let s = summarize(t, 90);
        assert_eq!(
            s,
            "The fetchUser call returns 404 errors. ... Finally the retry_count must be 3 times."
        );
        let long = "word ".repeat(100);
        let s = summarize(&long, 50);
        assert!(s.chars().count() <= 50 && s.ends_with("..."), "{s}");
        assert_eq!(summarize("Short.", 200), "Short.");
        assert_eq!(summarize("", 200), "");
    }
}
