//! The MCP tools' work, apart from the protocol: arguments read and
//! checked, the archive asked, each answer built within
//! [`MAX_ANSWER_BYTES`]. A tool either answers ([`Answer`]) or says what
//! was wrong in words a model can act on (`Err(String)`, sent as a tool
//! error).

use ctxpress::Handle;
use ctxpress::core::Archive;
use ctxpress::core::compaction::BatchArchive;
use ctxpress::store::{HandleEntry, Hit, SqliteArchive};
use serde::Deserialize;
use serde_json::{Value, json};

/// Most bytes of text in one tool answer (64 KiB), whatever was asked.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Hits `search_history` returns when `limit` is not given.
pub const DEFAULT_HITS: usize = 10;
/// Most hits `search_history` returns; a larger `limit` is refused.
pub const MAX_HITS: usize = 50;
/// Characters of a `recall` page when `max_chars` is not given.
pub const DEFAULT_PAGE_CHARS: usize = 16_000;
/// Most characters of a `recall` page; a larger `max_chars` is refused.
/// A page is cut sooner when its UTF-8 would pass [`MAX_ANSWER_BYTES`].
pub const MAX_PAGE_CHARS: usize = 32_000;
/// Handles `history_outline` lists in one answer (`offset` pages on).
pub const OUTLINE_HANDLES: usize = 100;
/// Batches `history_outline` lists (the newest are kept past it).
pub const OUTLINE_BATCHES: usize = 100;
/// Longest query, conversation id or handle argument accepted, in bytes.
pub const MAX_ARGUMENT_BYTES: usize = 4096;

/// What a tool answers: text blocks, sent in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer(pub Vec<String>);

/// A tool's failure, in words for the model.
pub type ToolResult = Result<Answer, String>;

/// The tools by name, with their descriptions and input schemas.
pub fn definitions() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "search_history",
            "Search the full original text of this conversation history: the messages \
             ctxpress compressed away (summarized, deduplicated or evicted) are archived \
             word for word. Give plain words (all must occur; no operators). Each hit has \
             a snippet with the matched words between « and », the conversation id, the \
             role, and a `handle` (like #h7f3a2c91d0, the same handle a marker such as \
             [summary#h7f3a2c91d0: ...] in the history carries): pass it to `recall` for \
             the full original messages. A hit whose handle is null has no marker standing \
             for it (the message is most likely still in the history as it was), unless \
             it is a compaction batch (kind `batch`: `recall` takes its `where.key` \
             label). At most 50 hits (default 10), best first; the answer is \
             at most 64 KiB.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to find, e.g. a file name, an error message, a function name."},
                    "conversation": {"type": "string", "description": "Only this conversation id (as hits and history_outline show it). Omit to search every conversation of the archive."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HITS, "default": DEFAULT_HITS, "description": "Most hits to return (1-50)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        ),
        (
            "recall",
            "Get back, word for word, the original messages a handle stands for. Markers \
             in a compressed history carry one: [summary#h7f3a2c91d0: ...], \
             [ctxpress#h...: N earlier messages archived ...], [Context Summary#h...], \
             [X:dup#h... of ...]; search_history hits carry them too. Also takes a \
             compaction batch label from history_outline. Returns the messages as text \
             ([N] role, then the text, tool calls and tool results), in pages of at most \
             `max_chars` characters (default 16000, at most 32000; every answer is at \
             most 64 KiB): when more is left, the answer ends by giving the `offset` of \
             the next page.",
            json!({
                "type": "object",
                "properties": {
                    "handle": {"type": "string", "description": "The handle as written in a marker, e.g. #h7f3a2c91d0 (the # is optional), or a compaction batch label."},
                    "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Character offset of the page to return (the previous answer gives the next one)."},
                    "max_chars": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_CHARS, "default": DEFAULT_PAGE_CHARS, "description": "Most characters in this page (1-32000)."}
                },
                "required": ["handle"],
                "additionalProperties": false
            }),
        ),
        (
            "history_outline",
            "List what has been archived for one conversation: the newest session ledger \
             (what the archived messages held: files, commands, errors, open todos, \
             decisions), every recall handle (with the note the history showed in its \
             place, how many original messages it stands for, their roles and a one-line \
             preview of the first) in conversation order, and its compaction summary \
             batches (label, time range, message count, first line of the summary), \
             oldest first. Pass a handle or a batch label to `recall` to read the \
             originals. Lists 100 handles per answer (`offset` pages on); at most 64 KiB.",
            json!({
                "type": "object",
                "properties": {
                    "conversation": {"type": "string", "description": "The conversation id, as search_history hits show it."},
                    "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Skip this many handles (the previous answer gives the next offset)."}
                },
                "required": ["conversation"],
                "additionalProperties": false
            }),
        ),
    ]
}

/// Run tool `name` with `args` on `archive`; `None` for an unknown tool.
pub fn call(archive: &SqliteArchive, name: &str, args: Value) -> Option<ToolResult> {
    Some(match name {
        "search_history" => parse(name, args).and_then(|a| search_history(archive, a)),
        "recall" => parse(name, args).and_then(|a| recall(archive, a)),
        "history_outline" => parse(name, args).and_then(|a| history_outline(archive, a)),
        _ => return None,
    })
}

fn parse<T: serde::de::DeserializeOwned>(tool: &str, args: Value) -> Result<T, String> {
    let args = if args.is_null() { json!({}) } else { args };
    serde_json::from_value(args).map_err(|e| format!("{tool}: invalid arguments: {e}"))
}

fn bounded(tool: &str, what: &str, s: &str) -> Result<(), String> {
    if s.len() > MAX_ARGUMENT_BYTES {
        return Err(format!(
            "{tool}: `{what}` is {} bytes long; at most {MAX_ARGUMENT_BYTES} are accepted",
            s.len()
        ));
    }
    Ok(())
}

/// An integer argument within `lo..=hi`, or the error saying so.
fn within(
    tool: &str,
    what: &str,
    v: Option<u64>,
    default: usize,
    lo: usize,
    hi: usize,
) -> Result<usize, String> {
    let Some(v) = v else { return Ok(default) };
    match usize::try_from(v) {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!(
            "{tool}: `{what}` must be between {lo} and {hi} (got {v}): answers are bounded to {} KiB",
            MAX_ANSWER_BYTES / 1024
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    conversation: Option<String>,
    #[serde(default)]
    limit: Option<u64>,
}

fn hit_json(h: &Hit) -> Value {
    json!({
        "handle": h.handle().map(|x| x.to_string()),
        "conversation": h.conversation,
        "role": h.role,
        "kind": h.kind.as_str(),
        "snippet": h.snippet,
        "where": {"key": h.key, "pos": h.pos},
    })
}

fn search_history(archive: &SqliteArchive, a: SearchArgs) -> ToolResult {
    const TOOL: &str = "search_history";
    bounded(TOOL, "query", &a.query)?;
    if let Some(c) = &a.conversation {
        bounded(TOOL, "conversation", c)?;
    }
    let limit = within(TOOL, "limit", a.limit, DEFAULT_HITS, 1, MAX_HITS)?;
    if !a.query.chars().any(char::is_alphanumeric) {
        return Err(format!(
            "{TOOL}: `query` has no word to search for (give plain words, e.g. a file or function name)"
        ));
    }
    let conversation = a.conversation.as_deref().filter(|c| !c.is_empty());
    let hits = archive
        .search(&a.query, conversation, limit)
        .map_err(|e| format!("{TOOL}: cannot search the archive: {e}"))?;
    let mut shown: Vec<Value> = hits.iter().map(hit_json).collect();
    let mut cut = false;
    loop {
        let mut v = json!({"query": a.query, "hits": shown});
        if hits.is_empty() {
            v["note"] = json!("no match: try fewer or other words, or another conversation");
        }
        if cut {
            v["note"] =
                json!("more hits than fit in 64 KiB: ask again with a smaller limit or more words");
        }
        let text = serde_json::to_string(&v).unwrap_or_default();
        if text.len() <= MAX_ANSWER_BYTES || shown.is_empty() {
            return Ok(Answer(vec![text]));
        }
        shown.pop();
        cut = true;
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    handle: String,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    max_chars: Option<u64>,
}

/// The prefix of compaction batch labels (`compaction-batch-{conversation}-{end}`).
const BATCH_PREFIX: &str = "compaction-batch-";

fn recall(archive: &SqliteArchive, a: RecallArgs) -> ToolResult {
    const TOOL: &str = "recall";
    bounded(TOOL, "handle", &a.handle)?;
    let max_chars = within(
        TOOL,
        "max_chars",
        a.max_chars,
        DEFAULT_PAGE_CHARS,
        1,
        MAX_PAGE_CHARS,
    )?;
    let asked = a.handle.trim();
    let (name, messages) = if let Some(h) = Handle::parse(asked) {
        let found = ctxpress::recall(archive, &h)
            .map_err(|e| format!("{TOOL}: cannot read the archive: {e}"))?;
        match found {
            Some(r) => (h.to_string(), r.messages),
            None => {
                return Err(format!(
                    "{TOOL}: no originals for {h} in this archive: check the handle as the marker \
                     writes it (search_history and history_outline list the handles it holds)"
                ));
            }
        }
    } else if asked.starts_with(BATCH_PREFIX) {
        let found = BatchArchive::read(archive, asked)
            .map_err(|e| format!("{TOOL}: cannot read the archive: {e}"))?;
        match found {
            Some(b) => (asked.to_string(), b.originals),
            None => {
                return Err(format!(
                    "{TOOL}: no compaction batch `{asked}` in this archive (history_outline lists them)"
                ));
            }
        }
    } else {
        return Err(format!(
            "{TOOL}: `{}` is not a handle: a handle is #h and 10 hex digits, as in \
             [summary#h7f3a2c91d0: ...] (or a compaction batch label from history_outline)",
            asked.chars().take(100).collect::<String>()
        ));
    };
    let count = messages.len();
    let text = ctxpress::Recalled {
        handle: Handle::of([name.as_str()]),
        messages,
    }
    .to_text();
    let total = text.chars().count();
    let offset = match a.offset {
        None => 0,
        Some(o) => match usize::try_from(o) {
            Ok(o) if o <= total => o,
            _ => {
                return Err(format!(
                    "{TOOL}: `offset` {o} is past the end: {name} is {total} characters as text"
                ));
            }
        },
    };
    let page = page_of(&text, offset, max_chars, MAX_ANSWER_BYTES - 1024);
    let end = offset + page.chars().count();
    let head = format!(
        "{name} stands for {count} original message{} ({total} characters as text); \
         characters {offset}-{end} follow.",
        if count == 1 { "" } else { "s" }
    );
    let mut blocks = vec![head, page.to_string()];
    if end < total {
        blocks.push(format!(
            "[{} more characters: call recall with {{\"handle\": \"{name}\", \"offset\": {end}}} for the next page]",
            total - end
        ));
    }
    Ok(Answer(blocks))
}

/// The characters of `text` from `offset` on: at most `max_chars` of them
/// and at most `max_bytes` bytes (at least one character when any is left).
fn page_of(text: &str, offset: usize, max_chars: usize, max_bytes: usize) -> &str {
    let start = text
        .char_indices()
        .nth(offset)
        .map_or(text.len(), |(i, _)| i);
    let rest = &text[start..];
    let mut end = 0;
    for (n, (i, c)) in rest.char_indices().enumerate() {
        if n == max_chars || (n > 0 && i + c.len_utf8() > max_bytes) {
            break;
        }
        end = i + c.len_utf8();
    }
    &rest[..end]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutlineArgs {
    conversation: String,
    #[serde(default)]
    offset: Option<u64>,
}

/// One line of text: whitespace collapsed, at most `n` characters.
fn one_line(s: &str, n: usize) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    let line = words.join(" ");
    if line.chars().count() <= n {
        return line;
    }
    let mut cut: String = line.chars().take(n.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// What a handle's first message says, on one line: its role and the start
/// of its text (or tool calls and results).
fn preview(first: &str) -> String {
    let text = ctxpress::Recalled {
        handle: Handle::of([first]),
        messages: vec![first.to_string()],
    }
    .to_text();
    // `[1] role` first, then what it says.
    let mut lines = text.lines();
    let role = lines
        .next()
        .and_then(|l| l.strip_prefix("[1] "))
        .unwrap_or("")
        .trim()
        .to_string();
    let body: Vec<&str> = lines.collect();
    let said = one_line(&body.join(" "), 160);
    if role.is_empty() {
        said
    } else {
        format!("{role}: {said}")
    }
}

fn handle_json(e: &HandleEntry, note: Option<&str>) -> Value {
    let roles: serde_json::Map<String, Value> =
        e.roles.iter().map(|(r, n)| (r.clone(), json!(n))).collect();
    let mut v = json!({
        "handle": e.handle.to_string(),
        "messages": e.messages,
        "roles": roles,
        "preview": preview(&e.first),
    });
    if let Some(n) = note {
        v["note"] = json!(one_line(n, 300));
    }
    v
}

/// The text of the message whose marker `h` is, as the compressed history
/// showed it (the archive's `n:` record), when archived.
fn note_text(archive: &SqliteArchive, h: &Handle) -> Option<String> {
    let texts = Archive::get(archive, &ctxpress::core::archive::note_key(h)).ok()??;
    let c = ctxpress::Conversation::parse(&format!("[{}]", texts.first()?)).ok()?;
    Some(c.messages.first()?.text().into_owned())
}

/// The characters of the session ledger an outline shows at most.
const OUTLINE_LEDGER_CHARS: usize = 16_000;

/// The newest session ledger among the notes of `handles` (newest last):
/// an evict note's, or the one a compaction clip shows.
fn newest_ledger(archive: &SqliteArchive, handles: &[HandleEntry]) -> Option<String> {
    handles.iter().rev().find_map(|e| {
        let t = note_text(archive, &e.handle)?;
        let at = t.find(ctxpress::core::ledger::HEAD)?;
        let t = &t[at..];
        Some(match t.char_indices().nth(OUTLINE_LEDGER_CHARS) {
            Some((cut, _)) => format!("{}…", &t[..cut]),
            None => t.to_string(),
        })
    })
}

fn history_outline(archive: &SqliteArchive, a: OutlineArgs) -> ToolResult {
    const TOOL: &str = "history_outline";
    bounded(TOOL, "conversation", &a.conversation)?;
    let offset = match a.offset {
        None => 0,
        Some(o) => usize::try_from(o).unwrap_or(usize::MAX),
    };
    let read = |e: &dyn std::fmt::Display| format!("{TOOL}: cannot read the archive: {e}");
    let (entries, total) = archive
        .handles(&a.conversation, offset, OUTLINE_HANDLES)
        .map_err(|e| read(&e))?;
    let batches = BatchArchive::batches(archive, &a.conversation).map_err(|e| read(&e))?;
    if total == 0 && batches.is_empty() {
        return Err(format!(
            "{TOOL}: nothing is archived for conversation `{}` (search_history hits name the conversations)",
            a.conversation.chars().take(200).collect::<String>()
        ));
    }
    if offset > total {
        return Err(format!(
            "{TOOL}: `offset` {offset} is past the end: the conversation has {total} handles"
        ));
    }
    let batch_count = batches.len();
    // The newest batches when they are too many.
    let mut batch_list: Vec<Value> = batches[batch_count.saturating_sub(OUTLINE_BATCHES)..]
        .iter()
        .map(|b| {
            let first = b
                .body()
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            json!({
                "label": b.label,
                "depth": b.depth,
                "start": b.start,
                "end": b.end,
                "messages": b.count,
                "summary": one_line(first, 200),
            })
        })
        .collect();
    let mut shown: Vec<Value> = entries
        .iter()
        .map(|e| handle_json(e, note_text(archive, &e.handle).as_deref()))
        .collect();
    let ledger = if total <= entries.len() + offset && offset == 0 {
        newest_ledger(archive, &entries)
    } else {
        let (all, _) = archive
            .handles(&a.conversation, 0, total)
            .map_err(|e| read(&e))?;
        newest_ledger(archive, &all)
    };
    loop {
        let next = offset + shown.len();
        let mut v = json!({
            "conversation": a.conversation,
            "ledger": ledger,
            "handles_total": total,
            "offset": offset,
            "handles": shown,
            "next_offset": if next < total { json!(next) } else { Value::Null },
            "batches_total": batch_count,
            "batches": batch_list,
        });
        if batch_list.len() < batch_count {
            v["batches_note"] = json!(format!(
                "the newest {} of {batch_count} batches are listed",
                batch_list.len()
            ));
        }
        let text = serde_json::to_string(&v).unwrap_or_default();
        if text.len() <= MAX_ANSWER_BYTES || (shown.is_empty() && batch_list.is_empty()) {
            return Ok(Answer(vec![text]));
        }
        // Over 64 KiB: fewer handles (the next offset says where to go on),
        // then fewer batches (the oldest go first).
        if shown.len() > 1 || batch_list.is_empty() {
            shown.pop();
        } else {
            batch_list.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cut_at_characters_and_bytes() {
        let t = "aé🦀bcd";
        assert_eq!(page_of(t, 0, 2, 100), "aé");
        assert_eq!(page_of(t, 2, 10, 100), "🦀bcd");
        assert_eq!(page_of(t, 2, 10, 5), "🦀b");
        // One character even when it alone is over the bytes.
        assert_eq!(page_of(t, 2, 10, 1), "🦀");
        assert_eq!(page_of(t, 6, 10, 100), "");
    }

    fn archive_with(messages: &[String]) -> (SqliteArchive, Handle) {
        use ctxpress::core::archive::{Archive, Record};
        let a = SqliteArchive::open_in_memory().unwrap();
        let h = Handle::of(["big"]);
        a.put_for(
            Some("c1"),
            &[Record {
                key: h.record_key(),
                originals: messages.to_vec(),
            }],
        )
        .unwrap();
        (a, h)
    }

    fn answer_bytes(a: &Answer) -> usize {
        a.0.iter().map(String::len).sum()
    }

    /// Four-byte characters: 32,000 of them would be 125 KiB, so the page
    /// is cut at 64 KiB; paging on from the offset it names gives the whole
    /// text back.
    #[test]
    fn a_recall_page_stays_within_64_kib_and_pages_rebuild_the_text() {
        let big = serde_json::json!({"role": "tool", "tool_call_id": "c", "content": "🦀".repeat(40_000)})
            .to_string();
        let (a, h) = archive_with(std::slice::from_ref(&big));
        let whole = ctxpress::recall(&a, &h).unwrap().unwrap().to_text();
        let (mut got, mut offset) = (String::new(), 0u64);
        for _ in 0..10 {
            let args = serde_json::json!({"handle": h.to_string(), "offset": offset, "max_chars": MAX_PAGE_CHARS});
            let r = call(&a, "recall", args).unwrap().unwrap();
            assert!(answer_bytes(&r) <= MAX_ANSWER_BYTES, "{}", answer_bytes(&r));
            got.push_str(&r.0[1]);
            let Some(next) = r.0.get(2) else { break };
            let at = next.find("\"offset\": ").unwrap() + 10;
            offset = next[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap();
        }
        assert_eq!(got, whole);
        // The offset at the very end: an empty page, no next one.
        let end = whole.chars().count();
        let r = call(
            &a,
            "recall",
            serde_json::json!({"handle": h.to_string(), "offset": end}),
        )
        .unwrap()
        .unwrap();
        assert_eq!((r.0[1].as_str(), r.0.len()), ("", 2));
    }

    /// The outline lists handles and batches (label, times, count, the
    /// summary's first line without its header); a search over many long
    /// hits stays within 64 KiB.
    #[test]
    fn the_outline_lists_handles_and_batches() {
        use ctxpress::core::compaction::{BatchArchive, SummaryBatch, batch_header};
        let msgs: Vec<String> = (0..3)
            .map(|i| serde_json::json!({"role": "user", "content": format!("step {i} of the wombat plan")}).to_string())
            .collect();
        let (a, h) = archive_with(&msgs);
        a.put_batches(&[SummaryBatch {
            label: "compaction-batch-c1-2026-01-01T00:00:09Z".into(),
            conversation: "c1".into(),
            depth: 0,
            start: "2026-01-01T00:00:00Z".into(),
            end: "2026-01-01T00:00:09Z".into(),
            count: 3,
            summary: format!(
                "{}\nThe user planned the wombat.\nmore",
                batch_header(0, "2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z", 3)
            ),
            originals: msgs.clone(),
        }])
        .unwrap();
        let r = call(
            &a,
            "history_outline",
            serde_json::json!({"conversation": "c1"}),
        )
        .unwrap()
        .unwrap();
        let v: Value = serde_json::from_str(&r.0[0]).unwrap();
        assert_eq!(v["handles"][0]["handle"], h.to_string());
        assert_eq!(v["handles"][0]["messages"], 3);
        assert_eq!(v["handles"][0]["roles"]["user"], 3);
        assert_eq!(
            v["handles"][0]["preview"],
            "user: step 0 of the wombat plan"
        );
        assert_eq!(v["next_offset"], Value::Null);
        let b = &v["batches"][0];
        assert_eq!(b["summary"], "The user planned the wombat.");
        assert_eq!(
            (b["messages"].as_u64(), b["depth"].as_u64()),
            (Some(3), Some(0))
        );
        // A batch label recalls the batch's originals.
        let label = b["label"].as_str().unwrap();
        let r = call(&a, "recall", serde_json::json!({"handle": label}))
            .unwrap()
            .unwrap();
        assert!(r.0[1].contains("step 2 of the wombat plan"), "{:?}", r.0);
        let r = call(
            &a,
            "history_outline",
            serde_json::json!({"conversation": "c1", "offset": 5}),
        )
        .unwrap();
        assert!(r.unwrap_err().contains("past the end"));

        let long: Vec<String> = (0..200)
            .map(|i| serde_json::json!({"role": "tool", "content": format!("{i} {}", "wombat 日本語 ".repeat(400))}).to_string())
            .collect();
        let (a, _) = archive_with(&long);
        let r = call(
            &a,
            "search_history",
            serde_json::json!({"query": "wombat", "limit": MAX_HITS}),
        )
        .unwrap()
        .unwrap();
        assert!(answer_bytes(&r) <= MAX_ANSWER_BYTES);
        let v: Value = serde_json::from_str(&r.0[0]).unwrap();
        assert!(!v["hits"].as_array().unwrap().is_empty());
    }

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line("a\n  b\tc", 10), "a b c");
        assert_eq!(one_line("abcdef", 4), "abc…");
    }
}
