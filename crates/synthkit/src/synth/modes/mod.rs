//! One file per response mode. Each decides the steps of its mode and leaves packing,
//! counting, calling and correcting to the engine.

pub(crate) mod accumulate;
pub(crate) mod compact;
pub(crate) mod context_only;
pub(crate) mod generation;
pub(crate) mod no_text;
pub(crate) mod refine;
pub(crate) mod simple_summarize;
pub(crate) mod structured;
pub(crate) mod tree_summarize;
