//! The routes and the order of their layers: the one place where it lives.
//!
//! Below these, each connection has hyper's own limits ([`crate::server`]): the header
//! timeout, the header count and buffer size, HTTP/2 streams, the idle timeout.
//!
//! Every request passes, outermost first:
//!
//! 1. `accounting::count`: every answer counted by route and status (499: the client
//!    left first); an error answer without a JSON body, whichever layer made it, gets
//!    the documented `{"error": {"kind", "message"}}` body here (`json_errors`);
//! 2. `front_door`, four checks of the request head, in this order:
//!    - a request target over `max_uri_bytes` is 414, more than `max_headers` headers or
//!      a head over `max_header_bytes` is 431;
//!    - while shutting down, a new synthesis is 503 `shutting_down`, and every answer
//!      says `Connection: close` (connections wind down one by one while probes still
//!      get through);
//!    - a `Host` the service does not answer to is 421 ([`crate::access`]);
//!    - a request from an unlisted web origin is 403;
//! 3. CORS (tower-http) for the listed origins: their preflights are answered here.
//!
//! Then the routes. `POST /v1/synthesize` has, outermost first:
//!
//! 1. `overloaded_or_timed_out`: 503 `overloaded` with `Retry-After`, or 504 `timeout`;
//! 2. load shedding (tower) over a global concurrency limit of `max_requests`;
//! 3. the `request_timeout` (tower): body upload and synthesis; a stream's events then
//!    run under their own deadline ([`crate::sse`]);
//! 4. `auth::require_key`: `Authorization: Bearer KEY` when there are keys (401);
//! 5. `check_body`: `Content-Type: application/json` (415); a body declared over
//!    `max_body_bytes` is read and dropped (up to twice the limit), then answered 413,
//!    so that a client that sends its whole body before reading sees the 413 instead of
//!    a broken pipe;
//! 6. axum's `DefaultBodyLimit` of `max_body_bytes` (a body without a length that grows
//!    past it is 413 as it is read).
//!
//! Checks that always run together share one middleware: each `from_fn` layer costs an
//! allocation and a boxed future per request.
//!
//! `GET /metrics` and `GET /v1/report/{id}` sit behind the keys; `/healthz`, `/readyz` and
//! `/openapi.json` are open.
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
use tower::BoxError;
use tower::ServiceBuilder;

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
                .layer(middleware::from_fn_with_state(
                    limits.max_body_bytes,
                    check_body,
                ))
                .layer(DefaultBodyLimit::max(limits.max_body_bytes)),
        );
    let metrics = Router::new()
        .route("/metrics", get(handlers::metrics))
        .route("/v1/report/{id}", get(crate::report_route::report))
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
                .layer(middleware::from_fn_with_state(
                    FrontDoor {
                        state: state.clone(),
                        rules: rules.clone(),
                    },
                    front_door,
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

/// What the front door needs.
#[derive(Clone)]
struct FrontDoor {
    state: AppState,
    rules: AccessRules,
}

/// The checks of the request head; see the module documentation.
async fn front_door(State(door): State<FrontDoor>, request: Request, next: Next) -> Response {
    let refused = head_limits(&door.state.inner.limits, &request)
        .or_else(|| {
            (door.state.is_draining() && request.uri().path() == SYNTHESIZE_PATH)
                .then_some(ApiError::ShuttingDown)
        })
        .or_else(|| access::refuse_host(&door.rules, &request))
        .or_else(|| access::refuse_origin(&door.rules, &request));
    let mut response = match refused {
        Some(e) => e.into_response(),
        None => next.run(request).await,
    };
    if door.state.is_draining() {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// 414 for a long request target, 431 for too many or too large headers.
fn head_limits(limits: &crate::ServiceLimits, request: &Request) -> Option<ApiError> {
    let uri = request.uri();
    let target = uri.path_and_query().map_or(0, |p| p.as_str().len())
        + uri.authority().map_or(0, |a| a.as_str().len());
    if target > limits.max_uri_bytes {
        return Some(ApiError::UriTooLong {
            limit: limits.max_uri_bytes,
        });
    }
    let headers = request.headers();
    if headers.len() > limits.max_headers {
        return Some(ApiError::TooManyHeaders {
            given: headers.len(),
            limit: limits.max_headers,
        });
    }
    // The request line ("METHOD target HTTP/1.1\r\n") and each "name: value\r\n".
    let head = request.method().as_str().len()
        + target
        + 12
        + headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum::<usize>();
    (head > limits.max_header_bytes).then_some(ApiError::HeadersTooLarge {
        limit: limits.max_header_bytes,
    })
}

/// How much of a body declared over the limit is still read (and dropped) so that its
/// client reads the 413: the limit again, at least 1 MiB.
fn drain_cap(limit: usize) -> u64 {
    let limit = limit as u64;
    limit.saturating_add(limit.max(1 << 20))
}

/// 415 for a body that is not JSON; 413, after reading it (up to [`drain_cap`]), for a
/// body declared over `limit` bytes; see the module documentation.
async fn check_body(State(limit): State<usize>, request: Request, next: Next) -> Response {
    if let Some(refused) = access::refuse_non_json(&request) {
        return refused.into_response();
    }
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
