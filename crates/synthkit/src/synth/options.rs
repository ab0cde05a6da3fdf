//! [`SynthesisOptions`]: the one mapping of a caller's choices (the CLI's flags, the
//! service's request, Python's keywords) onto a [`SynthesizerBuilder`].

use serde_json::Value;

use super::SynthesizerBuilder;
use crate::citation::CitationStyle;
use crate::filtering::AnswerFiltering;
use crate::mode::ResponseMode;
use crate::observe::OnTruncation;
use crate::options::Concurrency;
use crate::prompt::{PromptBudget, PromptTemplate};

/// What a caller chose for one synthesizer, the model apart: the one place where the
/// front ends' options (the CLI's flags, the service's request, Python's keywords) become
/// builder settings. A field left unset (`None`, empty) leaves the builder's setting as it
/// is, so options can be laid over a builder that already holds some (an observer, another
/// synthesizer's settings from [`crate::Synthesizer::to_builder`]).
///
/// ```
/// use synthkit::{ResponseMode, Synthesizer, SynthesisOptions};
/// use synthkit::{model::ModelInfo, testing::ScriptedModel};
///
/// let model = std::sync::Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "Yes."));
/// let mut options = SynthesisOptions::default();
/// options.mode = Some(ResponseMode::Refine);
/// options.citations = Some(true);
/// options.system_prompt = Some("Answer from the sources only.".into());
/// let synth = options.apply(Synthesizer::builder(model)).build()?;
/// assert_eq!(synth.mode(), ResponseMode::Refine);
/// # Ok::<(), synthkit::SynthError>(())
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SynthesisOptions {
    /// The response mode.
    pub mode: Option<ResponseMode>,
    /// Calls in flight for tree levels and accumulate.
    pub concurrency: Option<Concurrency>,
    /// Whether answers carry citations.
    pub citations: Option<bool>,
    /// Whether citation markers stay in the answer's text.
    pub citation_markers: Option<bool>,
    /// How the model cites: `[n]` markers, or quotes checked against the sources.
    pub citation_style: Option<CitationStyle>,
    /// Whether the response keeps every step.
    pub return_steps: Option<bool>,
    /// The JSON schema of the final answer.
    pub output_schema: Option<Value>,
    /// Whether refine and compact steps say if their context answered.
    pub answer_filtering: Option<AnswerFiltering>,
    /// The system prompt (chat models).
    pub system_prompt: Option<String>,
    /// The prompt budget (window, output reserve, overlap, tokenizer).
    pub budget: Option<PromptBudget>,
    /// A cap on prompt tokens below the model's window.
    pub max_prompt_tokens: Option<usize>,
    /// Templates replacing the defaults, one per kind (a later one of a kind wins).
    pub templates: Vec<PromptTemplate>,
    /// What a reply cut at the output limit does.
    pub on_truncation: Option<OnTruncation>,
    /// Extra output tokens for a reasoning model's thinking on every call
    /// ([`SynthesizerBuilder::thinking_reserve`]).
    pub thinking_reserve: Option<usize>,
    /// The answer when the model says the sources do not answer
    /// ([`SynthesizerBuilder::not_in_sources_answer`]).
    pub not_in_sources_answer: Option<String>,
    /// The answer when there is nothing to answer from (no node, or every node left
    /// out; [`SynthesizerBuilder::empty_response`]).
    pub empty_response: Option<String>,
    /// Whether the model takes images, over what its server says
    /// ([`SynthesizerBuilder::vision`]).
    pub vision: Option<bool>,
    /// Evidence first ([`SynthesizerBuilder::evidence`]): `Some(Some(e))` on,
    /// `Some(None)` off, `None` as the builder has it.
    pub evidence: Option<Option<crate::evidence::Evidence>>,
    /// What an answer found in no source does ([`SynthesizerBuilder::on_unsupported`]).
    pub on_unsupported: Option<crate::grounding::OnUnsupported>,
    /// Escalation ([`SynthesizerBuilder::escalate`]): `Some(Some(e))` on, `Some(None)`
    /// off, `None` as the builder has it.
    pub escalation: Option<Option<super::escalation::Escalation>>,
}

impl SynthesisOptions {
    /// `builder` with these options set; what they leave unset stays the builder's.
    pub fn apply(self, mut builder: SynthesizerBuilder) -> SynthesizerBuilder {
        if let Some(mode) = self.mode {
            builder = builder.mode(mode);
        }
        if let Some(budget) = self.budget {
            builder = builder.budget(budget);
        }
        if let Some(limit) = self.max_prompt_tokens {
            builder = builder.max_prompt_tokens(limit);
        }
        if let Some(concurrency) = self.concurrency {
            builder = builder.concurrency(concurrency);
        }
        if let Some(on) = self.citations {
            builder = builder.citations(on);
        }
        if let Some(show) = self.citation_markers {
            builder = builder.citation_markers(show);
        }
        if let Some(style) = self.citation_style {
            builder = builder.citation_style(style);
        }
        if let Some(on) = self.return_steps {
            builder = builder.return_steps(on);
        }
        if let Some(schema) = self.output_schema {
            builder = builder.output_schema(schema);
        }
        if let Some(filtering) = self.answer_filtering {
            builder = builder.answer_filtering(filtering);
        }
        if let Some(prompt) = self.system_prompt {
            builder = builder.system_prompt(prompt);
        }
        for t in self.templates {
            builder = builder.template(t);
        }
        if let Some(policy) = self.on_truncation {
            builder = builder.on_truncation(policy);
        }
        if let Some(tokens) = self.thinking_reserve {
            builder = builder.thinking_reserve(tokens);
        }
        if let Some(text) = self.not_in_sources_answer {
            builder = builder.not_in_sources_answer(text);
        }
        if let Some(text) = self.empty_response {
            builder = builder.empty_response(text);
        }
        if let Some(on) = self.vision {
            builder = builder.vision(on);
        }
        match self.evidence {
            Some(Some(e)) => builder = builder.evidence(e),
            Some(None) => builder = builder.without_evidence(),
            None => {}
        }
        if let Some(policy) = self.on_unsupported {
            builder = builder.on_unsupported(policy);
        }
        match self.escalation {
            Some(Some(e)) => builder = builder.escalate(e),
            Some(None) => builder = builder.without_escalation(),
            None => {}
        }
        builder
    }
}
