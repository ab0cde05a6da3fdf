//! The answer's checks from the flags: a verb's defaults for the backend, then what
//! `--evidence`, `--evidence-tokens`, `--on-unsupported` and `--on-declined` say.

use synthkit_frontend::AnswerChecks;

use crate::flags::CheckArgs;

/// The checks of a verb's answers, once the backend is known.
#[derive(Debug, Clone)]
pub struct CheckSettings {
    /// The verb's defaults for a backend's name.
    defaults: fn(&str) -> AnswerChecks,
    /// What the flags change.
    flags: CheckArgs,
}

impl CheckSettings {
    /// The checks of answers to questions (`ask`, `batch`, `eval`, `serve`): evidence on
    /// and abstain with a model, off and warn for the extractive backend.
    pub fn for_questions(flags: &CheckArgs) -> Self {
        Self {
            defaults: AnswerChecks::for_questions_to,
            flags: flags.clone(),
        }
    }

    /// The checks of summaries (`summarize`): no evidence, a warning.
    pub fn for_summaries(flags: &CheckArgs) -> Self {
        Self {
            defaults: |_| AnswerChecks::for_summaries(),
            flags: flags.clone(),
        }
    }

    /// The checks for the backend named `backend`.
    pub fn for_backend(&self, backend: &str) -> AnswerChecks {
        self.flags.checks((self.defaults)(backend))
    }
}
