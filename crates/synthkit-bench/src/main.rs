//! synthkit benchmarks.
fn main() {}
