//! Measuring answers without a judge: the cases of a benchmark, the answers of any system,
//! and the scores of each answer.
//!
//! - [`case`] and [`answers`]: the two JSON-lines formats. A **case** (`CASES.jsonl`)
//!   is a question, its nodes (or the paths to read them from), the accepted answers, the
//!   ids of the nodes that hold the answer (`evidence`) and whether the nodes can answer
//!   at all (`answerable`); its answer regexes are [`regex`]'s. An **answer line**
//!   (`ANSWERS.jsonl`) is what one system answered to one case in one mode, with its
//!   cost; synthkit's own runs are scored as answer lines too, so every system is scored
//!   by the same code.
//! - [`normalize`](mod@normalize): SQuAD-style normalisation (lowercase, articles dropped,
//!   whitespace collapsed), with punctuation splitting words as a reader of versions,
//!   flags, paths and code splits them, and thousands separators dropped from numbers.
//! - [`metrics`]: whether an answer is correct, its token F1, whether the answer was in
//!   the nodes and in the prompts sent, citation precision and recall, abstention.
//! - [`score`](mod@score): one [`Row`] per case, mode and system; [`totals`](mod@totals):
//!   the [`Totals`] of each (system, mode) and their paired comparisons;
//!   [`table`](mod@table): the totals as the table `synthkit eval` prints.
//! - [`noise`]: how much of a difference is chance: each correct rate's bootstrap
//!   interval, and paired comparisons (sign test) of systems and modes on the same cases.
//! - [`run`]: running a case with a [`synthkit::Synthesizer`] and writing the run as an
//!   answer line ([`run_case`], [`PromptCapture`], [`answer_line`]), as `synthkit eval`
//!   and the Python package's `evaluate` do.
//!
//! Everything but [`run`] is a pure function of its inputs: no I/O, no model.
//!
//! ```
//! use synthkit_frontend::eval::{AnswerLine, parse_case, score};
//!
//! let case = parse_case(
//!     r#"{"id": "q1", "query": "How often is the mirror cleaned?",
//!         "nodes": [{"id": "n1", "text": "The mirror is cleaned every six months."}],
//!         "answers": ["six months", {"regex": "\\b6 months\\b"}],
//!         "evidence": ["n1"], "answerable": true}"#,
//!     1,
//! )
//! .unwrap()
//! .unwrap();
//! let answer = AnswerLine::new("q1", "compact", "Every six months [1].");
//! let row = score(&case, "mysystem", &answer, Some("The mirror is cleaned every six months."));
//! assert!(row.correct);
//! assert_eq!(row.in_nodes, Some(true));
//! ```

pub mod answers;
pub mod case;
mod line;
pub mod metrics;
pub mod noise;
pub mod normalize;
pub mod regex;
pub mod run;
pub mod score;
#[cfg(test)]
mod score_tests;
pub mod table;
pub mod totals;

pub use answers::{AnswerLine, GuardCounts, parse_answer_line};
pub use case::{Alternative, Case, CaseInput, parse_case, parse_case_within};
pub use line::CaseError;
pub use metrics::{ABSTENTION_PATTERNS, abstains, text_abstains};
pub use noise::Paired;
pub use normalize::normalize;
pub use regex::{AnswerRegex, MAX_REGEX_BYTES, RegexBudget, RegexError};
pub use run::{
    CapturedPrompts, CaseRun, DEFAULT_MAX_PROMPT_BYTES, PromptCapture, answer_line, nodes_text,
    run_case,
};
pub use score::{Row, score};
pub use table::{TABLE_HEADINGS, table};
pub use totals::{NAMED_WRONG, Totals, paired, totals};
