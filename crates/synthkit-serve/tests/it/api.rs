//! Request/response and SSE round trips for every mode, error answers and events, the
//! health, metrics and OpenAPI routes.

use std::time::Duration;

use serde_json::{Value, json};
use synthkit::ResponseMode;
use synthkit_serve::ServiceLimits;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{DEADLINE, Service, assert_error_body, nodes, source_ids};

const QUERY: &str = "How often is the primary mirror cleaned?";

fn check_response(mode: ResponseMode, response: &Value) {
    let ids = source_ids(response);
    assert_eq!(ids, ["1", "mirror", "li", "ccd"], "{mode}");
    assert_eq!(response["source_nodes"][1]["score"], json!(0.9));
    assert_eq!(
        response["metadata"]["mirror"]["file"],
        json!("maintenance.md")
    );
    let calls = response["usage"]["calls"].as_u64().unwrap();
    if mode.calls_model() {
        assert!(calls >= 1, "{mode}: {response}");
        assert!(!response["text"].as_str().unwrap().is_empty(), "{mode}");
    } else {
        assert_eq!(calls, 0, "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_as_json_with_the_extractive_backend() {
    let service = Service::extractive(ServiceLimits::default()).await;
    for mode in ResponseMode::ALL {
        let (status, response) = service
            .post(&json!({"query": QUERY, "nodes": nodes(), "mode": mode.as_str()}))
            .await;
        assert_eq!(status, 200, "{mode}: {response}");
        check_response(mode, &response);
        if matches!(mode, ResponseMode::Compact | ResponseMode::Refine) {
            assert!(
                response["text"].as_str().unwrap().contains("six months"),
                "{mode}: {response}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_as_json_and_as_events_with_an_openai_server() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    for mode in ResponseMode::ALL {
        let body = json!({"query": QUERY, "nodes": nodes(), "mode": mode.as_str()});
        let (status, plain) = service.post(&body).await;
        assert_eq!(status, 200, "{mode}: {plain}");
        check_response(mode, &plain);

        let (status, content_type, events) = service.post_stream(&body).await;
        assert_eq!(status, 200, "{mode}");
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        let (last, rest) = events.split_last().unwrap();
        assert_eq!(last.0, "response", "{mode}: {events:?}");
        assert!(rest.iter().all(|(e, _)| e == "delta"), "{mode}: {events:?}");
        let streamed: String = rest
            .iter()
            .map(|(_, d)| d["text"].as_str().unwrap())
            .collect();
        assert_eq!(streamed, last.1["text"].as_str().unwrap(), "{mode}");
        assert_eq!(last.1["text"], plain["text"], "{mode}");
        check_response(mode, &last.1);
        if mode.calls_model() {
            assert!(rest.len() >= 2, "{mode}: the reply should arrive in deltas");
            assert!(last.1["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        }
    }
    assert!(fake.requests() > 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_model_is_a_502_or_an_error_event() {
    let fake = FakeOpenAi::start(FakeConfig {
        status: 400,
        ..FakeConfig::default()
    });
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let body = json!({"query": QUERY, "nodes": nodes(), "mode": "tree_summarize"});
    let (status, error) = service.post(&body).await;
    assert_eq!(status, 502, "{error}");
    assert_error_body(&error, "model_error", "HTTP 400");

    let (status, _, events) = service.post_stream(&body).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "error");
    assert_eq!(events[0].1["error"]["kind"], "model_error");
}

/// A request that says nothing of `evidence` or `on_unsupported` to a model is answered
/// evidence first (the prompt holds the nodes' bearing sentences, the response's
/// `evidence` says which) and abstains on an answer whose facts are in no node; the
/// request's own `evidence` and `on_unsupported` win. The extractive backend has no
/// evidence by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_answers_evidence_first_and_abstains_unless_the_request_says() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let last_prompt = || fake.bodies().last().unwrap()["messages"].to_string();
    let body = json!({"query": QUERY, "nodes": nodes()});
    let (status, response) = service.post(&body).await;
    assert_eq!(status, 200, "{response}");
    let prompt = last_prompt();
    assert!(prompt.contains("cleaned every six months"), "{prompt}");
    assert!(!prompt.contains("opens at dusk"), "{prompt}");
    assert!(!prompt.contains("cooled to minus"), "{prompt}");
    let kept: Vec<&str> = response["evidence"]["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["node_id"].as_str().unwrap())
        .collect();
    assert!(kept.contains(&"mirror"), "{response}");
    assert!(!kept.contains(&"ccd"), "{response}");

    let mut whole = body.clone();
    whole["evidence"] = json!(false);
    let (status, response) = service.post(&whole).await;
    assert_eq!(status, 200, "{response}");
    assert!(response.get("evidence").is_none(), "{response}");
    let prompt = last_prompt();
    assert!(prompt.contains("opens at dusk"), "{prompt}");
    assert!(prompt.contains("cooled to minus"), "{prompt}");

    // A reply whose year is in no node.
    fake.set(FakeConfig::replying("In 2005."));
    let (status, response) = service.post(&body).await;
    assert_eq!(status, 200, "{response}");
    assert_eq!(response["answerable"], false, "{response}");
    assert_ne!(response["text"], "In 2005.", "{response}");
    assert_eq!(response["grounding"]["withheld"], "In 2005.", "{response}");
    let mut warn = body.clone();
    warn["on_unsupported"] = json!("warn");
    let (status, response) = service.post(&warn).await;
    assert_eq!(status, 200, "{response}");
    assert_eq!(response["text"], "In 2005.", "{response}");

    let service = Service::extractive(ServiceLimits::default()).await;
    let (status, response) = service.post(&body).await;
    assert_eq!(status, 200, "{response}");
    assert!(response.get("evidence").is_none(), "{response}");
}

/// A request's `escalate` (a number of nodes read first) reaches the engine: a grounded
/// first answer is kept (the response's `escalation` says it did not widen, after one
/// call); `escalate` with `stream` is a 400 naming both. (Widening itself: the CLI's and
/// the core's escalation tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_escalates_and_refuses_to_escalate_a_stream() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Every six months."));
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let body = json!({"query": QUERY, "nodes": nodes(), "evidence": false, "escalate": 2});
    let (status, response) = service.post(&body).await;
    assert_eq!(status, 200, "{response}");
    let e = &response["escalation"];
    assert_eq!(e["escalated"], false, "{response}");
    assert_eq!(
        (e["first_nodes"].as_u64(), e["from"].as_str()),
        (Some(2), Some("compact"))
    );
    assert_eq!(fake.bodies().len(), 1);
    let (_, plain) = service
        .post(&json!({"query": QUERY, "nodes": nodes(), "evidence": false}))
        .await;
    assert!(plain.get("escalation").is_none(), "{plain}");
    let mut stream = body.clone();
    stream["stream"] = json!(true);
    let (status, error) = service.post(&stream).await;
    assert_eq!(status, 400, "{error}");
    assert_error_body(
        &error,
        "invalid_request",
        "leave out `stream` or `escalate`",
    );
}

/// Issue 42, item 12: a map_reduce whose records (the model's replies, here far over the
/// output reserve they were asked within) are too long to combine was a 500
/// `synthesis_failed`; it is the model's doing: 502 `model_error`, saying what to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_map_reduce_whose_records_cannot_be_combined_is_the_models_error() {
    let words: Vec<String> = (0..2000).map(|i| format!("fact{i}")).collect();
    let record = json!({"information": words.join(" "), "confidence": 4}).to_string();
    let fake = FakeOpenAi::start(FakeConfig::replying(&record));
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    // Three nodes too long to share a map prompt: three records, none of which fits a
    // reduce prompt beside another.
    let nodes: Vec<String> = (0..3)
        .map(|n| {
            (0..2200)
                .map(|i| format!("n{n}w{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let body = json!({"query": QUERY, "nodes": nodes, "mode": "map_reduce", "evidence": false});
    let (status, error) = service.post(&body).await;
    assert_eq!(status, 502, "{error}");
    assert_error_body(&error, "model_error", "records are too long to combine");
    assert_error_body(&error, "model_error", "num_output");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_400_with_a_message() {
    let service = Service::extractive(ServiceLimits::default()).await;
    let client = reqwest::Client::new();
    let r = client
        .post(service.synthesize_url())
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["kind"], "invalid_request");

    let cases = [
        (
            json!({"query": "q", "nodes": [], "mode": "summarise"}),
            "unknown response mode",
        ),
        (json!({"query": "q", "nodes": [3]}), "nodes[0]"),
        (
            json!({"query": "q", "citations": true, "output_schema": {"type": "object"}}),
            "citations",
        ),
        (json!({"query": "q", "concurrency": 0}), "concurrency"),
        (json!({"query": " \n", "nodes": ["a"]}), "`query` is empty"),
        (
            json!({"query": "", "mode": "tree_summarize"}),
            "`query` is empty",
        ),
        (json!({"query": "q", "colour": "red"}), "unknown field"),
        (
            json!({"query": "q", "templates": {"qa": "no variables"}}),
            "context_str",
        ),
    ];
    for (body, needle) in cases {
        let (status, e) = service.post(&body).await;
        assert_eq!(status, 400, "{body}: {e}");
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body}: {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_output_schema_and_concurrency_are_used() {
    let service = Service::extractive(ServiceLimits::default()).await;
    let schema = json!({"type": "object", "properties": {"answer": {"type": "string"}},
        "required": ["answer"]});
    let (status, r) = service
        .post(
            &json!({"query": QUERY, "nodes": nodes(), "output_schema": schema, "concurrency": 2,
            "templates": {"qa": "Context: {context_str}\nQuestion: {query_str}\nAnswer:"}}),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    assert!(r["structured"]["answer"].is_string(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_metrics_and_openapi() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    // No timed check after the first: a check timing out on a loaded machine cannot turn
    // /readyz to 503 behind the test's back. The test asks for each check itself.
    let limits = ServiceLimits::default().with_readiness_interval(Duration::from_secs(3600));
    let service = Service::openai(&fake, limits).await;
    let client = reqwest::Client::new();
    let get = |path: &str| client.get(format!("{}{path}", service.url)).send();
    assert_eq!(get("/healthz").await.unwrap().status(), 200);
    // A check may time out (3 s) on a loaded machine: ask again until the deadline.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !service.state.refresh_readiness().await.is_ready() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fake model never answered the readiness check"
        );
    }
    assert_eq!(get("/readyz").await.unwrap().status(), 200);

    let (status, _) = service
        .post(&json!({"query": QUERY, "nodes": nodes()}))
        .await;
    assert_eq!(status, 200);
    let metrics = get("/metrics").await.unwrap().text().await.unwrap();
    for needle in [
        "synthkit_http_requests_total{path=\"/v1/synthesize\",status=\"200\"} 1",
        "synthkit_model_calls_total 1",
        "synthkit_model_calls_in_flight 0",
        "synthkit_model_call_duration_seconds_count 1",
        "synthkit_http_request_duration_seconds_count 1",
        "synthkit_model_retries_total 0",
        "synthkit_context_corrections_total 0",
        "synthkit_cache_hits_total 0",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    assert!(!metrics.contains("synthkit_model_prompt_tokens_total 0\n"));

    let doc: Value = get("/openapi.json").await.unwrap().json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let schemas = &doc["components"]["schemas"];
    for name in [
        "SynthesizeRequest",
        "SynthesizeResponse",
        "ErrorBody",
        "DeltaEvent",
    ] {
        assert!(schemas[name].is_object(), "no {name} in {schemas}");
    }
    let request_ref = &doc["paths"]["/v1/synthesize"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"]["$ref"];
    assert_eq!(request_ref, "#/components/schemas/SynthesizeRequest");

    // The documented response has every field the library's Response serializes.
    let (_, response) = service
        .post(&json!({"query": QUERY, "nodes": nodes()}))
        .await;
    let documented = schemas["SynthesizeResponse"]["properties"]
        .as_object()
        .unwrap();
    for key in response.as_object().unwrap().keys() {
        assert!(
            documented.contains_key(key),
            "the response field `{key}` is not in the OpenAPI SynthesizeResponse: add it to api::SynthesizeResponse"
        );
    }

    // Once the backend is gone (its port refuses connections), the next check sees it.
    drop(fake);
    let state = service.state.refresh_readiness().await;
    assert!(!state.is_ready(), "{state:?}");
    let r = get("/readyz").await.unwrap();
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], "unavailable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quoted_citations_are_checked_in_json_and_in_the_response_event() {
    let fake = FakeOpenAi::start(FakeConfig {
        reply: "Every six months [2] \"cleaned every six months\", by 7 [2] \"made up\".".into(),
        ..FakeConfig::default()
    });
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let body = json!({"query": QUERY, "nodes": nodes(), "citations": "quotes"});
    let (status, r) = service.post(&body).await;
    assert_eq!(status, 200, "{r}");
    let quotes = &r["citations"]["quotes"];
    assert_eq!(quotes[0]["status"], "verified", "{r}");
    assert_eq!(quotes[0]["node_id"], "mirror");
    assert!(quotes[0]["start"].as_u64().unwrap() < quotes[0]["end"].as_u64().unwrap());
    assert_eq!(quotes[1]["status"], "not_found");
    assert_eq!(
        r["citations"]["unsupported_numbers"][0]["number"], "7",
        "{r}"
    );
    let sent = fake.bodies().last().unwrap().to_string();
    assert!(sent.contains("exact words from source n"), "{sent}");
    let (_, _, events) = service.post_stream(&body).await;
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "response");
    assert_eq!(last["citations"], r["citations"]);
    // A style that does not exist is refused.
    let (status, r) = service
        .post(&json!({"query": QUERY, "nodes": nodes(), "citations": "pages"}))
        .await;
    assert_eq!(status, 400, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn citations_are_mapped_to_node_ids_in_json_and_in_the_response_event() {
    let fake = FakeOpenAi::start(FakeConfig {
        reply: "The primary mirror is cleaned every six months [2].".into(),
        ..FakeConfig::default()
    });
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let body = json!({"query": QUERY, "nodes": nodes(), "citations": true});
    let (status, r) = service.post(&body).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        r["citations"]["markers"][0]["node_ids"],
        json!(["mirror"]),
        "{r}"
    );
    let (_, _, events) = service.post_stream(&body).await;
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "response");
    assert_eq!(last["citations"], r["citations"]);
}
