//! The engine's guarantees under real load: calls are owned by the synthesis that started
//! them (dropping it cancels them), failures always surface, packing never blocks a
//! runtime thread, counts never switch tokenizers mid-run, and the builder keeps what the
//! model knows.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;
use synthkit::testing::WordTokenizer;

use axum::Router;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::layer::ModelExt;
use synthkit::layer::retry::RetryPolicy;
use synthkit::model::{ModelError, ModelInfo};
use synthkit::prompt::PromptBudget;
use synthkit::testing::ScriptedModel;
use synthkit::{Concurrency, Node, ResponseMode, SynthError, Synthesizer};

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node::new(format!("n{i}"), format!("Passage {i} says the number {i}.")))
        .collect()
}

/// A model that answers every call with 503 after 50 ms, behind a retry layer that tries
/// again 200 ms later, up to 50 times (about ten seconds of retries a call).
fn overloaded() -> (
    ScriptedModel,
    synthkit::layer::retry::RetryModel<ScriptedModel>,
) {
    let model = ScriptedModel::new(info(), |_| {
        Err(ModelError::Server {
            status: 503,
            body: "overloaded".into(),
        })
    })
    .with_delay(Duration::from_millis(50));
    let policy = RetryPolicy::default()
        .with_max_attempts(50)
        .with_initial_backoff(Duration::from_millis(200))
        .with_max_backoff(Duration::from_millis(200));
    (model.clone(), model.retry(policy))
}

/// Far past every retry a surviving call could still make (50 tries, 250 ms each).
const PAST_EVERY_RETRY: Duration = Duration::from_secs(3600);

/// On paused time a sleep returns only once the clock got there, and the clock moves on
/// only while every task waits on a timer: a call or back-off that survived the drop
/// would have made its next calls (each due within 250 ms) before this returns.
async fn run_every_timer_due_before(after: Duration) {
    tokio::time::sleep(after).await;
}

#[tokio::test(start_paused = true)]
async fn dropping_a_stream_cancels_its_calls_and_back_off() {
    let (calls, model) = overloaded();
    let synth = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Accumulate)
        .concurrency(Concurrency::limit(2))
        .build()
        .unwrap();
    let mut stream = synth.stream("q?", nodes(12)).await.unwrap();
    // Read for a while: the calls start and keep retrying; no answer text comes.
    let mut read = String::new();
    let reading = async {
        while let Some(delta) = stream.next().await {
            read.push_str(&delta.unwrap());
        }
    };
    let finished = tokio::time::timeout(Duration::from_millis(700), reading).await;
    assert!(
        finished.is_err(),
        "a model that only says 503 cannot finish: {read}"
    );
    // Only the first answer's heading can come: that answer never does.
    assert!(!read.contains("Response 2"), "{read}");
    let at_drop = calls.requests().len();
    assert!(at_drop >= 2, "retried every 250 ms: {at_drop}");
    drop(stream);
    run_every_timer_due_before(PAST_EVERY_RETRY).await;
    assert_eq!(
        calls.requests().len(),
        at_drop,
        "calls went on after the stream was dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_a_synthesis_cancels_calls_and_back_off() {
    for mode in [ResponseMode::TreeSummarize, ResponseMode::Accumulate] {
        let (calls, model) = overloaded();
        let synth = Synthesizer::builder(Arc::new(model))
            .mode(mode)
            .concurrency(Concurrency::limit(2))
            .build()
            .unwrap();
        let run = synth.synthesize("q?", nodes(12));
        let waited = tokio::time::timeout(Duration::from_millis(600), run).await;
        assert!(waited.is_err(), "{mode}: the run should still be retrying");
        let at_drop = calls.requests().len();
        assert!(at_drop >= 2, "{mode}: {at_drop}");
        run_every_timer_due_before(PAST_EVERY_RETRY).await;
        assert_eq!(
            calls.requests().len(),
            at_drop,
            "{mode}: retries went on after the synthesis was dropped"
        );
    }
}

fn info() -> ModelInfo {
    ModelInfo::new("scripted").with_context_window(2048)
}

/// Fails the call whose context mentions "Passage 3".
fn failing_on_three(r: &synthkit::model::ModelRequest) -> Result<String, ModelError> {
    let context = r
        .source()
        .unwrap()
        .variable("context_str")
        .unwrap_or_default();
    if context.contains("Passage 3 ") {
        Err(ModelError::BadRequest {
            status: 400,
            body: "no".into(),
        })
    } else {
        Ok("fine".into())
    }
}

#[tokio::test]
async fn a_failing_map_call_fails_the_stream() {
    for mode in [ResponseMode::Accumulate, ResponseMode::TreeSummarize] {
        let model = ScriptedModel::new(info(), failing_on_three);
        let budget = PromptBudget::new(400, 64).unwrap();
        let synth = Synthesizer::builder(Arc::new(model))
            .mode(mode)
            .budget(budget)
            .build()
            .unwrap();
        // Enough text that tree_summarize needs several map calls.
        let nodes: Vec<Node> = (0..8)
            .map(|i| {
                Node::new(
                    format!("n{i}"),
                    format!("Passage {i} says {}", "words ".repeat(60)),
                )
            })
            .collect();
        let err = match synth.stream("q?", nodes).await {
            Err(e) => e,
            Ok(s) => {
                let items: Vec<Result<String, SynthError>> = s.collect().await;
                items
                    .into_iter()
                    .find_map(Result::err)
                    .expect("the stream must fail")
            }
        };
        assert!(
            matches!(
                err,
                SynthError::Model {
                    source: ModelError::BadRequest { .. },
                    ..
                }
            ),
            "{mode}: {err:?}"
        );
    }
}

// ------------------------------------------------------------------- exact counting

/// A llama.cpp-like server on the *test's own* runtime: `/tokenize` counts words,
/// completions report the words of their prompt as `prompt_tokens`. `/tokenize` fails with
/// 500 after `fail_after` calls.
fn word_server(
    prompts: Arc<std::sync::Mutex<Vec<usize>>>,
    tokenize_calls: Arc<AtomicUsize>,
    fail_after: usize,
) -> Router {
    let words = |s: &str| s.split_whitespace().count();
    Router::new()
        .route(
            "/tokenize",
            crate::common::tokenize::llama_tokenize(tokenize_calls, fail_after),
        )
        .route(
            "/v1/completions",
            post(move |body: axum::Json<Value>| {
                let prompts = prompts.clone();
                async move {
                    let prompt = body["prompt"].as_str().unwrap_or_default();
                    let n = words(prompt);
                    prompts.lock().unwrap().push(n);
                    axum::Json(json!({"choices":[{"index":0,"text":"summary words here","finish_reason":"stop"}],"usage":{"prompt_tokens":n,"completion_tokens":3}}))
                }
            }),
        )
}

/// A text-completion model over the word server at `base`, counting with its `/tokenize`.
async fn counted_by(base: &str) -> OpenAiModel {
    let mut model = OpenAiModel::new(
        OpenAiConfig::new("m")
            .with_base_url(base)
            .with_chat(false)
            .with_context_window(600)
            .with_num_output(100),
    )
    .unwrap();
    assert!(model.use_server_counter().await);
    model
}

fn long_nodes() -> Vec<Node> {
    (0..30)
        .map(|i| {
            Node::new(
                format!("n{i}"),
                format!(
                    "Section {i}: the committee reviewed item {i} and recorded the outcome {}",
                    "in considerable detail ".repeat(12)
                ),
            )
        })
        .collect()
}

/// Packing awaits the server's counts: on a single-threaded runtime that also runs the
/// server, a blocking count would stall both. Every prompt sent counts exactly what the
/// server counts, and within the window.
#[tokio::test(flavor = "current_thread")]
async fn the_server_counter_never_blocks_and_counts_exactly() {
    let prompts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let base = synthkit_testkit::here::serve(word_server(
        prompts.clone(),
        Arc::new(AtomicUsize::new(0)),
        usize::MAX,
    ))
    .await;
    let model = counted_by(&base).await;
    let model = Arc::new(model);
    let recorded = Arc::new(Recorder::default());
    for mode in [ResponseMode::Compact, ResponseMode::TreeSummarize] {
        prompts.lock().unwrap().clear();
        let synth = Synthesizer::builder(model.clone())
            .mode(mode)
            .observer(recorded.clone())
            .build()
            .unwrap();
        let run = synth.synthesize("What was recorded?", long_nodes());
        let r = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .expect("packing must not block the runtime")
            .unwrap();
        assert!(r.usage.calls >= 3, "{mode}: {}", r.usage.calls);
        let seen = prompts.lock().unwrap().clone();
        assert_eq!(seen.len() as u64, r.usage.calls);
        for server_count in &seen {
            assert!(
                *server_count <= 500,
                "{mode}: a prompt of {server_count} words"
            );
        }
        // What synthkit counted is what the server counted, call by call.
        let ours = recorded.take();
        let theirs = seen;
        let mut ours_sorted = ours.clone();
        let mut theirs_sorted = theirs.clone();
        ours_sorted.sort_unstable();
        theirs_sorted.sort_unstable();
        assert_eq!(ours_sorted, theirs_sorted, "{mode}");
    }
}

/// Records each call's counted prompt tokens.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<usize>>);

impl Recorder {
    fn take(&self) -> Vec<usize> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

impl synthkit::Observer for Recorder {
    fn call_finished(&self, report: &synthkit::observe::CallReport<'_>) {
        self.0.lock().unwrap().push(report.request.prompt_tokens);
    }
}

/// A counter that fails in the middle of a run stops the run with a clear error; counts
/// never switch to another tokenizer.
#[tokio::test(flavor = "current_thread")]
async fn a_failing_counter_stops_the_run() {
    // The probe's call succeeds; every later /tokenize call answers 500.
    let base = synthkit_testkit::here::serve(word_server(
        Arc::default(),
        Arc::new(AtomicUsize::new(0)),
        1,
    ))
    .await;
    let model = counted_by(&base).await;
    let synth = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Compact)
        .build()
        .unwrap();
    let err = synth
        .synthesize("What was recorded?", long_nodes())
        .await
        .unwrap_err();
    assert!(matches!(err, SynthError::Count { .. }), "{err:?}");
    assert!(err.to_string().contains("llama.cpp:/tokenize"), "{err}");
}

// ------------------------------------------------------------------------- builder

#[test]
fn a_budget_keeps_the_models_tokenizer_unless_one_is_given() {
    // A model that says which tokenizer counts like it.
    let model =
        Arc::new(ScriptedModel::constant(info(), "ok").with_tokenizer(Arc::new(WordTokenizer)));
    let synth = Synthesizer::builder(model.clone())
        .budget(PromptBudget::new(1000, 100).unwrap())
        .build()
        .unwrap();
    assert_eq!(synth.budget().tokenizer().name(), "words");
    let synth = Synthesizer::builder(model)
        .budget(
            PromptBudget::new(1000, 100)
                .unwrap()
                .with_tokenizer(synthkit::text::BpeTokenizer::o200k_base().shared()),
        )
        .build()
        .unwrap();
    assert_eq!(synth.budget().tokenizer().name(), "o200k_base");
}

#[tokio::test]
async fn errors_keep_their_sources() {
    use std::error::Error as _;
    let model = ScriptedModel::new(info(), |_| {
        Err(ModelError::Server {
            status: 503,
            body: "busy".into(),
        })
    });
    let synth = Synthesizer::builder(Arc::new(model)).build().unwrap();
    let err = synth.synthesize("q?", nodes(2)).await.unwrap_err();
    let source = err.source().expect("a source");
    assert!(source.downcast_ref::<ModelError>().is_some());
    assert_eq!(
        format!("{}", err),
        "compact qa call failed: server error (HTTP 503): busy"
    );

    let model = ScriptedModel::constant(info(), "not json");
    let synth = Synthesizer::builder(Arc::new(model)).build().unwrap();
    let r = synth.synthesize("q?", nodes(1)).await.unwrap();
    let err = r.parse::<Value>().unwrap_err();
    assert!(matches!(err, SynthError::Parse { .. }));
    assert!(err.source().is_some());
}

/// A server without an exact counter that adds a chat template's tokens: after the first
/// reply, the limit leaves room for the learned offset, so no later prompt overflows.
#[tokio::test]
async fn usage_calibrates_servers_without_a_counter() {
    let model =
        ScriptedModel::constant(info().with_context_window(600), "ok").with_prompt_overhead(40);
    let events = Arc::new(crate::common::fixtures::Events::default());
    let synth = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::TreeSummarize)
        .budget(PromptBudget::new(600, 100).unwrap())
        .observer(events.clone())
        .build()
        .unwrap();
    synth
        .synthesize("What was recorded?", long_nodes())
        .await
        .unwrap();
    let events = events.0.lock().unwrap();
    let calibrated: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            synthkit::SynthEvent::Calibrated { offset, limit, .. } => Some((*offset, *limit)),
            _ => None,
        })
        .collect();
    assert_eq!(calibrated, vec![(40, 500 - 40 - 10)]);
    // Every prompt the server saw after the first left room for its 40 extra tokens
    // (prompts packed before the first reply are refused by the call door and re-packed).
    let requests = model.requests();
    assert!(requests.len() > 3);
    for r in requests.iter().skip(1) {
        assert!(r.prompt_tokens + 40 <= 500, "{}", r.prompt_tokens);
    }
}
