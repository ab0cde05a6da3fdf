//! The answer's checks, on every verb that answers: evidence first and the policy for an
//! answer whose facts are in no source it was shown.

use clap::{Args, ValueEnum};
use synthkit::grounding::OnUnsupported;

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

/// What an answer found in no source does (`--on-unsupported`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UnsupportedPolicy {
    /// Keep the answer, with a warning and its `grounding` in --json.
    Warn,
    /// Answer "not in the sources" instead (the model's answer in `grounding.withheld`).
    Abstain,
    /// Fail with exit code 1.
    Error,
}

impl UnsupportedPolicy {
    /// The library's policy.
    pub fn library(self) -> OnUnsupported {
        match self {
            UnsupportedPolicy::Warn => OnUnsupported::Warn,
            UnsupportedPolicy::Abstain => OnUnsupported::Abstain,
            UnsupportedPolicy::Error => OnUnsupported::Error,
        }
    }
}

/// What a question the model declines though the sources cover it gets (`--on-declined`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeclinedPolicy {
    /// The sources' own sentences, marked in --json's `evidence.extracted`.
    Extract,
    /// The model's "not in the sources".
    Keep,
}

impl CheckArgs {
    /// `base` (a verb's defaults) with what these flags say.
    pub fn checks(&self, base: synthkit_frontend::AnswerChecks) -> synthkit_frontend::AnswerChecks {
        let mut checks = base.with_evidence_tokens(self.evidence_tokens);
        if let Some(e) = self.evidence {
            checks = checks.with_evidence(e == Switch::On);
        }
        if let Some(p) = self.on_unsupported {
            checks = checks.with_on_unsupported(p.library());
        }
        if let Some(d) = self.on_declined {
            checks = checks.with_extract_when_declined(d == DeclinedPolicy::Extract);
        }
        checks
    }
}

/// `--evidence`, `--evidence-tokens`, `--on-unsupported`, `--on-declined`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Show the model the sentences that bear on the question (on with a model).
    ///
    /// Evidence first: each chunk is shown to the model as its sentences that bear on the
    /// question (the others left out, chunks with none skipped), and a question no
    /// sentence bears on is answered "not in the sources" without a model call; --json's
    /// `evidence` says what was kept; `off` shows the model whole chunks [default: on with
    /// a model; off for the extractive backend, which ranks sentences itself, and for
    /// summarize].
    #[arg(long, value_enum, value_name = "WHEN", help_heading = "Answer checks")]
    pub evidence: Option<Switch>,
    /// The most tokens of kept sentences, all chunks together.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "TOKENS",
        default_value_t = synthkit::evidence::DEFAULT_EVIDENCE_TOKENS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..),
        help_heading = "Answer checks"
    )]
    pub evidence_tokens: usize,
    /// An answer whose facts are in no source: warn, abstain or error.
    ///
    /// An answer's facts (numbers, dates, versions, names, quoted words) are looked up in
    /// what the model was shown; when none is found: warn keeps the answer with a warning,
    /// abstain answers "not in the sources", error fails with exit code 1 [default: abstain
    /// with a model; warn for the extractive backend and for summarize].
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        help_heading = "Answer checks"
    )]
    pub on_unsupported: Option<UnsupportedPolicy>,
    /// With evidence, when the model answers "not in the sources" although a sentence
    /// covers at least 75 % of the question: extract answers with the sources' own
    /// sentences (the model's reply in --json's `evidence.extracted`), keep keeps the
    /// model's words. Streams keep the model's words [default: extract].
    #[arg(
        hide_short_help = true,
        long,
        value_enum,
        value_name = "POLICY",
        help_heading = "Answer checks"
    )]
    pub on_declined: Option<DeclinedPolicy>,
}
