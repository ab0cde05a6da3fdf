//! What a synthesis reports as it runs: usage totals, call reports, noteworthy events,
//! the [`Observer`] that receives them, and what a cut reply does ([`OnTruncation`]).
//!
//! A leaf module: plain types that every layer above the model contract may use.

use std::time::Duration;

use serde::Serialize;

use crate::model::{ModelRequest, StepInfo, Usage};

/// Totals over the calls of one synthesis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct UsageTotals {
    /// Model calls made.
    pub calls: u64,
    /// Prompt tokens: the server's counts where it reported them, else ours.
    pub prompt_tokens: u64,
    /// Completion tokens: the server's counts where it reported them, else ours.
    pub completion_tokens: u64,
    /// Of the completion tokens, those reasoning models spent thinking
    /// ([`crate::model::Usage::reasoning_tokens`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Of the prompt tokens, those the servers read from their prompt caches
    /// ([`crate::model::Usage::cached_prompt_tokens`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
    /// Of the prompt tokens, those the servers wrote to their prompt caches
    /// ([`crate::model::Usage::cache_write_tokens`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Calls whose reply was cut at the output limit (`finish_reason: length`); each one is
    /// also reported as [`SynthEvent::ReplyTruncated`].
    pub truncated_calls: u64,
    /// What the calls cost at the caller's prices ([`crate::cost::Prices::price`]); `None`
    /// when no prices were given (the engine never makes one up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl UsageTotals {
    /// Counts one more call that used `usage` (saturating: the counts are servers').
    pub fn add_call(&mut self, usage: &Usage) {
        self.calls = self.calls.saturating_add(1);
        self.prompt_tokens = self.prompt_tokens.saturating_add(usage.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(usage.completion_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(usage.reasoning_tokens);
        self.cached_prompt_tokens = self
            .cached_prompt_tokens
            .saturating_add(usage.cached_prompt_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(usage.cache_write_tokens);
    }

    /// These totals and `other`'s together (saturating).
    pub fn plus(self, other: UsageTotals) -> Self {
        Self {
            calls: self.calls.saturating_add(other.calls),
            prompt_tokens: self.prompt_tokens.saturating_add(other.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_add(other.completion_tokens),
            reasoning_tokens: self.reasoning_tokens.saturating_add(other.reasoning_tokens),
            cached_prompt_tokens: self
                .cached_prompt_tokens
                .saturating_add(other.cached_prompt_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_add(other.cache_write_tokens),
            truncated_calls: self.truncated_calls.saturating_add(other.truncated_calls),
            cost_usd: match (self.cost_usd, other.cost_usd) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            },
        }
    }
}

/// What a finished call looked like (for traces and progress).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CallReport<'a> {
    /// The request as sent.
    pub request: &'a ModelRequest,
    /// The reply's text (for a stream, all of it): its answer, a reasoning model's
    /// thinking left out.
    pub response: &'a str,
    /// A reasoning model's thinking (sent apart, or taken out of the text; at most
    /// [`crate::text::thinking::MAX_THINKING_BYTES`]); empty for other models.
    pub thinking: &'a str,
    /// Usage of this call.
    pub usage: Usage,
    /// Whether the server reported the usage (else it is our count).
    pub usage_reported: bool,
    /// Time from sending to the last byte.
    pub elapsed: Duration,
    /// Attempts the retry layer ([`crate::layer::retry`]) made beyond the first.
    pub retries: u32,
    /// Whether the reply was cut at the output limit (`finish_reason: length`).
    pub truncated: bool,
    /// The ids of the synthesis's nodes, by position (see [`CallReport::node_ids`]).
    pub(crate) all_node_ids: &'a [String],
}

impl<'a> CallReport<'a> {
    /// The ids of the nodes whose text the prompt held, in order (above a tree's first
    /// level, the nodes under the summaries it read): the ones the call's span lists.
    /// None for a prompt made outside the synthesis's packing, or with no nodes (such as
    /// generation's).
    pub fn node_ids(&self) -> impl ExactSizeIterator<Item = &'a str> + 'a {
        let all = self.all_node_ids;
        let positions = match all.is_empty() {
            true => &[][..],
            false => crate::model::tags::PromptNodes::positions_in(self.request),
        };
        positions
            .iter()
            .map(move |&i| all.get(i as usize).map_or("", String::as_str))
    }
}

/// Something noteworthy that is not an error.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SynthEvent {
    /// simple_summarize cut text to fit one prompt.
    Truncated {
        /// Tokens of context dropped.
        dropped_tokens: usize,
        /// Nodes whose text was cut, wholly or partly.
        dropped_node_ids: Vec<String>,
    },
    /// A structured refine step's reply could not be used; the answer was kept.
    StepSkipped {
        /// The step.
        step: StepInfo,
        /// Why.
        reason: String,
    },
    /// The server reported more prompt tokens than synthkit counted (a server without an
    /// exact counter, such as Ollama, adding a chat template): the prompt limit was
    /// lowered by the learned offset plus a margin, for the rest of the run.
    Calibrated {
        /// The call whose usage taught it.
        step: StepInfo,
        /// synthkit's count of the prompt.
        ours: usize,
        /// The server's count.
        server: u64,
        /// The learned offset (server minus ours), the largest seen so far.
        offset: usize,
        /// The margin kept on top of it.
        margin: usize,
        /// The prompt limit from now on.
        limit: usize,
    },
    /// The server rejected a prompt as too long (its tokenizer counts more than ours): the
    /// prompt limit was lowered and the step re-packed.
    ContextCorrected {
        /// The step that was rejected.
        step: StepInfo,
        /// The prompt's tokens as the server counted them, if it said.
        server_prompt_tokens: Option<u64>,
        /// The server's context window, if it said.
        server_context_window: Option<u64>,
        /// The prompt budget from now on.
        budget: usize,
    },
    /// A model reply was cut at the output limit (`finish_reason: length`): the answer of
    /// that step (intermediate or final) may be incomplete. Raise the output reserve
    /// (`num_output`) to avoid it; see [`crate::OnTruncation`].
    ReplyTruncated {
        /// The call's step: mode, step, tree level and index.
        step: StepInfo,
        /// The reply's completion tokens (the server's count where it reported one).
        completion_tokens: u64,
        /// The output limit the request carried (the budget's output reserve).
        max_tokens: usize,
    },
    /// An intermediate reply reached its output bound, the size of its input
    /// ([`crate::options::OUTPUT_GROWTH`]), and was cut there (a summary may not outgrow
    /// what it summarises). Not a truncation: not in
    /// [`UsageTotals::truncated_calls`], never an error.
    OutputBounded {
        /// The call's step.
        step: StepInfo,
        /// The bounded output limit the request carried.
        max_tokens: usize,
        /// The tokens the call read.
        input_tokens: usize,
    },
    /// A reply was not used as an answer: it said the sources do not answer, or (in a
    /// step that had an answer) talked about that answer instead of giving one, or stated
    /// facts found in no passage shown in place of an answer whose facts were found
    /// there; see [`crate::text::abstention`].
    ReplyNotUsed {
        /// The call's step.
        step: StepInfo,
        /// How the reply read.
        reading: crate::text::abstention::ReplyReading,
        /// Whether the step's previous answer was kept in its place.
        kept_previous: bool,
    },
    /// A tree level was summarised.
    TreeLevel {
        /// The level (1 = the first summaries).
        level: u32,
        /// Chunks at this level.
        chunks: usize,
    },
}

/// Receives progress and call reports; every method has an empty default.
pub trait Observer: Send + Sync {
    /// `total` calls have been announced so far: the calls the synthesis has packed or
    /// started, counted from its first (it only grows). It is not the run's final count:
    /// later steps and tree levels are announced only once they are packed, so it trails
    /// the calls still to come and reaches the real number of calls only at the end. To
    /// know the total up front, run the synthesis first against a model that answers at
    /// once (as the CLI's `--plan` does) and count its calls.
    fn calls_planned(&self, _total: usize) {}
    /// A call finished.
    fn call_finished(&self, _report: &CallReport<'_>) {}
    /// Something noteworthy happened.
    fn event(&self, _event: &SynthEvent) {}
}

/// What a synthesis does with a model reply cut at the output limit (`finish_reason:
/// length`: the reply reached the request's `max_tokens`, the budget's output reserve).
///
/// Either way the call is counted in [`UsageTotals::truncated_calls`] and reported
/// to the observer as [`SynthEvent::ReplyTruncated`] with its step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnTruncation {
    /// Keep the cut reply and log a warning (the default).
    #[default]
    Warn,
    /// Fail the synthesis with [`SynthError::Truncated`](crate::SynthError::Truncated); for a stream, its last item is
    /// that error instead of a normal end.
    Error,
}

/// Where a streaming response reads the usage of its synthesis when the stream ends.
pub(crate) trait UsageSource: Send + Sync {
    /// The totals so far.
    fn totals(&self) -> UsageTotals;
}

tokio::task_local! {
    /// Retries of the model call running in this task (see [`counting_retries`]).
    static RETRIES: std::cell::Cell<u32>;
}

/// Runs the model call `call`, counting the retries the retry layer makes inside it.
pub(crate) async fn counting_retries<F: std::future::Future>(call: F) -> (F::Output, u32) {
    RETRIES
        .scope(std::cell::Cell::new(0), async move {
            let out = call.await;
            (out, RETRIES.try_with(std::cell::Cell::get).unwrap_or(0))
        })
        .await
}

/// Counts one retry of the call running in this task (nothing outside
/// [`counting_retries`]).
pub(crate) fn note_retry() {
    let _ = RETRIES.try_with(|n| n.set(n.get().saturating_add(1)));
}
