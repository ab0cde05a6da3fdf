//! Running structured answer filtering's steps (the caller's side is
//! [`crate::filtering`]).

use futures::future::BoxFuture;

use super::Job;
use super::caller::Caller;
use crate::error::SynthError;
use crate::filtering::{CallDoor, DoorCalls, StepVerdict};
use crate::model::{Completion, ModelError, ModelRequest, StructuredCompletion};
use crate::observe::{OnTruncation, SynthEvent};

/// Runs one filtering step: `Some(answer)` when satisfied, `None` when the step leaves the
/// answer unchanged.
pub(crate) async fn filter_step(
    job: &Job,
    request: &ModelRequest,
) -> Result<Option<String>, SynthError> {
    let verdict = match job.s.filtering.evaluator() {
        Some(evaluator) => {
            let door = CallDoor {
                caller: std::sync::Arc::clone(&job.caller) as std::sync::Arc<dyn DoorCalls>,
            };
            evaluator.evaluate(request, &door).await
        }
        None => job.caller.structured(request).await.and_then(|c| {
            serde_json::from_value::<StepVerdict>(c.value).map_err(|e| SynthError::Model {
                mode: request.step().mode,
                step: request.step().step,
                source: ModelError::Structured(e.to_string()),
            })
        }),
    };
    match verdict {
        Ok(v) if v.query_satisfied => Ok(Some(v.answer)),
        Ok(_) => Ok(None),
        Err(SynthError::Model {
            source: ModelError::Structured(reason) | ModelError::Malformed(reason),
            ..
        }) => {
            job.caller.event(SynthEvent::StepSkipped {
                step: request.step(),
                reason,
            });
            Ok(None)
        }
        Err(SynthError::Model {
            source: e @ ModelError::SchemaMismatch { .. },
            ..
        }) => {
            job.caller.event(SynthEvent::StepSkipped {
                step: request.step(),
                reason: e.to_string(),
            });
            Ok(None)
        }
        // A verdict cut at the output limit (already reported as a truncation) that does
        // not parse is unusable like any garbled one, unless cut replies are errors.
        Err(e @ SynthError::Truncated { .. }) if job.s.on_truncation == OnTruncation::Warn => {
            job.caller.event(SynthEvent::StepSkipped {
                step: request.step(),
                reason: e.to_string(),
            });
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

impl DoorCalls for Caller {
    fn model_info(&self) -> crate::model::ModelInfo {
        Caller::model_info(self)
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, SynthError>> {
        Box::pin(Caller::complete(self, request))
    }

    fn structured<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<StructuredCompletion, SynthError>> {
        Box::pin(Caller::structured(self, request))
    }
}
