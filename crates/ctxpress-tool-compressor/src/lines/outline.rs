//! The outline of a file: its kind by path ([`lang_of`]), and which of its
//! lines declare something ([`declaration`]: imports, types, functions,
//! methods, fields, routes, tests, headings, keys, SQL statements) with
//! their [`Rank`]. Cheap byte and word checks let most lines out before any
//! regex runs; [`LineRanks`] remembers the rank of each distinct line met in
//! a run.
//!
//! The summary builder of a conversation (`Summaries`) keeps one
//! [`LineRanks`] for the run: each distinct line keyed by a 64-bit hash of
//! its bytes, at most 65,536 lines, dropped with the run.

use super::prefixes::{ascii_space, leading_space, trim_after};
use super::re;
use super::terms::{T_WORD, TERM_BYTES};
use regex::Regex;
use std::collections::hash_map::Entry;
use std::sync::LazyLock;

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
pub(super) static HEADING: LazyLock<Regex> = LazyLock::new(|| re(r"^\s{0,3}#{1,6}\s+\S"));
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
/// taken one for the other. At most `LINE_RANKS_CAP` lines.
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

/// [`declaration`] of `body`, `t` its [`trim`](super::trim).
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

/// The rank of a line of code `body` (`t` its [`trim`](super::trim), starting with a
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

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests;
