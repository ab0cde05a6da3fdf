//! The attribute names synthkit's spans carry: OpenTelemetry's GenAI semantic conventions
//! for the model calls, synthkit's own `synthkit.*` attributes, and the few OpenInference
//! names Arize Phoenix reads to draw a span's kind.
//!
//! The GenAI names follow the OpenTelemetry semantic conventions **v1.38.0**
//! (<https://github.com/open-telemetry/semantic-conventions/tree/v1.38.0/docs/gen-ai>,
//! status "Development"). The conventions now live in their own repository and the Rust
//! `opentelemetry-semantic-conventions` crate deprecated its GenAI constants, so they are
//! kept here, in one place: a rename in a later version is a change to this file.
//!
//! Where the conventions ask for an array (`gen_ai.response.finish_reasons`), the span
//! carries the one value a synthesis call has as a string: `tracing` fields are scalars.

/// The operation: `chat` for chat messages, `text_completion` for a completion prompt.
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
/// The operation value of a call with chat messages.
pub const OPERATION_CHAT: &str = "chat";
/// The operation value of a call with one completion prompt.
pub const OPERATION_TEXT_COMPLETION: &str = "text_completion";
/// Who serves the model, as the backend knows it (`openai`, `anthropic`, or the
/// model's own provider name); absent when the model does not say.
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
/// The model the request names.
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
/// The request's output limit (the budget's output reserve).
pub const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
/// The request's sampling temperature, where the request sets one (synthkit's requests
/// leave it to the server, so the attribute is absent today).
pub const REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
/// Prompt tokens: the server's count where it reported one, else synthkit's own.
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Completion tokens: the server's count where it reported one, else synthkit's own.
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Of the completion tokens, those a reasoning model spent thinking (the server's count,
/// else synthkit's count of the thinking); only on calls that thought. The name of the
/// GenAI conventions' `gen_ai.client.inference.usage.reasoning.output_tokens`.
pub const USAGE_REASONING_OUTPUT_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
/// Of the prompt tokens, those the server read from its prompt cache (the server's
/// count); only on calls that reused some.
pub const USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// Of the prompt tokens, those the server wrote to its prompt cache (Anthropic); only on
/// calls that wrote some.
pub const USAGE_CACHE_CREATION_INPUT_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
/// Why the model stopped (`stop`, `length`, `other`).
pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// The output type: `json` for a structured call, `text` otherwise.
pub const OUTPUT_TYPE: &str = "gen_ai.output.type";
/// The prompt as GenAI input messages (JSON), only with content capture on.
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// The reply as GenAI output messages (JSON), only with content capture on.
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// The class of a failure (the error's kind), on a failed span.
pub const ERROR_TYPE: &str = "error.type";

/// The response mode (`refine`, `tree_summarize`, ...), on every span.
pub const SYNTHKIT_MODE: &str = "synthkit.mode";
/// What a call does within its mode (`qa`, `refine`, `summary`, `generate`).
pub const SYNTHKIT_STEP: &str = "synthkit.step";
/// The tree level (0 for modes without levels).
pub const SYNTHKIT_LEVEL: &str = "synthkit.level";
/// The call's position within its level or sequence.
pub const SYNTHKIT_INDEX: &str = "synthkit.index";
/// How many nodes: the synthesis's (on its span), or those whose text a call's prompt
/// held (on the call's span).
pub const SYNTHKIT_NODES: &str = "synthkit.nodes";
/// The ids of those nodes, in order, comma-separated, at most
/// [`super::MAX_NODE_IDS`] of them ([`SYNTHKIT_NODE_IDS_CUT`] says when there were more).
pub const SYNTHKIT_NODE_IDS: &str = "synthkit.node_ids";
/// Whether [`SYNTHKIT_NODE_IDS`] lists only the first nodes.
pub const SYNTHKIT_NODE_IDS_CUT: &str = "synthkit.node_ids_cut";
/// The calls a step span holds so far, or a synthesis made in all.
pub const SYNTHKIT_CALLS: &str = "synthkit.calls";
/// synthkit's own count of a call's prompt, as checked against the budget.
pub const SYNTHKIT_COUNTED_PROMPT_TOKENS: &str = "synthkit.counted_prompt_tokens";
/// Whether the server reported the call's usage (else the token counts are synthkit's).
pub const SYNTHKIT_USAGE_REPORTED: &str = "synthkit.usage_reported";
/// Attempts the retry layer made beyond the first.
pub const SYNTHKIT_RETRIES: &str = "synthkit.retries";
/// Whether the reply was cut at the output limit (`finish_reason: length`).
pub const SYNTHKIT_TRUNCATED: &str = "synthkit.truncated";
/// A synthesis's prompt tokens over all its calls.
pub const SYNTHKIT_INPUT_TOKENS: &str = "synthkit.usage.input_tokens";
/// A synthesis's completion tokens over all its calls.
pub const SYNTHKIT_OUTPUT_TOKENS: &str = "synthkit.usage.output_tokens";
/// A synthesis's calls whose reply was cut at the output limit.
pub const SYNTHKIT_TRUNCATED_CALLS: &str = "synthkit.truncated_calls";
/// The synthesis's query, only with content capture on.
pub const SYNTHKIT_QUERY: &str = "synthkit.query";
/// Whether a captured prompt or reply was shortened to [`super::MAX_CONTENT_BYTES`].
pub const SYNTHKIT_CONTENT_CUT: &str = "synthkit.content_cut";

/// OpenInference's span kind, which Arize Phoenix reads to draw a span: `CHAIN` for the
/// synthesis and its steps, `LLM` for a model call.
pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
