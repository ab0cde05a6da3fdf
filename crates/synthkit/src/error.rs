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
    /// An option or combination of options is not allowed.
    #[error("{0}")]
    InvalidOption(String),
}
