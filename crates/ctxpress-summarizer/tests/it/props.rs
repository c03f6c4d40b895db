//! Property tests: no panic on any UTF-8, never longer than the input,
//! deterministic; and the strategy never grows a conversation.

use ctxpress_core::Strategy as _;
use ctxpress_core::{Conversation, Decision, DecisionRule, StageContext};
use ctxpress_summarizer::text::{
    Budget, code_split, extract_entities, sentences, summarize, summarize_structured,
    summarize_text,
};
use ctxpress_summarizer::{Summarizer, SummarizerConfig};
use proptest::prelude::*;

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Text mixing prose-like pieces, punctuation, fences and arbitrary Unicode.
fn texty() -> impl proptest::strategy::Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-zA-Z_ ]{0,20}",
        Just(". ".to_string()),
        Just("e.g. ".to_string()),
        Just("\n\n".to_string()),
        Just("\n- ".to_string()),
        Just("```\n".to_string()),
        Just("src/a.ts:4: ".to_string()),
        Just("FAIL ".to_string()),
        Just("fooBar v1.2.3 10 MB ".to_string()),
        "\\PC{0,8}",
        any::<String>(),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn summaries_never_panic_never_grow(s in texty(), budget in 1usize..500) {
        let a = summarize(&s, budget);
        prop_assert!(chars(&a) <= chars(s.trim()));
        prop_assert_eq!(&a, &summarize(&s, budget));
        let b = summarize_text(&s, &Budget::default());
        prop_assert!(chars(&b) <= chars(s.trim()));
        prop_assert_eq!(&b, &summarize_text(&s, &Budget::default()));
        let _ = summarize_structured(&s, budget);
        if let Some(c) = code_split(&s, &Budget::default(), None) {
            prop_assert!(chars(&c) < chars(&s));
        }
        let e = extract_entities(&s, 10);
        prop_assert!(e.len() <= 10);
        for x in &e {
            prop_assert!(s.contains(x.as_str()));
        }
    }

    #[test]
    fn any_string_is_fine(s in any::<String>()) {
        let a = summarize_text(&s, &Budget::default());
        prop_assert!(chars(&a) <= chars(s.trim()));
        for x in sentences(&s) {
            prop_assert_eq!(s.get(x.start..x.start + x.text.len()), Some(x.text));
        }
    }

    #[test]
    fn strategy_never_grows_and_is_deterministic(
        texts in prop::collection::vec((texty(), 0u8..4, any::<bool>()), 1..8)
    ) {
        let msgs: Vec<serde_json::Value> = texts
            .iter()
            .map(|(t, _, user)| serde_json::json!({
                "role": if *user { "user" } else { "assistant" },
                "content": t,
            }))
            .collect();
        let mut c = Conversation::parse(&serde_json::Value::Array(msgs).to_string()).unwrap();
        let ids: Vec<_> = c.messages.iter().map(|m| m.id().clone()).collect();
        for (id, (_, d, _)) in ids.iter().zip(&texts) {
            let d = [Decision::Compress, Decision::CodeSplit, Decision::Preserve, Decision::Compress][*d as usize];
            c.ann_mut(id).decision = Some((d, DecisionRule::Compressible));
        }
        let before = c.clone();
        let s = Summarizer::new(SummarizerConfig::default());
        s.apply(&mut c, &StageContext::default()).unwrap();
        prop_assert!(c.size() <= before.size());
        for m in &c.messages {
            let orig = before.messages.iter().find(|o| o.id() == m.id());
            match orig {
                Some(o) => prop_assert!(m.size() <= o.size()),
                None => prop_assert!(!c.ann(m.id()).unwrap().replaces.is_empty()),
            }
        }
        let mut again = before.clone();
        s.apply(&mut again, &StageContext::default()).unwrap();
        prop_assert_eq!(c.to_json_string(), again.to_json_string());
    }
}
