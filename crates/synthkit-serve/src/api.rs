//! The wire types of `POST /v1/synthesize`: the request, the nodes it accepts, the
//! response and the error body. Their JSON schemas (schemars) are the OpenAPI document's
//! components.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use synthkit::Node;

use crate::error::ApiError;

/// `POST /v1/synthesize`: the query, the retrieved nodes and how to answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SynthesizeRequest {
    /// The question (or instruction) to answer.
    pub query: String,
    /// The retrieved nodes, best first: plain strings (document texts), synthkit nodes
    /// `{id?, text, metadata?, excluded_llm_metadata_keys?, score?}`, LlamaIndex
    /// `TextNode` objects (`id_`) or `NodeWithScore` objects (`{node, score}`), mixed
    /// freely. A node's id is its `id`, else `id_`, else `node_id`, else its 1-based
    /// position; ids must be unique, and a node's id fields must agree.
    #[serde(default)]
    #[schemars(with = "Vec<NodeInput>")]
    pub nodes: Vec<Value>,
    /// The response mode: refine, compact (default), tree_summarize, simple_summarize,
    /// accumulate, compact_accumulate, generation, no_text, context_only.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub mode: Option<String>,
    /// Answer as server-sent events (`delta` events, then one `response` or `error`
    /// event) instead of one JSON object.
    #[serde(default)]
    pub stream: bool,
    /// Numbered sources and `[n]` citations: the answer's markers are checked and mapped
    /// to node ids in the response's `citations`. Text answers only (not with
    /// `output_schema`).
    #[serde(default)]
    pub citations: bool,
    /// With `citations`, whether the answer keeps its `[n]` markers (default true; false
    /// removes them from the text and keeps `citations`).
    #[serde(default)]
    pub citation_markers: Option<bool>,
    /// A JSON schema the answer must follow; the parsed answer is then the response's
    /// `structured` field.
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Model calls of this request in flight at once (tree levels, accumulate); capped by
    /// the service's `--max-request-concurrency`.
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// Templates in place of the defaults (completion templates with `{name}` variables).
    #[serde(default)]
    pub templates: Option<TemplatesInput>,
    /// A system prompt in place of the model's.
    #[serde(default)]
    pub system_prompt: Option<String>,
}

/// Custom templates, each optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplatesInput {
    /// Question answering: `{context_str}`, `{query_str}`.
    #[serde(default)]
    pub qa: Option<String>,
    /// Refining: `{query_str}`, `{existing_answer}`, `{context_msg}`.
    #[serde(default)]
    pub refine: Option<String>,
    /// Tree summaries: `{context_str}`, `{query_str}`.
    #[serde(default)]
    pub summary: Option<String>,
    /// Generation from the query alone: `{query_str}`.
    #[serde(default)]
    pub simple: Option<String>,
}

/// One node in a request (documentation of the accepted shapes; `synthkit::node::json`
/// reads them).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NodeInput {
    /// A document text; its id is its 1-based position (`"1"`, `"2"`, ...).
    Text(String),
    /// A node.
    Node(NodeObject),
    /// LlamaIndex `NodeWithScore`.
    WithScore {
        /// The node.
        node: NodeObject,
        /// The retriever's score (default: the node's own `score`).
        #[serde(default)]
        score: Option<f64>,
    },
}

/// A node object: synthkit's fields, or LlamaIndex `TextNode`'s (`id_`; its other fields
/// are ignored). The id is `id`, else `id_`, else `node_id`, else the node's 1-based
/// position; two of them that differ are an error, and so are two nodes with one id.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NodeObject {
    /// The id (default: `id_`, else `node_id`, else the position, `"1"`, `"2"`, ...).
    #[serde(default)]
    pub id: Option<String>,
    /// LlamaIndex's name for the id.
    #[serde(default)]
    pub id_: Option<String>,
    /// Another name for the id (LlamaIndex's `node_id` property).
    #[serde(default)]
    pub node_id: Option<String>,
    /// The text.
    pub text: String,
    /// Metadata, shown to the model as `key: value` lines.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Metadata keys the model does not see.
    #[serde(default)]
    pub excluded_llm_metadata_keys: Vec<String>,
    /// The retriever's score.
    #[serde(default)]
    pub score: Option<f64>,
}

/// The nodes of a request as synthkit nodes, read by the library's one node reader
/// ([`synthkit::node::nodes_from_json`]: its shapes and its id rule); the error names the
/// bad node's index in `nodes` and its 1-based position.
pub fn parse_nodes(values: Vec<Value>) -> Result<Vec<Node>, ApiError> {
    synthkit::node::nodes_from_json(values).map_err(|e| {
        ApiError::InvalidRequest(format!("nodes[{}]: {e}", e.position().saturating_sub(1)))
    })
}

/// The response: `synthkit::Response` as JSON (the body of a plain request and the data
/// of the `response` event of a stream). This type documents it in the OpenAPI document.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SynthesizeResponse {
    /// The answer's text (for a structured answer, its JSON).
    pub text: String,
    /// The structured answer, when an output schema was given.
    pub structured: Option<Value>,
    /// The nodes given, in order.
    pub source_nodes: Vec<SourceNode>,
    /// Node id to its full metadata.
    pub metadata: Map<String, Value>,
    /// Calls and tokens.
    pub usage: UsageBody,
    /// What `simple_summarize` dropped to fit one prompt.
    pub truncation: Option<TruncationBody>,
    /// The answer's citations, when they were asked for.
    pub citations: Option<CitationsBody>,
}

/// The citations of an answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CitationsBody {
    /// The answer's markers in order of first use (marker 1 first).
    pub markers: Vec<CitationBody>,
    /// Markers removed because they named no source shown to the model, as written.
    pub removed: Vec<String>,
}

/// One marker of the answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CitationBody {
    /// The number written in the answer (`[1]` is 1).
    pub marker: u32,
    /// The nodes it cites.
    pub node_ids: Vec<String>,
}

/// A source node as the response gives it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SourceNode {
    /// The id (given, or the node's position).
    pub id: String,
    /// The text.
    pub text: String,
    /// Metadata.
    pub metadata: Map<String, Value>,
    /// Metadata keys the model did not see.
    pub excluded_llm_metadata_keys: Vec<String>,
    /// The retriever's score, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// Calls and tokens of one synthesis.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UsageBody {
    /// Model calls made (cached replies included).
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Replies cut at the output limit.
    pub truncated_calls: u64,
}

/// What truncation dropped.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TruncationBody {
    /// Tokens of context not sent.
    pub dropped_tokens: usize,
    /// Nodes whose text was cut.
    pub dropped_node_ids: Vec<String>,
}

/// The data of a stream's `delta` event.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DeltaEvent {
    /// More of the answer's text.
    pub text: String,
}

/// An error: the body of every 4xx/5xx answer and the data of a stream's `error` event.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorDetail {
    /// A stable machine-readable name (`unauthorized`, `body_too_large`,
    /// `too_many_nodes`, `timeout`, `model_error`, ...).
    pub kind: String,
    /// What to change.
    pub message: String,
}

/// `GET /healthz` and `GET /readyz`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HealthBody {
    /// `ok`, `draining` or `unavailable`.
    pub status: String,
    /// Why it is not ready, if it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn every_node_shape() {
        let nodes = parse_nodes(vec![
            json!("plain"),
            json!({"id": "a", "text": "x", "metadata": {"k": 1}, "score": 0.5}),
            json!({"id_": "b", "text": "y", "class_name": "TextNode", "embedding": null}),
            json!({"node": {"id_": "c", "text": "z"}, "score": 0.8}),
        ])
        .unwrap();
        assert_eq!(nodes[0].id, "1");
        assert_eq!(nodes[1].id, "a");
        assert_eq!(nodes[1].score, Some(0.5));
        assert_eq!(nodes[2].id, "b");
        assert_eq!(nodes[3].id, "c");
        assert_eq!(nodes[3].score, Some(0.8));
    }

    #[test]
    fn bad_node_is_named() {
        let e = parse_nodes(vec![json!("ok"), json!(3)]).unwrap_err();
        assert!(e.to_string().starts_with("nodes[1]: node 2: "), "{e}");
        let e = parse_nodes(vec![json!({"id": "x"})]).unwrap_err();
        assert!(e.to_string().contains("has no `text`"), "{e}");
    }

    /// The list of issue 17: the service named it `li-7, 2, x` before, as the library's
    /// one rule does now; duplicate and conflicting ids, accepted before, are refused.
    #[test]
    fn ids_follow_the_library_rule() {
        let nodes = parse_nodes(vec![
            json!({"node": {"id_": "li-7", "text": "a"}}),
            json!({"text": "b"}),
            json!({"id": "x", "text": "c"}),
        ])
        .unwrap();
        let ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["li-7", "2", "x"]);
        let e = parse_nodes(vec![json!("a"), json!({"id": "1", "text": "b"})]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("nodes[1]: node 2 has the id \"1\", as node 1 does"),
            "{e}"
        );
        let e = parse_nodes(vec![json!({"id": "a", "id_": "b", "text": "t"})]).unwrap_err();
        assert!(e.to_string().starts_with("nodes[0]: node 1: `id`"), "{e}");
    }
}
