//! JSON structure: a text that is, or opens like, a JSON object or array.

/// Starts with `{` or `[` followed by JSON-like content: valid JSON, or an
/// object/array opening with a quoted key or nested structure.
pub(crate) fn is_json_structure(text: &str) -> bool {
    let t = text.trim();
    let b = t.as_bytes();
    let Some(&first) = b.first() else {
        return false;
    };
    if first != b'{' && first != b'[' {
        return false;
    }
    let next = t.get(1..).unwrap_or("").trim_start();
    let looks = if first == b'{' {
        next.starts_with('"') || next.starts_with('}')
    } else {
        next.starts_with('{')
            || next.starts_with('"')
            || next.starts_with('[')
            || next.starts_with(']')
    };
    if looks && (first == b'{' || next.starts_with('{') || next.starts_with('[')) {
        return true;
    }
    let closes = matches!((first, b.last()), (b'{', Some(b'}')) | (b'[', Some(b']')));
    closes && is_valid_json(t)
}

/// True when `text` (trimmed) parses as a JSON object or array.
pub fn is_valid_json(text: &str) -> bool {
    let t = text.trim();
    matches!(t.as_bytes().first(), Some(b'{' | b'[' | b'"'))
        && serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()
}
