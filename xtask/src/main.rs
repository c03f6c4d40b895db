//! Project automation: `cargo xtask bench`.
fn main() {}
