//! [`RunRecord`]: what a report shows of one synthesis, as plain data (JSON in a trace's
//! `run` line and in the service's report store).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use synthkit::node::{ImageFormat, NodeImage};
use synthkit::steps::StepRecorder;
use synthkit::{Node, Response, ResponseMode, SynthStep};

use crate::caps;

/// One synthesis as the report shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunRecord {
    /// The question (or instruction).
    pub query: String,
    /// The response mode.
    pub mode: Option<ResponseMode>,
    /// The model's name.
    #[serde(default)]
    pub model: String,
    /// The backend (`openai`, `extractive`, ...), when known.
    #[serde(default)]
    pub backend: String,
    /// The answer; `None` for a report made from calls alone (a trace without its run)
    /// or of a failed run.
    #[serde(default)]
    pub answer: Option<String>,
    /// Why the run failed, for the record of a failed run (its calls up to the failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the answer is drawn from the sources, when known.
    #[serde(default)]
    pub grounded: Option<bool>,
    /// The answer's citations (marker to node ids), when citations were on.
    #[serde(default)]
    pub citations: Option<Vec<CitationRecord>>,
    /// Quote mode: the answer's quotes, checked (status and character offsets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotes: Vec<QuoteRecord>,
    /// The sources, in the order given.
    #[serde(default)]
    pub sources: Vec<SourceRecord>,
    /// Sources not kept in the record (past [`caps::MAX_SOURCES`]).
    #[serde(default)]
    pub sources_omitted: usize,
    /// Every model call.
    #[serde(default)]
    pub steps: Vec<SynthStep>,
    /// The prompt budget.
    #[serde(default)]
    pub budget: Option<BudgetRecord>,
    /// Calls and tokens over the run.
    #[serde(default)]
    pub usage: UsageRecord,
    /// The run's time, in milliseconds, when known.
    #[serde(default)]
    pub total_ms: Option<f64>,
    /// Other settings, as name and value (concurrency, citations, templates, ...).
    #[serde(default)]
    pub settings: Vec<(String, String)>,
}

/// One `[n]` marker of the answer and the nodes it cites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CitationRecord {
    /// The number written in the answer.
    pub marker: u32,
    /// The cited nodes' ids.
    pub node_ids: Vec<String>,
}

/// One checked quote of the answer ([`synthkit::Quote`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuoteRecord {
    /// The marker before the quote.
    pub marker: u32,
    /// The node the quote is in (or the marked node, when not found).
    pub node_id: String,
    /// The quote as written.
    pub quote: String,
    /// `verified`, `misattributed` or `not_found`.
    pub status: String,
    /// Character offsets into the node's text (none when not found).
    #[serde(default)]
    pub start: Option<usize>,
    /// End (exclusive), in characters.
    #[serde(default)]
    pub end: Option<usize>,
}

/// One source node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SourceRecord {
    /// The node's id.
    pub id: String,
    /// The retriever's score.
    #[serde(default)]
    pub score: Option<f64>,
    /// The section (`section` metadata) or, without one, the file (`file_path`).
    #[serde(default)]
    pub section: Option<String>,
    /// The start of the node's text (at most [`caps::SOURCE_EXCERPT_BYTES`]).
    pub excerpt: String,
    /// The text's full length in bytes.
    pub text_bytes: usize,
    /// The node's image (an image node), for the report's thumbnails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageRecord>,
}

/// A source's image: its type, size and (within [`caps::PAGE_IMAGE_BYTES`] of a record)
/// its data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ImageRecord {
    /// The MIME type (`image/png`, ...).
    pub mime_type: String,
    /// The image's size in bytes, decoded.
    pub bytes: usize,
    /// Standard base64 of the image; `None` when the record did not keep it (past
    /// [`caps::PAGE_IMAGE_BYTES`] of images in one record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

impl ImageRecord {
    /// The record of `image`, with its data when `keep`.
    pub fn of(image: &NodeImage, keep: bool) -> Self {
        Self {
            mime_type: image.mime_type().to_string(),
            bytes: image.len(),
            data: keep.then(|| image.base64().to_string()),
        }
    }

    /// The image as a `data:` URL, when its data was kept and its type is one synthkit
    /// reads (PNG, JPEG, WebP, GIF: a record read back from a file may say anything).
    pub fn data_url(&self) -> Option<String> {
        let data = self.data.as_deref()?;
        // Only the four formats' own names (as `NodeImage::mime_type` writes them).
        ImageFormat::from_mime_type(&self.mime_type).filter(|f| f.mime_type() == self.mime_type)?;
        Some(format!("data:{};base64,{data}", self.mime_type))
    }

    /// The length of [`ImageRecord::data_url`] (its data's length plus the prefix).
    pub fn data_url_len(&self) -> usize {
        self.data.as_deref().map_or(0, |d| {
            "data:;base64,".len() + self.mime_type.len() + d.len()
        })
    }
}

/// The records of `nodes`, their texts cut to `excerpt_bytes`, keeping image data until
/// [`caps::PAGE_IMAGE_BYTES`] of it (an image past the budget keeps its type and size).
fn sources_of(nodes: &[Node], excerpt_bytes: usize) -> Vec<SourceRecord> {
    let mut room = caps::PAGE_IMAGE_BYTES;
    nodes
        .iter()
        .map(|node| {
            let mut record = SourceRecord::text_of(node, excerpt_bytes);
            record.image = node.image.as_ref().map(|image| {
                let keep = image.base64().len() <= room;
                if keep {
                    room -= image.base64().len();
                }
                ImageRecord::of(image, keep)
            });
            record
        })
        .collect()
}

impl SourceRecord {
    /// The record of `node`, its text cut to `excerpt_bytes`, its image (if any) kept
    /// whole when no larger than [`caps::PAGE_IMAGE_BYTES`] in base64.
    pub fn of(node: &Node, excerpt_bytes: usize) -> Self {
        let mut record = Self::text_of(node, excerpt_bytes);
        record.image = node
            .image
            .as_ref()
            .map(|i| ImageRecord::of(i, i.base64().len() <= caps::PAGE_IMAGE_BYTES));
        record
    }

    /// [`SourceRecord::of`] without the image.
    fn text_of(node: &Node, excerpt_bytes: usize) -> Self {
        let meta = |k: &str| node.metadata.get(k).and_then(Value::as_str);
        let section = match (meta("section"), meta("file_path")) {
            (Some(s), Some(f)) => Some(format!("{f} › {s}")),
            (Some(s), None) => Some(s.to_string()),
            (None, f) => f.map(str::to_string),
        };
        let (excerpt, _) = synthkit::steps::cap_text(&node.text, excerpt_bytes);
        Self {
            id: node.id.clone(),
            score: node.score,
            section,
            excerpt: excerpt.to_string(),
            text_bytes: node.text.len(),
            image: None,
        }
    }

    /// Whether the excerpt is the whole text.
    pub fn is_whole(&self) -> bool {
        self.excerpt.len() >= self.text_bytes
    }
}

/// The prompt budget of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetRecord {
    /// The model's context window (prompt plus output).
    pub context_window: usize,
    /// Tokens reserved for each reply.
    pub num_output: usize,
    /// The most tokens a prompt may have.
    pub max_prompt_tokens: usize,
}

impl BudgetRecord {
    /// The budget of `budget`.
    pub fn of(budget: &synthkit::prompt::PromptBudget) -> Self {
        Self {
            context_window: budget.context_window(),
            num_output: budget.num_output(),
            max_prompt_tokens: budget.max_prompt_tokens(),
        }
    }
}

/// Calls and tokens over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// Model calls.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Replies cut at the output limit.
    pub truncated_calls: u64,
    /// What the calls cost at the user's prices (`None`: no prices given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl UsageRecord {
    /// The usage of `steps` (the calls a recorder or a trace kept): calls, tokens and cut
    /// replies summed; no cost (prices are the front end's).
    pub fn of_steps(steps: &[synthkit::SynthStep]) -> Self {
        Self {
            calls: steps.len() as u64,
            prompt_tokens: steps
                .iter()
                .fold(0u64, |a, s| a.saturating_add(s.prompt_tokens)),
            completion_tokens: steps
                .iter()
                .fold(0u64, |a, s| a.saturating_add(s.completion_tokens)),
            truncated_calls: steps.iter().filter(|s| s.truncated).count() as u64,
            cost_usd: None,
        }
    }
}

impl RunRecord {
    /// The record of a finished synthesis (made with
    /// [`synthkit::SynthesizerBuilder::return_steps`] for its calls to show).
    pub fn from_response(query: &str, mode: ResponseMode, response: &Response) -> Self {
        let excerpt = caps::source_excerpt_bytes(response.source_nodes.len());
        let kept = response.source_nodes.len().min(caps::MAX_SOURCES);
        Self {
            query: query.to_string(),
            mode: Some(mode),
            answer: Some(response.text.clone()),
            citations: response.citations.as_ref().map(|c| {
                c.markers
                    .iter()
                    .map(|m| CitationRecord {
                        marker: m.marker,
                        node_ids: m.node_ids.clone(),
                    })
                    .collect()
            }),
            quotes: response
                .citations
                .iter()
                .flat_map(|c| &c.quotes)
                .map(|q| QuoteRecord {
                    marker: q.marker,
                    node_id: q.node_id.clone(),
                    quote: q.quote.clone(),
                    status: q.status.as_str().to_string(),
                    start: q.start,
                    end: q.end,
                })
                .collect(),
            sources: sources_of(&response.source_nodes[..kept], excerpt),
            sources_omitted: response.source_nodes.len() - kept,
            steps: response.steps.clone().unwrap_or_default(),
            usage: UsageRecord {
                calls: response.usage.calls,
                prompt_tokens: response.usage.prompt_tokens,
                completion_tokens: response.usage.completion_tokens,
                truncated_calls: response.usage.truncated_calls,
                cost_usd: response.usage.cost_usd,
            },
            ..Self::default()
        }
    }

    /// The record of a synthesis over `nodes` that ended with `outcome`, its calls kept by
    /// `recorder` (an observer of the synthesis, see
    /// [`synthkit::SynthesizerBuilder::step_recorder`]): for an answer,
    /// [`RunRecord::from_response`] with the response's own steps, else the recorder's;
    /// for a failure, [`RunRecord::failed`] with the calls made before it. The recorder is
    /// emptied.
    pub fn of_outcome(
        query: &str,
        mode: ResponseMode,
        nodes: &[Node],
        outcome: Result<&Response, &str>,
        recorder: &StepRecorder,
    ) -> Self {
        match outcome {
            Ok(response) => {
                let mut run = Self::from_response(query, mode, response);
                if response.steps.is_none() {
                    run.steps = recorder.take();
                }
                run
            }
            Err(error) => Self::failed(query, mode, nodes, recorder.take(), error),
        }
    }

    /// The record of a synthesis over `nodes` that failed with `error` after the calls
    /// `steps` (recorded by a [`synthkit::steps::StepRecorder`]): no answer, the calls that
    /// were made, the sources given.
    pub fn failed(
        query: &str,
        mode: ResponseMode,
        nodes: &[Node],
        steps: Vec<SynthStep>,
        error: impl Into<String>,
    ) -> Self {
        let excerpt = caps::source_excerpt_bytes(nodes.len());
        let kept = nodes.len().min(caps::MAX_SOURCES);
        let usage = UsageRecord::of_steps(&steps);
        Self {
            query: query.to_string(),
            mode: Some(mode),
            error: Some(error.into()),
            sources: sources_of(&nodes[..kept], excerpt),
            sources_omitted: nodes.len() - kept,
            steps,
            usage,
            ..Self::default()
        }
    }

    /// Sets the model and backend names.
    pub fn with_model(mut self, backend: impl Into<String>, model: impl Into<String>) -> Self {
        self.backend = backend.into();
        self.model = model.into();
        self
    }

    /// Sets the budget.
    pub fn with_budget(mut self, budget: BudgetRecord) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Sets whether the answer is grounded.
    pub fn with_grounded(mut self, grounded: Option<bool>) -> Self {
        self.grounded = grounded;
        self
    }

    /// Sets the run's time.
    pub fn with_total_ms(mut self, ms: f64) -> Self {
        self.total_ms = Some(ms);
        self
    }

    /// Adds a setting.
    pub fn with_setting(mut self, name: impl Into<String>, value: impl ToString) -> Self {
        self.settings.push((name.into(), value.to_string()));
        self
    }
}
