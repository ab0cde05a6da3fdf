//! A cap on what a run may cost: [`CostLedger`] holds what the run has spent and what its
//! calls in flight may still spend; [`CostCapped`] asks it before every call.
//!
//! Before a call goes out, the ledger holds the call's bound at the prices
//! ([`Prices::bound`]: the prompt read fresh, the reply as long as its `max_tokens`); a
//! call whose bound does not fit under the cap beside what is spent and held is refused
//! (`cost cap: ...`), so the calls in flight together never pass it. When the reply comes,
//! the hold becomes the reply's cost at the server's usage ([`Prices::cost`]); a call that
//! failed before any reply is released (servers do not bill a refused request), and a call
//! whose usage is unknown, or a stream dropped before its end, keeps its bound as spent.
//!
//! A ledger may be shared: one per run for `ask`, one for a whole batch, one per service
//! request. Put [`CostCapped`] outside the model stack: it sees each call once (a retry's
//! failed attempts are not charged) and counts a reply from the response cache as sent,
//! which errs on the side of the cap.
//!
//! ```
//! # async fn demo() -> Result<(), synthkit::model::ModelError> {
//! use std::sync::Arc;
//! use synthkit::cost::Prices;
//! use synthkit::layer::cost::{CostCapped, CostLedger};
//! use synthkit::model::{LanguageModel, ModelInfo, ModelRequest};
//! use synthkit::prompt::RenderedPrompt;
//! use synthkit::testing::ScriptedModel;
//!
//! let ledger = CostLedger::new(Prices::new(1.0, 2.0).unwrap(), 0.01).unwrap();
//! let model = CostCapped::new(ScriptedModel::constant(ModelInfo::new("m"), "ok"), ledger.clone());
//! let request = ModelRequest::new(RenderedPrompt::Text("Say ok.".into()))
//!     .with_prompt_tokens(3)
//!     .with_max_tokens(16);
//! LanguageModel::complete(&model, &request).await?;
//! assert!(ledger.spent() > 0.0 && ledger.spent() <= 0.01);
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex};

use futures::StreamExt;

use crate::cost::{PriceError, Prices, checked_cap};
use crate::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelFuture, ModelLayer, ModelRequest,
    StreamEvent, Usage,
};
use crate::observe::UsageTotals;

/// A call refused because it could pass the cap.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the next call may cost up to {next:.6} and {spent:.6} is spent or held by calls in flight: that could pass the cap of {cap} (raise the cost cap, or read fewer chunks)"
)]
#[non_exhaustive]
pub struct CostCapReached {
    /// The cap.
    pub cap: f64,
    /// What was spent, and held by calls in flight, when the call was refused.
    pub spent: f64,
    /// The refused call's bound.
    pub next: f64,
}

impl From<CostCapReached> for ModelError {
    fn from(e: CostCapReached) -> Self {
        ModelError::Layer {
            layer: "cost cap",
            source: Box::new(e),
        }
    }
}

#[derive(Debug, Default)]
struct Books {
    spent: f64,
    held: f64,
}

/// What a run has spent and what its calls in flight may spend, under a cap.
#[derive(Debug)]
pub struct CostLedger {
    prices: Prices,
    cap: f64,
    books: Mutex<Books>,
}

impl CostLedger {
    /// A ledger at `prices` under `cap` (the prices' currency); fails on a cap that is not
    /// a number at or above 0.
    pub fn new(prices: Prices, cap: f64) -> Result<Arc<Self>, PriceError> {
        Ok(Arc::new(Self {
            prices,
            cap: checked_cap(cap)?,
            books: Mutex::new(Books::default()),
        }))
    }

    /// The prices.
    pub fn prices(&self) -> &Prices {
        &self.prices
    }

    /// The cap.
    pub fn cap(&self) -> f64 {
        self.cap
    }

    /// What the finished calls cost (a dropped stream's bound included).
    pub fn spent(&self) -> f64 {
        self.books.lock().map(|b| b.spent).unwrap_or(f64::INFINITY)
    }

    /// Holds `request`'s bound, or refuses it when spent, held and the bound could pass the
    /// cap.
    fn hold(self: &Arc<Self>, request: &ModelRequest) -> Result<Hold, CostCapReached> {
        let next = self.prices.bound(request.prompt_tokens, request.max_tokens);
        // A poisoned lock: a thread panicked while holding it; refuse rather than guess.
        let Ok(mut books) = self.books.lock() else {
            return Err(CostCapReached {
                cap: self.cap,
                spent: f64::INFINITY,
                next,
            });
        };
        if books.spent + books.held + next > self.cap {
            return Err(CostCapReached {
                cap: self.cap,
                spent: books.spent + books.held,
                next,
            });
        }
        books.held += next;
        Ok(Hold {
            ledger: Arc::clone(self),
            bound: next,
            open: true,
        })
    }
}

/// A call's hold on the ledger: released or spent when the call ends.
struct Hold {
    ledger: Arc<CostLedger>,
    bound: f64,
    open: bool,
}

impl Hold {
    /// Ends the hold: the reply's cost when `usage` is known, else the whole bound
    /// (`spend_bound`) or nothing (a call that failed before any reply).
    fn close(&mut self, usage: Option<&Usage>, spend_bound: bool) {
        if !self.open {
            return;
        }
        self.open = false;
        let cost = match usage {
            Some(u) => {
                let mut totals = UsageTotals::default();
                totals.add_call(u);
                self.ledger.prices.cost(&totals)
            }
            None if spend_bound => self.bound,
            None => 0.0,
        };
        if let Ok(mut books) = self.ledger.books.lock() {
            books.held = (books.held - self.bound).max(0.0);
            books.spent += cost;
        }
    }
}

impl Drop for Hold {
    /// A hold dropped open (a stream cut off or dropped mid-reply): the bound is spent.
    fn drop(&mut self) {
        self.close(None, true);
    }
}

/// A model whose every call is held to a [`CostLedger`] (see the [module](self)).
pub struct CostCapped<M> {
    inner: M,
    ledger: Arc<CostLedger>,
}

impl<M> CostCapped<M> {
    /// `inner` with its calls held to `ledger`.
    pub fn new(inner: M, ledger: Arc<CostLedger>) -> Self {
        Self { inner, ledger }
    }

    /// The ledger.
    pub fn ledger(&self) -> &Arc<CostLedger> {
        &self.ledger
    }
}

impl<M: LanguageModel> ModelLayer for CostCapped<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let mut hold = self.ledger.hold(request)?;
            let result = self.inner.complete(request).await;
            match &result {
                // No usage reported: the bound, which the reply cannot have passed.
                Ok(c) => hold.close(c.usage.as_ref(), true),
                Err(_) => hold.close(None, false),
            }
            result
        })
    }

    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move {
            let mut hold = self.ledger.hold(request)?;
            match self.inner.stream(request).await {
                Ok(stream) => Ok(holding(stream, hold)),
                Err(e) => {
                    hold.close(None, false);
                    Err(e)
                }
            }
        })
    }
}

/// `stream` with `hold` closed at its `Done` (at the reported usage, else the bound), or
/// spent whole when the stream fails or is dropped before it.
fn holding(stream: CompletionStream, hold: Hold) -> CompletionStream {
    Box::pin(futures::stream::unfold(
        (stream, hold),
        |(mut stream, mut hold)| async move {
            let event = stream.next().await?;
            if let Ok(StreamEvent::Done { usage, .. }) = &event {
                hold.close(usage.as_ref(), true);
            }
            Some((event, (stream, hold)))
        },
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ModelInfo;
    use crate::testing::ScriptedModel;

    fn request(prompt_tokens: usize, max_tokens: usize) -> ModelRequest {
        ModelRequest::new(crate::prompt::RenderedPrompt::Text("q".into()))
            .with_prompt_tokens(prompt_tokens)
            .with_max_tokens(max_tokens)
    }

    #[tokio::test]
    async fn a_call_that_could_pass_the_cap_is_refused_before_it_is_sent() {
        // 1 per million in, 1 per million out: a call of 600k + 400k may cost 1.0.
        let ledger = CostLedger::new(Prices::new(1.0, 1.0).unwrap(), 1.5).unwrap();
        let inner = ScriptedModel::constant(ModelInfo::new("m"), "ok");
        let model = CostCapped::new(inner, ledger.clone());
        LanguageModel::complete(&model, &request(600_000, 400_000))
            .await
            .unwrap();
        // The reply's cost at its usage (the prompt and a short reply): under the bound.
        let spent = ledger.spent();
        assert!(spent > 0.6 - 1e-9 && spent < 1.0, "{spent}");
        let e = LanguageModel::complete(&model, &request(600_000, 400_000))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("cost cap"), "{e}");
        assert!(e.to_string().contains("cap of 1.5"), "{e}");
        // Nothing more was spent, and a smaller call still fits.
        assert_eq!(ledger.spent(), spent);
        LanguageModel::complete(&model, &request(100_000, 100_000))
            .await
            .unwrap();
        assert!(ledger.spent() > spent);
    }

    #[tokio::test]
    async fn calls_in_flight_hold_their_bounds_together() {
        let ledger = CostLedger::new(Prices::new(1.0, 1.0).unwrap(), 1.0).unwrap();
        let first = ledger.hold(&request(300_000, 300_000)).unwrap();
        // 0.6 held: a second call of 0.6 could pass 1.0 together with it.
        assert!(ledger.hold(&request(300_000, 300_000)).is_err());
        let mut first = first;
        first.close(
            Some(&Usage {
                prompt_tokens: 300_000,
                completion_tokens: 1_000,
                ..Usage::default()
            }),
            true,
        );
        // The reply cost 0.301: the second call fits now.
        assert!((ledger.spent() - 0.301).abs() < 1e-9);
        assert!(ledger.hold(&request(300_000, 300_000)).is_ok());
    }

    #[test]
    fn a_failed_call_is_released_and_a_dropped_one_is_spent() {
        let ledger = CostLedger::new(Prices::new(1.0, 1.0).unwrap(), 10.0).unwrap();
        let mut failed = ledger.hold(&request(1_000_000, 0)).unwrap();
        failed.close(None, false);
        assert_eq!(ledger.spent(), 0.0);
        drop(ledger.hold(&request(1_000_000, 0)).unwrap());
        assert!((ledger.spent() - 1.0).abs() < 1e-9);
    }
}
