//! Discovery (models, window, slots), the server tokenizer, and secrets never shown.

use super::errors::error_for;
use super::*;

// ---------------------------------------------------------------- discovery

#[tokio::test]
async fn discovery_reads_llama_cpp_props() {
    let app = Router::new()
        .route("/props", get(|| async { axum::Json(json!({"default_generation_settings": {"n_ctx": 1024, "params": {}}, "total_slots": 4, "n_ctx": 4096})) }));
    let server = Server::start(app);
    let mut model = server.model();
    assert_eq!(
        model.info().context_window,
        synthkit::model::ModelInfo::DEFAULT_CONTEXT_WINDOW
    );
    assert_eq!(model.discover().await, Some(1024));
    assert_eq!(model.info().context_window, 1024);
    assert_eq!(model.discovered_context_window(), Some(1024));
    // An explicit window wins over discovery, and `connect` does not ask then.
    let model = OpenAiModel::connect(server.config().with_context_window(777))
        .await
        .unwrap();
    assert_eq!(model.info().context_window, 777);
    assert_eq!(model.discovered_context_window(), None);
    // `connect` discovers.
    let model = OpenAiModel::connect(server.config()).await.unwrap();
    assert_eq!(model.info().context_window, 1024);
}

#[tokio::test]
async fn discovery_reads_vllm_models_when_there_are_no_props() {
    let seen = Seen::default();
    let models = seen.answering(axum::routing::MethodFilter::GET, "/v1/models", |_| {
        axum::Json(json!({"object":"list","data":[
            {"id":"adapter","object":"model","max_model_len":1000},
            {"id":"test-model","object":"model","owned_by":"vllm","root":"test-model","max_model_len":8192}]}))
        .into_response()
    });
    let app = Router::new().route("/v1/models", models);
    let server = Server::start(app);
    let mut model = server.model();
    assert_eq!(model.discover().await, Some(8192));
    assert_eq!(model.info().context_window, 8192);
    let (_, headers, _) = seen.last();
    assert_eq!(
        headers.get(header::AUTHORIZATION).unwrap(),
        &format!("Bearer {KEY}")
    );
}

/// `GET /v1/models` as llama.cpp answers it: the served model's id (its file name or
/// alias), whatever the client configured.
fn served_models_app(seen: &Seen) -> Router {
    Router::new()
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(json!({"object": "list", "data": [
                    {"id": "qwen2.5-1.5b-instruct-q4_k_m.gguf", "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx": 8192}},
                    {"id": "second", "object": "model"}]}))
            }),
        )
        .route("/v1/chat/completions", fixed(seen, 200, &[JSON], CHAT_OK))
}

#[tokio::test]
async fn model_discovery_uses_the_first_listed_id() {
    let seen = Seen::default();
    let server = Server::start(served_models_app(&seen));
    // Explicitly.
    let mut model = server.model();
    assert_eq!(
        model.discover_model().await.as_deref(),
        Some("qwen2.5-1.5b-instruct-q4_k_m.gguf")
    );
    assert_eq!(model.info().name, "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    // Through `connect`: the listing also gives the window, and requests name the model.
    let model = OpenAiModel::connect(server.config().with_model_discovery(true))
        .await
        .unwrap();
    assert_eq!(model.info().name, "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    assert_eq!(model.config().model, "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    assert_eq!(model.info().context_window, 8192);
    assert_eq!(model.served_model(), None);
    model.complete(&chat_request()).await.unwrap();
    assert_eq!(seen.last().2["model"], "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    // The reply names the model that answered (CHAT_OK says `tiny.gguf`).
    assert_eq!(model.served_model().as_deref(), Some("tiny.gguf"));
    // Without discovery the configured name stays.
    let model = OpenAiModel::connect(server.config()).await.unwrap();
    assert_eq!(model.info().name, "test-model");
    // A server without a listing keeps the configured name.
    let mut model = Server::start(Router::new()).model();
    assert_eq!(model.discover_model().await, None);
    assert_eq!(model.info().name, "test-model");
}

#[tokio::test]
async fn top_p_seed_and_extra_body_are_sent_in_chat_and_completion_requests() {
    let seen = Seen::default();
    let completion = r#"{"choices":[{"text":"x","index":0,"finish_reason":"stop"}]}"#;
    let streamed = sse(&[
        &chat_chunk("x"),
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let app = Router::new()
        .route("/v1/chat/completions", fixed(&seen, 200, &[JSON], CHAT_OK))
        .route("/v1/completions", fixed(&seen, 200, &[JSON], completion))
        .route("/v2/chat/completions", fixed(&seen, 200, &[SSE], streamed));
    let server = Server::start(app);
    let mut extra = serde_json::Map::new();
    extra.insert("min_p".into(), json!(0.05));
    extra.insert("cache_prompt".into(), json!(true));
    let config = server
        .config()
        .with_temperature(0.7)
        .with_top_p(0.9)
        .with_seed(1234)
        .with_extra_body_fields(extra);
    let check = |body: &Value| {
        assert!(
            (body["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6,
            "{body}"
        );
        assert!(
            (body["top_p"].as_f64().unwrap() - 0.9).abs() < 1e-6,
            "{body}"
        );
        assert_eq!(body["seed"], 1234, "{body}");
        assert_eq!(body["min_p"], 0.05, "{body}");
        assert_eq!(body["cache_prompt"], true, "{body}");
    };
    let chat = OpenAiModel::new(config.clone()).unwrap();
    chat.complete(&chat_request()).await.unwrap();
    check(&seen.last().2);
    let completions = OpenAiModel::new(config.clone().with_chat(false)).unwrap();
    completions.complete(&chat_request()).await.unwrap();
    let (path, _, body) = seen.last();
    assert_eq!(path, "/v1/completions");
    check(&body);
    let base = config.base().replace("/v1", "/v2");
    let streaming = OpenAiModel::new(config.with_base_url(base)).unwrap();
    collect(streaming.stream(&chat_request()).await.unwrap()).await;
    let (path, _, body) = seen.last();
    assert_eq!(
        (path.as_str(), &body["stream"]),
        ("/v2/chat/completions", &json!(true))
    );
    check(&body);
    // Unset, they are left out.
    server.model().complete(&chat_request()).await.unwrap();
    let (_, _, body) = seen.last();
    assert!(
        body.get("top_p").is_none() && body.get("seed").is_none(),
        "{body}"
    );
}

#[tokio::test]
async fn discovery_without_answers_keeps_the_default() {
    let server = Server::start(Router::new());
    let mut model = server.model();
    assert_eq!(model.discover().await, None);
    assert_eq!(
        model.info().context_window,
        synthkit::model::ModelInfo::DEFAULT_CONTEXT_WINDOW
    );
}

// ---------------------------------------------------------------- server tokenizer

/// A fake llama.cpp `/tokenize`: one token per whitespace-separated word.
fn llama_tokenize_app(calls: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route(
            "/tokenize",
            crate::common::tokenize::llama_tokenize(calls, usize::MAX),
        )
        .route(
            // A ChatML template: `<|im_start|>ROLE CONTENT<|im_end|>` per message, then the
            // reply's opening.
            "/apply-template",
            post(|body: axum::Json<Value>| async move {
                let mut prompt = String::new();
                for m in body["messages"].as_array().unwrap() {
                    prompt.push_str(&format!(
                        "<|im_start|>{} {} <|im_end|> ",
                        m["role"].as_str().unwrap(),
                        m["content"].as_str().unwrap()
                    ));
                }
                prompt.push_str("<|im_start|>assistant");
                axum::Json(json!({ "prompt": prompt }))
            }),
        )
        .route(
            "/detokenize",
            post(|body: axum::Json<Value>| async move {
                let words: Vec<String> = body["tokens"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| "x".repeat(t.as_u64().unwrap() as usize))
                    .collect();
                axum::Json(json!({"content": words.join(" ")}))
            }),
        )
}

/// A server that answers every `/tokenize` request with two tokens, except its second
/// request, whose connection it closes unanswered (as a server closes a kept-alive
/// connection just as the client reuses it).
async fn closes_the_second_request() -> (String, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                // One request per connection (the reply says `Connection: close`).
                let Ok(n) = socket.read(&mut buf).await else {
                    return;
                };
                if n == 0 || seen.fetch_add(1, Ordering::SeqCst) == 1 {
                    return;
                }
                let body = r#"{"tokens": [1, 2]}"#;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    (base, requests)
}

#[tokio::test]
async fn a_count_whose_connection_is_closed_unanswered_is_tried_once_more() {
    let (base, requests) = closes_the_second_request().await;
    let config = OpenAiConfig::new("m")
        .with_base_url(&base)
        .with_chat(false)
        .with_server_tokenizer(true)
        .with_timeout(std::time::Duration::from_secs(10));
    // The probe is the first request; the first count's request is closed unanswered.
    let counter = ServerCounter::probe(&config).await.expect("probe");
    assert_eq!(counter.count("one two").await.unwrap(), 2);
    assert_eq!(requests.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn llama_cpp_counter_counts_batches_caches_and_fails_loudly() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut server = Server::start(llama_tokenize_app(calls.clone()));
    let counter = ServerCounter::probe(&server.config()).await.expect("probe");
    assert_eq!(counter.dialect(), TokenizeDialect::LlamaCpp);
    assert_eq!(counter.name(), "llama.cpp:/tokenize");
    let text = "one two three four five";
    assert_eq!(counter.count(text).await.unwrap(), 5);
    let before = calls.load(Ordering::SeqCst);
    assert_eq!(counter.count(text).await.unwrap(), 5);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "the second count is cached"
    );
    assert_eq!(counter.cached(), 1);
    assert_eq!(counter.count("").await.unwrap(), 0);
    assert_eq!(counter.encode("ab cde").await.unwrap(), vec![2, 3]);
    assert_eq!(counter.decode(&[2, 3]).await.unwrap(), "xx xxx");
    // A batch: distinct texts once each, in order, repeated ones from the cache.
    let before = calls.load(Ordering::SeqCst);
    let counts = counter
        .count_texts(&["w w", "w w w", "w w", text, ""])
        .await
        .unwrap();
    assert_eq!(counts, vec![2, 3, 2, 5, 0]);
    assert_eq!(calls.load(Ordering::SeqCst), before + 2);
    // Whole prompts, as the packing path asks: a chat prompt through the chat template
    // (`<|im_start|>user a b <|im_end|> <|im_start|>assistant` is 5 words).
    let prompts = [
        RenderedPrompt::Text("a b c".into()),
        RenderedPrompt::Chat(vec![ChatMessage::new(Role::User, "a b")]),
    ];
    let counts = counter.count_prompts(&prompts).await.unwrap();
    assert_eq!(counts, vec![3, 5]);

    // The model hands it out as its exact counter.
    let mut model = server.model();
    assert!(model.counter().is_none());
    assert!(model.use_server_counter().await);
    assert_eq!(model.counter().unwrap().name(), "llama.cpp:/tokenize");
    let model = OpenAiModel::connect(server.config().with_server_tokenizer(true))
        .await
        .unwrap();
    assert!(model.counter().is_some());

    // Server gone: a count is an error (never a silent switch to another tokenizer);
    // cached counts still hold.
    server.stop();
    let uncached = "a completely new text to count";
    assert!(counter.count(uncached).await.is_err());
    assert_eq!(counter.count(text).await.unwrap(), 5);
}

#[tokio::test]
async fn vllm_tokenize_dialect() {
    let seen = Seen::default();
    let tokenize = seen.answering(axum::routing::MethodFilter::POST, "/tokenize", |b| {
        let v: Value = serde_json::from_slice(b).unwrap();
        match v.get("prompt").and_then(Value::as_str) {
            Some(p) => {
                let tokens: Vec<u32> = p.split_whitespace().map(|_| 7).collect();
                axum::Json(json!({"count": tokens.len(), "max_model_len": 8192, "tokens": tokens, "token_strs": null})).into_response()
            }
            None => (StatusCode::BAD_REQUEST, axum::Json(json!({"object":"error","message":"Field required: prompt","type":"BadRequestError","code":400}))).into_response(),
        }
    });
    let app = Router::new().route("/tokenize", tokenize);
    let server = Server::start(app);
    let counter = ServerCounter::probe(&server.config()).await.expect("probe");
    assert_eq!(counter.dialect(), TokenizeDialect::Vllm);
    assert_eq!(counter.count("a b c d").await.unwrap(), 4);
    let (_, headers, body) = seen.last();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["prompt"], "a b c d");
    assert_eq!(
        headers.get(header::AUTHORIZATION).unwrap(),
        &format!("Bearer {KEY}")
    );
}

#[tokio::test]
async fn no_tokenize_endpoint_means_no_server_tokenizer() {
    let server = Server::start(Router::new());
    assert!(ServerCounter::probe(&server.config()).await.is_none());
    let mut model = server.model();
    assert!(!model.use_server_counter().await);
    let model = OpenAiModel::connect(server.config().with_server_tokenizer(true))
        .await
        .unwrap();
    assert!(model.counter().is_none());
}

// ---------------------------------------------------------------- secrets

#[tokio::test]
async fn the_api_key_never_shows() {
    let config = OpenAiConfig::new("m").with_api_key(KEY);
    let model = OpenAiModel::new(config.clone()).unwrap();
    for text in [
        format!("{config:?}"),
        format!("{config:#?}"),
        format!("{model:?}"),
    ] {
        assert!(!text.contains(KEY), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
    }
    assert!(format!("{config:?}").contains("[REDACTED]"));

    // Servers that echo the key back in their error bodies.
    let echo: &'static str =
        Box::leak(format!("{{\"error\":{{\"message\":\"bad key {KEY}\"}}}}").into_boxed_str());
    let ctx: &'static str = Box::leak(
        format!(r#"{{"error":{{"code":400,"message":"{KEY}: This model's maximum context length is 10 tokens","type":"invalid_request_error"}}}}"#)
            .into_boxed_str(),
    );
    let malformed: &'static str = Box::leak(format!("<html>{KEY}").into_boxed_str());
    let cases: Vec<(u16, &'static str)> = vec![
        (401, echo),
        (429, echo),
        (500, echo),
        (404, echo),
        (400, ctx),
        (200, malformed),
        (200, echo),
    ];
    for (status, body) in cases {
        let e = error_for(status, &[], body).await;
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains(KEY), "{status}: {shown}");
        assert!(shown.contains("[REDACTED]"), "{status}: {shown}");
    }
    // In a stream too.
    let seen = Seen::default();
    let body = sse(&[&format!(r#"{{"error":{{"code":500,"message":"{KEY}"}}}}"#)]);
    let server =
        Server::start(Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[SSE], body)));
    let events = collect(server.model().stream(&chat_request()).await.unwrap()).await;
    let shown = format!("{events:?}");
    assert!(
        !shown.contains(KEY) && shown.contains("[REDACTED]"),
        "{shown}"
    );
    // The key still went out where it belongs.
    assert_eq!(
        seen.last().1.get(header::AUTHORIZATION).unwrap(),
        &format!("Bearer {KEY}")
    );
    assert!(seen.len() >= 1);
}
