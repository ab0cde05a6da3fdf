//! An offline, deterministic backend that answers by extracting sentences from the context.
//!
//! [`ExtractiveModel`] needs no server and no weights: every mode works with it on a fresh
//! machine, and the same request always gives the same answer. It reads what a prompt was
//! rendered from (the request's template kind and variables), never the prompt text itself:
//!
//! - the question is `query_str`;
//! - the passages are `context_str` (question answering and summary steps) or `context_msg`
//!   (refine steps); in a refine step the sentences of `existing_answer` compete with the new
//!   passages' sentences, so a good earlier answer survives a useless new chunk;
//! - a request without any passages (the `generation` mode's plain query) gets
//!   [`ExtractiveModel::NO_CONTEXT_ANSWER`]; empty passages give an empty answer.
//!
//! The passages are split into sentences (metadata header blocks such as
//! `file_path: notes.md` and Markdown headings are skipped, repeated sentences are kept
//! once), each sentence is scored against the question with BM25 (the `bm25` crate, as
//! the CLI's `--top-k` ranks chunks: k1 = 1.2, b = 0.75, IDF over this request's sentences,
//! an English analyzer with Unicode words, NLTK stop words and Snowball stemming) times the
//! share of the question's words the sentence contains, and the best sentences are picked
//! until the answer would exceed the request's `max_tokens`.
//! Sentences scoring below [`ExtractiveModel::with_min_relative_score`] times the best
//! score (default 0.6) are left out, so an answer stays on the question rather than filling
//! its budget. The picked sentences are returned in their original order,
//! joined by spaces. When none of the question's words occurs, a refine step keeps the
//! existing answer unchanged, and other steps (or an empty question) rank sentences by
//! centrality instead: the sum of a sentence's cosine similarities to all other sentences,
//! computed in linear time through the sum of the sentence vectors. That gives a summary
//! for questions such as "Summarize the documents" whose words the passages lack.
//!
//! Structured requests (a `schema` is set) get JSON text from
//! [`LanguageModel::complete`], which the default [`LanguageModel::structured`] parses: for
//! the structured-refine schema (`query_satisfied`, `answer`) the object says whether a word
//! of the question occurs in the passages and carries the extracted answer; other object
//! schemas are filled on a best-effort basis (strings get the answer, booleans the
//! `query_satisfied` value).
//!
//! ```
//! use synthkit::backend::extractive::ExtractiveModel;
//! let model = ExtractiveModel::new();
//! let answer = model.extract(
//!     "How often is the mirror cleaned?",
//!     None,
//!     "The dome opens at dusk. The primary mirror is cleaned every six months.",
//!     256,
//! );
//! assert_eq!(answer.text, "The primary mirror is cleaned every six months.");
//! assert!(answer.query_matched);
//! ```

mod rank;
mod select;
mod sentences;
mod structured;
#[cfg(test)]
mod tests;

use std::collections::HashSet;

use futures::future::BoxFuture;

use crate::model::{
    Completion, FinishReason, LanguageModel, ModelError, ModelInfo, ModelRequest, Usage,
};
use crate::prompt::TemplateKind;
use crate::text::SharedTokenizer;
use crate::text::tokenizer::default_tokenizer;
use rank::{Index, ranked, terms};
use select::select;
use sentences::split_sentences;
use structured::structured_reply;

/// The offline extractive backend. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct ExtractiveModel {
    name: String,
    context_window: usize,
    num_output: usize,
    tokenizer: SharedTokenizer,
    min_relative_score: f64,
}

impl Default for ExtractiveModel {
    fn default() -> Self {
        Self::new()
    }
}

/// What [`ExtractiveModel::extract`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    /// The answer: the picked sentences in their original order, joined by spaces.
    pub text: String,
    /// Whether some word of the question occurs in the existing answer or the passages
    /// (always false for an empty question).
    pub query_matched: bool,
    /// Whether the best sentence alone was longer than the budget and had to be cut.
    pub truncated: bool,
}

impl Extraction {
    /// Whether the question is answered: a word of the question matched, or, for an empty
    /// question, the answer is not empty. The `query_satisfied` of structured replies.
    pub fn satisfied(&self, query_has_terms: bool) -> bool {
        if query_has_terms {
            self.query_matched
        } else {
            !self.text.is_empty()
        }
    }
}

impl ExtractiveModel {
    /// The default name.
    pub const NAME: &'static str = "extractive";
    /// The default context window (tokens).
    pub const DEFAULT_CONTEXT_WINDOW: usize = 8192;
    /// The default output reserve (tokens).
    pub const DEFAULT_NUM_OUTPUT: usize = 256;
    /// The default relevance floor relative to the best sentence's score.
    pub const DEFAULT_MIN_RELATIVE_SCORE: f64 = 0.6;
    /// The reply to a request without passages (the `generation` mode).
    pub const NO_CONTEXT_ANSWER: &'static str = "(extractive backend: no context was given, so there is nothing to extract an answer from; use a response mode that sends context, or a language-model backend)";

    /// The backend with its defaults: name `extractive`, window 8192, output 256, the
    /// `cl100k_base` tokenizer, relevance floor 0.6.
    pub fn new() -> Self {
        Self {
            name: Self::NAME.to_string(),
            context_window: Self::DEFAULT_CONTEXT_WINDOW,
            num_output: Self::DEFAULT_NUM_OUTPUT,
            tokenizer: default_tokenizer(),
            min_relative_score: Self::DEFAULT_MIN_RELATIVE_SCORE,
        }
    }

    /// Sets the name reported by [`LanguageModel::info`].
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the context window reported by [`LanguageModel::info`].
    pub fn with_context_window(mut self, tokens: usize) -> Self {
        self.context_window = tokens;
        self
    }

    /// Sets the output reserve reported by [`LanguageModel::info`]; it is also the answer's
    /// budget when a request's `max_tokens` is 0.
    pub fn with_num_output(mut self, tokens: usize) -> Self {
        self.num_output = tokens;
        self
    }

    /// Sets the tokenizer that measures the answer against `max_tokens` and counts the
    /// completion tokens.
    pub fn with_tokenizer(mut self, tokenizer: SharedTokenizer) -> Self {
        self.tokenizer = tokenizer;
        self
    }

    /// Sets the relevance floor: with a question, sentences scoring below `ratio` times the
    /// best sentence's score are not picked. `0.0` picks every sentence sharing a word with
    /// the question while room is left; `1.0` only the best ones. Clamped to `[0, 1]`.
    pub fn with_min_relative_score(mut self, ratio: f64) -> Self {
        self.min_relative_score = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, 1.0)
        };
        self
    }

    /// Extracts an answer to `query` of at most `max_tokens` tokens from the sentences of
    /// `existing_answer` (if any) and `context`.
    pub fn extract(
        &self,
        query: &str,
        existing_answer: Option<&str>,
        context: &str,
        max_tokens: usize,
    ) -> Extraction {
        // Existing answer first (it wins ties), then the passages; repeats kept once.
        let mut seen: HashSet<String> = HashSet::new();
        let mut sentences = Vec::new();
        if let Some(existing) = existing_answer {
            split_sentences(existing, &mut sentences);
            sentences.retain(|s| seen.insert(s.to_lowercase()));
        }
        let existing_count = sentences.len();
        let mut passages = Vec::new();
        split_sentences(context, &mut passages);
        sentences.extend(
            passages
                .into_iter()
                .filter(|s| seen.insert(s.to_lowercase())),
        );

        let index = Index::new(&sentences);
        let query_has_terms = !terms(query).is_empty();
        let bm25 = index.bm25(query);
        let best = bm25.iter().copied().fold(0.0_f64, f64::max);
        let query_matched = best > 0.0;
        let candidates: Vec<usize> = if query_matched {
            let floor = best * self.min_relative_score;
            ranked(&bm25)
                .into_iter()
                .filter(|&i| bm25.get(i).is_some_and(|&s| s > 0.0 && s >= floor))
                .collect()
        } else if query_has_terms && existing_count > 0 {
            // Nothing speaks to the question: the existing answer stays as it is.
            (0..existing_count).collect()
        } else {
            ranked(&index.centrality())
        };

        let (text, truncated) = select(&self.tokenizer, &sentences, &candidates, max_tokens);
        Extraction {
            text,
            query_matched,
            truncated,
        }
    }

    /// The reply to a request (the text of [`LanguageModel::complete`]).
    fn respond(&self, request: &ModelRequest) -> (String, bool) {
        let query = request.variable("query_str").unwrap_or("");
        let context = match request.kind {
            TemplateKind::Refine => request
                .variable("context_msg")
                .or_else(|| request.variable("context_str")),
            TemplateKind::Simple => None,
            _ => request
                .variable("context_str")
                .or_else(|| request.variable("context_msg")),
        };
        let budget = if request.max_tokens == 0 {
            self.num_output
        } else {
            request.max_tokens
        };
        let query_has_terms = !terms(query).is_empty();
        let extraction = match context {
            Some(context) => {
                let existing = request.variable("existing_answer");
                self.extract(query, existing, context, budget)
            }
            None => Extraction {
                text: Self::NO_CONTEXT_ANSWER.to_string(),
                query_matched: false,
                truncated: false,
            },
        };
        let satisfied = context.is_some() && extraction.satisfied(query_has_terms);
        match &request.schema {
            Some(schema) => (structured_reply(schema, &extraction.text, satisfied), false),
            None => (extraction.text, extraction.truncated),
        }
    }
}

impl LanguageModel for ExtractiveModel {
    fn info(&self) -> ModelInfo {
        ModelInfo::new(self.name.clone())
            .with_context_window(self.context_window)
            .with_num_output(self.num_output)
            .with_chat(false)
    }

    /// Extracts the answer (JSON text when the request has a schema). Never fails.
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(async move {
            let (text, truncated) = self.respond(request);
            let completion_tokens = self.tokenizer.count(&text) as u64;
            Ok(Completion {
                usage: Some(Usage {
                    prompt_tokens: request.prompt_tokens as u64,
                    completion_tokens,
                }),
                finish_reason: Some(if truncated {
                    FinishReason::Length
                } else {
                    FinishReason::Stop
                }),
                text,
            })
        })
    }
}
