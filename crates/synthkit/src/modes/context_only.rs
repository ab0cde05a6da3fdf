//! `context_only`: no model call; the answer is the model-visible text of every node,
//! joined by blank lines (empties kept, as in the reference).

use std::borrow::Cow;

use crate::engine::Outcome;

pub(crate) fn run(texts: &[Cow<'_, str>]) -> Outcome {
    Outcome::Text(crate::engine::images::strip(&texts.join("\n\n")).into_owned())
}
