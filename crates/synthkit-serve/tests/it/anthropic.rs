//! The service with an Anthropic Messages API backend: a real llama.cpp `llama-server`
//! (tiny random-weight model) answers `/v1/messages`, and `/readyz` asks its `/v1/models`
//! with Anthropic's headers.

use std::time::Duration;

use serde_json::json;
use synthkit::backend::anthropic::AnthropicConfig;
use synthkit_serve::{Backend, Metrics, ModelSetup, ServiceLimits};
use synthkit_testkit::llama;

use crate::common::{Service, nodes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthesizes_through_the_messages_api_and_is_ready() {
    let Some(server) = llama::server_with_ctx(1024) else {
        return;
    };
    let config = AnthropicConfig::new("tiny")
        .with_base_url(&server.base)
        .with_num_output(8)
        .with_timeout(Duration::from_secs(60));
    let backend = ModelSetup::anthropic(config.clone());
    let built = Backend::build(backend.clone(), Metrics::new())
        .await
        .unwrap();
    built
        .readiness
        .check(&reqwest::Client::new())
        .await
        .unwrap();
    let service = Service::start(backend, ServiceLimits::default(), None).await;
    let body = json!({"query": "When does the dome open?", "nodes": nodes(), "mode": "compact"});
    let (status, v) = service.post(&body).await;
    assert_eq!(status, 200, "{v}");
    assert!(v["text"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
    assert!(v["usage"]["prompt_tokens"].as_u64() > Some(0), "{v}");
}
