//! The summarization prompt template and its interpolation.

/// The default template: asks for the user's intent, decisions, files
/// changed, errors and fixes, open tasks and the next step.
pub const DEFAULT_SUMMARIZATION_PROMPT: &str = "You are compacting the history of an AI agent session so the agent can continue without the old messages.

Summary of the earlier history (may be empty):
{{previous_summary}}

New messages to fold into it:
{{messages}}

Write an updated summary of at most {{budget}} tokens as short lines under these headings: User intent; Decisions; Files changed; Errors and fixes; Open tasks; Next step. Keep exact file paths, commands, identifiers and error messages. Do not invent anything and do not repeat finished work as open.";

/// Fill the template: `{{messages}}`, `{{previous_summary}}` and `{{budget}}`
/// are each replaced in one pass, so placeholders inside the inserted texts
/// are left as they are. Unknown `{{...}}` are kept.
pub fn interpolate_prompt(template: &str, messages: &str, previous: &str, budget: usize) -> String {
    let budget = budget.to_string();
    let mut out = String::with_capacity(template.len() + messages.len() + previous.len());
    let mut rest = template;
    while let Some(p) = rest.find("{{") {
        out.push_str(&rest[..p]);
        let after = &rest[p..];
        let hit = [
            ("{{messages}}", messages),
            ("{{previous_summary}}", previous),
            ("{{budget}}", budget.as_str()),
        ]
        .into_iter()
        .find(|(k, _)| after.starts_with(k));
        match hit {
            Some((k, v)) => {
                out.push_str(v);
                rest = &after[k.len()..];
            }
            None => {
                out.push_str("{{");
                rest = &after[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_once() {
        let t = "a {{messages}} b {{previous_summary}} c {{budget}} {{other}}";
        assert_eq!(
            interpolate_prompt(t, "M {{budget}}", "P", 7),
            "a M {{budget}} b P c 7 {{other}}"
        );
        let d = interpolate_prompt(DEFAULT_SUMMARIZATION_PROMPT, "MSG", "PREV", 500);
        for w in [
            "MSG",
            "PREV",
            "500",
            "Open tasks",
            "Next step",
            "Errors and fixes",
        ] {
            assert!(d.contains(w), "{w}");
        }
    }
}
