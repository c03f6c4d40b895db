//! ctxpress strategy `tool_compressor`: replaces the content of old tool
//! results with short metadata summaries that keep what a model needs
//! (spec 004, "Phase 1: Metadata-Based Tool Compression").
//!
//! Used alone: an old command's long output becomes a `[summary: tool ...]`
//! line block.
//!
//! ```rust
//! use ctxpress_core::{Conversation, Pipeline, StageContext};
//! use serde_json::json;
//! use ctxpress_tool_compressor::{ToolCompressor, ToolCompressorConfig};
//!
//! let mut output: String = (1..=60).map(|i| format!("test case {i} ... ok\n")).collect();
//! output.push_str("test result: ok. 60 passed; 0 failed\n");
//! let text = json!([
//!     {"role": "user", "content": "run the tests"},
//!     {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
//!         "function": {"name": "Bash", "arguments": "{\"command\": \"cargo test\"}"}}]},
//!     {"role": "tool", "tool_call_id": "c1", "content": output},
//!     {"role": "assistant", "content": "All 60 tests pass."},
//! ])
//! .to_string();
//! let mut conv = Conversation::parse(&text)?;
//! let cfg = ToolCompressorConfig {
//!     keep_last: 0,
//!     protected_tail: 0,
//!     ..ToolCompressorConfig::default()
//! };
//! let mut pipeline = Pipeline::new(Vec::new());
//! pipeline.push(Box::new(ToolCompressor::new(cfg)));
//! let report = pipeline.run(&mut conv, &StageContext::default());
//! let summary = conv.messages[2].text();
//! assert!(summary.starts_with("[summary: tool "), "{summary}");
//! assert!(report.chars_after < report.chars_before);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Each result is summarized by the kind of its call, found with the dialect
//! table of `ctxpress_dialect`:
//! - reads: path, line count and range, the outline of the file (its
//!   declarations with line numbers: types, functions, methods, routes,
//!   tests, fields, columns, keys, imports) and the paths, URLs and error
//!   names the rest mentions;
//! - writes and edits: path and the tool's own outcome line, plus errors;
//! - commands and other tools: command, exit status, first and last lines,
//!   error lines and count lines (test summaries, match counts), lines that
//!   differ only in numbers kept once;
//! - searches: match and file counts, the files with their match counts;
//! - with `inputs`, the file content an old write call carries in its
//!   arguments: line count, outline and references, as for a read.
//!
//! With the information check on, a summary ends with a `names:` line: the
//! terms (paths, compound identifiers, versions) of the summarized text found
//! nowhere else in the conversation (up to `max_names`), so dropping the
//! text does not drop them from the conversation.
//!
//! Every summary starts with `[summary: tool ` (the classifier's "already
//! compressed" prefix). Only result text (and with `inputs` the content
//! argument of a write) changes: call ids, pairing, roles
//! and message order stay. Never touched: system messages, the protected
//! tail, the last `keep_last` results, short results, results with non-text
//! parts, failures the agent has not acted on yet (no later call of the same
//! command family, path or tool), and results whose summary would not be
//! shorter by `min_saving`. With a token budget the oldest results are
//! compressed first until the conversation fits.

mod candidates;
mod config;
pub mod lines;
mod structured;
mod subject;
pub mod summary;
mod term_counts;

use ctxpress_core::tokens::count_message;
use ctxpress_core::{
    ConfigError, Conversation, Message, StageContext, StageOutcome, Strategy, StrategyError,
};
use ctxpress_dialect::traffic;
use ctxpress_dialect::{self as dialect, DialectTable, OpKind, Operation};
use ctxpress_text::bytes::{char_count, fewer_chars_than};
use serde_json::Value;
pub use summary::{Kind, Limits, PREFIX, Subject, Summaries, summarize, summarize_input};

use candidates::{Candidate, InputCandidate, MAX_NAME_BYTES, TextCandidate, already_done};
pub use config::ToolCompressorConfig;
use term_counts::{Local, LocalBuilder, TermCounts, Terms, term_counts, term_key};

/// The tool-result compressor.
#[derive(Debug, Clone)]
pub struct ToolCompressor {
    cfg: ToolCompressorConfig,
    table: DialectTable,
}

impl ToolCompressor {
    /// Build from a config.
    pub fn new(cfg: ToolCompressorConfig) -> Self {
        let mut table = DialectTable::builtin();
        table.extend(cfg.dialect.clone());
        ToolCompressor { cfg, table }
    }

    /// The configuration in use.
    pub fn config(&self) -> &ToolCompressorConfig {
        &self.cfg
    }
}

impl Default for ToolCompressor {
    fn default() -> Self {
        Self::new(ToolCompressorConfig::default())
    }
}

fn check(cfg: ToolCompressorConfig) -> Result<ToolCompressor, ConfigError> {
    if !(0.0..=1.0).contains(&cfg.min_saving) {
        return Err(ConfigError::InvalidField {
            stage: None,
            strategy: "tool_compressor".into(),
            field: "min_saving".into(),
            message: format!("must be between 0.0 and 1.0, found {}", cfg.min_saving),
        });
    }
    Ok(ToolCompressor::new(cfg))
}

ctxpress_core::register_strategy!(
    "tool_compressor",
    "replace old tool results with metadata summaries (outline, errors, counts)",
    ToolCompressorConfig,
    check,
    params: &[
        ("min_chars", "Results shorter than this many characters stay verbatim."),
        ("keep_last", "The last this many tool results of the conversation stay verbatim."),
        (
            "protected_tail",
            "The last this many user/assistant messages, and everything after the first of them, are never touched.",
        ),
        (
            "budget_tokens",
            "Target tokens: compress oldest results first and stop once the conversation fits (unset: every eligible result).",
        ),
        (
            "keep_unresolved_errors",
            "Keep failed results verbatim until a later call retries the command family, touches the path, or calls the tool again.",
        ),
        (
            "min_saving",
            "A summary replaces a result only when it saves at least this share of its characters (0.0-1.0).",
        ),
        (
            "chars_per_lost_term",
            "Information check: characters a summary must save per term it drops from the conversation (0 turns it off).",
        ),
        (
            "max_names",
            "With the information check on, most terms found nowhere else listed on a summary's `names:` line (0 lists none).",
        ),
        (
            "inputs",
            "Also summarize the file content old successful write calls carry in their arguments (paths and other arguments stay).",
        ),
        ("reads", "Summarize reads."),
        ("writes", "Summarize write and edit results."),
        ("commands", "Summarize command output."),
        ("searches", "Summarize search output."),
        ("other", "Summarize results of tools the dialect table does not know."),
        (
            "skip_tools",
            "Tool names whose results are never summarized (exact, then ignoring case).",
        ),
        ("max_outline", "Declarations listed in a read's outline."),
        ("max_line_chars", "Characters of one kept line."),
        ("head_lines", "First non-empty lines kept of command and other output."),
        ("tail_lines", "Last non-empty lines kept of command and other output."),
        ("max_error_lines", "Error lines kept per result."),
        ("max_count_lines", "Count / outcome lines kept per result."),
        ("max_list", "Files or paths listed for a search or listing."),
        ("max_refs", "Paths, URLs and error names listed as `refs:` per result."),
        ("cwd", "The session's working directory, when the conversation does not say."),
        ("dialect", "Extra tool dialects, layered over the built-in table."),
    ]
);

/// Counts of one run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Reads summarized.
    pub reads: u64,
    /// Write and edit results summarized.
    pub writes: u64,
    /// Command results summarized.
    pub commands: u64,
    /// Search results summarized.
    pub searches: u64,
    /// Results of other tools summarized.
    pub other: u64,
    /// Write-call inputs (file content in the arguments) summarized.
    pub inputs: u64,
    /// Failed results kept because nothing acted on them yet.
    pub unresolved_errors_kept: u64,
    /// Results kept because their summary would drop too many unique terms.
    pub dense_kept: u64,
    /// Characters removed from result texts.
    pub chars_saved: u64,
}

impl ToolCompressor {
    fn skipped_tool(&self, name: &str) -> bool {
        self.cfg
            .skip_tools
            .iter()
            .any(|t| t == name || t.eq_ignore_ascii_case(name))
    }

    fn enabled(&self, kind: Kind) -> bool {
        match kind {
            Kind::Read => self.cfg.reads,
            Kind::Write | Kind::Edit => self.cfg.writes,
            Kind::Command => self.cfg.commands,
            Kind::Search => self.cfg.searches,
            Kind::Other => self.cfg.other,
        }
    }

    /// Summarize the output of one result sent as user text, as
    /// [`Self::try_one`] does a tool result; the header and whatever
    /// follows the output (an environment block) stay.
    fn try_text(
        &self,
        conv: &mut Conversation,
        c: &TextCandidate,
        sums: &mut Summaries,
        terms: Option<&mut Terms<'_>>,
        ctx: &StageContext,
        measure: bool,
    ) -> Attempt {
        let rewritten = {
            let Some(text) = conv
                .messages
                .get(c.msg)
                .and_then(|m| dialect::text_results::part_text(m, c.part))
            else {
                return Attempt::Skipped;
            };
            let (Some(head), Some(body), Some(rest)) = (
                text.get(..c.body.start),
                text.get(c.body.clone()),
                text.get(c.body.end..),
            ) else {
                return Attempt::Skipped;
            };
            let facts = dialect::ResultFacts::of(body);
            let counts = terms.map(|t| &mut t.counts);
            match self.summary_of(c.kind, &c.subject, &facts, body, sums, None, counts) {
                Ok((s, saved)) => {
                    let sep = if rest.is_empty() || s.ends_with('\n') {
                        ""
                    } else {
                        "\n\n"
                    };
                    let saved = saved.saturating_sub(sep.len());
                    (format!("{head}{s}{sep}{rest}"), saved)
                }
                Err(a) => return a,
            }
        };
        let (new_text, saved) = rewritten;
        edit(conv, c.msg, ctx, measure, saved, |m| {
            m.set_text_part(c.part, new_text)
        })
    }

    /// The argument of write call `call` holding content worth summarizing
    /// (a string, not already a summary, long enough), by the table's
    /// content arguments in order.
    fn content_key<'t>(&'t self, call: &traffic::ParsedCall) -> Option<&'t String> {
        self.table.find(&call.name)?.content_args.iter().find(|k| {
            call.args
                .get(k.as_str())
                .and_then(Value::as_str)
                .is_some_and(|t| !already_done(t) && !fewer_chars_than(t, self.cfg.min_chars))
        })
    }

    /// Summarize one candidate. With `terms`, apply the information check
    /// and keep the term counts up to date.
    fn try_one(
        &self,
        conv: &mut Conversation,
        c: &Candidate,
        sums: &mut Summaries,
        terms: Option<&mut Terms<'_>>,
        ctx: &StageContext,
        measure: bool,
    ) -> Attempt {
        // The result text is borrowed from the conversation (not copied)
        // until the summary is settled.
        let summarized = {
            let Some(m) = conv.messages.get(c.msg) else {
                return Attempt::Skipped;
            };
            let Some(res) = m.tool_result(&c.call_id) else {
                return Attempt::Skipped;
            };
            let text: &str = &res.text;
            let facts = traffic::result_facts(conv, c.msg, &c.call_id, text);
            // Tried once, before its result changes: the scan's record of
            // the text's terms still holds.
            let (counts, locals) = match terms {
                Some(Terms { counts, locals, .. }) => (Some(counts), Some(&*locals)),
                None => (None, None),
            };
            let local = locals
                .and_then(|l| l.get(&(c.msg, c.call_id.as_str())))
                .filter(|l| l.len == text.len())
                .map(|l| (l, text));
            self.summary_of(c.kind, &c.subject, &facts, text, sums, local, counts)
        };
        let (s, saved) = match summarized {
            Ok(x) => x,
            Err(a) => return a,
        };
        edit(conv, c.msg, ctx, measure, saved, |m| {
            m.set_tool_result_text(&c.call_id, s)
        })
    }

    /// The settled summary of result `text` (of a call of `kind` on
    /// `subject`, with `facts`) and the characters it saves: reads,
    /// commands and searches summarize their payload, under a subject that
    /// states the exit code. See [`Self::settle`] for `local` and `counts`.
    #[allow(clippy::too_many_arguments)]
    fn summary_of(
        &self,
        kind: Kind,
        subject: &Subject,
        facts: &dialect::ResultFacts,
        text: &str,
        sums: &mut Summaries,
        local: Option<(&Local, &str)>,
        counts: Option<&mut TermCounts>,
    ) -> Result<(String, usize), Attempt> {
        // The subject with the exit code: copied only when it has one.
        let subject = if facts.exit_code == subject.exit {
            std::borrow::Cow::Borrowed(subject)
        } else {
            let mut s = subject.clone();
            s.exit = facts.exit_code;
            std::borrow::Cow::Owned(s)
        };
        let body = if matches!(kind, Kind::Read | Kind::Command | Kind::Search) {
            facts.payload(text)
        } else {
            text
        };
        let mut s = sums.summarize(kind, &subject, body);
        self.settle(text, local, &mut s, counts)
            .map(|saved| (s, saved))
    }

    /// Summarize the content argument of one write call, as [`Self::try_one`]
    /// does a result.
    fn try_input(
        &self,
        conv: &mut Conversation,
        c: &InputCandidate,
        sums: &mut Summaries,
        terms: Option<&mut Terms<'_>>,
        ctx: &StageContext,
        measure: bool,
    ) -> Attempt {
        let Some(m) = conv.messages.get(c.msg) else {
            return Attempt::Skipped;
        };
        // The call's arguments as the traffic index parsed them (the stage
        // changes no other argument of a call, nor the order of calls).
        let Some(call) = c.calls.get(c.slot).filter(|call| call.id == c.call_id) else {
            return Attempt::Skipped;
        };
        if m.tool_calls().get(c.slot).is_none_or(|x| x.id != c.call_id) {
            return Attempt::Skipped;
        }
        let Some(text) = call.args.get(&c.key).and_then(Value::as_str) else {
            return Attempt::Skipped;
        };
        let mut s = sums.summarize_input(&c.subject, text);
        let (local, counts) = match terms {
            Some(Terms {
                counts,
                input_locals,
                ..
            }) => (
                input_locals
                    .get(&(c.msg, c.slot))
                    .map(|(l, raw)| (l, raw.as_str())),
                Some(counts),
            ),
            None => (None, None),
        };
        let saved = match self.settle(text, local, &mut s, counts) {
            Ok(n) => n,
            Err(a) => return a,
        };
        let size_before = m.size();
        edit(conv, c.msg, ctx, measure, saved, |m| {
            // Re-serialized arguments must not come out longer anywhere.
            let original = m.clone();
            let done = m.set_tool_call_arg_at(c.slot, &c.key, &s, call.args.value())
                && m.size() < size_before;
            if !done {
                *m = original;
            }
            done
        })
    }

    /// Finish the summary `s` of `text`. With the information check
    /// (`terms`), append the `names:` line (the terms only `text` holds, up
    /// to `max_names`), reject a summary that would still drop too many, and
    /// update the term counts. Returns the characters saved, or why not.
    ///
    /// `local`, when given, holds the terms of `text`, found earlier, with
    /// the string their positions are in (`text` or its raw JSON).
    fn settle(
        &self,
        text: &str,
        local: Option<(&Local, &str)>,
        s: &mut String,
        terms: Option<&mut TermCounts>,
    ) -> Result<usize, Attempt> {
        let before = char_count(text);
        let max_after = ((before as f64) * (1.0 - self.cfg.min_saving)).floor() as usize;
        // The `names:` line only makes the summary longer: one already too
        // long without it is rejected before the terms are looked at.
        let bare = char_count(s);
        if bare >= before || bare > max_after {
            return Err(Attempt::Skipped);
        }
        let Some(global) = terms else {
            let after = s.chars().count();
            if after >= before || after > max_after {
                return Err(Attempt::Skipped);
            }
            return Ok(before - after);
        };
        // The keys of the bare summary's terms, found once: the `names:`
        // line is scanned on its own at the end (a line break ends every
        // term). Sorted: looked up by bisection, and each key counted once
        // with its number of occurrences (the order of the additions does
        // not matter).
        let mut bare_terms = std::mem::take(&mut global.1);
        bare_terms.clear();
        lines::for_each_term(s, false, |t| bare_terms.push(term_key(t)));
        bare_terms.sort_unstable();
        let scanned;
        let (local, source) = match local {
            Some(l) => l,
            None => {
                scanned = LocalBuilder::default().scan(text, false);
                (&scanned, text)
            }
        };
        let mut names: Vec<&str> = Vec::new();
        let mut lost = 0usize;
        for lt in &local.terms {
            let total = global.get_key(lt.key);
            if total.saturating_sub(lt.n) != 0 || bare_terms.binary_search(&lt.key).is_ok() {
                continue;
            }
            let t = source.get(lt.start..lt.end).unwrap_or("");
            if names.len() < self.cfg.max_names && t.len() <= MAX_NAME_BYTES {
                names.push(t);
            } else {
                lost += 1;
            }
        }
        let bare_len = s.len();
        if !names.is_empty() {
            s.push_str("\nnames: ");
            for (k, name) in names.iter().enumerate() {
                if k > 0 {
                    s.push_str(", ");
                }
                s.push_str(name);
            }
        }
        // The bare summary's characters were counted above.
        let after = bare + s.get(bare_len..).map_or(0, |line| line.chars().count());
        let verdict = if after >= before || after > max_after {
            Err(Attempt::Skipped)
        } else if (before - after) < lost.saturating_mul(self.cfg.chars_per_lost_term) {
            Err(Attempt::Dense)
        } else {
            Ok(())
        };
        if let Err(a) = verdict {
            global.1 = bare_terms;
            return Err(a);
        }
        for lt in &local.terms {
            global.sub_key(lt.key, lt.n);
        }
        for same in bare_terms.chunk_by(|a, b| a == b) {
            if let Some(&k) = same.first() {
                global.add_key(k, u32::try_from(same.len()).unwrap_or(u32::MAX));
            }
        }
        global.1 = bare_terms;
        if let Some(names_line) = s.get(bare_len..) {
            lines::for_each_term(names_line, false, |t| global.add_key(term_key(t), 1));
        }
        Ok(before - after)
    }

    /// Summarize eligible results of `conv` in place and return the counts.
    ///
    /// Without a budget (`budget_tokens`, else the run's budget) every
    /// eligible result that passes the information check is summarized. With
    /// one, results are taken oldest first until the conversation fits;
    /// results that fail the information check come last, again oldest
    /// first, only if the others were not enough.
    pub fn compress(&self, conv: &mut Conversation, ctx: &StageContext) -> Counts {
        let mut counts = Counts::default();
        let (cands, inputs, kept_errors) = self.candidates(conv);
        let texts = self.text_candidates(conv);
        counts.unresolved_errors_kept = kept_errors;
        let budget = self.cfg.budget_tokens.or(ctx.budget);
        let mut total = match budget {
            Some(_) => ctx.tokens(conv),
            None => 0,
        };
        if budget.is_some_and(|b| total <= b) {
            return counts;
        }
        // One conversation's summaries: files read again share the work.
        let mut sums = Summaries::new(self.cfg.limits());
        let mut terms =
            (self.cfg.chars_per_lost_term > 0).then(|| term_counts(conv, &cands, &inputs));
        // Results (tool messages and blocks, and those sent as user text)
        // oldest first, then write inputs oldest first.
        let mut results: Vec<Item<'_>> = cands.iter().map(Item::Result).collect();
        if !texts.is_empty() {
            results.extend(texts.iter().map(Item::Text));
            results.sort_by_key(Item::msg);
        }
        let items = results.into_iter().chain(inputs.iter().map(Item::Input));
        let mut dense: Vec<Item<'_>> = Vec::new();
        let mut fits = false;
        for item in items {
            match self.try_item(conv, item, &mut sums, terms.as_mut(), ctx, budget.is_some()) {
                Attempt::Applied { saved, tokens } => {
                    counts.record(item, saved);
                    if let (Some(b), Some((tb, ta))) = (budget, tokens) {
                        total = (total + ta).saturating_sub(tb);
                        if total <= b {
                            fits = true;
                            break;
                        }
                    }
                }
                Attempt::Dense => dense.push(item),
                Attempt::Skipped => {}
            }
        }
        if let (Some(b), false) = (budget, fits) {
            // Over budget still: the dense ones too, in the same order.
            let mut rest = dense.into_iter();
            for item in rest.by_ref() {
                if let Attempt::Applied { saved, tokens } =
                    self.try_item(conv, item, &mut sums, None, ctx, true)
                {
                    counts.record(item, saved);
                    if let Some((tb, ta)) = tokens {
                        total = (total + ta).saturating_sub(tb);
                    }
                    if total <= b {
                        break;
                    }
                }
            }
            counts.dense_kept = rest.count() as u64;
        } else {
            counts.dense_kept = dense.len() as u64;
        }
        counts
    }

    fn try_item(
        &self,
        conv: &mut Conversation,
        item: Item<'_>,
        sums: &mut Summaries,
        terms: Option<&mut Terms<'_>>,
        ctx: &StageContext,
        measure: bool,
    ) -> Attempt {
        match item {
            Item::Result(c) => self.try_one(conv, c, sums, terms, ctx, measure),
            Item::Text(c) => self.try_text(conv, c, sums, terms, ctx, measure),
            Item::Input(c) => self.try_input(conv, c, sums, terms, ctx, measure),
        }
    }
}

/// The summary kind of a call's operation.
fn kind_of(op: Option<&Operation>) -> Kind {
    match op.map(|o| o.kind) {
        Some(OpKind::Read) => Kind::Read,
        Some(OpKind::Write) => Kind::Write,
        Some(OpKind::Edit) => Kind::Edit,
        Some(OpKind::Search) => Kind::Search,
        Some(OpKind::Command) => Kind::Command,
        None => Kind::Other,
    }
}

/// Change message `msg` with `change` (false: nothing changed) and report
/// it, with its tokens before and after when `measure`.
fn edit(
    conv: &mut Conversation,
    msg: usize,
    ctx: &StageContext,
    measure: bool,
    saved: usize,
    change: impl FnOnce(&mut Message) -> bool,
) -> Attempt {
    let Some(m) = conv.messages.get_mut(msg) else {
        return Attempt::Skipped;
    };
    let tokens_before = measure.then(|| count_message(ctx.counter.as_ref(), m));
    if !change(m) {
        return Attempt::Skipped;
    }
    let tokens = tokens_before.map(|tb| (tb, count_message(ctx.counter.as_ref(), m)));
    Attempt::Applied {
        saved: saved as u64,
        tokens,
    }
}

/// A tool result or a write input to summarize.
#[derive(Clone, Copy)]
enum Item<'a> {
    Result(&'a Candidate),
    Text(&'a TextCandidate),
    Input(&'a InputCandidate),
}

impl Item<'_> {
    /// The message it changes.
    fn msg(&self) -> usize {
        match self {
            Item::Result(c) => c.msg,
            Item::Text(c) => c.msg,
            Item::Input(c) => c.msg,
        }
    }
}

/// What happened to one candidate.
enum Attempt {
    /// Summarized; `tokens` is (before, after) when measured.
    Applied {
        saved: u64,
        tokens: Option<(usize, usize)>,
    },
    /// Kept: the summary would drop too many unique terms.
    Dense,
    /// Kept: not found, or the summary is not short enough.
    Skipped,
}

impl Counts {
    fn record(&mut self, item: Item<'_>, saved: u64) {
        self.chars_saved += saved;
        let kind = match item {
            Item::Result(c) => c.kind,
            Item::Text(c) => c.kind,
            Item::Input(_) => {
                self.inputs += 1;
                return;
            }
        };
        match kind {
            Kind::Read => self.reads += 1,
            Kind::Write | Kind::Edit => self.writes += 1,
            Kind::Command => self.commands += 1,
            Kind::Search => self.searches += 1,
            Kind::Other => self.other += 1,
        }
    }
}

impl Strategy for ToolCompressor {
    fn name(&self) -> &str {
        "tool_compressor"
    }

    fn apply(
        &self,
        conv: &mut Conversation,
        ctx: &StageContext,
    ) -> Result<StageOutcome, StrategyError> {
        let c = self.compress(conv, ctx);
        let mut out = StageOutcome::default();
        out.count("reads", c.reads);
        out.count("writes", c.writes);
        out.count("commands", c.commands);
        out.count("searches", c.searches);
        out.count("other", c.other);
        out.count("inputs", c.inputs);
        out.count("unresolved_errors_kept", c.unresolved_errors_kept);
        out.count("dense_kept", c.dense_kept);
        out.count("chars_saved", c.chars_saved);
        out.notes.push(format!(
            "Summarized: {} reads, {} writes/edits, {} commands, {} searches, {} other, {} write inputs; kept {} unresolved errors, {} dense results; {} chars saved",
            c.reads,
            c.writes,
            c.commands,
            c.searches,
            c.other,
            c.inputs,
            c.unresolved_errors_kept,
            c.dense_kept,
            c.chars_saved
        ));
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
