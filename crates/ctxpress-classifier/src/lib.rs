//! ctxpress strategy crate: classifier (see ARCHITECTURE.md).
