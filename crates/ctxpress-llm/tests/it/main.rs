//! The integration tests of `ctxpress-llm`, one test binary (one link) for all of them;
//! each module is one suite (`cargo test -p PACKAGE --test it -- SUITE::` runs one).

mod common;
mod golden;
mod real_server;
mod secrets;
mod stub_server;
