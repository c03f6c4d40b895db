//! The integration tests of `ctxpress-dedup`, one test binary (one link) for all of them;
//! each module is one suite (`cargo test -p PACKAGE --test it -- SUITE::` runs one).

mod corpus;
mod props;
