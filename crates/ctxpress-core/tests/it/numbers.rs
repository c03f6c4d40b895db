//! Numbers in fields ctxpress does not know keep the text they were written
//! with when their message is rewritten (no big integer turned into a float,
//! no `1.10` into `1.1`, no `1e3` into `1000.0`): the workspace builds
//! serde_json with `arbitrary_precision`.

use ctxpress_core::Conversation;

#[test]
fn numbers_survive_a_rewrite_as_written() {
    let input = r#"[{"role": "user", "content": "short"}, {"role": "assistant", "content": "a long answer to rewrite", "meta": {"big": 123456789012345678901234567890, "neg": -98765432109876543210987654321, "dec": 1.10, "exp": 1e3, "tiny": 5e-324, "precise": 0.1000000000000000055511151231257827, "list": [18446744073709551616, 3]}}]"#;
    let mut conv = Conversation::parse(input).unwrap();
    conv.messages[1].set_text("rewritten");
    let out = conv.to_json_string();
    for n in [
        "123456789012345678901234567890",
        "-98765432109876543210987654321",
        "1.10",
        "5e-324",
        "0.1000000000000000055511151231257827",
        "18446744073709551616",
    ] {
        assert!(out.contains(n), "{n} is missing from {out}");
    }
    // An exponent keeps its form (serde_json writes its sign: `1e+3`).
    assert!(out.contains(r#""exp": 1e"#), "{out}");
    assert!(out.contains("rewritten"));
    // And a second round trip keeps them too.
    let mut again = Conversation::parse(&out).unwrap();
    again.messages[1].set_text("rewritten twice");
    let out2 = again.to_json_string();
    assert!(out2.contains("123456789012345678901234567890"), "{out2}");
}

/// Found by the `pipeline` fuzz target: separators that differ between
/// messages (`}, {` here, `},{` there) come back as they were, from an
/// identity run and from expand after a compression that removed messages.
#[test]
fn uneven_separators_survive_identity_and_expand() {
    use ctxpress_core::archive::{MemoryArchive, archive, expand};
    let input = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},{\"role\": \"assistant\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"c\"} ,\n {\"role\": \"assistant\", \"content\": \"d\"}]}";
    let conv = Conversation::parse(input).unwrap();
    assert_eq!(conv.to_json_string(), input);
    // Drop the second message, archive, expand.
    let mut out = conv.clone();
    out.messages.remove(1);
    let store = MemoryArchive::new();
    archive(&conv, &out, &store).unwrap();
    let written = Conversation::parse(&out.to_json_string()).unwrap();
    assert_eq!(expand(&written, &store).unwrap().to_json_string(), input);
}
