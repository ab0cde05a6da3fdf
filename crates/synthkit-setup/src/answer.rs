//! The answer's checks every front end offers, mapped once: evidence first
//! ([`synthkit::evidence`], with the extractive ranking as its selector) and what an
//! answer found in no source does ([`synthkit::grounding::OnUnsupported`]).
//!
//! ```
//! use synthkit::SynthesisOptions;
//! use synthkit_setup::AnswerChecks;
//!
//! // Evidence is off unless asked for (`DEFAULT_EVIDENCE`).
//! let mut options = SynthesisOptions::default();
//! AnswerChecks::for_questions().set(&mut options);
//! assert!(matches!(options.evidence, Some(None)));
//! let checks = AnswerChecks::for_questions_to("openai").with_evidence(true);
//! checks.set(&mut options);
//! assert!(matches!(options.evidence, Some(Some(_))));
//! // The extractive backend ranks sentences itself: never on by default.
//! assert!(!AnswerChecks::for_questions_to(synthkit_setup::EXTRACTIVE).evidence);
//! let summary = AnswerChecks::for_summaries();
//! assert!(!summary.evidence);
//! ```

use std::sync::Arc;

use synthkit::SynthesisOptions;
use synthkit::evidence::{DEFAULT_EVIDENCE_TOKENS, Evidence};
use synthkit::grounding::OnUnsupported;
use synthkit::request::RequestDefaults;
use synthkit_extractive::ExtractiveEvidence;

/// Whether a question (`ask`, `batch` lines, `eval` cases, a service request, Python's
/// `synthesize`) to a model is answered evidence first unless told otherwise (never
/// by default for the extractive backend: [`AnswerChecks::for_questions_to`]).
pub const DEFAULT_EVIDENCE: bool = false;

/// What an answer found in no source does unless told otherwise.
pub const DEFAULT_ON_UNSUPPORTED: OnUnsupported = OnUnsupported::Warn;

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
}

impl AnswerChecks {
    /// The defaults for questions: evidence [`DEFAULT_EVIDENCE`], [`DEFAULT_EVIDENCE_TOKENS`],
    /// [`DEFAULT_ON_UNSUPPORTED`].
    pub fn for_questions() -> Self {
        Self {
            evidence: DEFAULT_EVIDENCE,
            evidence_tokens: DEFAULT_EVIDENCE_TOKENS,
            on_unsupported: DEFAULT_ON_UNSUPPORTED,
        }
    }

    /// The defaults for questions answered by `backend` (a backend's name in reports:
    /// [`crate::EXTRACTIVE`], `openai`, `anthropic`, ...): [`AnswerChecks::for_questions`],
    /// but without evidence for the extractive backend, which ranks sentences itself
    /// (evidence before it answered 85 of the benchmark's 121 cases, against 90
    /// without: `bench/QUALITY.md`).
    pub fn for_questions_to(backend: &str) -> Self {
        Self::for_questions().with_evidence(DEFAULT_EVIDENCE && backend != crate::EXTRACTIVE)
    }

    /// The defaults for summaries (`summarize`): no evidence (a summary reads
    /// everything), the same policy.
    pub fn for_summaries() -> Self {
        Self {
            evidence: false,
            ..Self::for_questions()
        }
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

    /// The evidence these checks turn on: the extractive ranking, within the budget.
    pub fn selector(&self) -> Evidence {
        Evidence::new(Arc::new(ExtractiveEvidence::new())).with_max_tokens(self.evidence_tokens)
    }

    /// Sets these checks on `options`.
    pub fn set(&self, options: &mut SynthesisOptions) {
        options.evidence = Some(self.evidence.then(|| self.selector()));
        options.on_unsupported = Some(self.on_unsupported);
    }

    /// `defaults` with these checks as a request's defaults (a request may still turn
    /// evidence on or off and choose its policy).
    pub fn request_defaults(&self, mut defaults: RequestDefaults) -> RequestDefaults {
        defaults.evidence = Some(self.selector());
        defaults.evidence_by_default = self.evidence;
        defaults.on_unsupported = self.on_unsupported;
        defaults
    }
}
