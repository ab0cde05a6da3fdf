//! synthkit's default prompts: question answering, refine, summary and the plain query.
//!
//! These are our own texts (decision 16); they use the reference's variables, so any
//! template with the same variables can replace them. Each one is counted in every call's
//! prompt budget, so they are kept short. Every default comes as a completion template and
//! a chat template; [`for_kind`] picks one.
//!
//! | kind | completion | chat | variables |
//! |---|---|---|---|
//! | [`TemplateKind::Qa`] | [`qa`] | [`qa_chat`] | `context_str`, `query_str` |
//! | [`TemplateKind::Refine`] | [`refine`] | [`refine_chat`] | `query_str`, `existing_answer`, `context_msg` |
//! | [`TemplateKind::Summary`] | [`summary`] | [`summary_chat`] | `context_str`, `query_str` |
//! | [`TemplateKind::Simple`] | [`simple`] | [`simple_chat`] | `query_str` |
//! | [`TemplateKind::Map`] | [`map`] | [`map_chat`] | `context_str`, `query_str` |
//! | [`TemplateKind::Reduce`] | [`reduce`] | [`reduce_chat`] | `context_str`, `query_str` |
//!
//! Completion prompts end with a label and a colon (`Answer:`) and no trailing space, so
//! the model's first token carries its own leading space.
//!
//! ```
//! use synthkit::prompt::{TemplateKind, defaults};
//! let qa = defaults::for_kind(TemplateKind::Qa, false);
//! assert_eq!(qa.variables(), vec!["context_str", "query_str"]);
//! let text = qa.render(&[("context_str", "The dome opens at dusk."), ("query_str", "When?")]);
//! assert!(text.to_text().ends_with("Question: When?\nAnswer:"));
//! ```

use serde_json::Value;

use crate::prompt::{PromptTemplate, Role, TemplateKind};

/// The system message of the question-answering and summary chat templates.
const SYSTEM_PERSONA: &str = "Answer only from the passages the user gives, never from prior knowledge. \
Be direct and do not mention the passages. If they lack the answer, reply only: Not in the sources.";

const QA_COMPLETION: &str = "Passages:
---
{context_str}
---
Answer the question in one full sentence, using only these passages; do not mention them. \
If they do not answer it, reply only: Not in the sources.
Question: {query_str}
Answer:";

const QA_CHAT_USER: &str = "Passages:
---
{context_str}
---
Question: {query_str}
Answer in one full sentence.";

const REFINE_COMPLETION: &str = "Question: {query_str}
Current answer: {existing_answer}
New passages:
---
{context_msg}
---
Improve the current answer with the new passages if they help; otherwise repeat it unchanged. \
Use only the passages and the answer, without mentioning them.
Improved answer:";

const REFINE_CHAT_USER: &str = "Improve the current answer to the question with the new passages if they help; otherwise reply \
with it unchanged. Use only the passages and the answer, without mentioning them.
New passages:
---
{context_msg}
---
Question: {query_str}
Current answer: {existing_answer}";

// Short (41 tokens with the benchmark's question, the reference's 43): every tree level
// packs its texts beside this text, so each token here is a token less of passages in every
// call; at 54 tokens tree_summarize made one call more than the reference on the 1,000-node
// corpus (bench/RESULTS.md, with the answers each wording gave). It opens as question
// answering's prompt does, so a server's prompt cache can reuse the opening across modes.
const SUMMARY_COMPLETION: &str = "Passages:
---
{context_str}
---
Combine them into one answer. If they do not answer it, reply only: Not in the sources.
Question: {query_str}
Answer:";

// Opens as question answering's user message does, so that one case's prompts in
// different modes share the server's cached prefix through the passages.
const SUMMARY_CHAT_USER: &str = "Passages:
---
{context_str}
---
Combine them into one answer; merge repeated points and keep names and numbers.
Question: {query_str}";

const SIMPLE: &str = "{query_str}";

// map_reduce's map step: the JSON instructions of the record's schema follow it (their
// field descriptions say what each field holds), so the prompt itself stays short.
const MAP_COMPLETION: &str = "Passages:
---
{context_str}
---
Extract what these passages say about the question: the facts (keep names and numbers), \
why they matter, the answer they give and your confidence in it (1 to 5). If they say \
nothing about it, set no_information to true.
Question: {query_str}";

/// The same words as [`MAP_COMPLETION`]: the schema's instructions end both.
const MAP_CHAT_USER: &str = MAP_COMPLETION;

const REDUCE_CHAT_USER: &str =
    "Notes taken from different passages, each with its confidence (1 to 5):
---
{context_str}
---
Answer the question using only these notes. Where they conflict, trust the better \
supported, more confident ones; do not mention the notes.
Question: {query_str}";

/// One kind's default texts: the completion prompt (its parts, joined), the chat prompt's
/// user message, and whether the chat prompt opens with [`SYSTEM_PERSONA`].
struct Texts {
    kind: TemplateKind,
    completion: &'static [&'static str],
    chat_user: &'static str,
    persona: bool,
}

impl Texts {
    const fn new(
        kind: TemplateKind,
        completion: &'static [&'static str],
        chat_user: &'static str,
        persona: bool,
    ) -> Self {
        Self {
            kind,
            completion,
            chat_user,
            persona,
        }
    }
}

const QA: Texts = Texts::new(TemplateKind::Qa, &[QA_COMPLETION], QA_CHAT_USER, true);
const REFINE: Texts = Texts::new(
    TemplateKind::Refine,
    &[REFINE_COMPLETION],
    REFINE_CHAT_USER,
    false,
);
const SUMMARY: Texts = Texts::new(
    TemplateKind::Summary,
    &[SUMMARY_COMPLETION],
    SUMMARY_CHAT_USER,
    true,
);
const SIMPLE_TEXTS: Texts = Texts::new(TemplateKind::Simple, &[SIMPLE], SIMPLE, false);
const MAP: Texts = Texts::new(TemplateKind::Map, &[MAP_COMPLETION], MAP_CHAT_USER, false);
const REDUCE: Texts = Texts::new(
    TemplateKind::Reduce,
    &[REDUCE_CHAT_USER, "\nAnswer:"],
    REDUCE_CHAT_USER,
    true,
);
/// The question-answering prompt for completion models (`context_str`, `query_str`).
///
/// Used by the first step of `refine` and `compact`, by `simple_summarize` and by
/// `accumulate`.
pub fn qa() -> PromptTemplate {
    for_kind(TemplateKind::Qa, false)
}

/// The question-answering prompt for chat models: a system message with the rules and a
/// user message with the passages and the question (`context_str`, `query_str`).
pub fn qa_chat() -> PromptTemplate {
    for_kind(TemplateKind::Qa, true)
}

/// The refine prompt for completion models (`query_str`, `existing_answer`,
/// `context_msg`): rewrite the current answer with the new passages, or repeat it when
/// they do not help.
pub fn refine() -> PromptTemplate {
    for_kind(TemplateKind::Refine, false)
}

/// The refine prompt for chat models: one user message (`context_msg`, `query_str`,
/// `existing_answer`).
pub fn refine_chat() -> PromptTemplate {
    for_kind(TemplateKind::Refine, true)
}

/// The summary prompt for completion models (`context_str`, `query_str`): combine
/// passages from several sources into one answer. Used by `tree_summarize`.
pub fn summary() -> PromptTemplate {
    for_kind(TemplateKind::Summary, false)
}

/// The summary prompt for chat models: the question-answering system message and a user
/// message with the passages and the question (`context_str`, `query_str`).
pub fn summary_chat() -> PromptTemplate {
    for_kind(TemplateKind::Summary, true)
}

/// The query alone, `{query_str}` (kind [`TemplateKind::Simple`]), used by `generation`.
pub fn simple() -> PromptTemplate {
    for_kind(TemplateKind::Simple, false)
}

/// The query alone as one user message (kind [`TemplateKind::Simple`]).
pub fn simple_chat() -> PromptTemplate {
    for_kind(TemplateKind::Simple, true)
}

/// map_reduce's map prompt for completion models (`context_str`, `query_str`): extract
/// a record about the question from the passages. The record's JSON schema follows it.
pub fn map() -> PromptTemplate {
    for_kind(TemplateKind::Map, false)
}

/// map_reduce's map prompt for chat models: one user message (`context_str`,
/// `query_str`).
pub fn map_chat() -> PromptTemplate {
    for_kind(TemplateKind::Map, true)
}

/// map_reduce's reduce prompt for completion models (`context_str`, `query_str`): answer
/// from the records, weighing their confidence where they conflict.
pub fn reduce() -> PromptTemplate {
    for_kind(TemplateKind::Reduce, false)
}

/// map_reduce's reduce prompt for chat models: the question-answering system message and
/// a user message with the records and the question (`context_str`, `query_str`).
pub fn reduce_chat() -> PromptTemplate {
    for_kind(TemplateKind::Reduce, true)
}

/// The default template of `kind`, the chat variant when `chat` is true.
///
/// [`TemplateKind::Custom`] has no default of its own and gets the simple prompt
/// (kind [`TemplateKind::Simple`]).
pub fn for_kind(kind: TemplateKind, chat: bool) -> PromptTemplate {
    let texts = match kind {
        TemplateKind::Qa => &QA,
        TemplateKind::Refine => &REFINE,
        TemplateKind::Summary => &SUMMARY,
        TemplateKind::Map => &MAP,
        TemplateKind::Reduce => &REDUCE,
        TemplateKind::Simple | TemplateKind::Custom => &SIMPLE_TEXTS,
    };
    if !chat {
        return PromptTemplate::completion(texts.kind, texts.completion.concat());
    }
    let mut messages = Vec::with_capacity(2);
    if texts.persona {
        messages.push((Role::System, SYSTEM_PERSONA.to_string()));
    }
    messages.push((Role::User, texts.chat_user.to_string()));
    // The same messages as one completion text in the (impossible) case the chat builder
    // refuses them.
    PromptTemplate::chat(texts.kind, messages.clone()).unwrap_or_else(|_| {
        let joined: Vec<String> = messages.into_iter().map(|(_, text)| text).collect();
        PromptTemplate::completion(texts.kind, joined.join("\n\n"))
    })
}

/// The instructions added after a rendered prompt when the reply must be JSON following
/// `schema` (structured answer filtering, for models without native structured output).
///
/// The block has no leading or trailing blank line: append it after a blank line
/// (`"{prompt}\n\n{block}"`), to a completion prompt or to the last message of a chat
/// prompt. The schema is pretty-printed inside it; its field descriptions carry the meaning
/// of each field.
///
/// ```
/// let schema = serde_json::json!({"type": "object", "properties": {"answer": {"type": "string"}}});
/// let block = synthkit::prompt::defaults::json_instructions(&schema);
/// assert!(block.starts_with("Reply with a single JSON object"));
/// assert!(block.contains("\"answer\""));
/// ```
pub fn json_instructions(schema: &Value) -> String {
    let pretty = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
    format!(
        "Reply with a single JSON object that follows this JSON schema, and nothing else \
         (no text or code fences around it):\n{pretty}"
    )
}

/// What the model is told when citations are on (added to the system prompt, or before
/// a completion prompt): cite the numbered sources, keep the citations already there.
/// Short on purpose: it rides on every call, and citations may cost at most 5% more
/// prompt tokens than plain prompts (`tests/citations.rs` measures it).
pub const CITATION_INSTRUCTIONS: &str = "Cite sources as [n]; keep existing [n] citations.";

#[cfg(test)]
mod tests {
    use super::*;

    /// The passages and the question.
    const CQ: &[&str] = &["context_str", "query_str"];

    fn all() -> Vec<(PromptTemplate, TemplateKind, bool, &'static [&'static str])> {
        use TemplateKind::{Map, Qa, Reduce, Refine, Simple, Summary};
        vec![
            (qa(), Qa, false, CQ),
            (qa_chat(), Qa, true, CQ),
            (
                refine(),
                Refine,
                false,
                &["query_str", "existing_answer", "context_msg"],
            ),
            (
                refine_chat(),
                Refine,
                true,
                &["context_msg", "query_str", "existing_answer"],
            ),
            (summary(), Summary, false, CQ),
            (summary_chat(), Summary, true, CQ),
            (simple(), Simple, false, &["query_str"]),
            (simple_chat(), Simple, true, &["query_str"]),
            (map(), Map, false, CQ),
            (map_chat(), Map, true, CQ),
            (reduce(), Reduce, false, CQ),
            (reduce_chat(), Reduce, true, CQ),
        ]
    }

    #[test]
    fn defaults_validate_with_expected_variables() {
        for (t, kind, chat, vars) in all() {
            assert_eq!(t.kind(), kind);
            assert_eq!(t.is_chat(), chat, "{kind} chat={chat}");
            assert!(t.validate().is_ok(), "{kind} chat={chat}");
            assert_eq!(t.variables(), vars, "{kind} chat={chat}");
        }
    }

    #[test]
    fn the_persona_opens_the_answering_chat_prompts_only() {
        for (t, kind, chat, _) in all() {
            let opens = t
                .render(&[])
                .to_text()
                .starts_with(&format!("system: {SYSTEM_PERSONA}"));
            let answering = matches!(
                kind,
                TemplateKind::Qa | TemplateKind::Summary | TemplateKind::Reduce
            );
            assert_eq!(opens, chat && answering, "{kind} chat={chat}");
        }
    }

    #[test]
    fn custom_gets_the_simple_prompt() {
        for chat in [false, true] {
            let simple_t = if chat { simple_chat() } else { simple() };
            assert_eq!(for_kind(TemplateKind::Custom, chat), simple_t);
        }
    }

    #[test]
    fn simple_is_the_query_alone() {
        assert_eq!(
            simple().render(&[("query_str", "hi {x}")]).as_text(),
            Some("hi {x}")
        );
    }

    #[test]
    fn completion_prompts_end_without_trailing_space() {
        for t in [qa(), refine(), summary(), reduce()] {
            let text = t.render(&[]).to_text();
            assert!(text.ends_with(':'), "{text}");
        }
    }

    #[test]
    fn json_instructions_embed_schema() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"query_satisfied": {"type": "boolean"}, "answer": {"type": "string"}},
            "required": ["query_satisfied", "answer"]
        });
        let block = json_instructions(&schema);
        assert!(block.starts_with("Reply"));
        assert!(block.ends_with('}'));
        assert!(block.contains("\"query_satisfied\": {"));
        // Field order of the schema is kept (query_satisfied before answer).
        let q = block.find("query_satisfied").unwrap_or(usize::MAX);
        let a = block.find("\"answer\"").unwrap_or(0);
        assert!(q < a);
    }
}
