//! `"return_steps"` and `"report": true`: the steps in the JSON, the report's address and
//! `GET /v1/report/{id}` behind the same keys, hostile text escaped, a failed synthesis's
//! page.

use axum::response::IntoResponse;
use serde_json::{Value, json};
use synthkit_serve::ServiceLimits;
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, error_reply};
use synthkit_testkit::record::numbered;

use crate::common::{Service, assert_error_body, nodes, openai_backend};

const KEY: &str = "report-key";

async fn post(service: &Service, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(service.synthesize_url())
        .bearer_auth(KEY)
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// A question over [`nodes`] that asks for its report.
fn report_body() -> Value {
    json!({"query": "How often is the mirror cleaned?", "nodes": nodes(), "report": true})
}

/// A synthesis with `"report": true` on `service` (with [`KEY`]): its report's address.
async fn reported(service: &Service) -> String {
    let (status, r) = post(service, &report_body()).await;
    assert_eq!(status, 200, "{r}");
    r["report_url"].as_str().unwrap().to_string()
}

/// The address of a report no synthesis made.
const UNKNOWN_REPORT: &str = "/v1/report/0123456789abcdef0123456789abcdef";

async fn get(service: &Service, path: &str, key: Option<&str>) -> (u16, String, String) {
    let mut request = reqwest::Client::new().get(format!("{}{path}", service.url));
    if let Some(k) = key {
        request = request.bearer_auth(k);
    }
    let r = request.send().await.unwrap();
    let content_type = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (r.status().as_u16(), content_type, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_and_reports_on_request() {
    let service = Service::extractive_with_keys(KEY).await;
    let mut hostile = nodes();
    hostile.as_array_mut().unwrap().push(json!({"id": "evil", "text": "The mirror </script><img src=x onerror=alert(1)> is cleaned."}));
    let body = json!({"query": "How often is the mirror cleaned?", "nodes": hostile, "mode": "refine", "citations": true});

    let (status, plain) = post(&service, &body).await;
    assert_eq!(status, 200, "{plain}");
    assert!(plain.get("steps").is_none() && plain.get("report_url").is_none());

    let mut with_steps = body.clone();
    with_steps["return_steps"] = json!(true);
    let (status, r) = post(&service, &with_steps).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        r["steps"].as_array().unwrap().len() as u64,
        r["usage"]["calls"].as_u64().unwrap()
    );

    let mut with_report = body.clone();
    with_report["report"] = json!(true);
    let (status, r) = post(&service, &with_report).await;
    assert_eq!(status, 200, "{r}");
    assert!(r.get("steps").is_none(), "steps only when asked: {r}");
    let url = r["report_url"].as_str().unwrap();
    assert!(url.starts_with("/v1/report/"), "{url}");
    let (status, content_type, page) = get(&service, url, Some(KEY)).await;
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(page.contains("id=\"call-1\""));
    assert!(!page.contains("<img") && page.contains("&lt;img src=x"));

    let (status, _, body) = get(&service, url, None).await;
    assert_eq!(status, 401, "the report sits behind the key: {body}");
    let (status, _, body) = get(&service, UNKNOWN_REPORT, Some(KEY)).await;
    assert_eq!(status, 404);
    assert_error_body(
        &serde_json::from_str(&body).unwrap(),
        "report_not_found",
        "15 minutes",
    );

    let mut streamed = with_report.clone();
    streamed["stream"] = json!(true);
    let (status, e) = post(&service, &streamed).await;
    assert_eq!(status, 400);
    assert_error_body(&e, "invalid_request", "leave `stream` out");
}

/// A synthesis asked with `"report": true` that fails still leaves its page: the error
/// names it in `report_url`, and the page shows the failure and the call made before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_synthesis_keeps_its_report() {
    let model = Server::start(numbered("/v1/chat/completions", |n| {
        if n == 0 {
            let usage = json!({"prompt_tokens": 120, "completion_tokens": 5});
            return axum::Json(chat_reply(
                "fake-model",
                "Every six months.",
                "stop",
                &usage,
            ))
            .into_response();
        }
        error_reply(400, None, "this request is refused")
    }));
    let service = Service::start(
        openai_backend(&model.base),
        ServiceLimits::default(),
        Some(KEY),
    )
    .await;
    let body = json!({"query": "How often is the mirror cleaned?", "nodes": nodes(), "mode": "refine", "report": true, "evidence": false});
    let (status, e) = post(&service, &body).await;
    assert!(status >= 400, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("refused"),
        "{e}"
    );
    let url = e["report_url"]
        .as_str()
        .expect("the failure names its page");
    let (status, _, page) = get(&service, url, Some(KEY)).await;
    assert_eq!(status, 200);
    assert!(page.contains("The run failed") && page.contains("this request is refused"));
    assert!(page.contains("id=\"call-1\"") && !page.contains("id=\"call-2\""));

    // Without `report`, a failure names no page.
    let mut plain = body.clone();
    plain["report"] = json!(false);
    let (_, e) = post(&service, &plain).await;
    assert!(e.get("report_url").is_none(), "{e}");
}

/// `GET /v1/report/{id}` is counted under its own route, found or not (not as `other`),
/// and an unknown path's 404 names that route among the routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_requests_are_counted_under_their_route() {
    let service = Service::extractive_with_keys(KEY).await;
    let url = &reported(&service).await;
    let (status, _, _) = get(&service, url, Some(KEY)).await;
    assert_eq!(status, 200);
    let (status, _, _) = get(&service, UNKNOWN_REPORT, Some(KEY)).await;
    assert_eq!(status, 404);
    let m = service.state.metrics();
    assert_eq!(m.requests("/v1/report/{id}", 200), 1, "{}", m.render());
    assert_eq!(m.requests("/v1/report/{id}", 404), 1, "{}", m.render());
    assert_eq!(m.requests("other", 200), 0, "{}", m.render());
    assert!(
        m.render()
            .contains("synthkit_http_requests_total{path=\"/v1/report/{id}\",status=\"200\"} 1"),
        "{}",
        m.render()
    );

    let (status, _, body) = get(&service, "/no/such/route", Some(KEY)).await;
    assert_eq!(status, 404);
    assert_error_body(
        &serde_json::from_str(&body).unwrap(),
        "not_found",
        "/v1/report/{id}",
    );
}

/// Issue 42, item 12: any valid key read any report. A report belongs to the key that
/// asked for it: another key gets the 404 of an unknown id (not a 403, which would say it
/// exists); without keys, anyone with the id reads it, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_is_read_only_with_the_key_that_made_it() {
    let other = "another-key";
    let service = Service::extractive_with_keys(&format!("{KEY}\n{other}\n")).await;
    let url = &reported(&service).await;
    let (status, _, _) = get(&service, url, Some(KEY)).await;
    assert_eq!(status, 200, "the key that made it reads it");
    let (status, _, theirs) = get(&service, url, Some(other)).await;
    assert_eq!(status, 404, "another key: {theirs}");
    let (_, _, unknown) = get(&service, UNKNOWN_REPORT, Some(other)).await;
    assert_eq!(theirs, unknown, "the same answer as an unknown id");
    assert_error_body(
        &serde_json::from_str(&theirs).unwrap(),
        "report_not_found",
        "only to the API key that asked for it",
    );

    let open = Service::extractive(ServiceLimits::default()).await;
    let r = reqwest::Client::new()
        .post(open.synthesize_url())
        .json(&report_body())
        .send()
        .await
        .unwrap();
    let r: Value = r.json().await.unwrap();
    let url = r["report_url"].as_str().unwrap();
    let (status, _, _) = get(&open, url, None).await;
    assert_eq!(status, 200, "without keys, as before");
}
