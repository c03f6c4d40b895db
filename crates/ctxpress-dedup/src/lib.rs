//! ctxpress strategy crate: dedup (see ARCHITECTURE.md).
