//! The layout rules (issue #37), so the house stays walkable:
//!
//! 1. No production file over [`MAX_LINES`] lines. Production lines are a
//!    source file's lines before its trailing inline test module
//!    (`#[cfg(test)]` then `mod NAME {`); test-only files (declared
//!    `#[cfg(test)] mod NAME;`, and everything under their folder) do not
//!    count. Split a long file by what its code does, not by size.
//! 2. No import circle between the modules of a crate: module A naming
//!    `crate::b::...` (or `super::b`) and module B naming A, directly or
//!    through others. A module and its own ancestors or descendants are not
//!    counted (a `mod.rs` uses its children, the children their parent's
//!    items). Only production code counts (test modules and test-only files
//!    may use anything).
//! 3. No test oracle in production code: behind a `#[cfg(test)]` there
//!    stands a module (`mod tests;`, `mod reference;`) or a `use` of one,
//!    never a test-only function, type or impl.
//! 4. No codemap row of ARCHITECTURE.md over [`MAX_ROW`] characters: the
//!    map says what a module is and its invariant; details belong in the
//!    module's own docs.
//! 5. ctxpress's own markers are recognized in one place: production code
//!    outside `ctxpress-core/src/markers.rs` never tests a text's start
//!    against a marker word ([`MARKER_TESTS`]); it asks
//!    `ctxpress_core::markers::written` for the kinds it means.
//!
//! The scans are line and token based (files are rustfmt-formatted).

use super::{read, rel, root, rust_files, source_dirs, test_only_modules};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

/// The most production lines a source file may have.
pub const MAX_LINES: usize = 1_500;

/// The most characters a codemap row's description may have.
const MAX_ROW: usize = 400;

/// Production files over the limit not split yet (paths from the
/// repository root), each with a TODO.
const ALLOWED_LONG: &[&str] = &[];

/// The production part of a file's text: everything before its trailing
/// inline test module (`#[cfg(test)]`, then maybe comments and attributes,
/// then `mod NAME {` at the top level).
fn production(text: &str) -> &str {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut at = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.trim_end() == "#[cfg(test)]" && test_item(&lines[i + 1..]).is_some_and(is_mod_block)
        {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

/// The item an attribute line stands before: the next line that is not a
/// comment or another attribute.
fn test_item<'a>(rest: &[&'a str]) -> Option<&'a str> {
    rest.iter()
        .map(|l| l.trim())
        .find(|l| !l.starts_with("//") && !l.starts_with("#["))
}

/// `mod NAME {` at the top level (maybe `pub(crate)`).
fn is_mod_block(item: &str) -> bool {
    let t = item.trim_start_matches("pub(crate) ");
    t.starts_with("mod ") && t.ends_with('{')
}

/// What may stand behind `#[cfg(test)]` in production code: a module (a
/// `tests` or `reference` file or block) or a `use` of one. A test-only
/// function, type or impl is an oracle in a production file.
fn allowed_test_item(item: &str) -> bool {
    let t = item
        .trim_start_matches("pub(crate) ")
        .trim_start_matches("pub(super) ");
    t.starts_with("mod ") || t.starts_with("use ")
}

/// Every production source file of the workspace with its text: the files
/// under each member's `src/`, less the test-only ones.
fn production_files() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for dir in source_dirs() {
        rust_files(&dir, &mut files);
    }
    let texts: Vec<(PathBuf, String)> = files.into_iter().map(|f| (f.clone(), read(&f))).collect();
    let test_only: Vec<PathBuf> = texts
        .iter()
        .flat_map(|(f, t)| test_only_modules(f, &t.lines().collect::<Vec<_>>()))
        .collect();
    // A test-only module's folder (`tests/` beside `tests.rs` or holding
    // `tests/mod.rs`) is test-only too.
    let test_dirs: Vec<PathBuf> = test_only
        .iter()
        .map(|p| {
            if p.file_name().is_some_and(|n| n == "mod.rs") {
                p.parent().unwrap().to_path_buf()
            } else {
                p.with_extension("")
            }
        })
        .collect();
    let test_only: HashSet<PathBuf> = test_only.into_iter().collect();
    texts
        .into_iter()
        .filter(|(f, _)| !test_only.contains(f) && !test_dirs.iter().any(|d| f.starts_with(d)))
        .collect()
}

#[test]
fn no_production_file_is_over_the_limit() {
    let files = production_files();
    assert!(
        files.len() > 50,
        "found only {} production files",
        files.len()
    );
    let mut long = Vec::new();
    for (f, text) in &files {
        let n = production(text).lines().count();
        let r = rel(f);
        let allowed = ALLOWED_LONG.contains(&r.as_str());
        if n > MAX_LINES && !allowed {
            long.push(format!("{r}: {n} lines"));
        } else if n <= MAX_LINES && allowed {
            eprintln!("tidy: `{r}` is {n} lines now: remove it from ALLOWED_LONG");
        }
    }
    assert!(
        long.is_empty(),
        "production files over {MAX_LINES} lines (split them by what the code does; \
         move test oracles into a `#[cfg(test)] mod reference;` beside them):\n{}",
        long.join("\n")
    );
}

#[test]
fn test_oracles_are_not_in_production_code() {
    let mut found = Vec::new();
    for (f, text) in production_files() {
        let lines: Vec<&str> = production(&text).lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "#[cfg(test)]" {
                continue;
            }
            let item = test_item(&lines[i + 1..]).unwrap_or("");
            if !allowed_test_item(item) {
                found.push(format!("{}:{}: {item}", rel(&f), i + 2));
            }
        }
    }
    assert!(
        found.is_empty(),
        "test-only code in production files (move it into a `#[cfg(test)] mod reference;` \
         or the tests beside the code it checks):\n{}",
        found.join("\n")
    );
}

/// Start tests of ctxpress's marker words that only `core::markers` makes.
const MARKER_TESTS: &[&str] = &[
    "starts_with(\"[summary",
    "starts_with(\"[truncated",
    "starts_with(\"[ctxpress",
    "starts_with(\"[Context Summary",
    "starts_with(\"[session ledger",
];

/// The lines of `code` (comments left out) that test a marker's start
/// themselves, as `(line number, line)`.
fn marker_tests(code: &str) -> Vec<(usize, &str)> {
    code.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| MARKER_TESTS.iter().any(|p| l.contains(p)))
        .map(|(i, l)| (i + 1, l.trim()))
        .collect()
}

#[test]
fn markers_are_recognized_in_one_place() {
    assert_eq!(
        marker_tests("// t.starts_with(\"[summary\")\nlet x = t.starts_with(\"[ctxpress: \");\n")
            .len(),
        1,
        "the scan must see a start test and skip comments"
    );
    let mut found = Vec::new();
    for (f, text) in production_files() {
        let r = rel(&f);
        if r == "crates/ctxpress-core/src/markers.rs" {
            continue;
        }
        for (n, line) in marker_tests(production(&text)) {
            found.push(format!("{r}:{n}: {line}"));
        }
    }
    assert!(
        found.is_empty(),
        "production code that recognizes a ctxpress marker by itself (ask \
         `ctxpress_core::markers::written` for the kinds you mean):\n{}",
        found.join("\n")
    );
}

/// A module's path inside its crate (`["dialect", "shell"]`; the crate
/// root is `[]`).
type Module = Vec<String>;

/// The module a file under `src` is.
fn module_of(src: &Path, file: &Path) -> Module {
    let r = file.strip_prefix(src).expect("the file is under src");
    let mut parts: Vec<String> = r
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| matches!(l.as_str(), "lib" | "main" | "mod"))
    {
        parts.pop();
    }
    parts
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The lower-case path segments that start at `at` (`a::b::` then
/// whatever follows), and the offset after the last `::` read.
fn segments(code: &str, mut at: usize) -> (Vec<String>, usize) {
    let b = code.as_bytes();
    let mut out = Vec::new();
    loop {
        let start = at;
        while at < b.len() && is_ident_byte(b[at]) {
            at += 1;
        }
        let word = &code[start..at];
        let lower = word
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == b'_');
        if word.is_empty() || !lower {
            return (out, start);
        }
        out.push(word.to_string());
        if code[at..].starts_with("::") {
            at += 2;
        } else {
            return (out, at);
        }
    }
}

/// The module paths named in a `{...}` use group starting at `at` (just
/// after the `{`), each with `prefix` before it.
fn group(code: &str, at: usize, prefix: &[String], out: &mut Vec<Module>) {
    let b = code.as_bytes();
    let mut i = at;
    loop {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
            i += 1;
        }
        if i >= b.len() || b[i] == b'}' {
            return;
        }
        let (segs, end) = segments(code, i);
        let mut path = prefix.to_vec();
        path.extend(segs.iter().filter(|s| *s != "self").cloned());
        if code[end..].starts_with('{') {
            group(code, end + 1, &path, out);
            // Skip the nested group.
            let mut depth = 0;
            i = end;
            while i < b.len() {
                match b[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            out.push(path);
            // To the next entry of this group.
            i = end;
            while i < b.len() && b[i] != b',' && b[i] != b'}' {
                i += 1;
            }
        }
    }
}

/// The module paths production code in `text` names through `crate::` or
/// `super::`, as paths from the crate root (`module` is the file's own).
fn references(module: &Module, text: &str) -> Vec<Module> {
    let code: String = production(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for (kw, base) in [
        ("crate::", Vec::new()),
        ("super::", module[..module.len().saturating_sub(1)].to_vec()),
    ] {
        for (at, _) in code.match_indices(kw) {
            if at > 0 && (is_ident_byte(code.as_bytes()[at - 1]) || code[..at].ends_with("::")) {
                continue;
            }
            let after = at + kw.len();
            let (segs, end) = segments(&code, after);
            let mut path = base.clone();
            path.extend(segs);
            if code[end..].starts_with('{') {
                group(&code, end + 1, &path, &mut out);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The import graph of one crate's modules (`files`: its production files,
/// under `src`): each module with the modules it names (neither itself nor
/// an ancestor or descendant).
fn graph(src: &Path, files: &[&(PathBuf, String)]) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules: BTreeSet<Module> = files.iter().map(|(f, _)| module_of(src, f)).collect();
    let mut g = BTreeMap::new();
    for (f, text) in files {
        let m = module_of(src, f);
        let mut to = BTreeSet::new();
        for path in references(&m, text) {
            // The longest prefix that is a module of the crate.
            let Some(target) = (1..=path.len())
                .rev()
                .map(|k| path[..k].to_vec())
                .find(|p| modules.contains(p))
            else {
                continue;
            };
            if target.starts_with(&m) || m.starts_with(&target) {
                continue;
            }
            to.insert(target);
        }
        g.insert(m, to);
    }
    g
}

/// The circles of a graph: its strongly connected components of more than
/// one module (Tarjan's algorithm).
fn circles(g: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        g: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_import_circles_between_modules() {
    let mut found = Vec::new();
    let mut modules = 0;
    let files = production_files();
    for src in source_dirs() {
        let own: Vec<&(PathBuf, String)> =
            files.iter().filter(|(f, _)| f.starts_with(&src)).collect();
        let g = graph(&src, &own);
        modules += g.len();
        for c in circles(&g) {
            let members: BTreeSet<&Module> = c.iter().collect();
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    g[a].iter()
                        .filter(|b| members.contains(b))
                        .map(move |b| format!("{} -> {}", name(a), name(b)))
                })
                .collect();
            found.push(format!("{}: {}", rel(&src), edges.join(", ")));
        }
    }
    assert!(modules > 100, "found only {modules} modules");
    assert!(
        found.is_empty(),
        "modules that import each other (move what both need below them):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_import_scan_sees_what_it_should() {
    let m: Module = vec!["a".into(), "b".into()];
    let text = "\
//! docs naming crate::ignored
use crate::x::{self, Y, z::W, q::{r, s::T}};
use super::sib;
fn f() { crate::y::g(); other_crate::not(); }
#[cfg(test)]
mod tests {
    use crate::only_in_tests;
}
";
    let mut got: Vec<String> = references(&m, text).iter().map(name).collect();
    got.sort();
    assert_eq!(
        got,
        ["a::sib", "x", "x", "x::q::r", "x::q::s", "x::z", "y::g"]
    );
    let g: BTreeMap<Module, BTreeSet<Module>> = [
        (vec!["a".to_string()], [vec!["b".to_string()]].into()),
        (vec!["b".to_string()], [vec!["c".to_string()]].into()),
        (vec!["c".to_string()], [vec!["a".to_string()]].into()),
        (vec!["d".to_string()], [vec!["a".to_string()]].into()),
    ]
    .into();
    assert_eq!(circles(&g).len(), 1);
    assert_eq!(circles(&g)[0].len(), 3);
    assert_eq!(
        production("fn a() {}\n#[cfg(test)]\nmod tests {\n}\n"),
        "fn a() {}\n"
    );
}

/// The description cells of ARCHITECTURE.md's codemap table.
fn codemap_rows() -> Vec<(String, usize)> {
    let doc = read(&root().join("ARCHITECTURE.md"));
    let start = doc
        .find("\n## Codemap")
        .expect("ARCHITECTURE.md has a Codemap section");
    let section = &doc[start + 1..];
    let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
    section[..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let mut cells = l.trim_matches('|').splitn(2, " | ");
            let key = cells.next()?.trim().to_string();
            let text = cells.next()?.trim_end_matches('|').trim();
            Some((key, text.chars().count()))
        })
        .collect()
}

#[test]
fn codemap_rows_are_short() {
    let rows = codemap_rows();
    assert!(rows.len() > 15, "found only {} codemap rows", rows.len());
    let long: Vec<String> = rows
        .iter()
        .filter(|(_, n)| *n > MAX_ROW)
        .map(|(k, n)| format!("{k}: {n} characters"))
        .collect();
    assert!(
        long.is_empty(),
        "codemap rows over {MAX_ROW} characters (say what it is and its invariant; \
         move the details into the module's own docs):\n{}",
        long.join("\n")
    );
}
