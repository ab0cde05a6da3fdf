//! The grounding gate: the facts of every answer looked up in what its calls were shown
//! ([`crate::grounding`]), and the policy for an answer whose facts are in none of it
//! ([`OnUnsupported`]).

use std::sync::Arc;

use crate::error::SynthError;
use crate::grounding::{self, GroundingStatus, OnUnsupported};
use crate::node::Node;
use crate::response::Response;

/// What the gate of one synthesis checks against, and how it decides.
#[derive(Clone)]
pub(crate) struct Gate {
    question: String,
    /// The node ids, by source index.
    ids: Arc<Vec<String>>,
    /// What the model was shown of each node (empty for a node left out).
    sources: Arc<Vec<String>>,
    policy: OnUnsupported,
    not_in_sources: String,
    /// What of an answer the model wrote (`None`: all of it): a mode that adds text of
    /// its own (accumulate's labels) takes it out, so that only claims are looked up.
    model_text: Option<ModelText>,
}

/// The model's part of an answer, from the whole answer.
pub(crate) type ModelText = Arc<dyn Fn(&str) -> String + Send + Sync>;

impl Gate {
    /// The gate of a synthesis of `question` over `shown` (the nodes as the model saw
    /// them).
    pub(crate) fn new(
        question: &str,
        shown: &[Node],
        policy: OnUnsupported,
        not_in_sources: String,
    ) -> Self {
        Self {
            question: question.to_string(),
            ids: Arc::new(shown.iter().map(|n| n.id.clone()).collect()),
            sources: Arc::new(shown.iter().map(|n| n.llm_text().into_owned()).collect()),
            policy,
            not_in_sources,
            model_text: None,
        }
    }

    /// The gate, checking what `model_text` gives of an answer instead of all of it.
    pub(crate) fn with_model_text(self, model_text: ModelText) -> Self {
        Self {
            model_text: Some(model_text),
            ..self
        }
    }

    /// Checks `response`'s answer (a text answer that answers; JSON answers and
    /// abstentions are not checked) and applies the policy: the grounding goes into the
    /// response, an unsupported answer is logged and, with [`OnUnsupported::Abstain`],
    /// replaced by "not in the sources", or with [`OnUnsupported::Error`] an error.
    pub(crate) async fn apply(&self, response: &mut Response) -> Result<(), SynthError> {
        if response.structured.is_some() || !response.answerable || response.text.trim().is_empty()
        {
            return Ok(());
        }
        let answer = response.text.clone();
        let model_text = self.model_text.clone();
        let question = self.question.clone();
        let sources = Arc::clone(&self.sources);
        // Off the runtime's threads, with the check: the answer may be long.
        let run = move || {
            let answer = match model_text {
                Some(model_text) => model_text(&answer),
                None => answer,
            };
            grounding::check(&answer, &question, &sources)
        };
        let mut g = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => match runtime.spawn_blocking(run).await {
                Ok(g) => g,
                Err(_) => return Ok(()),
            },
            Err(_) => run(),
        };
        g.source_ids = g
            .sources
            .iter()
            .filter_map(|&i| self.ids.get(i).cloned())
            .collect();
        match g.status {
            GroundingStatus::Supported => {}
            GroundingStatus::Partly => {
                tracing::warn!(target: "synthkit", unsupported = %crate::text::list_excerpt(&g.unsupported), "the answer states facts found in no source it was shown (partly supported)");
            }
            GroundingStatus::Unsupported => {
                tracing::warn!(target: "synthkit", unsupported = %crate::text::list_excerpt(&g.unsupported), policy = self.policy.as_str(), "the answer states facts found in no source it was shown (unsupported)");
                match self.policy {
                    OnUnsupported::Warn => {}
                    OnUnsupported::Abstain => {
                        g.withheld = Some(std::mem::replace(
                            &mut response.text,
                            self.not_in_sources.clone(),
                        ));
                        response.answerable = false;
                        response.citations = None;
                    }
                    OnUnsupported::Error => {
                        return Err(SynthError::Unsupported {
                            unsupported: g.unsupported,
                        });
                    }
                }
            }
        }
        response.grounding = Some(g);
        Ok(())
    }
}

impl crate::response::FinalCheck for Gate {
    fn apply<'a>(
        &'a self,
        response: &'a mut Response,
    ) -> futures::future::BoxFuture<'a, Result<(), SynthError>> {
        Box::pin(Gate::apply(self, response))
    }
}
