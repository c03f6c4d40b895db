//! Reading an earlier note back: a ledger note (or a compaction's clip) that
//! is itself moved out again becomes ledger items, which the newer messages
//! then update (a later success resolves a carried error, a carried file
//! read again counts once more).

use super::*;

impl Ledger {
    /// A compaction's `[Context Summary` message moved out: its ledger note
    /// read back as a note (see `carry`), and the facts of its last
    /// task-state block (an older clip's) (`[task state]` ... `[/task state]`, the
    /// format `ctxpress_compactor::state` documents) become ledger items,
    /// below what newer messages say, and the names of its batch summaries
    /// count as the assistant's.
    pub(super) fn read_clip(&mut self, text: &str, pos: usize) {
        // A clip that shows a ledger note (the compactor's own): read back
        // as a note, the rest as the clip.
        let marker = format!("\n{HEAD}");
        let rest;
        let text = match text.find(&marker) {
            Some(i) => {
                let note = &text[i + 1..];
                let end = note.find(END).map_or(note.len(), |e| e + END.len());
                self.carry(&note[..end], pos);
                rest = format!("{}{}", &text[..i], &note[end..]);
                rest.as_str()
            }
            None => text,
        };
        const BEGIN: &str = "[task state]";
        const STOP: &str = "[/task state]";
        let block = text.rfind(BEGIN).map(|a| {
            let rest = &text[a + BEGIN.len()..];
            let end = rest.find(STOP).unwrap_or(rest.len());
            (a, &rest[..end], a + BEGIN.len() + end + STOP.len())
        });
        let w = recency(pos);
        if let Some((_, lines, _)) = block {
            for l in lines.lines() {
                let Some((key, val)) = l.split_once(": ") else {
                    continue;
                };
                let val = val.trim();
                match key {
                    "first request" if self.first_request.is_none() => {
                        self.first_request = Some(clip_line(val, REQUEST_CHARS));
                    }
                    "latest request" => self.latest_request = Some(clip_line(val, REQUEST_CHARS)),
                    "read" | "modified" => {
                        let f = self.file(val);
                        f.score += 3.0 * w;
                        if key == "read" {
                            f.reads += 1;
                            f.last_action = "read";
                        } else {
                            f.edits += 1;
                            f.last_action = "edited";
                        }
                    }
                    "command" => {
                        let Some((status, cmd)) = val.split_once(": ") else {
                            continue;
                        };
                        let e = self
                            .commands
                            .entry(clip_line(cmd, VALUE_CHARS))
                            .or_default();
                        e.runs += 1;
                        e.score += 3.0 * w;
                        e.status = match status {
                            "ok" => "ok",
                            "failed" => "failed",
                            _ => "no result yet",
                        };
                    }
                    "error" => {
                        let (k, line) = val.split_once('\t').unwrap_or((val, ""));
                        let line = clip_line(line, VALUE_CHARS);
                        let k = match k.strip_prefix("command ") {
                            Some(c) => {
                                let e = self.commands.entry(clip_line(c, VALUE_CHARS)).or_default();
                                e.error = Some(line.clone());
                                format!("command `{c}`")
                            }
                            None => {
                                if let Some(p) = k.strip_prefix("file ") {
                                    self.file(p).last_error = Some(line.clone());
                                }
                                k.to_string()
                            }
                        };
                        set_pair(&mut self.errors, &k, &line);
                    }
                    "open" => push_unique(&mut self.open, val),
                    // Credentials (`keep:`) are never listed.
                    _ => {}
                }
            }
        }
        // The batch summaries, without their first line and the block.
        let prose = match block {
            Some((a, _, b)) => format!("{}{}", &text[..a], text.get(b..).unwrap_or("")),
            None => text.to_string(),
        };
        let prose = prose.split_once('\n').map_or("", |(_, rest)| rest);
        self.terms_of(prose, &Place::Assistant, 1.0, false);
    }

    /// An earlier note moved out again (the anchored update): its lines
    /// become items again, so what newer messages say about the same file,
    /// command or name updates them in place (a later success resolves a
    /// carried error; a carried file read again counts once more). Its
    /// message counts add to the header's; lines of another shape (an older
    /// note's `from an earlier ledger` section) are carried as written.
    pub(super) fn carry(&mut self, text: &str, pos: usize) {
        let w = recency(pos);
        let mut lines = text.lines();
        if let Some(counts) = lines.next().and_then(note_counts) {
            // `add` counted the note as one message.
            self.messages += counts[0].saturating_sub(1);
            for (r, c) in self.roles.iter_mut().zip(&counts[1..]) {
                *r += c;
            }
        }
        let mut section = "";
        for l in lines {
            // A line's own recall handle, at its end, is not carried.
            let l = l.trim();
            let l = match l.len().checked_sub(ctxpress_core::handle::DIGITS + 3) {
                Some(at)
                    if l.is_char_boundary(at)
                        && l[at..].starts_with(" #h")
                        && ctxpress_core::handle::Handle::parse(&l[at + 1..]).is_some() =>
                {
                    &l[..at]
                }
                _ => l,
            };
            if l == END {
                break;
            }
            if let Some(s) = l.strip_prefix("# ") {
                section = s;
                continue;
            }
            let Some(item) = l.strip_prefix("- ") else {
                continue;
            };
            match section {
                "task" => {
                    if let Some(r) = item.strip_prefix("first request: ") {
                        if self.first_request.is_none() {
                            self.first_request = Some(unquote(r).to_string());
                        }
                    } else if let Some(r) = item.strip_prefix("latest request: ") {
                        self.latest_request = Some(unquote(r).to_string());
                    } else if let Some(n) = item.strip_prefix("the user named: ") {
                        self.carry_names(n, &Place::User, 4.0);
                    }
                }
                "open todos" => push_unique(&mut self.open, item),
                "files" => self.carry_file(item, w),
                "commands" => self.carry_command(item, w),
                "other tools" => {
                    let (head, names) = split_names(item, ": values in its calls and results: ");
                    let (tool, err) = match head.split_once(" (unresolved error: ") {
                        Some((t, e)) => (t, Some(e.strip_suffix(')').unwrap_or(e))),
                        None => (head, None),
                    };
                    let Some(tool) = tool.strip_prefix("tool ") else {
                        continue;
                    };
                    if let Some(e) = err {
                        set_pair(&mut self.errors, &format!("tool {tool}"), e);
                    }
                    self.carry_names(names, &Place::Tool(tool.to_string()), 1.0);
                }
                "decisions and findings (assistant)" => {
                    match item.strip_prefix("the assistant named: ") {
                        Some(n) => self.carry_names(n, &Place::Assistant, 2.0),
                        None => push_unique(&mut self.decisions, item),
                    }
                }
                _ => push_unique(&mut self.carried, item),
            }
        }
        let n = self.decisions.len();
        if n > MAX_DECISIONS {
            self.decisions.drain(..n - MAX_DECISIONS);
        }
    }

    /// A carried `files` line: `PATH: ACTIONS[ (last ACTION)][; unresolved
    /// error: LINE][; names in it: NAMES]`.
    fn carry_file(&mut self, item: &str, w: f64) {
        let (head, names) = split_names(item, "; names in it: ");
        let (head, err) = match head.split_once("; unresolved error: ") {
            Some((h, e)) => (h, Some(e)),
            None => (head, None),
        };
        let Some((path, acts)) = head.rsplit_once(": ") else {
            return;
        };
        let (acts, last) = match acts.rsplit_once(" (last ") {
            Some((a, l)) => (a, action_word(l.trim_end_matches(')'))),
            None => (acts, action_word(acts)),
        };
        let f = self.file(path);
        let mut n = 0;
        for a in acts.split(", ") {
            let (word, count) = match a.rsplit_once(' ') {
                Some((w, c)) if c.ends_with('×') => {
                    (w, c.trim_end_matches('×').parse().unwrap_or(1))
                }
                _ => (a, 1),
            };
            match word {
                "edited" => f.edits += count,
                "written" => f.writes += count,
                "read" => f.reads += count,
                _ => continue,
            }
            n += count;
        }
        if let Some(l) = last {
            f.last_action = l;
        }
        f.score += 3.0 * w * n.max(1) as f64;
        if let Some(e) = err {
            f.last_error = Some(e.to_string());
            set_pair(&mut self.errors, &format!("file {path}"), e);
        }
        self.carry_names(names, &Place::File(path.to_string()), 1.0);
    }

    /// A carried `commands` line: `` `COMMAND`: STATUS[ (last of N runs)][:
    /// ERROR][; names in its output: NAMES] ``.
    fn carry_command(&mut self, item: &str, w: f64) {
        let (head, names) = split_names(item, "; names in its output: ");
        let Some((cmd, rest)) = head.strip_prefix('`').and_then(|h| h.split_once("`: ")) else {
            return;
        };
        let status = ["no result yet", "failed", "ran", "ok"]
            .into_iter()
            .find(|s| rest.starts_with(s))
            .unwrap_or("ran");
        let mut rest = &rest[status.len().min(rest.len())..];
        let mut runs = 1;
        if let Some(r) = rest.strip_prefix(" (last of ")
            && let Some((n, after)) = r.split_once(" runs)")
        {
            runs = n.parse().unwrap_or(1);
            rest = after;
        }
        let error = rest.strip_prefix(": ").map(str::to_string);
        let e = self.commands.entry(cmd.to_string()).or_default();
        e.runs += runs;
        e.score += 3.0 * w * runs as f64;
        e.status = status;
        e.error.clone_from(&error);
        if let Some(err) = error.filter(|_| status == "failed") {
            set_pair(&mut self.errors, &format!("command `{cmd}`"), &err);
        }
        self.carry_names(names, &Place::Command(cmd.to_string()), 1.0);
    }

    /// The names of a carried line (`` `a`, `b` ``), most used first.
    fn carry_names(&mut self, names: &str, place: &Place, weight: f64) {
        let list: Vec<&str> = names
            .split(", ")
            .filter_map(|n| n.strip_prefix('`')?.strip_suffix('`'))
            .collect();
        let k = list.len().max(1) as f64;
        for (i, n) in list.into_iter().enumerate() {
            // The note's order is its ranking: keep it.
            self.term(n, place, weight * (1.0 + (k - i as f64) / k), false);
        }
    }
}

/// The counts of a note's first line: messages, user, assistant, tool
/// results.
fn note_counts(head: &str) -> Option<[usize; 4]> {
    let rest = head.strip_prefix(HEAD)?.trim_start();
    let (n, rest) = rest.split_once(" earlier messages (")?;
    let (u, rest) = rest.split_once(" user, ")?;
    let (a, rest) = rest.split_once(" assistant, ")?;
    let (t, _) = rest.split_once(" tool results)")?;
    Some([
        n.parse().ok()?,
        u.parse().ok()?,
        a.parse().ok()?,
        t.parse().ok()?,
    ])
}

/// A quoted request without its quotes.
fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
}

/// A line's head and the names after `label` (empty when it has none).
fn split_names<'a>(item: &'a str, label: &str) -> (&'a str, &'a str) {
    match item.rfind(label) {
        Some(i) => (&item[..i], &item[i + label.len()..]),
        None => (item, ""),
    }
}
