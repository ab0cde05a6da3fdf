//! Structured answer filtering, as a caller sets it up: each refine or compact step says
//! whether its context answered the query ([`StepVerdict`]); unsatisfied or unusable steps
//! leave the answer unchanged. [`AnswerFiltering`] turns it on, a [`StepEvaluator`] may
//! decide the steps in place of the default structured call, and makes its calls through
//! the synthesis's [`CallDoor`]. The engine runs the steps (its private `filter` module).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use futures::future::BoxFuture;

use crate::error::SynthError;
#[cfg(doc)]
use crate::model::ModelError;
use crate::model::{Completion, ModelRequest, StructuredCompletion};

/// A boxed future returning a step verdict (for [`StepEvaluator`]).
pub type VerdictFuture<'a> = BoxFuture<'a, Result<StepVerdict, SynthError>>;

/// A filtering step's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepVerdict {
    /// Whether the context was enough to answer the query.
    pub query_satisfied: bool,
    /// The answer from the context.
    pub answer: String,
}

/// Decides a filtering step in place of the default structured call (the reference's
/// program factory). Allowed only with structured answer filtering.
///
/// Make calls through `door`: they are checked against the budget, counted in usage and
/// traced like every other call. Return a [`SynthError::Model`] with
/// [`ModelError::Structured`] or [`ModelError::Malformed`] for a reply that cannot be used:
/// the step is then skipped, as the reference does; other errors stop the synthesis.
pub trait StepEvaluator: Send + Sync {
    /// Evaluates one step: `request` is the rendered step (its `schema` is the verdict's).
    fn evaluate<'a>(&'a self, request: &'a ModelRequest, door: &'a CallDoor) -> VerdictFuture<'a>;
}

/// The JSON schema of a [`StepVerdict`] (`query_satisfied` first, so a streaming parser
/// can decide early).
pub fn filter_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query_satisfied": {
                "type": "boolean",
                "description": "true when the context was enough to answer the query"
            },
            "answer": {
                "type": "string",
                "description": "the answer, from the context only"
            }
        },
        "required": ["query_satisfied", "answer"],
        "additionalProperties": false
    })
}

/// Structured answer filtering for refine and compact: each step answers
/// `{query_satisfied, answer}` and unsatisfied steps leave the answer unchanged.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum AnswerFiltering {
    /// Plain answers (the default).
    #[default]
    Off,
    /// Every step is a filtering step.
    On {
        /// Stop at the first satisfied step (saves the remaining calls).
        stop_when_satisfied: bool,
        /// Decides each step in place of the default structured call (the reference's
        /// program factory).
        evaluator: Option<Arc<dyn StepEvaluator>>,
    },
}

impl AnswerFiltering {
    /// Filtering with the default structured call, visiting every step.
    pub fn on() -> Self {
        AnswerFiltering::On {
            stop_when_satisfied: false,
            evaluator: None,
        }
    }

    /// Filtering that stops at the first satisfied step.
    pub fn stop_when_satisfied() -> Self {
        AnswerFiltering::On {
            stop_when_satisfied: true,
            evaluator: None,
        }
    }

    /// Filtering decided by `evaluator`.
    pub fn with_evaluator(evaluator: Arc<dyn StepEvaluator>, stop_when_satisfied: bool) -> Self {
        AnswerFiltering::On {
            stop_when_satisfied,
            evaluator: Some(evaluator),
        }
    }

    /// Whether filtering is on.
    pub fn is_on(&self) -> bool {
        matches!(self, AnswerFiltering::On { .. })
    }

    pub(crate) fn stops_when_satisfied(&self) -> bool {
        matches!(
            self,
            AnswerFiltering::On {
                stop_when_satisfied: true,
                ..
            }
        )
    }

    pub(crate) fn evaluator(&self) -> Option<&Arc<dyn StepEvaluator>> {
        match self {
            AnswerFiltering::On { evaluator, .. } => evaluator.as_ref(),
            AnswerFiltering::Off => None,
        }
    }
}

impl fmt::Debug for AnswerFiltering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerFiltering::Off => f.write_str("Off"),
            AnswerFiltering::On {
                stop_when_satisfied,
                evaluator,
            } => f
                .debug_struct("On")
                .field("stop_when_satisfied", stop_when_satisfied)
                .field("evaluator", &evaluator.is_some())
                .finish(),
        }
    }
}

/// The call door as an evaluator sees it: calls made through it are checked against the
/// budget, counted in usage, traced and reported like every other call of the synthesis.
pub struct CallDoor {
    pub(crate) caller: Arc<dyn DoorCalls>,
}

/// What a call door calls through: the engine's caller implements it, so this module
/// names nothing of the engine.
pub(crate) trait DoorCalls: Send + Sync {
    /// What the model is.
    fn model_info(&self) -> crate::model::ModelInfo;
    /// A plain call, through the budget, usage, traces and reports.
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, SynthError>>;
    /// A structured call, likewise.
    fn structured<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<StructuredCompletion, SynthError>>;
}

impl fmt::Debug for CallDoor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallDoor").finish_non_exhaustive()
    }
}

impl CallDoor {
    /// What the model is.
    pub fn info(&self) -> crate::model::ModelInfo {
        self.caller.model_info()
    }

    /// A plain call.
    pub async fn complete(&self, request: &ModelRequest) -> Result<Completion, SynthError> {
        self.caller.complete(request).await
    }

    /// A structured call (the request carries the schema).
    pub async fn structured(
        &self,
        request: &ModelRequest,
    ) -> Result<StructuredCompletion, SynthError> {
        self.caller.structured(request).await
    }
}
