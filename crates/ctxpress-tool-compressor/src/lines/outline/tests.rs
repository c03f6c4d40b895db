//! Tests of the outline: declarations and their ranks, and the cheap
//! prefilters against the regexes they stand in front of.

use super::reference::*;
use super::*;
use crate::lines::tests::xorshift;
use crate::lines::{split_numbered, trim};

#[test]
fn declaration_prefilters_agree_with_the_regexes() {
    let sources = [
        include_str!("../mod.rs"),
        include_str!("../prefixes.rs"),
        include_str!("../outline.rs"),
        include_str!("../errors.rs"),
        include_str!("../references.rs"),
        include_str!("../terms.rs"),
        include_str!("../../summary.rs"),
        include_str!("../../lib.rs"),
        include_str!("../../../../ctxpress-dialect/src/shell.rs"),
        include_str!("../../../../ctxpress-core/src/message.rs"),
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
        include_str!("../mod.rs"),
        include_str!("../prefixes.rs"),
        include_str!("../outline.rs"),
        include_str!("../errors.rs"),
        include_str!("../references.rs"),
        include_str!("../terms.rs"),
        include_str!("../../summary.rs"),
        include_str!("../../lib.rs"),
        include_str!("../../tests.rs"),
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
        include_str!("../mod.rs"),
        include_str!("../prefixes.rs"),
        include_str!("../outline.rs"),
        include_str!("../errors.rs"),
        include_str!("../references.rs"),
        include_str!("../terms.rs"),
        include_str!("../../summary.rs"),
        include_str!("../../lib.rs"),
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
}

fn rank(body: &str, lang: Lang) -> Option<Rank> {
    declaration(
        body,
        lang,
        &mut OutlineState::default(),
        &mut LineRanks::default(),
    )
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

proptest::proptest! {
    #[test]
    fn markdown_headings_start_with_a_hash(
        body in "( |\t|\u{a0}|\u{2003}|\r){0,4}(#|##|#######|a|é| |\t|\u{a0}){0,5}",
    ) {
        proptest::prop_assert!(trim(&body).starts_with('#') || !HEADING.is_match(&body));
    }
}
