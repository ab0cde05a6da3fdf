//! Adaptive concurrency: a layer that keeps as many calls in flight as the server can
//! take right now, learning it from the server's answers.
//!
//! A local server has a fixed number of slots, and with llama.cpp they may share one
//! KV cache: four long prompts at once can exhaust it (HTTP 500 "Context size has been
//! exceeded") where two would not. [`AdaptiveModel`] starts at a ceiling (the server's
//! slot count, from llama.cpp's `/props`, or the caller's limit), and:
//!
//! - **halves** the calls in flight when the server says it is overloaded (KV-cache
//!   exhaustion, 429, 503) and returns the error: it never sends a call again itself.
//!   Sending again is the [retry layer](super::retry)'s job alone, so every attempt is
//!   counted once, charged to the rate budget and bounded by the retry policy;
//! - **grows back** while the server keeps up: one more call in flight after as many
//!   successes in a row as the current limit (additive increase), never above the
//!   ceiling, and never up to the number of calls in flight that overloaded the server
//!   until it has been quiet for a while: [`RECOVERY_QUIET`] and four rounds of
//!   successes after an overload, the time doubled each time a probe at that level
//!   overloads it again (at most [`MAX_QUIET`]), so a server whose shared cache holds
//!   only one long prompt is not probed after every call. Once the quiet time has passed, every success adds one: the limit stays low
//!   only as long as the server is overloaded.
//!
//! Calls rejected together count as one overload: the limit is halved once per
//! generation of calls, not once per rejected call.
//!
//! ```
//! use std::sync::Arc;
//! use synthkit::layer::adaptive::{AdaptiveLimit, AdaptiveModel};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let limit = AdaptiveLimit::new(4);
//! let model = AdaptiveModel::new(ScriptedModel::constant(ModelInfo::new("m"), "ok"), limit.clone());
//! // ... synthesize with `model`; afterwards:
//! assert_eq!(limit.stats().lowered, 0);
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::gate::{Gate, Gated};
use crate::model::{ModelError, ModelRequest};

/// How long without an overload before the limit may grow back to the number of calls
/// in flight that overloaded the server, and then by one with every success.
pub const RECOVERY_QUIET: Duration = Duration::from_secs(5);
/// Rounds of successes at the current limit (`limit` successes each) that a quiet spell
/// needs besides its time.
const QUIET_ROUNDS: usize = 4;
/// The longest quiet time asked before probing a level that overloaded the server again.
pub const MAX_QUIET: Duration = Duration::from_secs(600);

/// What an [`AdaptiveLimit`] did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdaptiveStats {
    /// The calls allowed in flight now.
    pub limit: usize,
    /// The ceiling.
    pub ceiling: usize,
    /// How many times the limit was halved.
    pub lowered: u64,
    /// Calls the server rejected as overloaded (each one is the retry layer's to send
    /// again, or not).
    pub overloads: u64,
    /// The most calls that were in flight at once.
    pub peak: usize,
}

#[derive(Debug)]
struct State {
    limit: usize,
    in_flight: usize,
    /// Bumped at every decrease; a call remembers the generation it started in.
    generation: u64,
    successes: usize,
    /// When the last overload was seen.
    last_overload: Option<tokio::time::Instant>,
    /// The fewest calls in flight seen to overload the server (above the ceiling when
    /// none did); the limit stays below it until the quiet time has passed.
    bad_level: usize,
    /// The quiet time asked before growing to `bad_level` again.
    quiet: Duration,
    /// Successes since the last overload.
    since_overload: usize,
    stats: AdaptiveStats,
}

/// The shared limit: clone it to share one limit between models (all calls to one
/// server), and read [`AdaptiveLimit::stats`] for reports.
#[derive(Clone)]
pub struct AdaptiveLimit {
    state: Arc<Mutex<State>>,
    freed: Arc<tokio::sync::Notify>,
}

debug_fields!(AdaptiveLimit { stats: stats() });

/// A place among the calls in flight, held by a call of an [`AdaptiveModel`]; given back
/// when dropped.
pub struct Place {
    limit: AdaptiveLimit,
    generation: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.limit.lock().in_flight -= 1;
        self.limit.freed.notify_waiters();
    }
}

impl AdaptiveLimit {
    /// A limit that starts at, and never exceeds, `ceiling` calls in flight (at least 1).
    pub fn new(ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        Self {
            state: Arc::new(Mutex::new(State {
                limit: ceiling,
                in_flight: 0,
                generation: 0,
                successes: 0,
                last_overload: None,
                bad_level: ceiling + 1,
                quiet: RECOVERY_QUIET,
                since_overload: 0,
                stats: AdaptiveStats {
                    limit: ceiling,
                    ceiling,
                    ..AdaptiveStats::default()
                },
            })),
            freed: Arc::new(tokio::sync::Notify::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the limit did so far.
    pub fn stats(&self) -> AdaptiveStats {
        let st = self.lock();
        AdaptiveStats {
            limit: st.limit,
            ..st.stats
        }
    }

    /// Waits for a place among the calls in flight.
    async fn wait_for_place(&self) -> Place {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Register before checking, so a place freed in between wakes us.
            freed.as_mut().enable();
            {
                let mut st = self.lock();
                if st.in_flight < st.limit {
                    st.in_flight += 1;
                    st.stats.peak = st.stats.peak.max(st.in_flight);
                    return Place {
                        limit: self.clone(),
                        generation: st.generation,
                    };
                }
            }
            freed.await;
        }
    }

    fn succeeded(&self) {
        let mut st = self.lock();
        st.successes += 1;
        st.since_overload += 1;
        // A success at a level that overloaded the server before: it takes that many
        // now, and the quiet time starts again from the shortest.
        if st.in_flight >= st.bad_level {
            st.bad_level = st.in_flight + 1;
            st.quiet = RECOVERY_QUIET;
        }
        // Quiet: the quiet time has passed and the server has answered a few rounds of
        // the current limit since (long calls make a few seconds meaningless).
        let quiet = st.last_overload.is_none_or(|t| {
            t.elapsed() >= st.quiet && st.since_overload >= QUIET_ROUNDS * st.limit
        });
        if quiet {
            // Quiet until the next overload.
            st.last_overload = None;
        }
        let next = st.limit + 1;
        let grow = quiet || (next < st.bad_level && st.successes >= st.limit);
        if grow && st.limit < st.stats.ceiling {
            st.limit = next;
            st.successes = 0;
            drop(st);
            self.freed.notify_waiters();
        }
    }

    /// Lowers the limit for an overload seen by a call of `generation` with `in_flight`
    /// calls in flight (itself included): halved once per generation (calls rejected
    /// together lower it once), and kept below `in_flight` until the server has been
    /// quiet for a while.
    fn overloaded(&self, generation: u64, in_flight: usize, error: &ModelError) {
        let mut st = self.lock();
        st.successes = 0;
        st.since_overload = 0;
        st.stats.overloads += 1;
        let now = tokio::time::Instant::now();
        // A probe: overloaded again at a level that overloaded it before, after the
        // quiet time. Wait twice as long before the next probe.
        if in_flight >= st.bad_level {
            st.quiet = (st.quiet * 2).min(MAX_QUIET);
        }
        st.bad_level = st.bad_level.min(in_flight.max(1));
        st.last_overload = Some(now);
        if generation != st.generation || st.limit == 1 {
            return;
        }
        let before = st.limit;
        st.limit = (st.limit / 2).min(st.bad_level - 1).max(1);
        st.generation += 1;
        st.stats.lowered += 1;
        tracing::warn!(
            target: "synthkit",
            from = before,
            to = st.limit,
            error = %error,
            "the server is overloaded: lowering the calls in flight"
        );
    }
}

/// Whether `error` says the server cannot take this many calls at once (rather than
/// that this call is wrong).
pub fn is_overload(error: &ModelError) -> bool {
    match error {
        ModelError::RateLimited { .. } => true,
        ModelError::Server { status: 503, .. } => true,
        ModelError::Server { status: 500, body } => body
            .to_ascii_lowercase()
            .contains("context size has been exceeded"),
        _ => false,
    }
}

/// A model behind an [`AdaptiveLimit`]: each call waits for a place among the calls in
/// flight (a stream holds it until it ends or is dropped); an overload lowers the limit
/// and is returned.
pub type AdaptiveModel<M> = Gated<M, AdaptiveLimit>;

impl<M> AdaptiveModel<M> {
    /// The shared limit.
    pub fn limit(&self) -> &AdaptiveLimit {
        self.gate()
    }
}

impl Gate for AdaptiveLimit {
    type Pass = Place;

    async fn enter(&self, _request: &ModelRequest) -> Result<Place, ModelError> {
        let asked = tokio::time::Instant::now();
        let place = self.wait_for_place().await;
        super::retry::scope::queued_since(asked);
        super::retry::scope::mark_send();
        Ok(place)
    }

    /// A success counts toward growing the limit; an overload lowers it, after its place
    /// is given back.
    fn settle(&self, place: Place, error: Option<&ModelError>) -> Option<Place> {
        match error {
            None => {
                self.succeeded();
                Some(place)
            }
            Some(e) => {
                if is_overload(e) {
                    let generation = place.generation;
                    let in_flight = self.lock().in_flight;
                    drop(place);
                    self.overloaded(generation, in_flight, e);
                }
                None
            }
        }
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `times` successes in a row; the limit after them.
    fn succeed(limit: &AdaptiveLimit, times: usize) -> usize {
        for _ in 0..times {
            limit.succeeded();
        }
        limit.stats().limit
    }

    fn overload() -> ModelError {
        ModelError::Server {
            status: 500,
            body: r#"{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}"#.into(),
        }
    }

    #[test]
    fn overloads_are_recognised() {
        assert!(is_overload(&overload()));
        assert!(is_overload(&ModelError::Server {
            status: 503,
            body: String::new()
        }));
        assert!(!is_overload(&ModelError::Server {
            status: 500,
            body: "boom".into()
        }));
        assert!(!is_overload(&ModelError::BadRequest {
            status: 400,
            body: String::new()
        }));
    }

    #[tokio::test(start_paused = true)]
    async fn halves_once_per_generation_and_grows_back() {
        let limit = AdaptiveLimit::new(8);
        limit.overloaded(0, 8, &overload());
        limit.overloaded(0, 7, &overload());
        assert_eq!(
            limit.stats().limit,
            4,
            "two rejections of one generation halve once"
        );
        limit.overloaded(1, 4, &overload());
        assert_eq!(limit.stats().limit, 2);
        assert_eq!(limit.stats().lowered, 2);
        assert_eq!(
            succeed(&limit, 2),
            3,
            "additive increase below the bad level"
        );
        assert_eq!(
            succeed(&limit, 30),
            3,
            "4 in flight overloaded the server: not again before the quiet time"
        );
        tokio::time::advance(RECOVERY_QUIET).await;
        assert_eq!(
            succeed(&limit, 40),
            8,
            "after the quiet time, back to the ceiling"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_overloads_again_doubles_the_quiet_time() {
        // Overloaded at 2 calls in flight of `generation`: down to 1, then a quiet time on
        // the clock; `rounds` successes later the limit is still 1 (`why`).
        async fn overloaded_then_quiet(
            limit: &AdaptiveLimit,
            generation: u64,
            rounds: usize,
            why: &str,
        ) {
            limit.overloaded(generation, 2, &overload());
            assert_eq!(limit.stats().limit, 1);
            tokio::time::advance(RECOVERY_QUIET).await;
            assert_eq!(succeed(limit, rounds), 1, "{why}");
        }
        let limit = AdaptiveLimit::new(4);
        overloaded_then_quiet(&limit, 0, 3, "the time alone is not quiet: rounds too").await;
        limit.succeeded();
        assert_eq!(limit.stats().limit, 2, "probing 2 again");
        overloaded_then_quiet(&limit, 1, 4, "the probe failed: wait twice as long").await;
        tokio::time::advance(RECOVERY_QUIET).await;
        limit.succeeded();
        assert_eq!(limit.stats().limit, 2);
    }
}
