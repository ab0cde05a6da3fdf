//! Where the tests' files are.

use std::path::PathBuf;

/// `tests/fixtures/<set>/<name>` of this crate.
pub fn fixture_path(set: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(set)
        .join(name)
}

/// `path` from the repository's root.
pub fn repo_path(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}
