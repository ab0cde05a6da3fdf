//! `"report": true` and `GET /v1/report/{id}`: the synthesis's HTML page, kept in the
//! [`crate::reports`] store (bounded in time, count and bytes) behind the same API keys.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use synthkit::steps::StepRecorder;
use synthkit::{Node, Synthesizer};
use synthkit_report::{BudgetRecord, RunRecord};

use crate::auth::KeyId;
use crate::error::{ApiError, json_response};
use crate::reports::REPORT_PATH_PREFIX;
use crate::state::AppState;

/// What a synthesis asked with `"report": true` needs for its page, kept beside the
/// synthesis (whose input it consumes).
pub(crate) struct ReportOf {
    pub(crate) query: String,
    pub(crate) nodes: Vec<Node>,
    pub(crate) synth: Synthesizer,
    /// The calls, recorded as they finished (kept when the synthesis fails).
    pub(crate) recorder: Arc<StepRecorder>,
    /// The key that asked for it: the only one that may read it.
    pub(crate) owner: Option<KeyId>,
}

impl ReportOf {
    /// The JSON answer: the response with `report_url`, and `steps` only when they were
    /// asked for too.
    pub(crate) fn answer(
        self,
        state: &AppState,
        mut response: synthkit::Response,
        return_steps: bool,
    ) -> Response {
        let run = self
            .record(Ok(&response))
            .with_grounded(response.citations.as_ref().map(|c| !c.markers.is_empty()));
        let url = self.keep(state, run);
        if !return_steps {
            response.steps = None;
        }
        let mut body = match serde_json::to_value(&response) {
            Ok(v) => v,
            Err(e) => {
                return ApiError::InvalidRequest(format!("the response could not be written: {e}"))
                    .into_response();
            }
        };
        if let Value::Object(obj) = &mut body {
            obj.insert("report_url".into(), url.map_or(Value::Null, Value::from));
        }
        json_response(StatusCode::OK, &body)
    }

    /// Keeps the page of the synthesis that failed with `error`: the calls made before
    /// it, the sources given. Its path, if it could be kept.
    pub(crate) fn keep_failed(self, state: &AppState, error: &str) -> Option<String> {
        let run = self.record(Err(error));
        self.keep(state, run)
    }

    /// The record of the synthesis that ended with `outcome`.
    fn record(&self, outcome: Result<&synthkit::Response, &str>) -> RunRecord {
        let mode = self.synth.mode();
        RunRecord::of_outcome(&self.query, mode, &self.nodes, outcome, &self.recorder)
    }

    /// Renders `run` with the service's model and the budget, and keeps the page.
    fn keep(&self, state: &AppState, run: RunRecord) -> Option<String> {
        let run = run
            .with_model("service", state.inner.model.info().name)
            .with_budget(BudgetRecord::of(self.synth.budget()));
        let page = synthkit_report::render(&run);
        let url = state
            .inner
            .reports
            .insert(page, self.owner)
            .map(|id| format!("{REPORT_PATH_PREFIX}{id}"));
        if url.is_none() {
            tracing::warn!(
                "the report of a synthesis could not be kept (no random id, or too large)"
            );
        }
        url
    }
}

/// `GET /v1/report/{id}`: the page, while it is kept, to the key that made it (any other
/// key gets the 404 of an unknown id, which says nothing of whether it exists).
pub(crate) async fn report(
    State(state): State<AppState>,
    Path(id): Path<String>,
    asker: Option<Extension<KeyId>>,
) -> Response {
    let asker = asker.map(|Extension(k)| k);
    match state.inner.reports.get(&id, asker.as_ref()) {
        Some(page) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                ),
                (
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static(
                        "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:",
                    ),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ),
            ],
            page.to_string(),
        )
            .into_response(),
        None => ApiError::ReportNotFound.into_response(),
    }
}
