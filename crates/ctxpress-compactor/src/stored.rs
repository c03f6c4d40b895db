//! Compaction of a conversation an application keeps in a
//! [`Persistence`]: load, fold, archive, then delete.
//!
//! The order is what makes a crash harmless. The batches holding the folded
//! originals are committed to the [`BatchArchive`] first; only then does one
//! [`Persistence::fold`] transaction delete the originals and put the
//! clip-archive message in their place. A process killed between the two
//! (or between two archive writes) leaves every original in both places;
//! the next run sees the archive hold more messages than the stored clip
//! message counts, the extra ones being exactly the messages that still
//! follow the clip position, finishes the deletion (no second summary of the
//! same messages) and goes on.
//!
//! Unlike a compaction of a history passed by value, a stored one folds the
//! system messages that follow the clip position too (an agent's notes in
//! the middle of a session): the batches behind the clip then hold every
//! message after it in order, and [`expand_stored`] gives back exactly what
//! was appended. The leading system messages and whatever precedes the clip
//! stay as they are.
//!
//! [`Compactor::finish_interrupted`](crate::Compactor::finish_interrupted)
//! finishes such a run. `tests/it/crash.rs` kills compactions with SIGKILL in a
//! child process at each of their writes and checks that nothing is lost.

use crate::{
    CompactionError, CompactionResult, Compactor, LEDGER_TOKENS, MAX_CONFLICTS, TaskState,
    clip_position, clip_text, is_clip, ledger_beside, shown_state,
};
use ctxpress_core::archive::ArchiveError;
use ctxpress_core::compaction::{BatchArchive, Persistence, StoredMessage, SummaryBatch};
use ctxpress_core::tokens::Heuristic;
use ctxpress_core::{Conversation, Message, MessageId};
use std::collections::{HashMap, HashSet};

/// The stored messages as a conversation (message `i` is `stored[i]`).
fn parse(stored: &[StoredMessage]) -> Result<Conversation, CompactionError> {
    let mut text = String::from("[");
    for (i, m) in stored.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&m.json);
    }
    text.push(']');
    Conversation::parse(&text)
        .map_err(|e| CompactionError::Failed(format!("the stored messages do not parse: {e}")))
}

impl Compactor {
    /// Compact the conversation `conversation_id` kept in `persistence` now
    /// (as [`Compactor::compress`] does): batches go to `archive` first, then
    /// the folded messages are deleted from `persistence` and the
    /// clip-archive message takes their place, in one transaction. A
    /// previous run killed between the two is finished first. When another
    /// run folded the stored messages since they were loaded (the fold
    /// reports [`ArchiveError::Conflict`] and changes nothing), it starts
    /// again from the stored messages, as a conflict in the batch archive
    /// does. Never fails: on any error `persistence` is left as it was (or
    /// as the recovery left it) and the error is in the result.
    pub fn compress_stored(
        &self,
        conversation_id: &str,
        persistence: &dyn Persistence,
        archive: &dyn BatchArchive,
    ) -> CompactionResult {
        let mut raced = 0;
        loop {
            let (stored, conv, notes) =
                match self.load_stored(conversation_id, persistence, archive) {
                    Ok(x) => x,
                    Err(e) if lost_race(&e) && raced < MAX_CONFLICTS => {
                        raced += 1;
                        continue;
                    }
                    Err(e) => return failed(e),
                };
            let res = self
                .folding_system()
                .compress(&conv, conversation_id, archive);
            let (r, lost) = finish_stored(conversation_id, persistence, &stored, &conv, res, notes);
            if !lost || raced == MAX_CONFLICTS {
                return started_again(r, raced);
            }
            raced += 1;
        }
    }

    /// Finish a compaction of `conversation_id` that was stopped after its
    /// batches were archived and before the folded messages were deleted
    /// from `persistence` (a crash, a failed [`Persistence::fold`]): delete
    /// them and put the clip-archive message in their place. Returns how
    /// many archived messages were deleted (0 when nothing was pending).
    /// [`Compactor::compress_stored`] does this first on its own.
    pub fn finish_interrupted(
        &self,
        conversation_id: &str,
        persistence: &dyn Persistence,
        archive: &dyn BatchArchive,
    ) -> Result<usize, CompactionError> {
        let stored = persistence.load(conversation_id)?;
        let conv = parse(&stored)?;
        self.finish_pending(conversation_id, &stored, &conv, persistence, archive)
    }

    /// [`Compactor::compress_stored`] for async backends (any backend works).
    pub async fn compress_stored_async(
        &self,
        conversation_id: &str,
        persistence: &dyn Persistence,
        archive: &dyn BatchArchive,
    ) -> CompactionResult {
        let mut raced = 0;
        loop {
            let (stored, conv, notes) =
                match self.load_stored(conversation_id, persistence, archive) {
                    Ok(x) => x,
                    Err(e) if lost_race(&e) && raced < MAX_CONFLICTS => {
                        raced += 1;
                        continue;
                    }
                    Err(e) => return failed(e),
                };
            let res = self
                .folding_system()
                .compress_async(&conv, conversation_id, archive)
                .await;
            let (r, lost) = finish_stored(conversation_id, persistence, &stored, &conv, res, notes);
            if !lost || raced == MAX_CONFLICTS {
                return started_again(r, raced);
            }
            raced += 1;
        }
    }

    /// This compactor folding system messages after the clip position too: a
    /// stored conversation's batches hold every message after the clip in
    /// order, so that the history expands exactly.
    fn folding_system(&self) -> Compactor {
        let mut c = self.clone();
        c.fold_system = true;
        c
    }

    /// Load (finishing an interrupted compaction first).
    fn load_stored(
        &self,
        id: &str,
        persistence: &dyn Persistence,
        archive: &dyn BatchArchive,
    ) -> Result<(Vec<StoredMessage>, Conversation, Vec<String>), CompactionError> {
        let stored = persistence.load(id)?;
        let conv = parse(&stored)?;
        let n = self.finish_pending(id, &stored, &conv, persistence, archive)?;
        if n == 0 {
            return Ok((stored, conv, Vec::new()));
        }
        let note = format!("finished an interrupted compaction: {n} archived messages deleted");
        let stored = persistence.load(id)?;
        let conv = parse(&stored)?;
        Ok((stored, conv, vec![note]))
    }

    /// Finish an interrupted compaction of the loaded `stored` (`conv`): when
    /// the archive already holds the messages right after the clip position
    /// (see [`pending`]), delete those messages and put the clip in their
    /// place (one [`Persistence::fold`]). Returns how many were deleted.
    fn finish_pending(
        &self,
        id: &str,
        stored: &[StoredMessage],
        conv: &Conversation,
        persistence: &dyn Persistence,
        archive: &dyn BatchArchive,
    ) -> Result<usize, CompactionError> {
        let lead = clip_position(conv, self.cfg.protected_tail);
        let clip_stored = lead < conv.messages.len() && is_clip(&conv.messages[lead]);
        if stored.len() <= lead + usize::from(clip_stored) {
            return Ok(0);
        }
        let batches = archive.batches(id)?;
        let Some((at, end)) = pending(&batches, conv, stored, lead) else {
            return Ok(0);
        };
        let removed: Vec<i64> = stored[at..end].iter().map(|m| m.key).collect();
        // The ledger the clip would have shown: the old clip's (when it is
        // in the range), updated by the messages the batches fold.
        let msgs = &conv.messages;
        let mut ledger = ledger_beside(msgs[..at].iter().chain(&msgs[end.min(msgs.len())..]));
        msgs[at..end.min(msgs.len())]
            .iter()
            .for_each(|m| ledger.add(m));
        let kept = batches
            .last()
            .and_then(|b| TaskState::parse(&b.summary))
            .unwrap_or_default();
        let state = shown_state(&ledger, &kept, LEDGER_TOKENS, &Heuristic);
        let clip = Message::text_message(
            MessageId::new("compaction"),
            "user",
            &clip_text(&batches, self.cfg.clip_window, id, Some(&state)),
        );
        persistence.fold(id, &removed, &[conv.message_json(&clip)])?;
        Ok(end - at - usize::from(clip_stored))
    }
}

/// The stored messages an interrupted compaction archived but did not
/// delete, with the stored clip-archive message before them if there is one:
/// the range of `stored` the clip of `batches` is to replace. `lead` is the
/// clip position of `conv` (the parsed `stored`).
///
/// The stored clip-archive message says how many messages its batches cover
/// (before the first compaction there is none, and they cover none);
/// whatever the archive holds beyond that count was archived by the
/// interrupted run: the archive's last originals, which must be the
/// messages right after the clip. Counting messages rather than matching
/// whole batches matters: a run that folds many chunks at once summarizes
/// the oldest batches again together with its first fresh ones (one
/// [`BatchArchive::replace`], then a put of the other fresh batches), so
/// after a kill the newest batch can hold older messages as well as pending
/// ones. Without a stored clip, the pending messages may lie after the clip
/// position, past plain messages that were protected then (the task) and no
/// longer are now that more messages have been appended.
///
/// When the clip's count is missing (a clip written by something else) or
/// does not fit the archive, the newest whole batches whose originals are
/// the messages right after the clip are the pending ones.
fn pending(
    batches: &[SummaryBatch],
    conv: &Conversation,
    stored: &[StoredMessage],
    lead: usize,
) -> Option<(usize, usize)> {
    let msgs = &conv.messages;
    let clip = (lead < msgs.len() && is_clip(&msgs[lead])).then(|| &msgs[lead]);
    let start = lead + usize::from(clip.is_some());
    let covered = clip.map_or(Some(0), |m| clip_count(&m.text()));
    let total: usize = batches.iter().map(|b| b.count).sum();
    let originals: Vec<&String> = batches.iter().flat_map(|b| &b.originals).collect();
    if let Some(t) = covered.and_then(|c| total.checked_sub(c)) {
        if t == 0 {
            return None;
        }
        let held = |at: usize| {
            t <= originals.len()
                && stored.len() >= at + t
                && originals[originals.len() - t..]
                    .iter()
                    .zip(&stored[at..])
                    .all(|(o, m)| m.json == **o)
        };
        if clip.is_some() {
            if held(start) {
                return Some((lead, start + t));
            }
        } else if let Some(at) = (lead..stored.len())
            .take_while(|&at| at == lead || plain(&msgs[at - 1]))
            .find(|&at| held(at))
        {
            return Some((at, at + t));
        }
    }
    let after = &stored[start..];
    let mut best = 0;
    let mut total = 0;
    for k in 1..=batches.len() {
        let newest = &batches[batches.len() - k..];
        if newest[0].originals.is_empty() {
            break;
        }
        total += newest[0].originals.len();
        if total > after.len() {
            break;
        }
        let originals = newest.iter().flat_map(|b| b.originals.iter());
        if originals.zip(after).all(|(o, m)| m.json == *o) {
            best = total;
        }
    }
    (best > 0).then_some((lead, start + best))
}

/// A message [`clip_position`] can place the clip after: neither a tool
/// call, a tool result nor a clip.
fn plain(m: &Message) -> bool {
    !m.is_tool_result() && !m.has_tool_calls() && !is_clip(m)
}

/// The number of messages a clip-archive text says its batches cover (its
/// first line, `[Context Summary: N earlier messages ...`, see
/// [`clip_text`]).
fn clip_count(text: &str) -> Option<usize> {
    ctxpress_core::handle::without(text.get(..text.len().min(200)).unwrap_or(text))
        .trim_start()
        .strip_prefix("[Context Summary: ")?
        .split_once(" earlier messages ")?
        .0
        .parse()
        .ok()
}

/// Nothing could be loaded: an empty history and the error.
fn failed(e: CompactionError) -> CompactionResult {
    let mut r = CompactionResult::unchanged(&Conversation::new(Vec::new()), 0);
    r.error = Some(e);
    r
}

/// True for the error of a [`Persistence::fold`] whose messages another run
/// folded since they were loaded.
fn lost_race(e: &CompactionError) -> bool {
    matches!(e, CompactionError::Archive(ArchiveError::Conflict(_)))
}

/// The result, noting how many times the run started again.
fn started_again(mut r: CompactionResult, raced: usize) -> CompactionResult {
    if raced > 0 {
        r.notes.push(format!(
            "another run folded the stored messages first ({raced} of this run's folds lost the race): loaded again"
        ));
    }
    r
}

/// Write a compaction back: the messages from the clip-archive message's
/// place to the last folded one are replaced, in one transaction, by what
/// the compacted history has there. True with the result when the fold
/// lost a race with another run (nothing written; the result is what to
/// give if the run does not start again).
fn finish_stored(
    id: &str,
    persistence: &dyn Persistence,
    stored: &[StoredMessage],
    conv: &Conversation,
    mut res: CompactionResult,
    mut notes: Vec<String>,
) -> (CompactionResult, bool) {
    notes.append(&mut res.notes);
    res.notes = notes;
    if !res.compacted {
        return (res, false);
    }
    let out = &res.history;
    let kept: HashSet<&MessageId> = out.messages.iter().map(|m| m.id()).collect();
    let index: HashMap<&MessageId, usize> = conv
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id(), i))
        .collect();
    let Some(at) = out
        .messages
        .iter()
        .position(|m| !index.contains_key(m.id()))
    else {
        return (
            unchanged_with(
                res,
                conv,
                "no clip-archive message in the compacted history",
            ),
            false,
        );
    };
    let Some(last) = (0..conv.messages.len())
        .rev()
        .find(|&i| !kept.contains(conv.messages[i].id()))
    else {
        return (unchanged_with(res, conv, "nothing was folded"), false);
    };
    // The compacted history is the stored one with [at..=last] replaced.
    let tail = &conv.messages[last + 1..];
    let insert_len = out.messages.len().saturating_sub(at + tail.len());
    let same_prefix = out.messages[..at]
        .iter()
        .zip(&conv.messages[..at])
        .all(|(a, b)| a.id() == b.id());
    let same_tail = out.messages[at + insert_len..]
        .iter()
        .zip(tail)
        .all(|(a, b)| a.id() == b.id());
    if !same_prefix || !same_tail || at > last {
        return (
            unchanged_with(
                res,
                conv,
                "the compacted history is not a fold of the stored one",
            ),
            false,
        );
    }
    let removed: Vec<i64> = stored[at..=last].iter().map(|m| m.key).collect();
    let insert: Vec<String> = out.messages[at..at + insert_len]
        .iter()
        .map(|m| out.message_json(m))
        .collect();
    if let Err(e) = persistence.fold(id, &removed, &insert) {
        let mut r = unchanged_with(
            res,
            conv,
            "the batches are archived; the next compaction of this conversation deletes the folded messages",
        );
        let e = CompactionError::from(e);
        let lost = lost_race(&e);
        r.error = Some(e);
        return (r, lost);
    }
    (res, false)
}

fn unchanged_with(res: CompactionResult, conv: &Conversation, why: &str) -> CompactionResult {
    let mut r = CompactionResult::unchanged(conv, res.tokens_before);
    r.notes = res.notes;
    r.notes.push(why.to_string());
    r.error = Some(CompactionError::Failed(why.to_string()));
    r
}

/// The conversation kept in `persistence` with its clip-archive message
/// replaced by the originals of every batch of `archive` (oldest first): the
/// messages as they were appended, before any compaction.
pub fn expand_stored(
    conversation_id: &str,
    persistence: &dyn Persistence,
    archive: &dyn BatchArchive,
) -> Result<Vec<String>, CompactionError> {
    let stored = persistence.load(conversation_id)?;
    let conv = parse(&stored)?;
    let mut out = Vec::with_capacity(stored.len());
    let mut expanded = false;
    for (m, s) in conv.messages.iter().zip(&stored) {
        if !expanded && is_clip(m) {
            expanded = true;
            for b in archive.batches(conversation_id)? {
                out.extend(b.originals);
            }
        } else {
            out.push(s.json.clone());
        }
    }
    Ok(out)
}
