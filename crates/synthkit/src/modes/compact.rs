//! `compact` (the default): like refine, but the chunks are first joined, so each call
//! carries as much text as its prompt can hold. Far fewer calls than refine for the same
//! answer quality.
//!
//! Calls: about `total context tokens / (budget - prompt)`, plus one per overflow of a
//! long answer.

use std::borrow::Cow;

use super::refine;
use crate::engine::origins::Sourced;
use crate::engine::{Job, Outcome};
use crate::error::SynthError;
use crate::mode::ResponseMode;

pub(crate) async fn run(
    job: &Job,
    texts: &[Cow<'_, str>],
    previous: Option<String>,
) -> Result<Outcome, SynthError> {
    let joined = Sourced::of_nodes(texts, false);
    refine::refine_texts(job, ResponseMode::Compact, &joined, previous).await
}
