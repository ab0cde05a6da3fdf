//! The route handlers: `POST /v1/synthesize` (JSON; streams are in [`crate::sse`]),
//! `GET /healthz`, `GET /readyz`, `GET /metrics`, `GET /openapi.json`.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use synthkit::steps::StepRecorder;
use synthkit::{Concurrency, ResponseMode, SynthesisInput, Synthesizer};
use synthkit_frontend::request::RequestDefaults;
use tracing::Instrument;

use crate::api::{HealthBody, PlanBody, PlanCapsBody, SynthesizeRequest};
use crate::auth::KeyId;
use crate::cost::Cost;
use crate::error::{ApiError, json_response};
use crate::metrics::MetricsObserver;
use crate::readiness::BackendState;
use crate::state::AppState;

/// A checked request, ready to run.
pub(crate) struct Job {
    pub(crate) synth: Synthesizer,
    pub(crate) input: SynthesisInput,
    pub(crate) stream: bool,
    /// Whether the response carries its steps.
    pub(crate) return_steps: bool,
    /// With `report`: the recorder of the calls, which the page draws (also when the
    /// synthesis fails).
    pub(crate) report: Option<Arc<StepRecorder>>,
    /// Only the plan was asked for (`"plan": true`).
    pub(crate) plan: bool,
    /// The prices and the cost cap (priced responses, the plan's cost check).
    pub(crate) cost: Cost,
}

/// `POST /v1/synthesize`. The key, the content type, the body's size and the time limit
/// were checked by the route's layers ([`crate::stack`]).
pub(crate) async fn synthesize(
    State(state): State<AppState>,
    headers: HeaderMap,
    key: Option<Extension<KeyId>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let span = crate::trace_context::request_span(&headers);
    let key = key.map(|Extension(k)| k);
    synthesize_in_span(state, key, body).instrument(span).await
}

/// [`synthesize`] inside the request's span; `key` made the request (when there are keys).
async fn synthesize_in_span(
    state: AppState,
    key: Option<KeyId>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let job = match prepare(&state, body) {
        Ok(job) => job,
        Err(e) => return e.into_response(),
    };
    // The plan first: asked for, or checked against the per-request caps before any call.
    match check_plan(&state, &job).await {
        Ok(Some(plan)) => return json_response(StatusCode::OK, &plan),
        Ok(None) => {}
        Err(e) => return e.into_response(),
    }
    if job.stream {
        return crate::sse::respond(state, job.synth, job.input, job.cost);
    }
    // With a report, what the page needs after the input has gone to the synthesis.
    let report = job
        .report
        .clone()
        .map(|recorder| crate::report_route::ReportOf {
            query: job.input.query.clone(),
            nodes: job.input.nodes.clone(),
            synth: job.synth.clone(),
            recorder,
            owner: key,
        });
    let (return_steps, cost) = (job.return_steps, job.cost);
    let outcome = run(&state, job).await.map(|mut r| {
        cost.price(&state, &mut r.usage);
        r
    });
    match outcome {
        Ok(r) => match report {
            Some(report) => report.answer(&state, r, return_steps),
            None => json_response(StatusCode::OK, &r),
        },
        Err(e) => {
            if matches!(e, ApiError::Synthesis(_)) {
                tracing::warn!(error = %e, "synthesis failed");
            }
            match report {
                Some(report) if matches!(e, ApiError::Synthesis(_)) => {
                    let url = report.keep_failed(&state, &e.to_string());
                    e.with_report(url)
                }
                _ => e.into_response(),
            }
        }
    }
}

/// Plans `job` (no model call) when it calls the model: its plan when the request asked
/// for it (`"plan": true`), [`ApiError::TooCostly`] when the plan is over a per-request
/// cap (calls, prompt tokens, completion tokens), else nothing (the job runs).
async fn check_plan(state: &AppState, job: &Job) -> Result<Option<PlanBody>, ApiError> {
    let mode = job.synth.mode();
    let limits = &state.inner.limits;
    let caps = PlanCapsBody {
        max_calls_per_request: limits.max_calls_per_request,
        max_prompt_tokens_per_request: limits.max_prompt_tokens_per_request,
        max_completion_tokens_per_request: limits.max_completion_tokens_per_request,
        max_cost: None,
    };
    if !job.plan && !mode.calls_model() {
        return Ok(None);
    }
    let plan = tokio::select! {
        p = job.synth.plan_input(&job.input) => p.map_err(plan_error)?,
        () = state.inner.cancel.cancelled() => return Err(ApiError::ShuttingDown),
    };
    let body = PlanBody::new(&plan, mode, caps).with_cost(job.cost.prices, job.cost.max_cost);
    if job.plan {
        return Ok(Some(body));
    }
    if !body.within_caps {
        return Err(ApiError::TooCostly(Box::new(body)));
    }
    Ok(None)
}

/// A plan's failure. A plan whose levels cannot converge had every reply at its
/// `num_output` (no model answered): the request's options or the service's window leave
/// too little room, which is the caller's to change (400 `invalid_option`), not the
/// model's doing as it is in a run.
fn plan_error(e: synthkit::SynthError) -> ApiError {
    match e {
        synthkit::SynthError::TreeNotConverging {
            mode,
            level,
            summaries,
            chunks,
            chunk_size,
            ..
        } => ApiError::Synthesis(synthkit::SynthError::InvalidOption(format!(
            "this {mode} request cannot converge, as planned before any call with every reply as long as num_output allows: at level {level}, {summaries} replies still need {chunks} prompts of {chunk_size} context tokens; send a larger max_prompt_tokens (or none), use compact, or start the service with a larger --context-window or a smaller --num-output"
        ))),
        other => ApiError::Synthesis(other),
    }
}

/// Runs a plain (non-streamed) job until the shutdown deadline.
async fn run(state: &AppState, job: Job) -> Result<synthkit::Response, ApiError> {
    tokio::select! {
        r = job.synth.synthesize_input(job.input) => Ok(r?),
        () = state.inner.cancel.cancelled() => Err(ApiError::ShuttingDown),
    }
}

/// Parses and checks the request, and builds its synthesizer on the shared model.
fn prepare(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Job, ApiError> {
    let s = &state.inner;
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::BodyTooLarge {
                limit: s.limits.max_body_bytes,
            }
        } else {
            ApiError::InvalidRequest(format!("the request body could not be read: {rejection}"))
        }
    })?;
    let request: SynthesizeRequest = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::InvalidRequest(format!(
            "the body is not a valid synthesis request: {e}; see GET /openapi.json"
        ))
    })?;
    if request.nodes.len() > s.limits.max_nodes {
        return Err(ApiError::TooManyNodes {
            given: request.nodes.len(),
            limit: s.limits.max_nodes,
        });
    }
    if let Some(given) = request
        .thinking_reserve
        .filter(|r| *r > s.limits.max_thinking_reserve)
    {
        return Err(ApiError::ThinkingReserveTooLarge {
            given,
            limit: s.limits.max_thinking_reserve,
        });
    }
    let defaults = RequestDefaults {
        mode: ResponseMode::Compact,
        concurrency: Concurrency::limit(s.limits.max_request_concurrency),
        prices: s.prices,
        max_cost: s.max_cost_per_request,
        ..RequestDefaults::default()
    };
    let defaults = defaults.with_checks(&s.checks);
    let observer = Arc::new(MetricsObserver(Arc::clone(&s.metrics)));
    let run = request.prepare(Arc::clone(&s.model), defaults, |b| b.observer(observer))?;
    if run.report && run.stream {
        return Err(ApiError::InvalidRequest(
            "`report` keeps the page of a whole answer: leave `stream` out to have both".into(),
        ));
    }
    Ok(Job {
        synth: run.synthesizer,
        input: run.input,
        stream: run.stream,
        return_steps: run.return_steps,
        report: run.steps,
        plan: run.plan,
        cost: Cost {
            prices: run.prices,
            max_cost: run.max_cost,
        },
    })
}

/// `GET /healthz`: the process is up.
pub(crate) async fn healthz() -> Response {
    let body = HealthBody {
        status: "ok".into(),
        reason: None,
    };
    json_response(StatusCode::OK, &body)
}

/// `GET /readyz`: the backend answered its last check, the shared budget's store (Redis)
/// is not failing, and the service is not shutting down. The backend is checked on a timer ([`crate::readiness`]), never by the probe.
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let (status, body) = if state.is_draining() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            HealthBody {
                status: "draining".into(),
                reason: Some("the service is shutting down".into()),
            },
        )
    } else {
        match state.readiness() {
            BackendState::Ready => (
                StatusCode::OK,
                HealthBody {
                    status: "ok".into(),
                    reason: None,
                },
            ),
            BackendState::Unknown => (
                StatusCode::SERVICE_UNAVAILABLE,
                HealthBody {
                    status: "unavailable".into(),
                    reason: Some("the backend has not been checked yet".into()),
                },
            ),
            BackendState::Unavailable(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                HealthBody {
                    status: "unavailable".into(),
                    reason: Some(reason),
                },
            ),
        }
    };
    json_response(status, &body)
}

/// `GET /metrics`: Prometheus text (behind the API keys when there are keys, see
/// [`crate::stack`]).
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let text = state.inner.metrics.render();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

/// `GET /openapi.json`.
pub(crate) async fn openapi() -> Response {
    json_response(StatusCode::OK, &crate::openapi::document())
}
