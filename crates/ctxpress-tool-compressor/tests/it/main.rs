//! The integration tests of `ctxpress-tool-compressor`, one test binary (one link) for all of them;
//! each module is one suite (`cargo test -p PACKAGE --test it -- SUITE::` runs one).

mod corpus;
mod golden;
mod props;
mod structured_golden;
