//! The crate's top-level error.

use crate::model::ModelError;
use crate::prompt::{BudgetError, TemplateError};
use crate::text::{SplitError, TokenizerError};

/// Everything that can go wrong in a synthesis. Messages say what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SynthError {
    /// The prompt budget cannot hold what a step needs.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// A template is unusable.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The splitter's settings are invalid.
    #[error(transparent)]
    Split(#[from] SplitError),
    /// An unknown tokenizer.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// A model call failed.
    #[error("{mode} {step} call failed: {source}")]
    Model {
        /// The mode.
        mode: &'static str,
        /// The step.
        step: &'static str,
        /// What the model said.
        #[source]
        source: ModelError,
    },
    /// tree_summarize cannot reduce the number of chunks any further.
    #[error(
        "tree_summarize cannot converge: at level {level}, {summaries} summaries still need {chunks} prompts of {chunk_size} context tokens; each summary may take up to num_output tokens, so raise the context window, lower num_output, or use compact"
    )]
    TreeNotConverging {
        /// The level that did not reduce.
        level: u32,
        /// Summaries at that level.
        summaries: usize,
        /// Prompts they need.
        chunks: usize,
        /// Context tokens per prompt.
        chunk_size: usize,
    },
    /// An option or combination of options is not allowed.
    #[error("{0}")]
    InvalidOption(String),
}
