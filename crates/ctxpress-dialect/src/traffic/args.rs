//! A tool call's arguments, parsed on demand ([`Args`]).
//!
//! OpenAI string arguments are JSON text, often large (the content of a
//! write, the old and new strings of an edit) while the dialect extraction
//! reads a few small members (paths, command, working directory). So the
//! text is not parsed into a [`Value`]: one scan, which accepts only what
//! `serde_json::from_str::<Value>` accepts, finds the top-level members of an
//! object and where each value lies in the text; a member's value is parsed
//! the first time it is asked for (a string decoded directly), the whole
//! value only when a caller needs it. Arguments already held as a value
//! (Anthropic `input`, non-string `arguments`) are read in place in the
//! message, not copied. Text the scan does not take (not an object,
//! invalid, unusual) is parsed at once, as before: the answers are those of
//! the parsed value in every case.

use crate::CallArgs;
use ctxpress_core::message::{Message, get_small, vget};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

static NULL: Value = Value::Null;

/// Working space for scanning arguments, kept by a caller scanning many.
#[derive(Default)]
pub(crate) struct Scratch(Vec<Member>);

/// A call's arguments (see the module docs): the same answers as the value
/// `serde_json::from_str` gives for them (`Value::Null` when they are not
/// valid JSON), worked out on demand.
#[derive(Clone)]
pub struct Args(Repr);

#[derive(Clone)]
enum Repr {
    /// OpenAI string arguments holding a JSON object: the text stays in the
    /// message (held, so unchanged), its top-level members indexed.
    Text {
        msg: Message,
        /// Position in the message's `tool_calls`.
        call: usize,
        members: Box<[Member]>,
        /// The whole value, parsed when first asked for.
        whole: OnceLock<Value>,
    },
    /// A value the message holds, read in place.
    InPlace { msg: Message, at: At },
    /// Parsed at once: string arguments the scan does not take, or none.
    Parsed(Value),
}

/// Where a value of a message is.
#[derive(Clone, Copy)]
enum At {
    /// `tool_calls[i].function.arguments`.
    Arguments(usize),
    /// `content[i].input`.
    Input(usize),
}

/// A top-level member of an object's text.
#[derive(Clone)]
struct Member {
    /// Byte range of the key, quotes included.
    key_at: (u32, u32),
    /// The key holds an escape (compared decoded).
    key_escaped: bool,
    /// Byte range of the value.
    value_at: (u32, u32),
    /// The value, parsed when first asked for.
    parsed: OnceLock<Value>,
}

/// `tool_calls[call].function.arguments` of `msg`.
fn arguments_of(msg: &Message, call: usize) -> Option<&Value> {
    let c = get_small(msg.fields(), "tool_calls")?.get(call)?;
    vget(vget(c, "function")?, "arguments")
}

/// `content[block].input` of `msg`.
fn input_of(msg: &Message, block: usize) -> Option<&Value> {
    vget(msg.content()?.get(block)?, "input")
}

impl Args {
    /// The arguments of OpenAI call `call` of `msg`, whose
    /// `function.arguments` is `arguments`.
    /// `scratch` is working space, kept by a caller making many.
    pub(crate) fn openai(
        msg: &Message,
        call: usize,
        arguments: Option<&Value>,
        scratch: &mut Scratch,
    ) -> Args {
        Args(match arguments {
            Some(Value::String(text)) => match scan_object(text, &mut scratch.0) {
                Some(members) => Repr::Text {
                    msg: msg.clone(),
                    call,
                    members,
                    whole: OnceLock::new(),
                },
                None => Repr::Parsed(serde_json::from_str(text).unwrap_or(Value::Null)),
            },
            // `tool_calls()` writes a non-string value out as JSON, and
            // `args()` parses that back: the same value.
            Some(_) => Repr::InPlace {
                msg: msg.clone(),
                at: At::Arguments(call),
            },
            None => Repr::Parsed(Value::Null),
        })
    }

    /// The arguments of the Anthropic `tool_use` block `block` of `msg`,
    /// whose `input` is `input`.
    pub(crate) fn anthropic(msg: &Message, block: usize, input: Option<&Value>) -> Args {
        Args(match input {
            Some(_) => Repr::InPlace {
                msg: msg.clone(),
                at: At::Input(block),
            },
            None => Repr::Parsed(Value::Null),
        })
    }

    /// The text of `Repr::Text` arguments.
    fn text(msg: &Message, call: usize) -> &str {
        arguments_of(msg, call)
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// Member `key` when the arguments are an object holding it (as
    /// [`Value::get`] answers on the parsed arguments; the last of equal keys).
    pub fn get(&self, key: &str) -> Option<&Value> {
        let Repr::Text {
            msg, call, members, ..
        } = &self.0
        else {
            return self.value().get(key);
        };
        // Only a key of the same length (or an escaped one) can be equal:
        // most lookups miss without reading the text.
        let maybe =
            |m: &Member| m.key_escaped || (m.key_at.1 - m.key_at.0) as usize == key.len() + 2;
        if !members.iter().any(maybe) {
            return None;
        }
        let text = Args::text(msg, *call);
        let m = members
            .iter()
            .rev()
            .find(|m| maybe(m) && m.key(text).is_some_and(|k| k == key))?;
        if let Some(v) = m.parsed.get() {
            return Some(v);
        }
        match m.value_text(text).and_then(parse_member) {
            Some(v) => Some(m.parsed.get_or_init(|| v)),
            // Not reached (the scan took the text): the whole value answers.
            None => self.value().get(key),
        }
    }

    /// The byte range, inside its quotes, of the string value of member
    /// `key` in the arguments' own text (OpenAI `function.arguments`), found
    /// by the scan without decoding it. `None` unless the text was scanned
    /// (a well-formed object), no key of it is written with an escape, and
    /// `key` occurs once, with a string value.
    pub fn string_span(&self, key: &str) -> Option<std::ops::Range<usize>> {
        let Repr::Text {
            msg, call, members, ..
        } = &self.0
        else {
            return None;
        };
        if members.iter().any(|m| m.key_escaped) {
            return None;
        }
        let text = Args::text(msg, *call);
        let mut hits = members
            .iter()
            .filter(|m| m.key(text).is_some_and(|k| k == key));
        let m = hits.next()?;
        if hits.next().is_some() {
            return None;
        }
        let (start, end) = (m.value_at.0 as usize, m.value_at.1 as usize);
        (text.as_bytes().get(start) == Some(&b'"') && end > start + 1).then(|| start + 1..end - 1)
    }

    /// The arguments are a JSON object.
    pub fn is_object(&self) -> bool {
        match &self.0 {
            Repr::Text { .. } => true,
            _ => self.value().is_object(),
        }
    }

    /// The whole arguments as a value (OpenAI text parsed when first asked
    /// for, then kept).
    pub fn value(&self) -> &Value {
        match &self.0 {
            Repr::Text {
                msg,
                call,
                members,
                whole,
            } => whole.get_or_init(|| {
                let text = Args::text(msg, *call);
                // Not `None` (the scan took the text): else parsed whole.
                object_of(text, members)
                    .unwrap_or_else(|| serde_json::from_str(text).unwrap_or(Value::Null))
            }),
            Repr::InPlace { msg, at } => match *at {
                At::Arguments(i) => arguments_of(msg, i),
                At::Input(i) => input_of(msg, i),
            }
            .unwrap_or(&NULL),
            Repr::Parsed(v) => v,
        }
    }
}

/// The object `text` holds, from its scanned `members` (the values parsed
/// before reused): each key inserted in turn, as serde_json builds it (a
/// later equal key replaces the value, in the first one's place).
fn object_of(text: &str, members: &[Member]) -> Option<Value> {
    let mut map = Map::new();
    for m in members {
        let key = m.key(text)?.into_owned();
        let value = match m.parsed.get() {
            Some(v) => v.clone(),
            None => parse_member(m.value_text(text)?)?,
        };
        map.insert(key, value);
    }
    Some(Value::Object(map))
}

/// The value of a member's text (valid JSON: the scan took it); a string
/// is decoded here, anything else by serde_json.
fn parse_member(raw: &str) -> Option<Value> {
    match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(body) => decode_string(body).map(Value::String),
        None => serde_json::from_str(raw).ok(),
    }
}

impl Member {
    /// The key, decoded, in `text` (the text scanned).
    fn key<'t>(&self, text: &'t str) -> Option<Cow<'t, str>> {
        let raw = text.get(self.key_at.0 as usize..self.key_at.1 as usize)?;
        if self.key_escaped {
            serde_json::from_str(raw).ok().map(Cow::Owned)
        } else {
            raw.get(1..raw.len().saturating_sub(1)).map(Cow::Borrowed)
        }
    }

    /// The value's text in `text` (the text scanned).
    fn value_text<'t>(&self, text: &'t str) -> Option<&'t str> {
        text.get(self.value_at.0 as usize..self.value_at.1 as usize)
    }
}

impl CallArgs for Args {
    fn arg(&self, key: &str) -> Option<&Value> {
        self.get(key)
    }

    fn is_object(&self) -> bool {
        Args::is_object(self)
    }

    fn whole(&self) -> &Value {
        self.value()
    }
}

impl PartialEq for Args {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl fmt::Debug for Args {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Text { msg, call, .. } => f
                .debug_tuple("Args")
                .field(&Args::text(msg, *call))
                .finish(),
            _ => f.debug_tuple("Args").field(self.value()).finish(),
        }
    }
}

/// Nesting deeper than this is left to serde_json (which allows 127 levels).
const MAX_DEPTH: usize = 100;

/// The top-level members of `text` when it is a JSON object that
/// `serde_json::from_str::<Value>` accepts, and the scan is sure of it;
/// `None` otherwise (anything else, or text the scan leaves to serde_json:
/// deep nesting, an object whose first key serde_json treats specially,
/// text too long for 32-bit offsets).
fn scan_object(text: &str, found: &mut Vec<Member>) -> Option<Box<[Member]>> {
    let b = text.as_bytes();
    // Offsets fit in u32 (`at`).
    u32::try_from(b.len()).ok()?;
    let at = |x: usize| x as u32;
    found.clear();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            let (k_end, key_escaped) = scan_key(b, i, found.is_empty())?;
            let k_start = i;
            i = skip_ws(b, k_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            let start = skip_ws(b, i + 1);
            let end = scan_value(b, start, 1)?;
            found.push(Member {
                key_at: (at(k_start), at(k_end)),
                key_escaped,
                value_at: (at(start), at(end)),
                parsed: OnceLock::new(),
            });
            i = skip_ws(b, end);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    (skip_ws(b, i) == b.len()).then(|| found.drain(..).collect())
}

/// The first index at or after `i` that is not JSON whitespace.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// A key starting at `i` (its opening quote): the index after its closing
/// quote and whether it holds an escape. `None` when it is not a string, or
/// it is the first key of an object and may be one serde_json treats
/// specially (`$serde_json::private::Number`, `...RawValue`).
fn scan_key(b: &[u8], i: usize, first: bool) -> Option<(usize, bool)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let (end, escaped) = scan_string(b, i + 1)?;
    if first && (escaped || b.get(i + 1) == Some(&b'$')) {
        return None;
    }
    Some((end, escaped))
}

/// A JSON value starting at `i` at nesting `depth` (of its container): the
/// index after it.
fn scan_value(b: &[u8], i: usize, depth: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => scan_string(b, i + 1).map(|(end, _)| end),
        b'{' => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let mut i = skip_ws(b, i + 1);
            if b.get(i) == Some(&b'}') {
                return Some(i + 1);
            }
            let mut first = true;
            loop {
                let (k_end, _) = scan_key(b, i, first)?;
                first = false;
                i = skip_ws(b, k_end);
                if b.get(i) != Some(&b':') {
                    return None;
                }
                i = skip_ws(b, i + 1);
                i = skip_ws(b, scan_value(b, i, depth + 1)?);
                match b.get(i) {
                    Some(b',') => i = skip_ws(b, i + 1),
                    Some(b'}') => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b'[' => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let mut i = skip_ws(b, i + 1);
            if b.get(i) == Some(&b']') {
                return Some(i + 1);
            }
            loop {
                i = skip_ws(b, scan_value(b, i, depth + 1)?);
                match b.get(i) {
                    Some(b',') => i = skip_ws(b, i + 1),
                    Some(b']') => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b't' => literal(b, i, b"true"),
        b'f' => literal(b, i, b"false"),
        b'n' => literal(b, i, b"null"),
        b'-' | b'0'..=b'9' => scan_number(b, i),
        _ => None,
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

/// A number as serde_json reads one: `-`, then `0` (no digit after it) or
/// digits from `1`, then `.` and digits, then `e`/`E`, a sign and digits.
fn scan_number(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |mut i: usize| {
        while let Some(b'0'..=b'9') = b.get(i) {
            i += 1;
        }
        i
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match *b.get(i)? {
        b'0' => {
            i += 1;
            if let Some(b'0'..=b'9') = b.get(i) {
                return None;
            }
        }
        b'1'..=b'9' => i = digits(i + 1),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some(i)
}

const ONES: u64 = u64::MAX / 255;
const HIGHS: u64 = ONES << 7;

/// The high bit of each byte of `w` (little-endian) that is `"`, `\` or,
/// with `ctrl`, a control character is set: the lowest set bit marks the
/// first such byte exactly (higher ones may be false alarms).
fn special_bits(w: u64, ctrl: bool) -> u64 {
    let c = if ctrl {
        w.wrapping_sub(ONES * 0x20) & !w
    } else {
        0
    };
    let q = w ^ (ONES * u64::from(b'"'));
    let quote = q.wrapping_sub(ONES) & !q;
    let s = w ^ (ONES * u64::from(b'\\'));
    let slash = s.wrapping_sub(ONES) & !s;
    (c | quote | slash) & HIGHS
}

/// The first index at or after `i` holding `"`, `\` or, with `ctrl`, a
/// control character; `b.len()` when there is none. Sixteen bytes at a time
/// (SSE2), then eight ([`skip_plain_swar`]).
fn skip_plain(b: &[u8], i: usize, ctrl: bool) -> usize {
    use ctxpress_text::sse2::{eq, first_marked, in_range};
    let special = |v| {
        let m = eq(v, b'"') | eq(v, b'\\');
        if ctrl { m | in_range(v, 0, 0x20) } else { m }
    };
    first_marked(b, i, special).unwrap_or_else(|tail| skip_plain_swar(b, tail, ctrl))
}

/// [`skip_plain`] eight bytes at a time (the SWAR walk it used before the
/// SSE2 lanes; now its tail of fewer than sixteen bytes).
fn skip_plain_swar(b: &[u8], mut i: usize, ctrl: bool) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let m = special_bits(u64::from_le_bytes(w), ctrl);
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || (ctrl && c < 0x20) {
            break;
        }
        i += 1;
    }
    i
}

/// A string's body starting at `i` (after the opening quote): the index
/// after its closing quote and whether it holds an escape. `None` on a
/// control character, an invalid escape, a lone surrogate (serde_json
/// rejects them in a `String`) or a missing closing quote.
fn scan_string(b: &[u8], mut i: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        i = skip_plain(b, i, true);
        match *b.get(i)? {
            b'"' => return Some((i + 1, escaped)),
            b'\\' => {
                escaped = true;
                i += escape_len(b, i)?;
            }
            _ => return None,
        }
    }
}

/// The length of the escape at `i` (its backslash), a surrogate pair
/// counting as one; `None` when serde_json rejects it in a `String`.
fn escape_len(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(2),
        b'u' => match hex4(b, i + 2)? {
            0xDC00..=0xDFFF => None,
            0xD800..=0xDBFF => (b.get(i + 6..i + 8)? == b"\\u"
                && (0xDC00..=0xDFFF).contains(&hex4(b, i + 8)?))
            .then_some(12),
            _ => Some(6),
        },
        _ => None,
    }
}

fn hex4(b: &[u8], i: usize) -> Option<u16> {
    let mut n = 0u16;
    for &c in b.get(i..i + 4)? {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        n = n * 16 + u16::from(d);
    }
    Some(n)
}

/// The string the body of a JSON string decodes to, the body being one the
/// scan took (so its escapes are valid); `None` if it is not.
fn decode_string(body: &str) -> Option<String> {
    let b = body.as_bytes();
    let mut out = String::with_capacity(body.len());
    let mut i = 0;
    loop {
        let j = skip_plain(b, i, false);
        out.push_str(body.get(i..j)?);
        if j == b.len() {
            return Some(out);
        }
        if b[j] != b'\\' {
            return None;
        }
        let (c, len) = match *b.get(j + 1)? {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => match u32::from(hex4(b, j + 2)?) {
                high @ 0xD800..=0xDBFF => {
                    if b.get(j + 6..j + 8)? != b"\\u" {
                        return None;
                    }
                    let low = u32::from(hex4(b, j + 8)?);
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return None;
                    }
                    let n = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    (char::from_u32(n)?, 12)
                }
                n => (char::from_u32(n)?, 6),
            },
            _ => return None,
        };
        i = j + len;
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{self as dialect, DialectTable};
    use proptest::prelude::*;

    /// A message with one OpenAI call whose arguments are `text`.
    fn message(text: &str) -> Message {
        message_of(serde_json::json!({
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "x", "arguments": text}}],
        }))
    }

    fn message_of(v: Value) -> Message {
        let Value::Object(fields) = v else {
            panic!("an object")
        };
        Message::from_fields(ctxpress_core::message::MessageId::new("m"), fields)
    }

    fn args_of(m: &Message) -> Args {
        Args::openai(m, 0, arguments_of(m, 0), &mut Scratch::default())
    }

    /// The reference: the arguments parsed whole, as before.
    fn reference(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    const KEYS: &[&str] = &[
        "path",
        "file_path",
        "filePath",
        "command",
        "cmd",
        "content",
        "cwd",
        "workdir",
        "pattern",
        "glob",
        "input",
        "patch",
        "paths",
        "file_text",
        "new_string",
        "old_string",
        "a",
        "",
        "pa\\u0074h",
        "é",
        "$x",
    ];

    const NAMES: &[&str] = &[
        "Read",
        "Write",
        "Edit",
        "Bash",
        "Grep",
        "Glob",
        "shell",
        "exec_command",
        "apply_patch",
        "str_replace_editor",
        "read_many_files",
        "write_file",
        "run_terminal",
        "file-read",
        "saveThing",
        "unknown_tool",
        "create",
    ];

    /// Every answer of `args` equals that of `reference(text)`.
    fn check(text: &str) {
        let m = message(text);
        let args = args_of(&m);
        let want = reference(text);
        assert_eq!(args.value(), &want, "whole of {text:?}");
        assert_eq!(args.is_object(), want.is_object(), "{text:?}");
        // Asked twice: the cached member answers the same.
        for _ in 0..2 {
            for k in KEYS.iter().copied().chain(
                want.as_object()
                    .into_iter()
                    .flat_map(|o| o.keys().map(String::as_str).collect::<Vec<_>>()),
            ) {
                assert_eq!(args.get(k), want.get(k), "member {k:?} of {text:?}");
            }
        }
        // The whole value built with members parsed before.
        let asked = args_of(&m);
        for k in want.as_object().into_iter().flat_map(|o| o.keys()) {
            assert_eq!(asked.get(k), want.get(k), "member {k:?} of {text:?}");
        }
        assert_eq!(asked.value(), &want, "whole of {text:?} after its members");
        let fresh = args_of(&m);
        let table = dialect::builtin();
        for n in NAMES {
            assert_eq!(
                table.write_content(n, &fresh),
                table.write_content(n, &want),
                "write_content {n} {text:?}"
            );
            for cwd in [None, Some("/w")] {
                assert_eq!(
                    table.extract_with(table.find(n), n, &fresh, cwd),
                    table.extract_args(n, &want, cwd),
                    "operation {n} {text:?}"
                );
            }
        }
    }

    #[test]
    fn fixed_cases_answer_as_the_parsed_value() {
        let cases = [
            r#"{"file_path":"src/x.rs"}"#,
            r#"  {"command" : "cargo test", "description":"run"}  "#,
            r#"{"file_path":"/a.rs","content":"line\n\"q\"\ttab \u00e9 \ud83d\ude00 end"}"#,
            r#"{"path":"a","path":"b"}"#,
            r#"{"path":"a","pa\u0074h":"b"}"#,
            r#"{"pa\u0074h":"a","path":"b"}"#,
            r#"{"command":["bash","-lc","cat x"],"workdir":"/r"}"#,
            r#"{"cmd":["ls","-la"],"n":1.5e3,"m":-0,"k":123456789012345678901234567890}"#,
            r#"{"a":{"b":[1,2,{"c":null}]},"t":true,"f":false}"#,
            r#"{"pattern":"","path":""}"#,
            r#"{"pattern":{"x":1},"path":["a"]}"#,
            r#"{"command":"create","path":"/f","file_text":"x\ny"}"#,
            r#"{}"#,
            r#"{"$serde_json::private::Number":"12"}"#,
            r#"{"$serde_json::private::RawValue":"[1,2]"}"#,
            r#"{"a":{"$serde_json::private::Number":"12"}}"#,
            r#"{"a":{"$serde_json::private::RawValue":"{\"x\":1}"}}"#,
            r#"{"\u0024serde_json::private::Number":"12"}"#,
            r#"{"n":1e999,"big":-1.0E-999}"#,
            // Invalid.
            "not json",
            "",
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":1e}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00"}"#,
            r#"{"a":"\ud800\u0041"}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":1} x"#,
            r#"{"a" 1}"#,
            r#"{a:1}"#,
            r#"{"a":tru}"#,
            r#"{"a":[1 2]}"#,
            r#"{"a":"unterminated}"#,
            // Not objects.
            r#"[1,2]"#,
            r#""path""#,
            "42",
            "null",
        ];
        for c in cases {
            check(c);
        }
        // Nesting around serde_json's limit.
        for depth in [98, 99, 100, 101, 126, 127, 128, 200] {
            let text = format!(
                "{{\"a\":{}1{}}}",
                "[".repeat(depth - 1),
                "]".repeat(depth - 1)
            );
            check(&text);
            let text = format!(
                "{{\"a\":{}1{}}}",
                "{\"b\":".repeat(depth - 1),
                "}".repeat(depth - 1)
            );
            check(&text);
        }
    }

    #[test]
    fn usual_arguments_are_scanned_not_parsed() {
        for text in [
            r#"{"file_path":"src/x.rs"}"#,
            r#"{"file_path":"/a.rs","content":"line\n\"q\" \ud83d\ude00"}"#,
            r#"{"command":["bash","-lc","cat x"],"workdir":"/r","n":-1.5e3}"#,
        ] {
            let m = message(text);
            assert!(matches!(args_of(&m).0, Repr::Text { .. }), "{text}");
        }
    }

    #[test]
    fn values_held_by_the_message_are_read_in_place() {
        let m = message_of(serde_json::json!({
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "Read",
                "input": {"file_path": "/a.rs"}}],
            "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "Bash", "arguments": {"command": "ls"}}}],
        }));
        let openai = Args::openai(&m, 0, arguments_of(&m, 0), &mut Scratch::default());
        assert_eq!(openai.get("command"), Some(&Value::from("ls")));
        let anthropic = Args::anthropic(&m, 0, input_of(&m, 0));
        assert_eq!(anthropic.get("file_path"), Some(&Value::from("/a.rs")));
        assert!(anthropic.is_object());
        assert_eq!(Args::anthropic(&m, 0, None).value(), &Value::Null);
        assert_eq!(
            DialectTable::builtin()
                .extract_args("Read", &anthropic, None)
                .map(|o| o.paths),
            Some(vec!["/a.rs".to_string()])
        );
    }

    /// A JSON string, sometimes with a defect (an invalid escape, a lone
    /// surrogate, a raw control character).
    fn json_string() -> impl Strategy<Value = String> {
        let valid = prop_oneof![
            4 => "[a-zA-Z0-9 /.é]{1,6}",
            1 => Just("\\n".to_string()),
            1 => Just("\\\"".to_string()),
            1 => Just("\\\\".to_string()),
            1 => Just("\\/".to_string()),
            1 => Just("\\u0074".to_string()),
            1 => Just("\\u00E9".to_string()),
            1 => Just("\\ud83d\\ude00".to_string()),
        ];
        let defect = prop_oneof![
            Just("\\ud800".to_string()),
            Just("\\udc00".to_string()),
            Just("\\ud800\\u0041".to_string()),
            Just("\\x".to_string()),
            Just("\\u12".to_string()),
            Just("\t".to_string()),
        ];
        prop_oneof![
            60 => "[a-z_/. ]{0,12}".prop_map(|s| format!("\"{s}\"")),
            30 => proptest::collection::vec(valid.clone(), 0..8)
                .prop_map(|v| format!("\"{}\"", v.concat())),
            // Rare: a text holds many strings.
            1 => (proptest::collection::vec(valid, 0..4), defect)
                .prop_map(|(v, d)| format!("\"{}{d}\"", v.concat())),
        ]
    }

    fn json_key() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => proptest::sample::select(KEYS).prop_map(|k| format!("\"{k}\"")),
            4 => json_string(),
            1 => Just("\"$serde_json::private::Number\"".to_string()),
            1 => Just("\"$serde_json::private::RawValue\"".to_string()),
        ]
    }

    fn json_number() -> impl Strategy<Value = String> {
        prop_oneof![
            40 => "-?(0|[1-9][0-9]{0,25})(\\.[0-9]{1,4})?([eE][+-]?[0-9]{1,4})?",
            // Often invalid.
            1 => "-?[0-9]{0,3}\\.?[0-9]{0,2}[eE]?[+-]?[0-9]{0,2}",
        ]
    }

    /// JSON-like text: mostly valid, with the odd defect.
    fn json_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            60 => json_string(),
            20 => json_number(),
            20 => proptest::sample::select(vec!["true", "false", "null"]).prop_map(str::to_string),
            1 => proptest::sample::select(vec!["tru", "nul", "", "'a'"]).prop_map(str::to_string),
        ];
        let value = leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec((json_key(), inner), 0..5).prop_map(|v| {
                    let body: Vec<String> = v.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                    format!("{{{}}}", body.join(","))
                }),
            ]
        });
        let ws = prop_oneof![
            80 => proptest::sample::select(vec!["", "", " ", "\n", "\t", "\r\n "]),
            1 => Just("\u{a0}"),
        ];
        (
            proptest::collection::vec((json_key(), value, ws.clone()), 0..6),
            ws.clone(),
            ws,
            prop_oneof![
                40 => Just(""),
                1 => proptest::sample::select(vec![",", "}", "x", "]"]),
            ],
            prop_oneof![9 => Just(true), 1 => Just(false)],
        )
            .prop_map(|(members, lead, trail, junk, object)| {
                let body: Vec<String> = members
                    .iter()
                    .map(|(k, v, w)| format!("{w}{k}{w}:{w}{v}{w}"))
                    .collect();
                if object {
                    format!("{lead}{{{}}}{junk}{trail}", body.join(","))
                } else {
                    let vals: Vec<&str> = members.iter().map(|(_, v, _)| v.as_str()).collect();
                    format!("{lead}[{}]{junk}{trail}", vals.join(","))
                }
            })
    }

    /// The reference for [`skip_plain`]: byte by byte.
    fn skip_plain_reference(b: &[u8], i: usize, ctrl: bool) -> usize {
        b.iter()
            .skip(i)
            .position(|&c| c == b'"' || c == b'\\' || (ctrl && c < 0x20))
            .map_or(b.len().max(i), |p| i + p)
    }

    #[test]
    fn skip_plain_finds_every_byte_value_at_every_lane_position() {
        for c in 0..=255u8 {
            for at in 0..40 {
                let mut b = vec![b'a'; 40];
                b[at] = c;
                for start in [0, 1, at] {
                    for ctrl in [true, false] {
                        assert_eq!(
                            skip_plain(&b, start, ctrl),
                            skip_plain_reference(&b, start, ctrl),
                            "{c} at {at} from {start}"
                        );
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn skip_plain_finds_the_first_special_byte(
            bytes in proptest::collection::vec(
                prop_oneof![
                    8 => 0x20u8..=0xff,
                    1 => proptest::sample::select(vec![b'"', b'\\', 0u8, 0x1f, b'\n']),
                ],
                0..80,
            ),
            start in 0usize..80,
        ) {
            let start = start.min(bytes.len());
            for ctrl in [true, false] {
                prop_assert_eq!(
                    skip_plain(&bytes, start, ctrl),
                    skip_plain_reference(&bytes, start, ctrl)
                );
                prop_assert_eq!(
                    skip_plain_swar(&bytes, start, ctrl),
                    skip_plain_reference(&bytes, start, ctrl)
                );
            }
        }

        #[test]
        fn strings_decode_as_serde_json_decodes_them(s in "(\\PC|[\u{0}-\u{1f}]|\"|\\\\){0,60}") {
            let quoted = serde_json::to_string(&s).expect("a string");
            let body = &quoted[1..quoted.len() - 1];
            prop_assert_eq!(decode_string(body), Some(s.clone()));
            // Every character escaped (surrogate pairs for the rest).
            let escaped: String = s.encode_utf16().map(|u| format!("\\u{u:04X}")).collect();
            let closed = format!("{escaped}\"");
            prop_assert_eq!(scan_string(closed.as_bytes(), 0), Some((closed.len(), !s.is_empty())));
            prop_assert_eq!(decode_string(&escaped), Some(s));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn answers_as_the_parsed_value(text in json_text()) {
            check(&text);
        }

        #[test]
        fn big_strings_with_escapes_answer_as_the_parsed_value(
            path in "[a-z/]{1,20}",
            content in "(\\PC|\n|\t|\"|\\\\){0,400}",
        ) {
            let v = serde_json::json!({"file_path": path, "content": content, "cmd": ["a", content]});
            check(&v.to_string());
            // Escapes of another encoder (every character escaped).
            let escaped: String = content
                .encode_utf16()
                .map(|u| format!("\\u{u:04x}"))
                .collect();
            check(&format!(r#"{{"content":"{escaped}","path":"{path}"}}"#));
        }
    }
}
