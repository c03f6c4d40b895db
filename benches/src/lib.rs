//! No library code: this package holds the criterion benches in `benches/`
//! (`cargo bench -p ctxpress-benches`). Cargo needs a library or binary
//! target in a package, so this empty one is it.
