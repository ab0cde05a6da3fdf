//! The `synthkit` command.
fn main() {}
