//! Printing the note: every line it can hold, ranked ([`Ledger::items`]),
//! and the most detailed note whose tokens fit a limit
//! ([`Ledger::render_within`]), made by dropping the lowest-scored lines and
//! names, never by clipping them.

use super::*;

impl Ledger {
    /// Every line the note can hold, in print order, and the score of
    /// every rank slot (a line's own slot, and one per name).
    fn items(&self) -> (Vec<Item>, Vec<f64>) {
        let mut scores: Vec<f64> = Vec::new();
        let mut slot = |s: f64| {
            scores.push(s);
            scores.len() - 1
        };
        // Each name goes in the line of the place it was used most.
        let mut by_place: HashMap<&Place, Vec<(&str, f64)>> = HashMap::new();
        for (t, e) in &self.terms {
            let Some((p, _, _)) = e
                .places
                .iter()
                .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            else {
                continue;
            };
            if ctxpress_text::secrets::find_secrets(t).is_empty() {
                by_place.entry(p).or_default().push((t.as_str(), e.score));
            }
        }
        for v in by_place.values_mut() {
            v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
            v.truncate(MAX_NAMES);
        }
        let names_of = |p: &Place, slot: &mut dyn FnMut(f64) -> usize| -> Vec<(String, usize)> {
            by_place
                .get(p)
                .map(|v| {
                    v.iter()
                        .map(|(t, s)| (format!("`{t}`"), slot(*s)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut items = Vec::new();
        let push = |items: &mut Vec<Item>,
                    section: &'static str,
                    head: String,
                    label: &str,
                    names: Vec<(String, usize)>,
                    always: bool,
                    slot: usize| {
            items.push(Item {
                section,
                head,
                names_label: label.to_string(),
                names,
                always,
                slot,
                handle: None,
            });
        };
        if let Some(r) = &self.first_request {
            push(
                &mut items,
                "task",
                format!("first request: \"{r}\""),
                "",
                Vec::new(),
                true,
                usize::MAX,
            );
        }
        if let Some(r) = &self.latest_request
            && self.first_request.as_ref() != Some(r)
        {
            push(
                &mut items,
                "task",
                format!("latest request: \"{r}\""),
                "",
                Vec::new(),
                true,
                usize::MAX,
            );
        }
        let user = names_of(&Place::User, &mut slot);
        if !user.is_empty() {
            let s = slot(0.0);
            push(
                &mut items,
                "task",
                "the user named".into(),
                ": ",
                user,
                false,
                s,
            );
        }
        for o in &self.open {
            let s = slot(1e6);
            push(
                &mut items,
                "open todos",
                o.clone(),
                "",
                Vec::new(),
                false,
                s,
            );
        }
        let open_error = |k: &str| self.errors.iter().find(|(x, _)| x == k).map(|(_, e)| e);
        let mut files: Vec<(&String, &FileEntry)> = self.files.iter().collect();
        files.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(b.0)));
        for (p, f) in files {
            let mut head = format!("{p}: ");
            let mut acts = Vec::new();
            for (n, w) in [
                (f.edits, "edited"),
                (f.writes, "written"),
                (f.reads, "read"),
            ] {
                match n {
                    0 => {}
                    1 => acts.push(w.to_string()),
                    n => acts.push(format!("{w} {n}×")),
                }
            }
            if acts.is_empty() {
                acts.push(f.last_action.to_string());
            }
            head.push_str(&acts.join(", "));
            if acts.len() > 1 {
                let _ = write!(head, " (last {})", f.last_action);
            }
            let open = open_error(&format!("file {p}"));
            if let Some(e) = open {
                let _ = write!(head, "; unresolved error: {e}");
            }
            let names = names_of(&Place::File(p.clone()), &mut slot);
            let s = slot(f.score + if open.is_some() { OPEN_ERROR } else { 0.0 });
            push(
                &mut items,
                "files",
                head,
                "; names in it: ",
                names,
                false,
                s,
            );
            if let Some(it) = items.last_mut() {
                it.handle.clone_from(&f.detail.handle);
            }
        }
        let mut cmds: Vec<(&String, &CommandEntry)> = self.commands.iter().collect();
        cmds.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(b.0)));
        for (c, e) in cmds {
            let mut head = format!("`{c}`: {}", e.status);
            if e.runs > 1 {
                let _ = write!(head, " (last of {} runs)", e.runs);
            }
            if let Some(err) = &e.error {
                let _ = write!(head, ": {err}");
            }
            let names = names_of(&Place::Command(c.clone()), &mut slot);
            let open = open_error(&format!("command `{c}`")).is_some();
            let s = slot(e.score + if open { OPEN_ERROR } else { 0.0 });
            push(
                &mut items,
                "commands",
                head,
                "; names in its output: ",
                names,
                false,
                s,
            );
            if let Some(it) = items.last_mut() {
                it.handle.clone_from(&e.detail.handle);
            }
        }
        let mut tools: Vec<&Place> = by_place
            .keys()
            .copied()
            .filter(|p| matches!(p, Place::Tool(_)))
            .collect();
        tools.sort();
        for p in tools {
            let Place::Tool(t) = p else { continue };
            let key = format!("tool {t}");
            let mut head = format!("tool {t}");
            let open = open_error(&key);
            if let Some(e) = open {
                let _ = write!(head, " (unresolved error: {e})");
            }
            let names = names_of(p, &mut slot);
            let best = by_place.get(p).and_then(|v| v.first()).map_or(0.0, |x| x.1);
            let s = slot(best + if open.is_some() { OPEN_ERROR } else { 0.0 });
            push(
                &mut items,
                "other tools",
                head,
                ": values in its calls and results: ",
                names,
                false,
                s,
            );
        }
        let n = self.decisions.len();
        for (i, d) in self.decisions.iter().enumerate() {
            let s = slot(5.0 + (i + 1) as f64 / (n + 1) as f64);
            push(
                &mut items,
                "decisions and findings (assistant)",
                d.clone(),
                "",
                Vec::new(),
                false,
                s,
            );
        }
        let asst = names_of(&Place::Assistant, &mut slot);
        if !asst.is_empty() {
            let s = slot(0.0);
            push(
                &mut items,
                "decisions and findings (assistant)",
                "the assistant named".into(),
                ": ",
                asst,
                false,
                s,
            );
        }
        for (i, l) in self.carried.iter().enumerate() {
            let s = slot(1.0 / (1.0 + i as f64));
            let l = l.strip_prefix("- ").unwrap_or(l).to_string();
            push(
                &mut items,
                "from an earlier ledger",
                l,
                "",
                Vec::new(),
                false,
                s,
            );
        }
        (items, scores)
    }

    /// The note with the `k` best-scored slots, with the header saying how
    /// many messages it stands for.
    fn render(&self, items: &[Item], order: &[usize], k: usize) -> String {
        let keep: HashSet<usize> = order.iter().take(k).copied().collect();
        let shown = |it: &Item| {
            it.always || keep.contains(&it.slot) || it.names.iter().any(|(_, j)| keep.contains(j))
        };
        let line_handles = items.iter().any(|it| it.handle.is_some() && shown(it));
        let mut out = String::new();
        let [u, a, t] = self.roles;
        let _ = match &self.handle {
            Some(h) => write!(
                out,
                "{HEAD} {} earlier messages ({u} user, {a} assistant, {t} tool results) moved to the archive as {h}; recall {h} gives them back{}. What they held, most used first:",
                self.messages,
                if line_handles {
                    ", and a line's own handle its latest call and result"
                } else {
                    ""
                }
            ),
            None => write!(
                out,
                "{HEAD} {} earlier messages ({u} user, {a} assistant, {t} tool results) moved to the archive; `ctxpress expand` restores them. What they held, most used first:",
                self.messages
            ),
        };
        out.push('\n');
        let mut section = "";
        for it in items {
            let names: Vec<&str> = it
                .names
                .iter()
                .filter(|(_, j)| keep.contains(j))
                .map(|(n, _)| n.as_str())
                .collect();
            if !it.always && !keep.contains(&it.slot) && names.is_empty() {
                continue;
            }
            if it.section != section {
                section = it.section;
                let _ = writeln!(out, "# {section}");
            }
            out.push_str("- ");
            out.push_str(&it.head);
            if !names.is_empty() {
                out.push_str(&it.names_label);
                out.push_str(&names.join(", "));
            }
            if let Some(h) = &it.handle {
                let _ = write!(out, " {h}");
            }
            out.push('\n');
        }
        out.push_str(END);
        out
    }

    /// The most detailed note whose tokens (as a user message) stay within
    /// `limit`, with its tokens; the header alone (without the requests)
    /// when not even the requests fit.
    pub fn render_within(&self, limit: usize, counter: &dyn TokenCounter) -> (String, usize) {
        let (items, scores) = self.items();
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
        let n = order.len();
        let cost = |items: &[Item], k: usize| {
            let text = self.render(items, &order, k);
            let probe = Message::text_message(ctxpress_core::MessageId::new(""), "user", &text);
            let t = count_message(counter, &probe);
            (text, t)
        };
        // The lines are chosen without their handles; the handles are
        // written when they fit beside them, so they never cost a line.
        let handles = items.iter().any(|it| it.handle.is_some());
        let mut plain = items;
        let with: Vec<Option<ctxpress_core::handle::Handle>> =
            plain.iter_mut().map(|it| it.handle.take()).collect();
        let dress = |plain: &[Item], k: usize, best: (String, usize)| {
            if !handles {
                return best;
            }
            let items: Vec<Item> = plain
                .iter()
                .zip(&with)
                .map(|(it, h)| Item {
                    handle: h.clone(),
                    ..it.clone()
                })
                .collect();
            let dressed = cost(&items, k);
            if dressed.1 <= limit { dressed } else { best }
        };
        let full = cost(&plain, n);
        if full.1 <= limit {
            return dress(&plain, n, full);
        }
        let (mut lo, mut hi) = (0usize, n);
        let mut best = cost(&plain, 0);
        if best.1 > limit {
            // Not even the requests fit: the header alone.
            let text = self.render(&[], &[], 0);
            let probe = Message::text_message(ctxpress_core::MessageId::new(""), "user", &text);
            let t = count_message(counter, &probe);
            return (text, t);
        }
        // Largest k that fits: the tokens grow with k.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let c = cost(&plain, mid);
            if c.1 <= limit {
                best = c;
                lo = mid;
            } else {
                hi = mid;
            }
        }
        dress(&plain, lo, best)
    }
}

/// One line of the note before selection: its fixed head and its names,
/// each with its rank slot.
#[derive(Clone)]
struct Item {
    section: &'static str,
    head: String,
    names_label: String,
    names: Vec<(String, usize)>,
    always: bool,
    slot: usize,
    /// The recall handle written at the line's end.
    handle: Option<ctxpress_core::handle::Handle>,
}
