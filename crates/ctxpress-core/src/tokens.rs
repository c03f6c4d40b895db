//! Token counting: a fast heuristic and exact BPE counts for OpenAI encodings
//! (the latter with the `bpe` feature, which the `ctxpress` facade turns on),
//! and what of a request is counted: everything a provider sends the model.
//!
//! - A message ([`count_message`]): its text, tool calls and tool results,
//!   and every other string it carries, in the message or in a content
//!   block (`reasoning_content`, `refusal`, Anthropic `thinking` and
//!   `redacted_thinking` blocks, ...), except the bookkeeping fields listed
//!   in [`BOOKKEEPING`] (`id`, `role`, `name`, `tool_call_id`, `type`,
//!   `signature`, `cache_control`, ...); plus [`MESSAGE_OVERHEAD`]. Members
//!   that are objects or arrays are not descended into (images, audio, a
//!   block's `source`), but for the tool calls and results.
//! - Outside the messages ([`fixed_tokens`]): an Anthropic request's
//!   top-level `system` and the tool definitions (`tools`, legacy
//!   `functions`) as JSON text. `window::fit` counts them against the
//!   limits and `ctxpress stats` adds them, through this one function.
//!
//! Counters: [`Heuristic`], and `Bpe` (`o200k_base`, `cl100k_base`,
//! vocabularies embedded) only with core's feature `bpe`, off by default so
//! strategy crates do not compile the vocabularies, on in the facade and in
//! core's own tests. [`TokenCounter::retained_bytes`] is the heap a counter
//! grows (the BPE memo), which a session counts against its memory budget.
//! [`counter_by_name`] / [`counter_named`] look one up, the latter with the
//! error the CLI and Python show (without `bpe`, a BPE name's error says it is
//! not compiled in).

use crate::conversation::Conversation;
use crate::message::{Message, Role, content_text, get_small, vget};
use serde_json::Value;
use std::sync::Arc;

/// Counts tokens of a text.
pub trait TokenCounter: Send + Sync {
    /// Name, e.g. `heuristic` or `o200k_base`.
    fn name(&self) -> &str;
    /// Tokens in `text`.
    fn count(&self, text: &str) -> usize;
    /// Heap bytes this counter holds besides its fixed tables: a memo of
    /// counts it grows while counting (estimated; what a memory budget over
    /// many counters accounts). 0 by default.
    fn retained_bytes(&self) -> usize {
        0
    }
}

/// A fast estimate of `o200k_base` counts that errs high: one pass over the
/// bytes, eight at a time (SWAR bit masks, byte-lane counters), counting byte
/// classes and the boundaries between them, weighed by calibrated weights
/// (`WEIGHTS`).
///
/// The classes follow the `o200k_base` pre-tokenizer: ASCII letters (with
/// lower-to-upper case changes), digits, punctuation runs (one punctuation
/// byte joins the word after it), white space and newline runs, and UTF-8
/// characters by width (two-byte scripts, three-byte CJK and symbols,
/// four-byte emoji). No allocation, no table, no `unsafe`; never zero for
/// non-empty text; about 1.5 GB/s.
///
/// Measured against `Bpe` `o200k_base` with [`count_message`] per
/// conversation of the corpus (`examples/calibrate_heuristic.rs`): never
/// below 1.009x, median 1.06x-1.13x per corpus file, at most 1.33x (the
/// former four-bytes-a-token rule: 0.63x-1.32x, 18% low on the agent
/// sessions' median). On generated texts of kinds the corpus lacks (CJK,
/// Cyrillic, Arabic, emoji, base64, digit runs, minified JSON, indented code)
/// 1.01x-1.30x; hex and UUIDs about 1.47x. The tests hold it to at least
/// 0.98x on every corpus conversation and on those texts. A single short
/// text can still be low (rare words and characters cost more tokens than
/// their classes say): use `Bpe` (feature `bpe`) for exact figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Heuristic;

impl TokenCounter for Heuristic {
    fn name(&self) -> &str {
        "heuristic"
    }
    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        let f = byte_features(text.as_bytes());
        let est: f64 = f.iter().zip(WEIGHTS).map(|(&n, w)| n as f64 * w).sum();
        // `as` saturates: a negative estimate becomes 0, then 1.
        (est.round() as usize).max(1)
    }
}

/// Number of byte features [`Heuristic`] counts.
const FEATURES: usize = 21;

/// Tokens per occurrence of each byte feature [`Heuristic`] counts, in the
/// order `word_features` lists them. Fitted by linear programming (smallest
/// mean ratio to `o200k_base`, each corpus file and the generated texts
/// weighing alike, such that no conversation of the corpus and no generated
/// text of another kind is below 1.01x; weights bounded below by -3); the
/// negative weights are corrections (a letter right after one punctuation
/// byte shares its token).
const WEIGHTS: [f64; FEATURES] = [
    -0.0183, // ASCII letters
    2.7445,  // letter runs
    1.5367,  // lower-to-upper case changes
    0.3361,  // digits
    1.5848,  // digit runs
    2.2106,  // punctuation runs (ASCII other than letters, digits, white space)
    0.0247,  // white space bytes (space, \t, \n, \v, \f, \r)
    -1.5446, // white space runs
    1.0726,  // newline runs
    0.2246,  // two-byte UTF-8 characters
    0.8505,  // three-byte UTF-8 characters
    1.6942,  // four-byte UTF-8 characters
    1.9459,  // runs of non-ASCII bytes
    -1.3103, // letters right after punctuation
    1.3064,  // digit runs right after white space
    -1.604,  // punctuation right after a letter or digit
    -2.9709, // letter runs right after a digit
    1.304,   // digits right after a letter
    -3.0,    // letter runs right after a non-ASCII byte
    -0.9713, // three-byte characters U+2000-U+2FFF (symbols, arrows, boxes)
    -0.1864, // three-byte characters U+4000-U+9FFF (CJK ideographs)
];

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Bit 7 of each byte of `x7` (every byte below 0x80) where the byte is `>= c`.
#[inline(always)]
const fn at_least(x7: u64, c: u8) -> u64 {
    (x7 + (0x80 - c as u64) * ONES) & HIGH
}

/// Bit 7 of each byte of `x7` (every byte below 0x80) where the byte is `c`.
#[inline(always)]
const fn equal(x7: u64, c: u8) -> u64 {
    !at_least(x7 ^ (c as u64 * ONES), 1) & HIGH
}

/// `m` moved one byte later, the previous word's mask `carry` filling in.
#[inline(always)]
const fn before(m: u64, carry: u64) -> u64 {
    (m << 8) | (carry >> 56)
}

/// Class masks of the previous word (bit 7 of each byte).
#[derive(Default, Clone, Copy)]
struct Carry {
    letter: u64,
    lower: u64,
    digit: u64,
    punct: u64,
    ws: u64,
    nl: u64,
    high: u64,
}

/// One in each byte lane where `m` has bit 7 set.
#[inline(always)]
const fn ones(m: u64) -> u64 {
    m >> 7
}

/// Sum of the eight byte lanes of `v`.
#[inline(always)]
const fn lane_sum(v: u64) -> u64 {
    const EVEN: u64 = 0x00ff_00ff_00ff_00ff;
    let pairs = (v & EVEN) + ((v >> 8) & EVEN);
    pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48
}

/// Adds the features of the eight bytes `x` (little endian; `valid` marks the
/// bytes that belong to the text) to `f`, one count per byte lane (each lane
/// grows by at most one a call).
#[inline(always)]
fn word_features(x: u64, valid: u64, c: &mut Carry, f: &mut [u64; FEATURES]) {
    let high = x & HIGH & valid;
    let ascii = !x & HIGH & valid;
    let x7 = x & !HIGH;
    let folded = x7 | (0x20 * ONES);
    let letter = at_least(folded, b'a') & !at_least(folded, b'z' + 1) & ascii;
    let b5 = (x << 2) & HIGH;
    let lower = letter & b5;
    let digit = at_least(x7, b'0') & !at_least(x7, b'9' + 1) & ascii;
    let ws = ((at_least(x7, 0x09) & !at_least(x7, 0x0e)) | equal(x7, b' ')) & ascii;
    let nl = equal(x7, b'\n') & ascii;
    let punct = ascii & !(letter | digit | ws);
    let letter_start = letter & !before(letter, c.letter);
    let digit_start = digit & !before(digit, c.digit);
    let prev_punct = before(punct, c.punct);
    f[0] += ones(letter);
    f[1] += ones(letter_start);
    f[2] += ones(letter & !b5 & before(lower, c.lower));
    f[3] += ones(digit);
    f[4] += ones(digit_start);
    f[5] += ones(punct & !prev_punct);
    f[6] += ones(ws);
    f[7] += ones(ws & !before(ws, c.ws));
    f[8] += ones(nl & !before(nl, c.nl));
    f[13] += ones(letter & prev_punct);
    f[14] += ones(digit_start & before(ws, c.ws));
    f[15] += ones(punct & before(letter | digit, c.letter | c.digit));
    f[16] += ones(letter_start & before(digit, c.digit));
    f[17] += ones(digit & before(letter, c.letter));
    if (high | c.high) != 0 {
        let lead = high & (x << 1);
        let b4 = (x << 3) & HIGH;
        let lead3 = lead & b5 & !b4;
        f[9] += ones(lead & !b5);
        f[10] += ones(lead3);
        f[11] += ones(lead & b5 & b4);
        f[12] += ones(high & !before(high, c.high));
        f[18] += ones(letter_start & before(high, c.high));
        f[19] += ones(lead3 & equal(x7, 0x62));
        f[20] += ones(lead3 & at_least(x7, 0x64) & !at_least(x7, 0x6a));
    }
    *c = Carry {
        letter,
        lower,
        digit,
        punct,
        ws,
        nl,
        high,
    };
}

/// The byte features [`Heuristic`] weighs, in `WEIGHTS` order.
fn byte_features(bytes: &[u8]) -> [u64; FEATURES] {
    let mut f = [0u64; FEATURES];
    let mut carry = Carry::default();
    // Byte-lane counters hold up to 255: add them up every 255 words.
    for block in bytes.chunks(8 * 255) {
        let mut lanes = [0u64; FEATURES];
        let mut words = block.chunks_exact(8);
        for w in &mut words {
            let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            word_features(x, !0, &mut carry, &mut lanes);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            let valid = (1u64 << (8 * rest.len())) - 1;
            word_features(u64::from_le_bytes(last), valid, &mut carry, &mut lanes);
        }
        for (n, v) in f.iter_mut().zip(lanes) {
            *n += lane_sum(v);
        }
    }
    f
}

/// Exact BPE counts with an embedded vocabulary (no download at run time).
/// Only with the `bpe` feature.
#[cfg(feature = "bpe")]
pub struct Bpe {
    name: &'static str,
    enc: &'static tiktoken::CoreBpe,
    /// Counts of texts of [`MEMO_MIN`] bytes or more by content hash: a
    /// budget search counts the same messages in every run it makes.
    memo: std::sync::Mutex<std::collections::HashMap<u128, usize>>,
}

/// Texts shorter than this are counted afresh (cheaper than hashing).
#[cfg(feature = "bpe")]
const MEMO_MIN: usize = 256;
/// Entries kept before the memo starts over.
#[cfg(feature = "bpe")]
const MEMO_MAX: usize = 1 << 16;

#[cfg(feature = "bpe")]
impl Bpe {
    /// `o200k_base` (GPT-4o and later) or `cl100k_base` (GPT-4, GPT-3.5).
    pub fn new(encoding: &str) -> Option<Self> {
        let name = match encoding {
            "o200k_base" => "o200k_base",
            "cl100k_base" => "cl100k_base",
            _ => return None,
        };
        tiktoken::get_encoding(name).map(|enc| Bpe {
            name,
            enc,
            memo: Default::default(),
        })
    }
}

#[cfg(feature = "bpe")]
impl TokenCounter for Bpe {
    fn name(&self) -> &str {
        self.name
    }
    fn count(&self, text: &str) -> usize {
        if text.len() < MEMO_MIN {
            return self.enc.count(text);
        }
        let key = xxhash_rust::xxh3::xxh3_128(text.as_bytes());
        if let Some(n) = self.memo.lock().ok().and_then(|m| m.get(&key).copied()) {
            return n;
        }
        let n = self.enc.count(text);
        if let Ok(mut m) = self.memo.lock() {
            if m.len() >= MEMO_MAX {
                m.clear();
            }
            m.insert(key, n);
        }
        n
    }
    /// The memo: a key, a count and a control byte per slot (hashbrown),
    /// as allocated (clearing it keeps its slots).
    fn retained_bytes(&self) -> usize {
        self.memo
            .lock()
            .map_or(0, |m| m.capacity() * (size_of::<(u128, usize)>() + 1))
    }
}

/// A counter by name: `heuristic`, or with the `bpe` feature `o200k_base`
/// or `cl100k_base`.
pub fn counter_by_name(name: &str) -> Option<Arc<dyn TokenCounter>> {
    match name {
        "heuristic" => Some(Arc::new(Heuristic)),
        #[cfg(feature = "bpe")]
        other => Bpe::new(other).map(|b| Arc::new(b) as Arc<dyn TokenCounter>),
        #[cfg(not(feature = "bpe"))]
        _ => None,
    }
}

/// The names of the counters: [`counter_by_name`] knows them all when the
/// `bpe` feature is on, only `heuristic` without it.
pub const COUNTERS: &[&str] = &["heuristic", "o200k_base", "cl100k_base"];

/// The exact BPE counters' names (feature `bpe`).
pub const BPE_COUNTERS: &[&str] = &["o200k_base", "cl100k_base"];

/// True when this build has the exact BPE counters (feature `bpe`).
pub const BPE_COMPILED: bool = cfg!(feature = "bpe");

/// [`counter_by_name`], or an error that names the known counters, or says
/// that a BPE counter is not compiled into this build.
pub fn counter_named(name: &str) -> Result<Arc<dyn TokenCounter>, crate::ConfigError> {
    counter_by_name(name).ok_or_else(|| {
        crate::ConfigError::Invalid(if BPE_COUNTERS.contains(&name) {
            format!(
                "counter `{name}` is not compiled in: build ctxpress-core with the `bpe` \
                 feature (the `ctxpress` crate turns it on), or use `heuristic`"
            )
        } else {
            format!("unknown counter `{name}` ({})", COUNTERS.join(", "))
        })
    })
}

/// Per-message framing tokens a provider adds (role markers).
pub const MESSAGE_OVERHEAD: usize = 4;

/// Fields of a message or of a content block that are bookkeeping, never
/// counted: ids, the role (in [`MESSAGE_OVERHEAD`]), a participant's or tool
/// result's `name`, block types, thinking signatures, cache markers and
/// timestamps.
pub const BOOKKEEPING: &[&str] = &[
    "id",
    "role",
    "name",
    "tool_call_id",
    "tool_use_id",
    "type",
    "signature",
    "cache_control",
    "timestamp",
    "created_at",
];

fn bookkeeping(key: &str) -> bool {
    BOOKKEEPING.contains(&key)
}

/// Tokens of one message as a provider counts them, plus framing
/// ([`MESSAGE_OVERHEAD`]):
///
/// - `content`: its text (a string, or the text parts joined by newlines,
///   as [`Message::text`]), Anthropic `tool_use` blocks (name and `input` as
///   JSON text) and `tool_result` blocks (their text; a `tool`/`function`
///   message's result is its content, counted once), and of every other
///   block (`thinking`, `redacted_thinking`, `refusal`, `document`, ...)
///   each string member but [`BOOKKEEPING`] (`thinking`, `data`, `refusal`,
///   `title`, ...);
/// - OpenAI `tool_calls` (each function's name and arguments) and the legacy
///   `function_call` (name and arguments);
/// - every other string field but [`BOOKKEEPING`]: `reasoning_content`,
///   `reasoning`, `refusal`, and fields this list does not know (counted:
///   a budget errs high rather than low).
///
/// Not counted: members that are objects or arrays other than those above
/// (images, audio, `citations`, a block's `source`), numbers and booleans.
pub fn count_message(counter: &dyn TokenCounter, m: &Message) -> usize {
    let mut n = MESSAGE_OVERHEAD;
    for (k, v) in m.fields() {
        match (k.as_str(), v) {
            ("content", c) => n += content_tokens(counter, c, m),
            ("tool_calls", Value::Array(calls)) => {
                for c in calls {
                    if let Some(f) = vget(c, "function") {
                        n += function_tokens(counter, f);
                    }
                }
            }
            ("function_call", f) => n += function_tokens(counter, f),
            (k, Value::String(s)) if !bookkeeping(k) => n += counter.count(s),
            _ => {}
        }
    }
    n
}

/// Name and arguments of an OpenAI function call (arguments that are not a
/// string as JSON text).
fn function_tokens(counter: &dyn TokenCounter, f: &Value) -> usize {
    let name = vget(f, "name").and_then(Value::as_str).unwrap_or("");
    let args = match vget(f, "arguments") {
        Some(Value::String(s)) => counter.count(s),
        Some(v) => counter.count(&v.to_string()),
        None => 0,
    };
    counter.count(name) + args
}

/// Tokens of a message's `content` (see [`count_message`]).
fn content_tokens(counter: &dyn TokenCounter, c: &Value, m: &Message) -> usize {
    let mut n = counter.count(&content_text(c));
    let Value::Array(blocks) = c else {
        return n;
    };
    for b in blocks {
        let Value::Object(fields) = b else { continue };
        match get_small(fields, "type").and_then(Value::as_str) {
            // In the text.
            None | Some("text" | "input_text" | "output_text") => {}
            Some("tool_use") => {
                let name = get_small(fields, "name").and_then(Value::as_str);
                let input = get_small(fields, "input").map(Value::to_string);
                n += counter.count(name.unwrap_or("")) + counter.count(&input.unwrap_or_default());
            }
            Some("tool_result") => {
                if !matches!(m.role_ref(), Role::Tool | Role::Function) {
                    n +=
                        get_small(fields, "content").map_or(0, |c| counter.count(&content_text(c)));
                }
            }
            Some(_) => {
                for (k, v) in fields {
                    if let Value::String(s) = v
                        && !bookkeeping(k)
                    {
                        n += counter.count(s);
                    }
                }
            }
        }
    }
    n
}

/// Tokens a request sends outside its messages, which no stage can shrink:
/// an Anthropic request's top-level `system` and the tool definitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FixedTokens {
    /// The top-level `system` (a string, or text blocks), counted as a
    /// system message would be; 0 without one.
    pub system: usize,
    /// The top-level `tools` (OpenAI `{type, function: {name, description,
    /// parameters}}`, Anthropic `{name, description, input_schema}`) and the
    /// legacy `functions`: their JSON text, written compactly (what
    /// providers bill for them is close to it); 0 without any.
    pub tools: usize,
}

impl FixedTokens {
    /// Both together.
    pub fn total(self) -> usize {
        self.system + self.tools
    }
}

/// The [`FixedTokens`] of `conv` (0 for a bare array of messages): what
/// `window::fit` counts against the limits beside the messages and what
/// `ctxpress stats` adds to them.
pub fn fixed_tokens(conv: &Conversation, counter: &dyn TokenCounter) -> FixedTokens {
    let fields = &conv.envelope.fields;
    if fields.is_empty() {
        return FixedTokens::default();
    }
    let system = match fields.get("system") {
        Some(Value::String(s)) => MESSAGE_OVERHEAD + counter.count(s),
        Some(Value::Array(blocks)) => {
            MESSAGE_OVERHEAD
                + blocks
                    .iter()
                    .filter_map(|b| vget(b, "text").and_then(Value::as_str))
                    .map(|t| counter.count(t))
                    .sum::<usize>()
        }
        _ => 0,
    };
    let tools = ["tools", "functions"]
        .iter()
        .filter_map(|k| match fields.get(*k) {
            Some(v @ Value::Array(a)) if !a.is_empty() => Some(counter.count(&v.to_string())),
            _ => None,
        })
        .sum();
    FixedTokens { system, tools }
}

#[cfg(test)]
// Core's tests get `bpe` from its dev-dependency on itself; without it the
// samples only the exact comparisons use lie idle.
#[cfg_attr(not(feature = "bpe"), allow(dead_code))]
mod tests {
    use super::*;

    #[test]
    fn counter_named_knows_every_name() {
        assert_eq!(counter_named("heuristic").unwrap().name(), "heuristic");
        let e = counter_named("o200").err().unwrap().to_string();
        assert!(
            e.contains("unknown counter `o200`") && e.contains("o200k_base"),
            "{e}"
        );
        for n in BPE_COUNTERS {
            match counter_named(n) {
                Ok(c) => assert!(BPE_COMPILED && c.name() == *n),
                Err(e) => assert!(
                    !BPE_COMPILED && e.to_string().contains("not compiled in"),
                    "{e}"
                ),
            }
        }
    }

    #[cfg(feature = "bpe")]
    #[test]
    fn bpe_memo_gives_the_same_counts() {
        let o = Bpe::new("o200k_base").unwrap();
        let long = "fn main() { println!(\"hello\"); }\n".repeat(40);
        let first = o.count(&long);
        assert_eq!(o.count(&long), first, "memoized count");
        assert_eq!(first, o.enc.count(&long));
        assert_eq!(o.memo.lock().unwrap().len(), 1);
        assert_eq!(o.count("short"), 1);
        assert_eq!(o.memo.lock().unwrap().len(), 1, "short texts are not kept");
        let one = o.retained_bytes();
        assert!(one >= size_of::<(u128, usize)>(), "{one}");
        for i in 0..1000 {
            o.count(&format!("{i} {long}"));
        }
        assert!(o.retained_bytes() >= 1001 * size_of::<(u128, usize)>());
        assert_eq!(Heuristic.retained_bytes(), 0);
    }

    #[cfg(feature = "bpe")]
    #[test]
    fn bpe_counts_match_known_values() {
        let o = Bpe::new("o200k_base").unwrap();
        assert_eq!(o.count("hello world"), 2);
        let c = Bpe::new("cl100k_base").unwrap();
        assert_eq!(c.count("hello world"), 2);
        assert!(Bpe::new("nope").is_none());
    }

    /// Deterministic pseudo-random numbers (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn base64(bytes: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in bytes.chunks(3) {
            let n = c
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= c.len() {
                    out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    const PROSE: &str = "The committee met on Tuesday to review the budget for the coming year. Most members agreed that the library needed new shelves, better lighting and a quieter reading room, but they could not agree on how to pay for it. One proposal was to raise the membership fee slightly; another was to ask local businesses for donations. After a long discussion, they decided to publish both options and let the members vote at the next general meeting. In the meantime, the treasurer will prepare a detailed estimate of the costs, including installation and maintenance over five years.\n";
    const RUST: &str = "impl<T: Clone + Send> Cache<T> {\n    /// Returns the cached value for `key`, computing it with `f` on a miss.\n    pub fn get_or_insert_with<F>(&mut self, key: &str, f: F) -> Result<&T, CacheError>\n    where\n        F: FnOnce() -> Result<T, CacheError>,\n    {\n        if !self.map.contains_key(key) {\n            let value = f()?;\n            self.map.insert(key.to_string(), Entry { value, hits: 0 });\n        }\n        let entry = self.map.get_mut(key).ok_or(CacheError::Missing)?;\n        entry.hits += 1;\n        Ok(&entry.value)\n    }\n}\n";
    const PYTHON: &str = "def load_records(path: str, limit: int = 100) -> list[dict]:\n    \"\"\"Read at most `limit` JSON records from `path`.\"\"\"\n    records = []\n    with open(path, encoding=\"utf-8\") as fh:\n        for i, line in enumerate(fh):\n            if i >= limit:\n                break\n            try:\n                records.append(json.loads(line))\n            except json.JSONDecodeError as exc:\n                logger.warning(\"line %d: %s\", i + 1, exc)\n    return records\n";
    const CHINESE: &str = "我们今天讨论了明年的预算。大多数成员同意图书馆需要新的书架、更好的照明和一个更安静的阅览室，但是他们无法就如何支付这些费用达成一致。一个建议是稍微提高会员费，另一个建议是请当地企业捐款。经过长时间的讨论，他们决定公布这两个方案，让会员在下次大会上投票。\n";
    const JAPANESE: &str = "委員会は火曜日に集まり、来年の予算を検討しました。ほとんどのメンバーは、図書館に新しい本棚とより良い照明が必要だと考えていますが、費用の払い方については意見が分かれました。\n";
    const RUSSIAN: &str = "Комитет собрался во вторник, чтобы обсудить бюджет на следующий год. Большинство участников согласились, что библиотеке нужны новые полки, лучшее освещение и тихий читальный зал, но не смогли договориться о том, как за это платить.\n";
    const ARABIC: &str = "اجتمعت اللجنة يوم الثلاثاء لمراجعة ميزانية العام المقبل. اتفق معظم الأعضاء على أن المكتبة تحتاج إلى رفوف جديدة وإضاءة أفضل وقاعة قراءة أكثر هدوءا، لكنهم لم يتفقوا على طريقة الدفع.\n";
    const EMOJI: &str = "Great job team 🎉🎉 the release is out 🚀! Tests ✅ passed, docs 📚 updated, bugs 🐛 fixed. Thanks 🙏😊👍 see you 👋 tomorrow ☕️🍩\n";

    /// Texts of kinds the corpus has little of, generated or written here.
    fn samples() -> Vec<(&'static str, String)> {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut random_bytes = |n: usize| (0..n).map(|_| r.next() as u8).collect::<Vec<u8>>();
        let b64 = base64(&random_bytes(3000));
        let hex: Vec<String> = (0..40)
            .map(|_| {
                random_bytes(32)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect();
        let mut r = Rng(42);
        let digits: String = (0..3000)
            .map(|_| char::from(b'0' + r.below(10) as u8))
            .collect();
        let numbers: Vec<String> = (0..600)
            .map(|_| {
                let width = 1 + r.below(11) as u32;
                r.below(10u64.pow(width)).to_string()
            })
            .collect();
        let names = ["alice", "bob", "carol", "dave"];
        let tags = ["a", "admin", "beta", "ops", "dev"];
        let records: Vec<serde_json::Value> = (0..30)
            .map(|i| {
                serde_json::json!({
                    "id": 1000 + i,
                    "name": names[r.below(4) as usize],
                    "email": format!("user{i}@example.com"),
                    "active": r.below(2) == 0,
                    "score": r.below(10_000) as f64 / 100.0,
                    "tags": [tags[r.below(5) as usize], tags[r.below(5) as usize]],
                })
            })
            .collect();
        let pretty = serde_json::to_string_pretty(&records).unwrap();
        let minified = serde_json::to_string(&records).unwrap();
        let mut indented = String::new();
        for _ in 0..6 {
            for d in 0..8 {
                indented += &format!("{}if (x{d} > {d}) {{\n", " ".repeat(4 * d));
            }
            for d in (0..8).rev() {
                indented += &format!("{}}}\n", " ".repeat(4 * d));
            }
            indented.push('\n');
        }
        let faces: Vec<char> = "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘🚀🎉✅❌🔥💡📦🐛👍👋🙏"
            .chars()
            .collect();
        let emoji_only: String = (0..300)
            .map(|_| faces[r.below(faces.len() as u64) as usize])
            .collect();
        let uuids: Vec<String> = (0..60)
            .map(|_| {
                let (a, b) = (r.next(), r.next());
                format!(
                    "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
                    a >> 32,
                    a & 0xffff,
                    (a >> 16) & 0xfff,
                    b & 0xfff,
                    b >> 16
                )
            })
            .collect();
        let ascii: String = (0..3000)
            .map(|_| char::from(33 + r.below(94) as u8))
            .collect();
        vec![
            ("english prose", PROSE.repeat(4)),
            ("rust code", RUST.repeat(4)),
            ("python code", PYTHON.repeat(4)),
            ("indented code", indented),
            ("pretty JSON", pretty),
            ("minified JSON", minified),
            ("chinese", CHINESE.repeat(4)),
            ("japanese", JAPANESE.repeat(4)),
            ("russian", RUSSIAN.repeat(4)),
            ("arabic", ARABIC.repeat(4)),
            ("emoji in text", EMOJI.repeat(4)),
            ("emoji only", emoji_only),
            ("base64", b64),
            ("hex", hex.join("\n")),
            ("uuids", uuids.join("\n")),
            ("digit run", digits),
            ("numbers", numbers.join(" ")),
            ("random ASCII", ascii),
            (
                "white space",
                format!(
                    "{}{}{}",
                    " ".repeat(2000),
                    "\n".repeat(500),
                    "\t".repeat(300)
                ),
            ),
            (
                "mixed languages",
                [PROSE, CHINESE, RUSSIAN, EMOJI, ARABIC].concat(),
            ),
        ]
    }

    #[cfg(feature = "bpe")]
    #[test]
    fn heuristic_errs_high_but_close_on_every_kind_of_text() {
        let exact = Bpe::new("o200k_base").unwrap();
        for (kind, text) in samples() {
            let (got, want) = (Heuristic.count(&text), exact.count(&text));
            let ratio = got as f64 / want as f64;
            assert!(
                (0.98..=1.6).contains(&ratio),
                "{kind}: heuristic {got}, o200k_base {want} (ratio {ratio:.3})"
            );
        }
    }

    /// Counts each text as one token per byte, so a sum says which texts
    /// were counted.
    struct Bytes;

    impl TokenCounter for Bytes {
        fn name(&self) -> &str {
            "bytes"
        }
        fn count(&self, text: &str) -> usize {
            text.len()
        }
    }

    fn msg(v: serde_json::Value) -> Message {
        let Value::Object(fields) = v else {
            panic!("not an object")
        };
        Message::from_fields(crate::MessageId::new("m"), fields)
    }

    fn counted(v: serde_json::Value) -> usize {
        count_message(&Bytes, &msg(v)) - MESSAGE_OVERHEAD
    }

    #[test]
    fn openai_text_and_tool_calls_are_counted_bookkeeping_is_not() {
        let call = serde_json::json!({"role": "assistant", "content": "abc", "tool_calls": [
            {"id": "call_123", "type": "function", "function": {"name": "bash", "arguments": "{\"c\":1}"}}
        ]});
        assert_eq!(counted(call), 3 + 4 + 7);
        let result = serde_json::json!({"role": "tool", "tool_call_id": "call_123", "name": "bash",
            "content": "out", "timestamp": "2025-01-01T00:00:00Z", "cache_control": {"type": "ephemeral"}});
        assert_eq!(
            counted(result),
            3,
            "a tool message's result is its content, once"
        );
        let legacy = serde_json::json!({"role": "assistant", "content": null,
            "function_call": {"name": "ls", "arguments": "{}"}});
        assert_eq!(counted(legacy), 2 + 2);
    }

    #[test]
    fn reasoning_and_refusal_fields_are_counted() {
        let m = serde_json::json!({"role": "assistant", "content": "ok",
            "reasoning_content": "let me think", "refusal": "no", "id": "msg_1"});
        assert_eq!(counted(m), 2 + 12 + 2);
        // A string field the list does not know is sent to the model as far
        // as it can tell: counted. Numbers, booleans and objects are not.
        let m = serde_json::json!({"role": "user", "content": "hi", "reasoning": "hmm",
            "weight": 1, "audio": {"id": "audio_1"}, "flag": true});
        assert_eq!(counted(m), 2 + 3);
    }

    #[test]
    fn anthropic_thinking_and_tool_blocks_are_counted() {
        let m = serde_json::json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan it", "signature": "EqQBCkYIAxgCIkB"},
            {"type": "redacted_thinking", "data": "xyz"},
            {"type": "text", "text": "abc", "cache_control": {"type": "ephemeral"}},
            {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"p": 1}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
        ]});
        assert_eq!(counted(m), 7 + 3 + 3 + 2 + r#"{"p":1}"#.len());
        let r = serde_json::json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.rs"}]},
            {"type": "text", "text": "go"}
        ]});
        assert_eq!(counted(r), 4 + 2);
        let refusal = serde_json::json!({"role": "assistant", "content": [
            {"type": "refusal", "refusal": "sorry"}]});
        assert_eq!(counted(refusal), 5);
    }

    #[test]
    fn tool_definitions_and_top_level_system_are_fixed_tokens() {
        let tools = serde_json::json!([{"type": "function", "function": {"name": "bash",
            "description": "Run a command", "parameters": {"type": "object",
            "properties": {"command": {"type": "string"}}}}}]);
        let doc = serde_json::json!({"model": "m", "system": [{"type": "text", "text": "be brief"}],
            "tools": tools, "functions": [], "messages": [{"role": "user", "content": "hi"}]});
        let c = Conversation::parse(&doc.to_string()).unwrap();
        let f = fixed_tokens(&c, &Bytes);
        assert_eq!(f.system, MESSAGE_OVERHEAD + 8);
        assert_eq!(
            f.tools,
            tools.to_string().len(),
            "the definitions' JSON text"
        );
        assert_eq!(f.total(), f.system + f.tools);
        let legacy = serde_json::json!({"functions": [{"name": "ls", "parameters": {}}],
            "messages": []});
        let c = Conversation::parse(&legacy.to_string()).unwrap();
        assert_eq!(
            fixed_tokens(&c, &Bytes).tools,
            r#"[{"name":"ls","parameters":{}}]"#.len()
        );
        let bare = Conversation::parse(r#"[{"role":"user","content":"hi"}]"#).unwrap();
        assert_eq!(fixed_tokens(&bare, &Bytes), FixedTokens::default());
    }

    #[test]
    fn heuristic_is_zero_only_for_empty_text() {
        assert_eq!(Heuristic.count(""), 0);
        for t in [
            "a", " ", "\n", "1", ".", "é", "中", "🦀", "\u{0}", "a1a1", "1a", "..a", "    \n",
        ] {
            assert!(Heuristic.count(t) >= 1, "{t:?}");
        }
    }

    #[test]
    fn heuristic_reads_every_byte_of_the_tail() {
        // Every prefix, so the last word holds one to eight bytes, and blocks
        // of more than 255 words, so the byte-lane counters are added up.
        let text = "fn main() { println!(\"hello, world\"); } // 12345 тест 中文 🦀\n".repeat(60);
        for end in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            let t = &text[..end];
            let f = byte_features(t.as_bytes());
            let count = |p: fn(&char) -> bool| t.chars().filter(p).count() as u64;
            assert_eq!(f[0], count(|c| c.is_ascii_alphabetic()), "{end}");
            assert_eq!(f[3], count(|c| c.is_ascii_digit()), "{end}");
            assert_eq!(
                f[6],
                count(|c| c.is_ascii_whitespace() || *c == '\u{b}'),
                "{end}"
            );
            assert_eq!(f[9], count(|c| c.len_utf8() == 2), "{end}");
            assert_eq!(f[10], count(|c| c.len_utf8() == 3), "{end}");
            assert_eq!(f[11], count(|c| c.len_utf8() == 4), "{end}");
        }
    }
}
