//! synthkit-documents' integration tests, in one binary: reading files and folders
//! (each test on a tree of its own in a temporary folder) and structure-aware chunking.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod chunking;
#[cfg(unix)]
mod common;
#[cfg(unix)]
mod folders;
#[cfg(unix)]
mod read_documents;
#[cfg(unix)]
mod read_documents_common;
#[cfg(unix)]
mod read_documents_links;
#[cfg(unix)]
mod read_documents_walk;
