//! Inputs kept from fuzzing runs (`fuzz/regressions/TARGET/*`), checked in
//! the default test command with the fuzz targets' own checks
//! (`fuzz/src/checks.rs`, included here), so a fixed finding stays fixed.

#[allow(dead_code, missing_docs)]
#[path = "../../../fuzz/src/checks.rs"]
mod checks;

use arbitrary::{Arbitrary, Unstructured};
use std::path::PathBuf;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no regression inputs in {}", dir.display());
    out
}

fn each(target: &str, check: impl Fn(&[u8])) {
    for (name, data) in inputs(target) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&data)));
        assert!(r.is_ok(), "fuzz/regressions/{target}/{name} fails again");
    }
}

#[test]
fn pipeline_regressions() {
    each("pipeline", checks::pipeline);
}

#[test]
fn structured_regressions() {
    each("structured", |data| {
        if let Ok(s) = checks::session::Session::arbitrary_take_rest(Unstructured::new(data)) {
            checks::roundtrip(&s.render(), s.pick);
        }
    });
}

#[test]
fn text_regressions() {
    each("text", checks::text);
}

#[test]
fn config_regressions() {
    each("config", checks::config);
}
