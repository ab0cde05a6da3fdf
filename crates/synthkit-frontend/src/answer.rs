//! The answer's checks every front end offers, mapped once: evidence first
//! ([`synthkit::evidence`], with the extractive ranking as its selector) and what an
//! answer found in no source does ([`synthkit::grounding::OnUnsupported`]).
//!
//! The defaults are decided here and nowhere else. A question to a model (any backend but
//! the extractive one) is answered evidence first, and an answer whose facts are in no
//! source abstains ("not in the sources"): on the benchmark's 121 cases
//! (Qwen2.5-Coder-0.5B, compact) that answered 87 right and abstained on 21 of the 25
//! unanswerable ones, against about half right without evidence (`bench/QUALITY.md`). The
//! extractive backend ranks sentences itself: no evidence, and a warning for an
//! unsupported answer. A summary without a question reads everything: no evidence, a
//! warning. What a user chose (`--evidence`, `--on-unsupported`, a request's `evidence`
//! and `on_unsupported`, Python's `evidence=` and `on_unsupported=`) always wins.
//!
//! ```
//! use synthkit::SynthesisOptions;
//! use synthkit::grounding::OnUnsupported;
//! use synthkit_frontend::AnswerChecks;
//!
//! // A model answers evidence first and abstains on an unsupported answer.
//! let checks = AnswerChecks::for_questions_to("openai");
//! assert!(checks.evidence);
//! assert_eq!(checks.on_unsupported, OnUnsupported::Abstain);
//! let mut options = SynthesisOptions::default();
//! checks.set(&mut options);
//! assert!(matches!(options.evidence, Some(Some(_))));
//! // Unless told otherwise.
//! AnswerChecks::for_questions_to("openai").with_evidence(false).set(&mut options);
//! assert!(matches!(options.evidence, Some(None)));
//! // The extractive backend ranks sentences itself: no evidence, a warning.
//! let extractive = AnswerChecks::for_questions_to(synthkit_frontend::EXTRACTIVE);
//! assert!(!extractive.evidence);
//! assert_eq!(extractive.on_unsupported, OnUnsupported::Warn);
//! // A summary reads everything.
//! assert!(!AnswerChecks::for_summaries().evidence);
//! ```

use std::sync::Arc;

use synthkit::SynthesisOptions;
use synthkit::evidence::{DEFAULT_EVIDENCE_TOKENS, Evidence};
use synthkit::grounding::OnUnsupported;
use synthkit_extractive::ExtractiveEvidence;

/// Whether a question (`ask`, `batch` lines, `eval` cases, a service request, Python's
/// `synthesize`) to a model is answered evidence first unless told otherwise (the
/// extractive backend's is [`EXTRACTIVE_EVIDENCE`]: [`AnswerChecks::for_questions_to`]).
pub const DEFAULT_EVIDENCE: bool = true;

/// What an answer to a model's question found in no source does unless told otherwise:
/// it abstains (the extractive backend's is [`EXTRACTIVE_ON_UNSUPPORTED`]).
pub const DEFAULT_ON_UNSUPPORTED: OnUnsupported = OnUnsupported::Abstain;

/// Whether a question to the extractive backend is answered evidence first unless told
/// otherwise: no, it ranks sentences itself (evidence before it answered 85 of the
/// benchmark's 121 cases, against 90 without: `bench/QUALITY.md`).
pub const EXTRACTIVE_EVIDENCE: bool = false;

/// What an extractive answer found in no source does unless told otherwise: it warns (its
/// answers are the sources' own sentences).
pub const EXTRACTIVE_ON_UNSUPPORTED: OnUnsupported = OnUnsupported::Warn;

/// The answer when there is nothing to answer from (no node given, or none left to read):
/// `not_in_sources` (the user's "not in the sources" answer) when given, else
/// [`DEFAULT_NOT_IN_SOURCES_ANSWER`](synthkit::text::abstention::DEFAULT_NOT_IN_SOURCES_ANSWER),
/// in every front end; not the engine's (and LlamaIndex's) "Empty Response", which reads
/// as an answer.
///
/// ```
/// use synthkit_frontend::answer::nothing_to_answer_from;
/// assert_eq!(nothing_to_answer_from(None), "The sources do not answer this question.");
/// assert_eq!(nothing_to_answer_from(Some("No idea.")), "No idea.");
/// ```
pub fn nothing_to_answer_from(not_in_sources: Option<&str>) -> String {
    not_in_sources
        .unwrap_or(synthkit::text::abstention::DEFAULT_NOT_IN_SOURCES_ANSWER)
        .to_string()
}

/// A front end's choice of the answer's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnswerChecks {
    /// Evidence first.
    pub evidence: bool,
    /// The most tokens of kept sentences, all nodes together.
    pub evidence_tokens: usize,
    /// What an answer found in no source does.
    pub on_unsupported: OnUnsupported,
    /// Whether a question the model declines though the evidence covers it is answered
    /// with the sources' sentences ([`Evidence::with_extract_when_declined`]; on by
    /// default).
    pub extract_when_declined: bool,
}

impl AnswerChecks {
    /// The defaults for questions to a model: evidence [`DEFAULT_EVIDENCE`] (on),
    /// [`DEFAULT_EVIDENCE_TOKENS`], [`DEFAULT_ON_UNSUPPORTED`] (abstain).
    pub fn for_questions() -> Self {
        Self {
            evidence: DEFAULT_EVIDENCE,
            evidence_tokens: DEFAULT_EVIDENCE_TOKENS,
            on_unsupported: DEFAULT_ON_UNSUPPORTED,
            extract_when_declined: true,
        }
    }

    /// The defaults for questions answered by `backend` (a backend's name in reports:
    /// [`crate::EXTRACTIVE`], `openai`, `anthropic`, `python`, ...): a model's,
    /// [`AnswerChecks::for_questions`] (evidence on, abstain), but for the extractive
    /// backend [`EXTRACTIVE_EVIDENCE`] (off) and [`EXTRACTIVE_ON_UNSUPPORTED`] (warn).
    pub fn for_questions_to(backend: &str) -> Self {
        if backend == crate::EXTRACTIVE {
            Self::for_questions()
                .with_evidence(EXTRACTIVE_EVIDENCE)
                .with_on_unsupported(EXTRACTIVE_ON_UNSUPPORTED)
        } else {
            Self::for_questions()
        }
    }

    /// The defaults for summaries (`summarize`), whatever the backend: no evidence (a
    /// summary reads everything) and a warning for an unsupported answer (the figures
    /// behind abstaining are questions').
    pub fn for_summaries() -> Self {
        Self::for_questions()
            .with_evidence(false)
            .with_on_unsupported(OnUnsupported::Warn)
    }

    /// These checks with evidence on or off.
    pub fn with_evidence(mut self, on: bool) -> Self {
        self.evidence = on;
        self
    }

    /// These checks with an evidence budget (at least 1 token).
    pub fn with_evidence_tokens(mut self, tokens: usize) -> Self {
        self.evidence_tokens = tokens.max(1);
        self
    }

    /// These checks with a policy for unsupported answers.
    pub fn with_on_unsupported(mut self, policy: OnUnsupported) -> Self {
        self.on_unsupported = policy;
        self
    }

    /// These checks with a declined question answered from the sources' sentences, or
    /// not.
    pub fn with_extract_when_declined(mut self, on: bool) -> Self {
        self.extract_when_declined = on;
        self
    }

    /// The evidence these checks turn on: the extractive ranking, within the budget.
    pub fn selector(&self) -> Evidence {
        let extract = self
            .extract_when_declined
            .then_some(synthkit::evidence::DEFAULT_EXTRACT_COVERAGE);
        Evidence::new(Arc::new(ExtractiveEvidence::new()))
            .with_max_tokens(self.evidence_tokens)
            .with_extract_when_declined(extract)
    }

    /// Sets these checks on `options`, and the answer when there is nothing to answer
    /// from ([`nothing_to_answer_from`] the options' "not in the sources" answer) unless
    /// the options set one: call it after setting `not_in_sources_answer`.
    pub fn set(&self, options: &mut SynthesisOptions) {
        options.evidence = Some(self.evidence.then(|| self.selector()));
        options.on_unsupported = Some(self.on_unsupported);
        if options.empty_response.is_none() {
            options.empty_response = Some(nothing_to_answer_from(
                options.not_in_sources_answer.as_deref(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use synthkit::SynthesisOptions;
    use synthkit::grounding::OnUnsupported;

    use super::AnswerChecks;

    #[test]
    fn a_question_to_a_model_is_answered_evidence_first_and_abstains() {
        for backend in ["openai", "anthropic", "python"] {
            let checks = AnswerChecks::for_questions_to(backend);
            assert!(checks.evidence, "{backend}");
            assert_eq!(checks.on_unsupported, OnUnsupported::Abstain, "{backend}");
            let mut options = SynthesisOptions::default();
            checks.set(&mut options);
            assert!(matches!(options.evidence, Some(Some(_))), "{backend}");
            assert_eq!(options.on_unsupported, Some(OnUnsupported::Abstain));
        }
        assert_eq!(
            AnswerChecks::for_questions(),
            AnswerChecks::for_questions_to("openai")
        );
    }

    #[test]
    fn the_extractive_backend_has_no_evidence_and_warns() {
        let checks = AnswerChecks::for_questions_to(crate::EXTRACTIVE);
        assert!(!checks.evidence);
        assert_eq!(checks.on_unsupported, OnUnsupported::Warn);
        let mut options = SynthesisOptions::default();
        checks.set(&mut options);
        assert!(matches!(options.evidence, Some(None)));
    }

    #[test]
    fn a_summary_has_no_evidence_and_warns() {
        let checks = AnswerChecks::for_summaries();
        assert!(!checks.evidence);
        assert_eq!(checks.on_unsupported, OnUnsupported::Warn);
    }

    #[test]
    fn a_choice_wins_over_the_defaults() {
        let checks = AnswerChecks::for_questions_to("openai")
            .with_evidence(false)
            .with_on_unsupported(OnUnsupported::Warn);
        assert!(!checks.evidence);
        assert_eq!(checks.on_unsupported, OnUnsupported::Warn);
        let checks = AnswerChecks::for_questions_to(crate::EXTRACTIVE)
            .with_evidence(true)
            .with_on_unsupported(OnUnsupported::Error);
        assert!(checks.evidence);
        assert_eq!(checks.on_unsupported, OnUnsupported::Error);
    }
}
