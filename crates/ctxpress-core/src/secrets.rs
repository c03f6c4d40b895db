//! The secret detector, shared by the classifier (api_key reason) and the
//! summarizer (redaction before text leaves the machine).

/// A secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSpan {
    /// Byte offset of the start.
    pub start: usize,
    /// Byte offset one past the end.
    pub end: usize,
    /// Which provider or pattern matched, e.g. `openai`, `aws`, `generic`.
    pub kind: &'static str,
}

/// Find secrets (API keys, tokens) in `text`, in order, non-overlapping.
pub fn find_secrets(text: &str) -> Vec<SecretSpan> {
    let _ = text;
    Vec::new()
}

/// Replace every secret with `[REDACTED:{kind}]`.
pub fn redact(text: &str) -> String {
    let spans = find_secrets(text);
    if spans.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for s in spans {
        out.push_str(&text[last..s.start]);
        out.push_str("[REDACTED:");
        out.push_str(s.kind);
        out.push(']');
        last = s.end;
    }
    out.push_str(&text[last..]);
    out
}
