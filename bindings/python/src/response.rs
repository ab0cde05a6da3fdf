//! The Python view of a finished synthesis.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::SynthkitError;
use crate::nodes::{from_json, map_to_dict};

/// A finished synthesis: the answer, its sources, usage and citations.
///
/// `str(response)` is the answer.
#[pyclass(module = "synthkit_rs._synthkit", frozen)]
pub struct Response {
    inner: synthkit::Response,
}

impl Response {
    /// Wraps a library response.
    pub(crate) fn new(inner: synthkit::Response) -> Self {
        Self { inner }
    }

    /// The library's response.
    pub(crate) fn inner(&self) -> &synthkit::Response {
        &self.inner
    }
}

#[pymethods]
impl Response {
    /// The answer's text.
    #[getter]
    fn response(&self) -> &str {
        &self.inner.text
    }

    /// `False` when the sources do not answer: no nodes, the model said so (then
    /// `response` is the `not_in_sources_answer`), or no step found anything.
    #[getter]
    fn answerable(&self) -> bool {
        self.inner.answerable
    }

    /// The nodes given, in order, as `SourceNode`s.
    #[getter]
    fn source_nodes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let nodes = self
            .inner
            .source_nodes
            .iter()
            .map(|n| SourceNode { inner: n.clone() });
        PyList::new(py, nodes)
    }

    /// Node id to that node's metadata (as LlamaIndex's `Response.metadata`).
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        map_to_dict(py, &self.inner.metadata)
    }

    /// `{"calls", "prompt_tokens", "completion_tokens", "truncated_calls",
    /// "reasoning_tokens", "cached_prompt_tokens", "cache_write_tokens"}`: the server's
    /// token counts where it reported them, else synthkit's (`reasoning_tokens`: the
    /// completion tokens a reasoning model spent thinking, 0 for others;
    /// `cached_prompt_tokens`: the prompt tokens the server read from its prompt cache;
    /// `cache_write_tokens`: those it stored there, Anthropic only).
    #[getter]
    fn usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let u = &self.inner.usage;
        let d = PyDict::new(py);
        d.set_item("calls", u.calls)?;
        d.set_item("prompt_tokens", u.prompt_tokens)?;
        d.set_item("completion_tokens", u.completion_tokens)?;
        d.set_item("truncated_calls", u.truncated_calls)?;
        d.set_item("reasoning_tokens", u.reasoning_tokens)?;
        d.set_item("cached_prompt_tokens", u.cached_prompt_tokens)?;
        d.set_item("cache_write_tokens", u.cache_write_tokens)?;
        Ok(d)
    }

    /// `None` without `return_steps=True`; else one dict per model call, in call order:
    /// `call`, `mode`, `step`, `level`, `index`, `node_ids`, `input_calls`, `prompt_tokens`,
    /// `counted_prompt_tokens`, `max_tokens`, `completion_tokens`, `usage_reported`, `ms`,
    /// `retries`, `corrections`, `truncated`, `reply` (at most 16 KiB), `reply_bytes` and
    /// `reply_cut` (the reply was shortened to that bound).
    #[getter]
    fn steps<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        to_python(
            py,
            self.inner.steps.as_ref().map(serde_json::to_value),
            "steps",
        )
    }

    /// The grounding check of the answer (`None` for JSON answers, abstentions and modes
    /// that ask the nodes nothing): `status` (`"supported"`, `"partly"`,
    /// `"unsupported"`), `unsupported` (the answer's facts found in no node it was shown),
    /// `derived`, `checked`, `found`, `source_ids` (the nodes holding its facts, found by
    /// the engine) and `withheld` (the model's answer, when `on_unsupported="abstain"`
    /// replaced it).
    #[getter]
    fn grounding<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        to_python(
            py,
            self.inner.grounding.as_ref().map(serde_json::to_value),
            "grounding",
        )
    }

    /// With `escalate=` (`None` otherwise): `escalated` (whether the first answer was set
    /// aside), `reason` (`abstained` or `unsupported`), `from`, `first_nodes`, `to` (the
    /// mode run over every node), `first_answer` and `first_usage`.
    #[getter]
    fn escalation<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        to_python(
            py,
            self.inner.escalation.as_ref().map(serde_json::to_value),
            "escalation",
        )
    }

    /// What the evidence stage kept and left out, with `evidence` on (`None` otherwise):
    /// `kept` (each `node_id` with its `sentences`: `text`, `start`, `end` in
    /// characters), `dropped`, `dropped_count`, `answerable`, `coverage`, `abstained`.
    #[getter]
    fn evidence<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        to_python(
            py,
            self.inner.evidence.as_ref().map(serde_json::to_value),
            "evidence",
        )
    }

    /// `None` without `citations=True`; else a list of `{"marker": n, "node_ids": [...]}`
    /// for each `[n]` in the answer, in order of first use.
    #[getter]
    fn citations<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(c) = &self.inner.citations else {
            return Ok(None);
        };
        let list = PyList::empty(py);
        for m in &c.markers {
            let d = PyDict::new(py);
            d.set_item("marker", m.marker)?;
            d.set_item("node_ids", &m.node_ids)?;
            list.append(d)?;
        }
        Ok(Some(list))
    }

    /// With `citations="quotes"`: every `[n] "quote"` of the answer, checked, as
    /// `{"marker", "node_id", "marked_node_id", "quote", "status", "start", "end"}`;
    /// `status` is `verified` (in the marked node; `start`/`end` are character offsets
    /// into `node_id`'s text), `misattributed` (in another source: `node_id` is that
    /// source), `not_found` (offsets `None`, left out of `citations`) or `unchecked`
    /// (not looked for, left out of `citations`; `reason` is `too_short`, `too_long` or
    /// `unclosed`). `None` without citations; empty outside quote mode.
    #[getter]
    fn quotes<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        to_python(
            py,
            self.inner
                .citations
                .as_ref()
                .map(|c| serde_json::to_value(&c.quotes)),
            "quotes",
        )
    }

    /// With `citations="quotes"`: `{"number", "markers", "sentence"}` for each number of a
    /// cited sentence that none of its cited sources contains. `None` without citations.
    #[getter]
    fn unsupported_numbers<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        to_python(
            py,
            self.inner
                .citations
                .as_ref()
                .map(|c| serde_json::to_value(&c.unsupported_numbers)),
            "numbers",
        )
    }

    /// For `simple_summarize`: `{"dropped_tokens", "dropped_node_ids"}` when the context
    /// was cut to fit one prompt, else `None`.
    #[getter]
    fn truncation<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(t) = &self.inner.truncation else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("dropped_tokens", t.dropped_tokens)?;
        d.set_item("dropped_node_ids", &t.dropped_node_ids)?;
        Ok(Some(d))
    }

    /// The structured answer (with an output schema), else `None`.
    #[getter]
    fn structured<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .structured
            .as_ref()
            .map(|v| from_json(py, v))
            .transpose()
    }

    /// The answer without its `[n]` citation markers.
    fn text_without_markers(&self) -> String {
        self.inner.text_without_markers()
    }

    fn __str__(&self) -> &str {
        &self.inner.text
    }

    fn __repr__(&self) -> String {
        let preview = preview(&self.inner.text, 60);
        format!(
            "Response(response={preview:?}, source_nodes={}, calls={})",
            self.inner.source_nodes.len(),
            self.inner.usage.calls
        )
    }
}

/// One source node of a response: `id`, `text`, `metadata`, `score`.
#[pyclass(module = "synthkit_rs._synthkit", frozen)]
pub struct SourceNode {
    inner: synthkit::Node,
}

#[pymethods]
impl SourceNode {
    /// The node's id.
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    /// The node's text (without metadata).
    #[getter]
    fn text(&self) -> &str {
        &self.inner.text
    }

    /// The node's metadata.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        map_to_dict(py, &self.inner.metadata)
    }

    /// The retriever's score, if any.
    #[getter]
    fn score(&self) -> Option<f64> {
        self.inner.score
    }

    /// The node as a dict: `{"id", "text", "metadata", "score"}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("id", &self.inner.id)?;
        d.set_item("text", &self.inner.text)?;
        d.set_item("metadata", map_to_dict(py, &self.inner.metadata)?)?;
        d.set_item("score", self.inner.score)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let preview = preview(&self.inner.text, 40);
        format!(
            "SourceNode(id={:?}, text={preview:?}, score={:?})",
            self.inner.id, self.inner.score
        )
    }
}

/// The first `chars` characters of `text` for a repr, with `…` when there is more.
fn preview(text: &str, chars: usize) -> String {
    let mut shown: String = text.chars().take(chars).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

/// `value` (written as JSON by `serde_json::to_value`) as a Python object (JSON's shapes: dicts, lists, strings, numbers), or `None`;
/// `what` names it in the error when it cannot be written.
fn to_python<'py>(
    py: Python<'py>,
    value: Option<serde_json::Result<serde_json::Value>>,
    what: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let value =
        value.map_err(|e| SynthkitError::new_err(format!("cannot write the {what}: {e}")))?;
    from_json(py, &value).map(Some)
}
