//! SQLite archive for ctxpress.
