//! synthkit-extractive's integration tests, in one binary: answers over documents shaped
//! like real ones (`answers`) and facts found where documents keep them (`facts`). The
//! fixtures stay in `tests/fixtures/`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod answers;
mod common;
mod evidence;
mod facts;
