//! The integration tests of `ctxpress-core`, one test binary (one link) for all of them;
//! each module is one suite (`cargo test -p PACKAGE --test it -- SUITE::` runs one).

mod heuristic_corpus;
mod numbers;
mod roundtrip_corpus;
