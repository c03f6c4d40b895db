//! CSV and TSV tables: the header, the row count, the columns equal in
//! every row, and the first and last distinct rows.

use super::*;

/// The body of a CSV or TSV table's summary: the header, the row count,
/// the columns equal in every row, and the first and last rows (distinct
/// ones: runs of equal rows folded).
pub(super) fn csv(t: &str, room: usize, limits: &Limits) -> Option<String> {
    let mut lines = ctxpress_text::lines::lines(t).filter(|l| !is_blank(l));
    let header = lines.next()?;
    let delim = if header.contains('\t') {
        '\t'
    } else if header.contains(',') {
        ','
    } else {
        return None;
    };
    let cols = split_row(header, delim);
    // A header: names (a letter in each, no path or bracket, no number),
    // each once.
    // A header: short names (a letter first, few digits, no path, bracket
    // or colon, at most four words), each once.
    let name_like = |c: &str| {
        let c = c.trim();
        c.chars().count() <= 40
            && c.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && c.bytes().filter(u8::is_ascii_digit).count() <= 2
            && c.split_whitespace().count() <= 4
            && !c.bytes().any(|b| {
                matches!(
                    b,
                    b'/' | b'\\' | b'[' | b']' | b'{' | b'}' | b':' | b'=' | b'@'
                )
            })
    };
    let min_cols = if delim == '\t' { 2 } else { 3 };
    if cols.len() < min_cols || cols.len() > 200 || !cols.iter().all(|c| name_like(c)) {
        return None;
    }
    let mut seen: Vec<&str> = cols.iter().map(|c| c.trim()).collect();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    let mut rows: Vec<Vec<&str>> = Vec::new();
    let mut ragged = 0usize;
    for l in lines {
        let r = split_row(l, delim);
        if r.len() != cols.len() {
            ragged += 1;
            // Not a table: stop at once (most texts fail on the first rows).
            if ragged * 5 > rows.len() + 5 {
                return None;
            }
        }
        rows.push(r);
    }
    if rows.len() < 3 || ragged * 5 > rows.len() {
        return None;
    }
    // As JSON records, then the table renderer.
    let records: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut m = Map::new();
            for (k, c) in cols.iter().enumerate() {
                let cell = r.get(k).map_or("", |s| s.trim());
                let v = if cell.is_empty() {
                    Value::Null
                } else if let Ok(n) = serde_json::from_str::<serde_json::Number>(cell) {
                    Value::Number(n)
                } else {
                    Value::String(cell.to_string())
                };
                m.insert(c.trim().to_string(), v);
            }
            Value::Object(m)
        })
        .collect();
    let head = format!(
        "{} table, {}, {}]",
        if delim == '\t' { "TSV" } else { "CSV" },
        plural(rows.len(), "row", "rows"),
        plural(cols.len(), "column", "columns")
    );
    let value = Value::Array(records);
    Some(render_levels(&head, room, limits, |r| {
        r.path.push_str("rows");
        r.value(&value, 0);
    }))
}

/// The cells of a CSV row (double quotes around a cell honoured).
fn split_row(line: &str, delim: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == delim && !quoted {
            out.push(unquote(line.get(start..i).unwrap_or("")));
            start = i + c.len_utf8();
        }
    }
    out.push(unquote(line.get(start..).unwrap_or("")));
    out
}

fn unquote(s: &str) -> &str {
    let t = s.trim();
    t.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(t)
}
