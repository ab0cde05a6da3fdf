//! Errors: [`ApiError`] (what a client is told, as `{"error": {"kind", "message"}}` with an
//! HTTP status) and [`ServeError`] (what stops the service from starting or running).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use synthkit::SynthError;
use synthkit::model::ModelError;

use crate::api::{ErrorBody, ErrorDetail};

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
    /// The synthesis did not finish within the per-request time limit.
    #[error(
        "the synthesis did not finish within {secs} s: send fewer nodes, use a mode with fewer calls (compact), or start the service with a larger --request-timeout"
    )]
    Timeout {
        /// The limit in seconds.
        secs: u64,
    },
    /// The service is shutting down and cancelled the request.
    #[error("the service is shutting down and cancelled this request: send it again")]
    ShuttingDown,
    /// The synthesis failed.
    #[error(transparent)]
    Synthesis(#[from] SynthError),
}

impl ApiError {
    /// The HTTP status of the error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::TooManyNodes { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ApiError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Synthesis(e) => synthesis_status(e),
        }
    }

    /// A stable machine-readable name: `unauthorized`, `invalid_request`,
    /// `body_too_large`, `too_many_nodes`, `timeout`, `shutting_down`, `invalid_option`,
    /// `model_error`, `model_timeout`, `model_rate_limited`, `truncated`,
    /// `synthesis_failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::BodyTooLarge { .. } => "body_too_large",
            ApiError::TooManyNodes { .. } => "too_many_nodes",
            ApiError::Timeout { .. } => "timeout",
            ApiError::ShuttingDown => "shutting_down",
            ApiError::Synthesis(e) => synthesis_kind(e),
        }
    }

    /// The JSON body: `{"error": {"kind": ..., "message": ...}}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                kind: self.kind().to_string(),
                message: self.to_string(),
            },
        }
    }
}

/// Statuses for synthesis failures: the caller's options (400), the model (502/504/429
/// passed on as 503 so clients back off), anything else (500).
fn synthesis_status(e: &SynthError) -> StatusCode {
    match synthesis_kind(e) {
        "invalid_option" => StatusCode::BAD_REQUEST,
        "model_timeout" => StatusCode::GATEWAY_TIMEOUT,
        "model_rate_limited" => StatusCode::SERVICE_UNAVAILABLE,
        "model_error" | "truncated" => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn synthesis_kind(e: &SynthError) -> &'static str {
    match e {
        SynthError::Budget(_)
        | SynthError::Template(_)
        | SynthError::Split(_)
        | SynthError::Tokenizer(_)
        | SynthError::UnknownMode(_)
        | SynthError::InvalidOption(_)
        | SynthError::DuplicateNodeId { .. } => "invalid_option",
        SynthError::Truncated { .. } => "truncated",
        SynthError::Model { source, .. } | SynthError::Count { source, .. } => match source {
            ModelError::Timeout { .. } => "model_timeout",
            ModelError::RateLimited { .. } => "model_rate_limited",
            _ => "model_error",
        },
        _ => "synthesis_failed",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = json_response(status, &self.body());
        if matches!(self, ApiError::Unauthorized(_)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
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
    #[error("cannot use Redis at {url}: {message}; check --redis-url and that the server is up")]
    Redis {
        /// The URL, password redacted.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// Binding or serving failed.
    #[error("the HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
}
