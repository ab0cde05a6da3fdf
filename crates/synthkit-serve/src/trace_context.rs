//! The span of one `POST /v1/synthesize` request: it continues the caller's W3C trace
//! (`traceparent`, `tracestate`), so the synthesis's spans land in the caller's trace under
//! the caller's span; without the header a request starts a new trace. Exported when the
//! process installed `synthkit::telemetry::otel` (`synthkit serve --otlp-endpoint`).

use axum::http::HeaderMap;

use crate::api::SYNTHESIZE_PATH;

/// The request's span, a child of the caller's span when `headers` carry a valid
/// `traceparent`.
pub(crate) fn request_span(headers: &HeaderMap) -> tracing::Span {
    let span = tracing::info_span!(
        target: "synthkit_serve",
        "synthkit_serve.request",
        otel.name = "POST /v1/synthesize",
        otel.kind = "server",
        http.request.method = "POST",
        http.route = SYNTHESIZE_PATH,
    );
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    synthkit::telemetry::otel::continue_trace(&span, header("traceparent"), header("tracestate"));
    span
}
