//! [`MeteredModel`]: a layer that counts calls in flight at the backend, their latency
//! and their failures into [`Metrics`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures::StreamExt;
use futures::future::BoxFuture;
use synthkit::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelInfo, ModelRequest,
    SharedCounter, StructuredCompletion,
};
use synthkit::text::SharedTokenizer;

use crate::metrics::Metrics;

/// Wraps a model: every attempt is a call in flight from its start to the end of its
/// reply (for a stream, until it ends or is dropped), then one latency observation.
pub struct MeteredModel<M> {
    inner: M,
    metrics: Arc<Metrics>,
}

impl<M: LanguageModel> MeteredModel<M> {
    /// Meters `inner` into `metrics`.
    pub fn new(inner: M, metrics: Arc<Metrics>) -> Self {
        Self { inner, metrics }
    }
}

/// One call in flight; dropping it ends the call (and records its latency).
struct InFlight {
    metrics: Arc<Metrics>,
    started: Instant,
    failed: bool,
}

impl InFlight {
    fn start(metrics: &Arc<Metrics>) -> Self {
        metrics.calls_in_flight.fetch_add(1, Ordering::Relaxed);
        Self {
            metrics: Arc::clone(metrics),
            started: Instant::now(),
            failed: false,
        }
    }

    fn finish<T>(mut self, result: &Result<T, ModelError>) {
        self.failed = result.is_err();
    }

    fn mark_failed(&mut self) {
        self.failed = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.metrics.calls_in_flight.fetch_sub(1, Ordering::Relaxed);
        self.metrics.call_duration.observe(self.started.elapsed());
        if self.failed {
            self.metrics.model_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<M: LanguageModel> LanguageModel for MeteredModel<M> {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(async move {
            let call = InFlight::start(&self.metrics);
            let result = self.inner.complete(request).await;
            call.finish(&result);
            result
        })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<CompletionStream, ModelError>> {
        Box::pin(async move {
            let mut call = InFlight::start(&self.metrics);
            match self.inner.stream(request).await {
                Ok(stream) => {
                    // The call stays in flight until the stream ends or is dropped.
                    let stream = stream.map(move |item| {
                        if item.is_err() {
                            call.mark_failed();
                        }
                        item
                    });
                    Ok(Box::pin(stream) as CompletionStream)
                }
                Err(e) => {
                    call.mark_failed();
                    Err(e)
                }
            }
        })
    }

    fn structured<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<StructuredCompletion, ModelError>> {
        Box::pin(async move {
            let call = InFlight::start(&self.metrics);
            let result = self.inner.structured(request).await;
            call.finish(&result);
            result
        })
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.inner.tokenizer()
    }

    fn counter(&self) -> Option<SharedCounter> {
        self.inner.counter()
    }
}
