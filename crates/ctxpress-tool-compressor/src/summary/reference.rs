//! Reference implementations for the tests of the summaries (the plain
//! forms the faster code is compared with): [`group_refs`], which
//! [`super::push_grouped_refs`] is held to.

/// References with three or more files of one directory written once as
/// `dir/{a, b, c}`; others as they are, in order of first appearance (the
/// reference of [`super::push_grouped_refs`]).
pub(super) fn group_refs(refs: &[&str]) -> Vec<String> {
    let split = |r: &str| -> Option<(usize, usize)> {
        if r.contains("://") {
            return None;
        }
        let cut = r.rfind(['/', '\\'])?;
        Some((cut, r.len()))
    };
    let mut dirs: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut order: Vec<Result<usize, &str>> = Vec::new();
    for r in refs {
        match split(r) {
            Some((cut, _)) => {
                let (dir, name) = (r.get(..=cut).unwrap_or(r), r.get(cut + 1..).unwrap_or(""));
                match dirs.iter().position(|(d, _)| *d == dir) {
                    Some(k) => {
                        if let Some((_, names)) = dirs.get_mut(k) {
                            names.push(name);
                        }
                    }
                    None => {
                        order.push(Ok(dirs.len()));
                        dirs.push((dir, vec![name]));
                    }
                }
            }
            None => order.push(Err(r)),
        }
    }
    let mut out = Vec::new();
    for o in order {
        match o {
            Err(r) => out.push(r.to_string()),
            Ok(k) => {
                let Some((dir, names)) = dirs.get(k) else {
                    continue;
                };
                if names.len() >= 3 {
                    out.push(format!("{dir}{{{}}}", names.join(", ")));
                } else {
                    out.extend(names.iter().map(|n| format!("{dir}{n}")));
                }
            }
        }
    }
    out
}
