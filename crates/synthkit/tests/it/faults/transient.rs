//! Transient faults, retried until the call succeeds, and a stream cut mid-way (never an answer).

use super::*;

// ---------------------------------------------------------------- transient faults: retried

#[tokio::test(start_paused = true)]
async fn rate_limited_with_retry_after_then_ok() {
    let limited = || Fault::Status {
        status: 429,
        retry_after: Some("1"),
        body: r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
    };
    // The layer waits exactly the Retry-After (longer than any backoff of `policy`), on
    // tokio's clock: paused, so the second it stands for costs no wall time.
    for (via, requests, fault, outcome) in [
        (
            Via::Complete,
            2,
            "429 + Retry-After: 1, then ok (complete)",
            "completed after 1 retry, waited 1 s",
        ),
        // One leaf is rate limited.
        (
            Via::Synthesize,
            BASELINE + 1,
            "429 + Retry-After: 1 on a leaf (synth)",
            "completed after 1 retry",
        ),
        // The streamed final call is rate limited.
        (
            Via::StreamFinish,
            BASELINE + 1,
            "429 + Retry-After: 1 on the streamed final call (synth stream)",
            "completed after 1 retry",
        ),
    ] {
        let h = Harness::meeting(via, vec![limited()]);
        let start = Instant::now();
        let text = h.answer(via).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1), "{fault}");
        h.assert_answered(&text, requests, fault, outcome);
    }
}

#[tokio::test(start_paused = true)]
async fn server_errors_then_ok() {
    let three = || {
        vec![
            status(500, "boom"),
            status(502, "bad gateway"),
            status(503, "unavailable"),
        ]
    };
    for (via, faults, requests, fault, outcome) in [
        (
            Via::Complete,
            three(),
            4,
            "500, 502, 503, then ok (complete)",
            "completed after 3 retries",
        ),
        // The first three arrivals (the three concurrent leaves) fail.
        (
            Via::Synthesize,
            three(),
            BASELINE + 3,
            "500/502/503 on the three leaves (synth)",
            "completed after 3 retries",
        ),
        (
            Via::StreamFinish,
            vec![status(503, "x"), status(502, "y")],
            BASELINE + 2,
            "503, 502 on the streamed final call (synth stream)",
            "completed after 2 retries",
        ),
    ] {
        let h = Harness::meeting(via, faults);
        let text = h.answer(via).await;
        h.assert_answered(&text, requests, fault, outcome);
    }
}

#[tokio::test(start_paused = true)]
async fn persistent_server_errors_give_up_after_max_attempts() {
    let h = Harness::always(status(503, "still down"));
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Server { status: 503, .. }), "{e:?}");
    assert_eq!(h.requests(), 4);
    h.report(
        "503 forever (complete)",
        "typed error Server{503} after 4 attempts",
    );

    let h = Harness::always(status(503, "still down"));
    let e = h.synthesize().await.unwrap_err();
    assert!(
        matches!(model_error(&e), ModelError::Server { status: 503, .. }),
        "{e:?}"
    );
    // Every leaf in flight made at most 4 attempts; the first to give up ends the job.
    assert!(
        h.requests() >= 4 && h.requests() <= 3 * 4,
        "{}",
        h.requests()
    );
    h.report(
        "503 forever (synth)",
        "typed error SynthError::Model(Server{503})",
    );
}

/// Counts the calls of a synthesis that have finished.
#[derive(Default)]
struct Finished {
    calls: AtomicUsize,
    changed: Notify,
}

impl Observer for Finished {
    fn call_finished(&self, _report: &CallReport<'_>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
    }
}

/// Runs `call` on the held clock and lets each hung request time out. Once the server
/// holds a request it will never answer and `finished` has seen `others` calls finish
/// (those it did answer, which the client has now read), the hung request is the only
/// thing the client still waits for: moving the clock on by [`TIMEOUT`] fires its timeout
/// and no other.
async fn timing_out_hangs<T>(
    h: &Harness,
    finished: &Finished,
    others: usize,
    call: impl Future<Output = T>,
) -> T {
    let script = &h.script;
    tokio::pin!(call);
    let mut timed_out = 0;
    loop {
        let seen = timed_out;
        let only_hung_left = async move {
            while script.hung.load(Ordering::SeqCst) <= seen
                || finished.calls.load(Ordering::SeqCst) < others
            {
                tokio::select! {
                    () = script.hang.notified() => {}
                    () = finished.changed.notified() => {}
                }
            }
        };
        tokio::select! {
            out = &mut call => return out,
            () = only_hung_left => {
                tokio::time::advance(TIMEOUT).await;
                timed_out += 1;
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn hang_past_the_timeout_then_ok() {
    // The server never answers a hung request; the client gives up after TIMEOUT of
    // tokio's (paused) clock, then waits its backoff (at most `policy`'s first ceiling,
    // 20 ms) and retries.
    let h = Harness::new(vec![Fault::Hang]);
    let model = retrying(OpenAiModel::new(h.config().with_timeout(TIMEOUT)).unwrap());
    let start = Instant::now();
    let c = timing_out_hangs(&h, &Finished::default(), 0, model.complete(&request()))
        .await
        .unwrap();
    assert_eq!(c.text, "answer 1");
    assert_eq!(h.requests(), 2);
    let took = start.elapsed();
    assert!(
        took >= TIMEOUT && took <= TIMEOUT + Duration::from_millis(20),
        "{took:?}"
    );
    h.report(
        "hang (never answered) > 300 ms timeout, then ok (complete)",
        "completed after 1 retry (Timeout)",
    );

    // One of the three leaves hangs; the other two finish first.
    let h = Harness::new(vec![Fault::Hang]);
    let finished = Arc::new(Finished::default());
    let synth = synthesizer_over(
        retrying(OpenAiModel::new(h.config().with_timeout(TIMEOUT)).unwrap()),
        Some(finished.clone()),
    );
    let r = timing_out_hangs(&h, &finished, 2, synth.synthesize(QUERY, nodes()))
        .await
        .unwrap();
    assert!(r.text.starts_with("answer "));
    assert_eq!(h.requests(), BASELINE + 1);
    h.report("hang on a leaf (synth)", "completed after 1 retry");

    // The streamed final call hangs before its headers (after the three leaves).
    let h = Harness::at_final([Fault::Hang]);
    let finished = Arc::new(Finished::default());
    let synth = synthesizer_over(
        retrying(OpenAiModel::new(h.config().with_timeout(TIMEOUT)).unwrap()),
        Some(finished.clone()),
    );
    let stream_finish = async { synth.stream(QUERY, nodes()).await?.finish().await };
    let r = timing_out_hangs(&h, &finished, FINAL, stream_finish)
        .await
        .unwrap();
    h.assert_answered(
        &r.text,
        BASELINE + 1,
        "hang on the streamed final call (synth stream)",
        "completed after 1 retry",
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_dropped_before_its_first_event_is_retried() {
    // Nothing reached the caller, so the layer retries.
    let h = Harness::new(vec![Fault::DropBeforeBody]);
    let events = collect(h.model().stream(&request()).await.unwrap()).await;
    let text = delta_text(&events);
    assert_eq!(text, "answer 1");
    assert!(matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))));
    assert_eq!(h.requests(), 2);
    h.report(
        "SSE reset before the first event (stream)",
        "completed after 1 retry (Incomplete)",
    );

    let h = Harness::at_final([Fault::DropBeforeBody]);
    let r = h.stream_finish().await.unwrap();
    h.assert_answered(
        &r.text,
        BASELINE + 1,
        "SSE reset before the first event (synth stream)",
        "completed after 1 retry",
    );
}

/// A JSON reply whose connection breaks: no panic, and either a retry that completes or a
/// typed error. Today it is a typed `Malformed` without retry: see the ignored test below.
#[tokio::test(start_paused = true)]
async fn a_json_reply_dropped_mid_body_does_not_panic() {
    for (name, fault) in [
        (
            "connection reset before the JSON body",
            Fault::DropBeforeBody,
        ),
        ("connection reset mid JSON body", Fault::DropMidBody),
    ] {
        let h = Harness::new(vec![fault.clone()]);
        let outcome = match h.model().complete(&request()).await {
            Ok(c) => {
                assert_eq!(c.text, "answer 1");
                assert_eq!(h.requests(), 2);
                "completed after 1 retry".to_string()
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        ModelError::Malformed(_)
                            | ModelError::Connection(_)
                            | ModelError::Incomplete(_)
                    ),
                    "{e:?}"
                );
                format!("typed error {}, {} request(s)", kind(&e), h.requests())
            }
        };
        h.report(&format!("{name} (complete)"), &outcome);

        let h = Harness::new(vec![fault]);
        let outcome = match h.synthesize().await {
            Ok(_) => "completed".to_string(),
            Err(e) => format!("typed error SynthError::Model({})", kind(model_error(&e))),
        };
        h.report(&format!("{name} on a leaf (synth)"), &outcome);
    }
}

/// A JSON reply whose connection breaks is a transport failure and is retried (reqwest
/// reports a body cut mid-way as a decode error; the backend maps it to `Connection`).
#[tokio::test(start_paused = true)]
async fn a_json_reply_dropped_mid_body_is_retried() {
    for fault in [Fault::DropBeforeBody, Fault::DropMidBody] {
        let h = Harness::new(vec![fault.clone()]);
        let c = h.model().complete(&request()).await.unwrap();
        assert_eq!(c.text, "answer 1");
        assert_eq!(h.requests(), 2);

        let h = Harness::new(vec![fault]);
        h.synthesize().await.unwrap();
        assert_eq!(h.requests(), BASELINE + 1);
    }
}

// ---------------------------------------------------------------- a stream cut mid-way

#[tokio::test(start_paused = true)]
async fn a_stream_cut_after_its_first_delta_is_an_error_never_an_answer() {
    let h = Harness::new(vec![Fault::DropMidBody]);
    let events = collect(h.model().stream(&request()).await.unwrap()).await;
    assert_eq!(
        format!("{:?}", events.first()),
        format!(
            "{:?}",
            Some(&Ok::<_, ModelError>(StreamEvent::Delta("Hel".into())))
        )
    );
    let last = events.last().unwrap();
    assert!(matches!(last, Err(ModelError::Incomplete(_))), "{last:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Done { .. })))
    );
    assert_eq!(
        h.requests(),
        1,
        "a stream that already gave text is never replayed"
    );
    h.report(
        "SSE reset after the first delta (stream)",
        "typed error Incomplete, no retry, no Done",
    );

    // Through the synthesizer: `finish` fails, with the typed error.
    let h = Harness::at_final([Fault::DropMidBody]);
    let e = h.stream_finish().await.unwrap_err();
    assert!(
        matches!(model_error(&e), ModelError::Incomplete(_)),
        "{e:?}"
    );
    assert_eq!(h.requests(), BASELINE);
    h.report(
        "SSE reset after the first delta (synth stream, finish)",
        "typed error SynthError::Model(Incomplete)",
    );

    // Polling the deltas: "Hel" arrives, then the error; the stream is not done.
    let h = Harness::at_final([Fault::DropMidBody]);
    let mut s = synthesizer(&h).stream(QUERY, nodes()).await.unwrap();
    let mut items = Vec::new();
    for _ in 0..100 {
        match s.next().await {
            Some(item) => items.push(item),
            None => break,
        }
    }
    assert!(
        matches!(items.first(), Some(Ok(d)) if d == "Hel"),
        "{items:?}"
    );
    assert!(
        matches!(
            items.last(),
            Some(Err(SynthError::Model {
                source: ModelError::Incomplete(_),
                ..
            }))
        ),
        "{items:?}"
    );
    assert_eq!(s.text(), "Hel");
    // A drained, failed stream never finishes as a response.
    assert!(s.finish().await.is_err());
}
