//! Request accounting, the outermost layer (it also gives bodiless error answers their
//! JSON body, [`crate::stack`]): every answer is counted by route and status in
//! `synthkit_http_requests_total`. A synthesis request is also in the in-flight gauge and
//! the latency histogram until the last byte of its body is handed to the connection; a
//! request whose client went away first (its future or its body dropped: a closed
//! connection, a stream not read to its end) is counted as 499, whatever status its
//! answer had begun with.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as _, Frame, SizeHint};

use crate::api::SYNTHESIZE_PATH;
use crate::error::json_errors;
use crate::state::AppState;

/// The status counted for a request whose client left before its answer was sent.
pub const CLIENT_CLOSED: u16 = 499;

/// The routes, as metric labels (and [`REPORT_ROUTE`] for any report's path); any other
/// path is `other`.
const ROUTES: [&str; 5] = [
    SYNTHESIZE_PATH,
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
];

/// The report route's label: one for every report id.
const REPORT_ROUTE: &str = "/v1/report/{id}";

fn route_label(path: &str) -> &'static str {
    if let Some(id) = path.strip_prefix("/v1/report/")
        && !id.is_empty()
        && !id.contains('/')
    {
        return REPORT_ROUTE;
    }
    ROUTES
        .iter()
        .find(|r| **r == path)
        .copied()
        .unwrap_or("other")
}

/// Counts every answer; see the module documentation.
pub(crate) async fn count(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = route_label(request.uri().path());
    if route != SYNTHESIZE_PATH {
        let response = json_errors(next.run(request).await);
        state
            .inner
            .metrics
            .count_request(route, response.status().as_u16());
        return response;
    }
    let mut guard = RequestGuard::start(state);
    let response = json_errors(next.run(request).await);
    guard.status = response.status().as_u16();
    let (parts, body) = response.into_parts();
    let body = CountedBody {
        inner: body,
        guard: Some(guard),
    };
    Response::from_parts(parts, Body::new(body))
}

/// One synthesis request: in the in-flight gauge while it lives, then counted with its
/// status if it was answered in full, else as 499.
struct RequestGuard {
    state: AppState,
    started: Instant,
    status: u16,
    answered: bool,
}

impl RequestGuard {
    fn start(state: AppState) -> Self {
        let m = &state.inner.metrics;
        m.requests_in_flight.fetch_add(1, Ordering::SeqCst);
        Self {
            state,
            started: Instant::now(),
            status: CLIENT_CLOSED,
            answered: false,
        }
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let m = &self.state.inner.metrics;
        m.request_duration.observe(self.started.elapsed());
        let status = if self.answered {
            self.status
        } else {
            CLIENT_CLOSED
        };
        m.count_request(SYNTHESIZE_PATH, status);
        if m.requests_in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.state.inner.idle.notify_waiters();
        }
    }
}

/// A synthesis response's body: counts the request once the body has ended, or as 499
/// when it is dropped before.
struct CountedBody {
    inner: Body,
    guard: Option<RequestGuard>,
}

impl CountedBody {
    fn answered(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            guard.answered = true;
        }
    }
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => this.answered(),
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.answered(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for CountedBody {
    fn drop(&mut self) {
        if self.inner.is_end_stream() {
            self.answered();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_paths_share_one_label() {
        assert_eq!(route_label("/healthz"), "/healthz");
        assert_eq!(route_label("/v1/synthesize"), "/v1/synthesize");
        assert_eq!(route_label("/wp-login.php"), "other");
        assert_eq!(route_label("/v1/report/0123abcd"), "/v1/report/{id}");
        assert_eq!(route_label("/v1/report/"), "other");
        assert_eq!(route_label("/v1/report/a/b"), "other");
    }
}
