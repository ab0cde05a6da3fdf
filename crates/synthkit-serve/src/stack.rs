//! The routes and the order of their layers: the one place where it lives.
//!
//! Below these, each connection has hyper's own limits ([`crate::server`]): the header
//! timeout, the header count and buffer size, HTTP/2 streams, the idle timeout.
//!
//! Every request passes, outermost first:
//!
//! 1. [`accounting::count`]: every answer counted by route and status (499: the client
//!    left first);
//! 2. [`json_errors`]: an error answer without a JSON body, whichever layer made it, gets
//!    the documented `{"error": {"kind", "message"}}` body;
//! 3. [`head_limits`]: a request target over `max_uri_bytes` is 414, more than
//!    `max_headers` headers or a head over `max_header_bytes` is 431;
//! 4. [`draining`]: while shutting down, answers say `Connection: close` (connections
//!    wind down one by one while probes still get through) and new syntheses get 503;
//! 5. [`access::check_host`]: a `Host` the service does not answer to is 421;
//! 6. [`access::check_origin`]: a request from an unlisted web origin is 403;
//! 7. CORS (tower-http) for the listed origins: their preflights are answered here.
//!
//! Then the routes. `POST /v1/synthesize` has, outermost first:
//!
//! 1. [`overloaded_or_timed_out`]: 503 `overloaded` with `Retry-After`, or 504 `timeout`;
//! 2. load shedding (tower) over a global concurrency limit of `max_requests`;
//! 3. the `request_timeout` (tower): body upload and synthesis; a stream's events then
//!    run under their own deadline ([`crate::sse`]);
//! 4. [`auth::require_key`]: `Authorization: Bearer KEY` when there are keys (401);
//! 5. [`access::require_json`]: `Content-Type: application/json` (415);
//! 6. [`drain_oversized`]: a body declared over `max_body_bytes` is read and dropped (up
//!    to twice the limit), then answered 413, so that a client that sends its whole body
//!    before reading sees the 413 instead of a broken pipe;
//! 7. axum's `DefaultBodyLimit` of `max_body_bytes` (a body without a length that grows
//!    past it is 413 as it is read).
//!
//! `GET /metrics` sits behind the keys; `/healthz`, `/readyz` and `/openapi.json` are open.
//! Any other path is 404 and any other method 405, both as JSON.

use std::net::SocketAddr;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use tower::ServiceBuilder;
use tower::BoxError;

use crate::access::{self, AccessRules};
use crate::accounting;
use crate::auth;
use crate::error::ApiError;
use crate::handlers::{self, SYNTHESIZE_PATH};
use crate::state::AppState;

/// The service's routes and layers on `state`, for a listener bound to `bind` (a loopback
/// bind only answers loopback `Host` names, see [`crate::access`]).
pub fn router(state: AppState, bind: SocketAddr) -> Router {
    let limits = state.inner.limits;
    let rules = AccessRules::new((*state.inner.access).clone(), bind.ip().is_loopback());
    let timeout_secs = limits.request_timeout.as_secs().max(1);

    let synthesize = Router::new()
        .route(SYNTHESIZE_PATH, post(handlers::synthesize))
        .route_layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(move |e: BoxError| async move {
                    overloaded_or_timed_out(e, timeout_secs)
                }))
                .load_shed()
                .concurrency_limit(limits.max_requests)
                .timeout(limits.request_timeout)
                .layer(middleware::from_fn_with_state(
                    state.clone(),
                    auth::require_key,
                ))
                .layer(middleware::from_fn(access::require_json))
                .layer(middleware::from_fn_with_state(
                    limits.max_body_bytes,
                    drain_oversized,
                ))
                .layer(DefaultBodyLimit::max(limits.max_body_bytes)),
        );
    let metrics = Router::new()
        .route("/metrics", get(handlers::metrics))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ));
    let open = Router::new()
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .route("/openapi.json", get(handlers::openapi));

    Router::new()
        .merge(synthesize)
        .merge(metrics)
        .merge(open)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(
            ServiceBuilder::new()
                .layer(middleware::from_fn_with_state(
                    state.clone(),
                    accounting::count,
                ))
                .layer(middleware::map_response(json_errors))
                .layer(middleware::from_fn_with_state(limits, head_limits))
                .layer(middleware::from_fn_with_state(state.clone(), draining))
                .layer(middleware::from_fn_with_state(
                    rules.clone(),
                    access::check_host,
                ))
                .layer(middleware::from_fn_with_state(
                    rules.clone(),
                    access::check_origin,
                ))
                .layer(rules.cors_layer()),
        )
        .with_state(state)
}

async fn not_found() -> Response {
    ApiError::NotFound.into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::MethodNotAllowed.into_response()
}

/// The errors of the shedding and timeout layers as JSON answers.
fn overloaded_or_timed_out(error: BoxError, timeout_secs: u64) -> Response {
    if error.is::<tower::load_shed::error::Overloaded>() {
        ApiError::Overloaded.into_response()
    } else if error.is::<tower::timeout::error::Elapsed>() {
        ApiError::Timeout { secs: timeout_secs }.into_response()
    } else {
        tracing::warn!(%error, "a request failed in the service's layers");
        ApiError::from_status(StatusCode::INTERNAL_SERVER_ERROR).into_response()
    }
}

/// Gives an error answer without a JSON body the JSON error body, keeping its status and
/// headers (`Allow`, `Retry-After`, `WWW-Authenticate`, CORS).
async fn json_errors(response: Response) -> Response {
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

/// 414 for a long request target, 431 for too many or too large headers.
async fn head_limits(
    State(limits): State<crate::ServiceLimits>,
    request: Request,
    next: Next,
) -> Response {
    let uri = request.uri();
    let target = uri.path_and_query().map_or(0, |p| p.as_str().len())
        + uri.authority().map_or(0, |a| a.as_str().len());
    if target > limits.max_uri_bytes {
        return ApiError::UriTooLong {
            limit: limits.max_uri_bytes,
        }
        .into_response();
    }
    let headers = request.headers();
    if headers.len() > limits.max_headers {
        return ApiError::TooManyHeaders {
            given: headers.len(),
            limit: limits.max_headers,
        }
        .into_response();
    }
    // The request line ("METHOD target HTTP/1.1\r\n") and each "name: value\r\n".
    let head = request.method().as_str().len()
        + target
        + 12
        + headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum::<usize>();
    if head > limits.max_header_bytes {
        return ApiError::HeadersTooLarge {
            limit: limits.max_header_bytes,
        }
        .into_response();
    }
    next.run(request).await
}

/// While shutting down: new syntheses get 503 `shutting_down`, and every answer closes
/// its connection after it.
async fn draining(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !state.is_draining() {
        return next.run(request).await;
    }
    let mut response = if request.uri().path() == SYNTHESIZE_PATH {
        ApiError::ShuttingDown.into_response()
    } else {
        next.run(request).await
    };
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// How much of a body declared over the limit is still read (and dropped) so that its
/// client reads the 413: the limit again, at least 1 MiB.
fn drain_cap(limit: usize) -> u64 {
    let limit = limit as u64;
    limit.saturating_add(limit.max(1 << 20))
}

/// Answers a body declared over `limit` bytes with 413 after reading it (up to
/// [`drain_cap`]); see the module documentation.
async fn drain_oversized(State(limit): State<usize>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let Some(declared) = declared.filter(|n| *n > limit as u64) else {
        return next.run(request).await;
    };
    if declared <= drain_cap(limit) {
        let mut body = request.into_body().into_data_stream();
        let mut read: u64 = 0;
        while let Some(Ok(chunk)) = body.next().await {
            read = read.saturating_add(chunk.len() as u64);
            if read > declared {
                break;
            }
        }
    }
    let mut response = ApiError::BodyTooLarge { limit }.into_response();
    if declared > drain_cap(limit) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
