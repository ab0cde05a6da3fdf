//! An offline, deterministic backend for synthkit that answers by extracting sentences from
//! the context.
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
//! The passages are split into sentences, markup-aware (Markdown, reStructuredText, HTML
//! converted to Markdown-style text, plain text; the `sentences` module has the rules).
//! Metadata header blocks (`file_path: notes.md`), rules, rst directives, badge, link-only
//! and HTML-only lines are no sentences; inline markup is cleaned (`[text](url)` shows
//! `text`); repeated sentences are kept once. Headings (`#`, setext and rst underlined
//! titles, outline `*` headings, release lines, a paragraph naming a version right after a
//! rule line as bash's NEWS has) are candidates of their own, ranked with their file's
//! path, only for a question asking for a title or heading ("What is the title of chapter
//! 16?") or, when they name a version, for a release question; a question asking for a
//! release itself ("Which Python version is this?", "What is the latest coreutils
//! release?") is answered by such a heading alone, the highest version winning for
//! "latest". A table row reads each cell after its column's header (`Operating System:
//! Linux; Compiler Versions: GCC >= 10.1`; a table without a header row keeps its rows with
//! prose). Code (fenced, indented, rst literal blocks) answers in two ways: a question
//! asking for a command or how to do something ("What command ...?", "How do I ...?") gets
//! the sentence announcing the code with its lines under it, indented; a question naming
//! code (`--flag`, `foo()`, `a::b`, backticks) may get a code line, at half its score
//! against prose. A sentence ending with one colon directly followed by list items is
//! their lead-in (a heading directly above a list serves as one): the two are one
//! candidate, shown as the lead-in, a newline and one `- item` a line (as many as the
//! budget allows, then `- …`); a lead-in referring back ("Keep these rules in mind:")
//! brings the sentence before it. A list competes through its lead-in and its best item;
//! when its items speak to the question more than its lead-in (a FAQ), only the matching
//! items are shown, `- …` marking the others; when only its items match, an item answers
//! on its own, shown under its lead-in when room is left. Other sentences ending with a
//! colon (announcing a table that is not shown) are left out, and one announcing code that
//! is not shown ends with a period.
//!
//! Candidates are scored against the question with BM25 (the `bm25` crate's analyzer, as
//! the CLI's `--top-k` ranks chunks: k1 = 1.2, b = 0.75, IDF over this request's sentences,
//! an English analyzer with Unicode words, NLTK stop words and Snowball stemming) times the
//! share of the question's words the candidate contains; the first sentence of a section
//! is ranked with its heading's words and weighs 1.5 times more when the heading has the
//! question's words (`boost` has the other adjustments). Symbols of the question (`?`,
//! `+=`) are matched as words. The best candidates are picked until the answer would
//! exceed the request's `max_tokens`. Candidates scoring below
//! [`ExtractiveModel::with_min_relative_score`] times the best score (default 0.6) are
//! left out, and an answer stays where its best candidate is (`focus`): others join it
//! from the same document nearby, or from elsewhere only when they score at least 0.85 of
//! it and cover as much of the question; a best candidate that is a question (a FAQ
//! entry) brings the sentences after it. A best sentence pointing forward to what it does
//! not hold ("… only when the weather limits below are met.", "see the steps below", "as
//! follows", not "below 20.5" or "below the horizon") is answered by what it points to
//! (`forward`): the first paragraph or list after it, past at most one heading, in its
//! document or the next piece of the same file, comes first (whatever it scores), the
//! pointing sentence after it; with nothing after it, it answers alone. The picked
//! sentences are returned in their original order, joined by spaces. A sentence of more
//! than 60 words (or one longer than the whole budget) shows its 45-word window with the
//! most question weight, `…` where it was cut. When the question asks which release or
//! version, a sentence under a heading with a version number is shown after that heading
//! ("Noteworthy changes in release 8.6 (2010-10-15): sort now accepts …").
//!
//! When the best candidates cover less than [`ExtractiveModel::with_min_coverage`] (default
//! 0.5) of the question's weight (the IDF of the question terms they contain, or their
//! file path and headings contain, over that of all its terms, a term absent from every
//! sentence weighing most), the answer is
//! [`ExtractiveModel::NOT_ANSWERED`], [`Extraction::grounded`] false; a refine step then
//! keeps its existing answer unchanged. An existing answer equal to
//! [`ExtractiveModel::NOT_ANSWERED`] counts as none, and such sentences in passages (the
//! earlier answers `tree_summarize` combines) are ignored. A question without terms (only
//! stop words, or a summary request such as "Summarize the documents") is never weak: its
//! sentences are ranked by centrality, the sum of a sentence's cosine similarities to all
//! other sentences, computed in linear time through the sum of the sentence vectors, with
//! a bonus for the first sentences of each document (where writers say what it is about).
//!
//! Citations: a line that is exactly `[n]` labels the passage text after it as source `n`
//! (the engine writes one before each source when citations are on). Label lines are no
//! sentences; when the passages had labels, each picked sentence ends with its source's
//! marker before its final terminator ("The mirror is cleaned every six months \[2\].", a
//! lead-in "The following are disallowed \[1\]:"), and [`Extraction::sources`] lists the
//! sources used. An existing answer's sentences keep their markers; markers (`[n]`,
//! `[n, m]`) are ignored when scoring and when finding repeats.
//!
//! Structured requests (a `schema` is set) get JSON text from
//! [`LanguageModel::complete`], which the engine parses (and validates, with synthkit's
//! feature `schema-validation`) as it does any model's structured reply: for
//! the structured-refine schema (`query_satisfied`, `answer`) the object says whether a word
//! of the question occurs in the passages and carries the extracted answer; other object
//! schemas are filled on a best-effort basis (strings get the answer, booleans the
//! `query_satisfied` value).
//!
//! ```
//! use synthkit_extractive::ExtractiveModel;
//! let model = ExtractiveModel::new();
//! let answer = model.extract(
//!     "How often is the mirror cleaned?",
//!     None,
//!     "The dome opens at dusk. The primary mirror is cleaned every six months.",
//!     256,
//! );
//! assert_eq!(answer.text, "The primary mirror is cleaned every six months.");
//! assert!(answer.query_matched && answer.grounded);
//! let context = "The dome opens at dusk.";
//! let unanswered = model.extract("Who won the 1998 World Cup?", None, context, 256);
//! assert_eq!(unanswered.text, ExtractiveModel::NOT_ANSWERED);
//! ```

// The workspace README's and the book's (docs/) Rust examples use this backend: they are
// tested here, one struct per file (the architecture test in synthkit-cli's `docs` suite
// checks the book against the tree).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/response-modes.md")]
struct ResponseModesDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/citations.md")]
struct CitationsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/images.md")]
struct ImagesDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
struct LibraryDoctests;

mod blocks;
mod boost;
mod cite;
mod evidence;
mod focus;
mod forward;
mod inline;
mod markup;
mod paragraph;
#[cfg(test)]
mod parse_tests;
mod query;
mod rank;
mod select;
mod sentences;
mod split;
mod structured;
#[cfg(test)]
mod tests;
mod units;
mod window;

pub use evidence::{Evidence, EvidencePassage, ExtractiveEvidence};

use boost::without_provenance;
use cite::strip_markers;
use focus::focus;
use markup::has_version;
use query::{Query, symbol_terms};
use rank::{Doc, Index, Term, ranked, term_ids};
use select::{Answer, Cand, Selector};
use sentences::{Kind, Parsed, parse};
use split::is_closer;
use structured::structured_reply;
use synthkit::model::{
    Completion, FinishReason, LanguageModel, ModelFuture, ModelInfo, ModelRequest, Usage,
};
use synthkit::prompt::TemplateKind;
use synthkit::text::SharedTokenizer;
use synthkit::text::tokenizer::default_tokenizer;
use units::{answering_items, candidates, doc, lead_biased};

/// The offline extractive backend. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct ExtractiveModel {
    /// What [`LanguageModel::info`] reports (name, window, output reserve, provider).
    info: ModelInfo,
    tokenizer: SharedTokenizer,
    min_relative_score: f64,
    min_coverage: f64,
}

impl Default for ExtractiveModel {
    fn default() -> Self {
        Self::new()
    }
}

/// What [`ExtractiveModel::extract`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    /// The answer: the picked sentences in their original order, joined by spaces (a list
    /// under its lead-in one item a line), or [`ExtractiveModel::NOT_ANSWERED`].
    pub text: String,
    /// Whether some word of the question occurs in the existing answer or the passages
    /// (always false for an empty question).
    pub query_matched: bool,
    /// Whether the best sentence alone was longer than the budget and had to be cut.
    pub truncated: bool,
    /// Whether the answer is drawn from the passages (or the existing answer): false when
    /// it is empty or [`ExtractiveModel::NOT_ANSWERED`] because the best match covered too
    /// little of the question (see [`ExtractiveModel::with_min_coverage`]).
    pub grounded: bool,
    /// The source numbers (from the passages' `[n]` label lines, or the markers of an
    /// existing answer's sentences) of the sentences picked, ascending, each once; empty
    /// when the passages had no labels.
    pub sources: Vec<u32>,
}

impl Extraction {
    fn empty(text: &str) -> Self {
        Self {
            text: text.to_string(),
            query_matched: false,
            truncated: false,
            grounded: false,
            sources: Vec::new(),
        }
    }

    /// Whether the question is answered: for a question with terms, a word of it matched
    /// and the answer is grounded; for an empty question, the answer is not empty. The
    /// `query_satisfied` of structured replies.
    pub fn satisfied(&self, query_has_terms: bool) -> bool {
        if query_has_terms {
            self.query_matched && self.grounded
        } else {
            !self.text.is_empty()
        }
    }
}

/// What [`ExtractiveModel::choose`] found: nothing to choose from, or the ranked
/// candidates.
enum Choice {
    Empty(Extraction),
    Chosen(Chosen),
}

/// The ranked candidates of one request.
struct Chosen {
    all: Parsed,
    /// The answer's candidates, best first (empty when the passages do not answer).
    order: Vec<usize>,
    /// The evidence's candidates, best first (with `wide` only).
    wide: Vec<usize>,
    cands: Vec<Cand>,
    weights: std::collections::HashMap<Term, f64>,
    query_matched: bool,
    /// Whether the passages answer (the coverage rule).
    grounded: bool,
    coverage: f64,
    release: bool,
    marks: bool,
}

/// `ratio` clamped to `[0, 1]`; NaN is 0.
fn unit_ratio(ratio: f64) -> f64 {
    if ratio.is_nan() {
        0.0
    } else {
        ratio.clamp(0.0, 1.0)
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
    /// The default share of the question's weight the best match must cover.
    pub const DEFAULT_MIN_COVERAGE: f64 = 0.5;
    /// The reply to a request without passages (the `generation` mode).
    pub const NO_CONTEXT_ANSWER: &'static str = "(extractive backend: no context was given, so there is nothing to extract an answer from; use a response mode that sends context, or a language-model backend)";
    /// The answer when the passages do not seem to answer the question (the best match
    /// covers too little of it). A refine step treats an existing answer equal to it as no
    /// answer, and sentences equal to it in passages are ignored.
    pub const NOT_ANSWERED: &'static str =
        "(no answer found: no passage matches enough of the question)";

    /// The backend with its defaults: name `extractive`, window 8192, output 256, the
    /// `cl100k_base` tokenizer, relevance floor 0.6, minimum coverage 0.5.
    pub fn new() -> Self {
        Self {
            info: ModelInfo::new(Self::NAME)
                .with_context_window(Self::DEFAULT_CONTEXT_WINDOW)
                .with_num_output(Self::DEFAULT_NUM_OUTPUT)
                .with_chat(false)
                .with_provider("synthkit.extractive"),
            tokenizer: default_tokenizer(),
            min_relative_score: Self::DEFAULT_MIN_RELATIVE_SCORE,
            min_coverage: Self::DEFAULT_MIN_COVERAGE,
        }
    }
    /// Sets the name reported by [`LanguageModel::info`].
    pub fn with_name(self, name: impl Into<String>) -> Self {
        self.with(|model| model.info.name = name.into())
    }

    /// Sets the context window reported by [`LanguageModel::info`].
    pub fn with_context_window(self, tokens: usize) -> Self {
        self.with(|model| model.info.context_window = tokens)
    }

    /// Sets the output reserve reported by [`LanguageModel::info`]; it is also the answer's
    /// budget when a request's `max_tokens` is 0.
    pub fn with_num_output(self, tokens: usize) -> Self {
        self.with(|model| model.info.num_output = tokens)
    }

    /// What its replies depend on beyond the request, for response-cache keys: its
    /// tokenizer (which measures answers against `max_tokens`).
    pub fn cache_identity(&self) -> synthkit::layer::stack::CacheIdentity {
        synthkit::layer::stack::CacheIdentity::new(
            "extractive",
            format!("tokenizer={}", self.tokenizer.name()),
        )
    }

    /// Sets the tokenizer that measures the answer against `max_tokens` and counts the
    /// completion tokens.
    pub fn with_tokenizer(self, tokenizer: SharedTokenizer) -> Self {
        self.with(|model| model.tokenizer = tokenizer)
    }

    /// Sets the relevance floor: with a question, sentences scoring below `ratio` times the
    /// best sentence's score are not picked. `0.0` picks every sentence sharing a word with
    /// the question while room is left (from anywhere: the answer's focus on the best
    /// sentence's neighbourhood is off); `1.0` only the best ones. Clamped to `[0, 1]`.
    pub fn with_min_relative_score(self, ratio: f64) -> Self {
        self.with(|model| model.min_relative_score = unit_ratio(ratio))
    }

    /// Sets the minimum coverage: with a question, when the best match contains less than
    /// `ratio` of the question's weight (the IDF of the distinct question terms it contains
    /// over the IDF of all of them, IDF over this request's sentences, a term in none of
    /// them weighing most), the answer is [`Self::NOT_ANSWERED`]. `0.0` answers whenever a
    /// word matches. Clamped to `[0, 1]`.
    pub fn with_min_coverage(self, ratio: f64) -> Self {
        self.with(|model| model.min_coverage = unit_ratio(ratio))
    }

    /// The model with `set` applied: the one body of the `with_*` setters above.
    fn with(mut self, set: impl FnOnce(&mut Self)) -> Self {
        set(&mut self);
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
        let chosen = match self.choose(query, existing_answer, context, None) {
            Choice::Empty(extraction) => return extraction,
            Choice::Chosen(c) => c,
        };
        let Chosen {
            all,
            order,
            cands,
            weights,
            query_matched,
            release,
            marks,
            ..
        } = chosen;
        let selector = Selector {
            sentences: &all.sentences,
            headings: release.then_some(all.headings.as_slice()),
            marks,
            weights: &weights,
            tok: &self.tokenizer,
            budget: max_tokens,
        };
        let Answer {
            text,
            truncated,
            sources,
        } = selector.select(&cands, &order);
        Extraction {
            grounded: !text.is_empty(),
            text,
            query_matched,
            truncated,
            sources,
        }
    }

    /// The candidates of `existing_answer` and `context` for `query`, ranked; with
    /// `wide`, also the evidence order (every candidate over `wide` times the best score).
    fn choose(
        &self,
        query: &str,
        existing_answer: Option<&str>,
        context: &str,
        wide: Option<f64>,
    ) -> Choice {
        let q = Query::new(query);
        let existing = existing_answer.filter(|e| {
            let e = e.trim();
            !e.is_empty() && e != Self::NOT_ANSWERED
        });
        // Existing answer first (it wins ties), then the passages.
        let mut all = Parsed::default();
        if let Some(existing) = existing {
            all.append(inherit_markers(parse(existing)));
        }
        let existing_count = all.sentences.len();
        let passages = parse(context);
        let marks = passages.labelled;
        all.append(passages);
        let sentences = &all.sentences;

        let mut saw_not_answered = false;
        let keys: Vec<String> = sentences
            .iter()
            .map(|s| {
                let mut key = strip_markers(&s.text);
                if let Some(title) = &s.title {
                    key = format!("{title} {key}");
                }
                // A table row says little without its table's headings and file.
                if s.kind == Kind::Row
                    && let Some(context) = all.contexts.get(s.context)
                {
                    key = format!("{context} {key}");
                }
                if q.release {
                    // A release note's provenance ("[bug introduced in coreutils-8.6]")
                    // names another release: it does not speak for this one.
                    key = without_provenance(&key);
                    if let Some(h) = s.heading.and_then(|h| all.headings.get(h)) {
                        key = format!("{h} {key}");
                    }
                    // A heading naming a version is a release, however it says so
                    // (`coreutils (9.1-1) unstable; urgency=low`).
                    if s.kind == Kind::Heading && has_version(&s.text) {
                        key.push_str(" release version");
                    }
                }
                key
            })
            .collect();
        let usable: Vec<bool> = sentences
            .iter()
            .zip(&keys)
            .map(|(s, key)| {
                let na = key.trim() == Self::NOT_ANSWERED;
                saw_not_answered |= na;
                // A sentence announcing code or a table that is not shown dangles, unless
                // the question asks for the code it announces.
                let dangling = s.kind == Kind::Prose
                    && s.items == 0
                    && s.code == 0
                    && s.text.trim_end_matches(is_closer).ends_with(':');
                // Headings answer questions about titles, and release questions.
                let heading_ok = q.asks_heading || (q.release && has_version(&s.text));
                let release_heading = s.kind == Kind::Heading && has_version(&s.text);
                !na && (s.kind != Kind::Code || q.code)
                    && (!dangling || q.code)
                    && (s.kind != Kind::Heading || heading_ok)
                    && (!q.version_only || release_heading)
            })
            .collect();
        let sentence_terms: Vec<Vec<Term>> = keys
            .iter()
            .zip(sentences)
            .map(|(k, s)| {
                let mut t = term_ids(k);
                if !q.symbols.is_empty() {
                    t.extend(symbol_terms(&s.text));
                }
                t
            })
            .collect();
        let mut cands = candidates(sentences, &usable, q.asks_code);
        answering_items(&mut cands, sentences, &sentence_terms, &q.terms);
        let docs: Vec<Doc> = cands
            .iter()
            .map(|c| doc(c, &sentence_terms, &q.terms))
            .collect();
        let indexed: Vec<Vec<Term>> = sentence_terms
            .iter()
            .zip(&usable)
            .filter(|(_, u)| **u)
            .map(|(t, _)| t.clone())
            .collect();
        let index = Index::new(docs, &indexed);
        let from_existing = |c: &Cand| c.first < existing_count;

        let mut scores = index.bm25(&q.terms);
        boost::adjust(
            &q,
            &cands,
            sentences,
            &sentence_terms,
            &all.headings,
            &mut scores,
        );
        let best = scores.iter().copied().fold(0.0_f64, f64::max);
        let query_matched = best > 0.0;
        let mut grounded = true;
        let mut best_coverage = 0.0_f64;
        let mut wide_order: Vec<usize> = Vec::new();
        let order: Vec<usize> = if q.has_terms() {
            let floor = best * self.min_relative_score;
            let order: Vec<usize> = ranked(&scores)
                .into_iter()
                .filter(|&i| scores.get(i).is_some_and(|&s| s > 0.0 && s >= floor))
                .collect();
            let context_terms: Vec<Vec<Term>> = all.contexts.iter().map(|c| term_ids(c)).collect();
            let covers: Vec<f64> = (0..cands.len())
                .map(|c| {
                    let context = cands
                        .get(c)
                        .and_then(|c| sentences.get(c.first))
                        .and_then(|s| context_terms.get(s.context))
                        .map_or(&[][..], Vec::as_slice);
                    index.coverage(c, &q.terms, Query::is_filler, context)
                })
                .collect();
            let coverage = order
                .iter()
                .filter_map(|&c| covers.get(c).copied())
                .fold(0.0_f64, f64::max);
            best_coverage = coverage;
            if let Some(ratio) = wide {
                let floor = best * ratio;
                let all: Vec<usize> = ranked(&scores)
                    .into_iter()
                    .filter(|&i| scores.get(i).is_some_and(|&s| s > 0.0 && s >= floor))
                    .collect();
                wide_order = forward::follow(&all, &cands, sentences);
            }
            if query_matched && coverage >= self.min_coverage {
                // "Which release ...?" has one answer: the best note, not every near one.
                // A floor of 0 asks for every sentence sharing a word: no focus then.
                let mut order = if self.min_relative_score > 0.0 {
                    focus(&order, &cands, sentences, &scores, &covers)
                } else {
                    order
                };
                if q.release {
                    order.truncate(1);
                } else {
                    // "… the limits below …": what it points to answers with it.
                    order = forward::follow(&order, &cands, sentences);
                }
                order
            } else if existing_count > 0 {
                // Nothing new speaks to the question: the existing answer stays as it is.
                (0..cands.len())
                    .filter(|&c| cands.get(c).is_some_and(from_existing))
                    .collect()
            } else if cands.is_empty() && !saw_not_answered {
                return Choice::Empty(Extraction::empty(""));
            } else {
                grounded = false;
                Vec::new()
            }
        } else {
            let order = ranked(&lead_biased(&index.centrality(), &cands, sentences));
            if wide.is_some() {
                wide_order.clone_from(&order);
                best_coverage = 1.0;
            }
            order
        };
        if !grounded && wide.is_none() {
            return Choice::Empty(Extraction {
                query_matched,
                ..Extraction::empty(Self::NOT_ANSWERED)
            });
        }
        let weights = index.weights(&q.terms);
        Choice::Chosen(Chosen {
            order,
            wide: wide_order,
            cands,
            weights,
            query_matched,
            grounded,
            coverage: best_coverage,
            release: q.release,
            marks,
            all,
        })
    }

    /// The reply to a request (the text of [`LanguageModel::complete`]). It answers from
    /// what the prompt was rendered from ([`ModelRequest::source`]); a request made
    /// outside a synthesis has no query, and its whole prompt is the context.
    fn respond(&self, request: &ModelRequest) -> (String, bool) {
        let whole_prompt;
        let source = request.source();
        let variable = |name: &str| source.and_then(|s| s.variable(name));
        let query = variable("query_str").unwrap_or("");
        let context = match source.map(|s| s.kind) {
            Some(TemplateKind::Refine) => {
                variable("context_msg").or_else(|| variable("context_str"))
            }
            Some(TemplateKind::Simple) => None,
            Some(_) => variable("context_str").or_else(|| variable("context_msg")),
            None => {
                whole_prompt = request.prompt.to_text();
                Some(whole_prompt.as_str())
            }
        };
        let budget = if request.max_tokens == 0 {
            self.info.num_output
        } else {
            request.max_tokens
        };
        let query_has_terms = Query::new(query).has_terms();
        let extraction = match context {
            Some(context) => {
                let existing = variable("existing_answer");
                self.extract(query, existing, context, budget)
            }
            None => Extraction::empty(Self::NO_CONTEXT_ANSWER),
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
        self.info.clone()
    }

    /// Extracts the answer (JSON text when the request has a schema). Never fails.
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let (text, truncated) = self.respond(request);
            let completion_tokens = self.tokenizer.count(&text) as u64;
            let usage = Usage {
                prompt_tokens: request.prompt_tokens as u64,
                completion_tokens,
                ..Default::default()
            };
            let finish = if truncated {
                FinishReason::Length
            } else {
                FinishReason::Stop
            };
            Ok(Completion::text(text)
                .with_usage(usage)
                .with_finish_reason(finish))
        })
    }
}

/// An earlier answer's sentences without a marker take the marker of the next sentence of
/// their paragraph that has one: a window of a long sentence (`... old location. For …
/// [1]`) is re-read as several sentences, and only its last kept the marker.
fn inherit_markers(mut parsed: Parsed) -> Parsed {
    let mut pending: Option<(usize, u32)> = None;
    for s in parsed.sentences.iter_mut().rev() {
        match cite::markers(&s.text).first() {
            Some(&n) => pending = Some((s.para, n)),
            None => match pending {
                Some((para, n)) if para == s.para && s.kind != Kind::Code => {
                    s.text = cite::mark(&s.text, n);
                }
                _ => pending = None,
            },
        }
    }
    parsed
}
