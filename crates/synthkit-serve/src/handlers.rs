//! The route handlers: `POST /v1/synthesize` (JSON; streams are in [`crate::sse`]),
//! `GET /healthz`, `GET /readyz`, `GET /metrics`, `GET /openapi.json`.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use synthkit::prompt::{PromptTemplate, TemplateKind};
use synthkit::{Concurrency, ResponseMode, SynthesisInput, Synthesizer};

use crate::api::{HealthBody, SynthesizeRequest, parse_nodes};
use crate::error::{ApiError, json_response};
use crate::metrics::{Metrics, MetricsObserver};
use crate::state::AppState;

/// The path of the synthesis route.
pub const SYNTHESIZE_PATH: &str = "/v1/synthesize";

/// One synthesis request being served: the in-flight gauge while it lives, then its
/// status and latency. A request whose future is dropped before it set a status (the
/// client went away) is counted as 499.
pub(crate) struct RequestGuard {
    metrics: Arc<Metrics>,
    started: Instant,
    pub(crate) status: Option<u16>,
}

impl RequestGuard {
    pub(crate) fn start(metrics: &Arc<Metrics>) -> Self {
        metrics.requests_in_flight.fetch_add(1, Ordering::Relaxed);
        Self {
            metrics: Arc::clone(metrics),
            started: Instant::now(),
            status: None,
        }
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let m = &self.metrics;
        m.requests_in_flight.fetch_sub(1, Ordering::Relaxed);
        m.request_duration.observe(self.started.elapsed());
        m.count_request(SYNTHESIZE_PATH, self.status.unwrap_or(499));
    }
}

/// A checked request, ready to run.
pub(crate) struct Job {
    pub(crate) synth: Synthesizer,
    pub(crate) input: SynthesisInput,
    pub(crate) stream: bool,
}

/// `POST /v1/synthesize`.
pub(crate) async fn synthesize(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut guard = RequestGuard::start(&state.inner.metrics);
    let job = match prepare(&state, &headers, body).await {
        Ok(job) => job,
        Err(e) => {
            guard.status = Some(e.status().as_u16());
            return e.into_response();
        }
    };
    if job.stream {
        guard.status = Some(200);
        return crate::sse::respond(state, job, guard);
    }
    let result = run(&state, job).await;
    let response = match result {
        Ok(r) => json_response(StatusCode::OK, &r),
        Err(e) => {
            if matches!(e, ApiError::Synthesis(_)) {
                tracing::warn!(error = %e, "synthesis failed");
            }
            e.into_response()
        }
    };
    guard.status = Some(response.status().as_u16());
    response
}

/// Runs a plain (non-streamed) job within the time limit, until the shutdown deadline.
async fn run(state: &AppState, job: Job) -> Result<synthkit::Response, ApiError> {
    let limit = state.inner.limits.request_timeout;
    let work = tokio::time::timeout(limit, job.synth.synthesize_input(job.input));
    tokio::select! {
        r = work => match r {
            Ok(result) => Ok(result?),
            Err(_) => Err(ApiError::Timeout { secs: limit.as_secs().max(1) }),
        },
        () = state.inner.cancel.cancelled() => Err(ApiError::ShuttingDown),
    }
}

/// Checks the key, reads the body within its limit, parses and checks the request, and
/// builds its synthesizer on the shared model.
async fn prepare(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Job, ApiError> {
    let s = &state.inner;
    if let Some(keys) = &s.keys {
        keys.check(headers)?;
    }
    let bytes = read_body(headers, body, s.limits.max_body_bytes).await?;
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
    let mode = match request.mode.as_deref() {
        None => ResponseMode::Compact,
        Some(m) => {
            ResponseMode::from_str(m).map_err(|e| ApiError::InvalidRequest(e.to_string()))?
        }
    };
    let max = s.limits.max_request_concurrency;
    let concurrency = match request.concurrency {
        Some(0) => {
            return Err(ApiError::InvalidRequest(
                "`concurrency` must be at least 1".into(),
            ));
        }
        Some(n) => n.min(max),
        None => max,
    };
    let mut builder = Synthesizer::builder(Arc::clone(&s.model))
        .mode(mode)
        .concurrency(Concurrency::limit(concurrency))
        .observer(Arc::new(MetricsObserver(Arc::clone(&s.metrics))))
        .citations(request.citations);
    if let Some(show) = request.citation_markers {
        builder = builder.citation_markers(show);
    }
    if let Some(schema) = request.output_schema {
        builder = builder.output_schema(schema);
    }
    if let Some(prompt) = request.system_prompt {
        builder = builder.system_prompt(prompt);
    }
    if let Some(t) = request.templates {
        let pairs = [
            (t.qa, TemplateKind::Qa),
            (t.refine, TemplateKind::Refine),
            (t.summary, TemplateKind::Summary),
            (t.simple, TemplateKind::Simple),
        ];
        for (text, kind) in pairs {
            let Some(text) = text else { continue };
            let template = PromptTemplate::completion(kind, text);
            builder = match kind {
                TemplateKind::Qa => builder.qa_template(template),
                TemplateKind::Refine => builder.refine_template(template),
                TemplateKind::Summary => builder.summary_template(template),
                _ => builder.simple_template(template),
            };
        }
    }
    let synth = builder.build()?;
    let nodes = parse_nodes(request.nodes)?;
    Ok(Job {
        synth,
        input: SynthesisInput::new(request.query, nodes),
        stream: request.stream,
    })
}

/// The body, refused with 413 as soon as it is known to be over `limit` bytes (from its
/// `Content-Length`, else while it is read).
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::BodyTooLarge { limit });
    }
    let mut bytes = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::InvalidRequest(format!("the request body could not be read: {e}"))
        })?;
        if bytes.len() + chunk.len() > limit {
            return Err(ApiError::BodyTooLarge { limit });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// `GET /healthz`: the process is up.
pub(crate) async fn healthz() -> Response {
    let body = HealthBody {
        status: "ok".into(),
        reason: None,
    };
    json_response(StatusCode::OK, &body)
}

/// `GET /readyz`: the backend answers and the service is not shutting down.
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let s = &state.inner;
    let (status, body) = if state.is_draining() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            HealthBody {
                status: "draining".into(),
                reason: Some("the service is shutting down".into()),
            },
        )
    } else {
        match s.readiness.check(&s.client).await {
            Ok(()) => (
                StatusCode::OK,
                HealthBody {
                    status: "ok".into(),
                    reason: None,
                },
            ),
            Err(reason) => (
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

/// `GET /metrics`: Prometheus text (behind the API keys when there are keys).
pub(crate) async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(keys) = &state.inner.keys
        && let Err(e) = keys.check(&headers)
    {
        return e.into_response();
    }
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
