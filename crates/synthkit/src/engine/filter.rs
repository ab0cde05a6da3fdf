//! Running structured answer filtering's steps (the caller's side is
//! [`crate::filtering`]).

use super::Job;
use crate::error::SynthError;
use crate::filtering::{CallDoor, StepVerdict};
use crate::model::{ModelError, ModelRequest};
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
                caller: std::sync::Arc::clone(&job.caller),
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
