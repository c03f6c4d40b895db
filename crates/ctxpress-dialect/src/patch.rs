//! Codex-style patches (`*** Begin Patch`): the files they touch.

use super::{OpKind, normalize_path};

/// Parse a Codex-style patch: the paths of its `*** Update File:`,
/// `*** Add File:`, `*** Delete File:` and `*** Move to:` headers. The kind is
/// `Edit` when any file is updated in place, else `Write`. `None` when there is
/// no header.
pub fn parse_patch(text: &str, cwd: Option<&str>) -> Option<(OpKind, Vec<String>)> {
    let mut paths: Vec<String> = Vec::new();
    let mut partial = false;
    for line in text.lines() {
        let l = line.trim_start();
        let rest = if let Some(r) = l.strip_prefix("*** Update File:") {
            partial = true;
            r
        } else if let Some(r) = l
            .strip_prefix("*** Add File:")
            .or_else(|| l.strip_prefix("*** Delete File:"))
            .or_else(|| l.strip_prefix("*** Move to:"))
        {
            r
        } else {
            continue;
        };
        let p = normalize_path(rest.trim(), cwd);
        if !p.is_empty() && !paths.contains(&p) {
            paths.push(p);
        }
    }
    if paths.is_empty() {
        return None;
    }
    Some((if partial { OpKind::Edit } else { OpKind::Write }, paths))
}
