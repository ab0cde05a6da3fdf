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
//! once), each sentence is scored against the question with BM25 (k1 = 1.2, b = 0.75, IDF
//! over this request's sentences, lowercase words without common English stopwords, light
//! suffix stripping) times the share of the question's words the sentence contains, and
//! the best sentences are picked until the answer would exceed the request's `max_tokens`.
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
//! use synthkit::model::extractive::ExtractiveModel;
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

use std::collections::HashMap;
use std::collections::HashSet;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::model::{
    Completion, FinishReason, LanguageModel, ModelError, ModelInfo, ModelRequest, Usage,
};
use crate::prompt::TemplateKind;
use crate::text::SharedTokenizer;
use crate::text::tokenizer::default_tokenizer;

/// BM25 term-frequency saturation.
const BM25_K1: f64 = 1.2;
/// BM25 length normalisation.
const BM25_B: f64 = 0.75;
/// Candidates rejected in a row (too long for the room left) before selection stops.
const MAX_REJECTIONS_IN_A_ROW: usize = 64;

/// Words that carry no meaning for matching a question to a sentence.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
    "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just",
    "many", "may", "me", "might", "more", "most", "much", "must", "my", "no", "nor", "not", "of",
    "on", "once", "only", "or", "other", "our", "ours", "out", "over", "own", "per", "same",
    "shall", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "very", "via", "was", "we", "were", "what", "when", "where", "which", "while",
    "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// Words whose trailing period does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "al", "approx", "apr", "aug", "ca", "cf", "co", "corp", "dec", "dept", "dr", "e.g", "eg",
    "est", "feb", "fig", "figs", "i.e", "ie", "inc", "jan", "jr", "jul", "jun", "lt", "ltd", "mar",
    "mr", "mrs", "ms", "mt", "no", "nos", "nov", "oct", "p", "pp", "prof", "sep", "sept", "sr",
    "st", "vol", "vols", "vs",
];

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

        let mut vocab = Vocab::default();
        let docs: Vec<Vec<u32>> = sentences.iter().map(|s| vocab.terms_of(s)).collect();
        let query_words = tokenize(query);
        let mut query_terms: Vec<u32> = Vec::new();
        for term in &query_words {
            if let Some(id) = vocab.get(term)
                && !query_terms.contains(&id)
            {
                query_terms.push(id);
            }
        }
        let stats = Stats::new(&docs, vocab.len());

        let bm25 = stats.bm25(&docs, &query_terms);
        let best = bm25.iter().copied().fold(0.0_f64, f64::max);
        let query_matched = best > 0.0;
        let candidates: Vec<usize> = if query_matched {
            let floor = best * self.min_relative_score;
            ranked(&bm25)
                .into_iter()
                .filter(|&i| bm25.get(i).is_some_and(|&s| s > 0.0 && s >= floor))
                .collect()
        } else if !query_words.is_empty() && existing_count > 0 {
            // Nothing speaks to the question: the existing answer stays as it is.
            (0..existing_count).collect()
        } else {
            ranked(&stats.centrality(&docs))
        };

        let (text, truncated) = self.select(&sentences, &candidates, max_tokens);
        Extraction {
            text,
            query_matched,
            truncated,
        }
    }

    /// Picks candidates (best first) while the joined answer fits `budget` tokens; returns
    /// the answer and whether the best sentence had to be cut.
    fn select(&self, sentences: &[String], candidates: &[usize], budget: usize) -> (String, bool) {
        if budget == 0 || candidates.is_empty() {
            return (String::new(), false);
        }
        let tok = &self.tokenizer;
        let mut picked: Vec<usize> = Vec::new();
        let mut used = 0usize;
        let mut rejections = 0usize;
        for &i in candidates {
            if used + 1 >= budget || rejections >= MAX_REJECTIONS_IN_A_ROW {
                break;
            }
            let Some(sentence) = sentences.get(i) else {
                continue;
            };
            // Joining may merge the separating space into the next token, so allow a
            // token of slack before the exact check.
            if tok
                .count_till_limit(sentence, budget.saturating_sub(used) + 1)
                .is_none()
            {
                rejections += 1;
                continue;
            }
            let mut trial = picked.clone();
            let pos = trial.partition_point(|&p| p < i);
            trial.insert(pos, i);
            let joined = join(sentences, &trial);
            match tok.count_till_limit(&joined, budget) {
                Some(n) => {
                    picked = trial;
                    used = n;
                    rejections = 0;
                }
                None => rejections += 1,
            }
        }
        if !picked.is_empty() {
            return (join(sentences, &picked), false);
        }
        // Even the best sentence is too long: cut it to the budget.
        let best = candidates
            .first()
            .and_then(|&i| sentences.get(i))
            .map(String::as_str)
            .unwrap_or("");
        let cut = truncate_to_tokens(best, budget, tok);
        let truncated = cut.len() < best.len();
        (cut, truncated)
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
        let query_has_terms = !tokenize(query).is_empty();
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

/// JSON text for `schema` carrying `answer` and `satisfied`.
///
/// Object schemas get every property filled: `query_satisfied` and booleans with
/// `satisfied`, strings with the answer, arrays of strings with the answer as one item,
/// enums with their first value, numbers with 0, anything else with `null`. A string schema
/// gets the answer as a JSON string; any other schema `{"answer": ...}`.
fn structured_reply(schema: &Value, answer: &str, satisfied: bool) -> String {
    let value = match schema.get("properties").and_then(Value::as_object) {
        Some(props) => {
            let mut obj = Map::new();
            for (name, prop) in props {
                let v = if name == "query_satisfied" {
                    Value::Bool(satisfied)
                } else if name == "answer" {
                    Value::String(answer.to_string())
                } else {
                    fill(prop, answer, satisfied)
                };
                obj.insert(name.clone(), v);
            }
            Value::Object(obj)
        }
        None if primary_type(schema) == Some("string") => Value::String(answer.to_string()),
        None => {
            let mut obj = Map::new();
            obj.insert("answer".to_string(), Value::String(answer.to_string()));
            Value::Object(obj)
        }
    };
    value.to_string()
}

/// A best-effort value for one property schema.
fn fill(prop: &Value, answer: &str, satisfied: bool) -> Value {
    if let Some(first) = prop
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(c) = prop.get("const") {
        return c.clone();
    }
    match primary_type(prop) {
        Some("string") => Value::String(answer.to_string()),
        Some("boolean") => Value::Bool(satisfied),
        Some("integer" | "number") => Value::from(0),
        Some("array") => {
            let item_is_string = prop
                .get("items")
                .is_some_and(|items| primary_type(items) == Some("string"));
            if item_is_string && !answer.is_empty() {
                Value::Array(vec![Value::String(answer.to_string())])
            } else {
                Value::Array(Vec::new())
            }
        }
        Some("object") => Value::Object(Map::new()),
        _ => Value::Null,
    }
}

/// The schema's type: `"type": "x"`, or the first non-null entry of `"type": [...]`.
fn primary_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(s) => Some(s.as_str()),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null"),
        _ => None,
    }
}

/// The sentences at `indices` (ascending), joined by spaces.
fn join(sentences: &[String], indices: &[usize]) -> String {
    let mut out = String::new();
    for s in indices.iter().filter_map(|&i| sentences.get(i)) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(s);
    }
    out
}

/// The longest prefix of `text` with at most `budget` tokens, cut at a word boundary when
/// there is one.
fn truncate_to_tokens(text: &str, budget: usize, tok: &SharedTokenizer) -> String {
    if tok.count_till_limit(text, budget).is_some() {
        return text.to_string();
    }
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    // Largest k with prefix(bounds[k]) fitting; prefix(0) = "" always fits.
    let (mut lo, mut hi) = (0usize, bounds.len().saturating_sub(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let end = bounds.get(mid).copied().unwrap_or(0);
        let fits = text
            .get(..end)
            .is_some_and(|p| tok.count_till_limit(p, budget).is_some());
        if fits {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let end = bounds.get(lo).copied().unwrap_or(0);
    let prefix = text.get(..end).unwrap_or("");
    let at_word_end = text
        .get(end..)
        .and_then(|rest| rest.chars().next())
        .is_none_or(char::is_whitespace);
    let cut = match prefix.rfind(char::is_whitespace) {
        Some(ws) if !at_word_end => prefix.get(..ws).unwrap_or(prefix),
        _ => prefix,
    };
    cut.trim_end().to_string()
}

/// Sentence indices by score, best first; ties keep the earlier sentence first.
fn ranked(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| {
        let sa = scores.get(a).copied().unwrap_or(0.0);
        let sb = scores.get(b).copied().unwrap_or(0.0);
        sb.total_cmp(&sa).then(a.cmp(&b))
    });
    order
}

// ---------------------------------------------------------------------------------------
// Sentence splitting
// ---------------------------------------------------------------------------------------

/// Appends the sentences of `text` to `out`, whitespace collapsed.
fn split_sentences(text: &str, out: &mut Vec<String>) {
    let mut block: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            split_block(&block, out);
            block.clear();
        } else {
            block.push(line);
        }
    }
    split_block(&block, out);
}

/// A `key: value` metadata line, as nodes render their metadata: a lowercase key without
/// spaces, a colon and a space.
fn is_metadata_line(line: &str) -> bool {
    let line = line.trim();
    let Some((key, value)) = line.split_once(':') else {
        return false;
    };
    let mut chars = key.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    first_ok
        && key.len() <= 40
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && (value.is_empty() || value.starts_with(' '))
        && line.chars().count() <= 300
}

/// Strips a list marker (`- `, `* `, `+ `, `• `, `1. `, `1) `, `> `); `None` when the line
/// has none.
fn strip_marker(line: &str) -> Option<&str> {
    for marker in ["- ", "* ", "+ ", "• ", "> "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return Some(rest);
        }
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        let rest = line.get(digits..)?;
        return rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") "));
    }
    None
}

/// Whether a line ends a sentence (a terminator, possibly followed by closing quotes or
/// brackets); a line without one continues on the next line when it is long enough.
fn ends_sentence(line: &str) -> bool {
    line.trim_end_matches(is_closer)
        .chars()
        .last()
        .is_some_and(|c| matches!(c, '.' | '!' | '?' | '。' | '！' | '？'))
}

/// Splits one paragraph: metadata blocks are skipped; headings, rules and code fences
/// dropped; list items and table rows stand alone; wrapped lines are joined.
fn split_block(lines: &[&str], out: &mut Vec<String>) {
    if lines.is_empty() || lines.iter().all(|l| is_metadata_line(l)) {
        return;
    }
    let mut segment = String::new();
    let mut prev_len = 0usize;
    let mut prev_ends = true;
    for raw in lines {
        let line = raw.trim();
        if !line.chars().any(char::is_alphanumeric) || line.starts_with("```") {
            flush(&mut segment, out);
            prev_ends = true;
            continue;
        }
        if line.starts_with('#') {
            flush(&mut segment, out);
            prev_ends = true;
            continue;
        }
        let (content, starts_new) = if let Some(rest) = strip_marker(line) {
            (rest, true)
        } else if line.starts_with('|') {
            (line.trim_matches('|').trim(), true)
        } else {
            (line, false)
        };
        let joins = !starts_new && !segment.is_empty() && !prev_ends && prev_len >= 40;
        if !joins {
            flush(&mut segment, out);
        } else {
            segment.push(' ');
        }
        segment.push_str(content);
        prev_len = line.chars().count();
        prev_ends = ends_sentence(line);
    }
    flush(&mut segment, out);
}

fn flush(segment: &mut String, out: &mut Vec<String>) {
    if !segment.is_empty() {
        split_segment(segment, out);
        segment.clear();
    }
}

fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '”' | '’' | '»' | '」' | '』')
}

/// Splits running text at sentence ends.
fn split_segment(text: &str, out: &mut Vec<String>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut start = 0usize;
    let mut i = 0usize;
    while let Some(&(pos, c)) = chars.get(i) {
        let cjk = matches!(c, '。' | '！' | '？');
        if !(cjk || matches!(c, '.' | '!' | '?')) {
            i += 1;
            continue;
        }
        // Take the whole run of terminators and closing quotes/brackets.
        let mut j = i + 1;
        while let Some(&(_, d)) = chars.get(j) {
            if matches!(d, '.' | '!' | '?' | '。' | '！' | '？') || is_closer(d) {
                j += 1;
            } else {
                break;
            }
        }
        let end = chars.get(j).map_or(text.len(), |&(p, _)| p);
        let next = chars.get(j).map(|&(_, d)| d);
        let boundary = if cjk {
            true
        } else {
            match next {
                None => true,
                Some(d) if d.is_whitespace() => {
                    let next_word = chars
                        .get(j..)
                        .unwrap_or_default()
                        .iter()
                        .map(|&(_, d)| d)
                        .find(|d| !d.is_whitespace());
                    let lower_next = next_word.is_some_and(char::is_lowercase);
                    let abbreviation =
                        c == '.' && is_abbreviation(text.get(start..pos).unwrap_or(""));
                    !lower_next && !abbreviation
                }
                Some(_) => false,
            }
        };
        if boundary {
            push_sentence(text.get(start..end).unwrap_or(""), out);
            start = end;
        }
        i = j;
    }
    push_sentence(text.get(start..).unwrap_or(""), out);
}

/// Whether the word just before a period is an abbreviation or an initial.
fn is_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or("")
        .trim_start_matches(|c: char| !c.is_alphanumeric());
    let mut chars = word.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && c.is_uppercase()
    {
        return true;
    }
    let lower = word.to_lowercase();
    ABBREVIATIONS.contains(&lower.as_str())
}

fn push_sentence(s: &str, out: &mut Vec<String>) {
    if !s.chars().any(char::is_alphanumeric) {
        return;
    }
    let normalized: Vec<&str> = s.split_whitespace().collect();
    out.push(normalized.join(" "));
}

// ---------------------------------------------------------------------------------------
// Terms and scoring
// ---------------------------------------------------------------------------------------

/// Scripts written without spaces: each character is a term.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// Lowercase terms of `text`: alphanumeric words without stopwords or single ASCII letters,
/// lightly stemmed; CJK characters one by one.
fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if is_cjk(c) {
            finish_word(&mut word, &mut out);
            out.push(c.to_string());
        } else if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else {
            finish_word(&mut word, &mut out);
        }
    }
    finish_word(&mut word, &mut out);
    out
}

fn finish_word(word: &mut String, out: &mut Vec<String>) {
    if word.is_empty() {
        return;
    }
    let w = std::mem::take(word);
    let single_letter = w.len() == 1 && w.chars().all(|c| c.is_ascii_alphabetic());
    if single_letter || STOPWORDS.contains(&w.as_str()) {
        return;
    }
    out.push(stem(w));
}

/// Light suffix stripping for ASCII words: plural `s`/`ies`, `ing`, `ed`, a final `e`,
/// and a doubled final consonant left by `ing`/`ed` (`mirrors` → `mirror`,
/// `cleaned`/`cleaning` → `clean`, `scheduled`/`schedule` → `schedul`).
fn stem(mut w: String) -> String {
    if !w.is_ascii() || w.chars().any(|c| c.is_ascii_digit()) {
        return w;
    }
    let n = w.len();
    if n > 4 && w.ends_with("ies") {
        w.truncate(n - 3);
        w.push('y');
    } else if n > 3
        && w.ends_with('s')
        && !w.ends_with("ss")
        && !w.ends_with("us")
        && !w.ends_with("is")
    {
        w.truncate(n - 1);
    }
    let n = w.len();
    let mut stripped = false;
    if n > 5 && w.ends_with("ing") {
        w.truncate(n - 3);
        stripped = true;
    } else if n > 4 && w.ends_with("ed") {
        w.truncate(n - 2);
        stripped = true;
    }
    let bytes = w.as_bytes();
    if stripped
        && let [.., a, b] = bytes
        && a == b
        && !matches!(a, b'a' | b'e' | b'i' | b'o' | b'u' | b'l' | b's' | b'z')
    {
        w.pop();
    }
    if w.len() > 3 && w.ends_with('e') {
        w.pop();
    }
    w
}

/// Term ids for one request.
#[derive(Default)]
struct Vocab {
    ids: HashMap<String, u32>,
}

impl Vocab {
    fn len(&self) -> usize {
        self.ids.len()
    }

    fn get(&self, term: &str) -> Option<u32> {
        self.ids.get(term).copied()
    }

    fn terms_of(&mut self, text: &str) -> Vec<u32> {
        tokenize(text)
            .into_iter()
            .map(|t| {
                let next = self.ids.len() as u32;
                *self.ids.entry(t).or_insert(next)
            })
            .collect()
    }
}

/// Document frequencies and lengths of one request's sentences.
struct Stats {
    idf: Vec<f64>,
    avg_len: f64,
}

impl Stats {
    fn new(docs: &[Vec<u32>], vocab_len: usize) -> Self {
        let mut df = vec![0u32; vocab_len];
        let mut last_seen = vec![usize::MAX; vocab_len];
        let mut total = 0usize;
        for (d, terms) in docs.iter().enumerate() {
            total += terms.len();
            for &t in terms {
                if let Some(seen) = last_seen.get_mut(t as usize)
                    && *seen != d
                {
                    *seen = d;
                    if let Some(f) = df.get_mut(t as usize) {
                        *f += 1;
                    }
                }
            }
        }
        let n = docs.len() as f64;
        let idf = df
            .iter()
            .map(|&f| {
                let f = f64::from(f);
                (1.0 + (n - f + 0.5) / (f + 0.5)).ln()
            })
            .collect();
        let avg_len = if docs.is_empty() {
            1.0
        } else {
            (total as f64 / n).max(1.0)
        };
        Self { idf, avg_len }
    }

    fn idf(&self, term: u32) -> f64 {
        self.idf.get(term as usize).copied().unwrap_or(0.0)
    }

    /// BM25 score of every sentence for the query terms, times the share of the query
    /// terms the sentence contains (a coordination factor: a sentence with several of the
    /// question's words beats one repeating a single word).
    fn bm25(&self, docs: &[Vec<u32>], query: &[u32]) -> Vec<f64> {
        let mut tf = vec![0u32; query.len()];
        docs.iter()
            .map(|terms| {
                if query.is_empty() {
                    return 0.0;
                }
                tf.iter_mut().for_each(|f| *f = 0);
                for t in terms {
                    if let Some(k) = query.iter().position(|q| q == t)
                        && let Some(f) = tf.get_mut(k)
                    {
                        *f += 1;
                    }
                }
                let len_norm = 1.0 - BM25_B + BM25_B * terms.len() as f64 / self.avg_len;
                let bm25: f64 = query
                    .iter()
                    .zip(&tf)
                    .filter(|(_, f)| **f > 0)
                    .map(|(&q, &f)| {
                        let f = f64::from(f);
                        self.idf(q) * f * (BM25_K1 + 1.0) / (f + BM25_K1 * len_norm)
                    })
                    .sum();
                let matched = tf.iter().filter(|f| **f > 0).count();
                bm25 * matched as f64 / query.len() as f64
            })
            .collect()
    }

    /// Centrality of every sentence: the sum of its cosine similarities (TF-IDF vectors)
    /// to all other sentences, computed exactly in linear time as `u_i · Σ_j u_j − 1`.
    fn centrality(&self, docs: &[Vec<u32>]) -> Vec<f64> {
        let units: Vec<Vec<(u32, f64)>> =
            docs.iter().map(|terms| self.unit_vector(terms)).collect();
        let mut sum = vec![0.0_f64; self.idf.len()];
        for unit in &units {
            for &(t, w) in unit {
                if let Some(s) = sum.get_mut(t as usize) {
                    *s += w;
                }
            }
        }
        units
            .iter()
            .map(|unit| {
                if unit.is_empty() {
                    return 0.0;
                }
                let dot: f64 = unit
                    .iter()
                    .map(|&(t, w)| w * sum.get(t as usize).copied().unwrap_or(0.0))
                    .sum();
                dot - 1.0
            })
            .collect()
    }

    /// The sentence's TF-IDF vector, normalised to length 1 (empty without terms).
    fn unit_vector(&self, terms: &[u32]) -> Vec<(u32, f64)> {
        let mut sorted = terms.to_vec();
        sorted.sort_unstable();
        let mut v: Vec<(u32, f64)> = Vec::new();
        for t in sorted {
            match v.last_mut() {
                Some((last, w)) if *last == t => *w += self.idf(t),
                _ => v.push((t, self.idf(t))),
            }
        }
        let norm = v.iter().map(|(_, w)| w * w).sum::<f64>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|(_, w)| *w /= norm);
            v
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::StepInfo;
    use crate::prompt::RenderedPrompt;

    fn request(kind: TemplateKind, vars: &[(&str, &str)], max_tokens: usize) -> ModelRequest {
        ModelRequest {
            prompt: RenderedPrompt::Text("ignored".into()),
            kind,
            variables: vars
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            schema: None,
            max_tokens,
            prompt_tokens: 42,
            step: StepInfo::new("test", "qa"),
        }
    }

    fn run(model: &ExtractiveModel, req: &ModelRequest) -> Completion {
        futures::executor::block_on(model.complete(req)).unwrap_or_default()
    }

    const OBSERVATORY: &str = "file_path: docs/maintenance.md\n\n\
        # Mirror care\n\n\
        The observatory opened in 1987. The primary mirror is cleaned with CO2 snow every \
        three months. Dr. Okafor leads the cleaning crew. The dome is painted white.\n\n\
        - Check the collimation weekly.\n- Oil the dome gears each spring.";

    #[test]
    fn picks_the_sentence_with_query_terms() {
        let m = ExtractiveModel::new();
        let req = request(
            TemplateKind::Qa,
            &[
                ("context_str", OBSERVATORY),
                ("query_str", "How often is the mirror cleaned?"),
            ],
            256,
        );
        let c = run(&m, &req);
        assert_eq!(
            c.text,
            "The primary mirror is cleaned with CO2 snow every three months."
        );
        assert_eq!(c.finish_reason, Some(FinishReason::Stop));
        let usage = c.usage.unwrap_or_default();
        assert_eq!(usage.prompt_tokens, 42);
        assert_eq!(usage.completion_tokens, m.tokenizer.count(&c.text) as u64);
    }

    #[test]
    fn splits_sentences_and_skips_metadata_and_headings() {
        let mut out = Vec::new();
        split_sentences(OBSERVATORY, &mut out);
        assert_eq!(
            out,
            vec![
                "The observatory opened in 1987.",
                "The primary mirror is cleaned with CO2 snow every three months.",
                "Dr. Okafor leads the cleaning crew.",
                "The dome is painted white.",
                "Check the collimation weekly.",
                "Oil the dome gears each spring.",
            ]
        );
        let mut out = Vec::new();
        split_sentences(
            "It costs approx. 5 euros, e.g. for tea. Is it? Yes! Wrapped line that is long enough to be joined\nwith the next one. Short title\nNext line",
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                "It costs approx. 5 euros, e.g. for tea.",
                "Is it?",
                "Yes!",
                "Wrapped line that is long enough to be joined with the next one.",
                "Short title",
                "Next line",
            ]
        );
    }

    #[test]
    fn respects_max_tokens() {
        let m = ExtractiveModel::new().with_min_relative_score(0.0);
        let context = (0..50)
            .map(|i| format!("Telescope fact number {i} concerns the telescope mirror."))
            .collect::<Vec<_>>()
            .join(" ");
        for budget in [1, 5, 12, 30, 100] {
            let req = request(
                TemplateKind::Qa,
                &[("context_str", &context), ("query_str", "telescope mirror")],
                budget,
            );
            let c = run(&m, &req);
            assert!(m.tokenizer.count(&c.text) <= budget, "{budget}: {}", c.text);
        }
        // One sentence longer than the budget is cut at a word boundary.
        let long = "mirror ".repeat(200);
        let req = request(
            TemplateKind::Qa,
            &[("context_str", &long), ("query_str", "mirror")],
            10,
        );
        let c = run(&m, &req);
        assert!(!c.text.is_empty());
        assert!(m.tokenizer.count(&c.text) <= 10);
        assert!(c.text.ends_with("mirror"));
        assert_eq!(c.finish_reason, Some(FinishReason::Length));
    }

    #[test]
    fn refine_keeps_a_good_existing_answer() {
        let m = ExtractiveModel::new();
        let req = request(
            TemplateKind::Refine,
            &[
                ("query_str", "How often is the mirror cleaned?"),
                (
                    "existing_answer",
                    "The mirror is cleaned every three months.",
                ),
                (
                    "context_msg",
                    "The gift shop sells postcards. Parking is free on weekends.",
                ),
            ],
            256,
        );
        assert_eq!(
            run(&m, &req).text,
            "The mirror is cleaned every three months."
        );

        // A better new sentence replaces it; with no relevance floor both are kept, the
        // existing answer first.
        let vars = [
            ("query_str", "How often is the mirror cleaned?"),
            ("existing_answer", "The mirror is cleaned by hand."),
            (
                "context_msg",
                "Parking is free. The mirror is cleaned often, every three months.",
            ),
        ];
        let req = request(TemplateKind::Refine, &vars, 256);
        assert_eq!(
            run(&m, &req).text,
            "The mirror is cleaned often, every three months."
        );
        // Nothing matches the question: the existing answer stays as it is.
        let unmatched = request(
            TemplateKind::Refine,
            &[
                ("query_str", "Who founded the society?"),
                ("existing_answer", "The mirror is cleaned by hand."),
                ("context_msg", "Parking is free. Parking is near the gate."),
            ],
            256,
        );
        assert_eq!(run(&m, &unmatched).text, "The mirror is cleaned by hand.");
        let all = ExtractiveModel::new().with_min_relative_score(0.0);
        assert_eq!(
            run(&all, &req).text,
            "The mirror is cleaned by hand. The mirror is cleaned often, every three months."
        );
    }

    #[test]
    fn empty_and_missing_context() {
        let m = ExtractiveModel::new();
        let req = request(
            TemplateKind::Qa,
            &[("context_str", ""), ("query_str", "anything")],
            256,
        );
        assert_eq!(run(&m, &req).text, "");
        let req = request(
            TemplateKind::Qa,
            &[("context_str", "  \n\n---\n"), ("query_str", "")],
            256,
        );
        assert_eq!(run(&m, &req).text, "");
        let req = request(TemplateKind::Simple, &[("query_str", "Hello?")], 256);
        assert_eq!(run(&m, &req).text, ExtractiveModel::NO_CONTEXT_ANSWER);
    }

    #[test]
    fn no_query_uses_centrality() {
        let m = ExtractiveModel::new();
        let context = "The telescope mirror is cleaned in spring. The telescope mirror is \
            aluminised every five years. Bananas are yellow. The telescope mirror weighs 40 kg.";
        let req = request(
            TemplateKind::Summary,
            &[("context_str", context), ("query_str", "")],
            12,
        );
        let text = run(&m, &req).text;
        assert!(text.contains("telescope mirror"), "{text}");
        assert!(!text.contains("Bananas"), "{text}");
        // Unmatched question words fall back to centrality too.
        let req = request(
            TemplateKind::Summary,
            &[
                ("context_str", context),
                ("query_str", "Summarize everything"),
            ],
            12,
        );
        assert_eq!(run(&m, &req).text, text);
    }

    #[test]
    fn braces_and_unicode() {
        let m = ExtractiveModel::new();
        let context = "Le télescope {context_str} est nettoyé chaque année. \
            望远镜每年清洁一次。\u{1F52D} {\"json\": true} The dome 🚀 rotates. Ünïcödé façade!";
        for query in ["télescope nettoyé", "望远镜", "{query_str}", "🚀", ""] {
            let req = request(
                TemplateKind::Qa,
                &[("context_str", context), ("query_str", query)],
                64,
            );
            let c = run(&m, &req);
            assert!(m.tokenizer.count(&c.text) <= 64);
        }
        let req = request(
            TemplateKind::Qa,
            &[("context_str", context), ("query_str", "télescope")],
            64,
        );
        assert_eq!(
            run(&m, &req).text,
            "Le télescope {context_str} est nettoyé chaque année."
        );
        let req = request(
            TemplateKind::Qa,
            &[("context_str", context), ("query_str", "望远镜")],
            64,
        );
        assert_eq!(run(&m, &req).text, "望远镜每年清洁一次。");
    }

    #[test]
    fn deterministic_and_deduplicated() {
        let m = ExtractiveModel::new();
        let context =
            "Mirror A is clean. Mirror B is clean.\n\nMirror A is clean. Mirror C is dusty.";
        let req = request(
            TemplateKind::Qa,
            &[("context_str", context), ("query_str", "mirror")],
            256,
        );
        let first = run(&m, &req).text;
        for _ in 0..5 {
            assert_eq!(run(&m, &req).text, first);
        }
        assert_eq!(
            first,
            "Mirror A is clean. Mirror B is clean. Mirror C is dusty."
        );
        // Ties: with room for one sentence, the earliest wins.
        let req = request(
            TemplateKind::Qa,
            &[("context_str", context), ("query_str", "mirror")],
            6,
        );
        assert_eq!(run(&m, &req).text, "Mirror A is clean.");
    }

    #[test]
    fn structured_refine_reply() {
        let m = ExtractiveModel::new();
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "query_satisfied": {"type": "boolean"},
                "answer": {"type": "string"}
            },
            "required": ["query_satisfied", "answer"]
        });
        let mut req = request(
            TemplateKind::Qa,
            &[
                ("context_str", OBSERVATORY),
                ("query_str", "When did the observatory open?"),
            ],
            256,
        );
        req.schema = Some(Arc::new(schema));
        let s = futures::executor::block_on(m.structured(&req));
        let value = s.map(|s| s.value).unwrap_or_default();
        assert_eq!(
            value,
            serde_json::json!({"query_satisfied": true, "answer": "The observatory opened in 1987."})
        );
        req.variables = vec![
            ("context_str".into(), OBSERVATORY.into()),
            ("query_str".into(), "Who won the football match?".into()),
        ];
        let text = run(&m, &req).text;
        assert!(text.starts_with("{\"query_satisfied\":false,"), "{text}");
    }

    #[test]
    fn structured_other_schemas() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "ok": {"type": "boolean"},
                "points": {"type": "array", "items": {"type": "string"}},
                "count": {"type": "integer"},
                "level": {"enum": ["low", "high"]},
                "note": {"type": ["null", "string"]}
            }
        });
        let out = structured_reply(&schema, "A.", true);
        assert_eq!(
            out,
            r#"{"summary":"A.","ok":true,"points":["A."],"count":0,"level":"low","note":"A."}"#
        );
        assert_eq!(
            structured_reply(&serde_json::json!({"type": "string"}), "x", false),
            "\"x\""
        );
        assert_eq!(
            structured_reply(&serde_json::json!(true), "x", false),
            r#"{"answer":"x"}"#
        );
    }

    #[test]
    fn stemming() {
        assert_eq!(
            tokenize("Mirrors cleaned cleaning clean"),
            vec!["mirror", "clean", "clean", "clean"]
        );
        assert_eq!(
            tokenize("schedule scheduled batteries"),
            vec!["schedul", "schedul", "battery"]
        );
        assert_eq!(
            tokenize("running the 2 CO2 lamps"),
            vec!["run", "2", "co2", "lamp"]
        );
    }

    #[test]
    fn info_is_a_completion_model() {
        let info = ExtractiveModel::new().with_context_window(4096).info();
        assert_eq!(info.name, "extractive");
        assert_eq!(info.context_window, 4096);
        assert_eq!(info.num_output, 256);
        assert!(!info.is_chat);
    }

    #[test]
    fn large_context_is_fast_enough() {
        let m = ExtractiveModel::new();
        let context: String = (0..5000)
            .map(|i| format!("Sentence {i} talks about topic{} and mirrors. ", i % 37))
            .collect();
        for query in ["", "topic5 mirrors"] {
            let req = request(
                TemplateKind::Summary,
                &[("context_str", &context), ("query_str", query)],
                256,
            );
            let start = std::time::Instant::now();
            let c = run(&m, &req);
            assert!(!c.text.is_empty());
            assert!(start.elapsed().as_secs() < 10);
        }
    }
}
