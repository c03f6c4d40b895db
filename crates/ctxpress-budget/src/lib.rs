//! Token budgets: the [`window`] (a trigger and a target, the ladder of
//! rungs run oldest first until a conversation fits, the allocator that
//! chooses what stays) and the session [`ledger`] (the note that stands for
//! what the budget moved out, with handles to recall it).
//!
//! It builds on `ctxpress-core`, `ctxpress-text` and `ctxpress-dialect`;
//! never on a strategy or the facade (the compactor uses it, not the other
//! way round).

pub mod ledger;
pub mod window;

pub use window::{BudgetReport, Limits, RungReport, WindowConfig};
