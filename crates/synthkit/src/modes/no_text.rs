//! `no_text`: no model call; the answer is empty and the nodes are the sources.
//!
//! Use it to see what retrieval found without paying for a model call.

use crate::engine::Outcome;

pub(crate) fn run() -> Outcome {
    Outcome::Text(String::new())
}
