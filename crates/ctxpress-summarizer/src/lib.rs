//! ctxpress strategy crate: summarizer (see ARCHITECTURE.md).
