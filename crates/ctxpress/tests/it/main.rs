//! The integration tests of `ctxpress`, one test binary (one link) for all of them;
//! each module is one suite (`cargo test -p PACKAGE --test it -- SUITE::` runs one).

mod cce;
mod compact;
mod faults;
mod many_blocks;
mod preset_outputs;
mod reserialized;
mod window;
mod window_llm;
