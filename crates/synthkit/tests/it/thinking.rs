//! Reasoning models against a scripted loopback server: inline thinking (`<think>`
//! blocks, split across stream deltas, unclosed at a length cut) and `reasoning_content`
//! never reach the next prompt or the answer; they stay in the steps; reasoning tokens
//! are counted; a reply that only thought is an error that says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use serde_json::{Value, json};
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::node::Node;
use synthkit::{ResponseMode, Synthesizer};
use synthkit_testkit::hostile::{HostilePeer, json_with_headers};
use synthkit_testkit::openai::{chat_reply, chat_stream};

/// What the thinking in every reply holds: it must appear in no prompt and no answer.
const SECRET: &str = "SECRET-THOUGHT";

fn model(base: &str) -> OpenAiModel {
    OpenAiModel::new(
        OpenAiConfig::new("m")
            .with_base_url(base)
            .with_context_window(1024),
    )
    .unwrap()
}

/// Enough text for several prompts of a 1024-token window.
fn nodes() -> Vec<Node> {
    (0..8)
        .map(|i| {
            let text = format!("Fact {i}: the service runs every {i} hours. ").repeat(40);
            Node::new(format!("n{i}"), text)
        })
        .collect()
}

/// A thinking model: every reply opens with a `<think>` block holding [`SECRET`], then
/// answers `summary N`; a streamed reply cuts its tags across deltas. Every prompt is
/// recorded.
fn thinking_peer(prompts: Arc<std::sync::Mutex<Vec<String>>>) -> HostilePeer {
    let n = Arc::new(AtomicUsize::new(0));
    HostilePeer::start(move |_, body: &Value| {
        prompts.lock().unwrap().push(body["messages"].to_string());
        let i = n.fetch_add(1, Ordering::SeqCst);
        let usage = json!({"prompt_tokens": 50, "completion_tokens": 20,
            "completion_tokens_details": {"reasoning_tokens": 12}});
        if body["stream"] == json!(true) {
            return chat_stream(
                "m",
                &[
                    "<th", "ink>", SECRET, " weigh", " it</th", "ink", ">\n\n", "Final", " answer.",
                ],
                "stop",
                &usage,
            );
        }
        let text = format!("<think>\n{SECRET} {i}: let me weigh it.\n</think>\n\nsummary {i}");
        json_with_headers(200, &[], &chat_reply("m", &text, "stop", &usage))
    })
}

async fn run(mode: ResponseMode, streaming: bool) {
    let prompts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let peer = thinking_peer(prompts.clone());
    let synth = Synthesizer::builder(model(&peer.base))
        .mode(mode)
        .return_steps(true)
        .build()
        .unwrap();
    let response = if streaming {
        let mut s = synth.stream("How often?", nodes()).await.unwrap();
        let mut streamed = String::new();
        while let Some(d) = s.next().await {
            streamed.push_str(&d.unwrap());
        }
        let r = s.finish().await.unwrap();
        assert_eq!(streamed, r.text, "{mode}");
        assert_eq!(
            streamed, "Final answer.",
            "{mode}: not a character of thinking"
        );
        r
    } else {
        synth.synthesize("How often?", nodes()).await.unwrap()
    };
    let prompts = prompts.lock().unwrap().clone();
    assert!(prompts.len() > 1, "{mode}: several calls");
    for p in &prompts {
        assert!(!p.contains(SECRET) && !p.contains("<think>"), "{mode}: {p}");
    }
    assert!(!response.text.contains(SECRET), "{mode}: {}", response.text);
    assert!(
        !response.text.contains("think>"),
        "{mode}: {}",
        response.text
    );
    let steps = response.steps.unwrap();
    assert_eq!(steps.len(), prompts.len());
    for s in &steps {
        assert!(s.thinking.contains(SECRET), "{mode}: {s:?}");
        assert!(!s.reply.contains(SECRET), "{mode}: {s:?}");
        assert_eq!(s.reasoning_tokens, 12);
    }
    assert_eq!(response.usage.reasoning_tokens, 12 * prompts.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_never_reaches_a_prompt_or_the_answer_in_any_mode() {
    for mode in [
        ResponseMode::TreeSummarize,
        ResponseMode::Refine,
        ResponseMode::Compact,
        ResponseMode::Accumulate,
    ] {
        run(mode, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_lets_out_no_character_of_a_split_think_block() {
    for mode in [
        ResponseMode::TreeSummarize,
        ResponseMode::Refine,
        ResponseMode::Compact,
    ] {
        run(mode, true).await;
    }
}

/// A synthesizer over a peer that answers every call with `message` and `finish`.
async fn answer_with(message: Value, finish: &'static str) -> Result<synthkit::Response, String> {
    let peer = HostilePeer::start(move |_, _| {
        let body = json!({"model": "m", "choices": [{"index": 0, "finish_reason": finish,
            "message": message.clone()}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 256,
                "completion_tokens_details": {"reasoning_tokens": 200}}});
        json_with_headers(200, &[], &body)
    });
    let synth = Synthesizer::builder(model(&peer.base))
        .mode(ResponseMode::Compact)
        .return_steps(true)
        .build()
        .unwrap();
    synth
        .synthesize("How often?", vec![Node::new("a", "It runs daily.")])
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_only_thought_is_an_error_never_an_answer() {
    let e = answer_with(
        json!({"role": "assistant", "content": "<think>Hmm, daily? Let me see.</think>\n"}),
        "stop",
    )
    .await
    .unwrap_err();
    assert!(e.contains("thought and wrote no answer"), "{e}");
    assert!(!e.contains("Empty Response"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unclosed_block_at_a_length_cut_says_the_model_was_still_thinking() {
    let e = answer_with(
        json!({"role": "assistant", "content": "<think>Hmm, daily? Let me count the"}),
        "length",
    )
    .await
    .unwrap_err();
    assert!(e.contains("still thinking"), "{e}");
    assert!(e.contains("thinking_reserve"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_content_beside_content_stays_in_the_steps() {
    let r = answer_with(
        json!({"role": "assistant", "content": "It runs daily.",
            "reasoning_content": format!("{SECRET}: the node says daily")}),
        "stop",
    )
    .await
    .unwrap();
    assert_eq!(r.text, "It runs daily.");
    assert_eq!(r.usage.reasoning_tokens, 200);
    let steps = r.steps.unwrap();
    assert!(steps[0].thinking.contains(SECRET), "{steps:?}");
    assert_eq!(steps[0].reply, "It runs daily.");
}

#[tokio::test]
async fn the_thinking_reserve_raises_max_tokens_and_comes_off_the_prompt_room() {
    use synthkit::testing::ScriptedModel;
    let info = crate::common::fixtures::scripted(2048, 256);
    let nodes: Vec<Node> = (0..6)
        .map(|i| Node::new(format!("n{i}"), "word ".repeat(400)))
        .collect();
    // Without a reserve: max_tokens is num_output, as before.
    let model = Arc::new(ScriptedModel::constant(info.clone(), "ok"));
    let synth = Synthesizer::builder(model.clone())
        .mode(ResponseMode::TreeSummarize)
        .build()
        .unwrap();
    synth.synthesize("q", nodes.clone()).await.unwrap();
    let plain = model.requests();
    assert!(plain.iter().all(|r| r.max_tokens == 256));
    // With one: every call may write 512 tokens more, and prompts leave room for them.
    let model = Arc::new(ScriptedModel::constant(info.clone(), "ok"));
    let synth = Synthesizer::builder(model.clone())
        .mode(ResponseMode::TreeSummarize)
        .thinking_reserve(512)
        .build()
        .unwrap();
    assert_eq!(synth.budget().max_prompt_tokens(), 2048 - 256 - 512);
    synth.synthesize("q", nodes).await.unwrap();
    let reserved = model.requests();
    assert!(reserved.len() > plain.len(), "smaller prompts, more calls");
    // The final call may write 256 + 512; an intermediate one its bounded output (at most
    // its input, at least 64) + 512: the reserve rides on every call.
    assert_eq!(reserved.last().unwrap().max_tokens, 768);
    for r in &reserved {
        assert!((64 + 512..=768).contains(&r.max_tokens), "{r:?}");
        assert!(r.prompt_tokens + r.max_tokens <= 2048, "{r:?}");
    }
    // A variant keeps the reserve without taking it off twice.
    assert_eq!(
        synth
            .to_builder()
            .build()
            .unwrap()
            .budget()
            .max_prompt_tokens(),
        2048 - 256 - 512
    );
    // A reserve that leaves no room for prompts is refused.
    let e = Synthesizer::builder(Arc::new(ScriptedModel::constant(info, "ok")))
        .thinking_reserve(1792)
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("thinking reserve"), "{e}");
}

/// A synthesizer (compact, steps kept) over `peer`, streamed over one node: the streamed
/// text and the response, or the error.
async fn stream_from(
    model: impl synthkit::model::LanguageModel + 'static,
) -> Result<(String, synthkit::Response), String> {
    let synth = Synthesizer::builder(model)
        .mode(ResponseMode::Compact)
        .return_steps(true)
        .build()
        .unwrap();
    let mut s = synth
        .stream("How often?", vec![Node::new("a", "It runs daily.")])
        .await
        .map_err(|e| e.to_string())?;
    let mut streamed = String::new();
    while let Some(d) = s.next().await {
        streamed.push_str(&d.map_err(|e| e.to_string())?);
    }
    let r = s.finish().await.map_err(|e| e.to_string())?;
    Ok((streamed, r))
}

/// An OpenAI-compatible peer that streams `deltas` (whole delta objects) and `finish`.
fn streaming_peer(deltas: Vec<Value>, finish: &'static str) -> HostilePeer {
    HostilePeer::start(move |_, _| {
        let usage = json!({"prompt_tokens": 50, "completion_tokens": 30,
            "completion_tokens_details": {"reasoning_tokens": 20}});
        synthkit_testkit::openai::chat_stream_deltas("m", &deltas, finish, &usage)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_reasoning_content_stays_in_the_steps_never_in_the_answer() {
    let peer = streaming_peer(
        vec![
            json!({"role": "assistant", "content": null, "reasoning_content": SECRET}),
            json!({"reasoning_content": ": the node says daily"}),
            json!({"content": "It runs"}),
            json!({"content": " daily."}),
        ],
        "stop",
    );
    let (streamed, r) = stream_from(model(&peer.base)).await.unwrap();
    assert_eq!(streamed, "It runs daily.");
    assert_eq!(r.text, "It runs daily.");
    assert_eq!(r.usage.reasoning_tokens, 20);
    let steps = r.steps.unwrap();
    assert_eq!(steps[0].thinking, format!("{SECRET}: the node says daily"));
    assert_eq!(steps[0].reply, "It runs daily.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_reasoning_content_only_is_the_thinking_error() {
    let only = || vec![json!({"reasoning_content": "Hmm, daily? Let me see."})];
    let e = stream_from(model(&streaming_peer(only(), "stop").base))
        .await
        .unwrap_err();
    assert!(e.contains("thought and wrote no answer"), "{e}");
    let e = stream_from(model(&streaming_peer(only(), "length").base))
        .await
        .unwrap_err();
    assert!(e.contains("still thinking"), "{e}");
    assert!(e.contains("thinking_reserve"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_thinking_blocks_whole_and_streamed_stay_in_the_steps() {
    use synthkit::backend::anthropic::{AnthropicConfig, AnthropicModel};
    let peer = HostilePeer::start(|_, body: &Value| {
        if body["stream"] == json!(true) {
            return synthkit_testkit::anthropic::message_stream(
                &[("thinking", SECRET), ("text", "It runs daily.")],
                "end_turn",
                30,
            );
        }
        let mut reply = synthkit_testkit::anthropic::message_reply("It runs daily.", 10, 30);
        reply["content"] = json!([{"type": "thinking", "thinking": SECRET, "signature": "x"},
            {"type": "text", "text": "It runs daily."}]);
        json_with_headers(200, &[], &reply)
    });
    let anthropic = || {
        AnthropicModel::new(
            AnthropicConfig::new("m")
                .with_base_url(&peer.base)
                .with_context_window(1024),
        )
        .unwrap()
    };
    let synth = Synthesizer::builder(anthropic())
        .mode(ResponseMode::Compact)
        .return_steps(true)
        .build()
        .unwrap();
    let r = synth
        .synthesize("How often?", vec![Node::new("a", "It runs daily.")])
        .await
        .unwrap();
    assert_eq!(r.text, "It runs daily.");
    assert_eq!(r.steps.unwrap()[0].thinking, SECRET);
    let (streamed, r) = stream_from(anthropic()).await.unwrap();
    assert_eq!(streamed, "It runs daily.");
    assert_eq!(r.steps.unwrap()[0].thinking, SECRET);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_closing_tag_in_a_stream_is_split_or_fails_never_an_answer() {
    let text = format!("Okay, {SECRET}.\n</think>\n\nIt runs daily.");
    // All in one delta: split exactly as the whole reply.
    let peer = streaming_peer(vec![json!({"content": text})], "stop");
    let (streamed, r) = stream_from(model(&peer.base)).await.unwrap();
    assert_eq!(streamed, "It runs daily.");
    assert_eq!(r.steps.unwrap()[0].thinking, format!("Okay, {SECRET}."));
    // The thinking streamed before the closing tag came: the stream fails, saying why.
    let (a, b) = text.split_at(10);
    let peer = streaming_peer(vec![json!({"content": a}), json!({"content": b})], "stop");
    let e = stream_from(model(&peer.base)).await.unwrap_err();
    assert!(e.contains("lone `</think>`"), "{e}");
    assert!(e.contains("--reasoning-format"), "{e}");
    // Not streamed, the same reply is split.
    let body = chat_reply(
        "m",
        &text,
        "stop",
        &json!({"prompt_tokens": 5, "completion_tokens": 9}),
    );
    let peer = HostilePeer::start(move |_, _| json_with_headers(200, &[], &body));
    let synth = Synthesizer::builder(model(&peer.base)).build().unwrap();
    let r = synth
        .synthesize("How often?", vec![Node::new("a", "It runs daily.")])
        .await
        .unwrap();
    assert_eq!(r.text, "It runs daily.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_hit_keeps_the_thinking_the_server_sent_apart() {
    use synthkit::layer::cache::{CachedModel, MemoryCache};
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let peer = HostilePeer::start(move |_, body: &Value| {
        seen.fetch_add(1, Ordering::SeqCst);
        let usage = json!({"prompt_tokens": 50, "completion_tokens": 30,
            "completion_tokens_details": {"reasoning_tokens": 20}});
        if body["stream"] == json!(true) {
            let deltas = [
                json!({"reasoning_content": SECRET}),
                json!({"content": "It runs daily."}),
            ];
            return synthkit_testkit::openai::chat_stream_deltas("m", &deltas, "stop", &usage);
        }
        let message = json!({"role": "assistant", "content": "It runs daily.",
            "reasoning_content": SECRET});
        let body = json!({"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
            "message": message}], "usage": usage});
        json_with_headers(200, &[], &body)
    });
    for streamed in [false, true] {
        let cached = Arc::new(CachedModel::new(
            model(&peer.base),
            Arc::new(MemoryCache::new()),
            "openai",
            "t=0",
        ));
        let before = calls.load(Ordering::SeqCst);
        for round in 0..2 {
            let r = if streamed {
                stream_from(cached.clone()).await.unwrap().1
            } else {
                Synthesizer::builder(cached.clone())
                    .mode(ResponseMode::Compact)
                    .return_steps(true)
                    .build()
                    .unwrap()
                    .synthesize("How often?", vec![Node::new("a", "It runs daily.")])
                    .await
                    .unwrap()
            };
            assert_eq!(
                r.text, "It runs daily.",
                "streamed {streamed}, round {round}"
            );
            assert_eq!(
                r.usage.reasoning_tokens, 20,
                "streamed {streamed}, round {round}"
            );
            let steps = r.steps.unwrap();
            assert_eq!(
                steps[0].thinking, SECRET,
                "streamed {streamed}, round {round}"
            );
        }
        assert_eq!(
            calls.load(Ordering::SeqCst) - before,
            1,
            "the second was a hit"
        );
    }
}
