//! Why a read could not start ([`ReadError`]): a path that cannot be looked at, a glob
//! that does not parse.

use std::io;
use std::path::PathBuf;

/// Why a read could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A path given to read does not exist or cannot be looked at.
    #[error("cannot read `{}`: {source}", path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// An include or exclude glob does not parse.
    #[error("invalid glob `{glob}`: {message}")]
    Glob {
        /// The glob as given.
        glob: String,
        /// What is wrong with it.
        message: String,
    },
}
