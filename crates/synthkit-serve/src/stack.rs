//! The routes and the order of their layers: the one place where it lives.
//!
//! Below these, each connection has hyper's own limits ([`crate::server`]): the header
//! timeout, the header count and buffer size, HTTP/2 streams, the idle timeout.
//!
//! Every request passes, outermost first:
//!
//! 1. `accounting::count`: every answer counted by route and status (499: the client
//!    left first); an error answer without a JSON body, whichever layer made it, gets
//!    the documented `{"error": {"kind", "message"}}` body here (`error::json_errors`);
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
//! 1. `auth::require_key`: `Authorization: Bearer KEY` when there are keys (401), before
//!    any byte of the body is read;
//! 2. `admit`, in this order:
//!    - the body (`crate::body`): `Content-Type: application/json` (415), then the body
//!      read whole within `body_timeout` of the headers (408 `body_timeout`),
//!      `max_body_bytes` (413; a body declared over it is read and dropped, up to twice
//!      the limit, so that a client that sends its whole body before reading sees the
//!      413 instead of a broken pipe) and the bytes of all bodies being read at once,
//!      `max_pending_body_bytes` (503 `overloaded`);
//!    - then one of `max_requests` slots, or 503 `overloaded` with `Retry-After` at once
//!      (load shedding), held until the answer's head (a stream's events then run under
//!      their own deadline, [`crate::sse`]). The slot is taken only once the body is in,
//!      so slow bodies hold none; it is taken here rather than by tower's concurrency
//!      limit, which takes it when its readiness is polled, before the body is read;
//! 3. `timed_out`: 504 `timeout` after the `request_timeout` (tower), counted from when
//!    the slot is taken;
//! 4. axum's `DefaultBodyLimit` of `max_body_bytes` for the handler's extractor (the body
//!    is already whole and within it).
//!
//! Checks that always run together share one middleware: each `from_fn` layer costs an
//! allocation and a boxed future per request.
//!
//! `GET /metrics` and `GET /v1/report/{id}` sit behind the keys; `/healthz`, `/readyz` and
//! `/openapi.json` are open.
//! Any other path is 404 and any other method 405, both as JSON.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::Semaphore;
use tower::BoxError;
use tower::ServiceBuilder;

use crate::access::{self, AccessRules};
use crate::accounting;
use crate::api::SYNTHESIZE_PATH;
use crate::auth;
use crate::body::BodyReader;
use crate::error::ApiError;
use crate::handlers;
use crate::state::AppState;

/// The service's routes and layers on `state`, for a listener bound to `bind` (a loopback
/// bind only answers loopback `Host` names, see [`crate::access`]).
pub fn router(state: AppState, bind: SocketAddr) -> Router {
    let limits = state.inner.limits;
    let rules = AccessRules::new((*state.inner.access).clone(), bind.ip().is_loopback());
    let timeout_secs = limits.request_timeout.as_secs().max(1);
    // The keys, shared by the routes that require one (cloned per request: an Arc).
    let keys = state.inner.keys.clone().map(Arc::new);

    let synthesize = Router::new()
        .route(SYNTHESIZE_PATH, post(handlers::synthesize))
        .route_layer(
            ServiceBuilder::new()
                .layer(middleware::from_fn_with_state(
                    keys.clone(),
                    auth::require_key,
                ))
                .layer(middleware::from_fn_with_state(
                    Admission {
                        body: BodyReader::new(&limits),
                        slots: Arc::new(Semaphore::new(
                            limits.max_requests.clamp(1, Semaphore::MAX_PERMITS),
                        )),
                    },
                    admit,
                ))
                .layer(HandleErrorLayer::new(move |e: BoxError| async move {
                    timed_out(e, timeout_secs)
                }))
                .timeout(limits.request_timeout)
                .layer(DefaultBodyLimit::max(limits.max_body_bytes)),
        );
    let metrics = Router::new()
        .route("/metrics", get(handlers::metrics))
        .route("/v1/report/{id}", get(crate::report_route::report))
        .route_layer(middleware::from_fn_with_state(keys, auth::require_key));
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

/// The timeout layer's errors as JSON answers.
fn timed_out(error: BoxError, timeout_secs: u64) -> Response {
    if error.is::<tower::timeout::error::Elapsed>() {
        ApiError::Timeout { secs: timeout_secs }.into_response()
    } else {
        tracing::warn!(%error, "a request failed in the service's layers");
        ApiError::from_status(StatusCode::INTERNAL_SERVER_ERROR).into_response()
    }
}

/// What `admit` needs: the body's reader and the `max_requests` slots.
#[derive(Clone)]
struct Admission {
    body: BodyReader,
    slots: Arc<Semaphore>,
}

/// The body read whole, then a slot taken (503 `overloaded` when none is free); see the
/// module documentation.
async fn admit(State(admission): State<Admission>, request: Request, next: Next) -> Response {
    let request = match admission.body.read(request).await {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let Ok(_slot) = Arc::clone(&admission.slots).try_acquire_owned() else {
        return ApiError::Overloaded.into_response();
    };
    next.run(request).await
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
