//! The wire types of `POST /v1/synthesize`: the request, the nodes it accepts, the
//! response and the error body. Their JSON schemas (schemars) are the OpenAPI document's
//! components.
//!
//! The request and the response are the library's ([`synthkit_frontend::request`]), shared with
//! the command line's `synthkit batch`; the stream's events, the error body and the
//! health answers are the service's own.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use synthkit::Node;
pub use synthkit_frontend::request::{
    CitationBody, CitationsBody, ErrorDetail, NodeInput, NodeObject, QuoteBody, RequestError,
    SourceNode, SynthesizeRequest, SynthesizeResponse, TemplatesInput, TruncationBody,
    UnsupportedNumberBody, UsageBody,
};

/// The nodes of a request as synthkit nodes, read by the library's one node reader
/// ([`synthkit::node::nodes_from_json`]: its shapes and its id rule); the error names the
/// bad node's index in `nodes` and its 1-based position (an `ApiError` through `From`).
pub fn parse_nodes(values: Vec<Value>) -> Result<Vec<Node>, RequestError> {
    synthkit::node::nodes_from_json(values).map_err(RequestError::Nodes)
}

/// The path of the synthesis route.
pub const SYNTHESIZE_PATH: &str = "/v1/synthesize";

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
    /// A request refused as `too_costly`: its plan, whose totals are over a cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanBody>,
}

/// A request's plan: the calls, prompt and completion tokens it would spend, counted
/// before any model call ([`synthkit::plan`]). The answer of a request with `"plan": true`, and part of a
/// `too_costly` error.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PlanBody {
    /// The response mode planned.
    pub mode: String,
    /// The calls by step and level, in the order they are made.
    pub steps: Vec<PlanStepBody>,
    /// The totals of the steps.
    pub total: PlanTotalBody,
    /// The service's per-request caps the totals are checked against.
    pub caps: PlanCapsBody,
    /// Whether the totals are within the caps (a synthesis request would run).
    pub within_caps: bool,
}

/// One row of a plan: the calls of one step at one tree level.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PlanStepBody {
    /// `qa`, `refine`, `summary` or `generate`.
    pub step: String,
    /// The tree level (0 but for `tree_summarize`).
    pub level: u32,
    /// Model calls (exact, or at most this many).
    pub calls: usize,
    /// Prompt tokens of these calls (exact, or at most this many).
    pub prompt_tokens: usize,
    /// The largest single prompt.
    pub max_prompt_tokens: usize,
    /// True for a step that depends on no reply (the first); false: the numbers are
    /// upper bounds (they assume the longest replies).
    pub exact: bool,
}

/// A plan's totals.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PlanTotalBody {
    /// Model calls (exact, or at most this many).
    pub calls: usize,
    /// Prompt tokens of all the calls (exact, or at most this many).
    pub prompt_tokens: usize,
    /// Completion tokens at most: every call answering with its whole `max_tokens` (the
    /// output reserve and the thinking reserve).
    pub max_completion_tokens: usize,
    /// Whether every step is exact; false: the totals are upper bounds.
    pub exact: bool,
    /// With the service's prices: the most the calls may cost, in USD (every prompt token
    /// read fresh, every reply as long as its cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

/// The service's per-request caps.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
pub struct PlanCapsBody {
    /// `--max-calls-per-request`.
    pub max_calls_per_request: usize,
    /// `--max-prompt-tokens-per-request`.
    pub max_prompt_tokens_per_request: usize,
    /// `--max-completion-tokens-per-request`.
    pub max_completion_tokens_per_request: usize,
    /// The request's cost cap in USD (its `max_cost`, else `--max-cost-per-request`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
}

impl PlanBody {
    /// The body of `plan`, a synthesis in `mode`, checked against `caps`.
    pub fn new(plan: &synthkit::Plan, mode: synthkit::ResponseMode, caps: PlanCapsBody) -> Self {
        Self {
            mode: mode.as_str().to_string(),
            steps: plan
                .rows
                .iter()
                .map(|r| PlanStepBody {
                    step: r.step.to_string(),
                    level: r.level,
                    calls: r.calls,
                    prompt_tokens: r.prompt_tokens,
                    max_prompt_tokens: r.max_prompt_tokens,
                    exact: r.exact,
                })
                .collect(),
            total: PlanTotalBody {
                calls: plan.calls,
                prompt_tokens: plan.prompt_tokens,
                max_completion_tokens: plan.max_completion_tokens,
                exact: plan.exact,
                max_cost_usd: None,
            },
            caps,
            within_caps: plan.calls <= caps.max_calls_per_request
                && plan.prompt_tokens <= caps.max_prompt_tokens_per_request
                && plan.max_completion_tokens <= caps.max_completion_tokens_per_request,
        }
    }

    /// This plan with its cost at `prices` checked against `cap` (a request's cost cap).
    pub fn with_cost(mut self, prices: Option<synthkit::cost::Prices>, cap: Option<f64>) -> Self {
        if let Some(p) = prices {
            let cost = p.bound(self.total.prompt_tokens, self.total.max_completion_tokens);
            self.total.max_cost_usd = Some((cost * 1e6).round() / 1e6);
            self.caps.max_cost = cap;
            self.within_caps &= cap.is_none_or(|cap| cost <= cap);
        }
        self
    }

    /// What is over the caps, in words (`at most 466 model calls (--max-calls-per-request
    /// 40)`); empty when within them.
    pub fn over(&self) -> Vec<String> {
        let at_most = if self.total.exact { "" } else { "at most " };
        let mut over = Vec::new();
        if self.total.calls > self.caps.max_calls_per_request {
            over.push(format!(
                "{at_most}{} model calls (--max-calls-per-request {})",
                self.total.calls, self.caps.max_calls_per_request
            ));
        }
        if self.total.prompt_tokens > self.caps.max_prompt_tokens_per_request {
            over.push(format!(
                "{at_most}{} prompt tokens (--max-prompt-tokens-per-request {})",
                self.total.prompt_tokens, self.caps.max_prompt_tokens_per_request
            ));
        }
        if self.total.max_completion_tokens > self.caps.max_completion_tokens_per_request {
            over.push(format!(
                "up to {} completion tokens (--max-completion-tokens-per-request {})",
                self.total.max_completion_tokens, self.caps.max_completion_tokens_per_request
            ));
        }
        if let (Some(cost), Some(cap)) = (self.total.max_cost_usd, self.caps.max_cost)
            && cost > cap
        {
            over.push(format!(
                "up to ${cost} at the service's prices (a cost cap of ${cap})"
            ));
        }
        over
    }
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
