//! The integration tests of `ctxpress-tests`, one test binary (one link) for all of them;
//! each module is one suite (`cargo test -p PACKAGE --test it -- SUITE::` runs one).

mod corpus_round_trip;
mod fuzz_regressions;
mod handles;
mod session_replay;
mod tidy;
