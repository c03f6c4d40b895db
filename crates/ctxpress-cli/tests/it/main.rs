//! The integration tests of `ctxpress-cli`, one test binary (one link) for all of them;
//! each module is one suite (`cargo test -p PACKAGE --test it -- SUITE::` runs one).

mod batch;
mod cli;
mod common;
mod compact;
mod faults;
mod hardening;
mod mcp;
#[cfg(not(feature = "mcp"))]
mod mcp_off;
mod readme;
mod real_clients;
mod reserialized;
mod search;
mod serve;
mod trace;
