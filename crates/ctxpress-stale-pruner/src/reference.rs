//! Reference implementations for the tests (the first-written forms the
//! faster code is held to): [`StalePruner::decide_eager`], every record's
//! status worked out before its rules, and [`plan_refs_by_path`] and
//! [`plan_refs_every_hash`], the earlier plans of the read references.

use super::*;

impl StalePruner {
    /// [`StalePruner::decide`] as first written: every record's status
    /// worked out before its rules (the reference the tests hold it to).
    pub(crate) fn decide_eager(&self, conv: &Conversation, recs: &[Rec<'_>]) -> Vec<Option<Rule>> {
        let cfg = &self.cfg;
        let mut out: Vec<Option<Rule>> = vec![None; recs.len()];
        // Walk backwards, remembering what happens later.
        let mut later_modified: HashSet<&str> = HashSet::new();
        let mut later_full_write: HashSet<&str> = HashSet::new();
        let mut later_command: HashSet<(Option<&str>, &str)> = HashSet::new();
        let mut later_family: HashSet<(Option<&str>, String)> = HashSet::new();
        for (i, r) in recs.iter().enumerate().rev() {
            let answered = r.result_msg.is_some();
            let ok = r.succeeded(conv);
            let status = r.status(conv);
            let cwd = r.op.cwd.as_deref();
            let cmd = r.op.command.as_deref();
            if r.mutable {
                let all = |set: &HashSet<&str>, paths: &[String]| {
                    !paths.is_empty() && paths.iter().all(|p| set.contains(p.as_str()))
                };
                let rule = match r.op.kind {
                    OpKind::Read if cfg.stale_reads && all(&later_modified, &r.op.paths) => {
                        Some(Rule::StaleRead)
                    }
                    OpKind::Write
                        if cfg.superseded_edits && ok && all(&later_full_write, &r.op.paths) =>
                    {
                        Some(Rule::SupersededEdit)
                    }
                    OpKind::Edit
                        if cfg.superseded_edits
                            && cfg.partial_edits == PartialEdits::KeepLast
                            && ok
                            && all(&later_modified, &r.op.paths) =>
                    {
                        Some(Rule::SupersededEdit)
                    }
                    OpKind::Command | OpKind::Search
                        if (r.op.kind == OpKind::Command || cfg.stale_searches)
                            && cfg.stale_commands
                            && cmd.is_some_and(|c| later_command.contains(&(cwd, c))) =>
                    {
                        Some(Rule::StaleCommand)
                    }
                    _ => None,
                };
                let rule = rule.or_else(|| {
                    let is_cmd = r.op.kind == OpKind::Command || r.op.is_shell();
                    (cfg.failed_commands
                        && is_cmd
                        && status == Status::Failure
                        && cmd.is_some_and(|c| later_family.contains(&(cwd, command_family(c)))))
                    .then_some(Rule::FailedCommand)
                });
                if let Some(slot) = out.get_mut(i) {
                    *slot = rule;
                }
            }
            if !answered {
                continue;
            }
            // Record this operation for earlier ones.
            if ok {
                for p in r.op.modified_paths() {
                    later_modified.insert(p.as_str());
                }
                if r.op.kind == OpKind::Write {
                    for p in &r.op.paths {
                        later_full_write.insert(p.as_str());
                    }
                }
            }
            if let Some(c) = cmd {
                if matches!(r.op.kind, OpKind::Command | OpKind::Search) {
                    later_command.insert((cwd, c));
                }
                // Families are only looked up by the failed-command rule.
                if cfg.failed_commands && (r.op.kind == OpKind::Command || r.op.is_shell()) {
                    later_family.insert((cwd, command_family(c)));
                }
            }
        }
        out
    }
}

/// [`plan_refs`] before line counts: every op planned in groups of one path
/// (the reference the tests hold it to).
pub(crate) fn plan_refs_by_path<T>(
    ops: &[RefOp<'_>],
    hash: impl FnMut(usize) -> Option<(u64, T)>,
    worth: impl FnMut(&T, &str) -> bool,
) -> Vec<(usize, String)> {
    let keyed: Vec<(usize, &str)> = ops.iter().enumerate().map(|(k, op)| (k, op.path)).collect();
    plan_grouped(ops, &keyed, hash, worth)
}

/// [`plan_refs`] as first written: every op of a path with two or more is
/// fingerprinted (the reference the tests hold it to).
pub(crate) fn plan_refs_every_hash<T>(
    ops: &[RefOp<'_>],
    mut hash: impl FnMut(usize) -> Option<(u64, T)>,
    mut worth: impl FnMut(&T, &str) -> bool,
) -> Vec<(usize, String)> {
    let mut refs = Vec::new();
    let mut known: HashMap<(&str, u64), (&str, &'static str)> = HashMap::new();
    let mut per_path: HashMap<&str, usize> = HashMap::new();
    for op in ops {
        *per_path.entry(op.path).or_default() += 1;
    }
    for (k, op) in ops.iter().enumerate() {
        if per_path.get(op.path).is_none_or(|n| *n < 2) {
            continue;
        }
        if !op.read {
            if let Some((h, _)) = hash(k) {
                known.insert((op.path, h), (op.call_id, "written by"));
            }
            continue;
        }
        let Some((h, result)) = hash(k) else {
            continue;
        };
        if let Some((src, what)) = known.get(&(op.path, h)) {
            let text = reference_text(op.path, what, src);
            if op.mutable && worth(&result, &text) {
                refs.push((k, text));
                continue;
            }
        }
        known.insert((op.path, h), (op.call_id, "returned by"));
    }
    refs
}
