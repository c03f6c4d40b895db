//! The information check's term counts: occurrences of each term in the
//! conversation, and the terms of each candidate's text, gathered in one scan.

use ctxpress_core::{Conversation, Role};
use foldhash::{HashMap, HashMapExt};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use crate::candidates::{Candidate, InputCandidate};
use crate::lines;

/// Occurrences of each term in the conversation, keyed by a 64-bit hash of
/// the term: no copy of a term is made, and a look-up compares one number.
/// (Two terms would have to share all 64 bits to be counted as one.)
#[derive(Default)]
pub(crate) struct TermCounts(
    pub(crate) std::collections::HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    /// The keys of a summary's terms, for [`ToolCompressor::settle`](crate::ToolCompressor::settle): one
    /// buffer for every summary.
    pub(crate) Vec<u64>,
);

/// The hasher of [`TermCounts`]: its keys are hashes already.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in all the same.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The fixed hash of a term (the same in every run, so results are too).
pub(crate) fn term_key(t: &str) -> u64 {
    static STATE: foldhash::quality::FixedState =
        foldhash::quality::FixedState::with_seed(0x6374_7870);
    STATE.hash_one(t)
}

impl TermCounts {
    pub(crate) fn get_key(&self, k: u64) -> u32 {
        self.0.get(&k).copied().unwrap_or(0)
    }
    pub(crate) fn add_key(&mut self, k: u64, n: u32) {
        *self.0.entry(k).or_insert(0) += n;
    }
    /// Count every occurrence of the terms of `local` (a look-up per
    /// distinct term, not per occurrence).
    fn add_local(&mut self, local: &Local) {
        for lt in &local.terms {
            self.add_key(lt.key, lt.n);
        }
    }
    pub(crate) fn sub_key(&mut self, k: u64, n: u32) {
        if let Some(g) = self.0.get_mut(&k) {
            *g = g.saturating_sub(n);
        }
    }
}

/// One text's distinct terms, in order of first appearance: each term's
/// key ([`term_key`]), the byte range of its first occurrence, and how many
/// times it occurs. The text's length tells a changed text from the one
/// scanned.
#[derive(Default)]
pub(crate) struct Local {
    pub(crate) len: usize,
    pub(crate) terms: Vec<LocalTerm>,
}

#[derive(Clone, Copy)]
pub(crate) struct LocalTerm {
    pub(crate) key: u64,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) n: u32,
}

/// Builds [`Local`]s; its index and term list are reused from text to text
/// (each [`Local`] gets a copy of the list, allocated once at its size).
#[derive(Default)]
pub(crate) struct LocalBuilder {
    pub(crate) index: std::collections::HashMap<u64, usize, BuildHasherDefault<KeyHasher>>,
    pub(crate) terms: Vec<LocalTerm>,
}

impl LocalBuilder {
    /// The terms of `text` (as [`lines::for_each_term`] finds them).
    pub(crate) fn scan(&mut self, text: &str, escaped: bool) -> Local {
        self.index.clear();
        self.terms.clear();
        let base = text.as_ptr() as usize;
        let terms = &mut self.terms;
        lines::for_each_term(text, escaped, |t| {
            let key = term_key(t);
            // One probe a term: the slot found is the one filled.
            match self.index.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => {
                    if let Some(lt) = terms.get_mut(*e.get()) {
                        lt.n += 1;
                    }
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    let start = t.as_ptr() as usize - base;
                    e.insert(terms.len());
                    terms.push(LocalTerm {
                        key,
                        start,
                        end: start + t.len(),
                        n: 1,
                    });
                }
            }
        });
        Local {
            len: text.len(),
            terms: self.terms.as_slice().to_vec(),
        }
    }
}

/// The information check's state: the conversation's term counts, and the
/// terms of each candidate's result text (by message index and call id),
/// gathered by the scan that counted them so that
/// [`ToolCompressor::settle`](crate::ToolCompressor::settle) does not scan the text again.
pub(crate) struct Terms<'c> {
    pub(crate) counts: TermCounts,
    pub(crate) locals: HashMap<(usize, &'c str), Local>,
    /// The terms of the content of each write input (by message index and
    /// call slot), found in the raw JSON of the call's arguments, with that
    /// JSON's string (the terms' positions are in it).
    pub(crate) input_locals: HashMap<(usize, usize), (Local, String)>,
}

/// Count the terms of `text` into `counts`.
fn count_terms(counts: &mut TermCounts, text: &str, escaped: bool) {
    lines::for_each_term(text, escaped, |t| counts.add_key(term_key(t), 1));
}

/// Occurrences of every term in the conversation: message text, tool results
/// and tool-call names and (decoded) arguments; with the terms of the result
/// text of each of `cands`, and of the content argument of each of `inputs`
/// (found in the raw JSON of the arguments when it reads the same, so that
/// [`ToolCompressor::settle`](crate::ToolCompressor::settle) does not scan the content again).
pub(crate) fn term_counts<'c>(
    conv: &Conversation,
    cands: &'c [Candidate],
    inputs: &[InputCandidate],
) -> Terms<'c> {
    let wanted_inputs: HashMap<(usize, usize), &InputCandidate> =
        inputs.iter().map(|c| ((c.msg, c.slot), c)).collect();
    let mut input_locals: HashMap<(usize, usize), (Local, String)> = HashMap::new();
    let mut input_builder = LocalBuilder::default();
    let mut wanted: HashMap<usize, Vec<&'c str>> = HashMap::new();
    for c in cands {
        wanted.entry(c.msg).or_default().push(c.call_id.as_str());
    }
    let mut counts = TermCounts::default();
    let mut locals: HashMap<(usize, &'c str), Local> = HashMap::new();
    let mut builder = LocalBuilder::default();
    // The slot for the result answering `id` in message `i`, when a
    // candidate wants it and no earlier result of the message took it.
    let slot = |locals: &HashMap<(usize, &'c str), Local>, i: usize, id: &str| {
        let want = wanted.get(&i)?.iter().copied().find(|w| *w == id)?;
        (!locals.contains_key(&(i, want))).then_some((i, want))
    };
    // A result text: counted, and gathered when a candidate wants it.
    let mut result = |locals: &mut HashMap<(usize, &'c str), Local>,
                      counts: &mut TermCounts,
                      key: Option<(usize, &'c str)>,
                      text: &str| match key {
        Some(k) => {
            let local = builder.scan(text, false);
            counts.add_local(&local);
            locals.insert(k, local);
        }
        None => count_terms(counts, text, false),
    };
    for (i, m) in conv.messages.iter().enumerate() {
        let text = m.text();
        if matches!(m.role(), Role::Tool | Role::Function) {
            // A tool message's text is its one result's text.
            let key = m
                .tool_result_ids()
                .next()
                .and_then(|id| slot(&locals, i, id));
            result(&mut locals, &mut counts, key, &text);
        } else {
            count_terms(&mut counts, &text, false);
            for r in m.tool_results() {
                let key = slot(&locals, i, &r.call_id);
                result(&mut locals, &mut counts, key, &r.text);
            }
        }
        for (j, c) in m.tool_calls().into_iter().enumerate() {
            count_terms(&mut counts, &c.name, false);
            // Raw JSON: escapes separate terms, so no need to decode it.
            let args: &str = &c.arguments;
            let content = wanted_inputs
                .get(&(i, j))
                .filter(|ic| ic.call_id == c.id)
                .and_then(|ic| {
                    // The span the traffic index's scan of these arguments found.
                    let call_args = &ic.calls.get(ic.slot)?.args;
                    let text = call_args.get(&ic.key)?.as_str()?;
                    let span = call_args.string_span(&ic.key)?;
                    let raw = args.get(span.clone())?;
                    lines::decodes_to_same_terms(raw, text).then_some(span)
                });
            let pieces = content.and_then(|span| {
                Some((
                    args.get(..span.start)?,
                    args.get(span.clone())?,
                    args.get(span.end..)?,
                ))
            });
            match pieces {
                Some((head, raw, tail)) => {
                    // The content's terms are those of its raw JSON (see
                    // `decodes_to_same_terms`): counted with the rest, once.
                    count_terms(&mut counts, head, true);
                    let local = input_builder.scan(raw, true);
                    counts.add_local(&local);
                    count_terms(&mut counts, tail, true);
                    input_locals.insert((i, j), (local, raw.to_string()));
                }
                None => count_terms(&mut counts, args, true),
            }
        }
    }
    Terms {
        counts,
        locals,
        input_locals,
    }
}
