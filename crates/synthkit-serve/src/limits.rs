//! [`ServiceLimits`]: every bound the service keeps, on one request (body and its
//! deadline, nodes, time, thinking reserve, planned calls, prompt and completion tokens),
//! on all requests together (requests in flight, bodies being read), on connections (how
//! many, how long they may take to send headers or stay idle, header sizes, HTTP/2
//! streams) and on probes and shutdown. Each has a documented default and a `synthkit serve` flag of the same name.

use std::time::Duration;

/// The service's limits. `ServiceLimits::default()` holds every default; the `with_*`
/// methods change one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceLimits {
    /// The largest request body, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// The most nodes in one request (422 above it).
    pub max_nodes: usize,
    /// How long a client may take to send a synthesis request's body, from when its
    /// headers were read (408 `body_timeout` after it). The body is read whole before the
    /// request takes one of the `max_requests` slots, so a slow body holds no slot.
    pub body_timeout: Duration,
    /// Bytes of synthesis request bodies being read at once, across all requests: a body
    /// whose next bytes would go over it is refused with 503 `overloaded` and
    /// `Retry-After`. Bodies being read hold no `max_requests` slot, so this bounds their
    /// memory instead.
    pub max_pending_body_bytes: usize,
    /// The most time one synthesis may take once its body is read (504, or an `error`
    /// event, after it).
    pub request_timeout: Duration,
    /// The most model calls of one request in flight at once (a request's `concurrency`
    /// is capped at it; also its default).
    pub max_request_concurrency: usize,
    /// The most model calls one request may plan (422 `too_costly` above it, before any
    /// call; the request's plan is counted first, [`synthkit::plan`]).
    pub max_calls_per_request: usize,
    /// The most prompt tokens one request may plan, all its calls together (422
    /// `too_costly` above it, before any call).
    pub max_prompt_tokens_per_request: usize,
    /// The most completion tokens one request may plan: the sum of its calls'
    /// `max_tokens` (the output reserve plus the thinking reserve, or the smaller bound
    /// of an intermediate call), 422 `too_costly` above it, before any call.
    pub max_completion_tokens_per_request: usize,
    /// The largest `thinking_reserve` a request may ask (422
    /// `thinking_reserve_too_large` above it): the reserve is added to every call's
    /// `max_tokens`, above the service's `--num-output`.
    pub max_thinking_reserve: usize,
    /// On shutdown, how long requests in flight may still run before they are
    /// cancelled.
    pub shutdown_grace: Duration,
    /// Synthesis requests being answered at once, across all connections (a request
    /// takes its slot once its body is read); one more is refused at once with 503
    /// `overloaded` and `Retry-After`.
    pub max_requests: usize,
    /// Open connections at once. Beyond it new connections wait in the kernel's accept
    /// backlog (the ones being served are not disturbed). Lowered to fit the process's
    /// open-file limit (see [`crate::server`]).
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, counted from when the
    /// connection opens or its previous response ends; the connection is closed after it.
    /// This bounds slow headers and, for HTTP/1, idle keep-alive connections.
    pub header_timeout: Duration,
    /// A connection with no request in flight for this long is closed (HTTP/2 with a
    /// GOAWAY; HTTP/1 connections are closed by `header_timeout` first when it is
    /// shorter).
    pub keep_alive_timeout: Duration,
    /// The most request headers (431 above it).
    pub max_headers: usize,
    /// The largest request head in bytes, request line and headers (431 above it).
    pub max_header_bytes: usize,
    /// The longest request target (path and query) in bytes (414 above it).
    pub max_uri_bytes: usize,
    /// HTTP/2 streams (requests) open at once on one connection.
    pub http2_max_streams: u32,
    /// How often `/readyz`'s state is refreshed by asking the backend; a probe reads the
    /// last state and never waits for the backend.
    pub readiness_interval: Duration,
}

impl ServiceLimits {
    /// The default largest body: 10 MiB.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
    /// The default most nodes: 10,000.
    pub const DEFAULT_MAX_NODES: usize = 10_000;
    /// The default body deadline: 30 s (10 MiB, the default largest body, at 350 KB/s).
    pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default bytes of bodies being read at once: 512 MiB (51 bodies of the default
    /// largest size).
    pub const DEFAULT_MAX_PENDING_BODY_BYTES: usize = 512 * 1024 * 1024;
    /// The default time limit: 300 s.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
    /// The default calls in flight per request: the library's one default, 8
    /// ([`synthkit::synth::DEFAULT_CONCURRENCY`]).
    pub const DEFAULT_MAX_REQUEST_CONCURRENCY: usize = synthkit::synth::DEFAULT_CONCURRENCY;
    /// The default most model calls per request: 40 (as `synthkit ask --max-calls`).
    pub const DEFAULT_MAX_CALLS_PER_REQUEST: usize = 40;
    /// The default most prompt tokens per request: 200,000 (as `synthkit ask
    /// --max-total-prompt-tokens`).
    pub const DEFAULT_MAX_PROMPT_TOKENS_PER_REQUEST: usize = 200_000;
    /// The default most completion tokens per request: 50,000 (what the prompt-token cap
    /// costs at the usual price of output tokens, four times that of input tokens; 40
    /// calls of a 256-token output reserve need 10,240).
    pub const DEFAULT_MAX_COMPLETION_TOKENS_PER_REQUEST: usize = 50_000;
    /// The default largest thinking reserve: 4,096 tokens per call.
    pub const DEFAULT_MAX_THINKING_RESERVE: usize = 4096;
    /// The default shutdown grace: 30 s.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
    /// The default synthesis requests in flight: 256.
    pub const DEFAULT_MAX_REQUESTS: usize = 256;
    /// The default open connections: 1024.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
    /// The default header timeout: 10 s.
    pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default idle timeout of a connection: 60 s.
    pub const DEFAULT_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(60);
    /// The default most request headers: 50.
    pub const DEFAULT_MAX_HEADERS: usize = 50;
    /// The default largest request head: 16 KiB.
    pub const DEFAULT_MAX_HEADER_BYTES: usize = 16 * 1024;
    /// The default longest request target: 8 KiB.
    pub const DEFAULT_MAX_URI_BYTES: usize = 8 * 1024;
    /// The default HTTP/2 streams per connection: 100.
    pub const DEFAULT_HTTP2_MAX_STREAMS: u32 = 100;
    /// The default readiness refresh: every second.
    pub const DEFAULT_READINESS_INTERVAL: Duration = Duration::from_secs(1);

    /// Sets the largest body.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the most nodes.
    pub fn with_max_nodes(mut self, nodes: usize) -> Self {
        self.max_nodes = nodes;
        self
    }

    /// Sets the body deadline.
    pub fn with_body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Sets the bytes of bodies being read at once (at least 1).
    pub fn with_max_pending_body_bytes(mut self, bytes: usize) -> Self {
        self.max_pending_body_bytes = bytes.max(1);
        self
    }

    /// Sets the per-request time limit.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the most calls in flight per request (at least 1).
    pub fn with_max_request_concurrency(mut self, n: usize) -> Self {
        self.max_request_concurrency = n.max(1);
        self
    }

    /// Sets the most model calls one request may plan.
    pub fn with_max_calls_per_request(mut self, n: usize) -> Self {
        self.max_calls_per_request = n;
        self
    }

    /// Sets the most prompt tokens one request may plan.
    pub fn with_max_prompt_tokens_per_request(mut self, n: usize) -> Self {
        self.max_prompt_tokens_per_request = n;
        self
    }

    /// Sets the most completion tokens one request may plan.
    pub fn with_max_completion_tokens_per_request(mut self, n: usize) -> Self {
        self.max_completion_tokens_per_request = n;
        self
    }

    /// Sets the largest thinking reserve a request may ask.
    pub fn with_max_thinking_reserve(mut self, tokens: usize) -> Self {
        self.max_thinking_reserve = tokens;
        self
    }

    /// Sets the shutdown grace.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Sets the synthesis requests in flight across all connections (at least 1).
    pub fn with_max_requests(mut self, n: usize) -> Self {
        self.max_requests = n.max(1);
        self
    }

    /// Sets the open connections (at least 1).
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Sets the header timeout.
    pub fn with_header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// Sets the idle timeout of a connection.
    pub fn with_keep_alive_timeout(mut self, timeout: Duration) -> Self {
        self.keep_alive_timeout = timeout;
        self
    }

    /// Sets the most request headers (at least 1).
    pub fn with_max_headers(mut self, n: usize) -> Self {
        self.max_headers = n.max(1);
        self
    }

    /// Sets the largest request head in bytes.
    pub fn with_max_header_bytes(mut self, bytes: usize) -> Self {
        self.max_header_bytes = bytes;
        self
    }

    /// Sets the longest request target in bytes.
    pub fn with_max_uri_bytes(mut self, bytes: usize) -> Self {
        self.max_uri_bytes = bytes;
        self
    }

    /// Sets the HTTP/2 streams per connection (at least 1).
    pub fn with_http2_max_streams(mut self, n: u32) -> Self {
        self.http2_max_streams = n.max(1);
        self
    }

    /// Sets how often readiness is refreshed.
    pub fn with_readiness_interval(mut self, interval: Duration) -> Self {
        self.readiness_interval = interval;
        self
    }
}

impl Default for ServiceLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            max_nodes: Self::DEFAULT_MAX_NODES,
            body_timeout: Self::DEFAULT_BODY_TIMEOUT,
            max_pending_body_bytes: Self::DEFAULT_MAX_PENDING_BODY_BYTES,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            max_request_concurrency: Self::DEFAULT_MAX_REQUEST_CONCURRENCY,
            max_calls_per_request: Self::DEFAULT_MAX_CALLS_PER_REQUEST,
            max_prompt_tokens_per_request: Self::DEFAULT_MAX_PROMPT_TOKENS_PER_REQUEST,
            max_completion_tokens_per_request: Self::DEFAULT_MAX_COMPLETION_TOKENS_PER_REQUEST,
            max_thinking_reserve: Self::DEFAULT_MAX_THINKING_RESERVE,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
            max_requests: Self::DEFAULT_MAX_REQUESTS,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            header_timeout: Self::DEFAULT_HEADER_TIMEOUT,
            keep_alive_timeout: Self::DEFAULT_KEEP_ALIVE_TIMEOUT,
            max_headers: Self::DEFAULT_MAX_HEADERS,
            max_header_bytes: Self::DEFAULT_MAX_HEADER_BYTES,
            max_uri_bytes: Self::DEFAULT_MAX_URI_BYTES,
            http2_max_streams: Self::DEFAULT_HTTP2_MAX_STREAMS,
            readiness_interval: Self::DEFAULT_READINESS_INTERVAL,
        }
    }
}
