//! Errors: [`ApiError`] (what a client is told, as `{"error": {"kind", "message"}}` with an
//! HTTP status) and [`ServeError`] (what stops the service from starting or running).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use synthkit::SynthError;
use synthkit_frontend::request::{RequestError, error_kind};

use crate::api::{ErrorBody, ErrorDetail, PlanBody};

/// `Retry-After` of a shed request or one refused while shutting down, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

/// Why a request failed. Each variant has an HTTP status and a stable `kind` string
/// ([`ApiError::kind`]); the message says what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// No `Authorization: Bearer` header, or a key that is not in the key file.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The body is not a valid request.
    #[error("{0}")]
    InvalidRequest(String),
    /// The body is larger than the service accepts.
    #[error(
        "the request body is larger than {limit} bytes: send fewer or shorter nodes, or start the service with a larger --max-body-bytes"
    )]
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// More nodes than the service accepts in one request.
    #[error(
        "the request has {given} nodes, more than the {limit} this service accepts: send the top nodes only, or start the service with a larger --max-nodes"
    )]
    TooManyNodes {
        /// Nodes sent.
        given: usize,
        /// The limit.
        limit: usize,
    },
    /// The request's plan is over a per-request cap (`--max-calls-per-request`,
    /// `--max-prompt-tokens-per-request`, `--max-completion-tokens-per-request`); no model
    /// call was made. The body carries the plan.
    #[error(
        "not started: this request needs {}, over this service's cap: send fewer nodes, use a mode with fewer calls (compact), ask for a smaller thinking_reserve, ask for the plan with \"plan\": true, or start the service with a larger cap",
        .0.over().join(" and ")
    )]
    TooCostly(Box<PlanBody>),
    /// The request asks for a thinking reserve over `--max-thinking-reserve`.
    #[error(
        "the request asks for a thinking_reserve of {given} tokens, more than the {limit} this service allows on each call: ask for at most {limit}, or start the service with a larger --max-thinking-reserve"
    )]
    ThinkingReserveTooLarge {
        /// The reserve asked for.
        given: usize,
        /// The cap.
        limit: usize,
    },
    /// The body did not arrive within the body deadline.
    #[error(
        "the request body did not arrive within {secs} s of its headers: send the whole body at once, or start the service with a larger --body-timeout"
    )]
    BodyTimeout {
        /// The deadline in seconds.
        secs: u64,
    },
    /// The synthesis did not finish within the per-request time limit.
    #[error(
        "the synthesis did not finish within {secs} s: send fewer nodes, use a mode with fewer calls (compact), or start the service with a larger --request-timeout"
    )]
    Timeout {
        /// The limit in seconds.
        secs: u64,
    },
    /// The service is shutting down: it cancelled the request, or refused a new one.
    #[error(
        "the service is shutting down and did not finish this request: send it again (to another replica)"
    )]
    ShuttingDown,
    /// No route has this path.
    #[error(
        "no such route: the routes are POST /v1/synthesize, GET /healthz, /readyz, /metrics, /openapi.json and /v1/report/{{id}}"
    )]
    NotFound,
    /// No report has this id that the caller may read (it expired, was pushed out, never
    /// was, or another key made it: the answer is the same).
    #[error(
        "no report with this id: a report is served for 15 minutes after its synthesis, only to the API key that asked for it, and at most 100 are kept"
    )]
    ReportNotFound,
    /// The route does not answer this method.
    #[error(
        "this route does not answer this method (see the Allow header): POST /v1/synthesize; GET /healthz, /readyz, /metrics, /openapi.json"
    )]
    MethodNotAllowed,
    /// The body is not declared as JSON.
    #[error("the body must be JSON: send the header `Content-Type: application/json`")]
    UnsupportedMediaType,
    /// The request target is too long.
    #[error(
        "the request target is longer than {limit} bytes: shorten the path and query, or start the service with a larger --max-uri-bytes"
    )]
    UriTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// Too many request headers.
    #[error(
        "the request has {given} headers, more than the {limit} this service accepts: send fewer, or start the service with a larger --max-headers"
    )]
    TooManyHeaders {
        /// Headers sent.
        given: usize,
        /// The limit.
        limit: usize,
    },
    /// The request head is too large.
    #[error(
        "the request line and headers are larger than {limit} bytes: send shorter headers, or start the service with a larger --max-header-bytes"
    )]
    HeadersTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The `Host` is not one this service answers to (DNS rebinding protection).
    #[error(
        "this service does not answer to the host named in the Host header: use http://127.0.0.1 or http://localhost, or start the service with --allowed-host NAME"
    )]
    HostNotAllowed,
    /// A request from a web page whose origin is not listed.
    #[error(
        "requests from web pages are refused unless their origin is listed: start the service with --cors-origin ORIGIN (for example --cors-origin https://app.example.com)"
    )]
    OriginNotAllowed,
    /// As many requests as the service takes are in flight already.
    #[error(
        "the service is at its limit of requests in flight: retry after a second (Retry-After), or start it with a larger --max-requests"
    )]
    Overloaded,
    /// The bodies being read already hold `--max-pending-body-bytes` between them.
    #[error(
        "the service is reading as many request bodies as it holds at once ({limit} bytes together): retry after a second (Retry-After), or start it with a larger --max-pending-body-bytes"
    )]
    BodiesOverloaded {
        /// The limit in bytes.
        limit: usize,
    },
    /// Another error status, made by a layer without a message of its own.
    #[error("the request was refused with HTTP {}: see GET /openapi.json for the routes and what they accept", .0.as_u16())]
    Http(StatusCode),
    /// The synthesis failed.
    #[error("{}{}", .0, flag_hint(.0))]
    Synthesis(#[from] SynthError),
}

impl ApiError {
    /// The HTTP status of the error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::TooManyNodes { .. }
            | ApiError::TooCostly(_)
            | ApiError::ThinkingReserveTooLarge { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ApiError::ShuttingDown | ApiError::Overloaded | ApiError::BodiesOverloaded { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::NotFound | ApiError::ReportNotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
            ApiError::TooManyHeaders { .. } | ApiError::HeadersTooLarge { .. } => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            ApiError::HostNotAllowed => StatusCode::MISDIRECTED_REQUEST,
            ApiError::OriginNotAllowed => StatusCode::FORBIDDEN,
            ApiError::Http(status) => *status,
            ApiError::Synthesis(e) => synthesis_status(e),
        }
    }

    /// A stable machine-readable name: `unauthorized`, `invalid_request`,
    /// `body_too_large`, `body_timeout`, `too_many_nodes`, `too_costly`,
    /// `thinking_reserve_too_large`, `timeout`, `shutting_down`, `not_found`,
    /// `report_not_found`,
    /// `method_not_allowed`, `unsupported_media_type`, `uri_too_long`,
    /// `headers_too_large`, `host_not_allowed`, `origin_not_allowed`, `overloaded`,
    /// `http_error`, `invalid_option`, `model_error`, `model_timeout`,
    /// `model_rate_limited`, `model_refused`, `cost_cap`, `truncated`, `synthesis_failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::BodyTooLarge { .. } => "body_too_large",
            ApiError::TooManyNodes { .. } => "too_many_nodes",
            ApiError::TooCostly(_) => "too_costly",
            ApiError::ThinkingReserveTooLarge { .. } => "thinking_reserve_too_large",
            ApiError::BodyTimeout { .. } => "body_timeout",
            ApiError::Timeout { .. } => "timeout",
            ApiError::ShuttingDown => "shutting_down",
            ApiError::NotFound => "not_found",
            ApiError::ReportNotFound => "report_not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::UriTooLong { .. } => "uri_too_long",
            ApiError::TooManyHeaders { .. } | ApiError::HeadersTooLarge { .. } => {
                "headers_too_large"
            }
            ApiError::HostNotAllowed => "host_not_allowed",
            ApiError::OriginNotAllowed => "origin_not_allowed",
            ApiError::Overloaded | ApiError::BodiesOverloaded { .. } => "overloaded",
            ApiError::Http(status) => match status.as_u16() {
                408 => "timeout",
                413 => "body_too_large",
                414 => "uri_too_long",
                431 => "headers_too_large",
                503 => "unavailable",
                _ => "http_error",
            },
            ApiError::Synthesis(e) => error_kind(e),
        }
    }

    /// The error for an answer some layer made with `status` and no body.
    pub fn from_status(status: StatusCode) -> Self {
        match status {
            StatusCode::NOT_FOUND => ApiError::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType,
            other => ApiError::Http(other),
        }
    }

    /// The JSON body: `{"error": {"kind": ..., "message": ...}}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                kind: self.kind().to_string(),
                message: self.to_string(),
            },
            report_url: None,
            plan: match self {
                ApiError::TooCostly(plan) => Some((**plan).clone()),
                _ => None,
            },
        }
    }

    /// The error's response, naming the page of the failed synthesis (`report_url`).
    pub(crate) fn with_report(self, report_url: Option<String>) -> Response {
        let mut body = self.body();
        body.report_url = report_url;
        self.respond(&body)
    }

    /// The response with `body`, and the headers the error calls for.
    fn respond(self, body: &ErrorBody) -> Response {
        let status = self.status();
        let mut response = json_response(status, body);
        let headers = response.headers_mut();
        match self {
            ApiError::Unauthorized(_) => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::Overloaded | ApiError::BodiesOverloaded { .. } | ApiError::ShuttingDown => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            ApiError::BodyTimeout { .. } => {
                // The rest of the body is not read: the connection cannot carry another
                // request.
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}

/// The service's flag for a synthesis failure the library names by its option.
fn flag_hint(e: &SynthError) -> String {
    match e
        .model_error()
        .and_then(synthkit::layer::limit::limit_error)
    {
        Some(synthkit::layer::limit::LimitError::OverBudget { tokens, .. }) => {
            format!(" (raise --tpm to at least {tokens} where the service starts)")
        }
        _ => String::new(),
    }
}

/// Statuses for synthesis failures: the caller's options (400), the model (502/504/429
/// passed on as 503 so clients back off), anything else (500).
fn synthesis_status(e: &SynthError) -> StatusCode {
    match error_kind(e) {
        "invalid_option" => StatusCode::BAD_REQUEST,
        "cost_cap" => StatusCode::UNPROCESSABLE_ENTITY,
        "model_timeout" => StatusCode::GATEWAY_TIMEOUT,
        "model_rate_limited" => StatusCode::SERVICE_UNAVAILABLE,
        "model_error" | "truncated" | "schema_mismatch" | "model_refused"
        | "unsupported_answer" => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A request that cannot run: its shape is 400 `invalid_request`, an option the
/// synthesizer refused is a synthesis error (`invalid_option`).
impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::Options(e) => ApiError::Synthesis(e),
            other => ApiError::InvalidRequest(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body();
        self.respond(&body)
    }
}

/// `value` as a JSON response with `status`.
pub(crate) fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot serialize the response: {e}"),
        )
            .into_response(),
    }
}

/// Why the service cannot start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The API key file cannot be read or holds no key.
    #[error("cannot use the API key file {path}: {message}")]
    ApiKeys {
        /// The path given.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A public address without authentication.
    #[error(
        "refusing to serve {addr} without authentication: it is not a loopback address. Give --api-keys FILE (one key per line), bind to 127.0.0.1, or pass --allow-unauthenticated-public if the network in front of it authenticates"
    )]
    PublicWithoutAuth {
        /// The address asked for.
        addr: std::net::SocketAddr,
    },
    /// The backend could not be set up.
    #[error("cannot set up the model backend: {0}")]
    Backend(String),
    /// Redis could not be reached or set up.
    #[cfg(feature = "redis")]
    #[error("{0} (--redis-url)")]
    Redis(#[from] synthkit::layer::redis::RedisError),
    /// An `--allowed-host` or `--cors-origin` value is not valid.
    #[error("cannot use {value:?}: {message}")]
    Access {
        /// The value given.
        value: String,
        /// What to give instead.
        message: String,
    },
    /// Binding or serving failed.
    #[error("the HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Gives an error answer without a JSON body the JSON error body, keeping its status and
/// headers (`Allow`, `Retry-After`, `WWW-Authenticate`, CORS).
pub(crate) fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    let replacement = ApiError::from_status(status).into_response();
    let (new_parts, body) = replacement.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    for (name, value) in &new_parts.headers {
        parts.headers.insert(name.clone(), value.clone());
    }
    Response::from_parts(parts, body)
}
