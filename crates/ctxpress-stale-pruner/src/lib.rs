//! ctxpress strategy crate: stale-pruner (see ARCHITECTURE.md).
