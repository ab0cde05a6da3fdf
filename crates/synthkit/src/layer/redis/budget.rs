//! [`RedisBudget`]: one requests/tokens-per-minute budget for every replica, as two GCRA
//! buckets in Redis updated by one atomic Lua script.
//!
//! GCRA keeps one number per bucket, the theoretical arrival time (TAT): the time at
//! which the bucket would be empty again. A call costing `n` units of a budget of `L`
//! per minute moves the TAT forward by `n × 60 s / L`, and may go when the new TAT is at
//! most the burst tolerance ahead of now (the burst: [`RedisBudget::with_burst`], a whole
//! minute by default, like the in-process limiter; never less than the call itself, so a
//! large call passes once the bucket is empty). The script reads Redis's own clock
//! (`TIME`), so the replicas' clocks do not matter, checks both buckets and updates
//! them only when both allow the call: the requests and tokens budgets are spent
//! together or not at all. When the call must wait, the script says how long; the
//! caller sleeps that long and asks again. A call asks at once; within one process, calls
//! that were told to wait queue in arrival order, and new calls queue behind them, so a
//! large call is not starved by a run of small ones. No call waits for a turn behind a
//! failing Redis: after [`FAILURES_TO_OPEN`](super::FAILURES_TO_OPEN) round trips in a
//! row fail, the circuit breaker opens and every call fails at once with
//! [`RedisUnavailable`](super::RedisUnavailable) (queued ones included) until one call
//! tries Redis again [`RETRY_INTERVAL`](super::RETRY_INTERVAL) later;
//! [`RedisBudget::health`] says so meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionManager;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::breaker::{Breaker, RedisUnavailable};
use super::log_failure;
use crate::layer::budget::RateBudget;
use crate::layer::limit::LimitError;
use crate::model::{ModelError, ModelFuture};

/// KEYS: the requests and tokens buckets. ARGV: requests per minute, tokens per minute
/// (0: none), the call's tokens, the burst window in microseconds. Returns 0 when the
/// call may go (and spends it), -1 when it can never fit, else the microseconds to wait.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
if tpm > 0 and tokens > tpm then return -1 end
local function check(key, limit, cost)
  if limit <= 0 or cost <= 0 then return 0, nil end
  local interval = 60000000 / limit
  local increment = cost * interval
  local tau = math.max(window, increment)
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  local new_tat = tat + increment
  local allow_at = new_tat - tau
  if allow_at > now then return math.ceil(allow_at - now), nil end
  return 0, new_tat
end
local w1, t1 = check(KEYS[1], rpm, 1)
local w2, t2 = check(KEYS[2], tpm, tokens)
if w1 > 0 or w2 > 0 then return math.max(w1, w2) end
if t1 then redis.call('SET', KEYS[1], string.format('%.0f', t1), 'PX', math.ceil((t1 - now) / 1000) + 1000) end
if t2 then redis.call('SET', KEYS[2], string.format('%.0f', t2), 'PX', math.ceil((t2 - now) / 1000) + 1000) end
return 0
";

/// What a [`RedisBudget`] let through in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetStats {
    /// Calls let through.
    pub requests: u64,
    /// Tokens charged.
    pub tokens: u64,
    /// Times a call was told to wait.
    pub waits: u64,
}

/// A requests/tokens-per-minute budget shared through Redis; see the
/// [module documentation](crate::layer::redis). Cheap to clone.
#[derive(Clone)]
pub struct RedisBudget {
    inner: Arc<Inner>,
}

struct Inner {
    conn: ConnectionManager,
    script: Script,
    keys: [String; 2],
    requests_per_minute: u32,
    tokens_per_minute: u32,
    burst_micros: AtomicU64,
    /// The turn of the calls told to wait, in arrival order.
    gate: Mutex<()>,
    /// Calls waiting for or holding the turn: while there are any, new calls queue too.
    queued: AtomicU64,
    breaker: Breaker,
    requests: AtomicU64,
    tokens: AtomicU64,
    waits: AtomicU64,
    first_failure: AtomicBool,
}

debug_fields!(RedisBudget {
    keys: inner.keys,
    requests_per_minute: inner.requests_per_minute,
    tokens_per_minute: inner.tokens_per_minute,
    burst_micros: inner.burst_micros,
    ..,
});

impl RedisBudget {
    /// A budget of `requests_per_minute` and `tokens_per_minute` (0: none) kept under
    /// `{prefix}:budget:rpm` and `{prefix}:budget:tpm`. Every replica given the same
    /// Redis, prefix and numbers shares one budget.
    pub fn new(
        conn: ConnectionManager,
        prefix: &str,
        requests_per_minute: u32,
        tokens_per_minute: u32,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                conn,
                script: Script::new(GCRA),
                keys: [
                    format!("{prefix}:budget:rpm"),
                    format!("{prefix}:budget:tpm"),
                ],
                requests_per_minute,
                tokens_per_minute,
                burst_micros: AtomicU64::new(60_000_000),
                gate: Mutex::new(()),
                queued: AtomicU64::new(0),
                breaker: Breaker::default(),
                requests: AtomicU64::new(0),
                tokens: AtomicU64::new(0),
                waits: AtomicU64::new(0),
                first_failure: AtomicBool::new(true),
            }),
        }
    }

    /// How much may be spent at once after a quiet spell, as a time's worth of the
    /// budget (default a minute: a fresh budget may spend a whole minute's at once, as
    /// the in-process limiter does). Shorter bursts pace calls evenly from the start.
    /// Applies to every clone of this budget.
    pub fn with_burst(self, burst: Duration) -> Self {
        let micros = u64::try_from(burst.as_micros()).unwrap_or(u64::MAX);
        self.inner.burst_micros.store(micros, Ordering::Relaxed);
        self
    }

    /// What this process let through so far.
    pub fn stats(&self) -> BudgetStats {
        BudgetStats {
            requests: self.inner.requests.load(Ordering::Relaxed),
            tokens: self.inner.tokens.load(Ordering::Relaxed),
            waits: self.inner.waits.load(Ordering::Relaxed),
        }
    }

    /// `Err` while Redis is failing (the circuit breaker is open): calls fail at once.
    pub fn health(&self) -> Result<(), RedisUnavailable> {
        self.inner.breaker.state()
    }

    /// One try: 0 (spent), -1 (never fits) or microseconds to wait.
    async fn try_take(&self, tokens: u64) -> Result<i64, redis::RedisError> {
        let inner = &self.inner;
        let mut conn = inner.conn.clone();
        let burst_micros = inner.burst_micros.load(Ordering::Relaxed);
        inner
            .script
            .key(&inner.keys[0])
            .key(&inner.keys[1])
            .arg(inner.requests_per_minute)
            .arg(inner.tokens_per_minute)
            .arg(tokens)
            .arg(burst_micros)
            .invoke_async(&mut conn)
            .await
    }
}

/// What one ask of the budget said: spent, or wait this long.
enum Step {
    Spent,
    Wait(Duration),
}

/// Takes one off [`Inner::queued`] when dropped.
struct Queued<'a>(&'a AtomicU64);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn unavailable(e: RedisUnavailable) -> ModelError {
    ModelError::Layer {
        layer: "redis budget",
        source: Box::new(e),
    }
}

impl RedisBudget {
    /// Asks once, through the breaker.
    async fn ask(&self, tokens: u64, deadline: Option<Instant>) -> Result<Step, ModelError> {
        let inner = &self.inner;
        let permit = inner.breaker.allow().map_err(unavailable)?;
        let answer = self.try_take(tokens).await;
        match answer {
            Ok(0) => {
                permit.success();
                inner.requests.fetch_add(1, Ordering::Relaxed);
                inner.tokens.fetch_add(tokens, Ordering::Relaxed);
                Ok(Step::Spent)
            }
            Ok(wait) if wait < 0 => {
                permit.success();
                Err(LimitError::OverBudget {
                    tokens,
                    tokens_per_minute: inner.tokens_per_minute,
                }
                .into())
            }
            Ok(wait) => {
                permit.success();
                inner.waits.fetch_add(1, Ordering::Relaxed);
                // Redis's answer is a peer's number: a minute's budget never needs
                // more than a minute's wait, so a larger one is taken as a minute.
                let micros = u64::try_from(wait).unwrap_or(0).clamp(500, 60_000_000);
                let wait = Duration::from_micros(micros);
                if deadline.is_some_and(|d| tokio::time::Instant::now() + wait > d) {
                    return Err(LimitError::Deadline { wait }.into());
                }
                Ok(Step::Wait(wait))
            }
            Err(e) => {
                permit.failure();
                log_failure(&inner.first_failure, "Redis budget unavailable", &e);
                Err(ModelError::Layer {
                    layer: "redis budget",
                    source: Box::new(e),
                })
            }
        }
    }
}

impl RateBudget for RedisBudget {
    fn name(&self) -> &str {
        "redis"
    }

    fn health(&self) -> Result<(), String> {
        RedisBudget::health(self).map_err(|e| e.to_string())
    }

    fn acquire(&self, tokens: u64, deadline: Option<Instant>) -> ModelFuture<'_, ()> {
        Box::pin(async move {
            let inner = &self.inner;
            if inner.requests_per_minute == 0 && inner.tokens_per_minute == 0 {
                return Ok(());
            }
            // No one waiting: ask at once, side by side with other calls.
            let mut wait = None;
            if inner.queued.load(Ordering::Acquire) == 0 {
                match self.ask(tokens, deadline).await? {
                    Step::Spent => return Ok(()),
                    Step::Wait(w) => wait = Some(w),
                }
            }
            inner.queued.fetch_add(1, Ordering::AcqRel);
            let _queued = Queued(&inner.queued);
            // The turn, unless Redis fails meanwhile: then no turn is worth waiting for.
            let turn = std::pin::pin!(inner.gate.lock());
            let opened = std::pin::pin!(inner.breaker.opened());
            let _turn = match futures::future::select(turn, opened).await {
                futures::future::Either::Left((turn, _)) => turn,
                futures::future::Either::Right(((), _)) => {
                    return Err(unavailable(inner.breaker.unavailable(Instant::now())));
                }
            };
            loop {
                if let Some(w) = wait.take() {
                    tokio::time::sleep(w).await;
                }
                match self.ask(tokens, deadline).await? {
                    Step::Spent => return Ok(()),
                    Step::Wait(w) => wait = Some(w),
                }
            }
        })
    }
}
