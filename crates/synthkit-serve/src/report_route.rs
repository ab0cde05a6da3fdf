//! `"report": true` and `GET /v1/report/{id}`: the synthesis's HTML page, kept in the
//! [`crate::reports`] store (bounded in time, count and bytes) behind the same API keys.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use synthkit::Synthesizer;
use synthkit_report::{BudgetRecord, RunRecord};

use crate::error::{ApiError, json_response};
use crate::reports::REPORT_PATH_PREFIX;
use crate::state::AppState;

/// The JSON answer of a synthesis asked with `"report": true`: the response with
/// `report_url`, and `steps` only when they were asked for too.
pub(crate) fn answer_with_report(
    state: &AppState,
    synth: &Synthesizer,
    query: &str,
    mut response: synthkit::Response,
    return_steps: bool,
) -> Response {
    let model = state.inner.model.info().name;
    let run = RunRecord::from_response(query, synth.mode(), &response)
        .with_model("service", model)
        .with_budget(BudgetRecord::of(synth.budget()))
        .with_grounded(response.citations.as_ref().map(|c| !c.markers.is_empty()));
    let page = synthkit_report::render(&run);
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
    let url = state
        .inner
        .reports
        .insert(page)
        .map(|id| format!("{REPORT_PATH_PREFIX}{id}"));
    if url.is_none() {
        tracing::warn!("the report of a synthesis could not be kept (no random id, or too large)");
    }
    if let Value::Object(obj) = &mut body {
        obj.insert("report_url".into(), url.map_or(Value::Null, Value::from));
    }
    json_response(StatusCode::OK, &body)
}

/// `GET /v1/report/{id}`: the page, while it is kept.
pub(crate) async fn report(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.inner.reports.get(&id) {
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
