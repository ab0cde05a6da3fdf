//! The flags of `serve`: the address, who may call, the service's own limits, the model
//! (the flags of `ask`), its rates and retries, and the response cache.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use synthkit::layer::cache::MemoryCache;
use synthkit_serve::ServiceLimits;

use super::limits::LimitArgs;
use super::model::ModelArgs;
use super::otel::OtelArgs;
use super::values::positive_seconds;

/// `synthkit serve`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    synthkit serve\n  \
    synthkit serve --bind 0.0.0.0:8080 --api-keys keys.txt --base-url http://127.0.0.1:8081/v1\n  \
    curl -s localhost:8080/v1/synthesize -H 'content-type: application/json' -d '{\"query\": \"...\", \"nodes\": [\"...\"]}'")]
pub struct ServeArgs {
    /// The address to listen on. Addresses other than loopback need --api-keys (or
    /// --allow-unauthenticated-public).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Who may call: keys, public binds, hosts, origins.
    #[command(flatten)]
    pub access: AccessArgs,
    /// The service's own limits: bodies, nodes, timeouts, costs, connections, headers.
    #[command(flatten)]
    pub service: ServiceLimitArgs,

    /// The backend and how to reach and sample the model: the flags of `ask`.
    #[command(flatten)]
    pub model_args: ModelArgs,
    /// OpenTelemetry export; each request continues its caller's `traceparent`.
    #[command(flatten)]
    pub otel: OtelArgs,
    /// Model calls in flight at the backend across all requests (0: no cap; never more
    /// than the server's slots when it says).
    #[arg(long, value_name = "N", default_value_t = 32, help_heading = "Model")]
    pub concurrency: usize,
    /// Requests and tokens per minute (across all requests; with --redis-url, across all
    /// replicas), retries.
    #[command(flatten)]
    pub limits: LimitArgs,

    /// Evidence first and the grounding check.
    #[command(flatten)]
    pub checks: super::answer::CheckArgs,
    /// Prices: each response's usage says what it cost (`cost_usd`), and
    /// `synthkit_model_cost_usd_total` what every request did.
    #[command(flatten)]
    pub prices: super::cost::PriceArgs,
    /// The most one request may cost, in USD at the prices (needs them): a request whose
    /// plan may cost more is refused (422 `too_costly`) and no call goes out that could
    /// take a request past it (422 `cost_cap`); a request's `max_cost` may only lower it.
    #[arg(long, value_name = "USD", help_heading = "Cost")]
    pub max_cost_per_request: Option<f64>,

    /// The response cache: SQLite, memory or Redis.
    #[command(flatten)]
    pub cache: CacheArgs,
}

/// `serve`'s access flags.
#[derive(Debug, Args)]
#[command(next_help_heading = "Access")]
pub struct AccessArgs {
    /// Require `Authorization: Bearer KEY` with one of the keys in FILE (one per line,
    /// `#` comments) on /v1/* and /metrics.
    #[arg(long, value_name = "FILE")]
    pub api_keys: Option<PathBuf>,
    /// Serve a non-loopback address without --api-keys (when a proxy in front
    /// authenticates).
    #[arg(long)]
    pub allow_unauthenticated_public: bool,
    /// Also answer requests whose Host header names HOST (any port; repeatable; `*`: any
    /// host). On a loopback bind only loopback names are answered otherwise (421), which
    /// stops DNS rebinding; on another bind, listing hosts turns the check on.
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,
    /// Answer requests from web pages at ORIGIN (`scheme://host[:port]`; repeatable; `*`:
    /// any), with CORS headers. Requests carrying another Origin are refused (403).
    #[arg(long, value_name = "ORIGIN")]
    pub cors_origin: Vec<String>,
}

/// `serve`'s limits of the service itself (the model's rates and retries are [`LimitArgs`]).
#[derive(Debug, Args)]
#[command(next_help_heading = "Limits")]
pub struct ServiceLimitArgs {
    /// On SIGTERM or Ctrl-C, seconds the requests in flight may still run before they
    /// are cancelled.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "SECS",
        default_value_t = 30.0
    )]
    pub shutdown_grace: f64,
    /// The largest request body in bytes (413 above it).
    #[arg(hide_short_help = true, long, value_name = "BYTES", default_value_t = ServiceLimits::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// The most nodes in one request (422 above it).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_NODES)]
    pub max_nodes: usize,
    /// Seconds a client has to send a synthesis request's body after its headers (408
    /// `body_timeout` after it). Bodies are read before a request takes one of the
    /// --max-requests slots.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "SECS",
        default_value_t = 30.0
    )]
    pub body_timeout: f64,
    /// Bytes of request bodies being read at once across all requests; a body whose next
    /// bytes would go over it is refused with 503 `overloaded` (512 MiB by default).
    #[arg(hide_short_help = true, long, value_name = "BYTES", default_value_t = ServiceLimits::DEFAULT_MAX_PENDING_BODY_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_pending_body_bytes: usize,
    /// Seconds one synthesis may take once its body is read (504, or an `error` event,
    /// after it).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "SECS",
        default_value_t = 300.0
    )]
    pub request_timeout: f64,
    /// The most model calls of one request in flight at once (a request's `concurrency`
    /// is capped at it).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_REQUEST_CONCURRENCY)]
    pub max_request_concurrency: usize,
    /// The most model calls one request may plan: a request over it is refused with 422
    /// `too_costly` and its plan, before any model call.
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_CALLS_PER_REQUEST)]
    pub max_calls_per_request: usize,
    /// The most prompt tokens one request may plan, all its calls together (422
    /// `too_costly` above it, before any model call).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_PROMPT_TOKENS_PER_REQUEST)]
    pub max_prompt_tokens_per_request: usize,
    /// The most completion tokens one request may plan: its calls' `max_tokens` together,
    /// thinking reserve included (422 `too_costly` above it, before any model call).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_COMPLETION_TOKENS_PER_REQUEST)]
    pub max_completion_tokens_per_request: usize,
    /// The largest `thinking_reserve` a request may ask, in tokens per call (422
    /// `thinking_reserve_too_large` above it).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_THINKING_RESERVE)]
    pub max_thinking_reserve: usize,
    /// Synthesis requests being answered at once across all connections (a request takes
    /// its slot once its body is read); more are refused at once with 503 `overloaded`
    /// and Retry-After.
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_REQUESTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_requests: usize,
    /// Open client connections at once (lowered to fit the open-file limit); more wait in
    /// the kernel's accept backlog.
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// Seconds a client has to send a request's headers, from when its connection opens
    /// or its previous response ends (slow headers; idle HTTP/1 keep-alive).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "SECS",
        default_value_t = 10.0
    )]
    pub header_timeout: f64,
    /// Seconds a connection may stay with no request in flight before it is closed
    /// (HTTP/2; HTTP/1 connections close after --header-timeout first).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "SECS",
        default_value_t = 60.0
    )]
    pub keep_alive_timeout: f64,
    /// The most request headers (431 above it).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_MAX_HEADERS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_headers: usize,
    /// The largest request line and headers in bytes (431 above it).
    #[arg(hide_short_help = true, long, value_name = "BYTES", default_value_t = ServiceLimits::DEFAULT_MAX_HEADER_BYTES)]
    pub max_header_bytes: usize,
    /// The longest request target (path and query) in bytes (414 above it).
    #[arg(hide_short_help = true, long, value_name = "BYTES", default_value_t = ServiceLimits::DEFAULT_MAX_URI_BYTES)]
    pub max_uri_bytes: usize,
    /// HTTP/2 streams open at once on one connection.
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = ServiceLimits::DEFAULT_HTTP2_MAX_STREAMS, value_parser = clap::value_parser!(u32).range(1..))]
    pub http2_max_streams: u32,
    /// Seconds between two checks of the backend for /readyz (a probe answers from the
    /// last check).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "SECS",
        default_value_t = 1.0
    )]
    pub readiness_interval: f64,
}

impl ServiceLimitArgs {
    /// The service limits the flags ask for.
    pub fn limits(&self) -> Result<ServiceLimits> {
        Ok(ServiceLimits::default()
            .with_max_body_bytes(self.max_body_bytes)
            .with_max_nodes(self.max_nodes)
            .with_body_timeout(positive_seconds("--body-timeout", self.body_timeout)?)
            .with_max_pending_body_bytes(self.max_pending_body_bytes)
            .with_request_timeout(positive_seconds("--request-timeout", self.request_timeout)?)
            .with_max_request_concurrency(self.max_request_concurrency)
            .with_max_calls_per_request(self.max_calls_per_request)
            .with_max_prompt_tokens_per_request(self.max_prompt_tokens_per_request)
            .with_max_completion_tokens_per_request(self.max_completion_tokens_per_request)
            .with_max_thinking_reserve(self.max_thinking_reserve)
            .with_shutdown_grace(positive_seconds("--shutdown-grace", self.shutdown_grace)?)
            .with_max_requests(self.max_requests)
            .with_max_connections(self.max_connections)
            .with_header_timeout(positive_seconds("--header-timeout", self.header_timeout)?)
            .with_keep_alive_timeout(positive_seconds(
                "--keep-alive-timeout",
                self.keep_alive_timeout,
            )?)
            .with_max_headers(self.max_headers)
            .with_max_header_bytes(self.max_header_bytes)
            .with_max_uri_bytes(self.max_uri_bytes)
            .with_http2_max_streams(self.http2_max_streams)
            .with_readiness_interval(positive_seconds(
                "--readiness-interval",
                self.readiness_interval,
            )?))
    }
}

/// `serve`'s cache flags.
#[derive(Debug, Args)]
#[command(next_help_heading = "Cache")]
pub struct CacheArgs {
    /// Keep model replies in the SQLite file FILE, shared by every request.
    #[arg(long, value_name = "FILE", conflicts_with = "memory_cache")]
    pub cache: Option<PathBuf>,
    /// Keep model replies in memory for the life of the process, within
    /// --memory-cache-bytes (the entries not used recently are evicted first).
    #[arg(long)]
    pub memory_cache: bool,
    /// The most bytes of keys and replies the memory cache holds (64 MiB by default).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = MemoryCache::DEFAULT_MAX_BYTES,
        value_parser = clap::value_parser!(u64).range(1..),
        requires = "memory_cache"
    )]
    pub memory_cache_bytes: u64,
}
