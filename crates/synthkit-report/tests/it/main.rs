//! synthkit-report's integration tests, in one binary: pages of real syntheses (made with
//! the library's test doubles) checked for escaping, completeness and links.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod images;
mod page;
mod trace;
