//! Parse → serialize is the identity on every real conversation of the corpus
//! and on generated conversations of both dialects; the invariant checker
//! accepts well-formed conversations and catches a dropped tool result; and the
//! pipeline reverts a stage that drops one.

use ctxpress_core::{
    Conversation, Format, Pipeline, Role, StageContext, StageOutcome, StageStatus,
    Strategy as CoreStrategy, StrategyError, ViolationKind, validate,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn first_difference(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

fn check_line(file: &str, n: usize, line: &str) {
    let conv = Conversation::parse(line)
        .unwrap_or_else(|e| panic!("{file}:{}: does not parse: {e}", n + 1));
    let out = conv.to_json_string();
    assert!(
        out == line,
        "{file}:{}: output differs from input at byte {} (lengths {} / {})",
        n + 1,
        first_difference(&out, line),
        out.len(),
        line.len()
    );
    let want: Value = serde_json::from_str(line).unwrap();
    let got: Value = serde_json::from_str(&out).unwrap();
    assert!(got == want, "{file}:{}: JSON values differ", n + 1);
    // The typed view holds the same messages the document does.
    assert!(
        conv.to_value() == want["messages"],
        "{file}:{}: parsed messages differ from the document's",
        n + 1
    );
    // Rewritten messages serialize to the same JSON value (only bytes may differ).
    let mut touched = conv.clone();
    for m in &mut touched.messages {
        m.fields_mut();
    }
    let re: Value = serde_json::from_str(&touched.to_json_string()).unwrap();
    assert!(
        re == want,
        "{file}:{}: re-serialized messages differ",
        n + 1
    );
}

#[test]
fn every_corpus_conversation_round_trips_byte_for_byte() {
    let files = ctxpress_tests::corpus::files();
    let mut total = 0;
    for path in &files {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into());
        let text = std::fs::read_to_string(path).unwrap();
        let mut count = 0;
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            check_line(&name, n, line);
            count += 1;
        }
        assert!(count > 0, "{name} holds no conversation");
        total += count;
    }
    eprintln!("{total} conversations in {} files round-trip", files.len());
}

// ---------------------------------------------------------------------------
// Generated conversations.

#[derive(Debug, Clone)]
struct Call {
    name: String,
    args: Value,
    result: String,
    is_error: bool,
}

#[derive(Debug, Clone)]
enum Item {
    System(String),
    User {
        text: String,
        parts: bool,
    },
    Assistant(String),
    Exchange {
        preface: Option<String>,
        calls: Vec<Call>,
    },
}

type Fields = Vec<(String, Value)>;

#[derive(Debug, Clone)]
struct Gen {
    anthropic: bool,
    /// Each message with its extra fields, placed before or after the known ones.
    items: Vec<(Item, Fields, bool)>,
    envelope_extras: Vec<(String, Value)>,
    bare_array: bool,
    spaced: bool,
    ascii: bool,
    pretty: bool,
    padding: (String, String),
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z ]{1,12}",
        "\\PC{1,16}",
        Just("quote \" backslash \\ slash / newline \n tab \t ctrl \u{1} nul \u{0}".to_string()),
        Just("emoji 🦀 é ñ 中文 \u{2028} \u{feff}".to_string()),
    ]
    .prop_map(|s| {
        if s.trim().is_empty() {
            format!("x{s}")
        } else {
            s
        }
    })
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Dyadic fractions: exact in binary, so parsing is exact without
        // serde_json's `float_roundtrip` (see `long_floats_survive_rewriting`).
        (-1_000_000_000i64..1_000_000_000).prop_map(|n| json!(n as f64 / 64.0)),
        text().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::vec(("[a-z_]{1,6}", inner), 0..3)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn extras() -> impl Strategy<Value = Vec<(String, Value)>> {
    let key = prop_oneof![
        Just("x_meta".to_string()),
        Just("annotations".to_string()),
        Just("id".to_string()),
        Just("name".to_string()),
        "z_[a-z]{1,4}",
    ];
    proptest::collection::vec((key, json_value()), 0..3)
}

fn call() -> impl Strategy<Value = Call> {
    (
        "[A-Za-z_]{1,10}",
        json_value(),
        text(),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(name, args, result, is_error)| Call {
            name,
            args: json!({ "arg": args }),
            result,
            is_error,
        })
}

fn exchange() -> impl Strategy<Value = Item> {
    (
        proptest::option::of(text()),
        proptest::collection::vec(call(), 1..4),
    )
        .prop_map(|(preface, calls)| Item::Exchange { preface, calls })
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        text().prop_map(Item::System),
        (text(), any::<bool>()).prop_map(|(text, parts)| Item::User { text, parts }),
        text().prop_map(Item::Assistant),
        exchange(),
    ]
}

fn generated() -> impl Strategy<Value = Gen> {
    let entry = || (item(), extras(), any::<bool>());
    (
        any::<bool>(),
        proptest::collection::vec(entry(), 0..7),
        (exchange(), extras(), any::<bool>()),
        any::<usize>(),
        extras(),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        (
            prop_oneof![Just(""), Just(" "), Just("\n  ")],
            prop_oneof![Just(""), Just("\n"), Just(" \n")],
        ),
    )
        .prop_map(
            |(anthropic, mut items, forced, at, envelope_extras, flags, pad)| {
                // Every generated conversation holds at least one tool exchange.
                let at = at % (items.len() + 1);
                items.insert(at, forced);
                let (bare_array, spaced, ascii, pretty) = flags;
                Gen {
                    anthropic,
                    items,
                    envelope_extras,
                    bare_array: bare_array && !anthropic,
                    spaced,
                    ascii,
                    pretty,
                    padding: (pad.0.to_string(), pad.1.to_string()),
                }
            },
        )
}

fn with_extras(base: Value, extras: &[(String, Value)], before: bool) -> Value {
    let Value::Object(base) = base else {
        return base;
    };
    let mut out = Map::new();
    let ex = extras
        .iter()
        .filter(|(k, _)| !base.contains_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect::<Vec<_>>();
    if before {
        out.extend(ex);
        out.extend(base);
    } else {
        out.extend(base);
        out.extend(ex);
    }
    Value::Object(out)
}

fn render_messages(g: &Gen) -> Vec<Value> {
    let mut out = Vec::new();
    let mut next = 0;
    for (item, extras, before) in &g.items {
        let mut push = |v: Value| out.push(with_extras(v, extras, *before));
        match item {
            Item::System(t) if g.anthropic => push(json!({"role": "user", "content": t})),
            Item::System(t) => push(json!({"role": "system", "content": t})),
            Item::User { text, parts: true } => {
                push(json!({"role": "user", "content": [{"type": "text", "text": text}]}))
            }
            Item::User { text, .. } => push(json!({"role": "user", "content": text})),
            Item::Assistant(t) => push(json!({"role": "assistant", "content": t})),
            Item::Exchange { preface, calls } => {
                let ids: Vec<String> = calls
                    .iter()
                    .map(|_| {
                        next += 1;
                        format!("call_{next}")
                    })
                    .collect();
                if g.anthropic {
                    let mut blocks: Vec<Value> = preface
                        .iter()
                        .map(|p| json!({"type": "text", "text": p}))
                        .collect();
                    for (c, id) in calls.iter().zip(&ids) {
                        blocks.push(
                            json!({"type": "tool_use", "id": id, "name": c.name, "input": c.args}),
                        );
                    }
                    push(json!({"role": "assistant", "content": blocks}));
                    let results: Vec<Value> = calls
                        .iter()
                        .zip(&ids)
                        .map(|(c, id)| {
                            let mut r = json!({"type": "tool_result", "tool_use_id": id,
                                "content": [{"type": "text", "text": c.result}]});
                            if c.is_error {
                                r["is_error"] = Value::Bool(true);
                            }
                            r
                        })
                        .collect();
                    out.push(json!({"role": "user", "content": results}));
                } else {
                    let tool_calls: Vec<Value> = calls
                        .iter()
                        .zip(&ids)
                        .map(|(c, id)| {
                            json!({"id": id, "type": "function", "function":
                                {"name": c.name, "arguments": c.args.to_string()}})
                        })
                        .collect();
                    let content = preface.clone().map_or(Value::Null, Value::String);
                    push(
                        json!({"role": "assistant", "content": content, "tool_calls": tool_calls}),
                    );
                    for (c, id) in calls.iter().zip(&ids) {
                        out.push(json!({"role": "tool", "tool_call_id": id, "content": c.result}));
                    }
                }
            }
        }
    }
    out
}

fn render_doc(g: &Gen) -> Value {
    let messages = Value::Array(render_messages(g));
    if g.bare_array {
        return messages;
    }
    let mut top = Map::new();
    if g.anthropic {
        top.insert("model".into(), json!("claude-test"));
        top.insert("system".into(), json!("be brief"));
    } else {
        top.insert("id".into(), json!("conv-1"));
    }
    top.insert("messages".into(), messages);
    for (k, v) in &g.envelope_extras {
        top.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(top)
}

/// Serialize like Python's `json.dumps` (`", "`/`": "`, optional ASCII escapes)
/// or compactly, so parsing sees varied but valid source text.
fn write_value(v: &Value, spaced: bool, ascii: bool, out: &mut String) {
    match v {
        Value::String(s) => {
            let enc = serde_json::to_string(s).unwrap();
            if ascii {
                for ch in enc.chars() {
                    if ch.is_ascii() {
                        out.push(ch);
                    } else {
                        let mut buf = [0u16; 2];
                        for unit in ch.encode_utf16(&mut buf) {
                            out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                }
            } else {
                out.push_str(&enc);
            }
        }
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(if spaced { ", " } else { "," });
                }
                write_value(x, spaced, ascii, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, x)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(if spaced { ", " } else { "," });
                }
                write_value(&Value::String(k.clone()), spaced, ascii, out);
                out.push_str(if spaced { ": " } else { ":" });
                write_value(x, spaced, ascii, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn serialize(g: &Gen, doc: &Value) -> String {
    let body = if g.pretty {
        serde_json::to_string_pretty(doc).unwrap()
    } else {
        let mut s = String::new();
        write_value(doc, g.spaced, g.ascii, &mut s);
        s
    };
    format!("{}{body}{}", g.padding.0, g.padding.1)
}

/// Drops the first tool result of the first exchange (breaks pairing).
struct DropFirstResult;

impl CoreStrategy for DropFirstResult {
    fn name(&self) -> &str {
        "drop_first_result"
    }
    fn apply(
        &self,
        conv: &mut Conversation,
        _: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        drop_first_result(conv);
        Ok(StageOutcome::default())
    }
}

/// Drops the first exchange whole (keeps pairing).
struct DropFirstExchange;

impl CoreStrategy for DropFirstExchange {
    fn name(&self) -> &str {
        "drop_first_exchange"
    }
    fn apply(
        &self,
        conv: &mut Conversation,
        _: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let ex = conv.exchanges();
        let Some(e) = ex.first() else {
            return Ok(StageOutcome::default());
        };
        let gone: HashSet<usize> = std::iter::once(e.call).chain(e.results.clone()).collect();
        let mut i = 0;
        conv.messages.retain(|_| {
            i += 1;
            !gone.contains(&(i - 1))
        });
        Ok(StageOutcome::default())
    }
}

fn drop_first_result(conv: &mut Conversation) {
    let ex = conv.exchanges();
    let Some(e) = ex.first() else { return };
    let (Some(&at), Some(id)) = (e.results.first(), e.call_ids.first()) else {
        return;
    };
    if matches!(conv.messages[at].role(), Role::Tool | Role::Function) {
        conv.messages.remove(at);
    } else {
        conv.messages[at].remove_tool_results(&HashSet::from([id.as_str()]));
    }
}

fn has_missing_result(conv: &Conversation) -> bool {
    validate(conv)
        .iter()
        .any(|v| v.kind == ViolationKind::MissingResult)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn generated_conversations_round_trip_and_validate(g in generated()) {
        let doc = render_doc(&g);
        let text = serialize(&g, &doc);
        let conv = Conversation::parse(&text).unwrap();
        prop_assert_eq!(conv.to_json_string(), text.clone());
        prop_assert_eq!(conv.format == Format::Anthropic, g.anthropic);
        let back: Value = serde_json::from_str(&conv.to_json_string()).unwrap();
        prop_assert_eq!(&back, &doc);
        let msgs = doc.get("messages").unwrap_or(&doc);
        prop_assert_eq!(&conv.to_value(), msgs);
        prop_assert_eq!(conv.messages.len(), msgs.as_array().map_or(0, Vec::len));
        // Touched messages still serialize to the same values.
        let mut touched = conv.clone();
        for m in &mut touched.messages {
            m.fields_mut();
        }
        let re: Value = serde_json::from_str(&touched.to_json_string()).unwrap();
        prop_assert_eq!(&re, &doc);
        // Well-formed: no violations.
        let v = validate(&conv);
        prop_assert!(v.is_empty(), "{:?}\n{}", v, text);
        // Dropping one tool result is caught.
        let mut broken = conv.clone();
        drop_first_result(&mut broken);
        prop_assert!(has_missing_result(&broken), "{:?}", validate(&broken));
        // ... and a pipeline stage doing so is reverted, byte for byte.
        let mut p = Pipeline::default();
        p.push(Box::new(DropFirstResult));
        let mut run = conv.clone();
        let r = p.run(&mut run, &StageContext::default());
        prop_assert!(matches!(&r.stages[0].status, StageStatus::Reverted(m) if m.contains("violation")));
        prop_assert_eq!(run.to_json_string(), text);
    }
}

/// The first `n` conversations of a corpus file that are valid as they are.
fn corpus_sample(file: &str, n: usize) -> Option<Vec<String>> {
    let path: PathBuf = ctxpress_tests::corpus::dir().join(file);
    let text = std::fs::read_to_string(Path::new(&path)).ok()?;
    Some(
        text.lines()
            .filter(|l| Conversation::parse(l).is_ok_and(|c| validate(&c).is_empty()))
            .take(n)
            .map(str::to_string)
            .collect(),
    )
}

/// A rewritten message keeps the exact value of numbers it does not touch.
/// Fails while the workspace's serde_json lacks the `float_roundtrip` feature:
/// the default float parser can be one ULP off for long mantissas.
#[test]

fn long_floats_survive_rewriting() {
    let doc = r#"[{"role":"user","content":"x","meta":906005250.0262727}]"#;
    let mut c = Conversation::parse(doc).unwrap();
    c.messages[0].set_text("y");
    let out = c.to_json_string();
    assert_eq!(
        out,
        r#"[{"role":"user","content":"y","meta":906005250.0262727}]"#
    );
}

#[test]
fn pipeline_reverts_a_dropped_tool_result_on_real_conversations() {
    let docs = match corpus_sample("swe_agent_trajs.jsonl", 4) {
        Some(d) => d,
        None => {
            eprintln!("skipping: corpus absent; using a built-in conversation");
            vec![r#"[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"x","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"},{"role":"assistant","content":"done"}]"#.to_string()]
        }
    };
    for doc in &docs {
        let conv = Conversation::parse(doc).unwrap();
        assert!(validate(&conv).is_empty());
        assert!(!conv.exchanges().is_empty());
        let mut p = Pipeline::default();
        p.push(Box::new(DropFirstResult));
        p.push(Box::new(DropFirstExchange));
        let mut run = conv.clone();
        let r = p.run(&mut run, &StageContext::default());
        assert!(
            matches!(&r.stages[0].status, StageStatus::Reverted(m) if m.contains("violation")),
            "{:?}",
            r.stages[0].status
        );
        // The pairing-preserving stage after it is applied to the original.
        assert_eq!(r.stages[1].status, StageStatus::Applied);
        let first = &conv.exchanges()[0];
        assert_eq!(
            run.messages.len(),
            conv.messages.len() - 1 - first.results.len()
        );
        assert!(validate(&run).is_empty());
        // Only the second stage's removal happened.
        let mut expected = conv.clone();
        DropFirstExchange
            .apply(&mut expected, &StageContext::default())
            .unwrap();
        assert_eq!(run.to_json_string(), expected.to_json_string());
    }
}
