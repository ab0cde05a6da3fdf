//! Permanent faults (no retry), an enormous body, and the key that never shows.

use super::*;

// ---------------------------------------------------------------- permanent faults: no retry

/// Checks that `fault` on every request fails with an error `is` accepts, with one request
/// for the direct call and no body resent by the synthesizer; with `stream`, the same for
/// the synthesizer's streamed final call. Returns the direct error.
async fn permanent(
    name: &str,
    fault: Fault,
    stream: bool,
    is: fn(&ModelError) -> bool,
) -> ModelError {
    let h = Harness::always(fault.clone());
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(is(&e), "{name}: {e:?}");
    assert!(!e.is_transient());
    assert_eq!(h.requests(), 1, "{name}: retried");
    h.report(
        &format!("{name} (complete)"),
        &format!("typed error {}, no retry", kind(&e)),
    );

    let h = Harness::always(fault.clone());
    let se = h.synthesize().await.unwrap_err();
    assert!(is(model_error(&se)), "{name}: {se:?}");
    assert!(!h.any_resent(), "{name}: the synthesizer's layer retried");
    assert!((1..=3).contains(&h.requests()), "{name}: {}", h.requests());
    h.report(
        &format!("{name} (synth)"),
        &format!(
            "typed error SynthError::Model({}), no retry",
            kind(model_error(&se))
        ),
    );

    if !stream {
        return e;
    }
    // Only the streamed final call fails.
    let h = Harness::at_final([fault]);
    let se = h.stream_finish().await.unwrap_err();
    assert!(is(model_error(&se)), "{name} (stream): {se:?}");
    assert_eq!(h.requests(), BASELINE, "{name} (stream): retried");
    h.report(
        &format!("{name} (synth stream)"),
        &format!(
            "typed error SynthError::Model({}), no retry",
            kind(model_error(&se))
        ),
    );
    e
}

/// Whether `e` is a malformed reply.
fn malformed(e: &ModelError) -> bool {
    matches!(e, ModelError::Malformed(_))
}

#[tokio::test(start_paused = true)]
async fn unauthorized_is_never_retried() {
    let e = permanent(
        "401",
        status(401, r#"{"error":{"message":"Invalid API Key","code":401}}"#),
        true,
        |e| matches!(e, ModelError::Auth { status: 401, .. }),
    )
    .await;
    assert!(e.to_string().contains("API key"));
}

#[tokio::test(start_paused = true)]
async fn malformed_json_is_never_retried() {
    permanent("malformed JSON", Fault::Malformed, true, malformed).await;
}

#[tokio::test(start_paused = true)]
async fn empty_choices_is_never_retried() {
    let e = permanent("empty choices", Fault::EmptyChoices, false, malformed).await;
    assert!(e.to_string().contains("no choices"), "{e}");

    // Streamed: chunks without choices then `[DONE]` are a finished, empty reply (servers
    // legitimately send a usage chunk with no choices): one `Done`, no delta, no retry.
    let h = Harness::always(Fault::EmptyChoices);
    let events = collect(h.model().stream(&request()).await.unwrap()).await;
    assert!(
        matches!(events.as_slice(), [Ok(StreamEvent::Done { .. })]),
        "{events:?}"
    );
    assert_eq!(h.requests(), 1);
    h.report(
        "empty choices + [DONE] (stream)",
        "completed: an empty reply (one Done), no retry",
    );
}

/// The synthesizer's streamed final call answers nothing: the response is the
/// empty-response text (a regression test: the fallback once polled a finished stream).
#[tokio::test(start_paused = true)]
async fn an_empty_streamed_final_answer_gives_the_empty_response() {
    let h = Harness::at_final([Fault::EmptyChoices]);
    let r = h.stream_finish().await.unwrap();
    assert_eq!(r.text, synthkit::synth::DEFAULT_EMPTY_RESPONSE);
    assert_eq!(h.requests(), BASELINE);
    h.report(
        "empty choices + [DONE] (synth stream)",
        "completed with the empty-response text, no retry",
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_utf8_is_never_retried() {
    let e = permanent("invalid UTF-8", Fault::InvalidUtf8, true, malformed).await;
    assert!(e.to_string().contains("UTF-8"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn context_too_long_is_never_retried() {
    let body = r#"{"error":{"code":400,"message":"request (3027 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3027,"n_ctx":2048}}"#;
    let fault = status(400, body);
    let is = |e: &ModelError| {
        matches!(
            e,
            ModelError::ContextTooLong {
                prompt_tokens: Some(3027),
                context_window: Some(2048),
                ..
            }
        )
    };
    let h = Harness::always(fault.clone());
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(is(&e), "{e:?}");
    assert_eq!(h.requests(), 1, "retried");
    h.report(
        "400 context too long (complete)",
        "typed error ContextTooLong, no retry",
    );

    // The synthesizer handles a context error itself (it shrinks its budget and re-packs),
    // so its outcome is its own: the model's typed error, or a budget error when the
    // server's count leaves no room. The retry layer never resends (checked above).
    for stream in [false, true] {
        let h = Harness::always(fault.clone());
        let result = if stream {
            h.stream_finish().await
        } else {
            h.synthesize().await
        };
        let e = result.unwrap_err();
        let outcome = match &e {
            SynthError::Model { source, .. } => {
                assert!(is(source), "{e:?}");
                format!("typed error SynthError::Model({})", kind(source))
            }
            SynthError::Budget(b) => format!("typed error SynthError::Budget({})", kind(b)),
            // The server's smaller room, named as the cause (not the template).
            SynthError::NoRoomForContext { server_shrink, .. } if *server_shrink > 0 => {
                "typed error SynthError::NoRoomForContext (the server's room)".to_string()
            }
            other => panic!("unexpected {other:?}"),
        };
        // Re-packing may send smaller prompts (overlapping pieces can even repeat one),
        // but it is bounded: a few corrections, then the typed error.
        assert!(
            h.requests() < 200,
            "{} requests: re-packing did not stop",
            h.requests()
        );
        let name = if stream { "synth stream" } else { "synth" };
        h.report(
            &format!("400 context too long, every request ({name})"),
            &format!("{outcome}, no retry"),
        );
    }
}

// ---------------------------------------------------------------- an enormous body

#[tokio::test(start_paused = true)]
async fn an_enormous_body_does_not_panic() {
    // Outcome: a typed error, not retried. 20 MB of content is over the default reply cap
    // (`OpenAiConfig::max_reply_bytes`, 8 MiB): reading stops at the cap with
    // `ReplyTooLarge`, which is not transient. However slow the (debug) build reads it,
    // the call cannot turn into a typed `Timeout`: the clock is held.
    let h = Harness::new(vec![Fault::Huge(HUGE)]);
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(
        matches!(e, ModelError::ReplyTooLarge { limit } if limit == OpenAiConfig::DEFAULT_MAX_REPLY_BYTES),
        "{e:?}"
    );
    assert_eq!(h.requests(), 1);
    h.report(
        "20 MB content (complete)",
        "typed error ModelError::ReplyTooLarge, no retry",
    );

    // Streamed as one 20 MB SSE event: cut at the cap, never taken as complete (the
    // retry layer looks at a stream's first event, so the error comes from `stream`).
    let h = Harness::new(vec![Fault::Huge(HUGE)]);
    let e = match h.model().stream(&request()).await {
        Err(e) => e,
        Ok(s) => collect(s).await.pop().unwrap().unwrap_err(),
    };
    assert!(matches!(e, ModelError::ReplyTooLarge { .. }), "{e:?}");
    assert_eq!(h.requests(), 1);
    h.report(
        "20 MB content (stream)",
        "typed error ModelError::ReplyTooLarge, no retry",
    );

    // With the cap raised above it, the 20 MB reply is read whole, plain and streamed.
    let h = Harness::new(vec![Fault::Huge(HUGE), Fault::Huge(HUGE)]);
    let raised = || {
        let config = h.config().with_max_reply_bytes(32 << 20);
        retrying(OpenAiModel::new(config).unwrap())
    };
    let c = raised().complete(&request()).await.unwrap();
    assert!(c.text.len() >= HUGE - 12, "{}", c.text.len());
    let events = collect(raised().stream(&request()).await.unwrap()).await;
    let len: usize = events
        .iter()
        .map(|e| match e {
            Ok::<_, ModelError>(StreamEvent::Delta(d)) => d.len(),
            _ => 0,
        })
        .sum();
    assert!(len >= HUGE - 12, "{len}");
    assert!(matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))));
    assert_eq!(h.requests(), 2);
    h.report(
        "20 MB content, cap raised to 32 MiB",
        "completed, 20 MB text, plain and streamed",
    );

    // The synthesizer's final answer is enormous: the job fails with the cap's error.
    let h = Harness::at_final([Fault::Huge(HUGE)]);
    let e = h.synthesize().await.unwrap_err();
    assert!(
        matches!(
            &e,
            SynthError::Model {
                source: ModelError::ReplyTooLarge { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(h.requests(), BASELINE);
    h.report(
        "20 MB final answer (synth)",
        "typed error SynthError::Model(ReplyTooLarge), no retry",
    );
}

// ---------------------------------------------------------------- the key never shows

fn show(shown: &mut Vec<String>, e: &(impl std::fmt::Debug + std::fmt::Display)) {
    shown.push(format!("{e} / {e:?} / {e:#?}"));
}

#[tokio::test(start_paused = true)]
async fn the_api_key_never_appears_in_errors_debug_or_logs() {
    // This test runs on one thread (current-thread runtime): everything it polls logs here.
    let (_guard, logs) = logs::capture();

    let echo = format!(r#"{{"error":{{"message":"invalid key {KEY}","code":0}}}}"#);
    let mut shown: Vec<String> = Vec::new();

    // Errors that echo the key: auth, rate limit and server errors (the latter retried
    // and logged at each retry), a malformed body, and an error object inside a stream.
    let cases = [
        status(401, &echo),
        Fault::Status {
            status: 429,
            retry_after: Some("0"),
            body: echo.clone(),
        },
        status(500, &echo),
        status(400, &echo),
    ];
    for fault in cases {
        let h = Harness::always(fault);
        let model = h.model();
        let e = model.complete(&request()).await.unwrap_err();
        show(&mut shown, &e);
        let se = h.synthesize().await.unwrap_err();
        show(&mut shown, &se);
        let se = h.stream_finish().await.unwrap_err();
        show(&mut shown, &se);
        shown.push(format!("{model:?} {model:#?} {:?}", model.inner().config()));
    }
    let h = Harness::always(Fault::Status {
        status: 200,
        retry_after: None,
        body: format!("<html>{KEY}"),
    });
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Malformed(_)), "{e:?}");
    show(&mut shown, &e);

    // A stream whose error chunk carries the key, after a delta.
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async move {
            let err = json!({"error": {"code": 500, "message": format!("crash {KEY}")}});
            reply(true, format!("{}data: {err}\n\n", chunk("Hel")))
        }),
    );
    let server = Server::start(app);
    let _clock = Hold::new();
    let config = OpenAiConfig::new("m")
        .with_base_url(&server.base)
        .with_api_key(KEY)
        .with_timeout(NEVER);
    let model = retrying(OpenAiModel::new(config.clone()).unwrap());
    let events = collect(model.stream(&request()).await.unwrap()).await;
    assert!(matches!(
        events.last(),
        Some(Err(ModelError::Server { .. }))
    ));
    shown.push(format!("{events:?}"));
    shown.push(format!("{config:?} {config:#?} {model:?}"));

    let logs = logs.text();
    assert!(logs.contains("retrying"), "no retry was logged: {logs}");
    assert!(logs.contains("[REDACTED]"), "{logs}");
    assert!(!logs.contains(KEY), "the key leaked into the logs");
    assert!(
        !logs.contains("UNIQUE-7f3a"),
        "part of the key leaked into the logs"
    );
    for s in &shown {
        assert!(
            !s.contains(KEY) && !s.contains("UNIQUE-7f3a"),
            "the key leaked: {s}"
        );
    }
    assert!(shown.iter().any(|s| s.contains("[REDACTED]")));
    report(
        "key echoed in bodies (401/429/500/400/malformed/stream)",
        "never in Display/Debug/logs",
        0,
    );
}
