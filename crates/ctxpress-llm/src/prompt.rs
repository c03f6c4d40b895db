//! Prompt rendering and answer cleaning, shared by every provider.

use ctxpress_core::{SummaryKind, SummaryRequest};
use regex::Regex;
use std::sync::OnceLock;

use crate::config::LlmConfig;

/// Default character budget by kind when the request has none.
pub fn default_budget(kind: SummaryKind) -> usize {
    match kind {
        SummaryKind::User => 200,
        SummaryKind::Assistant => 800,
        SummaryKind::Tool => 600,
        _ => 1500,
    }
}

/// The character budget announced to the model: the request's, or the kind's
/// default kept under half the input so that the answer can be accepted.
pub fn budget_chars(req: &SummaryRequest<'_>) -> usize {
    match req.budget_chars {
        Some(b) => b.max(1),
        None => {
            let n = req.text.chars().count();
            default_budget(req.kind).min((n / 2).max(40))
        }
    }
}

/// `max_tokens` for a request: the kind's limit, lowered to about what the
/// budget needs (a token is ~4 characters; a third leaves slack).
pub fn max_tokens(cfg: &LlmConfig, req: &SummaryRequest<'_>) -> u32 {
    let limit = cfg.max_tokens.for_kind(req.kind).max(1);
    let need = u32::try_from(budget_chars(req) / 3 + 16).unwrap_or(u32::MAX);
    limit.min(need)
}

/// Replace `{{text}}`, `{{context}}` and `{{budget_chars}}` in one left-to-right
/// pass; any other `{{...}}` is left as written, and nothing inserted is
/// scanned again.
pub fn render(template: &str, text: &str, context: Option<&str>, budget: usize) -> String {
    let mut out = String::with_capacity(template.len() + text.len() + context.map_or(0, str::len));
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        match after[..close].trim() {
            "text" => out.push_str(text),
            "context" => out.push_str(context.unwrap_or("")),
            "budget_chars" => out.push_str(&budget.to_string()),
            _ => out.push_str(&rest[open..open + 2 + close + 2]),
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// The user-turn prompt for a request.
pub fn user_prompt(cfg: &LlmConfig, req: &SummaryRequest<'_>) -> String {
    render(
        cfg.template(req.kind),
        req.text,
        req.context,
        budget_chars(req),
    )
}

fn preamble() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // A first line like "Summary:", "**Compressed summary:**", "## TL;DR",
        // "Here is a concise summary of the message:".
        Regex::new(
            r"(?xi)\A[\s>*\#_]*
              (?:(?:sure|okay|ok|certainly)[,!.]?\s*)?
              (?:here(?:'s|\s+is|\s+are)\b[^:\n]{0,80}?
               |(?:the\s+)?(?:compressed|concise|short|brief|updated|condensed)?\s*
                (?:summary|summarized\s+(?:message|response|version)|compressed\s+(?:message|response|version)|tl;?\s*dr)
                [^:\n]{0,40}?)
              [*_]*\s*:[*_]*[ \t]*\n?",
        )
        .expect("preamble regex is valid")
    })
}

fn heading_only() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // A heading line about the summary itself: "## Summary", "### Summary of
        // Changes", "**Compressed summary**".
        Regex::new(
            r"(?i)\A\s*(?:(?:\#{1,6}[ \t]+|\*\*|__)[^\n]{0,30}?\bsummary\b[^\n.:]{0,30}?|(?:compressed\s+|concise\s+|updated\s+)?summary)[ \t*_]*\n",
        )
            .expect("heading regex is valid")
    })
}

/// Strip surrounding whitespace, a leading "Summary:"-style preamble, and
/// quotes wrapping the whole answer.
pub fn clean_answer(raw: &str) -> String {
    let mut s = raw.trim();
    for _ in 0..3 {
        let before = s.len();
        if let Some(m) = preamble().find(s) {
            s = s[m.end()..].trim_start();
        }
        if let Some(m) = heading_only().find(s) {
            s = s[m.end()..].trim_start();
        }
        if s.len() == before {
            break;
        }
    }
    let s = s.trim();
    for (open, close) in [('"', '"'), ('\u{201c}', '\u{201d}'), ('\'', '\'')] {
        if let Some(inner) = s.strip_prefix(open).and_then(|r| r.strip_suffix(close))
            && !inner.contains(open)
            && !inner.contains(close)
        {
            return inner.trim().to_string();
        }
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn req(text: &str, kind: SummaryKind, budget: Option<usize>) -> SummaryRequest<'_> {
        SummaryRequest {
            text,
            kind,
            budget_chars: budget,
            context: None,
        }
    }

    #[test]
    fn render_replaces_once() {
        let out = render(
            "A {{text}} B {{ context }} C {{budget_chars}} D {{other}} {{",
            "has {{context}} inside",
            Some("ctx"),
            42,
        );
        assert_eq!(out, "A has {{context}} inside B ctx C 42 D {{other}} {{");
        assert_eq!(render("{{context}}|", "t", None, 1), "|");
        assert_eq!(render("x }} {{text", "t", None, 1), "x }} {{text");
    }

    #[test]
    fn budgets_and_max_tokens() {
        let cfg = LlmConfig::default();
        let long = "x".repeat(10_000);
        assert_eq!(budget_chars(&req(&long, SummaryKind::Assistant, None)), 800);
        assert_eq!(budget_chars(&req(&long, SummaryKind::User, None)), 200);
        assert_eq!(
            budget_chars(&req("short text", SummaryKind::Assistant, None)),
            40
        );
        assert_eq!(budget_chars(&req(&long, SummaryKind::Tool, Some(0))), 1);
        assert_eq!(budget_chars(&req(&long, SummaryKind::Tool, Some(123))), 123);
        assert_eq!(
            max_tokens(&cfg, &req(&long, SummaryKind::Assistant, None)),
            256
        );
        assert_eq!(max_tokens(&cfg, &req(&long, SummaryKind::User, None)), 80);
        assert_eq!(
            max_tokens(&cfg, &req(&long, SummaryKind::Chunk, Some(90))),
            46
        );
    }

    #[test]
    fn user_prompt_uses_the_kind_template() {
        let cfg = LlmConfig::default();
        let text = "Please fix src/auth/jwt.ts: jwt.verify throws TokenExpiredError";
        let p = user_prompt(&cfg, &req(text, SummaryKind::User, Some(60)));
        assert!(p.contains(text));
        assert!(p.contains("at most 60 characters"));
        assert!(p.starts_with("Compress this user message"));
        let c = SummaryRequest {
            context: Some("EARLIER"),
            ..req(text, SummaryKind::Chunk, None)
        };
        let p = user_prompt(&cfg, &c);
        assert!(p.contains("EARLIER") && p.contains(text));
    }

    #[test]
    fn hybrid_prompts_render_the_spec_wording_with_the_budget() {
        let cfg = LlmConfig {
            prompt_style: crate::PromptStyle::Hybrid,
            ..LlmConfig::default()
        };
        let text = "I'm looking at the streaming implementation in app.zig and the queue \
handling seems complex. Can you explain how the message queue works and why we need the \
secondary loop? Also, is there a better threading model? {{budget_chars}} stays as typed.";
        let long = format!("{text} {}", "More detail. ".repeat(200));
        // No budget in the request: the spec's ~50 / ~200 tokens as characters.
        let p = user_prompt(&cfg, &req(&long, SummaryKind::User, None));
        assert!(p.starts_with(
            "You are a conversation compression assistant. Your job is to compress user messages"
        ));
        assert!(p.contains(&format!("Original message:\n{long}\n\n")));
        assert!(p.contains("Compress this to 1-2 sentences (at most 200 characters)"));
        assert!(p.contains("- Main topic/question\n- Key concerns or requests\n"));
        assert!(p.ends_with("\n\nCompressed summary:"));
        // The text is inserted once and never scanned again.
        assert!(p.contains("{{budget_chars}} stays as typed"));
        let p = user_prompt(&cfg, &req(&long, SummaryKind::Assistant, None));
        assert!(p.contains("compress assistant responses"));
        assert!(p.contains("(at most 800 characters)"));
        assert!(p.contains("- Decisions, suggestions and open problems\n"));
        // A request budget (the summarizer's per-role one) is what is announced.
        let p = user_prompt(&cfg, &req(&long, SummaryKind::User, Some(150)));
        assert!(p.contains("(at most 150 characters)"));
        // Short inputs: the budget stays under half of them, so an answer can be accepted.
        let p = user_prompt(&cfg, &req(text, SummaryKind::Assistant, None));
        let half = text.chars().count() / 2;
        assert!(p.contains(&format!("(at most {half} characters)")), "{p}");
        // Tool results and the default style keep their templates.
        let p = user_prompt(&cfg, &req(&long, SummaryKind::Tool, None));
        assert!(p.starts_with("Compress this tool output"));
        let p = user_prompt(&LlmConfig::default(), &req(&long, SummaryKind::User, None));
        assert!(p.starts_with("Compress this user message"));
    }

    #[test]
    fn preambles_are_stripped() {
        let cases = [
            ("Summary: fixed jwt.verify", "fixed jwt.verify"),
            ("  \n**Summary:** fixed it  \n", "fixed it"),
            (
                "Compressed summary:\nFixed src/a.ts:12",
                "Fixed src/a.ts:12",
            ),
            (
                "Here is a concise summary of the assistant's response:\n\nUpdated the cache.",
                "Updated the cache.",
            ),
            ("Sure! Here's the summary: Ran 3 tests.", "Ran 3 tests."),
            ("## Summary\nRan tests, 2 failed.", "Ran tests, 2 failed."),
            ("### Summary of Changes\n- `a.rs`: fixed", "- `a.rs`: fixed"),
            ("**Compressed summary**\nKept v1.2.3", "Kept v1.2.3"),
            ("TL;DR: bump v1.2.3", "bump v1.2.3"),
            ("\"Asked about the queue.\"", "Asked about the queue."),
            ("Updated summary: user wants X", "user wants X"),
        ];
        for (raw, want) in cases {
            assert_eq!(clean_answer(raw), want, "raw: {raw:?}");
        }
    }

    #[test]
    fn content_is_not_mistaken_for_a_preamble() {
        let keep = [
            "Fixed the bug in parse.rs: the index was off by one.",
            "The user asked: why does jwt.verify fail?",
            "Error: ENOENT in src/a.ts",
            "\"a\" and \"b\" were swapped",
            "Summarized the logs and found 3 errors.",
            "The summary table in docs/a.md is stale\nand needs an update.",
            "Fixed the summary test.\nAll pass.",
            "Fixed the summary test\nAll pass",
        ];
        for k in keep {
            assert_eq!(clean_answer(k), k);
        }
        assert_eq!(clean_answer("   "), "");
        assert_eq!(clean_answer("Summary:"), "");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn clean_never_panics_nor_grows(s in "\\PC{0,200}") {
            let c = clean_answer(&s);
            prop_assert!(c.len() <= s.len());
            prop_assert_eq!(clean_answer(&c).len() <= c.len(), true);
        }

        #[test]
        fn render_without_placeholders_is_identity(t in "[^{}]{0,100}", x in "\\PC{0,50}") {
            prop_assert_eq!(render(&t, &x, None, 3), t);
        }

        #[test]
        fn render_contains_text_verbatim(pre in "[^{}]{0,30}", x in "\\PC{0,80}") {
            let tpl = format!("{pre}\n{{{{text}}}}");
            let out = render(&tpl, &x, Some("c"), 9);
            prop_assert!(out.ends_with(&x));
        }
    }
}
