//! The response modes, the steps a mode's calls take and where a call stands
//! ([`StepInfo`]): plain types shared by the engine, traces and errors.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The reference's response modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseMode {
    /// One call per chunk, each refining the previous answer.
    Refine,
    /// Like refine, with the chunks packed into as few prompts as fit (the default).
    #[default]
    Compact,
    /// Summarise packed chunks, then the summaries, until one answer is left.
    TreeSummarize,
    /// Truncate everything into one prompt (reports what it dropped).
    SimpleSummarize,
    /// One answer per chunk, numbered and joined.
    Accumulate,
    /// Accumulate over packed chunks.
    CompactAccumulate,
    /// No model call; the answer is empty and the nodes are the sources.
    NoText,
    /// Ignore the nodes and answer the query alone.
    Generation,
    /// No model call; the answer is the context itself.
    ContextOnly,
    /// Map packed chunks to records (information, rationale, answer, confidence), drop
    /// those with nothing, and reduce the records to one answer weighing confidence.
    MapReduce,
}

impl ResponseMode {
    /// Every mode, in the reference's order, then synthkit's own (`map_reduce`).
    pub const ALL: [ResponseMode; 10] = [
        ResponseMode::Refine,
        ResponseMode::Compact,
        ResponseMode::SimpleSummarize,
        ResponseMode::TreeSummarize,
        ResponseMode::Generation,
        ResponseMode::NoText,
        ResponseMode::ContextOnly,
        ResponseMode::Accumulate,
        ResponseMode::CompactAccumulate,
        ResponseMode::MapReduce,
    ];

    /// The reference's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseMode::Refine => "refine",
            ResponseMode::Compact => "compact",
            ResponseMode::TreeSummarize => "tree_summarize",
            ResponseMode::SimpleSummarize => "simple_summarize",
            ResponseMode::Accumulate => "accumulate",
            ResponseMode::CompactAccumulate => "compact_accumulate",
            ResponseMode::NoText => "no_text",
            ResponseMode::Generation => "generation",
            ResponseMode::ContextOnly => "context_only",
            ResponseMode::MapReduce => "map_reduce",
        }
    }

    /// Whether the mode ever calls a model.
    pub fn calls_model(self) -> bool {
        !matches!(self, ResponseMode::NoText | ResponseMode::ContextOnly)
    }

    /// Whether the mode asks the sources a question (all but `generation`, which asks
    /// the model alone, and `no_text` and `context_only`, which ask nothing): the modes
    /// evidence applies to ([`crate::evidence`]).
    pub fn asks_sources(self) -> bool {
        !matches!(
            self,
            ResponseMode::Generation | ResponseMode::NoText | ResponseMode::ContextOnly
        )
    }
}

impl fmt::Display for ResponseMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of the response modes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown response mode `{0}`: use one of refine, compact, tree_summarize, simple_summarize, accumulate, compact_accumulate, no_text, generation, context_only, map_reduce"
)]
pub struct UnknownMode(pub String);

impl FromStr for ResponseMode {
    type Err = UnknownMode;
    /// Parses the reference's names; `-` may stand for `_` and case is ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.trim().to_ascii_lowercase().replace('-', "_");
        ResponseMode::ALL
            .into_iter()
            .find(|m| m.as_str() == norm)
            .ok_or_else(|| UnknownMode(s.to_string()))
    }
}

/// What a call does within its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Step {
    /// Answer from context (the QA template).
    Qa,
    /// Improve the answer so far with more context (the refine template).
    Refine,
    /// Summarise packed context (tree_summarize).
    Summary,
    /// Answer the query alone (generation).
    Generate,
    /// Extract a record from packed context (map_reduce's first level).
    Map,
    /// Combine records (map_reduce's levels above the first, its final call included).
    Reduce,
}

impl Step {
    /// The snake-case name (`qa`, `refine`, `summary`, `generate`, `map`, `reduce`).
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Qa => "qa",
            Step::Refine => "refine",
            Step::Summary => "summary",
            Step::Generate => "generate",
            Step::Map => "map",
            Step::Reduce => "reduce",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_by_their_reference_names() {
        for m in ResponseMode::ALL {
            assert_eq!(m.as_str().parse::<ResponseMode>(), Ok(m));
        }
        assert_eq!(
            "Tree-Summarize".parse::<ResponseMode>(),
            Ok(ResponseMode::TreeSummarize)
        );
        let err = "summarise".parse::<ResponseMode>().unwrap_err();
        assert!(err.to_string().contains("tree_summarize"));
    }
}

/// Where a call stands in a synthesis: for traces, progress and offline backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StepInfo {
    /// The response mode.
    pub mode: ResponseMode,
    /// What the call does within the mode.
    pub step: Step,
    /// The tree level (0 for modes without levels).
    pub level: u32,
    /// The call's position within its level or sequence.
    pub index: usize,
}

impl StepInfo {
    /// A step of `mode`, level 0, index 0.
    pub fn new(mode: ResponseMode, step: Step) -> Self {
        Self {
            mode,
            step,
            level: 0,
            index: 0,
        }
    }

    /// The same step at `index` of `level`.
    pub fn at(self, level: u32, index: usize) -> Self {
        Self {
            level,
            index,
            ..self
        }
    }
}
