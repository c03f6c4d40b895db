//! Block YAML (one document of mappings and sequences, flow collections
//! only where they are JSON): read into a JSON value, depth-bounded, then
//! rendered as JSON data is.

use super::*;

/// One YAML line: its indent and content (comments and blank lines are
/// dropped before).
struct YLine<'t> {
    indent: usize,
    text: &'t str,
}

/// Deepest block nesting parsed.
const MAX_YAML_DEPTH: usize = 32;

/// The key of a `key: value` / `key:` line, and the rest after the colon
/// (trimmed). Keys are plain words or quoted.
fn yaml_key(t: &str) -> Option<(&str, &str)> {
    let (key, rest) = if let Some(q) = t.strip_prefix('"').or_else(|| t.strip_prefix('\'')) {
        let close = q.find(['"', '\''])?;
        (q.get(..close)?, q.get(close + 1..)?.strip_prefix(':')?)
    } else {
        let colon = t.find(':')?;
        let key = t.get(..colon)?;
        if key.is_empty()
            || key.len() > 80
            || !key.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(b, b'_' | b'-' | b'.' | b'/' | b' ' | b'$' | b'@')
            })
            || key.starts_with([' ', '-'])
        {
            return None;
        }
        (key, t.get(colon + 1..)?)
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some((key.trim_end(), rest.trim()))
}

/// A YAML scalar as a JSON value: quoted strings unquoted, numbers,
/// booleans and null read as such, flow collections parsed when they are
/// JSON, anything else a string.
fn yaml_scalar(t: &str) -> Value {
    let t = match t.find(" #") {
        Some(c) if !t.starts_with(['"', '\'']) => t.get(..c).unwrap_or(t).trim_end(),
        _ => t,
    };
    match t {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(q) = t.strip_prefix('\'').and_then(|q| q.strip_suffix('\'')) {
        return Value::String(q.replace("''", "'"));
    }
    if t.starts_with(['"', '[', '{'])
        && let Ok(v) = serde_json::from_str::<Value>(t)
    {
        return v;
    }
    if t.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_digit() || b == b'-')
        && let Ok(n) = serde_json::from_str::<serde_json::Number>(t)
    {
        return Value::Number(n);
    }
    Value::String(t.to_string())
}

/// Parse the block at `lines[*i..]` indented `indent`: a sequence when its
/// first line is `- `, else a mapping. `None` when it is not block YAML
/// this reader takes.
fn yaml_block(lines: &[YLine<'_>], i: &mut usize, indent: usize, depth: usize) -> Option<Value> {
    if depth > MAX_YAML_DEPTH {
        return None;
    }
    let first = lines.get(*i)?;
    if first.text == "-" || first.text.starts_with("- ") {
        let mut items = Vec::new();
        while let Some(l) = lines.get(*i) {
            if l.indent < indent {
                break;
            }
            if l.indent > indent || !(l.text == "-" || l.text.starts_with("- ")) {
                return None;
            }
            let rest = l.text.get(1..).unwrap_or("").trim_start();
            *i += 1;
            if rest.is_empty() {
                items.push(yaml_child(lines, i, indent, depth)?);
            } else if yaml_key(rest).is_some() && !rest.starts_with(['"', '\'', '[', '{']) {
                // `- key: value` then the item's other keys, indented past
                // the dash.
                let inner = indent + (l.text.len() - rest.len());
                let mut sub = vec![YLine {
                    indent: inner,
                    text: rest,
                }];
                let start = *i;
                while lines.get(*i).is_some_and(|x| x.indent > indent) {
                    *i += 1;
                }
                sub.extend(lines.get(start..*i)?.iter().map(|x| YLine {
                    indent: x.indent,
                    text: x.text,
                }));
                let mut j = 0;
                items.push(yaml_block(&sub, &mut j, inner, depth + 1)?);
                if j != sub.len() {
                    return None;
                }
            } else {
                items.push(yaml_scalar(rest));
            }
        }
        return Some(Value::Array(items));
    }
    let mut map = Map::new();
    while let Some(l) = lines.get(*i) {
        if l.indent < indent {
            break;
        }
        if l.indent > indent {
            return None;
        }
        let (key, rest) = yaml_key(l.text)?;
        *i += 1;
        let v = if rest.is_empty() {
            yaml_child(lines, i, indent, depth)?
        } else if rest.starts_with(['|', '>']) {
            // A block scalar: the lines indented past the key.
            let mut text = String::new();
            while let Some(x) = lines.get(*i).filter(|x| x.indent > indent) {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(x.text);
                *i += 1;
            }
            Value::String(text)
        } else {
            yaml_scalar(rest)
        };
        map.insert(key.to_string(), v);
    }
    Some(Value::Object(map))
}

/// The value under a `key:` or `-` line at `indent`: the block indented
/// past it (a sequence may also sit at the key's own indent), or null.
fn yaml_child(lines: &[YLine<'_>], i: &mut usize, indent: usize, depth: usize) -> Option<Value> {
    match lines.get(*i) {
        Some(n) if n.indent > indent => yaml_block(lines, i, n.indent, depth + 1),
        Some(n) if n.indent == indent && n.text.starts_with("- ") => {
            yaml_block(lines, i, indent, depth + 1)
        }
        _ => Some(Value::Null),
    }
}

/// The value of a block-YAML text (one document), when it reads as one:
/// at least four lines, the first a key or a list item, the structure
/// consistent throughout.
fn yaml(t: &str) -> Option<Value> {
    let mut lines = Vec::new();
    for (k, raw) in ctxpress_text::lines::lines(t).enumerate() {
        let body = raw.trim_start_matches(' ');
        if body.trim().is_empty() || body.starts_with('#') || (k == 0 && body.trim_end() == "---") {
            continue;
        }
        if body.starts_with('\t') || body.trim_end() == "---" || body.trim_end() == "..." {
            return None;
        }
        lines.push(YLine {
            indent: raw.len() - body.len(),
            text: body.trim_end(),
        });
    }
    let first = lines.first()?;
    if lines.len() < 4 || first.indent != 0 {
        return None;
    }
    if !(first.text.starts_with("- ") || yaml_key(first.text).is_some()) {
        return None;
    }
    let mut i = 0;
    let v = yaml_block(&lines, &mut i, 0, 0)?;
    (i == lines.len()).then_some(v)
}

/// The body of a YAML text's summary, rendered as JSON's.
pub(super) fn yaml_body(t: &str, room: usize, limits: &Limits) -> Option<String> {
    let value = yaml(t)?;
    let mut head = String::from("YAML");
    match &value {
        Value::Object(m) => {
            head.push_str(" mapping, ");
            head.push_str(&plural(m.len(), "key", "keys"));
        }
        Value::Array(a) => {
            head.push_str(" list, ");
            head.push_str(&plural(a.len(), "item", "items"));
        }
        _ => return None,
    }
    head.push(']');
    Some(render_levels(&head, room, limits, |r| r.value(&value, 0)))
}
