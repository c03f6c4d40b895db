//! `expand` matches by meaning (issue #33 item 5), without Python: every
//! corpus file through every preset, with an archive; each output is read
//! into a `serde_json::Value` and written again with its keys sorted
//! (compact, pretty-printed, and with a field added to the envelope), and
//! expands to the input's messages byte for byte (by meaning when
//! compression left the conversation unchanged: nothing was archived for
//! it).
//!
//! A missing corpus prints a SKIP line (and fails when `CI` is set). In a
//! debug build each file is read up to about 1 MB of whole lines;
//! `CTXPRESS_TEST_FULL_CORPUS=1` or a release build reads every line.

use ctxpress::core::archive::MemoryArchive;
use ctxpress::core::canonical;
use ctxpress::{Compressor, Conversation, PRESETS};
use ctxpress_tests::corpus;
use ctxpress_tests::json::sorted_keys;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// The non-blank lines of `f`, capped in a debug build (see the module
/// docs).
fn lines(f: &Path) -> Vec<String> {
    corpus::head(f, 1 << 20)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn messages(c: &Conversation) -> Vec<String> {
    c.messages.iter().map(|m| c.message_json(m)).collect()
}

#[test]
fn outputs_rewritten_by_serde_json_expand_to_the_input() {
    let Some(files) = corpus::files_or_skip() else {
        return;
    };
    let mut compressed = 0;
    for f in &files {
        let lines = lines(f);
        for p in PRESETS {
            let arch = Arc::new(MemoryArchive::new());
            let c = Compressor::preset(p.name)
                .unwrap()
                .with_archive(Some(arch.clone()));
            for (i, line) in lines.iter().enumerate() {
                let what = format!("{} line {} through {}", f.display(), i + 1, p.name);
                let input = Conversation::parse(line).unwrap();
                let mut out = input.clone();
                c.compress(&mut out)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let written = out.to_json_string();
                let changed = written != *line;
                compressed += usize::from(changed);
                let v: Value = serde_json::from_str(&written).unwrap();
                let s = sorted_keys(&v);
                let mut with_field = s.clone();
                with_field["reserialized_by"] = Value::from("serde_json");
                for (how, text) in [
                    ("sorted keys", serde_json::to_string(&s).unwrap()),
                    ("pretty", serde_json::to_string_pretty(&s).unwrap()),
                    (
                        "an added field",
                        serde_json::to_string(&with_field).unwrap(),
                    ),
                ] {
                    let back = ctxpress::expand(&Conversation::parse(&text).unwrap(), &*arch)
                        .unwrap_or_else(|e| panic!("{what} ({how}): {e}"));
                    let (got, want) = (messages(&back), messages(&input));
                    if changed {
                        assert!(got == want, "{what} ({how}): not the input's messages");
                    } else {
                        assert_eq!(got.len(), want.len(), "{what} ({how})");
                        assert!(
                            got.iter().zip(&want).all(|(g, w)| canonical::same(g, w)),
                            "{what} ({how}): not the input's messages"
                        );
                    }
                }
            }
        }
    }
    assert!(compressed > 0, "no conversation was compressed");
}
