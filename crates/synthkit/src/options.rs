//! The synthesizer's option types: templates, concurrency and the defaults.

use std::num::NonZeroUsize;

use crate::prompt::{PromptTemplate, TemplateKind, defaults};

/// The default separator between accumulated answers.
pub const DEFAULT_ACCUMULATE_SEPARATOR: &str = "\n---------------------\n";
/// The default text of an empty response.
pub const DEFAULT_EMPTY_RESPONSE: &str = "Empty Response";
/// The default number of model calls in flight for tree levels and accumulate.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// An intermediate call's output limit is at most this many times the tokens it reads
/// (its context and the answer it refines): a summary may not outgrow what it
/// summarises. Applies to plain-text intermediate calls (tree levels below the last,
/// refine steps before the last, accumulate's answers); final calls and JSON replies
/// keep the whole output reserve.
pub const OUTPUT_GROWTH: f64 = 1.0;

/// The least output limit [`OUTPUT_GROWTH`] leaves an intermediate call (for short
/// inputs, whose answer may fairly be longer than they are).
pub const MIN_BOUNDED_OUTPUT: usize = 64;

/// The ceiling on calls in flight when no cap is asked for and the server names no
/// slot count.
pub const UNLIMITED_IN_FLIGHT: usize = 4096;

/// The calls in flight for a cap of `max_in_flight` (0: no cap) and the server's slot
/// count, when it says: the smaller of the two, the slots without a cap, and
/// [`UNLIMITED_IN_FLIGHT`] with neither.
pub fn ceiling(max_in_flight: usize, server_slots: Option<usize>) -> usize {
    match (max_in_flight, server_slots.filter(|s| *s > 0)) {
        (0, Some(slots)) => slots,
        (0, None) => UNLIMITED_IN_FLIGHT,
        (n, Some(slots)) => n.min(slots),
        (n, None) => n,
    }
}

/// The calls in flight of one synthesis: `asked` (0: no cap), else
/// [`DEFAULT_CONCURRENCY`], never more than the server's slots
/// when it says how many it has ([`ceiling`]). The one rule of every front end: the
/// CLI's `--concurrency`, the service's `concurrency` field and Python's `concurrency=`.
///
/// ```
/// use synthkit::layer::stack::calls_in_flight;
/// assert_eq!(calls_in_flight(None, None), synthkit::synth::DEFAULT_CONCURRENCY);
/// assert_eq!(calls_in_flight(None, Some(4)), 4);
/// assert_eq!(calls_in_flight(Some(16), Some(4)), 4);
/// assert_eq!(calls_in_flight(Some(2), Some(4)), 2);
/// assert_eq!(calls_in_flight(Some(0), Some(4)), 4);
/// ```
pub fn calls_in_flight(asked: Option<usize>, server_slots: Option<usize>) -> usize {
    ceiling(asked.unwrap_or(DEFAULT_CONCURRENCY), server_slots)
}

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
    /// map_reduce's map step (`context_str`, `query_str`).
    pub map: PromptTemplate,
    /// map_reduce's reduce steps (`context_str`, `query_str`).
    pub reduce: PromptTemplate,
}

impl Templates {
    /// Our default templates, chat or completion variants.
    pub fn defaults(chat: bool) -> Self {
        Self {
            qa: defaults::for_kind(TemplateKind::Qa, chat),
            refine: defaults::for_kind(TemplateKind::Refine, chat),
            summary: defaults::for_kind(TemplateKind::Summary, chat),
            simple: defaults::for_kind(TemplateKind::Simple, chat),
            map: defaults::for_kind(TemplateKind::Map, chat),
            reduce: defaults::for_kind(TemplateKind::Reduce, chat),
        }
    }

    /// The template of `kind` (the simple one for custom kinds).
    pub fn for_kind(&self, kind: TemplateKind) -> &PromptTemplate {
        match kind {
            TemplateKind::Qa => &self.qa,
            TemplateKind::Refine => &self.refine,
            TemplateKind::Summary => &self.summary,
            TemplateKind::Map => &self.map,
            TemplateKind::Reduce => &self.reduce,
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
    /// under the server's slots ([`calls_in_flight`], the one rule).
    pub fn for_server(asked: Option<usize>, server_slots: Option<usize>) -> Self {
        Concurrency::limit(calls_in_flight(asked, server_slots))
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
