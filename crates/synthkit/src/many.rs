//! Running many syntheses at once: at most `limit` in flight, each on its own task (so a
//! corpus uses every worker thread), their results in input order or as they finish, and
//! every task aborted when the window is dropped (a cancelled job stops its model calls).
//!
//! The one window of every front end that runs many syntheses: `synthkit batch`, Python's
//! `synthesize_many` and its Ray recipe. Reading the input is the caller's: it starts a run
//! while [`Window::has_room`] says so, and takes a result with [`Window::next`] otherwise,
//! so memory is bounded by the limit, not by the input.
//!
//! ```
//! use synthkit::many::{Order, Window};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let mut window = Window::new(2, Order::Input);
//! let mut inputs = 1..=5u64;
//! let mut results = Vec::new();
//! loop {
//!     while window.has_room() {
//!         let Some(n) = inputs.next() else { break };
//!         if n == 3 {
//!             // A result known without a run (a bad line) keeps its place.
//!             window.ready(0);
//!             continue;
//!         }
//!         window.spawn(async move { n * 10 }, |_lost| u64::MAX);
//!     }
//!     match window.next().await {
//!         Some(r) => results.push(r),
//!         None => break,
//!     }
//! }
//! assert_eq!(results, [10, 20, 0, 40, 50]);
//! # });
//! ```

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, FuturesUnordered};
use tracing::instrument::WithSubscriber;

use crate::error::SynthError;

/// A task spawned on the current runtime and owned by this handle: dropping the handle
/// aborts the task (and so its model calls, retries and back-off sleeps). Awaiting it gives
/// the task's output, or [`SynthError::Task`] when it panicked or was aborted.
pub struct OwnedTask<T>(tokio::task::JoinHandle<T>);

impl<T> std::fmt::Debug for OwnedTask<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedTask").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> OwnedTask<T> {
    /// Spawns `future` on the current runtime (panics outside one, as `tokio::spawn`
    /// does). It runs with the spawner's default `tracing` subscriber, whichever worker
    /// thread runs it, so its spans are the caller's subscriber's.
    pub fn spawn<F>(future: F) -> Self
    where
        F: Future<Output = T> + Send + 'static,
    {
        OwnedTask(tokio::spawn(future.with_current_subscriber()))
    }
}

impl<T> OwnedTask<T> {
    /// Owns a task already spawned (on a runtime of the caller's choosing).
    pub fn from_handle(handle: tokio::task::JoinHandle<T>) -> Self {
        OwnedTask(handle)
    }
}

impl<T> Drop for OwnedTask<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Future for OwnedTask<T> {
    type Output = Result<T, SynthError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map_err(|source| SynthError::Task { source }))
    }
}

/// In which order a [`Window`] gives its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Order {
    /// In the order the runs were started (a result waits for the earlier ones).
    #[default]
    Input,
    /// As each run finishes.
    Finished,
}

type Run<T> = BoxFuture<'static, T>;

enum Runs<T> {
    Input(FuturesOrdered<Run<T>>),
    Finished(FuturesUnordered<Run<T>>),
}

/// At most `limit` runs in flight, each on an [`OwnedTask`]; see the module doc.
pub struct Window<T> {
    runs: Runs<T>,
    limit: NonZeroUsize,
}

impl<T> std::fmt::Debug for Window<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("in_flight", &self.len())
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<T> Window<T> {
    /// The most runs in flight.
    pub fn limit(&self) -> usize {
        self.limit.get()
    }

    /// Runs started and not yet taken.
    pub fn len(&self) -> usize {
        match &self.runs {
            Runs::Input(q) => q.len(),
            Runs::Finished(q) => q.len(),
        }
    }

    /// Whether no run is waiting to be taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether another run may start.
    pub fn has_room(&self) -> bool {
        self.len() < self.limit.get()
    }
}

impl<T: Send + 'static> Window<T> {
    /// An empty window of at most `limit` runs (0 counts as 1), giving results in `order`.
    pub fn new(limit: usize, order: Order) -> Self {
        let runs = match order {
            Order::Input => Runs::Input(FuturesOrdered::new()),
            Order::Finished => Runs::Finished(FuturesUnordered::new()),
        };
        Self {
            runs,
            limit: NonZeroUsize::new(limit).unwrap_or(NonZeroUsize::MIN),
        }
    }

    /// Starts `run` on its own task. When the task panics or is aborted, `lost` makes its
    /// result from the error, so every run started gives exactly one result.
    pub fn spawn<F, L>(&mut self, run: F, lost: L)
    where
        F: Future<Output = T> + Send + 'static,
        L: FnOnce(SynthError) -> T + Send + 'static,
    {
        let task = OwnedTask::spawn(run);
        self.push(Box::pin(async move { task.await.unwrap_or_else(lost) }));
    }

    /// A result known without running anything (a line that does not parse), given in
    /// its place.
    pub fn ready(&mut self, value: T) {
        self.push(Box::pin(std::future::ready(value)));
    }

    fn push(&mut self, run: Run<T>) {
        match &mut self.runs {
            Runs::Input(q) => q.push_back(run),
            Runs::Finished(q) => q.push(run),
        }
    }

    /// The next result, in the window's order; `None` when no run is left.
    pub async fn next(&mut self) -> Option<T> {
        match &mut self.runs {
            Runs::Input(q) => q.next().await,
            Runs::Finished(q) => q.next().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn finished_order_gives_results_as_they_come_and_a_panic_is_one_result() {
        let mut w = Window::new(3, Order::Finished);
        w.spawn(
            async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                "slow".to_string()
            },
            |e| e.to_string(),
        );
        w.spawn(async { "fast".to_string() }, |e| e.to_string());
        w.spawn(async { panic!("boom") }, |e| format!("lost: {e}"));
        assert!(!w.has_room());
        let mut got = Vec::new();
        while let Some(r) = w.next().await {
            got.push(r);
        }
        assert_eq!(got.len(), 3);
        assert_eq!(got.last().map(String::as_str), Some("slow"));
        assert!(got.iter().any(|r| r.starts_with("lost: ")), "{got:?}");
    }

    #[tokio::test]
    async fn dropping_the_window_aborts_its_runs() {
        let finished = Arc::new(AtomicUsize::new(0));
        let mut w = Window::new(2, Order::Input);
        for _ in 0..2 {
            let finished = finished.clone();
            w.spawn(
                async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                },
                |_| (),
            );
        }
        drop(w);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(finished.load(Ordering::SeqCst), 0, "the runs were aborted");
    }

    #[test]
    fn a_limit_of_zero_is_one() {
        let w: Window<()> = Window::new(0, Order::Input);
        assert_eq!(w.limit(), 1);
        assert!(w.has_room());
    }
}
