//! Line-level helpers: line-number prefixes, declarations (the outline of a
//! file), error lines, count lines and the references a text mentions.

use regex::Regex;
use std::collections::hash_map::Entry;
use std::sync::LazyLock;

fn re(p: &str) -> Regex {
    // Every pattern is a literal of this file, compiled by the tests below.
    Regex::new(p).expect("valid built-in regex")
}

/// One line of a file as a read returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// The line number the tool printed, when it numbered its lines.
    pub number: Option<u64>,
    /// The line without its number prefix.
    pub body: &'a str,
}

static NUMBERED: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(\d{1,7})(?:\t|→|:|\|)"));

/// True for the bytes [`char::is_whitespace`] is true for among ASCII.
fn ascii_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// [`number_prefix_after`], counting the leading white space itself.
#[cfg(test)]
fn number_prefix(l: &str) -> Option<(Option<u64>, usize)> {
    let ws = l.bytes().take_while(|c| ascii_space(*c)).count();
    number_prefix_after(l, ws)
}

/// The line number of a [`NUMBERED`] prefix of `l` (`None` when its digits
/// are not ASCII ones `u64` parses) and the end of the prefix: what
/// [`NUMBERED`] finds, the digits parsed. `ws` is the count of ASCII white
/// space bytes `l` starts with. Plain ASCII is read byte by byte; a
/// non-ASCII character where it matters (leading white space, after the
/// digits) goes the long way.
fn number_prefix_after(l: &str, ws: usize) -> Option<(Option<u64>, usize)> {
    let b = l.as_bytes();
    let mut n = 0usize;
    let mut value = 0u64;
    while n < 8 {
        match b.get(ws + n) {
            Some(c) if c.is_ascii_digit() => {
                value = value * 10 + u64::from(c - b'0');
                n += 1;
            }
            _ => break,
        }
    }
    let next = b.get(ws + n).copied();
    if b.get(ws).is_some_and(|c| !c.is_ascii()) || next.is_some_and(|c| !c.is_ascii()) {
        return number_prefix_slow(l);
    }
    if n == 0 || n > 7 {
        return None;
    }
    match next? {
        b'\t' | b':' | b'|' => Some((Some(value), ws + n + 1)),
        _ => None,
    }
}

/// [`number_prefix_after`] for any text: Unicode white space, `→`, non-ASCII
/// digits (through the regex).
fn number_prefix_slow(l: &str) -> Option<(Option<u64>, usize)> {
    let t = l.trim_start();
    let ws = l.len() - t.len();
    let b = t.as_bytes();
    let n = b.iter().take(8).take_while(|c| c.is_ascii_digit()).count();
    let next = t.get(n..).and_then(|r| r.chars().next());
    if next.is_some_and(|c| !c.is_ascii() && c.is_numeric()) {
        let c = NUMBERED.captures(l)?;
        return Some((c.get(1)?.as_str().parse().ok(), c.get(0)?.end()));
    }
    if n == 0 || n > 7 {
        return None;
    }
    let sep = match next? {
        '\t' | ':' | '|' => 1,
        '→' => '→'.len_utf8(),
        _ => return None,
    };
    Some((t.get(..n)?.parse().ok(), ws + n + sep))
}

/// The count of ASCII white space bytes `b` starts with
/// (`b.iter().take_while(|c| ascii_space(**c)).count()`), eight spaces at
/// a time over an indentation of spaces.
fn leading_space(b: &[u8]) -> usize {
    const SPACES: u64 = u64::from_ne_bytes(*b"        ");
    let mut n = 0;
    while let Some(chunk) = b.get(n..n + 8).and_then(|c| <[u8; 8]>::try_from(c).ok()) {
        if u64::from_ne_bytes(chunk) != SPACES {
            break;
        }
        n += 8;
    }
    n + b
        .get(n..)
        .map_or(0, |r| r.iter().take_while(|c| ascii_space(**c)).count())
}

/// The count of ASCII white space bytes `b` starts with, one by one (the
/// reference of [`leading_space`]).
#[cfg(test)]
fn leading_space_reference(b: &[u8]) -> usize {
    b.iter().take_while(|c| ascii_space(**c)).count()
}

/// `s.trim()`, reading ASCII ends byte by byte.
pub(crate) fn trim(s: &str) -> &str {
    trim_after(s, leading_space(s.as_bytes()))
}

/// [`trim`] of `s`, given `start`: the count of ASCII white space bytes
/// `s` starts with ([`leading_space`]).
fn trim_after(s: &str, start: usize) -> &str {
    let b = s.as_bytes();
    let end = b.len() - b.iter().rev().take_while(|c| ascii_space(**c)).count();
    if start >= end {
        // Every byte is ASCII white space.
        return "";
    }
    match (b.get(start), b.get(end - 1)) {
        (Some(a), Some(z)) if a.is_ascii() && z.is_ascii() => s.get(start..end).unwrap_or(""),
        _ => s.trim(),
    }
}

/// True when `s` is empty or white space only (`s.trim().is_empty()`).
pub(crate) fn is_blank(s: &str) -> bool {
    match s.bytes().find(|c| !ascii_space(*c)) {
        None => true,
        Some(c) if c.is_ascii() => false,
        Some(_) => s.trim().is_empty(),
    }
}

/// Split a read's text into lines, removing line-number prefixes (`12\t`,
/// `    12→`, `12:`) when at least four in five non-empty lines carry one with
/// increasing numbers (Claude Code, OpenHands, `cat -n`, SWE-agent).
///
/// Each line is pushed as it is if the text is numbered (prefix cut, number
/// kept): a numbered text, and a text none of whose lines has a prefix (a
/// line without one has no number either way), take one pass; only a text
/// with prefixes that is not numbered has its lines put back as they were.
pub fn split_numbered(text: &str) -> Vec<Line<'_>> {
    let mut lines: Vec<Line<'_>> = Vec::with_capacity(text.len() / 32 + 1);
    // Whether a line had a prefix.
    let mut prefixed = false;
    let mut hits = 0usize;
    let mut nonempty = 0usize;
    let mut last: Option<u64> = None;
    for l in ctxpress_core::text::lines::lines(text) {
        // The leading white space, counted once for `is_blank` and the
        // number prefix.
        let ws = leading_space(l.as_bytes());
        let blank = match l.as_bytes().get(ws) {
            None => true,
            Some(c) if c.is_ascii() => false,
            Some(_) => l.trim().is_empty(),
        };
        let mut line = Line {
            number: None,
            body: l,
        };
        if !blank {
            nonempty += 1;
            if let Some((number, end)) = number_prefix_after(l, ws) {
                if let Some(n) = number
                    && last.is_none_or(|p| n > p)
                {
                    hits += 1;
                    last = Some(n);
                }
                prefixed = true;
                line = Line {
                    number,
                    body: l.get(end..).unwrap_or(""),
                };
            }
        }
        lines.push(line);
    }
    let numbered = nonempty > 0 && hits * 5 >= nonempty * 4;
    if prefixed && !numbered {
        for (line, l) in lines
            .iter_mut()
            .zip(ctxpress_core::text::lines::lines(text))
        {
            *line = Line {
                number: None,
                body: l,
            };
        }
    }
    lines
}

/// The two-pass [`split_numbered`] it replaced (the reference of the tests).
#[cfg(test)]
fn split_numbered_reference(text: &str) -> Vec<Line<'_>> {
    let mut lines: Vec<Line<'_>> = Vec::with_capacity(text.len() / 32 + 1);
    // The end of each line's number prefix (0: none), its number in `lines`.
    let mut ends: Vec<usize> = Vec::with_capacity(text.len() / 32 + 1);
    let mut hits = 0usize;
    let mut nonempty = 0usize;
    let mut last: Option<u64> = None;
    for l in ctxpress_core::text::lines::lines(text) {
        // The leading white space, counted once for `is_blank` and the
        // number prefix.
        let ws = l.bytes().take_while(|c| ascii_space(*c)).count();
        let blank = match l.as_bytes().get(ws) {
            None => true,
            Some(c) if c.is_ascii() => false,
            Some(_) => l.trim().is_empty(),
        };
        let (number, end) = if blank {
            (None, 0)
        } else {
            nonempty += 1;
            match number_prefix_after(l, ws) {
                Some((number, end)) => {
                    if let Some(n) = number
                        && last.is_none_or(|p| n > p)
                    {
                        hits += 1;
                        last = Some(n);
                    }
                    (number, end)
                }
                None => (None, 0),
            }
        };
        lines.push(Line { number, body: l });
        ends.push(end);
    }
    let numbered = nonempty > 0 && hits * 5 >= nonempty * 4;
    for (line, &end) in lines.iter_mut().zip(&ends) {
        if !numbered {
            line.number = None;
        } else if end > 0 {
            line.body = line.body.get(end..).unwrap_or("");
        }
    }
    lines
}

/// What kind of text a file holds, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Source code (any language): declarations by keyword and shape.
    Code,
    /// Markdown, reStructuredText, plain text: headings.
    Doc,
    /// YAML: keys by indentation.
    Yaml,
    /// JSON: keys of the first levels.
    Json,
    /// TOML, INI, `.env`, properties: sections and keys.
    Ini,
    /// SQL: statements, tables and columns.
    Sql,
    /// CSS, SCSS, Less: selectors and at-rules.
    Css,
}

/// The kind of text of a path (its extension); code when unknown.
pub fn lang_of(path: &str) -> Lang {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    if lower.starts_with(".env") || lower.ends_with(".env") {
        return Lang::Ini;
    }
    let ext = lower.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext {
        "md" | "mdx" | "markdown" | "rst" | "txt" | "adoc" | "org" => Lang::Doc,
        "yml" | "yaml" => Lang::Yaml,
        "json" | "jsonc" | "json5" | "lock" => Lang::Json,
        "toml" | "ini" | "cfg" | "conf" | "properties" | "editorconfig" => Lang::Ini,
        "sql" | "psql" | "ddl" => Lang::Sql,
        "css" | "scss" | "sass" | "less" => Lang::Css,
        _ => Lang::Code,
    }
}

/// Rank of a declaration line in an outline: lower ranks are kept first when
/// an outline is over its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    /// Types, functions, methods, routes, tests, tables, headings, top-level keys.
    Structure = 0,
    /// Fields, columns, constants, nested keys, decorators.
    Member = 1,
    /// Imports and includes.
    Import = 2,
}

/// The modifiers of [`STRUCTURE_RE`], each followed by white space.
macro_rules! mods {
    () => {
        r"(?:(?:export|default|public|private|protected|internal|static|async|abstract|final|sealed|override|virtual|extern|unsafe|pub(?:\([\w:]+\))?|open|data|inline|suspend|declare|partial|readonly|const|local|global)\s+)*"
    };
}

/// Types, functions and the like, after their modifiers.
const STRUCTURE_RE: &str = concat!(
    r"^\s*",
    mods!(),
    r"(?:def|class|fn|fun|func|function\*?|struct|enum|trait|impl|interface|type|module|namespace|mod|macro_rules!|record|object|protocol|extension|typedef|union|contract|service|message|resource|defmodule|defn|sub|proc)(?:\s+[\w$(<*&\[]|<|\()"
);
const SQL_STMT_RE: &str = r"(?i)^\s*(?:create|alter|drop)\s+(?:or\s+replace\s+)?(?:unique\s+)?(?:temporary\s+|temp\s+)?(?:table|index|view|materialized\s+view|function|procedure|trigger|type|schema|sequence|extension|policy|database)(?-u:\b)";
const SQL_COLUMN_RE: &str = r"(?i)^\s+[`\x22\[]?[a-z_][\w]*[`\x22\]]?\s+(?:int|integer|bigint|smallint|tinyint|serial|bigserial|varchar|nvarchar|char|character|text|bool|boolean|date|datetime|time|timestamp|timestamptz|uuid|json|jsonb|decimal|numeric|float|double|real|blob|bytea|enum|money|inet|interval)(?-u:\b)";
const ARROW_FN_RE: &str = r"^\s*(?:export\s+)?(?:const|let|var)\s+[A-Za-z_$][\w$]*\s*(?::[^=]{1,80})?=\s*(?:async\s*)?(?:function(?-u:\b)|\([^)]*\)\s*(?::[^=]{1,60})?=>|[A-Za-z_$][\w$]*\s*=>)";
const METHOD_RE: &str = r"^\s+(?:(?:public|private|protected|static|async|get|set|override|readonly|abstract|final|synchronized|internal|virtual|suspend|fun)\s+)*[A-Za-z_$][\w$]*\s*(?:<[^>]{0,60}>)?\((?:[^()]|\([^()]*\))*\)\s*(?::\s*[^{;=]{1,80})?\s*(?:throws\s+[\w., ]+)?\{\s*$";
const TYPED_METHOD_RE: &str = r"^\s*(?:(?:public|private|protected|internal|static|final|abstract|synchronized|override|virtual|async|native)\s+)+[\w<>\[\],.? ]+\s+[A-Za-z_]\w*\s*\([^;]*\)\s*(?:throws\s+[\w., ]+)?\s*\{?\s*$";
const ROUTE_RE: &str = r#"^\s*[\w.]+\.(?:get|post|put|patch|delete|all|use|route|handle|HandleFunc|Handle|GET|POST|PUT|DELETE|PATCH|Group|group|resource|apiResource|match|any)\(\s*['"`]"#;
const TEST_RE: &str =
    r#"^\s*(?:await\s+)?(?:describe|it|test|context|suite|scenario)(?:\.\w+)?\(\s*['"`]"#;
const DECORATOR_RE: &str = r"^\s*@[A-Za-z_][\w.]*(?:\(.*\))?\s*$";
const C_FUNCTION_RE: &str = r"^[A-Za-z_][\w:<>,*& ]*[\s*&]+[A-Za-z_][\w:~]*\s*\([^;()]*(?:\([^()]*\)[^;()]*)*\)\s*(?:const\s*)?(?:noexcept\s*)?\{?\s*$";
const TOP_CONST_RE: &str = r"^(?:export\s+)?(?:(?:const|let|var|val|static|pub\s+const|pub\s+static)\s+[A-Za-z_$][\w$]*|[A-Z][A-Z0-9_]{2,}\s*(?::[^=]{1,40})?=)";
const FIELD_RE: &str = r#"^\s+(?:(?:pub|readonly|public|private|protected|static|declare)\s+)*[A-Za-z_$][\w$]*\??!?\s*:\s*[^=;,\s:][^=;]{0,80}(?:\s*=\s*[^=].{0,60})?[;,]?\s*$"#;
const GO_FIELD_RE: &str = r"^\s+[A-Z]\w*\s+[*\[\]\w.]+(?:\s+`[^`]*`)?\s*$";
const JAVA_FIELD_RE: &str = r"^\s*(?:(?:private|public|protected|internal)\s+)(?:(?:static|final|readonly|const|volatile|transient)\s+)*[\w<>\[\],.? ]+\s+[A-Za-z_]\w*\s*(?:=.*)?;\s*$";
static IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"^\s*(?:import(?-u:\b)|from\s+\S+\s+import(?-u:\b)|use\s+[\w:{]|using\s+[\w.]+;|#include(?-u:\b)|require(?:_once)?\s*\(|(?:const|let|var)\s+[\w${}, ]+\s*=\s*require\()"#,
    )
});
/// `IMPORT.is_match(body)` for a line that does not start with `#` (`t`
/// trimmed). `import` decides alone (`import\b`: the next byte is not an
/// ASCII word byte); the other alternatives go to the regex only when the
/// line has what they need: the white space after their word (any
/// non-ASCII character may be some), and `import` after `from`, `;` after
/// `using`, `require(` after `const`, `let` or `var`.
fn is_import(body: &str, t: &str) -> bool {
    let b = t.as_bytes();
    if let Some(rest) = b.strip_prefix(b"import") {
        return !rest
            .first()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
    }
    let space_at = |n: usize| b.get(n).is_some_and(|c| ascii_space(*c) || !c.is_ascii());
    let maybe = match b.first() {
        Some(b'f') => b.starts_with(b"from") && space_at(4) && t.contains("import"),
        Some(b'u') if b.starts_with(b"using") => space_at(5) && t.contains(';'),
        Some(b'u') => b.starts_with(b"use") && space_at(3),
        Some(b'r') => b.strip_prefix(b"require").is_some_and(|r| {
            let r = r.strip_prefix(b"_once").unwrap_or(r);
            r.first()
                .is_some_and(|c| *c == b'(' || ascii_space(*c) || !c.is_ascii())
        }),
        Some(b'c') => b.starts_with(b"const") && space_at(5) && calls_require(b),
        Some(b'l') => b.starts_with(b"let") && space_at(3) && calls_require(b),
        Some(b'v') => b.starts_with(b"var") && space_at(3) && calls_require(b),
        _ => false,
    };
    maybe && IMPORT.is_match(body)
}

/// True when `b` holds `require(`.
fn calls_require(b: &[u8]) -> bool {
    memchr::memchr_iter(b'(', b).any(|i| i >= 7 && b.get(i - 7..i) == Some(b"require"))
}
static SQL_STMT: LazyLock<Regex> = LazyLock::new(|| re(SQL_STMT_RE));
static SQL_COLUMN: LazyLock<Regex> = LazyLock::new(|| re(SQL_COLUMN_RE));
static HEADING: LazyLock<Regex> = LazyLock::new(|| re(r"^\s{0,3}#{1,6}\s+\S"));
static YAML_KEY: LazyLock<Regex> =
    LazyLock::new(|| re(r#"^(\s*)(?:-\s+)?["']?[\w.$/-]+["']?\s*:(?:\s|$)"#));
static JSON_KEY: LazyLock<Regex> = LazyLock::new(|| re(r#"^(\s*)"[^"]{1,80}"\s*:"#));
static INI_LINE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*(?:\[[^\]]+\]|[A-Za-z_][\w.-]*\s*[=:]|export\s+[A-Z_]\w*=)"));
static CSS_SELECTOR: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*(?:[.#@:\w\[*&>~+-][^;{}]*)\{\s*$"));

/// Control-flow keywords a statement starts with.
const W_CONTROL: u16 = 1;
/// STRUCTURE's keywords, as [`word_at`] cuts them (`macro_rules!` and
/// `function*` without their marks).
const W_KEYWORD: u16 = 2;
/// STRUCTURE's modifiers (each followed by white space in a match).
const W_MODIFIER: u16 = 4;
/// TYPED_METHOD's modifiers (at least one starts a match).
const W_TYPED: u16 = 8;
/// METHOD's modifiers.
const W_METHOD: u16 = 16;
/// TEST's names.
const W_TEST: u16 = 32;
/// ARROW_FN's words (after `export` perhaps).
const W_BINDING: u16 = 64;
/// The words of TOP_CONST (a line at column 0 that starts with one).
const W_TOP: u16 = 128;
/// JAVA_FIELD's access words.
const W_ACCESS: u16 = 256;
/// FIELD's modifiers.
const W_FIELD: u16 = 512;

/// The sets (`W_*`) the first word `w` of a line is in, found once: one
/// test of its length, then of the few words of that length.
fn word_class(w: &str) -> u16 {
    match w.len() {
        2 => match w {
            "do" => W_CONTROL,
            "fn" => W_KEYWORD,
            "if" => W_CONTROL,
            "it" => W_TEST,
            _ => 0,
        },
        3 => match w {
            "def" => W_KEYWORD,
            "for" => W_CONTROL,
            "fun" => W_KEYWORD | W_METHOD,
            "get" => W_METHOD,
            "let" => W_BINDING | W_TOP,
            "mod" => W_KEYWORD,
            "pub" => W_MODIFIER | W_TOP | W_FIELD,
            "set" => W_METHOD,
            "sub" => W_KEYWORD,
            "try" => W_CONTROL,
            "val" => W_TOP,
            "var" => W_BINDING | W_TOP,
            _ => 0,
        },
        4 => match w {
            "data" => W_MODIFIER,
            "defn" => W_KEYWORD,
            "else" => W_CONTROL,
            "enum" => W_KEYWORD,
            "func" => W_KEYWORD,
            "impl" => W_KEYWORD,
            "lock" => W_CONTROL,
            "open" => W_MODIFIER,
            "proc" => W_KEYWORD,
            "test" => W_TEST,
            "type" => W_KEYWORD,
            "when" => W_CONTROL,
            "with" => W_CONTROL,
            _ => 0,
        },
        5 => match w {
            "async" => W_MODIFIER | W_TYPED | W_METHOD,
            "catch" => W_CONTROL,
            "class" => W_KEYWORD,
            "const" => W_MODIFIER | W_BINDING | W_TOP,
            "final" => W_MODIFIER | W_TYPED | W_METHOD,
            "fixed" => W_CONTROL,
            "local" => W_MODIFIER,
            "match" => W_CONTROL,
            "suite" => W_TEST,
            "trait" => W_KEYWORD,
            "union" => W_KEYWORD,
            "until" => W_CONTROL,
            "using" => W_CONTROL,
            "while" => W_CONTROL,
            _ => 0,
        },
        6 => match w {
            "elseif" => W_CONTROL,
            "export" => W_MODIFIER | W_TOP,
            "extern" => W_MODIFIER,
            "global" => W_MODIFIER,
            "inline" => W_MODIFIER,
            "module" => W_KEYWORD,
            "native" => W_TYPED,
            "object" => W_KEYWORD,
            "public" => W_MODIFIER | W_TYPED | W_METHOD | W_ACCESS | W_FIELD,
            "record" => W_KEYWORD,
            "return" => W_CONTROL,
            "sealed" => W_MODIFIER,
            "static" => W_MODIFIER | W_TYPED | W_METHOD | W_TOP | W_FIELD,
            "struct" => W_KEYWORD,
            "switch" => W_CONTROL,
            "unless" => W_CONTROL,
            "unsafe" => W_MODIFIER,
            _ => 0,
        },
        7 => match w {
            "context" => W_TEST,
            "declare" => W_MODIFIER | W_FIELD,
            "default" => W_MODIFIER,
            "foreach" => W_CONTROL,
            "message" => W_KEYWORD,
            "partial" => W_MODIFIER,
            "private" => W_MODIFIER | W_TYPED | W_METHOD | W_ACCESS | W_FIELD,
            "service" => W_KEYWORD,
            "suspend" => W_MODIFIER | W_METHOD,
            "typedef" => W_KEYWORD,
            "virtual" => W_MODIFIER | W_TYPED | W_METHOD,
            _ => 0,
        },
        8 => match w {
            "abstract" => W_MODIFIER | W_TYPED | W_METHOD,
            "contract" => W_KEYWORD,
            "describe" => W_TEST,
            "function" => W_KEYWORD,
            "internal" => W_MODIFIER | W_TYPED | W_METHOD | W_ACCESS,
            "override" => W_MODIFIER | W_TYPED | W_METHOD,
            "protocol" => W_KEYWORD,
            "readonly" => W_MODIFIER | W_METHOD | W_FIELD,
            "resource" => W_KEYWORD,
            "scenario" => W_TEST,
            _ => 0,
        },
        9 => match w {
            "defmodule" => W_KEYWORD,
            "extension" => W_KEYWORD,
            "interface" => W_KEYWORD,
            "namespace" => W_KEYWORD,
            "protected" => W_MODIFIER | W_TYPED | W_METHOD | W_ACCESS | W_FIELD,
            _ => 0,
        },
        11 => match w {
            "macro_rules" => W_KEYWORD,
            _ => 0,
        },
        12 => match w {
            "synchronized" => W_CONTROL | W_TYPED | W_METHOD,
            _ => 0,
        },
        _ => 0,
    }
}

#[cfg(test)]
fn first_word(body: &str) -> &str {
    word_at(body.trim_start())
}

/// The word `t` starts with (letters, digits, `_`, `$`).
fn word_at(t: &str) -> &str {
    // ASCII bytes decide alone; from the first non-ASCII one, characters.
    let b = t.as_bytes();
    let ascii = b
        .iter()
        .take_while(|c| TERM_BYTES[**c as usize] & T_WORD != 0)
        .count();
    let end = match b.get(ascii) {
        Some(c) if !c.is_ascii() => t
            .get(ascii..)
            .and_then(|r| r.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')))
            .map_or(t.len(), |k| ascii + k),
        Some(_) => ascii,
        None => t.len(),
    };
    t.get(..end).unwrap_or("")
}

fn indent_of(body: &str) -> usize {
    let mut n = 0;
    for (i, c) in body.bytes().enumerate() {
        match c {
            b'\t' => n += 4,
            b' ' | b'\n' | b'\r' | 0x0b | 0x0c => n += 1,
            0x80.. => return n + indent_of_chars(body.get(i..).unwrap_or("")),
            _ => return n,
        }
    }
    n
}

/// [`indent_of`] of `body`, given `t`: `body` trimmed, not empty (so `t`
/// starts where the leading white space of `body` ends).
fn indent_before(body: &str, t: &str) -> usize {
    let ws = (t.as_ptr() as usize).saturating_sub(body.as_ptr() as usize);
    match body.get(..ws) {
        Some(lead) if lead.is_ascii() => ws + 3 * lead.bytes().filter(|c| *c == b'\t').count(),
        Some(lead) => indent_of_chars(lead),
        None => indent_of(body),
    }
}

/// [`indent_of`] character by character (Unicode white space).
fn indent_of_chars(body: &str) -> usize {
    body.chars()
        .take_while(|c| c.is_whitespace())
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// True for a Markdown heading (`## Setup`).
pub fn is_heading(line: &str) -> bool {
    // `#` is the first character after the white space.
    line.trim_start().starts_with('#') && HEADING.is_match(line)
}

/// The first bytes (after ASCII white space) of a line of code that
/// declares nothing and changes no [`OutlineState`] out of comment and
/// style blocks: ASCII punctuation but `/` (a comment may open), `<` (a
/// `<style>`, `<template>` or `<script>` tag), `#` (`#include`,
/// `#define`) and what a declaration may start with (`_`, `$`, `@`).
/// A blank line (every byte ASCII white space) declares nothing either.
static NEVER_DECLARES: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 128 {
        let b = c as u8;
        t[c] = b.is_ascii_punctuation() && !matches!(b, b'/' | b'<' | b'#' | b'_' | b'$' | b'@');
        c += 1;
    }
    t
};

/// Tracks multi-line state (style blocks, comment blocks) while scanning a file.
#[derive(Debug, Default)]
pub struct OutlineState {
    in_style: bool,
    in_block_comment: bool,
}

/// The most lines a [`LineRanks`] remembers (about 2 MB of table at most);
/// lines past it are ranked as they come, unremembered.
const LINE_RANKS_CAP: usize = 1 << 16;

/// The lines a [`LineRanks`] has room for at first.
const LINE_RANKS_START: usize = 1 << 10;

/// The ranks of the lines of code and data an outline has looked at, for
/// the lines of later files of the same conversation (an agent reads a file
/// again, a part of it, or after an edit): a line met again is not tested
/// again. Only what the rank of a line depends on is remembered, and only
/// where the line would go to the tests that cost (the patterns and their
/// prefilters): the kind of text, and the line itself, its bytes keyed by a
/// 64-bit hash of them (foldhash's quality hash, a seed for each kind), so
/// no line is copied; two lines would have to share all 64 bits to be
/// taken one for the other. At most [`LINE_RANKS_CAP`] lines.
#[derive(Debug, Default)]
pub struct LineRanks(foldhash::HashMap<u64, Option<Rank>>);

/// The seeds of [`LineRanks`]' hashes, one for each place a rank is
/// remembered (a kind of text).
static RANK_SEEDS: [foldhash::quality::FixedState; 7] = {
    use foldhash::quality::FixedState;
    [
        FixedState::with_seed(0x6f75_746c_0000),
        FixedState::with_seed(0x6f75_746c_0001),
        FixedState::with_seed(0x6f75_746c_0002),
        FixedState::with_seed(0x6f75_746c_0003),
        FixedState::with_seed(0x6f75_746c_0004),
        FixedState::with_seed(0x6f75_746c_0005),
        FixedState::with_seed(0x6f75_746c_0006),
    ]
};

impl LineRanks {
    /// `rank()`, the rank of `body` in a text of kind `lang` (from a state
    /// that `rank` neither reads nor changes), remembered.
    #[inline]
    fn get_or(
        &mut self,
        lang: Lang,
        body: &str,
        rank: impl FnOnce() -> Option<Rank>,
    ) -> Option<Rank> {
        use std::hash::BuildHasher as _;
        let key = RANK_SEEDS
            .get(lang as usize)
            .map_or(0, |s| s.hash_one(body.as_bytes()));
        let full = self.0.len() >= LINE_RANKS_CAP;
        if self.0.capacity() == 0 {
            // Room for the lines of a few files at once.
            self.0.reserve(LINE_RANKS_START);
        }
        match self.0.entry(key) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                let r = rank();
                if !full {
                    e.insert(r);
                }
                r
            }
        }
    }
}

/// The rank of `body` as a declaration in a file of kind `lang`, or `None`
/// when it is not one; `ranks` remembers the ranks of lines met before.
pub fn declaration(
    body: &str,
    lang: Lang,
    st: &mut OutlineState,
    ranks: &mut LineRanks,
) -> Option<Rank> {
    let start = leading_space(body.as_bytes());
    if lang == Lang::Code
        && !st.in_block_comment
        && !st.in_style
        && body
            .as_bytes()
            .get(start)
            .is_none_or(|c| NEVER_DECLARES[*c as usize])
    {
        return None;
    }
    declaration_of_trimmed(body, trim_after(body, start), lang, st, ranks)
}

/// [`declaration`] without its first-byte exit nor its memo (the reference
/// of the tests).
#[cfg(test)]
fn declaration_reference(body: &str, lang: Lang, st: &mut OutlineState) -> Option<Rank> {
    declaration_of_trimmed(body, trim(body), lang, st, &mut LineRanks::default())
}

/// [`declaration`] of `body`, `t` its [`trim`].
fn declaration_of_trimmed(
    body: &str,
    t: &str,
    lang: Lang,
    st: &mut OutlineState,
    ranks: &mut LineRanks,
) -> Option<Rank> {
    if t.is_empty() || t.len() > 400 {
        return None;
    }
    // Comment blocks and comment lines never declare anything.
    if st.in_block_comment {
        if t.contains("*/") {
            st.in_block_comment = false;
        }
        return None;
    }
    if t.starts_with("/*") {
        st.in_block_comment = !t.contains("*/");
        return None;
    }
    if t.starts_with("//") || t.starts_with("* ") || t == "*" || t.starts_with("--") {
        return None;
    }
    match lang {
        // A heading's `#` is its first character after the white space.
        Lang::Doc => (t.starts_with('#') && HEADING.is_match(body)).then_some(Rank::Structure),
        Lang::Yaml => {
            if t.starts_with('#') {
                return None;
            }
            ranks.get_or(lang, body, || {
                if !YAML_KEY.is_match(body) {
                    return None;
                }
                // The key's group `(\s*)` is all the leading white space
                // (what follows it is no white space): the line's
                // indentation.
                match indent_of(body) {
                    0 => Some(Rank::Structure),
                    1..=4 => Some(Rank::Member),
                    _ => None,
                }
            })
        }
        Lang::Json => ranks.get_or(lang, body, || {
            if !JSON_KEY.is_match(body) {
                return None;
            }
            // As for YAML: the group is all the leading white space.
            match indent_of(body) {
                0..=2 => Some(Rank::Structure),
                3..=4 => Some(Rank::Member),
                _ => None,
            }
        }),
        Lang::Ini => {
            if t.starts_with('#') || t.starts_with(';') {
                return None;
            }
            if t.starts_with('[') {
                return Some(Rank::Structure);
            }
            ranks.get_or(lang, body, || {
                INI_LINE.is_match(body).then_some(Rank::Member)
            })
        }
        Lang::Sql => ranks.get_or(lang, body, || {
            if SQL_STMT.is_match(body) {
                Some(Rank::Structure)
            } else if SQL_COLUMN.is_match(body) {
                Some(Rank::Member)
            } else {
                None
            }
        }),
        Lang::Css => ranks.get_or(lang, body, || {
            CSS_SELECTOR.is_match(body).then_some(Rank::Structure)
        }),
        Lang::Code => code_declaration(body, t, st, ranks),
    }
}

fn code_declaration(
    body: &str,
    t: &str,
    st: &mut OutlineState,
    ranks: &mut LineRanks,
) -> Option<Rank> {
    // Single-file components: the <style> block is CSS.
    if t.starts_with("<style") {
        st.in_style = true;
        return Some(Rank::Structure);
    }
    if st.in_style {
        if t.starts_with("</style") {
            st.in_style = false;
            return None;
        }
        return CSS_SELECTOR.is_match(body).then_some(Rank::Member);
    }
    if t.starts_with("<template") || t.starts_with("<script") {
        return Some(Rank::Structure);
    }
    if t.starts_with('#') && !t.starts_with("#include") && !t.starts_with("#define") {
        return None;
    }
    if t.starts_with("#define") {
        return Some(Rank::Member);
    }
    // Statements and expressions nested deeper than a few levels, and lines
    // opening with punctuation, declare nothing.
    let indent = indent_before(body, t);
    if indent > 12
        || !t
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '@'))
    {
        return None;
    }
    ranks.get_or(Lang::Code, body, || code_rank(body, t, indent))
}

/// The rank of a line of code `body` (`t` its [`trim`], starting with a
/// character a declaration may start with; `indent` its [`indent_of`], 12
/// or less) out of style and comment blocks.
fn code_rank(body: &str, t: &str, indent: usize) -> Option<Rank> {
    if is_import(body, t) {
        return Some(Rank::Import);
    }
    // `t` starts where `body.trim_start()` does, and white space ends a word.
    let word = word_at(t);
    let class = word_class(word);
    if class & W_CONTROL != 0 {
        return None;
    }
    // Only the STRUCTURE, SQL_STMT and ARROW_FN alternatives can match a
    // line without a parenthesis (the others all need a literal `(`).
    let open = memchr::memchr(b'(', t.as_bytes());
    let structure = if open.is_some() {
        &*CODE_STRUCTURE
    } else {
        &*CODE_STRUCTURE_NO_PAREN
    };
    // Most lines are statements: the cheap necessary conditions below keep
    // them away from the regexes (a regex call costs more than the line).
    if maybe_structure(body, t, word, class, open) && structure.is_match(body) {
        return Some(Rank::Structure);
    }
    if (maybe_member(body, t, word, class) && CODE_MEMBER.is_match(body))
        || (indent <= 4 && maybe_field(body, t, word, class) && CODE_FIELD.is_match(body))
    {
        return Some(Rank::Member);
    }
    None
}

/// SQL_STMT's first words (any case).
const SQL_STMT_WORDS: &[&str] = &["create", "alter", "drop"];

/// `t` after its first word `w` and the white space that follows it;
/// `None` when no white space follows.
fn after_word<'a>(t: &'a str, w: &str) -> Option<&'a str> {
    let after = t.get(w.len()..)?;
    let next = after.trim_start();
    (next.len() < after.len()).then_some(next)
}

/// False only when STRUCTURE cannot match `t` (a line, trimmed): from its
/// start, modifiers each followed by white space (`pub` perhaps with
/// `(crate)`), then a keyword. A modifier is never a keyword, nor a keyword
/// followed by what STRUCTURE wants after one (white space, `<` or `(`) the
/// start of a modifier, so the words decide in order; and what ends a
/// keyword or a modifier in a match (white space, `<`, `(`, `*`, `!`) ends
/// a [`word_at`] word too.
fn maybe_structure_keyword(t: &str, word: &str, class: u16) -> bool {
    let mut rest = t;
    let (mut w, mut class) = (word, class);
    loop {
        if class & W_KEYWORD != 0 {
            return true;
        }
        if class & W_MODIFIER == 0 {
            return false;
        }
        let mut after = rest.get(w.len()..).unwrap_or("");
        if w == "pub" && after.starts_with('(') {
            // `pub(crate)`: `\([\w:]+\)`, else no modifier.
            let Some(close) = after.find(')') else {
                return false;
            };
            let inner = after.get(1..close).unwrap_or("");
            if inner.is_empty()
                || !inner
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b':') || !c.is_ascii())
            {
                return false;
            }
            after = after.get(close + 1..).unwrap_or("");
        }
        let next = after.trim_start();
        if next.len() == after.len() {
            return false;
        }
        rest = next;
        w = word_at(rest);
        class = word_class(w);
    }
}

/// False only when ARROW_FN cannot match `t` (a line, trimmed, that starts
/// with its words): what follows the first `=` (the one after the name and
/// its type, which hold none), after white space and perhaps `async`, must
/// be `function`, `(`, or a name followed by `=>`. A name cut short by a
/// non-ASCII character (which `\w` may take) passes.
fn maybe_arrow(t: &str) -> bool {
    let Some(eq) = memchr::memchr(b'=', t.as_bytes()) else {
        return false;
    };
    let value = t.get(eq + 1..).unwrap_or("").trim_start();
    let fits = |v: &str| {
        if v.starts_with("function") || v.starts_with('(') {
            return true;
        }
        match v.as_bytes().first() {
            Some(c) if c.is_ascii_alphabetic() || matches!(c, b'_' | b'$') => {
                let after = v.get(word_at(v).len()..).unwrap_or("");
                after.starts_with(|c: char| !c.is_ascii()) || after.trim_start().starts_with("=>")
            }
            Some(c) => !c.is_ascii(),
            None => false,
        }
    };
    fits(value)
        || value
            .strip_prefix("async")
            .is_some_and(|v| fits(v.trim_start()))
}

/// False only when ROUTE cannot match `t` (a line, trimmed; `open` the
/// index of its first `(`): `[\w.]+\.METHOD` up to that `(`.
fn maybe_route(t: &str, open: usize) -> bool {
    let head = t.as_bytes().get(..open).unwrap_or(&[]);
    let Some(dot) = head.iter().rposition(|c| *c == b'.') else {
        return false;
    };
    let (Some(base), Some(method)) = (head.get(..dot), head.get(dot + 1..)) else {
        return false;
    };
    !base.is_empty()
        && base
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.') || !c.is_ascii())
        && matches!(
            method,
            b"get"
                | b"post"
                | b"put"
                | b"patch"
                | b"delete"
                | b"all"
                | b"use"
                | b"route"
                | b"handle"
                | b"HandleFunc"
                | b"Handle"
                | b"GET"
                | b"POST"
                | b"PUT"
                | b"DELETE"
                | b"PATCH"
                | b"Group"
                | b"group"
                | b"resource"
                | b"apiResource"
                | b"match"
                | b"any"
        )
}

/// False only when no alternative of [`CODE_STRUCTURE`] (with a `(` at
/// `open` of `t`, else [`CODE_STRUCTURE_NO_PAREN`]) can match `body` (`t`
/// trimmed, `word` its first word):
/// - STRUCTURE needs its modifiers then a keyword (see
///   [`maybe_structure_keyword`]), SQL_STMT its first word;
/// - ARROW_FN `const`, `let` or `var` first (perhaps after `export`), and
///   a value that may be a function (see [`maybe_arrow`]);
/// - TEST and ROUTE a quote after a `(`, TEST its name first (perhaps after
///   `await`), ROUTE `[\w.]+\.METHOD` before its first `(` (see
///   [`maybe_route`]);
/// - TYPED_METHOD one of its modifiers first, no `;` after the first `(`,
///   and an end in `)`, `{` or a `throws` list;
/// - METHOD an indented line that ends with `{`, whose first word is a
///   modifier or a name followed by `(` or `<`;
/// - C_FUNCTION a line at column 0 that ends with `{`, `)`, `const` or
///   `noexcept`, with white space, `*` or `&` before its first `(` (between
///   the type and the name).
///
/// A first word cut short by a non-ASCII character (which `\w` may take)
/// passes.
fn maybe_structure(body: &str, t: &str, word: &str, class: u16, open: Option<usize>) -> bool {
    if maybe_structure_keyword(t, word, class)
        || ((4..=6).contains(&word.len())
            && SQL_STMT_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word)))
    {
        return true;
    }
    // `export` starts ARROW_FN only before one of the others.
    let binding = if word == "export" {
        after_word(t, word).filter(|r| word_class(word_at(r)) & W_BINDING != 0)
    } else {
        (class & W_BINDING != 0).then_some(t)
    };
    if binding.is_some_and(maybe_arrow) {
        return true;
    }
    let Some(open) = open else {
        return false;
    };
    let test = class & W_TEST != 0
        || (word == "await"
            && after_word(t, word).is_some_and(|r| word_class(word_at(r)) & W_TEST != 0));
    if (test || maybe_route(t, open)) && quote_after_paren(body) {
        return true;
    }
    if class & W_TYPED != 0
        && t.get(open..)
            .is_some_and(|r| memchr::memchr(b';', r.as_bytes()).is_none())
        && (t.ends_with(')') || t.ends_with('{') || t.contains("throws"))
    {
        return true;
    }
    if body.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        // At column 0 `t` starts where `body` does.
        let ends =
            t.ends_with('{') || t.ends_with(')') || t.ends_with("const") || t.ends_with("noexcept");
        let head = t.get(..open).unwrap_or("");
        return ends && head.contains(|c: char| c.is_whitespace() || c == '*' || c == '&');
    }
    if !(body.starts_with(char::is_whitespace) && t.ends_with('{')) {
        return false;
    }
    let rest = t.get(word.len()..).unwrap_or("").trim_start();
    class & W_METHOD != 0
        || rest.starts_with(['(', '<'])
        || rest.starts_with(|c: char| !c.is_ascii())
}

/// True when some `(` of `s` is followed, after white space, by a quote.
fn quote_after_paren(s: &str) -> bool {
    s.match_indices('(').any(|(i, _)| {
        s.get(i + 1..)
            .and_then(|r| r.trim_start().chars().next())
            .is_some_and(|c| matches!(c, '\'' | '"' | '`'))
    })
}

/// SQL_COLUMN's type names.
#[cfg(test)]
const SQL_TYPES: &[&str] = &[
    "int",
    "integer",
    "bigint",
    "smallint",
    "tinyint",
    "serial",
    "bigserial",
    "varchar",
    "nvarchar",
    "char",
    "character",
    "text",
    "bool",
    "boolean",
    "date",
    "datetime",
    "time",
    "timestamp",
    "timestamptz",
    "uuid",
    "json",
    "jsonb",
    "decimal",
    "numeric",
    "float",
    "double",
    "real",
    "blob",
    "bytea",
    "enum",
    "money",
    "inet",
    "interval",
];

/// True when `rest` could start with one of SQL_COLUMN's type names as its
/// case-insensitive match sees it: an ASCII prefix in any case, or any
/// non-ASCII character (Unicode case folding maps some to ASCII letters).
fn maybe_sql_type(rest: &str) -> bool {
    let b = rest.as_bytes();
    let Some(&first) = b.first() else {
        return false;
    };
    if !first.is_ascii() {
        return true;
    }
    // The names (one of a name and its extensions, e.g. `int` for
    // `integer`) by first letter (an ASCII letter folds to no other
    // letter's case).
    let names: &[&[u8]] = match first.to_ascii_lowercase() {
        b'b' => &[b"bigint", b"bigserial", b"bool", b"blob", b"bytea"],
        b'c' => &[b"char"],
        b'd' => &[b"date", b"decimal", b"double"],
        b'e' => &[b"enum"],
        b'f' => &[b"float"],
        b'i' => &[b"int", b"inet"],
        b'j' => &[b"json"],
        b'm' => &[b"money"],
        b'n' => &[b"nvarchar", b"numeric"],
        b'r' => &[b"real"],
        b's' => &[b"smallint", b"serial"],
        b't' => &[b"tinyint", b"text", b"time"],
        b'u' => &[b"uuid"],
        b'v' => &[b"varchar"],
        _ => return false,
    };
    // A non-ASCII character among the first twelve: the first non-ASCII
    // byte comes before byte 12 (every character before it is one byte).
    if !b.get(..12).unwrap_or(b).is_ascii() {
        return true;
    }
    names.iter().any(|ty| {
        b.get(..ty.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(ty))
    })
}

/// False only when no alternative of [`CODE_MEMBER`] can match `body` (`t`
/// trimmed, `word` its first word, `class` the sets of that word):
/// DECORATOR needs a leading `@`; TOP_CONST a line at column 0 that starts
/// with one of its words, or with a capital and holds a `=`; JAVA_FIELD an
/// access word and a closing `;`; SQL_COLUMN an indented line whose first
/// token is a name (perhaps quoted) and whose second starts with a type
/// name (see [`maybe_sql_type`]).
fn maybe_member(body: &str, t: &str, word: &str, class: u16) -> bool {
    if t.starts_with('@') || (class & W_ACCESS != 0 && t.ends_with(';')) {
        return true;
    }
    if !body.starts_with(char::is_whitespace) {
        return class & W_TOP != 0
            || (body.starts_with(|c: char| c.is_ascii_uppercase())
                && memchr::memchr(b'=', body.as_bytes()).is_some());
    }
    // SQL_COLUMN's first token: `[`"\[]?[a-z_][\w]*[`"\]]?` (any case),
    // then white space. A name cut short by a non-ASCII character (which
    // `\w` may take) goes the long way.
    let second = if t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        let after = t.get(word.len()..).unwrap_or("");
        let after = after.strip_prefix(['`', '"', ']']).unwrap_or(after);
        match after.as_bytes().first() {
            Some(c) if ascii_space(*c) => after.get(1..),
            Some(c) if !c.is_ascii() => after_first_space(t),
            _ => return false,
        }
    } else {
        after_first_space(t)
    };
    second.is_some_and(|rest| maybe_sql_type(rest.trim_start()))
}

/// What follows the first white space of `t` (as `split_once` on
/// [`char::is_whitespace`] cuts it).
fn after_first_space(t: &str) -> Option<&str> {
    for (i, c) in t.bytes().enumerate() {
        if ascii_space(c) {
            return t.get(i + 1..);
        }
        if !c.is_ascii() {
            return t
                .get(i..)?
                .split_once(char::is_whitespace)
                .map(|(_, rest)| rest);
        }
    }
    None
}

/// False only when no alternative of [`CODE_FIELD`] can match `body` (`t`
/// trimmed, `word` its first word, `class` the sets of that word). Both
/// need an indented line; GO_FIELD one that starts with a capital and white
/// space after its first word; FIELD, after modifiers each followed by
/// white space, a name, `?` and `!` perhaps, `:` and a type that does not
/// open with `=`, `;`, `,` or `:`. A word cut short by a non-ASCII
/// character (which `\w` may take) passes.
fn maybe_field(body: &str, t: &str, word: &str, class: u16) -> bool {
    if !body.starts_with(char::is_whitespace) {
        return false;
    }
    let ends_word = |after: &str| after.starts_with(|c: char| c.is_whitespace() || !c.is_ascii());
    if t.starts_with(|c: char| c.is_ascii_uppercase()) && t.get(word.len()..).is_some_and(ends_word)
    {
        return true;
    }
    let (mut rest, mut w, mut class) = (t, word, class);
    loop {
        let after = rest.get(w.len()..).unwrap_or("");
        if !w.is_empty() && typed_after_name(after) {
            return true;
        }
        if class & W_FIELD == 0 {
            return false;
        }
        match after_word(rest, w) {
            Some(next) => {
                rest = next;
                w = word_at(rest);
                class = word_class(w);
            }
            None => return false,
        }
    }
}

/// True when `after` (what follows a name) may be FIELD's `\??!?\s*:\s*`
/// and a first type character (not white space, `=`, `;`, `,` or `:`); a
/// non-ASCII first character passes.
fn typed_after_name(after: &str) -> bool {
    if after.starts_with(|c: char| !c.is_ascii()) {
        return true;
    }
    let a = after.strip_prefix('?').unwrap_or(after);
    let a = a.strip_prefix('!').unwrap_or(a);
    let Some(ty) = a.trim_start().strip_prefix(':') else {
        return false;
    };
    ty.trim_start()
        .chars()
        .next()
        .is_some_and(|c| !matches!(c, '=' | ';' | ',' | ':'))
}

/// The patterns `parts` as one regex, each alternative in a group. Only the
/// union is compiled (the parts alone are not needed).
fn any_of(parts: &[&str]) -> Regex {
    let joined: Vec<String> = parts.iter().map(|p| format!("(?:{p})")).collect();
    re(&joined.join("|"))
}

/// The structure patterns as one regex (one scan per line).
static CODE_STRUCTURE: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        STRUCTURE_RE,
        SQL_STMT_RE,
        ARROW_FN_RE,
        ROUTE_RE,
        TEST_RE,
        TYPED_METHOD_RE,
        METHOD_RE,
        C_FUNCTION_RE,
    ])
});
/// [`CODE_STRUCTURE`] without the alternatives that need a `(`.
static CODE_STRUCTURE_NO_PAREN: LazyLock<Regex> =
    LazyLock::new(|| any_of(&[STRUCTURE_RE, SQL_STMT_RE, ARROW_FN_RE]));
static CODE_MEMBER: LazyLock<Regex> =
    LazyLock::new(|| any_of(&[DECORATOR_RE, TOP_CONST_RE, JAVA_FIELD_RE, SQL_COLUMN_RE]));
static CODE_FIELD: LazyLock<Regex> = LazyLock::new(|| any_of(&[GO_FIELD_RE, FIELD_RE]));

static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?:(?-u:\b)error(?-u:\b)|(?-u:\b)Error(?-u:\b)|ERROR|FAILED|(?-u:\b)FAIL(?-u:\b)|(?-u:\b)failed(?-u:\b)|[Pp]anic|Traceback|[A-Z]\w*(?:Error|Exception)(?-u:\b)|(?-u:\b)exception(?-u:\b)|(?-u:\b)fatal(?-u:\b)|FATAL|Segmentation fault|command not found|No such file|[Pp]ermission denied|✗|✘|✖|^\s*(?:x|×)\s+\d+\s)",
    )
});
static ZERO_FAIL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)0\s+(?:failed|errors?|failures?)(?-u:\b)|(?-u:\b)(?:failed|errors?|failures?)\W{0,2}\s*0(?-u:\b)",
    )
});

/// True when the line reports an error (and not "0 failed" / "errors: 0").
/// Both alternatives of [`ZERO_FAIL`] hold the literal `0` (which case
/// folding maps to nothing else): a line without one is not searched.
pub fn is_error_line(line: &str) -> bool {
    ERROR_LINE.is_match(line)
        && !(memchr::memchr(b'0', line.as_bytes()).is_some() && ZERO_FAIL.is_match(line))
}

/// What every alternative of [`ERROR_LINE`] holds but its first-column
/// `x` one: a literal (a whole-text search for them is fast, a per-line
/// regex is not).
static ERROR_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        "rror|RROR|FAIL|ailed|anic|Traceback|xception|atal|ATAL|Segmentation fault|command not found|No such file|ermission denied|✗|✘|✖",
    )
});

/// For each of `lines` (cut from `text` by [`split_numbered`]), false when
/// [`is_error_line`] is false for it: the line holds none of the literals
/// of `ERROR_WORDS` (found in one search of `text`; none spans a line break,
/// nor a line-number prefix and the line after it) and does not start
/// with `x` or `×` after white space.
pub fn error_line_candidates(text: &str, lines: &[Line<'_>]) -> Vec<bool> {
    let base = text.as_ptr() as usize;
    let mut hits = ERROR_WORDS.find_iter(text).map(|m| m.start()).peekable();
    lines
        .iter()
        .map(|l| {
            let Some(start) = (l.body.as_ptr() as usize)
                .checked_sub(base)
                .filter(|s| s + l.body.len() <= text.len())
            else {
                return true;
            };
            while hits.next_if(|h| *h < start).is_some() {}
            let t = l.body.trim_start();
            hits.peek().is_some_and(|h| *h < start + l.body.len())
                || t.starts_with('x')
                || t.starts_with('×')
        })
        .collect()
}

static COUNT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:(?-u:\b)\d+\s+(?:passed|failed|tests?|specs?|errors?|warnings?|matches|files?|lines|skipped|pending|suites?|examples?|assertions?|failures?|succeeded|changed|insertions?|deletions?|packages?|vulnerabilit(?:y|ies)|problems?|modules?|rows?)(?-u:\b)|^\s*(?:tests?|test suites|test files|duration|time|ran)\s*:|^(?:ok|FAIL|PASS|---\s*(?:PASS|FAIL))\s|(?-u:\b)ran\s+\d+\s+tests?|^=+\s.*\s=+$|(?-u:\b)exit(?:ed)?\s+(?:with\s+)?(?:code|status)(?-u:\b)|(?-u:\b)build\s+(?:succeeded|failed|successful)(?-u:\b)|(?-u:\b)compiled\s+successfully(?-u:\b)|(?i:(?-u:\b)(?:agent|session|task|job|process|container|request|run|build|chunk)[ _-]?id(?-u:\b)))",
    )
});

static DIAGNOSTIC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:[A-Za-z]:)?[^\s:]+\.\w{1,6}(?::\d+){1,2}:?\s|^\s*(?:[A-Za-z]:)?[^\s:(]+\.\w{1,6}\(\d+,\d+\):\s",
    )
});

/// True for a compiler-style location line (`src/a.go:5:2: ...`,
/// `src/a.ts(72,57): ...`): in the output of a failed command, a diagnostic.
pub fn is_diagnostic(line: &str) -> bool {
    DIAGNOSTIC.is_match(line)
}

/// True for a line that states counts or an outcome (test summaries, match
/// counts, exit status).
pub fn is_count_line(line: &str) -> bool {
    COUNT_LINE.is_match(line)
}

static REF: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"https?://[^\s)"'<>`\]]+|(?:[A-Za-z]:[\\/]|~?/)?(?:[\w.@-]+[\\/])+[\w.-]+\.[A-Za-z0-9]{1,6}(?-u:\b)|(?-u:\b)[A-Z][A-Za-z]*(?:Error|Exception)(?-u:\b)"#,
    )
});

/// Paths, URLs and error names mentioned in `text`, in order of first
/// appearance, without duplicates, at most `max`.
pub fn references(text: &str, max: usize) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    if max > 0 {
        push_references(text, max, &mut out);
    }
    out
}

/// Where to search for the next match of [`REF`] at or after `at` of `b`:
/// the start of the white-space-free run that holds the first of what
/// every match holds, or `None` when `b` holds none after `at` (then no
/// match starts there). A match holds no white space, and a URL holds
/// `://`, a path a separator with a `.` after it, an error name `Error`
/// or `Exception`; so the first match starting at or after `at` starts in
/// or after that run. (The search itself is
/// [`reference_search_start_from`]; this is its form without a hint, which
/// the tests use.)
#[cfg(test)]
fn reference_search_start(b: &[u8], at: usize) -> Option<usize> {
    reference_search_start_from(b, at, at)
}

/// Where to search for the next match of [`REF`] at or after `at` of `b`
/// (as `reference_search_start` describes it), given `from`: no byte of `b`
/// from `at` up to `from` is a `/`, a `\\` or an `E`, so the search for
/// them starts at `from` (or at `at` when that is later).
fn reference_search_start_from(b: &[u8], at: usize, from: usize) -> Option<usize> {
    let error_name = |k: usize| {
        b.get(k + 1..)
            .is_some_and(|r| r.starts_with(b"rror") || r.starts_with(b"xception"))
    };
    let mut i = from.max(at);
    loop {
        let k = i + find_reference_mark(b.get(i..)?)?;
        let holds = if b.get(k) == Some(&b'E') {
            i = k + 1;
            error_name(k)
        } else {
            // A separator: the rest of its run holds what a match needs
            // (`://`, a `.` after a separator, an error name) or nothing
            // of the run is searched again.
            let mut holds = k > 0 && b.get(k - 1) == Some(&b':');
            let mut j = k + 1;
            while let Some(&c) = b.get(j) {
                if holds || ascii_space(c) {
                    break;
                }
                holds = match c {
                    b'.' => true,
                    b'/' => b.get(j - 1) == Some(&b':'),
                    b'E' => error_name(j),
                    _ => false,
                };
                j += 1;
            }
            i = j;
            holds
        };
        if holds {
            let run = b
                .get(at..k)
                .and_then(|r| r.iter().rposition(|c| ascii_space(*c)))
                .map_or(at, |p| at + p + 1);
            return Some(run);
        }
    }
}

/// The first `/`, `\\` or `E` of `b` (as `memchr3` finds it), a byte at a
/// time when `b` is short (a line's rest: a search call costs more).
#[inline]
fn find_reference_mark(b: &[u8]) -> Option<usize> {
    if b.len() <= 32 {
        b.iter().position(|&c| matches!(c, b'/' | b'\\' | b'E'))
    } else {
        memchr::memchr3(b'/', b'\\', b'E', b)
    }
}

/// [`references`] of the lines `lines` joined by line breaks, without
/// joining them: no reference spans a line break (each alternative of
/// [`REF`] stops at white space), and a line without a slash, a backslash,
/// `Error` or `Exception` holds none (a URL has `://`, a path a separator,
/// an error name its suffix), so it is not searched.
pub fn references_in_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    if max == 0 {
        return out;
    }
    for l in lines {
        if push_references(l, max, &mut out) {
            break;
        }
    }
    out
}

/// [`references_in_lines`] of the bodies of `lines` but those whose
/// indices `shown` holds (in increasing order), found from `text`, the text
/// [`split_numbered`] cut `lines` from: a line without a `/`, a `\` or an
/// `E` holds no reference (the bytes [`reference_search_start`] looks for),
/// so the search goes from one such byte of `text` to the next, and only
/// the lines it lands in (not shown) are searched, each once. Lines that
/// are not slices of `text` in increasing order are searched one by one.
pub fn references_outside<'a>(
    text: &str,
    lines: &[Line<'a>],
    shown: &[usize],
    max: usize,
) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    if max == 0 {
        return out;
    }
    let base = text.as_ptr() as usize;
    // Where each line's body starts in `text`, and where it ends.
    let span = |l: &Line<'_>| {
        let start = (l.body.as_ptr() as usize).checked_sub(base)?;
        let end = start + l.body.len();
        (end <= text.len()).then_some((start, end))
    };
    let mut last_end = 0;
    let in_order = lines.iter().all(|l| match span(l) {
        Some((start, end)) if start >= last_end => {
            last_end = end;
            true
        }
        _ => false,
    });
    if !in_order {
        let mut shown = shown.iter().copied().peekable();
        let rest = lines
            .iter()
            .enumerate()
            .filter(move |(i, _)| {
                while shown.next_if(|s| s < i).is_some() {}
                shown.next_if_eq(i).is_none()
            })
            .map(|(_, l)| l.body);
        return references_in_lines(rest, max);
    }
    let b = text.as_bytes();
    let mut shown = shown.iter().copied().peekable();
    let (mut at, mut i) = (0usize, 0usize);
    while let Some(hit) = b
        .get(at..)
        .and_then(|r| memchr::memchr3(b'/', b'\\', b'E', r))
        .map(|k| at + k)
    {
        // The line whose body ends after the hit.
        while lines
            .get(i)
            .and_then(span)
            .is_some_and(|(_, end)| end <= hit)
        {
            i += 1;
        }
        let Some((l, (start, end))) = lines.get(i).and_then(|l| Some((l, span(l)?))) else {
            break;
        };
        if hit < start {
            // Between bodies (a line break, a number prefix).
            at = hit + 1;
            continue;
        }
        at = end;
        while shown.next_if(|s| *s < i).is_some() {}
        if shown.next_if_eq(&i).is_some() {
            continue;
        }
        // No mark before the hit in this body: the search starts there.
        if push_references_from(l.body, hit - start, max, &mut out) {
            break;
        }
    }
    out
}

/// Add the references of `text` to `out` (see [`references`]); true once
/// `out` holds `max`. The matches of [`REF`] in order, each searched from
/// [`reference_search_start_from`] (the regex runs only where a match can
/// be).
fn push_references<'a>(text: &'a str, max: usize, out: &mut Vec<&'a str>) -> bool {
    push_references_from(text, 0, max, out)
}

/// [`push_references`] of `text`, given `first`: no byte of `text` before
/// it is a `/`, a `\\` or an `E` (the first search starts there).
fn push_references_from<'a>(
    text: &'a str,
    first: usize,
    max: usize,
    out: &mut Vec<&'a str>,
) -> bool {
    let mut at = 0;
    while let Some(start) = reference_search_start_from(text.as_bytes(), at, first) {
        let Some(m) = REF.find_at(text, start) else {
            break;
        };
        at = m.end();
        let s = m.as_str().trim_end_matches(['.', ',', ':', ';']);
        if s.len() < 4 || s.len() > 200 || out.contains(&s) {
            continue;
        }
        out.push(s);
        if out.len() >= max {
            return true;
        }
    }
    false
}

#[cfg(test)]
fn is_snake(w: &[u8]) -> bool {
    // [a-z][a-z0-9]*(_[a-z0-9]+)+, in one pass: lower-case letters and
    // digits, single underscores between them, at least one.
    if !w.first().is_some_and(u8::is_ascii_lowercase) || w.last() == Some(&b'_') {
        return false;
    }
    let mut underscores = 0;
    let mut prev_underscore = false;
    for &c in w {
        if c == b'_' {
            if prev_underscore {
                return false;
            }
            underscores += 1;
            prev_underscore = true;
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            prev_underscore = false;
        } else {
            return false;
        }
    }
    underscores > 0
}

#[cfg(test)]
fn humps(w: &[u8]) -> usize {
    // Count [A-Z][a-z0-9]+ humps covering the rest of `w`; 0 when it does not fit.
    let mut n = 0;
    let mut i = 0;
    while i < w.len() {
        if !w.get(i).is_some_and(u8::is_ascii_uppercase) {
            return 0;
        }
        let start = i;
        i += 1;
        while w
            .get(i)
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            i += 1;
        }
        if i == start + 1 {
            return 0;
        }
        n += 1;
    }
    n
}

#[cfg(test)]
fn is_camel_or_pascal(w: &[u8]) -> bool {
    match w.first() {
        Some(c) if c.is_ascii_lowercase() => {
            // [a-z]+ then humps
            let k = w.iter().take_while(|c| c.is_ascii_lowercase()).count();
            w.get(k..).is_some_and(|rest| humps(rest) >= 1)
        }
        Some(c) if c.is_ascii_uppercase() => humps(w) >= 2,
        _ => false,
    }
}

/// The classes of bytes the identifier automaton reads ([`WORD_CLASS`]).
const W_OTHER: u8 = 0;
const W_LOWER: u8 = 1;
const W_UPPER: u8 = 2;
const W_DIGIT: u8 = 3;
const W_UNDERSCORE: u8 = 4;
/// `.`: ends a word of a run.
const W_DOT: u8 = 5;
/// `/` or `-`: ends a word and a segment of a run.
const W_SEP: u8 = 6;

/// The class of each byte for the identifier automaton ([`IDENT`]).
static WORD_CLASS: [u8; 256] = {
    let mut t = [W_OTHER; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = if c.is_ascii_lowercase() {
            W_LOWER
        } else if c.is_ascii_uppercase() {
            W_UPPER
        } else if c.is_ascii_digit() {
            W_DIGIT
        } else if c == b'_' {
            W_UNDERSCORE
        } else if c == b'.' {
            W_DOT
        } else if c == b'/' || c == b'-' {
            W_SEP
        } else {
            W_OTHER
        };
        i += 1;
    }
    t
};

/// States of the identifier automaton: no identifier whatever follows.
const I_REJECT: u8 = 0;
/// Nothing read.
const I_START: u8 = 1;
/// `[a-z]+`: the head of a snake_case or camelCase word.
const I_LOWER: u8 = 2;
/// `[a-z][a-z0-9]*` with a digit: only snake_case can follow.
const I_SNAKE_HEAD: u8 = 3;
/// snake_case just after an underscore.
const I_SNAKE_MARK: u8 = 4;
/// `[a-z][a-z0-9]*(_[a-z0-9]+)+`: snake_case (accepting).
const I_SNAKE: u8 = 5;
/// The capital of a hump after the first of camelCase or PascalCase.
const I_HUMP_START: u8 = 6;
/// `[a-z]+([A-Z][a-z0-9]+)+` or `([A-Z][a-z0-9]+){2,}`: camelCase or
/// PascalCase (accepting).
const I_HUMP: u8 = 7;
/// The capital of the first hump of PascalCase.
const I_FIRST_CAP: u8 = 8;
/// The first hump of PascalCase, `[A-Z][a-z0-9]+`.
const I_FIRST_HUMP: u8 = 9;

/// The identifier automaton: the next state by state and [`WORD_CLASS`]
/// (rows padded to sixteen states and eight classes, so that indexing
/// needs no check). It reads snake_case, camelCase and PascalCase at
/// once: [`is_identifier`] and the words of [`split_run`].
static IDENT: [[u8; 8]; 16] = {
    let mut t = [[I_REJECT; 8]; 16];
    let (l, u, d, us) = (
        W_LOWER as usize,
        W_UPPER as usize,
        W_DIGIT as usize,
        W_UNDERSCORE as usize,
    );
    t[I_START as usize][l] = I_LOWER;
    t[I_START as usize][u] = I_FIRST_CAP;
    t[I_LOWER as usize][l] = I_LOWER;
    t[I_LOWER as usize][u] = I_HUMP_START;
    t[I_LOWER as usize][d] = I_SNAKE_HEAD;
    t[I_LOWER as usize][us] = I_SNAKE_MARK;
    t[I_SNAKE_HEAD as usize][l] = I_SNAKE_HEAD;
    t[I_SNAKE_HEAD as usize][d] = I_SNAKE_HEAD;
    t[I_SNAKE_HEAD as usize][us] = I_SNAKE_MARK;
    t[I_SNAKE_MARK as usize][l] = I_SNAKE;
    t[I_SNAKE_MARK as usize][d] = I_SNAKE;
    t[I_SNAKE as usize][l] = I_SNAKE;
    t[I_SNAKE as usize][d] = I_SNAKE;
    t[I_SNAKE as usize][us] = I_SNAKE_MARK;
    t[I_HUMP_START as usize][l] = I_HUMP;
    t[I_HUMP_START as usize][d] = I_HUMP;
    t[I_HUMP as usize][l] = I_HUMP;
    t[I_HUMP as usize][d] = I_HUMP;
    t[I_HUMP as usize][u] = I_HUMP_START;
    t[I_FIRST_CAP as usize][l] = I_FIRST_HUMP;
    t[I_FIRST_CAP as usize][d] = I_FIRST_HUMP;
    t[I_FIRST_HUMP as usize][l] = I_FIRST_HUMP;
    t[I_FIRST_HUMP as usize][d] = I_FIRST_HUMP;
    t[I_FIRST_HUMP as usize][u] = I_HUMP_START;
    t
};

/// Not a state: the byte read was `.` (a word of a run ends).
const I_DOT_END: u8 = 14;
/// Not a state: the byte read was `/` or `-` (a word and a segment end).
const I_SEP_END: u8 = 15;

/// [`IDENT`] by byte rather than class: one look-up a byte. `.`, `/` and
/// `-` lead from every state to [`I_DOT_END`] or [`I_SEP_END`], which lead
/// nowhere ([`I_REJECT`] on any byte).
static IDENT_BYTES: [[u8; 256]; 16] = {
    let mut t = [[I_REJECT; 256]; 16];
    let mut state = 0;
    while state < 14 {
        let mut c = 0;
        while c < 256 {
            let class = WORD_CLASS[c];
            t[state][c] = if class == W_DOT {
                I_DOT_END
            } else if class == W_SEP {
                I_SEP_END
            } else {
                IDENT[state][class as usize]
            };
            c += 1;
        }
        state += 1;
    }
    t
};

/// One step of the identifier automaton: the state after `state` reads `c`
/// (or [`I_DOT_END`], [`I_SEP_END`] at a word's end).
#[inline(always)]
fn ident_step(state: u8, c: u8) -> u8 {
    IDENT_BYTES[(state & 15) as usize][c as usize]
}

/// Whether the automaton accepts in `state`.
#[inline(always)]
fn ident_accepts(state: u8) -> bool {
    state == I_SNAKE || state == I_HUMP
}

/// A compound identifier: snake_case, camelCase or PascalCase, read in one
/// pass (a word's first byte that fits none ends the reading).
fn is_identifier(w: &[u8]) -> bool {
    let mut state = I_START;
    for &c in w {
        state = ident_step(state, c);
        if state == I_REJECT {
            return false;
        }
    }
    ident_accepts(state)
}

fn is_version(w: &[u8]) -> bool {
    // v?\d+.\d+.\d+
    let w = w.strip_prefix(b"v").unwrap_or(w);
    let mut parts = 0;
    let mut len = 0;
    for c in w {
        if *c == b'.' {
            if len == 0 {
                return false;
            }
            parts += 1;
            len = 0;
        } else if c.is_ascii_digit() {
            len += 1;
        } else {
            return false;
        }
    }
    len > 0 && parts == 2
}

fn is_path(run: &[u8]) -> bool {
    let Some(slash) = run.iter().rposition(|c| *c == b'/') else {
        return false;
    };
    let name = run.get(slash + 1..).unwrap_or(&[]);
    match name.iter().rposition(|c| *c == b'.') {
        Some(dot) if dot > 0 => {
            let ext = name.get(dot + 1..).unwrap_or(&[]);
            (1..=6).contains(&ext.len())
                && ext.iter().all(u8::is_ascii_alphanumeric)
                && ext.iter().any(u8::is_ascii_alphabetic)
        }
        _ => false,
    }
}

const T_TOK: u8 = 1;
/// `_` or `/`.
const T_MARK: u8 = 2;
const T_UPPER: u8 = 4;
const T_DIGIT: u8 = 8;
const T_DOT: u8 = 16;
/// `-`, `/` or `.`: the bytes that split a run into segments and parts.
const T_SPLIT: u8 = 32;
/// `_`.
const T_UNDERSCORE: u8 = 64;
/// ASCII letters and digits, `_` and `$`: the bytes of a first word.
const T_WORD: u8 = 128;

/// Byte classes for [`for_each_term`].
static TERM_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        let mut k = 0;
        if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'/') {
            k |= T_TOK;
        }
        if c == b'_' || c == b'/' {
            k |= T_MARK;
        }
        if c.is_ascii_uppercase() {
            k |= T_UPPER;
        }
        if c.is_ascii_digit() {
            k |= T_DIGIT;
        }
        if c == b'.' {
            k |= T_DOT;
        }
        if matches!(c, b'-' | b'/' | b'.') {
            k |= T_SPLIT;
        }
        if c == b'_' {
            k |= T_UNDERSCORE;
        }
        if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$') {
            k |= T_WORD;
        }
        t[i] = k;
        i += 1;
    }
    t
};

/// Call `f` with each information-bearing term of `text`: paths (with an
/// extension), compound identifiers (camelCase, PascalCase, snake_case,
/// which covers error names) and versions. Bare numbers, sizes and hashes
/// are left out: in tool output they are mostly progress and timing noise.
/// With `json_escaped`, backslash escapes (`\n`, `\"`, `\u00e9`) separate
/// terms, so raw JSON argument text reads like its decoded strings.
pub fn for_each_term<'a>(text: &'a str, json_escaped: bool, f: impl FnMut(&'a str)) {
    // One copy of the scan per mode: the escape test is not made on every
    // byte of plain text.
    if json_escaped {
        scan_terms::<true, true>(text, f);
    } else {
        scan_terms::<false, true>(text, f);
    }
}

/// Where the scan of [`for_each_term`] must look: the first byte at or
/// after `from` that is `_`, `/`, an upper-case letter after a lower-case
/// letter or a digit, a dot after a digit, or (`JSON_ESCAPED`) a
/// backslash. Every run holding a term holds one (a path has a slash, a
/// version a digit before a dot, snake_case an underscore, camelCase and
/// PascalCase a capital after a letter or digit), so the runs before it
/// are skipped unread. `from` must not be inside a run (the byte before
/// it is not looked at).
#[cfg(all(test, target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn next_trigger<const JSON_ESCAPED: bool>(bytes: &[u8], from: usize) -> Option<usize> {
    use ctxpress_core::text::sse2::{eq, in_range as range};
    use safe_arch::{
        bitand_m128i, bitor_m128i, byte_shl_imm_u128_m128i, load_unaligned_m128i, m128i,
        move_mask_i8_m128i,
    };
    // The triggers of the lane `v`, whose bytes are preceded by those of
    // `prev` (the lane one byte earlier): one mask, one move.
    let hits = |v: m128i, prev: m128i| {
        let mut direct = bitor_m128i(eq(v, b'/'), eq(v, b'_'));
        if JSON_ESCAPED {
            direct = bitor_m128i(direct, eq(v, b'\\'));
        }
        let digit_before = range(prev, b'0', 10);
        let word_before = bitor_m128i(digit_before, range(prev, b'a', 26));
        let hit = bitor_m128i(
            direct,
            bitor_m128i(
                bitand_m128i(range(v, b'A', 26), word_before),
                bitand_m128i(eq(v, b'.'), digit_before),
            ),
        );
        move_mask_i8_m128i(hit) as u32
    };
    let rest = bytes.get(from..)?;
    if let Some(first) = rest.first_chunk::<16>() {
        // The byte before `from` is not looked at: the first lane's
        // previous bytes are its own, shifted, after a zero.
        let v = load_unaligned_m128i(first);
        let hit = hits(v, byte_shl_imm_u128_m128i::<1>(v));
        if hit != 0 {
            return Some(from + hit.trailing_zeros() as usize);
        }
        let mut at = from + 16;
        // Each lane with the sixteen bytes that end one byte later.
        while let Some(pair) = bytes.get(at - 1..).and_then(|r| r.first_chunk::<17>()) {
            let (Some(prev), Some(lane)) = (pair.first_chunk::<16>(), pair.last_chunk::<16>())
            else {
                break;
            };
            let hit = hits(load_unaligned_m128i(lane), load_unaligned_m128i(prev));
            if hit != 0 {
                return Some(at + hit.trailing_zeros() as usize);
            }
            at += 16;
        }
        // The last bytes (fewer than sixteen), after the byte before them,
        // padded with zeros (no zero byte is a trigger).
        let tail = bytes.get(at - 1..)?;
        let mut pair = [0u8; 17];
        pair.get_mut(..tail.len())?.copy_from_slice(tail);
        let (Some(prev), Some(lane)) = (pair.first_chunk::<16>(), pair.last_chunk::<16>()) else {
            return None;
        };
        let hit = hits(load_unaligned_m128i(lane), load_unaligned_m128i(prev));
        return (hit != 0).then(|| at + hit.trailing_zeros() as usize);
    }
    // Fewer than sixteen bytes in all, padded with zeros.
    let mut lane = [0u8; 16];
    lane.get_mut(..rest.len())?.copy_from_slice(rest);
    let v = load_unaligned_m128i(&lane);
    let hit = hits(v, byte_shl_imm_u128_m128i::<1>(v));
    (hit != 0).then(|| from + hit.trailing_zeros() as usize)
}

/// [`next_trigger`] a byte at a time (elsewhere than on x86-64, and the
/// tests' check of the SIMD lanes).
#[cfg(test)]
fn next_trigger_bytes<const JSON_ESCAPED: bool>(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let mut prev = 0u8;
    rest.iter()
        .position(|&c| {
            let hit = matches!(c, b'_' | b'/')
                || (JSON_ESCAPED && c == b'\\')
                || (c.is_ascii_uppercase() && (prev.is_ascii_lowercase() || prev.is_ascii_digit()))
                || (c == b'.' && prev.is_ascii_digit());
            prev = c;
            hit
        })
        .map(|k| from + k)
}

#[cfg(all(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
use next_trigger_bytes as next_trigger;

/// The classes of 64 bytes of a text, a bit a byte (bit `k`: the block's
/// byte `k`; bytes past the text's end are zeros, in no class). The scan
/// of [`for_each_term`] finds runs, their triggers and their terms with
/// bit operations on these instead of a loop over the bytes.
#[derive(Clone, Copy, Default)]
struct Block {
    lower: u64,
    upper: u64,
    digit: u64,
    under: u64,
    slash: u64,
    dot: u64,
    /// Term bytes ([`T_TOK`]): ASCII letters and digits, `_`, `.`, `-`, `/`.
    tok: u64,
    /// `\`: only looked for in JSON-escaped text.
    escape: u64,
}

/// The bits below bit `n` (all of them from 64 on).
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    if n >= 64 { !0 } else { (1u64 << n) - 1 }
}

/// The bits from bit `n` on (none from 64 on).
#[inline(always)]
fn bits_from(n: usize) -> u64 {
    if n >= 64 { 0 } else { !0u64 << n }
}

impl Block {
    /// The classes of the 64 bytes of `bytes` from `at` (zeros past its end).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn of<const JSON_ESCAPED: bool>(bytes: &[u8], at: usize) -> Block {
        use ctxpress_core::text::sse2::{eq, in_range};
        use safe_arch::{load_unaligned_m128i, m128i, move_mask_i8_m128i};
        let mut buf = [0u8; 64];
        let rest = bytes.get(at..).unwrap_or(&[]);
        let chunk = match rest.first_chunk::<64>() {
            Some(c) => c,
            None => {
                if let Some(head) = buf.get_mut(..rest.len()) {
                    head.copy_from_slice(rest);
                }
                &buf
            }
        };
        let mut b = Block::default();
        let mut dash = 0u64;
        for (k, lane) in chunk.chunks_exact(16).enumerate() {
            let Ok(lane) = <&[u8; 16]>::try_from(lane) else {
                continue;
            };
            let v = load_unaligned_m128i(lane);
            let at = 16 * k;
            let bits = |m: m128i| u64::from(move_mask_i8_m128i(m) as u16) << at;
            b.lower |= bits(in_range(v, b'a', 26));
            b.upper |= bits(in_range(v, b'A', 26));
            b.digit |= bits(in_range(v, b'0', 10));
            b.under |= bits(eq(v, b'_'));
            b.slash |= bits(eq(v, b'/'));
            b.dot |= bits(eq(v, b'.'));
            dash |= bits(eq(v, b'-'));
            if JSON_ESCAPED {
                b.escape |= bits(eq(v, b'\\'));
            }
        }
        b.tok = b.lower | b.upper | b.digit | b.under | b.slash | b.dot | dash;
        b
    }

    /// The classes of the 64 bytes of `bytes` from `at` (zeros past its
    /// end), a byte at a time (elsewhere than on x86-64).
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    fn of<const JSON_ESCAPED: bool>(bytes: &[u8], at: usize) -> Block {
        Block::of_bytes::<JSON_ESCAPED>(bytes, at)
    }

    /// [`Block::of`] a byte at a time (elsewhere than on x86-64, and the
    /// tests' check of the SIMD lanes).
    #[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
    fn of_bytes<const JSON_ESCAPED: bool>(bytes: &[u8], at: usize) -> Block {
        let mut b = Block::default();
        for (k, &c) in bytes.get(at..).unwrap_or(&[]).iter().take(64).enumerate() {
            let bit = 1u64 << k;
            let set = |m: &mut u64, yes: bool| {
                if yes {
                    *m |= bit;
                }
            };
            set(&mut b.lower, c.is_ascii_lowercase());
            set(&mut b.upper, c.is_ascii_uppercase());
            set(&mut b.digit, c.is_ascii_digit());
            set(&mut b.under, c == b'_');
            set(&mut b.slash, c == b'/');
            set(&mut b.dot, c == b'.');
            set(&mut b.tok, TERM_BYTES[c as usize] & T_TOK != 0);
            set(&mut b.escape, JSON_ESCAPED && c == b'\\');
        }
        b
    }

    /// The triggers of the block (see [`for_each_term`]'s scan): `_`, `/`,
    /// a capital after a lower-case letter or a digit, a dot after a digit,
    /// and (`JSON_ESCAPED`) `\`; `before` is the block before it.
    #[inline(always)]
    fn triggers<const JSON_ESCAPED: bool>(&self, before: &Block) -> u64 {
        let word = self.lower | self.digit;
        let word_before = word << 1 | (before.lower | before.digit) >> 63;
        let digit_before = self.digit << 1 | before.digit >> 63;
        let mut t =
            self.under | self.slash | (self.upper & word_before) | (self.dot & digit_before);
        if JSON_ESCAPED {
            t |= self.escape;
        }
        t
    }

    /// The classes a run needs of the 64 bytes from bit `off` (0 to 63) of
    /// `self` on, `next` being the block after it (`tok` and `escape` left
    /// out: every byte of a run is a term byte).
    #[inline(always)]
    fn window(&self, next: &Block, off: usize) -> Block {
        // `b << (64 - off)` in two steps, so that `off == 0` shifts out all.
        let w = |a: u64, b: u64| a >> off | (b << 1) << (63 - off);
        Block {
            lower: w(self.lower, next.lower),
            upper: w(self.upper, next.upper),
            digit: w(self.digit, next.digit),
            under: w(self.under, next.under),
            slash: w(self.slash, next.slash),
            dot: w(self.dot, next.dot),
            tok: 0,
            escape: 0,
        }
    }
}

/// Whether the word of `n` bytes (1 to 64) whose classes are `lower`,
/// `upper`, `digit` and `under` (bit 0: its first byte; every byte in one
/// of them) is a compound identifier: [`is_identifier`] by bit operations.
#[inline(always)]
fn is_identifier_bits(lower: u64, upper: u64, digit: u64, under: u64, n: usize) -> bool {
    let Some(last) = n.checked_sub(1).and_then(|k| 1u64.checked_shl(k as u32)) else {
        return false;
    };
    if under != 0 {
        // snake_case: `[a-z][a-z0-9]*(_[a-z0-9]+)+`.
        return upper == 0 && lower & 1 != 0 && under & (under >> 1) == 0 && under & last == 0;
    }
    // camelCase `[a-z]+([A-Z][a-z0-9]+)+`, PascalCase `([A-Z][a-z0-9]+){2,}`:
    // no capital after another nor last.
    if upper & (upper >> 1) != 0 || upper & last != 0 {
        return false;
    }
    if lower & 1 != 0 {
        // A capital, and no digit before the first.
        upper != 0 && digit & ((upper & upper.wrapping_neg()) - 1) == 0
    } else {
        // Two capitals, the first first.
        upper & 1 != 0 && upper & (upper - 1) != 0
    }
}

/// The terms of the run `start..start + n` of `text` (1 to 64 bytes; not
/// a term byte either side, or the scan's start before it), whose classes
/// are `w` (bit 0: its first byte): as [`run_terms_bytes`] finds them.
#[inline(always)]
fn run_terms_bits<'a, const FAST: bool>(
    text: &'a str,
    start: usize,
    n: usize,
    w: &Block,
    f: &mut impl FnMut(&'a str),
) {
    let r = low_bits(n);
    let (lower, upper, digit, under) = (w.lower & r, w.upper & r, w.digit & r, w.under & r);
    let (slash, dot) = (w.slash & r, w.dot & r);
    let mark = under | slash;
    let upper_inside = upper & !1;
    let dotted_number = digit != 0 && dot != 0;
    if mark == 0 && upper_inside == 0 && !dotted_number {
        return;
    }
    // `-`, `/` and `.`.
    let split = r & !(lower | upper | digit | under);
    let term = |a: usize, b: usize| text.get(start + a..start + b);
    if FAST && split == 0 {
        if is_identifier_bits(lower, upper, digit, under, n)
            && let Some(t) = term(0, n)
        {
            f(t);
        }
        return;
    }
    // Trimmed of `.`, `-` and `/` at both ends.
    let keep = r & !split;
    if keep == 0 {
        return;
    }
    let a = keep.trailing_zeros() as usize;
    let b = 64 - keep.leading_zeros() as usize;
    if mark != 0
        && is_path_bits(lower | upper | digit, lower | upper, slash, dot, a, b)
        && let Some(t) = term(a, b)
    {
        f(t);
    }
    let identifiers = under != 0 || upper_inside != 0;
    if !(identifiers || dotted_number) {
        return;
    }
    // As `split_run`: each word between splits an identifier or not, each
    // segment between `/` and `-` a version or not (reported as it ends).
    let seps = split & !dot;
    let bytes = text.as_bytes();
    let version = |s: usize, e: usize| {
        let seg = bytes.get(start + s..start + e)?;
        (seg.first()
            .is_some_and(|c| c.is_ascii_digit() || *c == b'v')
            && is_version(seg))
        .then(|| term(s, e))
        .flatten()
    };
    // The splits inside the trimmed run: its last byte is none, so a word
    // after one starts before bit 64.
    let inner = split & low_bits(b);
    let mut seg = a;
    let mut word = a;
    loop {
        let ends = inner & u64::MAX.wrapping_shl(word as u32);
        let end = if ends == 0 {
            b
        } else {
            ends.trailing_zeros() as usize
        };
        if identifiers && end > word {
            // One to 64 bits.
            let wm = u64::MAX.wrapping_shr((64 - (end - word)) as u32);
            let at = |m: u64| (m >> word) & wm;
            if is_identifier_bits(at(lower), at(upper), at(digit), at(under), end - word)
                && let Some(t) = term(word, end)
            {
                f(t);
            }
        }
        if end >= b {
            break;
        }
        if seps >> end & 1 != 0 {
            if let Some(t) = version(seg, end) {
                f(t);
            }
            seg = end + 1;
        }
        word = end + 1;
    }
    if let Some(t) = version(seg, b) {
        f(t);
    }
}

/// [`is_path`] of the trimmed run `a..b` of a window by its classes:
/// a slash, then a name with a dot after its first byte, then an extension
/// of one to six letters and digits with a letter.
#[inline(always)]
fn is_path_bits(alnum: u64, alpha: u64, slash: u64, dot: u64, a: usize, b: usize) -> bool {
    let run = bits_from(a) & low_bits(b);
    let slashes = slash & run;
    if slashes == 0 {
        return false;
    }
    let name = (64 - slashes.leading_zeros() as usize).min(b);
    let dots = dot & bits_from(name + 1) & low_bits(b);
    if dots == 0 {
        return false;
    }
    let ext_start = 64 - dots.leading_zeros() as usize;
    let ext = bits_from(ext_start) & low_bits(b);
    let len = b - ext_start;
    (1..=6).contains(&len) && alnum & ext == ext && alpha & ext != 0
}

/// The terms of the run `start..end` of `text` read a byte at a time: the
/// scan's way with a run longer than 64 bytes.
fn run_terms_bytes<'a, const FAST: bool>(
    text: &'a str,
    start: usize,
    end: usize,
    f: &mut impl FnMut(&'a str),
) {
    let bytes = text.as_bytes();
    let Some(run) = bytes.get(start..end) else {
        return;
    };
    let first = run.first().map_or(0, |c| TERM_BYTES[*c as usize]);
    let upper_inside = run
        .iter()
        .skip(1)
        .fold(0u8, |k, c| k | TERM_BYTES[*c as usize]);
    let seen = first | upper_inside;
    let interesting = seen & T_MARK != 0 || upper_inside & T_UPPER != 0;
    if !(interesting || (seen & T_DIGIT != 0 && seen & T_DOT != 0)) {
        return;
    }
    if FAST && seen & T_SPLIT == 0 {
        if is_identifier(run)
            && let Some(t) = text.get(start..end)
        {
            f(t);
        }
        return;
    }
    let split = |c: &u8| matches!(c, b'.' | b'-' | b'/');
    let a = start + run.iter().take_while(|c| split(c)).count();
    let b = (end - run.iter().rev().take_while(|c| split(c)).count()).max(a);
    let (Some(run), Some(run_str)) = (bytes.get(a..b), text.get(a..b)) else {
        return;
    };
    if seen & T_MARK != 0 && is_path(run) {
        f(run_str);
    }
    let identifiers = seen & T_UNDERSCORE != 0 || upper_inside & T_UPPER != 0;
    if identifiers || (seen & T_DIGIT != 0 && seen & T_DOT != 0) {
        split_run(run, run_str, identifiers, f);
    }
}

/// The scan of [`for_each_term`]; `FAST` takes the short cut for plain
/// words (the tests compare it with the long way).
///
/// The text is read 64 bytes at a time ([`Block`]): the triggers of a
/// block are its bits, and the run through a trigger ends at the nearest
/// non-term bytes either side of it, found in the block's bits or its
/// neighbours'; a run of at most 64 bytes is judged and split on the bits
/// of a window over the two blocks it lies in, a longer one a byte at a
/// time ([`run_terms_bytes`]). [`scan_terms_walk`] (tests) is the scan it
/// answers as.
fn scan_terms<'a, const JSON_ESCAPED: bool, const FAST: bool>(
    text: &'a str,
    mut f: impl FnMut(&'a str),
) {
    let bytes = text.as_bytes();
    let len = bytes.len();
    let is_tok = |k: usize| {
        bytes
            .get(k)
            .is_some_and(|c| TERM_BYTES[*c as usize] & T_TOK != 0)
    };
    let mut prev = Block::default();
    let mut cur = Block::of::<JSON_ESCAPED>(bytes, 0);
    let mut base = 0usize;
    // Everything before `i` is done: it is never inside a run, except
    // after an escape (a run then starts at `i`).
    let mut i = 0usize;
    while base < len {
        let next = if base + 64 < len {
            Block::of::<JSON_ESCAPED>(bytes, base + 64)
        } else {
            Block::default()
        };
        let mut triggers = cur.triggers::<JSON_ESCAPED>(&prev);
        loop {
            triggers &= bits_from(i.saturating_sub(base));
            if triggers == 0 {
                break;
            }
            let t = triggers.trailing_zeros() as usize;
            // The bits below the trigger's.
            let below = (triggers & triggers.wrapping_neg()).wrapping_sub(1);
            let p = base + t;
            if JSON_ESCAPED && cur.escape >> t & 1 != 0 {
                i = p + if bytes.get(p + 1) == Some(&b'u') {
                    6
                } else {
                    2
                };
                continue;
            }
            // The run's start: after the last non-term byte before `p`.
            let before = !cur.tok & below;
            let start = if before != 0 {
                base + 64 - before.leading_zeros() as usize
            } else if i >= base {
                i
            } else if !prev.tok != 0 {
                base - (!prev.tok).leading_zeros() as usize
            } else {
                // Longer than the block before: walked back.
                let mut s = base - 64;
                while s > i && is_tok(s - 1) {
                    s -= 1;
                }
                s
            }
            .max(i);
            // Its end: the first non-term byte after `p`.
            let after = !cur.tok & !below;
            let end = if after != 0 {
                base + after.trailing_zeros() as usize
            } else if !next.tok != 0 {
                base + 64 + (!next.tok).trailing_zeros() as usize
            } else {
                let mut e = base + 128;
                while is_tok(e) {
                    e += 1;
                }
                e
            };
            let n = end - start;
            if n <= 64 && start + 64 >= base {
                let w = if start < base {
                    prev.window(&cur, start + 64 - base)
                } else {
                    cur.window(&next, start - base)
                };
                run_terms_bits::<FAST>(text, start, n, &w, &mut f);
            } else {
                run_terms_bytes::<FAST>(text, start, end, &mut f);
            }
            i = end;
        }
        prev = cur;
        cur = next;
        base += 64;
    }
}

/// The scan of [`for_each_term`] as it was before it read the classes of
/// 64 bytes at a time ([`Block`]): it searched the next trigger
/// ([`next_trigger`]) and walked a byte at a time to the start and the end
/// of its run (the tests compare the two). `FAST` takes the short cut for
/// plain words.
#[cfg(test)]
fn scan_terms_walk<'a, const JSON_ESCAPED: bool, const FAST: bool>(
    text: &'a str,
    mut f: impl FnMut(&'a str),
) {
    let bytes = text.as_bytes();
    // Never inside a run.
    let mut i = 0;
    loop {
        let Some(p) = next_trigger::<JSON_ESCAPED>(bytes, i) else {
            return;
        };
        let c = bytes.get(p).copied().unwrap_or(0);
        if JSON_ESCAPED && c == b'\\' {
            i = p + if bytes.get(p + 1) == Some(&b'u') {
                6
            } else {
                2
            };
            continue;
        }
        // The run through `p` starts after the last non-run byte before it
        // (no escape lies between `i` and `p`). Only runs with an
        // underscore, a slash, an inner capital or a dotted number can hold
        // a term: plain words are skipped without splitting. The classes of
        // the bytes from the run's second through `p` are or-ed on the way
        // back to its start (`first`: those of the byte reached last), those
        // after `p` on the way to its end: each byte is read once.
        let mut start = p;
        let mut first = TERM_BYTES[c as usize];
        let mut upper_inside = 0u8;
        while start > i {
            let k = bytes.get(start - 1).map_or(0, |b| TERM_BYTES[*b as usize]);
            if k & T_TOK == 0 {
                break;
            }
            upper_inside |= first;
            first = k;
            start -= 1;
        }
        i = p + 1;
        while let Some(&c) = bytes.get(i) {
            let k = TERM_BYTES[c as usize];
            if k & T_TOK == 0 {
                break;
            }
            upper_inside |= k;
            i += 1;
        }
        let seen = first | upper_inside;
        let interesting = seen & T_MARK != 0 || upper_inside & T_UPPER != 0;
        if !(interesting || (seen & T_DIGIT != 0 && seen & T_DOT != 0)) {
            continue;
        }
        // Most runs are one plain word (no `-`, `/` or `.`): nothing to trim
        // or split, no path and no version, only an identifier.
        if FAST && seen & T_SPLIT == 0 {
            // Without `/`, the mark is an underscore: only snake_case can
            // hold one, and only camelCase or PascalCase can do without.
            if let (Some(run), Some(run_str)) = (bytes.get(start..i), text.get(start..i))
                && is_identifier(run)
            {
                f(run_str);
            }
            continue;
        }
        // Trim punctuation at the ends (sentence dots, leading slashes).
        let mut a = start;
        let mut b = i;
        while a < b
            && bytes
                .get(a)
                .is_some_and(|c| matches!(c, b'.' | b'-' | b'/'))
        {
            a += 1;
        }
        while b > a
            && bytes
                .get(b - 1)
                .is_some_and(|c| matches!(c, b'.' | b'-' | b'/'))
        {
            b -= 1;
        }
        let (Some(run), Some(run_str)) = (bytes.get(a..b), text.get(a..b)) else {
            continue;
        };
        // A path has a slash; an identifier an underscore or a capital after
        // the run's first byte; a version digits and dots.
        if seen & T_MARK != 0 && is_path(run) {
            f(run_str);
        }
        let identifiers = seen & T_UNDERSCORE != 0 || upper_inside & T_UPPER != 0;
        if identifiers || (seen & T_DIGIT != 0 && seen & T_DOT != 0) {
            split_run(run, run_str, identifiers, &mut f);
        }
    }
}

/// The versions and identifiers of a trimmed run (which neither starts nor
/// ends with `.`, `-` or `/`): its segments between `/` and `-`, each a
/// version or split at dots into identifiers (only looked for with
/// `identifiers`). One pass: each word is read by the identifier automaton
/// as the bytes go by, and reported when it ends (the words of a version,
/// digits or `v` and digits, are never identifiers, so a segment reports
/// either its version or its identifiers, as [`split_run_reference`] does).
fn split_run<'a>(run: &[u8], run_str: &'a str, identifiers: bool, f: &mut impl FnMut(&'a str)) {
    let mut seg = 0;
    let mut word = 0;
    // The segment `seg..end` ends: reported if a version.
    #[inline(always)]
    fn end_segment<'a>(
        run: &[u8],
        run_str: &'a str,
        seg: usize,
        end: usize,
        f: &mut impl FnMut(&'a str),
    ) {
        if let (Some(s), Some(s_str)) = (run.get(seg..end), run_str.get(seg..end))
            && s.first().is_some_and(|c| c.is_ascii_digit() || *c == b'v')
            && is_version(s)
        {
            f(s_str);
        }
    }
    loop {
        // The word from `word`: read to its end, or to the run's.
        let mut state = I_START;
        let len = run.get(word..).and_then(|rest| {
            rest.iter().position(|&c| {
                let next = ident_step(state, c);
                if next >= I_DOT_END {
                    return true;
                }
                state = next;
                false
            })
        });
        let end = len.map_or(run.len(), |k| word + k);
        if identifiers
            && ident_accepts(state)
            && let Some(w) = run_str.get(word..end)
        {
            f(w);
        }
        if len.is_none() {
            break;
        }
        if matches!(run.get(end), Some(b'/' | b'-')) {
            end_segment(run, run_str, seg, end, f);
            seg = end + 1;
        }
        word = end + 1;
    }
    end_segment(run, run_str, seg, run.len(), f);
}

/// [`split_run`] as it was before its one pass (the tests compare the
/// two): the versions and identifiers of a trimmed run (which neither starts nor
/// ends with `.`, `-` or `/`): its segments between `/` and `-`, each a
/// version or split at dots into identifiers (only looked for with
/// `identifiers`).
#[cfg(test)]
fn split_run_reference<'a>(
    run: &[u8],
    run_str: &'a str,
    identifiers: bool,
    f: &mut impl FnMut(&'a str),
) {
    let mut w0 = 0;
    while w0 < run.len() {
        let e = run
            .get(w0..)
            .and_then(|r| r.iter().position(|c| matches!(c, b'/' | b'-')))
            .map_or(run.len(), |k| w0 + k);
        if let (Some(seg), Some(seg_str)) = (run.get(w0..e), run_str.get(w0..e)) {
            if seg
                .first()
                .is_some_and(|c| c.is_ascii_digit() || *c == b'v')
                && is_version(seg)
            {
                f(seg_str);
            } else if identifiers {
                let mut s0 = 0;
                while s0 < seg.len() {
                    let s1 = seg
                        .get(s0..)
                        .and_then(|r| r.iter().position(|c| *c == b'.'))
                        .map_or(seg.len(), |k| s0 + k);
                    if let (Some(w), Some(ws)) = (seg.get(s0..s1), seg_str.get(s0..s1))
                        && identifier(w)
                    {
                        f(ws);
                    }
                    s0 = s1 + 1;
                }
            }
        }
        w0 = e + 1;
    }
}

/// The scan of [`for_each_term`] as it was before its loops were tightened
/// (the tests compare the two).
#[cfg(test)]
fn scan_terms_reference<'a, const JSON_ESCAPED: bool, const FAST: bool>(
    text: &'a str,
    mut f: impl FnMut(&'a str),
) {
    let json_escaped = JSON_ESCAPED;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes.get(i).copied().unwrap_or(0);
        if json_escaped && c == b'\\' {
            i += if bytes.get(i + 1) == Some(&b'u') {
                6
            } else {
                2
            };
            continue;
        }
        if TERM_BYTES[c as usize] & T_TOK == 0 {
            i += 1;
            continue;
        }
        let start = i;
        // Only runs with an underscore, a slash, an inner capital or a dotted
        // number can hold a term: plain words are skipped without splitting.
        let mut seen = 0u8;
        let mut upper_inside = 0u8;
        i += 1;
        seen |= TERM_BYTES[c as usize];
        while let Some(&c) = bytes.get(i) {
            let k = TERM_BYTES[c as usize];
            if k & T_TOK == 0 {
                break;
            }
            seen |= k;
            upper_inside |= k;
            i += 1;
        }
        let interesting = seen & T_MARK != 0 || upper_inside & T_UPPER != 0;
        if !(interesting || (seen & T_DIGIT != 0 && seen & T_DOT != 0)) {
            continue;
        }
        // Most runs are one plain word (no `-`, `/` or `.`): nothing to trim
        // or split, no path and no version, only an identifier.
        if FAST && seen & T_SPLIT == 0 {
            // Without `/`, the mark is an underscore: only snake_case can
            // hold one, and only camelCase or PascalCase can do without.
            if let (Some(run), Some(run_str)) = (bytes.get(start..i), text.get(start..i))
                && if seen & T_MARK != 0 {
                    is_snake(run)
                } else {
                    is_camel_or_pascal(run)
                }
            {
                f(run_str);
            }
            continue;
        }
        // Trim punctuation at the ends (sentence dots, leading slashes).
        let mut a = start;
        let mut b = i;
        while a < b
            && bytes
                .get(a)
                .is_some_and(|c| matches!(c, b'.' | b'-' | b'/'))
        {
            a += 1;
        }
        while b > a
            && bytes
                .get(b - 1)
                .is_some_and(|c| matches!(c, b'.' | b'-' | b'/'))
        {
            b -= 1;
        }
        let (Some(run), Some(run_str)) = (bytes.get(a..b), text.get(a..b)) else {
            continue;
        };
        if is_path(run) {
            f(run_str);
        }
        let mut w0 = a;
        for (k, ch) in run.iter().enumerate() {
            let end = a + k;
            let last = k + 1 == run.len();
            if matches!(ch, b'/' | b'-') || last {
                let e = if last && !matches!(ch, b'/' | b'-') {
                    end + 1
                } else {
                    end
                };
                if let (Some(seg), Some(seg_str)) = (bytes.get(w0..e), text.get(w0..e)) {
                    if seg
                        .first()
                        .is_some_and(|c| c.is_ascii_digit() || *c == b'v')
                        && is_version(seg)
                    {
                        f(seg_str);
                    } else {
                        let mut s0 = 0;
                        for (k, c) in seg.iter().enumerate() {
                            if *c == b'.' || k + 1 == seg.len() {
                                let s1 = if *c == b'.' { k } else { k + 1 };
                                if let (Some(w), Some(ws)) = (seg.get(s0..s1), seg_str.get(s0..s1))
                                    && identifier(w)
                                {
                                    f(ws);
                                }
                                s0 = k + 1;
                            }
                        }
                    }
                }
                w0 = end + 1;
            }
        }
    }
}

/// True when the raw JSON string content `raw` (between its quotes)
/// decodes to `text`, and every escape in it stands for a character that
/// is not a term byte: then [`for_each_term`] finds the same terms, in the
/// same order, in `raw` read as escaped JSON and in `text` read plain
/// (an escape and the character it stands for both end a term).
pub(crate) fn decodes_to_same_terms(raw: &str, text: &str) -> bool {
    let (r, t) = (raw.as_bytes(), text.as_bytes());
    let (mut i, mut j) = (0usize, 0usize);
    while i < r.len() {
        // The bytes up to the next escape are the text's own.
        let plain = r
            .get(i..)
            .and_then(|rest| memchr::memchr(b'\\', rest))
            .unwrap_or(r.len() - i);
        if plain > 0 {
            if t.get(j..j + plain) != r.get(i..i + plain) {
                return false;
            }
            i += plain;
            j += plain;
            continue;
        }
        let one = match r.get(i + 1) {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0c,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                let Some(cp) = hex4(r, i + 2) else {
                    return false;
                };
                let (ch, used) = if (0xd800..0xdc00).contains(&cp) {
                    // A surrogate pair: `\uD83D\uDE00`.
                    match (r.get(i + 6), r.get(i + 7), hex4(r, i + 8)) {
                        (Some(b'\\'), Some(b'u'), Some(lo)) if (0xdc00..0xe000).contains(&lo) => (
                            char::from_u32(0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00)),
                            12,
                        ),
                        _ => (None, 6),
                    }
                } else {
                    (char::from_u32(cp), 6)
                };
                let Some(ch) = ch else {
                    return false;
                };
                if ch.is_ascii() && TERM_BYTES[ch as usize] & T_TOK != 0 {
                    return false;
                }
                let mut buf = [0u8; 4];
                let enc = ch.encode_utf8(&mut buf).as_bytes();
                if t.get(j..j + enc.len()) != Some(enc) {
                    return false;
                }
                i += used;
                j += enc.len();
                continue;
            }
            // `\/` stands for a term byte; anything else is not JSON.
            _ => return false,
        };
        if t.get(j) != Some(&one) {
            return false;
        }
        i += 2;
        j += 1;
    }
    j == t.len()
}

/// The four hex digits at `i` of `b` as a number.
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let h = std::str::from_utf8(b.get(i..i + 4)?).ok()?;
    if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(h, 16).ok()
}

/// A compound identifier: snake_case, camelCase or PascalCase (the
/// reference for [`is_identifier`]).
#[cfg(test)]
fn identifier(w: &[u8]) -> bool {
    // Fast reject: plain words have no underscore and no capital after the first letter.
    let compound = w.first() == Some(&b'_')
        || w.iter()
            .skip(1)
            .any(|c| *c == b'_' || c.is_ascii_uppercase());
    compound && (is_snake(w) || is_camel_or_pascal(w))
}

/// The terms of `text` (see [`for_each_term`]), in order.
pub fn terms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_term(text, false, |t| out.push(t));
    out
}

/// `s` cut to at most `max` characters, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    let mut out = String::new();
    push_clip(&mut out, s, max);
    out
}

/// Append [`clip`] of `s` to `out`, reading no more of `s` than `max`
/// characters (a line may be megabytes long).
pub fn push_clip(out: &mut String, s: &str, max: usize) {
    // At most `max` bytes: at most `max` characters.
    if s.len() <= max {
        out.push_str(s);
        return;
    }
    let Some(last) = max.checked_sub(1) else {
        // Not empty: cut to nothing.
        out.push('…');
        return;
    };
    // The `max`th character, and whether another follows it.
    match s.char_indices().nth(last) {
        Some((at, c)) if at + c.len_utf8() < s.len() => {
            out.push_str(s.get(..at).unwrap_or(""));
            out.push('…');
        }
        _ => out.push_str(s),
    }
}

/// `s` with runs of digits replaced by `#`, for spotting lines that differ
/// only in numbers (progress bars, timings).
pub fn shape(s: &str) -> String {
    let t = s.trim();
    let b = t.as_bytes();
    let mut out = String::with_capacity(t.len());
    // ASCII digits are whole characters: the text between runs of them is
    // copied as it is.
    let mut from = 0;
    let mut i = 0;
    while let Some(c) = b.get(i) {
        if c.is_ascii_digit() {
            out.push_str(t.get(from..i).unwrap_or(""));
            out.push('#');
            i += b
                .get(i..)
                .map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count());
            from = i;
        } else {
            i += 1;
        }
    }
    out.push_str(t.get(from..).unwrap_or(""));
    out
}

#[cfg(test)]
mod tests {
    /// A small deterministic generator for the randomized tests: each call
    /// of the returned closure with `n` gives the next xorshift value in
    /// `0..n`.
    fn xorshift(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        }
    }

    #[test]
    fn declaration_prefilters_agree_with_the_regexes() {
        let sources = [
            include_str!("lines.rs"),
            include_str!("summary.rs"),
            include_str!("lib.rs"),
            include_str!("../../ctxpress-core/src/dialect/shell.rs"),
            include_str!("../../ctxpress-core/src/message.rs"),
        ];
        let extra = [
            "import os",
            "  from a.b import c",
            "use std::io;",
            "using System.Text;",
            "const x = require('y')",
            "let { a, b } = require(\"c\")",
            "var q = require ('r')",
            "requirements = 1",
            "export const f = async (a) => a",
            "const g = x => x",
            "export default class Foo extends Bar {",
            "CREATE TABLE users (",
            "create or replace view v as",
            "app.get('/x', handler)",
            "describe('thing', () => {",
            "  public static int add(int a, int b) {",
            "  render() {",
            "int main(int argc, char **argv)",
            "\u{a0}\u{2003}impl Foo for Bar {",
            "pub(crate) fn parse(s: &str) -> Result<(), E> {",
        ];
        let lines = sources
            .iter()
            .flat_map(|s| s.lines())
            .chain(extra.iter().copied());
        for body in lines {
            assert_prefilters_pass(body);
        }
    }

    /// The words of the alternation that follows `lead` in `pattern`, its
    /// marks (`\\*?`, `!`, `pub`'s group) left out.
    fn alternation<'p>(pattern: &'p str, lead: &str) -> Vec<&'p str> {
        let start = pattern.find(lead).expect("lead in pattern") + lead.len();
        let rest = &pattern[start..];
        // The group ends at the first `)` outside `pub`'s own group.
        let mut depth = 0;
        let end = rest
            .char_indices()
            .find(|&(i, c)| match c {
                '(' if !rest[..i].ends_with('\\') => {
                    depth += 1;
                    false
                }
                ')' if !rest[..i].ends_with('\\') => {
                    depth -= 1;
                    depth < 0
                }
                _ => false,
            })
            .map(|(i, _)| i)
            .expect("group end");
        rest[..end]
            .split('|')
            .map(|w| w.split(['\\', '!', '(']).next().unwrap_or(w))
            .collect()
    }

    /// Each word set of [`word_class`] is the alternation of its pattern.
    #[test]
    fn word_classes_are_the_pattern_words() {
        let sets = [
            (W_KEYWORD, alternation(STRUCTURE_RE, ")\\s+)*(?:")),
            (W_MODIFIER, alternation(STRUCTURE_RE, "^\\s*(?:(?:")),
            (W_TYPED, alternation(TYPED_METHOD_RE, "^\\s*(?:(?:")),
            (W_METHOD, alternation(METHOD_RE, "^\\s+(?:(?:")),
            (W_TEST, alternation(TEST_RE, "(?:await\\s+)?(?:")),
            (W_BINDING, alternation(ARROW_FN_RE, "(?:export\\s+)?(?:")),
            (W_FIELD, alternation(FIELD_RE, "^\\s+(?:(?:")),
            (W_ACCESS, alternation(JAVA_FIELD_RE, "^\\s*(?:(?:")),
        ];
        let all: Vec<&str> = sets
            .iter()
            .flat_map(|(_, ws)| ws.iter().copied())
            .chain([
                "export", "val", "await", "if", "for", "return", "using", "x",
            ])
            .collect();
        for (flag, words) in &sets {
            assert!(words.len() >= 3, "{words:?}");
            for w in &all {
                assert_eq!(
                    word_class(w) & flag != 0,
                    words.contains(w),
                    "{w} {flag} {words:?}"
                );
            }
        }
        for w in [
            "if",
            "for",
            "while",
            "switch",
            "catch",
            "with",
            "return",
            "else",
            "do",
            "try",
            "foreach",
            "elseif",
            "when",
            "match",
            "until",
            "unless",
            "synchronized",
            "using",
            "lock",
            "fixed",
        ] {
            assert!(word_class(w) & W_CONTROL != 0, "{w}");
        }
        for w in ["export", "const", "let", "var", "val", "static", "pub"] {
            assert!(word_class(w) & W_TOP != 0, "{w}");
        }
    }

    /// Random lines of the words and marks the declaration patterns look
    /// for (white space of several kinds, non-ASCII letters and marks):
    /// every cheap condition lets through each line its regex matches, and
    /// [`is_import`] agrees with [`IMPORT`].
    #[test]
    fn declaration_prefilters_pass_random_lines() {
        const TOKENS: &[&str] = &[
            "export",
            "default",
            "public",
            "private",
            "protected",
            "internal",
            "static",
            "async",
            "abstract",
            "final",
            "sealed",
            "override",
            "virtual",
            "extern",
            "unsafe",
            "pub",
            "pub(crate)",
            "pub(in x)",
            "pub()",
            "open",
            "data",
            "inline",
            "suspend",
            "declare",
            "partial",
            "readonly",
            "const",
            "local",
            "global",
            "def",
            "class",
            "fn",
            "fun",
            "func",
            "function",
            "function*",
            "struct",
            "enum",
            "trait",
            "impl",
            "interface",
            "type",
            "module",
            "namespace",
            "mod",
            "macro_rules!",
            "record",
            "object",
            "protocol",
            "extension",
            "typedef",
            "union",
            "contract",
            "service",
            "message",
            "resource",
            "defmodule",
            "defn",
            "sub",
            "proc",
            "let",
            "var",
            "val",
            "await",
            "describe",
            "it",
            "test",
            "it.each",
            "context",
            "suite",
            "scenario",
            "synchronized",
            "native",
            "get",
            "set",
            "throws",
            "IOException",
            "create",
            "CREATE",
            "alter",
            "drop",
            "table",
            "or",
            "replace",
            "view",
            "import",
            "from",
            "use",
            "using",
            "require",
            "require_once",
            "requireX",
            "importer",
            "app.get",
            "router.post",
            "r.HandleFunc",
            "e.Group",
            "x.y.any",
            "t.Fatalf",
            "Foo",
            "foo",
            "foo_bar",
            "$el",
            "ID",
            "Name",
            "MAX_SIZE",
            "int",
            "varchar",
            "é",
            "x\u{301}",
            "名前",
            "²",
            "12",
            "=>",
            "=",
            "==",
            "?",
            "!",
            "?!",
            ":",
            "::",
            ";",
            ",",
            ".",
            "(",
            ")",
            "()",
            "{",
            "}",
            "<",
            ">",
            "<T>",
            "[",
            "]",
            "*",
            "&",
            "'",
            "\"",
            "`",
            "'x'",
            "@",
            "@Override",
            "#",
            "~",
            "noexcept",
            "void",
            "main",
            "string",
        ];
        const SPACES: &[&str] = &[" ", " ", " ", "", "", "\t", "  ", "\u{a0}", "\u{2003}"];
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..60_000 {
            let mut body = String::new();
            for _ in 0..next(3) {
                body.push_str(SPACES[next(SPACES.len())]);
            }
            for k in 0..1 + next(9) {
                if k > 0 {
                    body.push_str(SPACES[next(SPACES.len())]);
                }
                body.push_str(TOKENS[next(TOKENS.len())]);
            }
            assert_prefilters_pass(&body);
        }
    }

    /// Each cheap necessary condition lets `body` through when its regex
    /// matches it.
    fn assert_prefilters_pass(body: &str) {
        let (t, word) = (body.trim(), first_word(body));
        let class = word_class(word);
        if !t.starts_with('#') {
            assert_eq!(is_import(body, t), IMPORT.is_match(body), "{body:?}");
        }
        let open = t.find('(');
        if open.is_none() {
            assert_eq!(
                CODE_STRUCTURE.is_match(body),
                CODE_STRUCTURE_NO_PAREN.is_match(body),
                "{body:?}"
            );
        }
        if CODE_STRUCTURE.is_match(body) {
            assert!(maybe_structure(body, t, word, class, open), "{body:?}");
        }
        if CODE_MEMBER.is_match(body) {
            assert!(maybe_member(body, t, word, class), "{body:?}");
        }
        if CODE_FIELD.is_match(body) {
            assert!(maybe_field(body, t, word, class), "{body:?}");
        }
    }

    /// Lines of many languages on which each regex matches: the cheap
    /// necessary conditions must let every one through (the test above
    /// checks them against this crate's own sources too).
    #[test]
    fn declaration_prefilters_pass_every_match() {
        let lines = [
            "export default class Foo extends Bar {",
            "  async login(user: string): Promise<void> {",
            "func (h *AuthHandler) Login(c *gin.Context) {",
            "def handle_error(self, err):",
            "export const fetchUser = async (id: number) => {",
            "router.post('/api/login', loginHandler);",
            "  app.get( \"/x\", h)",
            "await test('POST /auth/login', async () => {",
            "  public static int add(int a, int b) {",
            "  render() {",
            "int main(int argc, char **argv)",
            "std::string Foo::bar(int x) const",
            "void f() noexcept",
            "static void g(void)",
            "Create Table users (",
            "DROP INDEX idx;",
            "  @Override",
            "@app.route('/x')",
            "MAX_SIZE = 10",
            "export const LIMIT: number = 3",
            "pub const X: u8 = 1;",
            "val x = 1",
            "  private final int count;",
            "  protected String name = \"x\";",
            "  id INTEGER PRIMARY KEY,",
            "  \"name\" varchar(20) NOT NULL,",
            "  [created] DateTime,",
            "\tEmail Text",
            "  Name string `json:\"name\"`",
            "  ID    int",
            "  name: string;",
            "  readonly count?: number = 0,",
            "  pub field: Vec<u8>,",
        ];
        for body in lines {
            let matched = CODE_STRUCTURE.is_match(body)
                || CODE_MEMBER.is_match(body)
                || CODE_FIELD.is_match(body);
            assert!(matched, "not a declaration line: {body:?}");
            assert_prefilters_pass(body);
        }
    }

    #[test]
    fn references_by_line_agree_with_the_joined_text() {
        let sources = [
            include_str!("lines.rs"),
            include_str!("summary.rs"),
            include_str!("lib.rs"),
            "see https://example.com/a/b.html and C:\\dir\\x.txt\nValueError: at ~/src/app.py\n\
             x/y.rs:3 FooException, http://h/p?q=1\nplain line\nBarError.\n",
        ];
        for text in sources {
            let lines: Vec<&str> = text.lines().collect();
            let joined = lines.join("\n");
            for max in [0, 1, 3, 12, 1000] {
                assert_eq!(
                    references_in_lines(lines.iter().copied(), max),
                    references(&joined, max),
                    "max {max}"
                );
            }
        }
    }

    /// Every kind of text.
    const LANGS: [Lang; 7] = [
        Lang::Code,
        Lang::Doc,
        Lang::Yaml,
        Lang::Json,
        Lang::Ini,
        Lang::Sql,
        Lang::Css,
    ];

    /// [`declaration`] and [`declaration_reference`] line by line over
    /// `text` (each with its own state), in every language, twice: with
    /// remembered ranks (`ranks`, shared by the languages) and without.
    fn assert_declarations_as_reference(text: &str) {
        let mut ranks = LineRanks::default();
        for _ in 0..2 {
            assert_declarations_as_reference_with(text, &mut ranks);
        }
        for lang in LANGS {
            let (mut st, mut st_ref) = (OutlineState::default(), OutlineState::default());
            for l in split_numbered(text) {
                assert_eq!(
                    declaration(l.body, lang, &mut st, &mut LineRanks::default()),
                    declaration_reference(l.body, lang, &mut st_ref),
                    "{lang:?} {:?}",
                    l.body
                );
            }
        }
    }

    /// [`declaration`] with `ranks` and [`declaration_reference`] line by
    /// line over `text` (each with its own state), in every language.
    fn assert_declarations_as_reference_with(text: &str, ranks: &mut LineRanks) {
        for lang in LANGS {
            let (mut st, mut st_ref) = (OutlineState::default(), OutlineState::default());
            for l in split_numbered(text) {
                assert_eq!(
                    declaration(l.body, lang, &mut st, ranks),
                    declaration_reference(l.body, lang, &mut st_ref),
                    "{lang:?} {:?}",
                    l.body
                );
            }
        }
    }

    #[test]
    fn remembered_ranks_are_the_ranks() {
        // One memo over several files, each line met in several kinds of
        // text, in and out of comment and style blocks.
        let mut ranks = LineRanks::default();
        let texts = [
            include_str!("lines.rs"),
            include_str!("summary.rs"),
            include_str!("lib.rs"),
            include_str!("tests.rs"),
            "<template>\n  <div/>\n</template>\n<style scoped>\n.a {\n}\n  .b > c {\n</style>\n.a {\n  .b > c {\n",
            "/* open\nfn a() {}\n*/ fn a() {}\nfn a() {}\n  name: String,\n# Title\nkey: value\n  \"k\": 1,\n[section]\na = 1\nCREATE TABLE t (\n  id int,\n",
        ];
        for _ in 0..2 {
            for text in texts {
                assert_declarations_as_reference_with(text, &mut ranks);
            }
        }
        // A full memo remembers no more lines, and still answers.
        let mut full = LineRanks::default();
        for i in 0..LINE_RANKS_CAP + 10 {
            let line = format!("  field{i}: u32,");
            let mut st = OutlineState::default();
            assert_eq!(
                declaration(&line, Lang::Code, &mut st, &mut full),
                Some(Rank::Member)
            );
        }
        assert_eq!(full.0.len(), LINE_RANKS_CAP);
        assert_declarations_as_reference_with(texts[0], &mut full);
    }

    proptest::proptest! {
        #[test]
        fn remembered_ranks_of_random_lines(
            texts in proptest::collection::vec(
                "(( |\t|\u{a0}){0,3}(/\\*|\\*/|<style>|</style>|[{}();:=#@\x22-]|fn |pub |class |x|é| ){0,5}\n){0,8}",
                1..4,
            ),
        ) {
            let mut ranks = LineRanks::default();
            for _ in 0..2 {
                for text in &texts {
                    assert_declarations_as_reference_with(text, &mut ranks);
                }
            }
        }
    }

    #[test]
    fn first_byte_exit_keeps_every_declaration() {
        for text in [
            include_str!("lines.rs"),
            include_str!("summary.rs"),
            include_str!("lib.rs"),
            "<template>\n  <div/>\n</template>\n<style scoped>\n.a {\n}\n  .b > c {\n</style>\n{\n}\n",
            "/* open\n{ x\n*/ fn a() {}\n  /** doc */\n  -- x\n  * y\n#include <a>\n#define X 1\n@Dec\n_x = 1\n$y = 2\n",
            "   \n\t\n\u{a0}fn x() {}\n\u{a0}{\n\u{2003}) {\n",
        ] {
            assert_declarations_as_reference(text);
        }
    }

    proptest::proptest! {
        #[test]
        fn first_byte_exit_on_random_lines(
            text in "(( |\t|\u{a0}){0,3}(/\\*|\\*/|<style>|</style>|<script>|[{}();,.:=*+/<>#@_$'`\x22-]|fn |pub |x|é| ){0,5}\n){0,12}",
        ) {
            assert_declarations_as_reference(&text);
        }
    }

    fn assert_leading_space(text: &str) {
        let b = text.as_bytes();
        for from in 0..=b.len() + 1 {
            let r = b.get(from..).unwrap_or(&[]);
            assert_eq!(
                leading_space(r),
                leading_space_reference(r),
                "{text:?} {from}"
            );
        }
    }

    #[test]
    fn leading_space_is_the_byte_count() {
        for text in [
            "",
            "a",
            "\n",
            "       ",
            "        ",
            "         x",
            "        x",
            "                \n",
            "       \t        \u{a0}",
            "\u{a0}  ",
            "\x0b\x0c\r\n\t x",
        ] {
            assert_leading_space(text);
        }
    }

    proptest::proptest! {
        #[test]
        fn leading_space_on_random_texts(text in "( |\t|\n|\r|\x0b|\x0c|a|é|\u{a0}){0,40}") {
            assert_leading_space(&text);
        }
    }

    /// [`references_outside`] of the lines of `text` against
    /// [`references_in_lines`] of the lines not shown, for a few sets of
    /// shown lines (none, every third, the first and last, out of range).
    fn assert_refs_outside_as_by_line(text: &str) {
        let lines = split_numbered(text);
        let n = lines.len();
        let every_third: Vec<usize> = (0..n).filter(|i| i % 3 == 1).collect();
        let ends: Vec<usize> = vec![0, n.saturating_sub(1), n + 2];
        let twice: Vec<usize> = vec![1, 1, 2];
        for shown in [&[][..], &every_third, &ends, &twice] {
            let rest = || {
                lines
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !shown.contains(i))
                    .map(|(_, l)| l.body)
            };
            for max in [0, 1, 2, 3, 12, 1000] {
                assert_eq!(
                    references_outside(text, &lines, shown, max),
                    references_in_lines(rest(), max),
                    "max {max} shown {shown:?} {text:?}"
                );
            }
        }
        // Lines that are not slices of `text`: searched one by one.
        let copy = text.to_string();
        let other = split_numbered(&copy);
        assert_eq!(
            references_outside(text, &other, &every_third, 12),
            references_in_lines(
                other
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !every_third.contains(i))
                    .map(|(_, l)| l.body),
                12
            ),
        );
    }

    #[test]
    fn references_outside_shown_lines_are_those_of_the_other_lines() {
        for text in [
            include_str!("lines.rs"),
            include_str!("summary.rs"),
            include_str!("lib.rs"),
            "",
            "\n\n",
            "E",
            "see https://example.com/a/b.html and C:\\dir\\x.txt\nValueError: at ~/src/app.py\n\
             x/y.rs:3 FooException, http://h/p?q=1\nplain line\nBarError.\n",
            "     1\tuse a/b.rs;\n     2\t\n     3\tE\n     4\tan Error: x/y.zz\n",
            "1→a/b.rs\r\n2→\r\n3→c\\d.txt TypeError\r\n",
        ] {
            assert_refs_outside_as_by_line(text);
        }
    }

    proptest::proptest! {
        #[test]
        fn references_outside_on_random_texts(
            text in "([ 0-9]{0,3}(\t|→|:)?(a|é|/|\\\\|E|rror|xception|\\.|:|rs| |-|Ab)*(\n|\r\n))*",
        ) {
            assert_refs_outside_as_by_line(&text);
        }
    }

    #[test]
    fn reference_marks_are_found_as_by_memchr3() {
        for text in [
            "",
            "E",
            "a/",
            "\\",
            "abc",
            "x".repeat(32).as_str(),
            "x".repeat(33).as_str(),
        ] {
            let b = text.as_bytes();
            assert_eq!(
                find_reference_mark(b),
                memchr::memchr3(b'/', b'\\', b'E', b)
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn reference_marks_on_random_texts(text in "(a|é|/|\\\\|E|e| ){0,70}") {
            // Each suffix: lengths on both sides of the short search.
            let b = text.as_bytes();
            for k in 0..=b.len() {
                let r = b.get(k..).unwrap_or(&[]);
                proptest::prop_assert_eq!(find_reference_mark(r), memchr::memchr3(b'/', b'\\', b'E', r));
            }
        }

        #[test]
        fn references_from_the_first_mark_are_the_references(text in "(a|é|/|\\\\|E|rror|xception|\\.|:|rs| |Ab|http|://){0,30}", max in 1usize..6) {
            // The search told where the first mark is finds what the
            // search from the start finds.
            let first = find_reference_mark(text.as_bytes()).unwrap_or(text.len());
            let (mut hinted, mut plain) = (Vec::new(), Vec::new());
            let full_hinted = push_references_from(&text, first, max, &mut hinted);
            let full_plain = push_references(&text, max, &mut plain);
            proptest::prop_assert_eq!(hinted, plain);
            proptest::prop_assert_eq!(full_hinted, full_plain);
        }
    }

    /// The YAML and JSON ranks by the indentation [`YAML_KEY`] and
    /// [`JSON_KEY`] capture (what [`declaration`] read before it took the
    /// line's own indentation).
    fn key_rank_by_capture(body: &str, lang: Lang) -> Option<Rank> {
        let t = trim(body);
        if t.is_empty() || t.len() > 400 {
            return None;
        }
        if t.starts_with("/*")
            || t.starts_with("//")
            || t.starts_with("* ")
            || t == "*"
            || t.starts_with("--")
        {
            return None;
        }
        let (key, ranks): (&Regex, [usize; 2]) = match lang {
            Lang::Yaml if t.starts_with('#') => return None,
            Lang::Yaml => (&YAML_KEY, [0, 4]),
            _ => (&JSON_KEY, [2, 4]),
        };
        let c = key.captures(body)?;
        let ind = c.get(1).map_or(0, |m| indent_of(m.as_str()));
        if ind <= ranks[0] {
            Some(Rank::Structure)
        } else if ind <= ranks[1] {
            Some(Rank::Member)
        } else {
            None
        }
    }

    fn assert_key_ranks(body: &str) {
        for lang in [Lang::Yaml, Lang::Json] {
            let mut st = OutlineState::default();
            assert_eq!(
                declaration(body, lang, &mut st, &mut LineRanks::default()),
                key_rank_by_capture(body, lang),
                "{lang:?} {body:?}"
            );
        }
    }

    #[test]
    fn key_ranks_are_the_captured_indentation() {
        for body in [
            "a: 1",
            "  a: 1",
            "\ta: 1",
            "\t\ta: 1",
            "     a: 1",
            "  - name: x",
            "\u{a0}\u{2003}key: v",
            "\u{85}key:",
            "\"a\": 1",
            "  \"a\": {",
            "\t\"a\" : [",
            "      \"deep\": 2",
            "\u{a0}\"x\":",
            "# comment: x",
            "- a",
            "",
            "   ",
        ] {
            assert_key_ranks(body);
        }
    }

    proptest::proptest! {
        #[test]
        fn key_ranks_of_random_lines(
            body in "( |\t|\u{a0}|\u{2003}|\u{85}){0,6}(- )?(\"|')?[a-z_.é ]{0,4}(\"|')?( |\t)?:?( |x)?",
        ) {
            assert_key_ranks(&body);
        }
    }

    proptest::proptest! {
        #[test]
        fn split_numbered_is_the_two_pass_split(
            text in "( {0,2}[0-9]{0,3}(\t|:|\\||→|x)?[a é]{0,2}(\n|\r\n))*[0-9a ]{0,3}",
        ) {
            proptest::prop_assert_eq!(split_numbered(&text), split_numbered_reference(&text));
        }
    }

    #[test]
    fn error_lines_are_the_two_regexes() {
        let old = |l: &str| ERROR_LINE.is_match(l) && !ZERO_FAIL.is_match(l);
        let cases = [
            "error: build failed",
            "0 failed, 3 passed",
            "Tests: 0 failures",
            "errors: 0",
            "FAILED (errors=0)",
            "failed 10",
            "failures: 00",
            "0\u{a0}failed",
            "ERRORS:\t0",
            "error\u{2003}0 error",
            "TypeError: x is 0",
        ];
        for l in cases
            .into_iter()
            .chain(include_str!("lines.rs").lines())
            .chain(include_str!("summary.rs").lines())
        {
            assert_eq!(is_error_line(l), old(l), "{l:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn error_lines_on_random_texts(
            l in "(0|1|failed|Failures|error|ERRORS|s|:|=|\\(| |\t|\u{a0}|x){0,12}",
        ) {
            proptest::prop_assert_eq!(
                is_error_line(&l),
                ERROR_LINE.is_match(&l) && !ZERO_FAIL.is_match(&l)
            );
        }
    }

    #[test]
    fn split_numbered_is_the_two_pass_split_on_sources() {
        for text in [
            include_str!("lines.rs"),
            include_str!("summary.rs"),
            "",
            "\n\n",
            "1\ta\n2\tb\n",
            "1\ta\n2\tb\nc\n3\td\n4\te\n5\tf\n",
            "1\ta\n2\tb\nc\nd\n3\te\n",
            "     1→use std;\n     2→\n     3→fn main() {}\n",
            "12:30 started\n08:15 done\nno number here\n",
            "3\tx\n2\ty\n1\tz\n",
            "\u{663}\tarabic digit\n2\tb\n",
        ] {
            assert_eq!(
                split_numbered(text),
                split_numbered_reference(text),
                "{text:?}"
            );
        }
    }

    /// The terms of `text` read as escaped JSON (`escaped`) or plain.
    fn terms_of(text: &str, escaped: bool) -> Vec<&str> {
        let mut out = Vec::new();
        for_each_term(text, escaped, |t| out.push(t));
        out
    }

    /// The span [`traffic::Args::string_span`] gives for member `key` of
    /// the arguments text `json` (what the information check reads).
    fn member_string_span(json: &str, key: &str) -> Option<std::ops::Range<usize>> {
        let text = serde_json::json!([{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "x", "arguments": json}}]}])
        .to_string();
        let conv = ctxpress_core::Conversation::parse(&text).expect("a conversation");
        let calls = ctxpress_core::traffic::parse_calls(conv.messages.first()?);
        calls.first()?.args.string_span(key)
    }

    #[test]
    fn member_string_span_finds_the_raw_member() {
        let content = "line \"one\"\n\tfoo_bar(x) é \u{1F600} \\ src/a.rs\u{1b}";
        let v = serde_json::json!({"file_path": "/r/a.rs", "n": [1, {"k": "v\\"}], "content": content, "z": null});
        let json = serde_json::to_string(&v).expect("json");
        let pretty = serde_json::to_string_pretty(&v).expect("json");
        for j in [json.as_str(), pretty.as_str()] {
            let span = member_string_span(j, "content").expect("found");
            let raw = &j[span];
            assert!(decodes_to_same_terms(raw, content), "{raw}");
            assert_eq!(terms_of(raw, true), terms_of(content, false));
            assert_eq!(
                member_string_span(j, "file_path").map(|r| &j[r]),
                Some("/r/a.rs")
            );
            assert_eq!(member_string_span(j, "n"), None);
            assert_eq!(member_string_span(j, "missing"), None);
        }
        for bad in [
            r#"{"content": "a", "content": "b"}"#,
            r#"{"content": "a\q"}"#,
            r#"{"content": "a"} x"#,
            r#"{"con\u0074ent": "a"}"#,
            r#"{"a": \x, "content": "b"}"#,
            r#"["content", "a"]"#,
            r#"{"content": "a""#,
            "{}",
            "",
        ] {
            assert_eq!(member_string_span(bad, "content"), None, "{bad}");
        }
        assert!(!decodes_to_same_terms(r"a\/b", "a/b"));
        assert!(!decodes_to_same_terms(r"a\u0041b", "aAb"));
        assert!(!decodes_to_same_terms(r"ab", "abc"));
        assert!(!decodes_to_same_terms(r"a\ud83d", "a"));
        assert!(decodes_to_same_terms(
            r"a\u00e9\ud83d\ude00\u0022",
            "aé\u{1F600}\""
        ));
    }

    proptest::proptest! {
        #[test]
        fn serialized_strings_keep_their_terms(text in "[a-cA-C0-9_./\\\\\"\n\t\u{1}é\u{1F600} -]{0,40}") {
            let json = serde_json::to_string(&serde_json::json!({"k": 1, "content": text})).expect("json");
            let span = member_string_span(&json, "content");
            proptest::prop_assert!(span.is_some());
            let raw = &json[span.unwrap_or(0..0)];
            proptest::prop_assert!(decodes_to_same_terms(raw, &text));
            proptest::prop_assert_eq!(terms_of(raw, true), terms_of(&text, false));
        }

        #[test]
        fn accepted_escapes_keep_the_terms(parts in proptest::collection::vec("[a-cA-C0-9_./ -]{0,6}|\\\\u00[0-7][0-9a-f]|\\\\[nt/\\\\\"]|\\\\u00e9", 0..12)) {
            let raw: String = parts.concat();
            if let Ok(text) = serde_json::from_str::<String>(&format!("\"{raw}\""))
                && decodes_to_same_terms(&raw, &text)
            {
                proptest::prop_assert_eq!(terms_of(&raw, true), terms_of(&text, false));
            }
        }
    }

    /// The terms the scan finds in `text` and those the reference scan finds
    /// (after checking that the scan finds those [`scan_terms_walk`], the
    /// scan it replaced, finds, with and without the plain-word short cut).
    fn scans(text: &str, escaped: bool) -> (Vec<&str>, Vec<&str>) {
        let (mut new, mut old) = (Vec::new(), Vec::new());
        if escaped {
            scan_terms_reference::<true, true>(text, |t| old.push(t));
        } else {
            scan_terms_reference::<false, true>(text, |t| old.push(t));
        }
        new.extend(block_scan(text, escaped, true));
        assert_eq!(new, walks(text, escaped, true), "{text:?}");
        assert_eq!(
            block_scan(text, escaped, false),
            walks(text, escaped, false),
            "{text:?}"
        );
        (new, old)
    }

    /// The terms [`scan_terms_walk`] finds in `text` (`fast`: with the
    /// plain-word short cut).
    fn walks(text: &str, escaped: bool, fast: bool) -> Vec<&str> {
        let mut out = Vec::new();
        match (escaped, fast) {
            (true, true) => scan_terms_walk::<true, true>(text, |t| out.push(t)),
            (true, false) => scan_terms_walk::<true, false>(text, |t| out.push(t)),
            (false, true) => scan_terms_walk::<false, true>(text, |t| out.push(t)),
            (false, false) => scan_terms_walk::<false, false>(text, |t| out.push(t)),
        }
        out
    }

    /// The terms the block scan finds in `text` (`fast`: with the
    /// plain-word short cut).
    fn block_scan(text: &str, escaped: bool, fast: bool) -> Vec<&str> {
        let mut out = Vec::new();
        match (escaped, fast) {
            (true, true) => scan_terms::<true, true>(text, |t| out.push(t)),
            (true, false) => scan_terms::<true, false>(text, |t| out.push(t)),
            (false, true) => scan_terms::<false, true>(text, |t| out.push(t)),
            (false, false) => scan_terms::<false, false>(text, |t| out.push(t)),
        }
        out
    }

    /// The classes of `w` as [`Block`] bits (its first 64 bytes).
    fn block_of(w: &[u8]) -> Block {
        let mut buf = w.to_vec();
        buf.truncate(64);
        Block::of::<true>(&buf, 0)
    }

    #[test]
    fn the_block_scan_reads_runs_at_every_block_edge() {
        // A term, a plain word, a long run and an escape at every offset
        // about one, two and three block edges.
        let pieces = [
            "foo_bar",
            "src/a_b.rs",
            "v1.2.3",
            "fooBar.Baz-x/y.Zq",
            "\\u00e9a_b",
            "\\nFooBar",
            "a_",
            "plain",
            "x_y_z_w_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "dir/sub_dir/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/file.rs",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ];
        for piece in pieces {
            for pad in 0..200 {
                for filler in [" ", "x", "é"] {
                    let text = format!("{}{piece} {piece}", filler.repeat(pad));
                    for escaped in [false, true] {
                        for fast in [false, true] {
                            assert_eq!(
                                block_scan(&text, escaped, fast),
                                walks(&text, escaped, fast),
                                "{text:?} {escaped} {fast}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn block_lanes_are_the_bytes() {
        let mut next = xorshift(0x5e);
        let alphabet = b"azAZ09_/.-\\ \n:@[`{\0\xc3\xa9";
        for _ in 0..20_000 {
            let n = next(140);
            let text: Vec<u8> = (0..n).map(|_| alphabet[next(alphabet.len())]).collect();
            for at in [0, 1, 17, 64, n] {
                let (simd, bytes) = (
                    Block::of::<true>(&text, at),
                    Block::of_bytes::<true>(&text, at),
                );
                let fields = |b: Block| {
                    [
                        b.lower, b.upper, b.digit, b.under, b.slash, b.dot, b.tok, b.escape,
                    ]
                };
                assert_eq!(fields(simd), fields(bytes), "{text:?} {at}");
                let plain = Block::of::<false>(&text, at);
                assert_eq!(plain.escape, 0);
                assert_eq!(fields(plain)[..7], fields(bytes)[..7]);
            }
        }
    }

    #[test]
    fn identifier_bits_are_the_automaton() {
        let mut next = xorshift(0x1d);
        let alphabet = b"abzAZ09_";
        for _ in 0..200_000 {
            let most = if next(4) == 0 { 64 } else { 8 };
            let n = 1 + next(most);
            let w: Vec<u8> = (0..n).map(|_| alphabet[next(alphabet.len())]).collect();
            let b = block_of(&w);
            assert_eq!(
                is_identifier_bits(b.lower, b.upper, b.digit, b.under, n),
                is_identifier(&w),
                "{:?}",
                String::from_utf8_lossy(&w)
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn the_block_scan_is_the_walk(parts in proptest::collection::vec("[a-cA-C0-9uv_./\\ \n-]{0,9}|[a-bA-B0-9_]{50,140}|[a-b/._-]{20,80}| {1,70}|é", 0..24), escaped in proptest::bool::ANY, fast in proptest::bool::ANY) {
            let text: String = parts.concat();
            proptest::prop_assert_eq!(block_scan(&text, escaped, fast), walks(&text, escaped, fast));
        }

        #[test]
        fn is_identifier_bits_is_the_automaton(w in "[a-cA-C0-9_]{1,64}") {
            let b = block_of(w.as_bytes());
            proptest::prop_assert_eq!(
                is_identifier_bits(b.lower, b.upper, b.digit, b.under, w.len()),
                is_identifier(w.as_bytes())
            );
        }

        #[test]
        fn is_path_bits_is_is_path(run in "[a-cA-C0-9_./-]{1,64}") {
            let r = run.as_bytes();
            let b = block_of(r);
            let split = |c: &u8| matches!(c, b'.' | b'-' | b'/');
            let a = r.iter().take_while(|c| split(c)).count();
            let e = (r.len() - r.iter().rev().take_while(|c| split(c)).count()).max(a);
            proptest::prop_assert_eq!(
                is_path_bits(b.lower | b.upper | b.digit, b.lower | b.upper, b.slash, b.dot, a, e),
                is_path(&r[a..e])
            );
        }
    }

    #[test]
    fn the_scan_finds_what_the_reference_scan_finds() {
        let texts = [
            include_str!("lines.rs"),
            include_str!("summary.rs"),
            include_str!("lib.rs"),
            include_str!("../../ctxpress-core/src/message.rs"),
            "src/app_main.py:12 v1.2.3 FooError foo_bar-baz x/y.rs a.b_c camelCase\\nsnake_case",
            "--flag_name ./path/to_file.rs. ..dots_. HTTPServer getX __init__ a_ _b a--b_c x/.y_z",
            r#"{"content": "import x\nconst fooBar = \"a_b\";\u00e9camelCase\u", "p": "a/b.rs\\"}"#,
        ];
        for text in texts {
            for escaped in [false, true] {
                let (new, old) = scans(text, escaped);
                assert_eq!(new, old);
            }
        }
    }

    #[test]
    fn triggers_anywhere_in_a_run_find_the_same_terms() {
        // Triggers at a run's first byte, deep inside it, after an escape,
        // at the text's start and end.
        for text in [
            "_a a_ __init__ x_y_z abc_def fooBar FooBar aB Ab1Cd2 HTTPServer getX",
            "a/b.rs /x/y.rs x/ 1.2.3 v1.2.3 a1.b2 9.Foo a.B_c very_long_name_indeed.rs",
            "\\nfooBar \\u00e9snake_case \\\"Quoted_x\\n9.1.2 é_x xé_y $a_b",
            "_",
            "aB",
            "end_",
        ] {
            for escaped in [false, true] {
                let (new, old) = scans(text, escaped);
                assert_eq!(new, old, "{text:?}");
            }
        }
    }

    #[test]
    fn the_plain_word_short_cut_finds_the_same_terms() {
        let texts = [
            include_str!("lines.rs"),
            include_str!("summary.rs"),
            include_str!("lib.rs"),
            "src/app_main.py:12 v1.2.3 FooError foo_bar-baz x/y.rs a.b_c camelCase\\nsnake_case",
            "--flag_name ./path/to_file.rs. ..dots_. HTTPServer getX __init__ a_ _b",
        ];
        for text in texts {
            for escaped in [false, true] {
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                if escaped {
                    scan_terms::<true, true>(text, |t| fast.push(t));
                    scan_terms::<true, false>(text, |t| slow.push(t));
                } else {
                    scan_terms::<false, true>(text, |t| fast.push(t));
                    scan_terms::<false, false>(text, |t| slow.push(t));
                }
                assert_eq!(fast, slow);
            }
        }
    }

    /// The terms [`split_run`] and [`split_run_reference`] report for `run`.
    fn splits(run: &str, identifiers: bool) -> (Vec<&str>, Vec<&str>) {
        let (mut new, mut old) = (Vec::new(), Vec::new());
        split_run(run.as_bytes(), run, identifiers, &mut |t| new.push(t));
        split_run_reference(run.as_bytes(), run, identifiers, &mut |t| old.push(t));
        (new, old)
    }

    #[test]
    fn the_identifier_automaton_is_the_three_patterns() {
        let words = [
            "",
            "a",
            "A",
            "_",
            "a_b",
            "a__b",
            "a_",
            "_a",
            "a1_b2",
            "a_1",
            "ab1c_d",
            "a1B",
            "fooBar",
            "fooBAR",
            "foo1Bar",
            "fooBar1",
            "fooB",
            "FooBar",
            "Foo",
            "FOO",
            "FooB",
            "F1B2",
            "F1Bar",
            "HTTPServer",
            "getX",
            "getXml",
            "x_Y",
            "snake_Case",
            "fooBar_baz",
            "é",
            "aé_b",
            "a-b",
            "a.b",
            "v1",
            "123",
            "Ab1Cd2",
        ];
        for w in words {
            assert_eq!(is_identifier(w.as_bytes()), identifier(w.as_bytes()), "{w}");
        }
        for run in [
            "src/app_main.py",
            "v1.2.3",
            "v1.2.3-beta_one",
            "1.2.3.4",
            "a.b_c/fooBar-v2.0.1/x_y.Z_w",
            "fooBar.bazQux.snake_case",
            "a//b--c..d_e",
            "vFoo.barBaz/v1.2.x",
            "1.2.3/4.5.6",
        ] {
            for identifiers in [false, true] {
                let (new, old) = splits(run, identifiers);
                assert_eq!(new, old, "{run}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn is_identifier_is_the_reference(w in "[a-cA-C0-9_é]{0,12}") {
            proptest::prop_assert_eq!(is_identifier(w.as_bytes()), identifier(w.as_bytes()));
        }

        #[test]
        fn split_run_is_the_reference(run in "[a-cvA-C0-9_]{0,4}([./-][a-cvA-C0-9_]{1,5}){0,6}", identifiers in proptest::bool::ANY) {
            let (new, old) = splits(&run, identifiers);
            proptest::prop_assert_eq!(new, old);
        }

        #[test]
        fn the_trigger_lanes_agree_on_long_texts(text in "[a-bzA-BZ09_./\\\\ :@é-]{0,200}", from in 0usize..210) {
            let b = text.as_bytes();
            proptest::prop_assert_eq!(next_trigger::<false>(b, from), next_trigger_bytes::<false>(b, from));
            proptest::prop_assert_eq!(next_trigger::<true>(b, from), next_trigger_bytes::<true>(b, from));
        }
    }

    proptest::proptest! {
        #[test]
        fn is_snake_is_the_pattern(w in "[a-z0-9_A]{0,12}") {
            let b = w.as_bytes();
            let pattern = b.first().is_some_and(u8::is_ascii_lowercase)
                && b.contains(&b'_')
                && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
                && b.split(|c| *c == b'_').all(|p| !p.is_empty());
            proptest::prop_assert_eq!(is_snake(b), pattern);
        }

        #[test]
        fn the_scan_agrees_with_the_reference(text in "[a-cA-C0-9uv_./\\\\ \n-]{0,60}", escaped in proptest::bool::ANY) {
            let (new, old) = scans(&text, escaped);
            proptest::prop_assert_eq!(new, old);
        }

        #[test]
        fn the_trigger_search_agrees_at_every_class_edge(text in "[a-buzA-BZ09_./\\\\ :@\\[`{é\u{1F600}-]{0,100}", escaped in proptest::bool::ANY) {
            // The bytes either side of each range `next_trigger` tests, over
            // several eight-byte words.
            let (new, old) = scans(&text, escaped);
            proptest::prop_assert_eq!(new, old);
        }

        #[test]
        fn the_trigger_lanes_agree_with_the_bytes(text in "[a-bzA-BZ09_./\\\\ :@\\[`{é-]{0,70}", from in 0usize..72) {
            let b = text.as_bytes();
            proptest::prop_assert_eq!(next_trigger::<false>(b, from), next_trigger_bytes::<false>(b, from));
            proptest::prop_assert_eq!(next_trigger::<true>(b, from), next_trigger_bytes::<true>(b, from));
        }

        #[test]
        fn the_short_cut_agrees_on_any_text(text in "[a-zA-Z0-9_./\\\\ -]{0,80}") {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            scan_terms::<false, true>(&text, |t| fast.push(t));
            scan_terms::<false, false>(&text, |t| slow.push(t));
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn reference_search_finds_what_the_plain_search_finds() {
        let plain = |text: &str| -> Vec<(usize, usize)> {
            REF.find_iter(text).map(|m| (m.start(), m.end())).collect()
        };
        let jumps = |text: &str| -> Vec<(usize, usize)> {
            let mut out = Vec::new();
            let mut at = 0;
            while let Some(start) = reference_search_start(text.as_bytes(), at) {
                let Some(m) = REF.find_at(text, start) else {
                    break;
                };
                out.push((m.start(), m.end()));
                at = m.end();
            }
            out
        };
        let mut texts: Vec<String> = [
            "",
            "a/b",
            "a\\b",
            "Error",
            "xError",
            "E",
            "Erro",
            "Exceptio",
            "EException",
            "EEError",
            "no refs here",
            "TypeError: x",
            "my Exception.",
            "ERROR",
            "error/",
            "see https://example.com/a/b.html and C:\\dir\\x.txt",
            "http://localhost:3000 x/y.rs:3 FooException, http://h/p?q=1",
            "a/b c.d e/f.g ~/h.i /j/k.l m\u{a0}n/o.p ValueError.",
            "x/y/z.rs.bak src/a.ts: (src/b.ts) 'src/c.ts' `d/e.md`",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        texts.extend([include_str!("lines.rs"), include_str!("summary.rs")].map(String::from));
        // Random runs of the marks and words references are made of.
        const PARTS: &[&str] = &[
            "/",
            "\\",
            ".",
            ":",
            "://",
            "http",
            "https",
            "a",
            "B",
            "é",
            "rs",
            "Error",
            "Exception",
            "x",
            " ",
            "\t",
            "\u{a0}",
            "~",
            "@",
            "-",
            "C:",
            "1",
            ")",
            "\"",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let mut t = String::new();
            for _ in 0..seed % 14 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                t.push_str(PARTS[(seed % PARTS.len() as u64) as usize]);
            }
            seed = seed.wrapping_add(1);
            texts.push(t);
        }
        for t in &texts {
            assert_eq!(jumps(t), plain(t), "{t:?}");
        }
    }

    #[test]
    fn every_sql_type_passes_in_any_case() {
        for ty in SQL_TYPES {
            for v in [ty.to_string(), ty.to_uppercase(), format!("{ty} NOT NULL")] {
                assert!(maybe_sql_type(&v), "{v}");
            }
        }
        assert!(!maybe_sql_type("foo int"));
        assert!(!maybe_sql_type(""));
    }

    #[test]
    fn number_prefix_agrees_with_the_regex() {
        for l in [
            "12\tx",
            "    12→x",
            "12:x",
            "12|x",
            "  7: y",
            "12345678\tx",
            "1234567\tx",
            "\u{a0}3→z",
            "x12\t",
            "12 x",
            "",
            "   ",
            "٣→x",
            "12٣→x",
            "12",
            "→",
            "0:",
            "\t\t9|",
            "\u{b}4:x",
            "\u{2003}5\t",
            "007|x",
            "9999999:",
            "12é",
        ] {
            assert_eq!(number_prefix(l), regex_prefix(l), "{l:?}");
        }
    }

    /// What [`NUMBERED`] finds at the start of `l`, the digits parsed.
    fn regex_prefix(l: &str) -> Option<(Option<u64>, usize)> {
        NUMBERED
            .captures(l)
            .and_then(|c| Some((c.get(1)?.as_str().parse().ok(), c.get(0)?.end())))
    }

    proptest::proptest! {
        #[test]
        fn byte_helpers_agree_with_the_char_versions(s in "[ \t\u{b}\u{a0}\u{2003}aZ9_$(é٣K\u{212a}]{0,14}(int|INTEGER|Text|bool|json|x)?[ a(]{0,2}") {
            let old_word = {
                let t = s.trim_start();
                let end = t
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                    .unwrap_or(t.len());
                &t[..end]
            };
            proptest::prop_assert_eq!(first_word(&s), old_word);
            proptest::prop_assert_eq!(word_at(trim(&s)), old_word);
            proptest::prop_assert_eq!(indent_of(&s), indent_of_chars(&s));
            if !trim(&s).is_empty() {
                proptest::prop_assert_eq!(indent_before(&s, trim(&s)), indent_of_chars(&s));
            }
            proptest::prop_assert_eq!(
                after_first_space(&s),
                s.split_once(char::is_whitespace).map(|(_, r)| r)
            );
            // A non-ASCII character may fold to a letter of a name (`ſ` to
            // `s`): one first passes, one among the first twelve after a
            // name's first letter too.
            let initial = s.chars().next().is_some_and(|c| {
                !c.is_ascii() || SQL_TYPES.iter().any(|ty| ty.starts_with(c.to_ascii_lowercase()))
            });
            let old_sql = (initial && s.chars().take(12).any(|c| !c.is_ascii()))
                || SQL_TYPES.iter().any(|ty| {
                    s.as_bytes()
                        .get(..ty.len())
                        .is_some_and(|p| p.eq_ignore_ascii_case(ty.as_bytes()))
                });
            proptest::prop_assert_eq!(maybe_sql_type(&s), old_sql);
        }

        #[test]
        fn number_prefix_is_the_regex(l in "[ \t\u{a0}\u{2003}\u{b}]{0,3}[0-9٣]{0,9}[\t:|→ xé٣]{0,2}[a-z]{0,2}") {
            proptest::prop_assert_eq!(number_prefix(&l), regex_prefix(&l));
        }

        #[test]
        fn trim_and_is_blank_are_std(s in "[ \t\n\r\u{b}\u{c}\u{a0}\u{2003}\u{85}aé]{0,8}") {
            proptest::prop_assert_eq!(trim(&s), s.trim());
            proptest::prop_assert_eq!(is_blank(&s), s.trim().is_empty());
        }
    }

    use super::*;

    fn rank(body: &str, lang: Lang) -> Option<Rank> {
        declaration(
            body,
            lang,
            &mut OutlineState::default(),
            &mut LineRanks::default(),
        )
    }

    #[test]
    fn numbered_lines_are_detected_in_every_style() {
        for text in [
            "1\tuse std;\n2\t\n3\tfn main() {}\n",
            "     1→use std;\n     2→\n     3→fn main() {}\n",
            "1:use std;\n2:\n3:fn main() {}\n",
        ] {
            let l = split_numbered(text);
            assert_eq!(l.len(), 3, "{text}");
            assert_eq!(l[0].number, Some(1));
            assert_eq!(l[0].body, "use std;");
            assert_eq!(l[2].body, "fn main() {}");
        }
        // Not numbered: times and ports are not line numbers.
        let l = split_numbered("12:30 started\n08:15 done\nno number here\n");
        assert!(l.iter().all(|x| x.number.is_none()));
    }

    #[test]
    fn code_declarations() {
        let code = [
            ("export class AuthService {", Some(Rank::Structure)),
            (
                "  async login(user: string): Promise<void> {",
                Some(Rank::Structure),
            ),
            (
                "func (h *AuthHandler) Login(c *gin.Context) {",
                Some(Rank::Structure),
            ),
            ("def handle_error(self, err):", Some(Rank::Structure)),
            (
                "pub(crate) fn parse(s: &str) -> Result<(), E> {",
                Some(Rank::Structure),
            ),
            (
                "export const fetchUser = async (id: number) => {",
                Some(Rank::Structure),
            ),
            (
                "router.post('/api/login', loginHandler);",
                Some(Rank::Structure),
            ),
            ("describe('AuthService', () => {", Some(Rank::Structure)),
            (
                "  await test('POST /auth/login', async () => {",
                Some(Rank::Structure),
            ),
            (
                "    public ResponseEntity<User> getUser(@PathVariable Long id) {",
                Some(Rank::Structure),
            ),
            ("  lockoutSeconds: number = 0;", Some(Rank::Member)),
            ("\tUserID    uint   `json:\"user_id\"`", Some(Rank::Member)),
            (
                "    private final UserRepository userRepository;",
                Some(Rank::Member),
            ),
            ("@Component({", None),
            ("@GetMapping(\"/users/{id}\")", Some(Rank::Member)),
            ("MAX_RETRIES = 5", Some(Rank::Member)),
            (
                "import { Component } from '@angular/core';",
                Some(Rank::Import),
            ),
            ("from app.models import User", Some(Rank::Import)),
            ("    if (user) {", None),
            ("    for (const x of xs) {", None),
            ("    return foo(bar);", None),
            ("    this.lockoutSeconds--;", None),
            ("// class Foo {", None),
            (
                "    suspend fun loadRules(id: Long): List<Rule> {",
                Some(Rank::Structure),
            ),
            (
                "static int parse_args(int argc, char **argv)",
                Some(Rank::Structure),
            ),
            ("return foo(bar);", None),
            ("    dioxus::launch(App);", None),
            ("              id: \"username\",", None),
        ];
        for (line, want) in code {
            assert_eq!(rank(line, Lang::Code), want, "{line}");
        }
    }

    #[test]
    fn data_declarations() {
        assert_eq!(rank("services:", Lang::Yaml), Some(Rank::Structure));
        assert_eq!(rank("  mysql:", Lang::Yaml), Some(Rank::Member));
        assert_eq!(rank("        deep: 1", Lang::Yaml), None);
        assert_eq!(
            rank("  \"@jest/globals\": \"^29.7.0\",", Lang::Json),
            Some(Rank::Structure)
        );
        assert_eq!(
            rank("CREATE TABLE users (", Lang::Sql),
            Some(Rank::Structure)
        );
        assert_eq!(
            rank("    failed_login_count INT NOT NULL DEFAULT 0,", Lang::Sql),
            Some(Rank::Member)
        );
        assert_eq!(rank("## Setup", Lang::Doc), Some(Rank::Structure));
        assert_eq!(
            rank("DATABASE_URL=postgres://x", Lang::Ini),
            Some(Rank::Member)
        );
        assert_eq!(rank(".login-card {", Lang::Css), Some(Rank::Structure));
        assert_eq!(lang_of("E:\\a\\b\\schema.SQL"), Lang::Sql);
        assert_eq!(lang_of("/r/.env.example"), Lang::Ini);
        assert_eq!(lang_of("/r/x.ts"), Lang::Code);
    }

    #[test]
    fn style_blocks_and_comments_are_skipped() {
        let mut st = OutlineState::default();
        let lines = [
            "<style scoped>",
            ".card {",
            "  color: red;",
            "}",
            "</style>",
            "/* class Foo {",
            "   fn bar() {} */",
            "class Real {",
        ];
        let got: Vec<Option<Rank>> = lines
            .iter()
            .map(|l| declaration(l, Lang::Code, &mut st, &mut LineRanks::default()))
            .collect();
        assert_eq!(
            got,
            vec![
                Some(Rank::Structure),
                Some(Rank::Member),
                None,
                None,
                None,
                None,
                None,
                Some(Rank::Structure)
            ]
        );
    }

    #[test]
    fn error_and_count_lines() {
        assert!(is_error_line("TypeError: x is undefined"));
        assert!(is_error_line("error[E0308]: mismatched types"));
        assert!(is_error_line("--- FAIL: TestLogin (0.01s)"));
        assert!(!is_error_line("Tests: 0 failed, 12 passed"));
        assert!(!is_error_line("compiled fine"));
        assert!(is_count_line("Tests:       12 passed, 12 total"));
        assert!(is_count_line(
            "ok  \tcampus-portal/internal/handlers\t1.459s"
        ));
        assert!(is_count_line("===== 3 passed in 0.12s ====="));
        assert!(!is_count_line("hello world"));
        assert!(is_diagnostic(
            "internal/handler/audit.go:5:2: \"database/sql\" imported and not used"
        ));
        assert!(is_diagnostic(
            "src/api/routes.ts(72,57): error TS2322: Type"
        ));
        assert!(!is_diagnostic("Compiling app v0.1.0"));
        assert!(is_count_line(
            "agentId: a4f441da0e38d5fcc (use SendMessage to continue)"
        ));
        assert!(is_error_line(
            "  x  10 [chromium] › tests/03.spec.ts:17:7 › loads (5.7s)"
        ));
    }

    /// Random lines of the words and marks the error and heading patterns
    /// look for: each cheap condition lets through every line its regex
    /// matches, in a text of numbered lines too.
    #[test]
    fn line_prefilters_pass_random_lines() {
        const TOKENS: &[&str] = &[
            "error",
            "Error",
            "ERROR",
            "TypeError",
            "errors",
            "FAILED",
            "FAIL",
            "failed",
            "failures",
            "panic",
            "Panic",
            "Traceback",
            "Exception",
            "exception",
            "fatal",
            "FATAL",
            "Segmentation fault",
            "command not found",
            "No such file",
            "Permission denied",
            "✗",
            "✘",
            "✖",
            "x",
            "×",
            "X",
            "0",
            "3",
            "12",
            "٣",
            "passed",
            "tests",
            "test",
            "test suites",
            "specs",
            "warnings",
            "matches",
            "files",
            "lines",
            "rows",
            "modules",
            "vulnerabilities",
            "assertions",
            "ok",
            "Ok",
            "PASS",
            "pass",
            "---",
            "--",
            "===",
            "=",
            "duration",
            "time",
            "Time",
            "ran",
            "exit",
            "exited",
            "EXIT",
            "with",
            "code",
            "status",
            "build",
            "Build",
            "succeeded",
            "compiled",
            "successfully",
            "agent",
            "session",
            "task",
            "taſk",
            "Kelvin\u{212a}",
            "request",
            "run",
            "chunk",
            "id",
            "ID",
            "_id",
            "-id",
            "Id",
            "idx",
            ":",
            ";",
            ",",
            ".",
            "#",
            "##",
            "a",
            "plain",
            "words",
            "é",
        ];
        const SPACES: &[&str] = &[" ", " ", "", "\t", "  ", "\u{a0}", "\u{2003}"];
        let mut next = xorshift(0x853c_49e6_748f_ea9b);
        let mut matched = [0usize; 2];
        for _ in 0..400 {
            let mut text = String::new();
            let numbered = next(2) == 0;
            for n in 1..=40 {
                if numbered {
                    text.push_str(&format!("{n:>6}\t"));
                }
                for _ in 0..next(3) {
                    text.push_str(SPACES[next(SPACES.len())]);
                }
                for k in 0..next(8) {
                    if k > 0 {
                        text.push_str(SPACES[next(SPACES.len())]);
                    }
                    text.push_str(TOKENS[next(TOKENS.len())]);
                }
                text.push_str(if next(5) == 0 { "\r\n" } else { "\n" });
            }
            let lines = split_numbered(&text);
            let maybe_error = error_line_candidates(&text, &lines);
            assert_eq!(maybe_error.len(), lines.len());
            for (l, maybe) in lines.iter().zip(maybe_error) {
                let body = l.body;
                if ERROR_LINE.is_match(body) {
                    matched[0] += 1;
                    assert!(maybe, "{body:?}");
                }
                assert_eq!(is_heading(body), HEADING.is_match(body), "{body:?}");
                // The outline's prefilter of Markdown headings (on the
                // trimmed line).
                assert!(
                    trim(body).starts_with('#') || !HEADING.is_match(body),
                    "{body:?}"
                );
                matched[1] += usize::from(HEADING.is_match(body));
            }
        }
        assert!(matched.iter().all(|n| *n > 100), "{matched:?}");
    }

    proptest::proptest! {
        #[test]
        fn markdown_headings_start_with_a_hash(
            body in "( |\t|\u{a0}|\u{2003}|\r){0,4}(#|##|#######|a|é| |\t|\u{a0}){0,5}",
        ) {
            proptest::prop_assert!(trim(&body).starts_with('#') || !HEADING.is_match(&body));
        }
    }

    #[test]
    fn clip_and_shape_are_the_char_versions() {
        let old_clip = |s: &str, max: usize| {
            if s.chars().count() <= max {
                return s.to_string();
            }
            let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
            out.push('…');
            out
        };
        let old_shape = |s: &str| {
            let mut out = String::new();
            let mut in_digits = false;
            for c in s.trim().chars() {
                if c.is_ascii_digit() {
                    if !in_digits {
                        out.push('#');
                    }
                    in_digits = true;
                } else {
                    in_digits = false;
                    out.push(c);
                }
            }
            out
        };
        for s in [
            "",
            "a",
            "ab",
            "abc",
            "é",
            "éé",
            "aé",
            "éa",
            "日本語",
            "12",
            " 1a22b333 ",
            "x9",
            "\u{a0}7é8\u{2003}",
            "9",
            "a1é2日3",
            "  \t ",
        ] {
            assert_eq!(shape(s), old_shape(s), "{s:?}");
            for max in 0..6 {
                assert_eq!(clip(s, max), old_clip(s, max), "{s:?} {max}");
            }
        }
    }

    #[test]
    fn references_and_helpers() {
        let r = references(
            "see src/app/main.ts and https://x.io/a, then ValueError in src/app/main.ts",
            10,
        );
        assert_eq!(r, vec!["src/app/main.ts", "https://x.io/a", "ValueError"]);
        assert_eq!(references("a/b.rs c/d.rs", 1), vec!["a/b.rs"]);
        assert_eq!(references("at `/home/u/x.go`", 5), vec!["/home/u/x.go"]);
        assert_eq!(clip("héllo", 3), "hé…");
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(shape(" 12.5MB / 20MB "), "#.#MB / #MB");
        let t: Vec<&str> =
            terms("see src/a.rs: fooBar FooBar foo_bar v1.2.3 12MB deadbeef1 TypeError plain");
        assert_eq!(
            t,
            vec![
                "src/a.rs",
                "fooBar",
                "FooBar",
                "foo_bar",
                "v1.2.3",
                "TypeError"
            ]
        );
        assert_eq!(
            terms("./src/user_service.ts, this.loadUser(x). Use pkg@1.2.3-beta"),
            vec!["src/user_service.ts", "user_service", "loadUser", "1.2.3"]
        );
        let mut esc = Vec::new();
        for_each_term(
            r#"{"content": "import x\nconst fooBar = \"a_b\";\u00e9camelCase"}"#,
            true,
            |t| esc.push(t),
        );
        assert_eq!(esc, vec!["fooBar", "a_b", "camelCase"]);
    }
}
