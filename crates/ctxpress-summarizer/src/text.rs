//! Deterministic text functions of the extractive summarizer (spec 000 section 4):
//! paragraph and sentence splitting, sentence scoring, budget packing, entity
//! extraction, structured tool output, code-split and the output formats.

use regex::Regex;
use std::collections::HashSet;
use std::sync::LazyLock;

/// Separator between selected sentences.
pub const JOIN: &str = " ... ";

/// Summary budget in characters, chosen by input length (spec 000: 200 chars
/// under 600 chars of input, else 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Budget {
    /// Inputs shorter than this many characters get the short budget.
    pub short_threshold: usize,
    /// Budget for short inputs.
    pub short: usize,
    /// Budget for long inputs.
    pub long: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            short_threshold: 600,
            short: 200,
            long: 400,
        }
    }
}

impl Budget {
    /// The budget for a text of `chars` characters.
    pub fn for_len(&self, chars: usize) -> usize {
        if chars < self.short_threshold {
            self.short
        } else {
            self.long
        }
    }
}

/// Compile a pattern whose `\b` means an ASCII word boundary (faster and
/// never falls back on non-ASCII input).
fn re(pattern: &str) -> Regex {
    let p = pattern.replace(r"\b", r"(?-u:\b)");
    #[allow(clippy::expect_used)]
    Regex::new(&p).expect("static pattern compiles")
}

static CAMEL: LazyLock<Regex> = LazyLock::new(|| re(r"\b[a-z][a-z0-9]*[A-Z][a-zA-Z0-9]*\b"));
static PASCAL: LazyLock<Regex> = LazyLock::new(|| re(r"\b[A-Z][a-z0-9]+[A-Z][a-zA-Z0-9]*\b"));
static SNAKE: LazyLock<Regex> = LazyLock::new(|| re(r"\b[a-zA-Z][a-zA-Z0-9]*(?:_[a-zA-Z0-9]+)+\b"));
static EMPHASIS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:importantly|important|however|critical|critically|crucial|essential|must|never|always|required|caution|note that|make sure|be sure|ensure|do not|don't|cannot|breaking)\b",
    )
});
static NUM_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b\d+(?:\.\d+)?(?:%|\s?(?:ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|ns|us|[KMGT]i?B|[kmgt]b|bytes?|px|em|rem|pt|lines?|files?|tokens?|chars?|characters?|requests?|rps|qps|times|x|k|K|M|percent|[kMG]?Hz|cores?|threads?|rows?|items?|tests?|errors?|users?|messages?|steps?|calls?|retries|attempts?|USD|EUR|dollars?)\b)",
    )
});
static VOWELLESS: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b[bcdfghjklmnpqrstvwxzBCDFGHJKLMNPQRSTVWXZ]{3,}\b"));
static STATUS: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b(?:PASS(?:ED)?|FAIL(?:ED|URE)?|ERROR|WARN(?:ING)?)\b"));
static GREP_REF: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:[A-Za-z0-9_-]+[./])+[A-Za-z0-9_-]+:\d+:"));
static FILLER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^[\s*_>#-]*(?:great|sure|ok|okay|thanks|thank you|got it|alright|all right|of course|absolutely|certainly|no problem|perfect|awesome|cool|nice|hi|hello|hey|understood|sounds good|you're welcome)\b",
    )
});
static URL: LazyLock<Regex> = LazyLock::new(|| re(r#"https?://[^\s<>"'`\])]+"#));
static PATH: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:~|\.{1,2})?/?[A-Za-z0-9_@.-]+(?:/[A-Za-z0-9_@.-]+)+/?"));
static FILE_NAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b[A-Za-z0-9_-]+\.(?:rs|ts|tsx|js|jsx|mjs|py|go|java|c|h|cc|cpp|hpp|md|json|toml|yaml|yml|txt|sh|html|css|scss|sql|rb|php|cs|swift|kt|lock|cfg|ini|xml|csv|log|env|vue|svelte)\b",
    )
});
static VERSION: LazyLock<Regex> =
    LazyLock::new(|| re(r"\bv?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.]+)?\b|\bv\d+\.\d+\b"));
static PROPER: LazyLock<Regex> = LazyLock::new(|| re(r"\b[A-Z][a-z]{2,}\b"));
static CODE: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b[A-Z][A-Z0-9]*[0-9][A-Z0-9]*\b|\b[A-Z]{2,5}\b"));
static DATE: LazyLock<Regex> = LazyLock::new(|| re(r"\b\d{4}-\d{2}-\d{2}\b"));
static FILE_LINE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:[A-Za-z0-9_-]+[./])+[A-Za-z0-9_-]+:\d+"));
static BULLET: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(?:[-*+•]|\d+[.)])\s"));
static KEY_VALUE: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*[A-Za-z0-9_ .-]{1,40}:\s+\S"));
static STATUS_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:pass(?:ed)?|fail(?:ed|ure|ures)?|error|errors|warn(?:ing)?|ok|panicked|exception)\b",
    )
});

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

/// Words that end in a period without ending a sentence.
const ABBREVIATIONS: &[&str] = &[
    "e.g", "i.e", "etc", "vs", "cf", "al", "approx", "fig", "dr", "mr", "mrs", "ms", "prof", "sr",
    "jr", "st", "inc", "ltd", "co", "corp", "dept", "est", "ca", "pp", "vol", "eq", "incl", "esp",
    "misc", "u.s", "a.m", "p.m", "ph.d", "no", "nos", "resp", "viz", "mt", "ave",
];

/// One sentence of a text, with where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sentence<'a> {
    /// The sentence, trimmed.
    pub text: &'a str,
    /// Byte offset of the sentence in the whole text.
    pub start: usize,
    /// Index of its paragraph.
    pub paragraph: usize,
}

/// Split a text into paragraphs at blank lines. Returns (byte offset, paragraph)
/// pairs; paragraphs are trimmed and never empty.
pub fn split_paragraphs(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let blank = line.trim().is_empty();
        if blank {
            if let Some(s) = start.take() {
                push_trimmed(&mut out, text, s, end);
            }
        } else {
            if start.is_none() {
                start = Some(pos);
            }
            end = pos + line.len();
        }
        pos += line.len();
    }
    if let Some(s) = start {
        push_trimmed(&mut out, text, s, end);
    }
    out
}

fn push_trimmed<'a>(out: &mut Vec<(usize, &'a str)>, text: &'a str, s: usize, e: usize) {
    if let Some(raw) = text.get(s..e) {
        let lead = raw.len() - raw.trim_start().len();
        let t = raw.trim();
        if !t.is_empty() {
            out.push((s + lead, t));
        }
    }
}

/// True when the period at byte `dot` of `p` ends an abbreviation, an initial or
/// a list number rather than a sentence.
fn non_terminal_period(p: &str, dot: usize) -> bool {
    let before = p.get(..dot).unwrap_or("");
    let tok_start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || *c == '.')
        .last()
        .map_or(dot, |(i, _)| i);
    let token = before
        .get(tok_start..)
        .unwrap_or("")
        .trim_start_matches('.');
    if token.is_empty() {
        return false;
    }
    let lower = token.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return true;
    }
    let mut chars = token.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && c.is_alphabetic()
    {
        return true;
    }
    if token.len() <= 2 && token.bytes().all(|b| b.is_ascii_digit()) {
        // "1. First item" at the start of a line is a list marker.
        let line_start = before.get(..tok_start).unwrap_or("");
        let line_prefix = line_start.rsplit('\n').next().unwrap_or("");
        return line_prefix.trim().is_empty();
    }
    false
}

/// True when the text after a newline starts a list item or heading.
fn starts_item(rest: &str) -> bool {
    let t = rest.trim_start_matches([' ', '\t']);
    if t.starts_with('#') || t.starts_with('|') || t.starts_with('>') {
        return true;
    }
    BULLET.is_match(t)
}

/// Split one paragraph into sentences. A sentence ends at `.`, `!` or `?`
/// (plus closing quotes and brackets) followed by whitespace, except after an
/// abbreviation (`e.g.`), an initial or a list number; dotted identifiers,
/// paths, versions, URLs and decimals never end one since no whitespace
/// follows their dots. A line that starts a list item or heading also starts a
/// new sentence. Returns (byte offset, sentence) pairs, trimmed, non-empty.
pub fn split_sentences(p: &str) -> Vec<(usize, &str)> {
    let cs: Vec<(usize, char)> = p.char_indices().collect();
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut k = 0usize;
    while let Some(&(b, c)) = cs.get(k) {
        if matches!(c, '.' | '!' | '?') {
            let mut e = k + 1;
            while let Some(&(_, n)) = cs.get(e) {
                if matches!(
                    n,
                    '.' | '!' | '?' | '"' | '\'' | ')' | ']' | '”' | '’' | '*' | '_' | '`'
                ) {
                    e += 1;
                } else {
                    break;
                }
            }
            let next = cs.get(e);
            if next.is_some_and(|(_, n)| !n.is_whitespace()) {
                k = e;
                continue;
            }
            if c == '.' && e == k + 1 && non_terminal_period(p, b) {
                k = e;
                continue;
            }
            let end = next.map_or(p.len(), |(i, _)| *i);
            push_trimmed(&mut out, p, start, end);
            start = end;
            k = e;
            continue;
        }
        if c == '\n' && starts_item(p.get(b + 1..).unwrap_or("")) {
            push_trimmed(&mut out, p, start, b);
            start = b + 1;
        }
        k += 1;
    }
    push_trimmed(&mut out, p, start, p.len());
    out
}

/// Paragraphs, then sentences, of a whole text.
pub fn sentences(text: &str) -> Vec<Sentence<'_>> {
    let mut out = Vec::new();
    for (pi, (poff, p)) in split_paragraphs(text).into_iter().enumerate() {
        for (soff, s) in split_sentences(p) {
            out.push(Sentence {
                text: s,
                start: poff + soff,
                paragraph: pi,
            });
        }
    }
    out
}

/// Score a sentence by the weights of spec 000: +3 per camelCase, PascalCase
/// and snake_case identifier, +4 for an emphasis phrase, +2 per number with a
/// unit, +2 per vowelless abbreviation, +3 per status word, +2 per grep-style
/// `file:line:` reference, +2 for a length of 40 to 120 characters, and -10 when
/// it starts with a filler word.
pub fn score_sentence(s: &str) -> i32 {
    let n = |r: &Regex| i32::try_from(r.find_iter(s).count()).unwrap_or(i32::MAX / 64);
    let mut score = 3 * n(&CAMEL) + 3 * n(&PASCAL) + 3 * n(&SNAKE);
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
pub fn score_all(text: &str) -> Vec<Scored<'_>> {
    let mut v: Vec<Scored<'_>> = sentences(text)
        .into_iter()
        .map(|s| Scored {
            sentence: s,
            score: score_sentence(s.text),
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

fn chars(s: &str) -> usize {
    s.chars().count()
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

/// True when the text before a word ends where a sentence or line begins.
fn at_sentence_start(before: &str) -> bool {
    let t = before.trim_end_matches([' ', '\t', '*', '_', '-', '>', '#']);
    t.is_empty() || t.ends_with(['.', '!', '?', '\n', ':'])
}

fn is_status_word(s: &str) -> bool {
    STATUS.find(s).is_some_and(|m| m.len() == s.len())
}

fn plausible_path(p: &str) -> bool {
    let p = p.trim_end_matches(['.', ',', ':', ';']);
    if p.starts_with('/') || p.starts_with("./") || p.starts_with("../") || p.starts_with("~/") {
        return p.len() > 2;
    }
    let last = p.rsplit('/').next().unwrap_or("");
    let has_ext = last
        .rsplit_once('.')
        .is_some_and(|(a, e)| !a.is_empty() && (1..=6).contains(&e.len()));
    let slashes = p.matches('/').count();
    // "and/or", "3/4", "I/O" are not paths.
    (has_ext
        && !p
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'/' || b == b'.'))
        || slashes >= 2
}

/// Key entities of a text, at most `max`, in priority order (paths and URLs,
/// then identifiers, versions, numbers with units, proper nouns, vowelless
/// abbreviations), each in order of appearance, without duplicates or pieces
/// of an entity already taken.
pub fn extract_entities(text: &str, max: usize) -> Vec<String> {
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
    let mut urls = found(&URL);
    let mut paths: Vec<(usize, usize)> = PATH
        .find_iter(text)
        .filter(|m| plausible_path(m.as_str()) && !m.as_str().contains("://"))
        .map(|m| (m.start(), m.end()))
        .collect();
    paths.extend(found(&FILE_NAME));
    paths.append(&mut urls);
    paths.sort();
    take(paths, &mut out);
    let mut ids = found(&CAMEL);
    ids.extend(found(&PASCAL));
    ids.extend(found(&SNAKE));
    ids.sort();
    take(ids, &mut out);
    let codes: Vec<(usize, usize)> = CODE
        .find_iter(text)
        .filter(|m| m.len() >= 3 && !is_status_word(m.as_str()))
        .map(|m| (m.start(), m.end()))
        .collect();
    take(codes, &mut out);
    take(found(&VERSION), &mut out);
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
            let label =
                after.starts_with(':') && at_sentence_start(text.get(..m.start()).unwrap_or(""));
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

/// True when a text looks like structured tool output (spec 000): 6 or more
/// non-empty lines, more than one newline per 80 characters, and more than half
/// of the lines structural (`file:line`, bullets, `key: value`, status words).
pub fn is_structured(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() < 6 {
        return false;
    }
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    if newlines * 80 <= text.len() {
        return false;
    }
    let structural = lines.iter().filter(|l| is_structural_line(l)).count();
    structural * 2 > lines.len()
}

fn is_structural_line(l: &str) -> bool {
    FILE_LINE.is_match(l) || BULLET.is_match(l) || KEY_VALUE.is_match(l) || STATUS_LINE.is_match(l)
}

/// Summary of structured tool output within `budget` characters: the line
/// count, the files involved, then status lines (errors and failures first,
/// then warnings, then other status lines), then other informative lines, each
/// kept in its original order.
pub fn summarize_structured(text: &str, budget: usize) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.trim().replace("**", ""))
        .filter(|l| !l.is_empty())
        .collect();
    let mut files: Vec<&str> = Vec::new();
    for l in &lines {
        let urls: Vec<regex::Match<'_>> = URL.find_iter(l).collect();
        let overlaps =
            |a: &regex::Match<'_>, b: &regex::Match<'_>| a.start() < b.end() && b.start() < a.end();
        let paths: Vec<regex::Match<'_>> = PATH
            .find_iter(l)
            .filter(|m| plausible_path(m.as_str()) && !urls.iter().any(|u| overlaps(u, m)))
            .collect();
        let names = FILE_NAME.find_iter(l).filter(|n| {
            !paths.iter().any(|m| overlaps(m, n)) && !urls.iter().any(|u| overlaps(u, n))
        });
        let mut found: Vec<regex::Match<'_>> = paths.iter().copied().chain(names).collect();
        found.sort_by_key(|m| m.start());
        for m in found {
            let f = m.as_str().trim_end_matches(['.', ',', ':', ';']);
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    let mut head = format!("{} lines", lines.len());
    if !files.is_empty() {
        let shown: Vec<&str> = files.iter().take(6).copied().collect();
        head.push_str("; files: ");
        head.push_str(&shown.join(", "));
        if files.len() > shown.len() {
            head.push_str(&format!(" (+{} more)", files.len() - shown.len()));
        }
    }
    let mut head = truncate_words(&head, budget);
    let rank = |l: &str| -> u8 {
        let u = l.to_ascii_uppercase();
        if u.contains("ERROR") || u.contains("FAIL") || u.contains("PANICKED") {
            0
        } else if u.contains("WARN") {
            1
        } else if STATUS_LINE.is_match(l) {
            2
        } else {
            3
        }
    };
    // Lines that carry more than a label ("Flights:") are worth keeping.
    let informative = |l: &str| {
        let t = l.trim_start_matches(|c: char| !c.is_alphanumeric());
        t.chars().count() >= 12 && !t.trim_end().ends_with(':')
    };
    let mut cands: Vec<(u8, usize, &str)> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (rank(l), i, l.as_str()))
        .filter(|(r, _, l)| !l.ends_with(':') && (*r < 3 || informative(l)))
        .collect();
    cands.sort();
    let mut seen = HashSet::new();
    let mut picked: Vec<(usize, String)> = Vec::new();
    let mut used = chars(&head);
    for (_, i, l) in cands {
        if !seen.insert(l) {
            continue;
        }
        let item = truncate_words(l, 120);
        let add = chars(&item) + 2;
        if used + add <= budget {
            used += add;
            picked.push((i, item));
        }
    }
    picked.sort();
    for (_, item) in picked {
        head.push_str("; ");
        head.push_str(&item);
    }
    head
}

/// A text split into code fences (verbatim) and the prose around them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSplit<'a> {
    /// Prose outside the fences, paragraphs joined by blank lines.
    pub prose: String,
    /// The fences, each from its opening to its closing marker inclusive.
    pub fences: Vec<&'a str>,
}

/// Separate code fences (``` or ~~~, an unclosed fence runs to the end) from
/// the prose around them.
pub fn split_code_and_prose(text: &str) -> CodeSplit<'_> {
    let mut prose_parts: Vec<&str> = Vec::new();
    let mut fences = Vec::new();
    let mut pos = 0usize;
    let mut prose_start = 0usize;
    let mut fence: Option<(usize, char, usize)> = None;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        let fence_char = t.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = fence_char.map_or(0, |f| t.chars().take_while(|&c| c == f).count());
        match (&fence, fence_char) {
            (None, Some(f)) if run >= 3 => {
                if let Some(p) = text.get(prose_start..pos) {
                    prose_parts.push(p);
                }
                fence = Some((pos, f, run));
            }
            (Some((start, open, open_run)), Some(f))
                if f == *open && run >= *open_run && t.chars().all(|c| c == f) =>
            {
                let end = pos + line.trim_end().len();
                if let Some(fenced) = text.get(*start..end) {
                    fences.push(fenced.trim_start());
                }
                fence = None;
                prose_start = pos + line.len();
            }
            _ => {}
        }
        pos += line.len();
    }
    match fence {
        Some((start, _, _)) => {
            if let Some(f) = text.get(start..) {
                fences.push(f.trim());
            }
        }
        None => {
            if let Some(p) = text.get(prose_start..) {
                prose_parts.push(p);
            }
        }
    }
    let prose = prose_parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    CodeSplit { prose, fences }
}

/// Render a code-split message from its prose summary and the fences:
/// `[summary: ...]` then each fence verbatim, separated by blank lines. No
/// entities are appended.
pub fn format_code_split(prose_summary: &str, fences: &[&str], id: Option<&str>) -> String {
    let mut out = format_summary(prose_summary, 1, &[], id);
    for f in fences {
        out.push_str("\n\n");
        out.push_str(f);
    }
    out
}

/// Code-split a message deterministically: summarize the prose within its
/// budget, keep the fences verbatim. `None` when there is no prose or fence,
/// or when the result is not strictly shorter than the input.
pub fn code_split(text: &str, budget: &Budget, id: Option<&str>) -> Option<String> {
    let split = split_code_and_prose(text);
    if split.prose.is_empty() || split.fences.is_empty() {
        return None;
    }
    let summary = summarize(&split.prose, budget.for_len(chars(&split.prose)));
    let out = format_code_split(&summary, &split.fences, id);
    (chars(&out) < chars(text)).then_some(out)
}

/// The summary format of spec 000:
/// `[summary: {text}{ (N messages merged)}{ | entities: a, b}]`, or
/// `[summary#{id}: ...]` when an id is embedded. The merge suffix appears when
/// `merged` is 2 or more.
pub fn format_summary(text: &str, merged: usize, entities: &[String], id: Option<&str>) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    match id {
        Some(id) => {
            out.push_str("[summary#");
            out.push_str(id);
            out.push_str(": ");
        }
        None => out.push_str("[summary: "),
    }
    out.push_str(text);
    if merged >= 2 {
        out.push_str(&format!(" ({merged} messages merged)"));
    }
    if !entities.is_empty() {
        out.push_str(" | entities: ");
        out.push_str(&entities.join(", "));
    }
    out.push(']');
    out
}

/// A stable summary id derived from the summarized text (`sum_` + 12 hex digits).
pub fn summary_id(original: &str) -> String {
    let h = ctxpress_core::archive::content_hash(original);
    format!("sum_{}", h.get(..12).unwrap_or(&h))
}

/// The bare deterministic summary of a text (no brackets): the structured
/// summarizer for structured tool output, sentence scoring otherwise.
pub fn summarize_text(text: &str, budget: &Budget) -> String {
    let b = budget.for_len(chars(text));
    if is_structured(text) {
        let s = summarize_structured(text, b);
        if chars(&s) < chars(text.trim()) {
            return s;
        }
        return text.trim().to_string();
    }
    summarize(text, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(t: &str) -> Vec<&str> {
        sentences(t).into_iter().map(|s| s.text).collect()
    }

    #[test]
    fn splitter_keeps_dotted_tokens_whole() {
        let t = "Call jwt.verify on req.user before routing. The handler lives in src/a.ts and \
                 needs v1.2.3 of the lib. It takes 3.5 s on average, e.g. for cold starts. \
                 See https://example.com/docs/a.b?x=1. Done!";
        assert_eq!(
            split(t),
            vec![
                "Call jwt.verify on req.user before routing.",
                "The handler lives in src/a.ts and needs v1.2.3 of the lib.",
                "It takes 3.5 s on average, e.g. for cold starts.",
                "See https://example.com/docs/a.b?x=1.",
                "Done!",
            ]
        );
    }

    #[test]
    fn splitter_abbreviations_initials_lists() {
        assert_eq!(
            split("Ask Dr. Smith, i.e. the owner, etc. Then J. R. Tolkien wrote it. Why? Because."),
            vec![
                "Ask Dr. Smith, i.e. the owner, etc. Then J. R. Tolkien wrote it.",
                "Why?",
                "Because."
            ]
        );
        assert_eq!(
            split("Steps:\n1. Build it.\n2. Test it\n- bullet one\n- bullet two"),
            vec![
                "Steps:",
                "1. Build it.",
                "2. Test it",
                "- bullet one",
                "- bullet two"
            ]
        );
        assert_eq!(
            split("He said \"stop.\" Then left.) Next"),
            vec!["He said \"stop.\"", "Then left.)", "Next"]
        );
    }

    #[test]
    fn paragraphs_and_offsets() {
        let t = "  First para. Two.\n\n \n Second para\ncontinues here.\n";
        let s = sentences(t);
        assert_eq!(s.len(), 3);
        for x in &s {
            assert_eq!(&t[x.start..x.start + x.text.len()], x.text);
        }
        assert_eq!(
            s.iter().map(|x| x.paragraph).collect::<Vec<_>>(),
            vec![0, 0, 1]
        );
        assert_eq!(s[2].text, "Second para\ncontinues here.");
    }

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

    #[test]
    fn structured_detection() {
        let grep = "src/a.rs:10: fn main\nsrc/a.rs:20: let x\nsrc/b.rs:3: use y\n\
                    src/b.rs:9: mod z\nsrc/c.rs:1: //!\nsrc/c.rs:2: //!\n";
        assert!(is_structured(grep));
        let prose = "one\ntwo\nthree\nfour\nfive\nsix\n";
        assert!(!is_structured(prose));
        assert!(!is_structured("src/a.rs:1: x\nsrc/a.rs:2: y\n"));
        let s = summarize_structured(grep, 200);
        assert_eq!(
            s,
            "6 lines; files: src/a.rs, src/b.rs, src/c.rs; src/a.rs:10: fn main; \
             src/a.rs:20: let x; src/b.rs:3: use y; src/b.rs:9: mod z; src/c.rs:1: //!; src/c.rs:2: //!"
        );
        // Errors first when the budget is tight, kept in original order.
        let out = "ok: a.rs\nok: b.rs\nok: c.rs\nERROR: d.rs broke\nok: e.rs\nWARN: f.rs slow\n";
        assert!(is_structured(out));
        assert_eq!(
            summarize_structured(out, 70),
            "6 lines; files: a.rs, b.rs, c.rs, d.rs, e.rs, f.rs; ERROR: d.rs broke"
        );
    }

    #[test]
    fn code_split_keeps_fences() {
        let t = "Here is the change you asked for, which replaces the loop with an iterator \
                 chain and removes the manual index bookkeeping entirely.\n\n```rust\nfn a() {}\n```\n\n\
                 After this, run cargo test again; the flaky test should now pass on every run we tried.";
        let sp = split_code_and_prose(t);
        assert_eq!(sp.fences, vec!["```rust\nfn a() {}\n```"]);
        assert!(sp.prose.starts_with("Here is the change") && sp.prose.contains("\n\nAfter this"));
        let out = code_split(t, &Budget::default(), None).unwrap();
        assert!(
            out.starts_with("[summary: ") && out.ends_with("]\n\n```rust\nfn a() {}\n```"),
            "{out}"
        );
        // Unclosed fences run to the end.
        let sp = split_code_and_prose("text\n```\ncode");
        assert_eq!(sp.fences, vec!["```\ncode"]);
        // Kept whole when the result would be longer.
        assert_eq!(
            code_split("Tiny.\n```\nx\n```", &Budget::default(), None),
            None
        );
    }

    #[test]
    fn formats() {
        let e = vec!["a".to_string(), "b".to_string()];
        assert_eq!(format_summary("t", 1, &[], None), "[summary: t]");
        assert_eq!(
            format_summary("t", 3, &e, None),
            "[summary: t (3 messages merged) | entities: a, b]"
        );
        assert_eq!(
            format_summary("t", 1, &e, Some("sum_1")),
            "[summary#sum_1: t | entities: a, b]"
        );
        assert_eq!(
            format_code_split("p", &["```\nx\n```"], None),
            "[summary: p]\n\n```\nx\n```"
        );
        assert_eq!(summary_id("x"), summary_id("x"));
        assert_ne!(summary_id("x"), summary_id("y"));
        assert_eq!(summary_id("x").len(), 16);
    }
}
