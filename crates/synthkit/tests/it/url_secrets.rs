//! A base URL's user-info (`http://user:PASSWORD@host/v1`) never shows: not in `Debug`
//! output of the config, the model, the server counter or the cache layer, not in
//! errors (reqwest's own messages name the URL), not in log lines at any level. Against
//! a loopback port where nothing listens, a loopback server that answers 500 to
//! everything, and one whose `/tokenize` works.

use synthkit_testkit::server;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{any, post};
use futures::StreamExt;
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel, ServerCounter};
use synthkit::layer::cache::{CachedModel, MemoryCache};
use synthkit::model::{LanguageModel, ModelRequest};
use synthkit::prompt::RenderedPrompt;

use server::Server;

const PASSWORD: &str = "PASSWORD-hunter2-0451";

/// `base` (`http://127.0.0.1:PORT/v1`) with user-info.
fn with_password(base: &str) -> String {
    base.replacen("http://", &format!("http://someone:{PASSWORD}@"), 1)
}

/// A loopback port where nothing listens.
fn closed_port() -> String {
    format!("http://127.0.0.1:{}/v1", server::free_port())
}

fn config(base: &str) -> OpenAiConfig {
    OpenAiConfig::new("m")
        .with_base_url(with_password(base))
        .with_timeout(Duration::from_secs(10))
        .with_connect_timeout(Duration::from_secs(5))
        .with_server_tokenizer(true)
        .with_model_discovery(true)
}

fn request() -> ModelRequest {
    synthkit::testing::qa_request(RenderedPrompt::Text("q".into()), 1, 8, None)
}

/// Everything a caller can see of `model` and its failures, with the logs at every level.
async fn everything_shown(base: &str) -> String {
    let mut shown = Vec::new();
    let config = config(base);
    shown.push(format!("{config:?} {config:#?}"));
    // Discovery (model, window, /tokenize) logs what fails.
    let model = OpenAiModel::connect(config.clone()).await.unwrap();
    shown.push(format!("{model:?}"));
    let e = model.complete(&request()).await.unwrap_err();
    shown.push(format!("{e} {e:?}"));
    match model.stream(&request()).await {
        Err(e) => shown.push(format!("{e} {e:?}")),
        Ok(mut s) => {
            while let Some(item) = s.next().await {
                shown.push(format!("{item:?}"));
            }
        }
    }
    let cached = CachedModel::new(
        model,
        Arc::new(MemoryCache::new()),
        format!("openai {}", config.endpoint()),
        "",
    );
    shown.push(format!("{cached:?}"));
    let e = cached.complete(&request()).await.unwrap_err();
    shown.push(format!("{e} {e:?}"));
    shown.join("\n")
}

async fn assert_never_shown(base: &str) {
    // A current-thread runtime: everything this test polls logs here.
    let (_guard, logs) = crate::common::logs::capture();
    let shown = everything_shown(base).await;
    let logs = logs.text();
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(!logs.contains(PASSWORD), "{logs}");
    // What is shown still says where: the host, with the user-info masked.
    assert!(shown.contains("http://***@127.0.0.1:"), "{shown}");
    assert!(!logs.is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn no_server_at_the_port() {
    assert_never_shown(&closed_port()).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_that_answers_500() {
    let app = Router::new().fallback(any(|| async {
        (StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }));
    let server = Server::start(app);
    assert_never_shown(&server.base).await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_server_counter_hides_it_too() {
    let app = Router::new().route(
        "/tokenize",
        post(|| async { axum::Json(serde_json::json!({"tokens": [1, 2]})) }),
    );
    let server = Server::start(app);
    let counter = ServerCounter::probe(&config(&server.base).with_chat(false))
        .await
        .unwrap();
    let shown = format!("{counter:?}");
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(shown.contains("http://***@127.0.0.1:"), "{shown}");
}
