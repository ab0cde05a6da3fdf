//! The crate's top-level error.

use crate::mode::{ResponseMode, Step, UnknownMode};
use crate::model::{ModelError, StepInfo};
use crate::prompt::{BudgetError, TemplateError};
use crate::text::{SplitError, TokenizerError};

/// Everything that can go wrong in a synthesis. Messages say what to change, in the
/// library's terms (a front end such as the CLI adds its own flag names).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SynthError {
    /// The prompt budget cannot hold what a step needs.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// A template is unusable.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The splitter's settings are invalid.
    #[error(transparent)]
    Split(#[from] SplitError),
    /// An unknown tokenizer.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// An unknown response mode.
    #[error(transparent)]
    UnknownMode(#[from] UnknownMode),
    /// The output schema is not a valid JSON schema.
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),
    /// A model call failed.
    #[error("{mode} {step} call failed: {source}")]
    Model {
        /// The mode.
        mode: ResponseMode,
        /// The step.
        step: Step,
        /// What the model said.
        #[source]
        source: ModelError,
    },
    /// The model's exact prompt counter (its server's `/tokenize`) failed; the run stops
    /// rather than switching to other counts.
    #[error(
        "counting a prompt with {counter} failed: {source}; check the server, or build the synthesizer without the server's counter"
    )]
    Count {
        /// The counter's name.
        counter: String,
        /// What went wrong.
        #[source]
        source: ModelError,
    },
    /// A step's prompt has no room for context, and the cause is not the template: the
    /// answer carried over from an earlier call (refine's existing answer), or a smaller
    /// room the server reported after a rejected prompt, or both.
    #[error(
        "the {kind} prompt has no room left for context: of a {budget}-token budget, the template, query and system prompt take {template_tokens} tokens{}{}; {}",
        carried_part(*answer_tokens),
        shrink_part(*server_shrink),
        no_room_remedy(*template_tokens, *answer_tokens, *server_shrink, *budget)
    )]
    NoRoomForContext {
        /// The template's kind.
        kind: crate::prompt::TemplateKind,
        /// The prompt budget before any correction.
        budget: usize,
        /// Tokens of the template, query and system prompt alone.
        template_tokens: usize,
        /// Tokens of the answer carried into the prompt (0 when none).
        answer_tokens: usize,
        /// Tokens taken off the budget after the server rejected longer prompts.
        server_shrink: usize,
    },
    /// tree_summarize (or map_reduce) cannot reduce the number of chunks any further. In
    /// map_reduce it is the model's records that are too long to combine (a front end
    /// reports it as the model's error).
    #[error("{}", not_converging(*mode, *level, *summaries, *chunks, *chunk_size))]
    TreeNotConverging {
        /// The mode whose levels did not reduce (`tree_summarize` or `map_reduce`).
        mode: ResponseMode,
        /// The level that did not reduce.
        level: u32,
        /// Summaries at that level.
        summaries: usize,
        /// Prompts they need.
        chunks: usize,
        /// Context tokens per prompt.
        chunk_size: usize,
    },
    /// The structured answer does not parse into the requested type.
    #[error("the structured answer does not match the requested type: {source}")]
    Parse {
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The answer states facts found in no source the model was shown, under
    /// [`crate::grounding::OnUnsupported::Error`].
    #[error(
        "the answer states facts found in no source it was shown ({}): it was not presented; rephrase the question, give sources that hold the answer, or take such answers flagged (on_unsupported: warn)",
        crate::text::list_excerpt(unsupported)
    )]
    Unsupported {
        /// The spans found in no source (at most [`crate::grounding::MAX_LISTED`]).
        unsupported: Vec<String>,
    },
    /// A streamed answer was read after the stream had failed.
    #[error("the stream failed earlier, so its text is incomplete: use the error it returned")]
    StreamFailed,
    /// A task running a model call ended without an answer (it panicked).
    #[error("a model call task ended without an answer: {source}")]
    Task {
        /// Why the task ended.
        #[source]
        source: tokio::task::JoinError,
    },
    /// A model reply was cut at the output limit (`finish_reason: length`) and the
    /// synthesizer was built with [`crate::OnTruncation::Error`].
    #[error(
        "the {m} {s} reply (level {l}, index {i}) was cut at the output limit of {max_tokens} tokens; raise the output reserve (num_output), or accept cut replies with OnTruncation::Warn",
        m = .step.mode,
        s = .step.step,
        l = .step.level,
        i = .step.index
    )]
    Truncated {
        /// The call's step: mode, step, tree level and index.
        step: StepInfo,
        /// The reply's completion tokens (the server's count where it reported one).
        completion_tokens: u64,
        /// The output limit the request carried (the budget's output reserve).
        max_tokens: usize,
    },
    /// An option or combination of options is not allowed.
    #[error("{0}")]
    InvalidOption(String),
    /// A node's image costs more prompt tokens than any prompt of the synthesis has room
    /// for beside its template: it could only be sent over the window.
    #[error(
        "the image of node `{node}` costs {image_tokens} prompt tokens ({rule}), but a {kind} prompt has room for {room} beside its template (a prompt may have {budget} tokens): use a smaller image, raise the context window, or lower num_output"
    )]
    ImageTooLarge {
        /// The node's id.
        node: String,
        /// What the image costs.
        image_tokens: usize,
        /// How the cost was counted ([`crate::node::ImageCost::name`]).
        rule: &'static str,
        /// The template's kind.
        kind: crate::prompt::TemplateKind,
        /// The room beside the template.
        room: usize,
        /// The prompt limit.
        budget: usize,
    },
    /// A node carries an image and the model or the synthesis cannot take it: no call
    /// was made. The text says why and what to change.
    #[error("node `{node}` carries an image, but {why}")]
    ImagesUnsupported {
        /// The node's id.
        node: String,
        /// Why it cannot be sent, and what to change.
        why: String,
    },
    /// Two nodes have the same id: sources and citations name nodes by id, so one of
    /// them would show the other's text.
    #[error(
        "two nodes have the id `{id}` (nodes {first} and {second}, counted from 1): give each node its own id"
    )]
    DuplicateNodeId {
        /// The id.
        id: String,
        /// The position of its first node, from 1.
        first: usize,
        /// The position of the second, from 1.
        second: usize,
    },
}

impl SynthError {
    /// The model error inside, if this is a failed model call.
    pub fn model_error(&self) -> Option<&ModelError> {
        match self {
            SynthError::Model { source, .. } | SynthError::Count { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An error's message followed by each of its sources' (`a: b: c`), leaving out a source
/// whose message the text already holds. It hides nothing: run it through
/// [`secret::redact_urls`](crate::secret::redact_urls) where a source may name a URL with
/// user-info.
pub fn message_with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The message of [`SynthError::TreeNotConverging`]: tree_summarize's summaries, or
/// map_reduce's records, which are the model's own replies.
fn not_converging(
    mode: ResponseMode,
    level: u32,
    texts: usize,
    prompts: usize,
    chunk_size: usize,
) -> String {
    if mode == ResponseMode::MapReduce {
        format!(
            "{mode} cannot converge: the model's records are too long to combine; at level {level}, {texts} records still need {prompts} reduce prompts of {chunk_size} context tokens (a record should be at most num_output tokens; a model that ignores max_tokens writes longer ones); lower num_output, raise the context window, or use tree_summarize or compact"
        )
    } else {
        format!(
            "{mode} cannot converge: at level {level}, {texts} summaries still need {prompts} prompts of {chunk_size} context tokens; each summary may take up to num_output tokens, so raise the context window, lower num_output, or use compact"
        )
    }
}

fn carried_part(answer_tokens: usize) -> String {
    if answer_tokens == 0 {
        String::new()
    } else {
        format!(", the answer so far {answer_tokens} tokens")
    }
}

fn shrink_part(server_shrink: usize) -> String {
    if server_shrink == 0 {
        String::new()
    } else {
        format!(", and the server's smaller room takes off {server_shrink} tokens")
    }
}

fn no_room_remedy(
    template_tokens: usize,
    answer_tokens: usize,
    server_shrink: usize,
    budget: usize,
) -> String {
    let room = budget.saturating_sub(server_shrink);
    if server_shrink > 0 && template_tokens >= room {
        return format!(
            "the template, query and system prompt alone are more than the {room} tokens the server takes: shorten the query, template or system prompt, or start the server with a larger context"
        );
    }
    let remedy = match (answer_tokens > 0, server_shrink > 0) {
        (true, false) => {
            "the answer so far is the model's own reply: lower num_output so replies stay short (a model that ignores max_tokens writes past it), or raise the context window"
        }
        (false, _) => {
            "the server accepts shorter prompts than the context window says: set the context window to the server's room per request (llama-server divides -c by its slots, -np), or shorten the query, template or system prompt"
        }
        (true, true) => {
            "the server accepts shorter prompts than the context window says, and the answer so far fills the rest: set the context window to the server's room per request (llama-server divides -c by its slots, -np) and lower num_output"
        }
    };
    remedy.to_string()
}
