//! Error classes of the OpenAI backend against loopback servers, and structured calls.

use super::*;

// ---------------------------------------------------------------- error classes

const CONTEXT_ERROR: &str = r#"{"error":{"code":400,"message":"request (3027 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3027,"n_ctx":2048}}"#;

pub(super) async fn error_for(
    status: u16,
    headers: &[(&'static str, &'static str)],
    body: &'static str,
) -> ModelError {
    let seen = Seen::default();
    let server = Server::start(
        Router::new().route("/v1/chat/completions", fixed(&seen, status, headers, body)),
    );
    server.model().complete(&chat_request()).await.unwrap_err()
}

#[tokio::test]
async fn status_401_and_403_are_auth_errors() {
    let e = error_for(
        401,
        &[JSON],
        r#"{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}"#,
    )
    .await;
    assert!(matches!(e, ModelError::Auth { status: 401, .. }), "{e:?}");
    assert!(!e.is_transient());
    let e = error_for(403, &[], "forbidden").await;
    assert!(matches!(e, ModelError::Auth { status: 403, .. }), "{e:?}");
}

#[tokio::test]
async fn status_429_is_rate_limited_with_retry_after() {
    let e = error_for(429, &[("retry-after", "3")], "slow down").await;
    assert_eq!(
        format!("{:?}", e),
        format!(
            "{:?}",
            ModelError::RateLimited {
                status: 429,
                retry_after: Some(Duration::from_secs(3)),
                body: "slow down".into()
            }
        )
    );
    assert!(e.is_transient());
    // An HTTP date in the past means "now".
    let e = error_for(429, &[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")], "").await;
    assert!(
        matches!(e, ModelError::RateLimited { retry_after: Some(d), .. } if d == Duration::ZERO),
        "{e:?}"
    );
    let e = error_for(429, &[], "").await;
    assert!(
        matches!(
            e,
            ModelError::RateLimited {
                retry_after: None,
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn status_5xx_is_a_server_error() {
    let e = error_for(500, &[], "internal").await;
    assert_eq!(
        format!("{:?}", e),
        format!(
            "{:?}",
            ModelError::Server {
                status: 500,
                body: "internal".into()
            }
        )
    );
    let e = error_for(
        503,
        &[JSON],
        r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
    )
    .await;
    assert!(matches!(e, ModelError::Server { status: 503, .. }));
}

#[tokio::test]
async fn llama_cpp_context_error_is_context_too_long_with_numbers() {
    let e = error_for(400, &[JSON], CONTEXT_ERROR).await;
    assert_eq!(format!("{:?}", e), format!("{:?}", ModelError::ContextTooLong {
            message: "request (3027 tokens) exceeds the available context size (2048 tokens), try increasing it".into(),
            prompt_tokens: Some(3027),
            context_window: Some(2048),
        }));
    assert!(e.to_string().contains("3027 tokens > 2048"));
    // The same error on a stream request surfaces from `stream()` itself.
    let seen = Seen::default();
    let server = Server::start(Router::new().route(
        "/v1/chat/completions",
        fixed(&seen, 400, &[JSON], CONTEXT_ERROR),
    ));
    let e = server.model().stream(&chat_request()).await.err().unwrap();
    assert!(matches!(
        e,
        ModelError::ContextTooLong {
            prompt_tokens: Some(3027),
            ..
        }
    ));
}

#[tokio::test]
async fn openai_context_error_is_context_too_long() {
    let e = error_for(400, &[JSON], r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#).await;
    assert!(
        matches!(
            e,
            ModelError::ContextTooLong {
                prompt_tokens: Some(9000),
                context_window: Some(8192),
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn other_4xx_is_a_bad_request_and_bodies_are_cut() {
    let e = error_for(400, &[JSON], r#"{"error":{"code":400,"message":"Expected 'messages' to be an array","type":"invalid_request_error"}}"#).await;
    assert!(
        matches!(&e, ModelError::BadRequest { status: 400, body } if body.contains("Expected 'messages'")),
        "{e:?}"
    );
    let long: &'static str = Box::leak("x".repeat(100_000).into_boxed_str());
    let e = error_for(422, &[], long).await;
    match e {
        ModelError::BadRequest { status: 422, body } => {
            assert!(body.len() < 2200, "{}", body.len())
        }
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn unparsable_replies_are_malformed() {
    for body in [
        "{\"choices\": [",
        "<html>oops</html>",
        r#"{"choices":[],"usage":{"prompt_tokens":1}}"#,
        r#"{"object":"chat.completion"}"#,
    ] {
        let e = error_for(200, &[JSON], body).await;
        assert!(matches!(e, ModelError::Malformed(_)), "{body}: {e:?}");
    }
    let seen = Seen::default();
    let server = Server::start(Router::new().route(
        "/v1/chat/completions",
        fixed(
            &seen,
            200,
            &[JSON],
            &b"{\"choices\":[{\"message\":{\"content\":\"\xff\xfe\"}}]}"[..],
        ),
    ));
    let e = server.model().complete(&chat_request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Malformed(_)), "{e:?}");
}

/// Paused time: the timeout is tokio's. Each call runs with the clock held (no
/// auto-advance) until the server has its request, so the timeout cannot fire early while
/// the request is on its way; released, the clock jumps straight to the timeout (the
/// server never answers), and the call fails exactly 300 ms after it started.
#[tokio::test(start_paused = true)]
async fn a_slow_server_times_out_within_the_configured_timeout() {
    let (server, arrived) = black_hole();
    let model = OpenAiModel::new(server.config().with_timeout(Duration::from_millis(300))).unwrap();

    let held = Hold::new();
    let start = Instant::now();
    let (e, ()) = tokio::join!(
        async { model.complete(&chat_request()).await.unwrap_err() },
        async {
            arrived.notified().await;
            held.release().await;
        }
    );
    assert!(is_request_timeout(&e, Duration::from_millis(300)), "{e:?}");
    assert!(e.is_transient());
    assert_eq!(start.elapsed(), Duration::from_millis(300));

    let held = Hold::new();
    let start = Instant::now();
    let (e, ()) = tokio::join!(
        async { model.stream(&chat_request()).await.err().unwrap() },
        async {
            arrived.notified().await;
            held.release().await;
        }
    );
    // Before its first event a stream is bounded by the request timeout.
    assert!(is_request_timeout(&e, Duration::from_millis(300)), "{e:?}");
    assert_eq!(start.elapsed(), Duration::from_millis(300));
}

/// Whether `e` is the request timeout of `limit`, having waited exactly that long, and
/// says so.
fn is_request_timeout(e: &ModelError, limit: Duration) -> bool {
    matches!(e, ModelError::Timeout { kind: TimeoutKind::Request, waited, limit: l }
        if *waited == limit && *l == limit)
        && e.to_string().contains(&format!(
            "gave up after {}ms (the request timeout is {}ms)",
            limit.as_millis(),
            limit.as_millis()
        ))
}

/// A server that takes every request and never answers (until the test drops it), and
/// tells when a request has arrived.
fn black_hole() -> (Server, Arc<tokio::sync::Notify>) {
    let arrived = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&arrived);
    let app = Router::new().fallback(move || {
        let arrived = Arc::clone(&signal);
        async move {
            arrived.notify_one();
            std::future::pending::<()>().await;
            StatusCode::OK
        }
    });
    (Server::start(app), arrived)
}

/// Real time: a server that accepts the connection and never answers fails a
/// non-streamed call (and a stream before its first event) once the request timeout has
/// passed, with a message naming the time actually waited: no sooner than the timeout,
/// and no longer than the call took. (No bound on how soon after the timeout: the
/// 60 s limit only turns a hang into a failure; the exact timing is the paused-clock
/// test above.)
#[tokio::test]
async fn a_server_that_never_answers_fails_after_the_request_timeout() {
    let (hole, _) = black_hole();
    let config = OpenAiConfig::new("m")
        .with_base_url(&hole.base)
        .with_timeout(Duration::from_millis(300))
        .with_idle_timeout(Duration::from_secs(60));
    let model = OpenAiModel::new(config).unwrap();
    for streamed in [false, true] {
        let start = Instant::now();
        let call = async {
            if streamed {
                model.stream(&chat_request()).await.err().unwrap()
            } else {
                model.complete(&chat_request()).await.unwrap_err()
            }
        };
        let e = tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .expect("the request timeout never fired");
        let elapsed = start.elapsed();
        let ModelError::Timeout {
            kind,
            waited,
            limit,
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(*kind, TimeoutKind::Request, "streamed: {streamed}");
        assert_eq!(*limit, Duration::from_millis(300));
        assert!(
            *waited >= Duration::from_millis(300) && *waited <= elapsed,
            "{waited:?}"
        );
        let message = e.to_string();
        assert!(
            message.contains(&format!("gave up after {}ms", waited.as_millis()))
                && message.contains("the request timeout is 300ms")
                && message.contains("OpenAiConfig::with_timeout"),
            "{message}"
        );
    }
}

/// Real time: a token every 150 ms for 1.5 s, with a 1 s request timeout (and a 5 s idle
/// timeout, far above the gaps, so that load cannot make one fire). The request timeout
/// bounds only the wait for the first event, so a stream that keeps producing runs past
/// it to the end. The server's sleeps make the stream outlast the request timeout (a
/// sleep never ends early, whatever the load), so getting every token and the end is the
/// check; nothing is timed.
#[tokio::test]
async fn a_stream_that_keeps_producing_is_never_cut_by_the_request_timeout() {
    const TICKS: u32 = 10;
    const TICK: Duration = Duration::from_millis(150);
    const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
    const _: () = assert!(TICK.as_millis() * TICKS as u128 > REQUEST_TIMEOUT.as_millis());
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            let ticks = futures::stream::iter(0..TICKS).then(|i| async move {
                tokio::time::sleep(TICK).await;
                Ok::<_, std::io::Error>(Bytes::from(sse(&[&chat_chunk(&format!("t{i} "))])))
            });
            let end = futures::stream::iter([Ok(Bytes::from(sse(&[
                r#"{"model":"served.gguf","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ])))]);
            sse_stream_response(ticks.chain(end))
        }),
    );
    let server = Server::start(app);
    let model = server.model_with_timeouts(REQUEST_TIMEOUT, Duration::from_secs(5));
    let events = collect(model.stream(&chat_request()).await.unwrap()).await;
    let text = delta_text(&events);
    assert_eq!(text, "t0 t1 t2 t3 t4 t5 t6 t7 t8 t9 ", "{events:?}");
    assert!(
        matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))),
        "{events:?}"
    );
    // The model the chunks named is recorded.
    assert_eq!(model.served_model().as_deref(), Some("served.gguf"));
}

/// A server that does not answer discovery costs one discovery timeout: the rest of
/// discovery and the `/tokenize` probe are skipped (before, each waited in turn). Paused
/// time, held until the first request reached the server: discovery takes exactly one
/// timeout (each further request would add its own).
#[tokio::test(start_paused = true)]
async fn a_hanging_server_costs_one_discovery_timeout() {
    let (hole, arrived) = black_hole();
    let config = OpenAiConfig::new("m")
        .with_base_url(&hole.base)
        .with_timeout(Duration::from_millis(400))
        .with_model_discovery(true)
        .with_server_tokenizer(true);
    let held = Hold::new();
    let start = Instant::now();
    let (model, ()) = tokio::join!(
        async { OpenAiModel::connect(config).await.unwrap() },
        async {
            arrived.notified().await;
            held.release().await;
        }
    );
    let mut model = model;
    // One timeout, not five (/models, /props, /tokenize twice, /models again).
    assert_eq!(start.elapsed(), Duration::from_millis(400));
    assert_eq!(model.info().name, "m");
    assert!(model.counter().is_none());
    assert!(!model.use_server_counter().await);
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    let config = OpenAiConfig::new("m")
        .with_base_url(format!("http://127.0.0.1:{}/v1", server::free_port()))
        .with_api_key(KEY)
        .with_timeout(Duration::from_secs(5));
    let model = OpenAiModel::new(config).unwrap();
    let e = model.complete(&chat_request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Connection(_)), "{e:?}");
    assert!(e.is_transient());
    assert!(!format!("{e} {e:?}").contains(KEY));
}

// ---------------------------------------------------------------- structured

#[tokio::test]
async fn structured_sends_response_format_and_parses_the_reply() {
    let seen = Seen::default();
    let reply = json!({"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Sure: {\"answer\":\"yes\",\"n\" : 3\n}"}}],"usage":{"completion_tokens":9,"prompt_tokens":20}}).to_string();
    let server = Server::start(
        Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[JSON], reply)),
    );
    let schema = json!({"type":"object","properties":{"answer":{"type":"string"},"n":{"type":"integer"}},"required":["answer","n"]});
    let mut req = chat_request();
    req.schema = Some(Arc::new(schema.clone()));

    let model = server.model();
    let c = model.complete(&req).await.unwrap();
    let value = synthkit::model::parse_json_reply(&c.text).unwrap();
    assert_eq!(value, json!({"answer": "yes", "n": 3}));
    assert_eq!(c.usage.map(|u| u.completion_tokens), Some(9));
    let (_, _, body) = seen.last();
    let format = json!({"type":"json_schema","json_schema":{"name":"response","schema":schema,"strict":true}});
    assert_eq!(body["response_format"], format);

    // A streamed structured call asks for the format too (the server answers JSON here,
    // which the stream handles).
    let _ = model.stream(&req).await.unwrap();
    assert_eq!(seen.last().2["response_format"], format);

    // Without server-side schemas: no response_format.
    let model = OpenAiModel::new(server.config().with_json_schema(false)).unwrap();
    let c = model.complete(&req).await.unwrap();
    assert_eq!(
        synthkit::model::parse_json_reply(&c.text).unwrap()["answer"],
        "yes"
    );
    let (_, _, body) = seen.last();
    assert!(body.get("response_format").is_none());

    // A request without a schema never asks for a format.
    req.schema = None;
    server.model().complete(&req).await.unwrap();
    assert!(seen.last().2.get("response_format").is_none());
}
