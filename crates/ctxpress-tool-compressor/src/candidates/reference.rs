//! The eager version of `ToolCompressor::candidates` (every answered call's
//! display paths and content check worked out at once), kept for the tests
//! it is checked against.

use super::*;

impl ToolCompressor {
    /// [`Self::candidates`] as it was before it deferred the work only a
    /// candidate needs: every answered call's display paths and content
    /// check worked out at once (the reference it is tested against).
    pub(crate) fn candidates_reference(
        &self,
        conv: &Conversation,
    ) -> (Vec<Candidate>, Vec<InputCandidate>, u64) {
        let tail = conv.tail_start(self.cfg.protected_tail);
        let traffic = Traffic::of(conv, &self.table, self.cfg.cwd.as_deref());
        // Every answered call, in order.
        struct Rec {
            msg: usize,
            call_msg: usize,
            slot: usize,
            content_key: Option<String>,
            call_id: String,
            name: String,
            op: Option<Operation>,
            display: Vec<String>,
            failed: bool,
            eligible: bool,
        }
        let mut recs: Vec<Rec> = Vec::new();
        for cr in &traffic.calls {
            let call = traffic.call(cr);
            let Some(r) = cr.result else {
                continue;
            };
            let Some(res) = conv.messages.get(r).and_then(|rm| rm.tool_result(&call.id)) else {
                continue;
            };
            let lead = res.text.trim_start();
            let done = already_done(lead);
            let long_enough = !fewer_chars_than(&res.text, self.cfg.min_chars);
            let args = &call.args;
            let op = call.op.clone();
            let exit_style = op.as_ref().map(|o| o.exit).unwrap_or_default();
            let facts = traffic::result_facts(conv, r, &call.id, &res.text);
            let failed = facts.status(exit_style, &res.text, res.is_error) == Status::Failure;
            let id = call.id.clone();
            let unique = cr.unique;
            let eligible = unique
                && r < tail
                && !conv.is_protected(r)
                && !done
                && long_enough
                && !self.skipped_tool(&call.name)
                && conv.messages.get(r).is_some_and(|m| text_only(m, &id));
            let content_key = (self.cfg.inputs
                && unique
                && cr.msg < tail
                && !conv.is_protected(cr.msg)
                && op.as_ref().is_some_and(|o| o.kind == OpKind::Write)
                && !self.skipped_tool(&call.name))
            .then(|| self.table.find(&call.name))
            .flatten()
            .and_then(|spec| {
                spec.content_args.iter().find(|k| {
                    args.get(k.as_str())
                        .and_then(Value::as_str)
                        .is_some_and(|t| {
                            !already_done(t) && !fewer_chars_than(t, self.cfg.min_chars)
                        })
                })
            })
            .cloned();
            recs.push(Rec {
                msg: r,
                call_msg: cr.msg,
                slot: cr.slot,
                content_key,
                call_id: id,
                name: call.name.clone(),
                display: display_paths(&self.table, &call.name, args, op.as_ref()),
                op,
                failed,
                eligible,
            });
        }
        // The last `keep_last` results stay.
        let keep_from = recs.len().saturating_sub(self.cfg.keep_last);
        // Failures nothing acted on stay.
        let mut later = LaterKeys::default();
        let mut unresolved: HashSet<usize> = HashSet::default();
        // A call's keys are only looked up for the failures before it: the
        // calls before the first failure are skipped.
        let first_failure = recs.iter().position(|r| r.failed).unwrap_or(recs.len());
        for (i, r) in recs.iter().enumerate().skip(first_failure).rev() {
            let keys = act_keys(&r.name, r.op.as_ref());
            let command = command_of(r.op.as_ref());
            if r.failed
                && !keys.iter().any(|k| later.keys.contains(k))
                && !command.is_some_and(|c| later.has_command(c))
            {
                unresolved.insert(i);
            }
            later.add(keys, command);
        }
        // Write inputs: old, successful, of files no recent call touches.
        let mut inputs = Vec::new();
        if self.cfg.inputs {
            let recent: HashSet<&str> = recs
                .iter()
                .skip(keep_from)
                .filter_map(|r| r.op.as_ref())
                .flat_map(|o| o.paths.iter().chain(o.writes.iter()))
                .map(String::as_str)
                .collect();
            for r in recs.iter().take(keep_from) {
                let (Some(key), Some(op)) = (&r.content_key, &r.op) else {
                    continue;
                };
                if r.failed || op.paths.iter().any(|p| recent.contains(p.as_str())) {
                    continue;
                }
                inputs.push(InputCandidate {
                    msg: r.call_msg,
                    slot: r.slot,
                    calls: traffic
                        .message_calls(r.call_msg)
                        .cloned()
                        .unwrap_or_else(|| MessageCalls::from(Vec::new())),
                    call_id: r.call_id.clone(),
                    key: key.clone(),
                    subject: Subject {
                        tool: r.name.clone(),
                        paths: r.display.clone(),
                        command: None,
                        exit: None,
                    },
                });
            }
        }
        let mut kept_errors = 0u64;
        let mut out = Vec::new();
        for (i, r) in recs.into_iter().enumerate() {
            if !r.eligible || i >= keep_from {
                continue;
            }
            if self.cfg.keep_unresolved_errors && unresolved.contains(&i) {
                kept_errors += 1;
                continue;
            }
            let kind = match r.op.as_ref().map(|o| o.kind) {
                Some(OpKind::Read) => Kind::Read,
                Some(OpKind::Write) => Kind::Write,
                Some(OpKind::Edit) => Kind::Edit,
                Some(OpKind::Search) => Kind::Search,
                Some(OpKind::Command) => Kind::Command,
                None => Kind::Other,
            };
            if !self.enabled(kind) {
                continue;
            }
            let command = r.op.as_ref().and_then(|o| o.command.clone()).map(|c| {
                // Search keys start with the tool name; the header names it already.
                match c.strip_prefix(r.name.as_str()) {
                    Some(rest) if kind == Kind::Search => rest.trim().to_string(),
                    _ => c,
                }
            });
            out.push(Candidate {
                msg: r.msg,
                call_id: r.call_id,
                kind,
                subject: Subject {
                    tool: r.name,
                    paths: r.display,
                    command,
                    exit: None,
                },
            });
        }
        (out, inputs, kept_errors)
    }
}
