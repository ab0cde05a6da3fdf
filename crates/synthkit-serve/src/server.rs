//! Serving a listener: the accept loop, each connection's limits, and the shutdown.
//!
//! axum's own `serve` exposes none of the connection settings, so connections are served
//! here with hyper's builder (HTTP/1.1, and HTTP/2 with prior knowledge):
//!
//! - **A cap on open connections** ([`ServiceLimits::max_connections`], lowered to fit the
//!   process's open-file limit, see [`connection_cap`]): a connection is accepted only
//!   when a slot is free, so beyond the cap new connections wait in the kernel's accept
//!   backlog and the ones being served keep their file descriptors and memory.
//! - **The header timeout** (hyper's HTTP/1 `header_read_timeout`): a client has
//!   [`ServiceLimits::header_timeout`] to send a request's headers, from when the
//!   connection opens or its previous response ends. A connection that sends nothing, or
//!   nothing that starts an HTTP/2 stream, in that time is closed too.
//! - **The idle timeout**: a connection with no request in flight for
//!   [`ServiceLimits::keep_alive_timeout`] is closed (HTTP/2 with a GOAWAY).
//! - **Header limits**: hyper parses at most twice [`ServiceLimits::max_headers`] headers
//!   (at least 100) into a buffer of at most four times
//!   [`ServiceLimits::max_header_bytes`] (at least 16 KiB) and closes the connection with
//!   a bare 431 beyond; below that the service's own layer answers 414 and 431 as JSON.
//!   HTTP/2: [`ServiceLimits::http2_max_streams`] streams per connection, a header list of
//!   at most `max_header_bytes`, and hyper's defaults against reset floods.
//!
//! Accept errors (such as running out of file descriptors) are logged at most once every
//! 10 s with a count, and the loop backs off up to 1 s between tries.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tower::ServiceBuilder;
use tower_http::metrics::in_flight_requests::{InFlightRequestsCounter, InFlightRequestsLayer};

use crate::error::ServeError;
use crate::limits::ServiceLimits;
use crate::metrics::Metrics;
use crate::state::AppState;

/// How long connections may take to close after the shutdown (or an idle timeout) asked
/// them to.
const CLOSE_AFTER: Duration = Duration::from_secs(5);
/// File descriptors kept for everything but client connections (model calls, Redis,
/// SQLite, logs).
const FD_RESERVE: u64 = 128;
/// The most connections the cap can be set to.
const MAX_CONNECTIONS_CEILING: usize = 1 << 20;
/// Accept errors are logged at most this often.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(10);
/// The longest pause between accept attempts after errors.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Serves the routes on `listener` until `shutdown` resolves, then drains: `/readyz`
/// answers 503 `draining`, new syntheses 503 `shutting_down`, every answer closes its
/// connection after it (so probes still get through), and the requests in flight have
/// [`ServiceLimits::shutdown_grace`] to finish. Those still running then are cancelled
/// (a JSON request gets a 503 `shutting_down` error, a stream an `error` event), the
/// listener closes and the connections are closed.
pub async fn serve<F>(listener: TcpListener, state: AppState, shutdown: F) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send + 'static,
{
    let limits = state.inner.limits;
    let app = crate::stack::router(state.clone(), listener.local_addr()?);
    let cap = connection_cap(limits.max_connections);
    let slots = Arc::new(Semaphore::new(cap));
    let stop_accepting = CancellationToken::new();
    // Cancelled when this future ends or is dropped: every connection is then closed.
    let close = CancellationToken::new();
    let _close_on_drop = close.clone().drop_guard();
    let _readiness = state
        .inner
        .readiness
        .spawn_refresher(limits.readiness_interval);
    let acceptor = AbortOnDropHandle::new(tokio::spawn(accept_loop(
        listener,
        Connections {
            app,
            http: Arc::new(http_builder(&limits)),
            close: close.clone(),
            limits,
            metrics: Arc::clone(&state.inner.metrics),
        },
        Arc::clone(&slots),
        stop_accepting.clone(),
    )));

    shutdown.await;
    tracing::info!("shutting down: draining the requests in flight");
    state.inner.draining.cancel();
    let grace = limits.shutdown_grace;
    if !wait_for_requests(&state, grace).await {
        let left = state
            .inner
            .metrics
            .requests_in_flight
            .load(Ordering::SeqCst);
        tracing::warn!(
            requests = left,
            grace_secs = grace.as_secs_f64(),
            "shutdown grace is over: cancelling the requests still in flight"
        );
        state.inner.cancel.cancel();
        wait_for_requests(&state, CLOSE_AFTER).await;
    }
    stop_accepting.cancel();
    let _ = acceptor.await;
    close.cancel();
    let all = u32::try_from(cap).unwrap_or(u32::MAX);
    if tokio::time::timeout(CLOSE_AFTER, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the shutdown: stopping anyway");
    }
    Ok(())
}

/// Waits until no synthesis request is in flight, for at most `limit`; whether none is.
async fn wait_for_requests(state: &AppState, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let in_flight = || {
        state
            .inner
            .metrics
            .requests_in_flight
            .load(Ordering::SeqCst)
    };
    loop {
        let idle = state.inner.idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        if in_flight() <= 0 {
            return true;
        }
        tokio::select! {
            () = idle => {}
            () = tokio::time::sleep_until(deadline) => return in_flight() <= 0,
        }
    }
}

/// The connection cap in force for `wanted`: lowered to fit the open-file limit
/// (`RLIMIT_NOFILE`), keeping 128 descriptors (or half of them, if fewer than 256) for
/// the rest of the process. A lowered cap is logged.
pub fn connection_cap(wanted: usize) -> usize {
    let wanted = wanted.clamp(1, MAX_CONNECTIONS_CEILING);
    let Some(files) = open_file_limit() else {
        return wanted;
    };
    let fit = files.saturating_sub(FD_RESERVE).max(files / 2).max(1);
    let fit = usize::try_from(fit).unwrap_or(usize::MAX);
    if fit < wanted {
        tracing::warn!(
            max_connections = wanted,
            open_file_limit = files,
            cap = fit,
            "the open-file limit is low: serving at most {fit} connections at once (raise it with `ulimit -n`)"
        );
        fit
    } else {
        wanted
    }
}

#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}

/// hyper's connection builder with the limits.
fn http_builder(limits: &ServiceLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    let buffer = limits.max_header_bytes.saturating_mul(4).max(16 * 1024);
    let headers = limits.max_headers.saturating_mul(2);
    let mut h1 = builder.http1();
    h1.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout.max(Duration::from_millis(1)))
        .max_buf_size(buffer)
        .keep_alive(true);
    if headers > 100 {
        h1.max_headers(headers);
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_streams)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// What every connection shares.
#[derive(Clone)]
struct Connections {
    app: Router,
    http: Arc<Builder<TokioExecutor>>,
    close: CancellationToken,
    limits: ServiceLimits,
    metrics: Arc<Metrics>,
}

async fn accept_loop(
    listener: TcpListener,
    connections: Connections,
    slots: Arc<Semaphore>,
    stop: CancellationToken,
) {
    let mut errors = AcceptErrors::default();
    loop {
        let slot = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return,
            },
        };
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                errors.backoff = Duration::ZERO;
                let _ = stream.set_nodelay(true);
                tokio::spawn(connections.clone().serve(stream, slot));
            }
            Err(e) => {
                drop(slot);
                let pause = errors.failed(&e);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

/// Accept errors: logged at most every [`ACCEPT_LOG_EVERY`], with a growing pause.
#[derive(Default)]
struct AcceptErrors {
    last_logged: Option<Instant>,
    unlogged: u64,
    backoff: Duration,
}

impl AcceptErrors {
    /// Records `e`; the pause before the next attempt.
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted};
        if matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted) {
            // The client gave up before we took its connection: nothing is wrong here.
            return Duration::ZERO;
        }
        self.unlogged += 1;
        let now = Instant::now();
        if self
            .last_logged
            .is_none_or(|t| now.duration_since(t) >= ACCEPT_LOG_EVERY)
        {
            tracing::warn!(
                error = %e,
                errors = self.unlogged,
                "cannot accept connections (lower --max-connections or raise `ulimit -n`)"
            );
            self.last_logged = Some(now);
            self.unlogged = 0;
        }
        self.backoff = (self.backoff * 2).clamp(Duration::from_millis(10), ACCEPT_BACKOFF_MAX);
        self.backoff
    }
}

/// Counts an open connection while it lives.
struct OpenConnection(Arc<Metrics>);

impl OpenConnection {
    fn new(metrics: &Arc<Metrics>) -> Self {
        metrics.connections_open.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(metrics))
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Connections {
    /// Serves one connection until it ends, it stays idle too long, or shutdown closes it.
    async fn serve(self, stream: TcpStream, slot: OwnedSemaphorePermit) {
        let _slot = slot;
        let _open = OpenConnection::new(&self.metrics);
        let in_flight = InFlightRequestsCounter::new();
        let started = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&started);
        let service = ServiceBuilder::new()
            .layer(InFlightRequestsLayer::new(in_flight.clone()))
            .map_request(move |request: axum::http::Request<Incoming>| {
                counter.fetch_add(1, Ordering::Relaxed);
                request.map(Body::new)
            })
            .service(self.app);
        let connection = self
            .http
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        tokio::pin!(connection);
        // The first request must start within the header timeout; after that the
        // connection may stay idle for the keep-alive timeout.
        let mut check_at = Instant::now() + self.limits.header_timeout;
        let mut seen = 0;
        let mut closing: Option<Instant> = None;
        loop {
            let give_up = closing.unwrap_or(check_at);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = tokio::time::sleep_until(check_at), if closing.is_none() => {
                    let now_seen = started.load(Ordering::Relaxed);
                    if in_flight.get() == 0 && now_seen == seen {
                        self.metrics.connections_idle_closed.fetch_add(1, Ordering::Relaxed);
                        connection.as_mut().graceful_shutdown();
                        closing = Some(Instant::now() + CLOSE_AFTER);
                    } else {
                        seen = now_seen;
                        check_at = Instant::now() + self.limits.keep_alive_timeout;
                    }
                }
                () = self.close.cancelled(), if closing.is_none() => {
                    connection.as_mut().graceful_shutdown();
                    closing = Some(Instant::now() + CLOSE_AFTER);
                }
                () = tokio::time::sleep_until(give_up), if closing.is_some() => return,
            }
        }
    }
}
