//! The wire types of `POST /v1/synthesize`: the request, the nodes it accepts, the
//! response and the error body. Their JSON schemas (schemars) are the OpenAPI document's
//! components.
//!
//! The request and the response are the library's ([`synthkit::request`]), shared with
//! the command line's `synthkit batch`; the stream's events, the error body and the
//! health answers are the service's own.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use synthkit::Node;
pub use synthkit::request::{
    CitationBody, CitationsBody, ErrorDetail, NodeInput, NodeObject, RequestError, SourceNode,
    SynthesizeRequest, SynthesizeResponse, TemplatesInput, TruncationBody, UsageBody,
};

use crate::error::ApiError;

/// The nodes of a request as synthkit nodes, read by the library's one node reader
/// ([`synthkit::node::nodes_from_json`]: its shapes and its id rule); the error names the
/// bad node's index in `nodes` and its 1-based position.
pub fn parse_nodes(values: Vec<Value>) -> Result<Vec<Node>, ApiError> {
    synthkit::node::nodes_from_json(values).map_err(|e| ApiError::from(RequestError::Nodes(e)))
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
    /// A failed synthesis asked with `"report": true`: the path of its HTML page (the
    /// calls made before the failure), behind the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_url: Option<String>,
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
