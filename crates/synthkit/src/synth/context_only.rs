//! `context_only`: no model call; the answer is the model-visible text of every node,
//! joined by blank lines (empties kept, as in the reference).

use super::Outcome;

pub(crate) fn run(texts: &[String]) -> Outcome {
    Outcome::Text(texts.join("\n\n"))
}
