//! The integration tests of `ctxpress-compactor`, one test binary (one link) for all of them;
//! each module is one suite (`cargo test -p PACKAGE --test it -- SUITE::` runs one).

mod compactor;
mod crash;
mod stored;
