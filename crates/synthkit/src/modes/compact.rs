//! `compact` (the default): like refine, but the chunks are first joined, so each call
//! carries as much text as its prompt can hold. Far fewer calls than refine for the same
//! answer quality.
//!
//! Calls: about `total context tokens / (budget - prompt)`, plus one per overflow of a
//! long answer.

use std::borrow::Cow;

use super::refine;
use super::with_content;
use crate::engine::{Job, Outcome};
use crate::error::SynthError;
use crate::mode::ResponseMode;
use crate::prompt::PromptBudget;

pub(crate) async fn run(
    job: &Job,
    texts: &[Cow<'_, str>],
    previous: Option<String>,
) -> Result<Outcome, SynthError> {
    let joined = PromptBudget::join_for_packing(&with_content(texts));
    refine::refine_texts(job, ResponseMode::Compact, &[joined.as_str()], previous).await
}
