//! Tests of the FTS5 search index: what is indexed, ranking, limits and filters, rewrites,
//! atomicity, upgrades, query syntax taken as plain text.
use super::*;
use crate::search::searchable;
use proptest::prelude::*;

fn rec(key: &str, originals: &[&str]) -> Record {
    Record {
        key: key.into(),
        originals: originals.iter().map(|s| s.to_string()).collect(),
    }
}

fn user(text: &str) -> String {
    serde_json::json!({"role": "user", "content": text}).to_string()
}

fn tool_call(name: &str, args: &str) -> String {
    serde_json::json!({"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
    ]})
    .to_string()
}

fn tool_result(text: &str) -> String {
    serde_json::json!({"role": "tool", "tool_call_id": "call_1", "content": text}).to_string()
}

fn anthropic_result(text: &str) -> String {
    serde_json::json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": text}]}
    ]})
    .to_string()
}

pub(crate) fn check_integrity(a: &SqliteArchive) {
    let conn = a.lock();
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    conn.execute(
        "INSERT INTO search_fts(search_fts) VALUES ('integrity-check')",
        [],
    )
    .unwrap();
    let (docs, fts): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM search_docs), (SELECT count(*) FROM search_fts)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(docs, fts);
}

#[test]
fn bundled_sqlite_has_fts5() {
    let conn = Connection::open_in_memory().unwrap();
    let opts: Vec<String> = conn
        .prepare("PRAGMA compile_options")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(opts.iter().any(|o| o == "ENABLE_FTS5"), "{opts:?}");
}

#[test]
fn searchable_text_flattens_strings_and_skips_ids() {
    let (t, role) = searchable(&tool_call(
        "str_replace_editor",
        r#"{"path": "/repo/src/parser.py"}"#,
    ));
    assert_eq!(role.as_deref(), Some("assistant"));
    assert!(
        t.contains("str_replace_editor") && t.contains("/repo/src/parser.py"),
        "{t}"
    );
    assert!(!t.contains("call_1") && !t.contains("function\n"), "{t}");
    let (t, role) = searchable(&anthropic_result("Traceback: KeyError 'zebra'"));
    assert_eq!(role.as_deref(), Some("user"));
    assert_eq!(t, "Traceback: KeyError 'zebra'");
    let (t, role) = searchable("not json at all");
    assert_eq!((t.as_str(), role), ("not json at all", None));
}

#[test]
fn writes_are_indexed_with_role_key_and_conversation() {
    let a = SqliteArchive::open_in_memory().unwrap();
    a.put_for(
        Some("conv-a"),
        &[
            rec(
                "k1",
                &[
                    &tool_call("open", r#"{"path": "src/widget_factory.rs"}"#),
                    &tool_result("fn build_widget() {}"),
                ],
            ),
            rec(
                "doc:k9",
                &[
                    &user("please fix the widget"),
                    &tool_call("open", r#"{"path": "src/widget_factory.rs"}"#),
                    &tool_result("fn build_widget() {}"),
                ],
            ),
        ],
    )
    .unwrap();
    a.put(&[rec("k2", &[&user("unrelated zebra text")])])
        .unwrap();
    check_integrity(&a);
    // Each text once per batch: the two in k1 under k1, the user message under doc:.
    let n: i64 = a
        .lock()
        .query_row("SELECT count(*) FROM search_docs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 4);

    let hits = a.search("widget_factory.rs", None, 10).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    let h = &hits[0];
    assert_eq!(h.kind, HitKind::Original);
    assert_eq!(h.conversation.as_deref(), Some("conv-a"));
    assert_eq!(
        (h.key.as_str(), h.pos, h.role.as_deref()),
        ("k1", 0, Some("assistant"))
    );
    assert!(h.snippet.contains("«widget_factory.rs»"), "{}", h.snippet);
    assert!(h.score > 0.0);
    let orig = a.read(&h.key).unwrap().unwrap();
    assert!(orig[h.pos].contains("widget_factory.rs"));

    // `_` and `.` separate words: `widget` is in all three texts.
    assert_eq!(a.search("widget", None, 10).unwrap().len(), 3);
    let hits = a.search("fix widget", None, 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(
        (hits[0].key.as_str(), hits[0].role.as_deref()),
        ("doc:k9", Some("user"))
    );
    let hits = a.search("zebra", None, 10).unwrap();
    assert_eq!(hits[0].conversation, None);
    assert!(a.search("nothing-like-this", None, 10).unwrap().is_empty());
    assert!(a.read("missing").unwrap().is_none());
}

#[test]
fn ranking_limit_and_conversation_filter() {
    let a = SqliteArchive::open_in_memory().unwrap();
    a.put_for(
        Some("c1"),
        &[rec("a1", &[&user("kiwi kiwi kiwi kiwi banana")])],
    )
    .unwrap();
    a.put_for(
        Some("c2"),
        &[rec(
            "a2",
            &[&user(
                "kiwi once among many other words here and there and so on",
            )],
        )],
    )
    .unwrap();
    a.put_for(Some("c2"), &[rec("a3", &[&user("banana only")])])
        .unwrap();
    let hits = a.search("kiwi", None, 10).unwrap();
    assert_eq!(
        hits.iter().map(|h| h.key.as_str()).collect::<Vec<_>>(),
        ["a1", "a2"]
    );
    assert!(hits[0].score > hits[1].score);
    assert_eq!(a.search("kiwi", None, 1).unwrap().len(), 1);
    assert!(a.search("kiwi", None, 0).unwrap().is_empty());
    let c2 = a.search("kiwi", Some("c2"), 10).unwrap();
    assert_eq!(c2.len(), 1);
    assert_eq!(c2[0].conversation.as_deref(), Some("c2"));
    assert!(a.search("kiwi", Some("c3"), 10).unwrap().is_empty());
    // All words must occur.
    let both = a.search("banana kiwi", None, 10).unwrap();
    assert_eq!(
        both.iter().map(|h| h.key.as_str()).collect::<Vec<_>>(),
        ["a1"]
    );
    // Non-ASCII, case and diacritics.
    a.put(&[rec("a4", &[&user("Überprüfung der Größe: café")])])
        .unwrap();
    assert_eq!(a.search("cafe", None, 10).unwrap().len(), 1);
    assert_eq!(a.search("GRÖSSE überprüfung", None, 10).unwrap().len(), 0);
    assert_eq!(a.search("größe uberprufung", None, 10).unwrap().len(), 1);
}

#[test]
fn rewriting_a_key_replaces_its_rows() {
    let a = SqliteArchive::open_in_memory().unwrap();
    a.put(&[rec("k", &[&user("alpha")])]).unwrap();
    a.put(&[
        rec("k", &[&user("beta")]),
        rec("j", &[&user("gamma")]),
        rec("j", &[&user("delta")]),
    ])
    .unwrap();
    assert!(a.search("alpha", None, 10).unwrap().is_empty());
    assert_eq!(a.search("beta", None, 10).unwrap().len(), 1);
    assert!(a.search("gamma", None, 10).unwrap().is_empty());
    assert_eq!(a.search("delta", None, 10).unwrap().len(), 1);
    // The same batch again leaves the same index.
    a.put(&[rec("k", &[&user("beta")])]).unwrap();
    assert_eq!(a.search("beta", None, 10).unwrap().len(), 1);
    check_integrity(&a);
}

#[test]
fn failing_batch_indexes_nothing() {
    let a = SqliteArchive::open_in_memory().unwrap();
    a.lock()
        .execute_batch(
            "CREATE TRIGGER poison BEFORE INSERT ON records WHEN NEW.key = 'poison' \
             BEGIN SELECT RAISE(ABORT, 'forced failure'); END;",
        )
        .unwrap();
    a.put(&[rec("k1", &[&user("walrus")]), rec("poison", &[&user("x")])])
        .unwrap_err();
    assert!(a.search("walrus", None, 10).unwrap().is_empty());
    check_integrity(&a);
}

#[test]
fn version_1_archive_is_upgraded_and_backfilled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        // An archive as version 1 wrote it: no search tables.
        let a = SqliteArchive::open(&path).unwrap();
        a.put_for(
            Some("c"),
            &[
                rec("k1", &[&tool_result("panic in src/lexer.rs line 42")]),
                rec(
                    "doc:d",
                    &[
                        &user("start"),
                        &tool_result("panic in src/lexer.rs line 42"),
                    ],
                ),
            ],
        )
        .unwrap();
        let conn = a.lock();
        conn.execute_batch(
            "DROP TABLE search_fts; DROP TABLE search_docs; DROP TABLE batches; \
             DROP TABLE messages; DROP TABLE run_batches; DROP TABLE runs; \
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let a = SqliteArchive::open(&path).unwrap();
    let v: i64 = a
        .lock()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let hits = a.search("lexer.rs", None, 10).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(
        (hits[0].key.as_str(), hits[0].conversation.as_deref()),
        ("k1", None)
    );
    let hits = a.search("start", None, 10).unwrap();
    assert_eq!(hits[0].key, "doc:d");
    check_integrity(&a);
    drop(a);
    // Opening again does not index twice.
    let a = SqliteArchive::open(&path).unwrap();
    assert_eq!(a.search("lexer", None, 10).unwrap().len(), 1);
}

#[test]
fn fts5_syntax_is_plain_text() {
    let a = SqliteArchive::open_in_memory().unwrap();
    a.put(&[rec(
        "k",
        &[&user(
            r#"run "cargo test" -- --nocapture: NOT (fail*) AND OR NEAR col:x ^start"#,
        )],
    )])
    .unwrap();
    for q in [
        "\"cargo test\"",
        "--nocapture",
        "NOT",
        "(fail*)",
        "AND OR",
        "NEAR",
        "col:x",
        "^start",
        "fail*",
        "\"",
        "\"\"",
        "-",
        "*",
        "(",
        ")",
        ":",
        "",
        "   ",
        "{col} : x",
        "NEAR(a b, 3)",
        "🦀 日本語",
        "\u{0}",
    ] {
        a.search(q, None, 10)
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
        a.search(q, Some(q), 10)
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
    }
    assert_eq!(a.search("NOT", None, 10).unwrap().len(), 1);
    assert_eq!(a.search("(fail*)", None, 10).unwrap().len(), 1);
    assert_eq!(a.search("col:x", None, 10).unwrap().len(), 1);
    assert!(
        a.search("fai*", None, 10).unwrap().is_empty(),
        "no prefix search"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any query string searches without an error.
    #[test]
    fn any_query_never_errors(q in any::<String>(), c in proptest::option::of(any::<String>())) {
        let a = SqliteArchive::open_in_memory().unwrap();
        a.put_for(Some("c"), &[rec("k", &[&user(&q), &user("some words")])]).unwrap();
        let hits = a.search(&q, c.as_deref(), 5).unwrap();
        prop_assert!(hits.len() <= 5);
        a.search(&format!("{q} \"{q}\" -{q}* ({q}"), None, 5).unwrap();
    }

    /// Any word made of letters finds the message it was archived in.
    #[test]
    fn archived_words_are_found(w in "[a-zA-Zà-ö]{1,12}") {
        let a = SqliteArchive::open_in_memory().unwrap();
        a.put(&[rec("k", &[&user(&format!("before {w} after"))])]).unwrap();
        let hits = a.search(&w, None, 5).unwrap();
        prop_assert_eq!(hits.len(), 1);
    }
}
