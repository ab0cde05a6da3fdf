//! The backend and its model stack, built once at startup and shared by every request.
//!
//! What the service's user chose is one [`ModelSetup`] (crate `synthkit-frontend`, the setup
//! every front end uses): the offline extractive backend, an OpenAI-compatible server or
//! an Anthropic Messages API server, and the stack around it (calls in flight, retries,
//! the rate budget local or shared through Redis, the response cache). [`Backend::build`]
//! adds the service's meter ([`Metrics`]) and keeps what the service needs of the built
//! model: the stack, the readiness probe the backend owns (`/readyz`) and the shared
//! budget's health.

use std::sync::Arc;

use synthkit::backend::connect::ConnectError;
use synthkit::layer::budget::RateBudget;
use synthkit::layer::cache::CacheCounters;
use synthkit::layer::stack::ModelStack;
use synthkit::model::LanguageModel;

pub use synthkit::backend::probe::Readiness;
pub use synthkit_frontend::{ModelSetup, StackOptions};

use crate::error::ServeError;
use crate::metrics::Metrics;

/// The built backend: the model stack every request uses, and how `/readyz` checks it.
#[derive(Clone)]
pub struct Backend {
    /// The backend's name in reports (`extractive`, `openai`, `anthropic`, ...): it picks
    /// the requests' default answer checks ([`synthkit_frontend::AnswerChecks::for_questions_to`]).
    pub name: &'static str,
    /// The model behind its layers.
    pub stack: ModelStack,
    /// How to check the backend.
    pub readiness: Readiness,
    /// The budget shared with other replicas, if any: `/readyz` reports its
    /// [`RateBudget::health`] (not ready while Redis is failing).
    pub shared_budget: Option<Arc<dyn RateBudget>>,
}

impl Backend {
    /// Builds the backend and its stack once, metered into `metrics`; share
    /// [`Backend::model`] between requests. For a server this may ask it for its context
    /// window, model, slots and counter (`/tokenize`, `/v1/messages/count_tokens`),
    /// never a model call.
    pub async fn build(setup: ModelSetup, metrics: Arc<Metrics>) -> Result<Self, ServeError> {
        let meter = Arc::clone(&metrics) as Arc<dyn synthkit::layer::meter::CallMeter>;
        let built = setup
            .map_stack(|s| s.with_meter(meter))
            .build()
            .await
            .map_err(|e| match e {
                ConnectError::Setup(e) => ServeError::Backend(e.to_string()),
                other => ServeError::Backend(other.to_string()),
            })?;
        if let Some(counters) = built.stack.cache_counters() {
            metrics.watch_cache(CacheCounters::clone(counters));
        }
        Ok(Self {
            name: built.backend,
            shared_budget: built.sharing.shared_budget().cloned(),
            stack: built.stack,
            readiness: built.readiness,
        })
    }

    /// The model with all its layers.
    pub fn model(&self) -> Arc<dyn LanguageModel> {
        self.stack.model()
    }
}
