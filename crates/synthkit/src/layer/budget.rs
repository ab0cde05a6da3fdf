//! Rate budgets: requests and tokens per minute, local or shared between processes.
//!
//! A [`RateBudget`] is asked before every send of every attempt: [`BudgetModel`] takes one
//! request and [`Limiter::charge`] tokens (the prompt plus the whole output reserve) from
//! it, waiting until the budget allows them. Two budgets come with the crate: the
//! in-process [`Limiter`] (GCRA, tokio's clock) and, with the `redis` feature,
//! `layer::redis::RedisBudget`, one budget for every replica that shares a Redis.
//!
//! ```
//! # async fn demo() -> Result<(), synthkit::model::ModelError> {
//! use std::sync::Arc;
//! use synthkit::layer::budget::BudgetModel;
//! use synthkit::layer::limit::{Limiter, Limits};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let budget = Limiter::new(Limits::default().with_requests_per_minute(60));
//! let model = BudgetModel::new(ScriptedModel::constant(ModelInfo::new("m"), "ok"), Arc::new(budget.clone()));
//! # let _ = model; Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;

use super::gate::{Gate, Gated};
use super::limit::Limiter;
use super::retry::scope;
use crate::model::{ModelError, ModelFuture, ModelRequest};

/// A per-minute budget of requests and tokens.
pub trait RateBudget: Send + Sync {
    /// A short name for messages and reports (`local`, `redis`).
    fn name(&self) -> &str;

    /// Waits until one request and `tokens` tokens may be spent, and spends them. Fails
    /// when the charge can never fit, when the wait would end past `deadline`
    /// ([`super::limit::LimitError::Deadline`]), or when the budget's store cannot be
    /// reached.
    fn acquire(&self, tokens: u64, deadline: Option<Instant>) -> ModelFuture<'_, ()>;

    /// `Err` (why) while the budget cannot be spent from because its store is failing
    /// (a shared budget's circuit breaker is open); a readiness probe reports it. Always
    /// `Ok` by default.
    fn health(&self) -> Result<(), String> {
        Ok(())
    }
}

impl RateBudget for Limiter {
    fn name(&self) -> &str {
        "local"
    }

    /// Spends from the limiter's per-minute budgets; a call slot, if the limiter has
    /// them, is given back at once (calls in flight are the adaptive layer's business).
    fn acquire(&self, tokens: u64, deadline: Option<Instant>) -> ModelFuture<'_, ()> {
        Box::pin(async move {
            Limiter::acquire_until(self, tokens, deadline)
                .await
                .map(drop)
                .map_err(ModelError::from)
        })
    }
}

/// A model that spends from a [`RateBudget`] before every call. Put it inside the retry
/// layer so that every attempt is charged.
pub type BudgetModel<M> = Gated<M, Arc<dyn RateBudget>>;

/// Each call spends the request's charge, within the running call's deadline when a
/// retry layer set one, and marks the send.
impl Gate for Arc<dyn RateBudget> {
    type Pass = ();

    async fn enter(&self, request: &ModelRequest) -> Result<(), ModelError> {
        self.acquire(Limiter::charge(request), scope::deadline())
            .await?;
        scope::mark_send();
        Ok(())
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
