//! [`Recorder`]: what reached any loopback app, request by request; and [`numbered`], an
//! app whose answer depends on how many requests came before.
//!
//! The recorder is a middleware: it keeps each request (method, path, headers, body)
//! *before* the app's handler runs, so by the time a client holds its answer the request
//! is recorded. A test that checks "no such request was sent" after the client process
//! ended therefore needs no sleep: nothing can still be on its way into the record.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request as AxumRequest, State};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;

/// One request as the app received it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `GET`, `POST`...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// Every header sent.
    pub headers: HeaderMap,
    /// The body's bytes.
    pub body: Bytes,
}

impl Request {
    /// A header's value, if sent and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Whether any header's value contains `needle`.
    pub fn headers_contain(&self, needle: &str) -> bool {
        self.headers
            .values()
            .any(|v| String::from_utf8_lossy(v.as_bytes()).contains(needle))
    }
}

/// Records every request that reaches the apps it wraps; clones share one record.
#[derive(Clone, Default)]
pub struct Recorder {
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Recorder {
    /// `app` with every request recorded here first (routes and fallback alike).
    pub fn wrap(&self, app: Router) -> Router {
        app.layer(middleware::from_fn_with_state(self.clone(), record))
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests whose path ends with `suffix` (`/chat/completions`, `/messages`...).
    pub fn to(&self, suffix: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.ends_with(suffix))
            .collect()
    }

    /// How many requests so far.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

async fn record(State(recorder): State<Recorder>, request: AxumRequest, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    recorder.seen.lock().unwrap().push(Request {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    next.run(AxumRequest::from_parts(parts, Body::from(body)))
        .await
}

/// An app that answers `POST path` with `reply(n)` for its `n`-th request (from 0): a
/// server that fails the first calls, or every other one, then answers.
pub fn numbered<F>(path: &str, reply: F) -> Router
where
    F: Fn(usize) -> Response + Clone + Send + Sync + 'static,
{
    let calls = Arc::new(AtomicUsize::new(0));
    Router::new().route(
        path,
        post(move || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let response = reply(n);
            async move { response }
        }),
    )
}
