//! A synthesizer's settings, as its jobs read them.

use std::sync::Arc;

use serde_json::Value;

use crate::filtering::AnswerFiltering;
use crate::mode::ResponseMode;
use crate::model::LanguageModel;
use crate::observe::{Observer, OnTruncation};
use crate::options::{Concurrency, Templates};
use crate::prompt::PromptBudget;

/// A synthesizer's settings, shared by its jobs.
pub(crate) struct Settings {
    pub(crate) model: Arc<dyn LanguageModel>,
    pub(crate) counter: Option<crate::model::SharedCounter>,
    pub(crate) mode: ResponseMode,
    pub(crate) templates: Templates,
    /// The budget, the thinking reserve taken off its prompt room.
    pub(crate) budget: PromptBudget,
    /// The budget as given, before the thinking reserve came off it.
    pub(crate) base_budget: PromptBudget,
    /// Extra output tokens for a reasoning model's thinking, on every call's `max_tokens`.
    pub(crate) thinking_reserve: usize,
    pub(crate) filtering: AnswerFiltering,
    pub(crate) output_schema: Option<Arc<Value>>,
    pub(crate) concurrency: Concurrency,
    pub(crate) variables: Vec<(String, String)>,
    pub(crate) empty_response: String,
    /// The answer when the model says the sources do not answer.
    pub(crate) not_in_sources: String,
    pub(crate) separator: String,
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) system_prompt: Option<String>,
    pub(crate) on_truncation: OnTruncation,
    pub(crate) calibrate_from_usage: bool,
    pub(crate) citations: bool,
    pub(crate) citation_markers: bool,
    /// How the model cites (quote mode checks quotes).
    pub(crate) citation_style: crate::citation::CitationStyle,
    /// Whether responses carry their steps ([`crate::steps`]).
    pub(crate) return_steps: bool,
    /// Whether the synthesis makes its spans ([`crate::telemetry`]).
    pub(crate) spans: bool,
    /// A plan's dry run ([`crate::plan`]): its replies are filler, so structured replies
    /// are parsed but never checked against the output schema.
    pub(crate) dry_run: bool,
    /// Whether the model takes images, when the builder says (else the model's info).
    pub(crate) vision: Option<bool>,
    /// How images are counted, when the builder says (else chosen from the model).
    pub(crate) image_cost: Option<crate::node::ImageCost>,
    /// Evidence first, when on ([`crate::evidence`]).
    pub(crate) evidence: Option<crate::evidence::Evidence>,
    /// What to do with an answer found in no source.
    pub(crate) on_unsupported: crate::grounding::OnUnsupported,
    /// A first synthesis over the best nodes, widened when it does not answer.
    pub(crate) escalation: Option<crate::synth::escalation::Escalation>,
}
