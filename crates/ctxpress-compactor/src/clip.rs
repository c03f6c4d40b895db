//! The clip-archive message: where it goes, its text (the batches, the session
//! ledger, the latest summary) within its allowance, read back into batches,
//! and marked.

use ctxpress_budget::ledger::{self, Ledger};
use ctxpress_core::compaction::{SummaryBatch, batch_header, batch_label, parse_header, parse_iso};
use ctxpress_core::tokens::{TokenCounter, count_message};
use ctxpress_core::{Conversation, Message, MessageId};
use serde_json::Value;

use crate::render::clip_lines;
use crate::state::{self, TaskState};
use crate::{CompactionResult, batch_body, shown_state};

/// True for a clip-archive message (a plain-text user or system message
/// starting `[Context Summary`).
pub(crate) fn is_clip(m: &Message) -> bool {
    if m.is_tool_result() || m.has_tool_calls() {
        return false;
    }
    match m.fields().get("content") {
        Some(Value::String(s)) => state::is_clip_text(s),
        Some(Value::Array(_)) => state::is_clip_text(&m.text()),
        _ => false,
    }
}

/// Where the clip-archive message goes (or is): after the leading system
/// messages and the protected messages right after them (an agent's task,
/// which is often its only, and so its last, user message), so that what
/// follows them can still be folded.
///
/// A clip-archive message already in the history keeps its place: what
/// precedes it stays verbatim and the batches behind it cover, in order, what
/// followed it, so a later compaction never folds the task (or the old clip)
/// into a batch out of order, whatever is protected by then.
pub fn clip_position(conv: &Conversation, protected_tail: usize) -> usize {
    let lead = leading_system(conv);
    if let Some(c) = conv.messages[lead..].iter().position(is_clip) {
        return lead + c;
    }
    let protected = ctxpress_budget::window::protected_ids(conv, protected_tail);
    let mut at = lead;
    while let Some(m) = conv.messages.get(at) {
        if is_clip(m) || m.is_tool_result() || m.has_tool_calls() || !protected.contains(m.id()) {
            break;
        }
        at += 1;
    }
    at
}

/// Number of leading system messages, a clip-archive message not counted
/// (nor what follows it).
pub fn leading_system(conv: &Conversation) -> usize {
    conv.messages
        .iter()
        .take_while(|m| m.role().is_system() && !is_clip(m))
        .count()
}

/// A clip-archive text within `allowed` tokens (when it can be): its first
/// line, where the batches are, the session ledger (shrunk by its own ranking
/// to the room left) with the kept credentials, and the latest summary,
/// clipped at a line.
pub(crate) fn fit_clip(
    full: &str,
    batches: &[SummaryBatch],
    conversation: &str,
    allowed: usize,
    counter: &dyn TokenCounter,
    (ledger, room): (&Ledger, usize),
    state: &TaskState,
) -> String {
    let first = full.lines().next().unwrap_or("[Context Summary]");
    let mut cand = format!("{first}\n");
    let fits = |t: &str| {
        count_message(
            counter,
            &Message::text_message(MessageId::new(""), "system", t),
        ) <= allowed
    };
    if let (Some(f), Some(l)) = (batches.first(), batches.last()) {
        cand.push_str(&format!(
            "[batches {} to {}: `ctxpress search QUERY --conversation {conversation}` finds them, `ctxpress expand` restores the originals]\n",
            f.label, l.label
        ));
        let head = count_message(
            counter,
            &Message::text_message(MessageId::new(""), "system", &cand),
        );
        let room = allowed.saturating_sub(head).min(room);
        cand.push_str(&shown_state(ledger, state, room, counter));
        cand.push_str("\n\n");
        cand.push_str(&batch_body(l));
    }
    if fits(&cand) {
        return cand;
    }
    let mut chars = allowed.saturating_mul(3).min(cand.chars().count());
    for _ in 0..8 {
        let c = clip_lines(&cand, chars);
        if fits(&c) || chars <= first.chars().count() {
            return c;
        }
        chars = chars * 3 / 4;
    }
    clip_lines(&cand, first.chars().count())
}

/// The batches a clip-archive message shows (see [`clip_text`]), rebuilt
/// from its text: each `[depth:...]` header starts one (the task state
/// block stays with the batch that carries it); the omitted middle becomes
/// one batch that names the omitted labels; a shortened clip without
/// headers becomes one batch of its whole text. Originals are not in the
/// text: they are left empty (the archive of originals has them).
pub fn batches_from_clip(text: &str, conversation: &str) -> Vec<SummaryBatch> {
    if !state::is_clip_text(text) {
        return Vec::new();
    }
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let rest: Vec<&str> = lines.collect();
    let make = |depth: u32, start: &str, end: &str, count: usize, body: &str| SummaryBatch {
        label: batch_label(conversation, end),
        conversation: conversation.to_string(),
        depth,
        start: start.to_string(),
        end: end.to_string(),
        count,
        summary: format!(
            "{}\n{}",
            batch_header(depth, start, end, count),
            body.trim()
        ),
        originals: Vec::new(),
    };
    let mut out = Vec::new();
    let mut cur: Option<(ctxpress_core::compaction::Header, Vec<&str>)> = None;
    let flush = |cur: &mut Option<(ctxpress_core::compaction::Header, Vec<&str>)>,
                 out: &mut Vec<SummaryBatch>| {
        if let Some((h, body)) = cur.take() {
            out.push(make(h.depth, &h.start, &h.end, h.count, &body.join("\n")));
        }
    };
    let mut in_ledger = false;
    for l in &rest {
        // The session ledger after the batches is the clip's, not a batch's.
        if l.starts_with(ledger::HEAD) || in_ledger {
            in_ledger = *l != ledger::END;
            continue;
        }
        if let Some((h, "")) = parse_header(l) {
            flush(&mut cur, &mut out);
            cur = Some((h, Vec::new()));
            continue;
        }
        if let Some((count, start, end, labels)) = parse_omitted(l) {
            flush(&mut cur, &mut out);
            let body = format!(
                "[{} earlier batches: {}; their summaries are in the batch archive]",
                labels.len(),
                labels.join(", ")
            );
            out.push(make(0, start, end, count, &body));
            continue;
        }
        if let Some((_, b)) = cur.as_mut() {
            b.push(l);
        }
    }
    flush(&mut cur, &mut out);
    if out.is_empty() {
        // `[Context Summary: N earlier messages ... START to END]`
        let count = ctxpress_core::handle::without(first)
            .strip_prefix("[Context Summary: ")
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let range = first
            .trim_end_matches(']')
            .rsplit(", ")
            .next()
            .unwrap_or("");
        if let Some((start, end)) = range.split_once(" to ")
            && parse_iso(start).is_some()
            && parse_iso(end).is_some()
        {
            out.push(make(0, start, end, count, &rest.join("\n")));
        }
    }
    out
}

/// The omitted-middle line of a clip: messages, start, end, labels.
fn parse_omitted(l: &str) -> Option<(usize, &str, &str, Vec<&str>)> {
    let t = l.strip_prefix('[')?;
    let (_, after) = t.split_once(" batches omitted (")?;
    let (count, after) = after.split_once(" messages, ")?;
    let (start, after) = after.split_once(" to ")?;
    let (end, after) = after.split_once("): ")?;
    let (labels, _) = after.split_once("; ")?;
    Some((
        count.parse().ok()?,
        start,
        end,
        labels.split(", ").collect(),
    ))
}

/// The clip-archive message text: a `[Context Summary ...]` line, the first
/// and last `n` batches in full, and the omitted middle named by labels and
/// time range; then `state` (the session ledger, see [`Compactor`](crate::Compactor)), or
/// without it the task state block of the last batch shown.
pub fn clip_text(
    batches: &[SummaryBatch],
    n: usize,
    conversation: &str,
    state: Option<&str>,
) -> String {
    let total: usize = batches.iter().map(|b| b.count).sum();
    let (start, end) = match (batches.first(), batches.last()) {
        (Some(f), Some(l)) => (f.start.as_str(), l.end.as_str()),
        _ => ("", ""),
    };
    let mut s = format!(
        "[Context Summary: {} earlier messages of conversation {conversation} in {} batches, {start} to {end}]\n",
        total,
        batches.len()
    );
    let show = |b: &SummaryBatch, with_state: bool| {
        let header = batch_header(b.depth, &b.start, &b.end, b.count);
        let body = batch_body(b);
        let st = if with_state && state.is_none() {
            TaskState::parse(&b.summary)
                .map(|s| s.render())
                .unwrap_or_default()
        } else {
            String::new()
        };
        format!(
            "\n{header}\n{body}\n{}",
            if st.is_empty() {
                String::new()
            } else {
                format!("\n{st}")
            }
        )
    };
    let len = batches.len();
    if len <= 2 * n {
        for (i, b) in batches.iter().enumerate() {
            s.push_str(&show(b, i + 1 == len));
        }
    } else {
        for b in &batches[..n] {
            s.push_str(&show(b, false));
        }
        let mid = &batches[n..len - n];
        let labels: Vec<&str> = mid.iter().map(|b| b.label.as_str()).collect();
        let count: usize = mid.iter().map(|b| b.count).sum();
        s.push_str(&format!(
            "\n[{} batches omitted ({count} messages, {} to {}): {}; `ctxpress search QUERY --conversation {conversation}` finds them, `ctxpress expand` restores the originals]\n",
            mid.len(),
            mid[0].start,
            mid[mid.len() - 1].end,
            labels.join(", ")
        ));
        for (i, b) in batches[len - n..].iter().enumerate() {
            s.push_str(&show(b, i + 1 == n));
        }
    }
    if let Some(st) = state {
        s.truncate(s.trim_end().len());
        s.push_str("\n\n");
        s.push_str(st);
    }
    s.trim_end().to_string()
}

/// With an archive to recall from: write the recall handle of the clip's
/// own stretch (what it `replaces`: the folded messages, or when system
/// messages split the fold, those before the first of them) into the clip
/// at `at`. The pipeline's rule for handles (none that makes a message
/// longer than what it stands for) would leave it out when the clip is
/// longer than its stretch; the clip and the notes together stand for the
/// whole fold and, the compaction made sure, with room for the handle, are
/// shorter.
pub(crate) fn mark_clip(before: &Conversation, history: &mut Conversation, at: usize) {
    let Some(m) = history.messages.get(at) else {
        return;
    };
    let id = m.id().clone();
    let ids = history
        .ann(&id)
        .map(|a| a.replaces.clone())
        .unwrap_or_default();
    let tagged = m.text().starts_with(&format!("{CLIP_WORD}#h"));
    if ids.is_empty() || !m.text().starts_with(CLIP_WORD) || tagged {
        return;
    }
    let h = ctxpress_core::markers::handle_of(before, &ids);
    let text = m.text().replacen(CLIP_WORD, &format!("{CLIP_WORD}{h}"), 1);
    history.messages[at].set_text(text);
    ctxpress_core::markers::mark(history, &id, h, ids);
}

/// How a clip-archive message's text starts.
const CLIP_WORD: &str = "[Context Summary";

/// Write the recall handles of a compaction made outside a pipeline (which
/// writes them after each stage): the clip's and its notes', so that the
/// records [`ctxpress_core::archive::records`] makes of `before` and the
/// result store each handle's originals. `before` is the history given to
/// the compaction. What `ctxpress compact` does before archiving.
pub fn write_handles(before: &Conversation, r: &mut CompactionResult, counter: &dyn TokenCounter) {
    if !r.compacted {
        return;
    }
    if let Some(at) = r.history.messages.iter().position(is_clip) {
        mark_clip(before, &mut r.history, at);
    }
    ctxpress_core::markers::tag_markers(before, &mut r.history, counter);
}
