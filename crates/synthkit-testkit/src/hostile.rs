//! [`HostilePeer`]: a loopback server that answers what the test tells it to, recording
//! every request target (path and query) it gets; and the replies no well-behaved server
//! sends: bodies without end ([`endless_body`]), streams that keep the connection busy
//! without a token ([`sse_then_repeat`]), replies with any headers ([`json_with_headers`]).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, Uri, header};
use axum::response::Response;
use serde_json::Value;

use crate::server::Server;

type Answer = dyn Fn(&str, &Value) -> Response + Send + Sync;

/// A running hostile peer; dropping it stops the server.
pub struct HostilePeer {
    /// `http://127.0.0.1:PORT/v1`.
    pub base: String,
    seen: Arc<Mutex<Vec<String>>>,
    server: Server,
}

impl HostilePeer {
    /// Answers every request (any method, any path) with `answer(path, body)`, the body
    /// parsed as JSON (`null` when it is not JSON).
    pub fn start(answer: impl Fn(&str, &Value) -> Response + Send + Sync + 'static) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answer> = Arc::new(answer);
        let record = seen.clone();
        let app = Router::new().fallback(move |uri: Uri, body: Bytes| {
            let answer = answer.clone();
            let record = record.clone();
            async move {
                let target = uri
                    .path_and_query()
                    .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
                record.lock().unwrap().push(target);
                let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
                answer(uri.path(), &json)
            }
        });
        let server = Server::start(app);
        Self {
            base: server.base.clone(),
            seen,
            server,
        }
    }

    /// Every request target (path and query, as sent) so far.
    pub fn targets(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.server.port()
    }
}

/// A JSON reply with `status` and `headers`.
pub fn json_with_headers(status: u16, headers: &[(&str, &str)], body: &Value) -> Response {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header(header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        b = b.header(*name, *value);
    }
    b.body(Body::from(body.to_string())).unwrap()
}

/// A reply with `status` whose body never ends (64 KiB chunks of `x`, as fast as they
/// are read), declared as JSON and without a length.
pub fn endless_body(status: u16) -> Response {
    let chunk = Bytes::from(vec![b'x'; 64 << 10]);
    let stream = repeating(
        move || Some(Ok::<_, Infallible>(chunk.clone())),
        Duration::ZERO,
    );
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// An SSE reply: the `first` events (each a whole `data: ...` / `event: ...` block,
/// without the blank line), then `repeat` every `every`, without end.
pub fn sse_then_repeat(first: &[String], repeat: &str, every: Duration) -> Response {
    let mut head: std::collections::VecDeque<String> =
        first.iter().map(|e| format!("{e}\n\n")).collect();
    let repeat = format!("{repeat}\n\n");
    let stream = repeating(
        move || {
            let next = head.pop_front().unwrap_or_else(|| repeat.clone());
            Some(Ok::<_, Infallible>(Bytes::from(next)))
        },
        every,
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// A stream of `next()`'s items, each after `pause` (the first at once).
fn repeating<T: Send + 'static>(
    next: impl FnMut() -> Option<T> + Send + 'static,
    pause: Duration,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold((true, next), move |(first, mut next)| async move {
        if !first && !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        let item = next()?;
        Some((item, (false, next)))
    })
}
