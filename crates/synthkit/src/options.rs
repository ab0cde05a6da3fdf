//! The synthesizer's option types: templates, concurrency and the defaults.

use std::num::NonZeroUsize;

use crate::prompt::{PromptTemplate, TemplateKind, defaults};

/// The default separator between accumulated answers.
pub const DEFAULT_ACCUMULATE_SEPARATOR: &str = "\n---------------------\n";
/// The default text of an empty response.
pub const DEFAULT_EMPTY_RESPONSE: &str = "Empty Response";
/// The default number of model calls in flight for tree levels and accumulate.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// The templates a synthesizer uses, one per kind.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Templates {
    /// Question answering (`context_str`, `query_str`).
    pub qa: PromptTemplate,
    /// Refining an answer (`query_str`, `existing_answer`, `context_msg`).
    pub refine: PromptTemplate,
    /// Tree summaries (`context_str`, `query_str`).
    pub summary: PromptTemplate,
    /// Generation from the query alone (`query_str`).
    pub simple: PromptTemplate,
}

impl Templates {
    /// Our default templates, chat or completion variants.
    pub fn defaults(chat: bool) -> Self {
        Self {
            qa: defaults::for_kind(TemplateKind::Qa, chat),
            refine: defaults::for_kind(TemplateKind::Refine, chat),
            summary: defaults::for_kind(TemplateKind::Summary, chat),
            simple: defaults::for_kind(TemplateKind::Simple, chat),
        }
    }

    /// The template of `kind` (the simple one for custom kinds).
    pub fn for_kind(&self, kind: TemplateKind) -> &PromptTemplate {
        match kind {
            TemplateKind::Qa => &self.qa,
            TemplateKind::Refine => &self.refine,
            TemplateKind::Summary => &self.summary,
            TemplateKind::Simple | TemplateKind::Custom => &self.simple,
        }
    }
}

/// How many model calls of one synthesis may be in flight at once (tree levels,
/// accumulate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Concurrency {
    /// At most this many.
    Limit(NonZeroUsize),
    /// No limit: every call of a level at once (the reference's behaviour).
    Unlimited,
}

impl Concurrency {
    /// At most `n` calls at once; `n` of 0 is taken as 1 (use [`Concurrency::Unlimited`]
    /// for no limit).
    pub fn limit(n: usize) -> Self {
        Concurrency::Limit(NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN))
    }

    /// The calls in flight that a front end asked for (`None`: the default; 0: no cap),
    /// under the server's slots ([`calls_in_flight`](crate::layer::stack::calls_in_flight),
    /// the one rule).
    pub fn for_server(asked: Option<usize>, server_slots: Option<usize>) -> Self {
        Concurrency::limit(crate::layer::stack::calls_in_flight(asked, server_slots))
    }

    /// The limit as a number (a very large one for `Unlimited`).
    pub fn get(self) -> usize {
        match self {
            Concurrency::Limit(n) => n.get(),
            Concurrency::Unlimited => usize::MAX >> 8,
        }
    }
}

impl Default for Concurrency {
    fn default() -> Self {
        Concurrency::limit(DEFAULT_CONCURRENCY)
    }
}

impl From<NonZeroUsize> for Concurrency {
    fn from(n: NonZeroUsize) -> Self {
        Concurrency::Limit(n)
    }
}
