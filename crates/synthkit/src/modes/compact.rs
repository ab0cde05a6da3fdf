//! `compact` (the default): like refine, but the chunks are first joined, so each call
//! carries as much text as its prompt can hold. Far fewer calls than refine for the same
//! answer quality.
//!
//! Calls: about `total context tokens / (budget - prompt)`, plus one per overflow of a
//! long answer.

use std::borrow::Cow;

use crate::engine::origins::Sourced;

/// What compact packs: the nodes' texts joined (`texts[i]` is node `i`'s), then refined
/// over as [`super::refine::refine_texts`] does.
pub(crate) fn source(texts: &[Cow<'_, str>]) -> Sourced {
    Sourced::of_nodes(texts, false)
}
