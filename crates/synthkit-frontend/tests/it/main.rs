//! One setup for every front end: what a choice builds, with its calls in flight, its
//! sharing and its readiness probe.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use synthkit::backend::connect::{ConnectError, Counting};
use synthkit::backend::openai::OpenAiConfig;
use synthkit::backend::probe::Readiness;
use synthkit::layer::cache::MemoryCache;
use synthkit::layer::sharing::Sharing;
use synthkit::layer::stack::ModelStack;
use synthkit::model::{ModelInfo, ModelRequest};
use synthkit::prompt::RenderedPrompt;
use synthkit::synth::DEFAULT_CONCURRENCY;
use synthkit::testing::ScriptedModel;
use synthkit_frontend::{ModelSetup, StackOptions};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

fn fake_config(base: &str) -> OpenAiConfig {
    OpenAiConfig::new("fake-model")
        .with_base_url(base)
        .with_context_window(4096)
        .with_timeout(Duration::from_secs(10))
}

#[tokio::test]
async fn the_extractive_choice_builds_with_the_one_default() {
    let built = ModelSetup::extractive()
        .with_window(Some(2048), Some(128))
        .with_name(Some("offline".into()))
        .build()
        .await
        .unwrap();
    assert!(built.is_extractive());
    assert_eq!(built.backend, "extractive");
    // One default for calls in flight, the stack's and a synthesis's alike.
    assert_eq!(built.calls_in_flight, DEFAULT_CONCURRENCY);
    assert_eq!(ModelStack::DEFAULT_MAX_IN_FLIGHT, DEFAULT_CONCURRENCY);
    assert_eq!(built.stack.adaptive().ceiling, DEFAULT_CONCURRENCY);
    assert!(matches!(built.readiness, Readiness::Always));
    assert!(built.server.is_none());
    let info = built.model().info();
    assert_eq!((info.name.as_str(), info.context_window), ("offline", 2048));
    assert_eq!(built.model_name(), "offline");
}

#[tokio::test]
async fn syntheses_multiply_the_stack_cap_but_not_a_synthesis_s_calls() {
    let built = ModelSetup::extractive()
        .with_stack(
            StackOptions::default()
                .with_calls_in_flight(Some(3))
                .with_syntheses(4),
        )
        .build()
        .await
        .unwrap();
    assert_eq!(built.calls_in_flight, 3);
    assert_eq!(built.stack.adaptive().ceiling, 12);
}

#[tokio::test]
async fn a_server_is_connected_probed_and_shared() {
    let fake = FakeOpenAi::start(FakeConfig::replying("ok"));
    let cache = Arc::new(MemoryCache::new());
    let built = ModelSetup::openai(fake_config(&fake.base).with_api_key("sk-secret-1"))
        .with_counting(Counting::AsConfigured)
        .with_stack(
            StackOptions::default()
                .with_sharing(Sharing::default().with_rates(600, 0).with_cache(cache)),
        )
        .build()
        .await
        .unwrap();
    assert_eq!(built.backend, "openai");
    assert!(!built.is_extractive());
    assert_eq!(built.sharing.budget_kind(), "local");
    assert_eq!(built.sharing.cache_kind(), "custom");
    assert!(built.identity.backend.contains("/chat/completions"));

    // A call goes through the stack; a second identical one is the cache's.
    let request = ModelRequest::new(RenderedPrompt::Text("Say ok.".into())).with_max_tokens(8);
    let model = built.model();
    assert_eq!(model.complete(&request).await.unwrap().text, "ok");
    assert_eq!(model.complete(&request).await.unwrap().text, "ok");
    assert_eq!(fake.requests(), 1);
    assert_eq!(built.stack.cache_stats().unwrap().hits, 1);
    assert_eq!(built.model_name(), "fake-model");
    // The key went as the API carries it.
    assert_eq!(
        fake.seen()[0].authorization.as_deref(),
        Some("Bearer sk-secret-1")
    );

    // The probe asks the models listing with the same headers, and never shows the key.
    let client = reqwest::Client::new();
    let before = fake.models_calls();
    built.readiness.check(&client).await.unwrap();
    assert_eq!(fake.models_calls(), before + 1);
    assert!(!format!("{:?}", built.readiness).contains("sk-secret-1"));
    assert!(!format!("{built:?}").contains("sk-secret-1"));
    drop(fake);
    let down = built.readiness.check(&client).await.unwrap_err();
    assert!(down.contains("does not answer"), "{down}");
    assert!(!down.contains("sk-secret-1"), "{down}");
}

#[tokio::test]
async fn the_api_s_own_server_without_a_key_is_refused_unless_no_call_will_be_made() {
    let config = OpenAiConfig::new("gpt-4o-mini");
    let err = ModelSetup::openai(config.clone())
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::NoKey { .. }), "{err}");
    // A dry run may go without (discovery is not asked of the API's own server).
    let built = ModelSetup::openai(config.with_model_discovery(false))
        .with_counting(Counting::AsConfigured)
        .require_key(false)
        .build()
        .await
        .unwrap();
    assert_eq!(built.backend, "openai");
}

#[tokio::test]
async fn a_model_of_your_own_gets_the_same_stack() {
    let model = ScriptedModel::constant(ModelInfo::new("mine"), "hello");
    let built = ModelSetup::custom("python", Arc::new(model), Default::default())
        .with_stack(StackOptions::default().with_calls_in_flight(Some(0)))
        .build()
        .await
        .unwrap();
    assert_eq!(built.backend, "python");
    assert!(matches!(built.readiness, Readiness::Always));
    // 0: no cap of ours (the stack's unlimited ceiling).
    assert_eq!(
        built.stack.adaptive().ceiling,
        synthkit::layer::stack::UNLIMITED_IN_FLIGHT
    );
    let reply = built
        .model()
        .complete(&ModelRequest::new(RenderedPrompt::Text("hi".into())).with_max_tokens(4))
        .await
        .unwrap();
    assert_eq!(reply.text, "hello");
}
