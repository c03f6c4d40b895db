//! Helpers shared by the end-to-end suites in `tests/tests/` (test-only; never
//! published): where the shared corpus lives and how to read it, and JSON
//! rewritten the way other programs write it.

pub mod corpus;
pub mod json;
