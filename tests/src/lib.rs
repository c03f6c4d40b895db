//! Helpers shared by the end-to-end suites in `tests/tests/` (test-only; never
//! published): where the shared corpus lives and how to read it.

pub mod corpus;
