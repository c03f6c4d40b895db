//! The meaning of a JSON text, hashed: what the archive's keys are made of,
//! so that `expand` recognizes a compressed output however it was written
//! back (another JSON library, sorted keys, `\u2026` for `…`,
//! pretty-printed).
//!
//! The canonical form of a JSON value is independent of
//!
//! * whitespace between tokens;
//! * the order of object members (members are sorted by key; of a key given
//!   twice the last counts, as Python's `json` and serde_json read it);
//! * how a string is written: each is compared by its decoded text, so
//!   `"…"`, `"\u2026"` and `"\u2026"` with upper-case hex digits agree; a
//!   lone surrogate escape (`\ud800`, which Python's `json.dumps` writes for
//!   one) stands for itself (a code unit no other text decodes to);
//! * how a number is written: by value. An integer literal is its digits
//!   (`-0` is `0`); any other number is read as an `f64`, written as an
//!   integer when it is one below 2^53 (`1.0`, `1e0` and `1` agree) and in
//!   shortest round-trip exponent form otherwise (`0.50` and `5e-1` agree).
//!
//! Restoring stays byte-exact: only the keys use this form, the archive keeps
//! the original texts.

use xxhash_rust::xxh3::Xxh3;

/// Deepest nesting read (serde_json's own limit is 128): a deeper text has
/// no canonical form and is hashed by its bytes.
const MAX_DEPTH: usize = 512;

/// The 128-bit hash of the canonical form of `json`; a text that is not
/// JSON (which parsed conversations never hold) is hashed by its bytes,
/// under a different tag, so the two never meet.
pub fn digest(json: &str) -> u128 {
    let mut h = Xxh3::new();
    match parse(json) {
        Some(node) => {
            h.update(b"J");
            emit(&node, &mut h);
        }
        None => {
            h.update(b"B");
            h.update(json.as_bytes());
        }
    }
    h.digest128()
}

/// True when `a` and `b` are JSON texts of the same value (see the module
/// docs), or the same bytes.
pub fn same(a: &str, b: &str) -> bool {
    a == b || digest(a) == digest(b)
}

/// The canonical form as bytes (a self-delimiting encoding: type tags and
/// lengths), or `None` when `json` is not one JSON value.
pub fn canonical_bytes(json: &str) -> Option<Vec<u8>> {
    let node = parse(json)?;
    let mut out = Sink::default();
    emit(&node, &mut out);
    Some(out.0)
}

#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    /// Canonical number text.
    Num(String),
    /// Decoded text (WTF-8: lone surrogates as their 3-byte form).
    Str(Vec<u8>),
    Arr(Vec<Node>),
    /// Members sorted by key, one per key (the last given).
    Obj(Vec<(Vec<u8>, Node)>),
}

trait Out {
    fn put(&mut self, b: &[u8]);
}

impl Out for Xxh3 {
    fn put(&mut self, b: &[u8]) {
        self.update(b);
    }
}

#[derive(Default)]
struct Sink(Vec<u8>);

impl Out for Sink {
    fn put(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
}

fn emit_len(n: usize, out: &mut impl Out) {
    out.put(&(n as u64).to_le_bytes());
}

fn emit(node: &Node, out: &mut impl Out) {
    match node {
        Node::Null => out.put(b"n"),
        Node::Bool(true) => out.put(b"t"),
        Node::Bool(false) => out.put(b"f"),
        Node::Num(n) => {
            out.put(b"#");
            emit_len(n.len(), out);
            out.put(n.as_bytes());
        }
        Node::Str(s) => {
            out.put(b"\"");
            emit_len(s.len(), out);
            out.put(s);
        }
        Node::Arr(a) => {
            out.put(b"[");
            emit_len(a.len(), out);
            for x in a {
                emit(x, out);
            }
        }
        Node::Obj(m) => {
            out.put(b"{");
            emit_len(m.len(), out);
            for (k, v) in m {
                emit_len(k.len(), out);
                out.put(k);
                emit(v, out);
            }
        }
    }
}

fn parse(json: &str) -> Option<Node> {
    let mut p = Parser {
        b: json.as_bytes(),
        i: 0,
    };
    let v = p.value(0)?;
    p.ws();
    (p.i == p.b.len()).then_some(v)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(lit)
            .then(|| self.i += lit.len())
    }

    fn value(&mut self, depth: usize) -> Option<Node> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match *self.b.get(self.i)? {
            b'n' => self.eat(b"null").map(|()| Node::Null),
            b't' => self.eat(b"true").map(|()| Node::Bool(true)),
            b'f' => self.eat(b"false").map(|()| Node::Bool(false)),
            b'"' => self.string().map(Node::Str),
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Some(Node::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match *self.b.get(self.i)? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(Node::Arr(items));
                        }
                        _ => return None,
                    }
                }
            }
            b'{' => {
                self.i += 1;
                let mut members: Vec<(Vec<u8>, Node)> = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Some(Node::Obj(members));
                }
                loop {
                    self.ws();
                    if self.b.get(self.i) != Some(&b'"') {
                        return None;
                    }
                    let k = self.string()?;
                    self.ws();
                    self.eat(b":")?;
                    let v = self.value(depth + 1)?;
                    members.push((k, v));
                    self.ws();
                    match *self.b.get(self.i)? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
                // Sort by key, stable, so that of a repeated key the last
                // given ends last in its run and is the one kept.
                members.sort_by(|a, b| a.0.cmp(&b.0));
                let mut out: Vec<(Vec<u8>, Node)> = Vec::with_capacity(members.len());
                for m in members {
                    match out.last_mut() {
                        Some(last) if last.0 == m.0 => *last = m,
                        _ => out.push(m),
                    }
                }
                Some(Node::Obj(out))
            }
            b'-' | b'0'..=b'9' => self.number().map(Node::Num),
            _ => None,
        }
    }

    fn number(&mut self) -> Option<String> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let s = p.i;
            while p.b.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
            p.i > s
        };
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        if !digits(self) {
            return None;
        }
        let mut int = true;
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            int = false;
            if !digits(self) {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            int = false;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            if !digits(self) {
                return None;
            }
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).ok()?;
        Some(canonical_number(text, int))
    }

    /// A string's decoded text; at its opening quote.
    fn string(&mut self) -> Option<Vec<u8>> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let rest = &self.b[self.i..];
            let n = memchr::memchr2(b'"', b'\\', rest)?;
            out.extend_from_slice(&rest[..n]);
            self.i += n;
            if self.b[self.i] == b'"' {
                self.i += 1;
                return Some(out);
            }
            // An escape.
            let c = *self.b.get(self.i + 1)?;
            self.i += 2;
            let simple = match c {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let u = self.hex4()?;
                    let cp = if (0xD800..0xDC00).contains(&u)
                        && self.b[self.i..].starts_with(b"\\u")
                        && let Some(lo) = hex4_at(self.b, self.i + 2)
                        && (0xDC00..0xE000).contains(&lo)
                    {
                        self.i += 6;
                        0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
                    } else {
                        u
                    };
                    push_wtf8(cp, &mut out);
                    continue;
                }
                _ => return None,
            };
            out.push(simple);
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let v = hex4_at(self.b, self.i)?;
        self.i += 4;
        Some(v)
    }
}

fn hex4_at(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i..i + 4)?;
    let s = std::str::from_utf8(s).ok()?;
    if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// UTF-8 of a code point, surrogates included (their 3-byte form, which no
/// valid UTF-8 text contains).
fn push_wtf8(cp: u32, out: &mut Vec<u8>) {
    match char::from_u32(cp) {
        Some(c) => {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        None => out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
    }
}

/// 2^53: below it every integer is exactly an `f64`.
const EXACT: f64 = 9_007_199_254_740_992.0;

fn canonical_number(text: &str, int: bool) -> String {
    if int {
        return if text == "-0" {
            "0".into()
        } else {
            text.into()
        };
    }
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => {
            if x == x.trunc() && x.abs() < EXACT {
                // `as` is exact here: an integer below 2^53.
                format!("{}", x as i64)
            } else {
                format!("{x:e}")
            }
        }
        _ => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eq(a: &str, b: &str) {
        assert_eq!(digest(a), digest(b), "{a} vs {b}");
        assert!(same(a, b));
    }
    fn ne(a: &str, b: &str) {
        assert_ne!(digest(a), digest(b), "{a} vs {b}");
    }

    #[test]
    fn writing_differences_do_not_matter() {
        eq(
            r#"{"role":"user","content":"a…b"}"#,
            "{\n  \"content\": \"a\\u2026b\",\n  \"role\": \"user\"\n}",
        );
        eq(r#"{"a":"\u00E9"}"#, r#"{"a":"é"}"#);
        eq(r#"{"a":"\/"}"#, r#"{"a":"/"}"#);
        eq(r#"{"a":"😀"}"#, r#"{"a":"\ud83d\ude00"}"#);
        eq(r#"[1.0, 1e0, -0, 0.50]"#, r#"[1,1,0,5e-1]"#);
        eq(r#"{"a":1,"a":2}"#, r#"{"a":2}"#);
        eq(
            r#"{"x":[{"b":null,"a":true}]}"#,
            r#"{"x":[{"a":true,"b":null}]}"#,
        );
        eq("[12345678901234567890123]", "[12345678901234567890123]");
    }

    #[test]
    fn meaning_differences_do() {
        ne(r#"{"a":"1"}"#, r#"{"a":1}"#);
        ne(r#"[1, 2]"#, r#"[2, 1]"#);
        ne(r#"{"a":[]}"#, r#"{"a":{}}"#);
        ne(r#"{"a":null}"#, r#"{}"#);
        ne(r#"["ab"]"#, r#"["a","b"]"#);
        ne(r#"{"ab":"c"}"#, r#"{"a":"bc"}"#);
        ne(r#"{"a":1.5}"#, r#"{"a":1.25}"#);
        // A lone surrogate is its own code unit: neither U+FFFD nor dropped.
        ne(r#"["\ud800"]"#, r#"["\ufffd"]"#);
        ne(r#"["\ud800"]"#, r#"[""]"#);
        ne(r#"["\ud800"]"#, r#"["\udc00"]"#);
        eq(r#"["\ud800x"]"#, r#"["\uD800x"]"#);
    }

    #[test]
    fn not_json_is_hashed_by_bytes() {
        assert!(canonical_bytes("{").is_none());
        assert!(canonical_bytes("[1] x").is_none());
        assert!(canonical_bytes(r#"["\x"]"#).is_none());
        ne("{", "{ ");
        eq("{", "{");
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(canonical_bytes(&deep).is_none());
    }
}
