//! Prompts that repeat a prefix reach the server so that it reuses what it read: the
//! slot that holds the prefix (llama.cpp's `id_slot`), OpenAI's `prompt_cache_key`,
//! Anthropic's `cache_control` breakpoints; and a server that refuses one of them is
//! asked once more without it, and never again with it.
//!
//! Against [`SlotServer`], a loopback llama.cpp-like server that records every call's
//! body in arrival order; the last test asks a real `llama-server` (skipped with a
//! message when it cannot be built here).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use synthkit::backend::anthropic::{AnthropicConfig, AnthropicModel};
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::model::{LanguageModel, ModelRequest};
use synthkit::prompt::{ChatMessage, PromptPrefix, RenderedPrompt, Role};
use synthkit::{Concurrency, Node, ResponseMode, Synthesizer};
use synthkit_testkit::llama;
use synthkit_testkit::slots::{SlotCall, SlotConfig, SlotServer};

fn slot_server(slots: Option<usize>, delay_ms: u64) -> SlotServer {
    SlotServer::start(SlotConfig {
        slots,
        delay: Duration::from_millis(delay_ms),
        ..SlotConfig::default()
    })
}

fn refusing(field: &str) -> SlotServer {
    SlotServer::start(SlotConfig {
        slots: Some(4),
        refuse: Some(field.into()),
        ..SlotConfig::default()
    })
}

async fn openai(server: &SlotServer, config: impl Fn(OpenAiConfig) -> OpenAiConfig) -> OpenAiModel {
    let c = OpenAiConfig::new("slots")
        .with_base_url(server.base())
        .with_context_window(4096)
        .with_num_output(32);
    OpenAiModel::connect(config(c)).await.unwrap()
}

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| {
            Node::new(
                format!("n{i}"),
                format!("Passage {i}: the primary mirror is cleaned every six months."),
            )
        })
        .collect()
}

/// Runs one synthesis of `mode` over `n` nodes with `calls` calls in flight.
async fn synthesize(
    model: Arc<dyn LanguageModel>,
    mode: ResponseMode,
    system: &str,
    n: usize,
    calls: usize,
) {
    Synthesizer::builder(model)
        .mode(mode)
        .concurrency(Concurrency::limit(calls))
        .system_prompt(system)
        .build()
        .unwrap()
        .synthesize("How often is the primary mirror cleaned?", nodes(n))
        .await
        .unwrap();
}

/// The text of a recorded message (a string, or the text of its blocks).
fn text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The text of a recorded call's user message.
fn user_text(call: &SlotCall) -> String {
    call.messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(text)
        .unwrap_or_default()
}

/// The calls as a readable record: each call's slot, and how its system messages and
/// its user message start.
fn order(calls: &[SlotCall]) -> String {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let slot = c.id_slot.map_or("-".to_string(), |s| s.to_string());
            let system: Vec<String> = c
                .messages
                .iter()
                .filter(|m| m["role"] == "system")
                .map(|m| text(m).chars().take(22).collect())
                .collect();
            let start: String = user_text(c).chars().take(22).collect();
            format!("call {i}: id_slot={slot} system={system:?} user={start:?}\n")
        })
        .collect()
}

fn request_with_prefix(system: &str) -> ModelRequest {
    let prompt = RenderedPrompt::Chat(vec![
        ChatMessage::new(Role::System, system),
        ChatMessage::new(Role::User, "How often is the primary mirror cleaned?"),
    ]);
    let prefix = PromptPrefix::leading(&prompt, 1, 0, 10).unwrap();
    synthkit::testing::qa_request(prompt, 0, 16, None).with_extension(prefix)
}

/// The body of one call with a prefix to a server with `slots`, its model configured by
/// `config`.
async fn one_body(slots: Option<usize>, config: impl Fn(OpenAiConfig) -> OpenAiConfig) -> Value {
    let server = slot_server(slots, 0);
    let model = openai(&server, config).await;
    let request = request_with_prefix("Be brief.");
    model.complete(&request).await.unwrap();
    server.calls().remove(0).body
}

#[tokio::test]
async fn the_calls_of_a_synthesis_share_their_prefix_and_their_slot() {
    let server = slot_server(Some(4), 0);
    let model: Arc<dyn LanguageModel> = Arc::new(openai(&server, |c| c).await);
    synthesize(model.clone(), ResponseMode::Accumulate, "Be brief.", 3, 1).await;
    synthesize(model, ResponseMode::Accumulate, "Be very brief.", 2, 1).await;
    let calls = server.calls();
    // The recorded order: the shared prefix (the system messages and the passages'
    // heading) and the slot each call was sent to.
    insta::assert_snapshot!(order(&calls));
    let first = calls[0].id_slot.expect("an id_slot");
    assert!(calls[..3].iter().all(|c| c.id_slot == Some(first)));
    let second = calls[3].id_slot.expect("an id_slot");
    assert_ne!(first, second, "another prefix goes to another slot");
    assert!(calls[3..].iter().all(|c| c.id_slot == Some(second)));
    assert!(
        calls
            .iter()
            .all(|c| c.body.get("prompt_cache_key").is_none())
    );
}

/// One case asked in two modes: the default prompts open alike, so the second call
/// finds the passages already read, in the slot that read them.
#[tokio::test]
async fn compact_and_tree_summarize_share_the_passages_and_the_slot() {
    let server = slot_server(Some(4), 0);
    let model: Arc<dyn LanguageModel> = Arc::new(openai(&server, |c| c).await);
    synthesize(model.clone(), ResponseMode::Compact, "Be brief.", 3, 1).await;
    synthesize(model, ResponseMode::TreeSummarize, "Be brief.", 3, 1).await;
    let calls = server.calls();
    assert_eq!(calls.len(), 2, "{}", order(&calls));
    assert_eq!(calls[0].id_slot, calls[1].id_slot, "{}", order(&calls));
    let (qa, summary) = (user_text(&calls[0]), user_text(&calls[1]));
    let shared = qa
        .char_indices()
        .zip(summary.chars())
        .find(|((_, a), b)| a != b)
        .map_or(qa.len().min(summary.len()), |((i, _), _)| i);
    let passage = "Passage 2: the primary mirror is cleaned every six months.";
    let end = qa.find(passage).expect("the last passage") + passage.len();
    assert!(
        shared >= end,
        "the two prompts part before the last passage: {:?}",
        &qa[..shared]
    );
}

#[tokio::test]
async fn calls_at_once_spread_over_the_slots() {
    let server = slot_server(Some(4), 300);
    let model: Arc<dyn LanguageModel> = Arc::new(openai(&server, |c| c).await);
    // The first call goes alone (its usage calibrates the count), the next four at once.
    synthesize(model, ResponseMode::Accumulate, "Be brief.", 5, 4).await;
    let calls = server.calls();
    assert_eq!(server.most_in_flight(), 4, "{}", order(&calls));
    let mut slots: Vec<u64> = calls.iter().filter_map(|c| c.id_slot).collect();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(slots, vec![0, 1, 2, 3], "{}", order(&calls));
}

#[tokio::test]
async fn prefixes_at_once_take_different_slots_and_come_back_to_them() {
    let server = slot_server(Some(2), 300);
    let model = openai(&server, |c| c).await;
    let (a, b) = (
        request_with_prefix("Prefix A."),
        request_with_prefix("Prefix B."),
    );
    let (ra, rb) = tokio::join!(model.complete(&a), model.complete(&b));
    ra.unwrap();
    rb.unwrap();
    // A third call while both are free again: each prefix goes back to its slot.
    model.complete(&b).await.unwrap();
    model.complete(&a).await.unwrap();
    let calls = server.calls();
    let slot_of = |system: &str| -> Vec<Option<u64>> {
        calls
            .iter()
            .filter(|c| c.messages[0]["content"] == system)
            .map(|c| c.id_slot)
            .collect()
    };
    let (sa, sb) = (slot_of("Prefix A."), slot_of("Prefix B."));
    assert_eq!(sa.len(), 2);
    assert!(sa[0].is_some() && sb[0].is_some());
    assert_ne!(sa[0], sb[0], "{}", order(&calls));
    assert_eq!(sa[0], sa[1], "{}", order(&calls));
    assert_eq!(sb[0], sb[1], "{}", order(&calls));
}

#[tokio::test]
async fn a_refused_id_slot_is_sent_again_without_it_once_and_never_again() {
    let server = refusing("id_slot");
    let model = openai(&server, |c| c).await;
    let request = request_with_prefix("Be brief.");
    for _ in 0..3 {
        model.complete(&request).await.unwrap();
    }
    let calls = server.calls();
    let sent: Vec<(bool, bool)> = calls
        .iter()
        .map(|c| (c.id_slot.is_some(), c.refused))
        .collect();
    assert_eq!(
        sent,
        vec![(true, true), (false, false), (false, false), (false, false)],
        "{}",
        order(&calls)
    );
}

#[tokio::test]
async fn no_id_slot_to_a_server_that_reports_no_slots() {
    let server = slot_server(None, 0);
    let model: Arc<dyn LanguageModel> = Arc::new(openai(&server, |c| c).await);
    synthesize(model, ResponseMode::Accumulate, "Be brief.", 3, 2).await;
    let calls = server.calls();
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|c| c.body.get("id_slot").is_none()));
    // Nor with slots, when the config turns it off.
    let body = one_body(Some(4), |c| c.with_slot_affinity(false)).await;
    assert!(body.get("id_slot").is_none());
}

#[tokio::test]
async fn prompt_cache_keys_follow_the_prefix() {
    let server = slot_server(None, 0);
    let model: Arc<dyn LanguageModel> =
        Arc::new(openai(&server, |c| c.with_prompt_cache_key(Some(true))).await);
    synthesize(model.clone(), ResponseMode::Accumulate, "Be brief.", 2, 1).await;
    synthesize(model, ResponseMode::Accumulate, "Be very brief.", 1, 1).await;
    let keys: Vec<String> = server
        .calls()
        .iter()
        .map(|c| c.body["prompt_cache_key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), 3);
    assert_eq!(keys[0], keys[1], "the same prefix, the same key");
    assert_ne!(keys[0], keys[2], "another system prompt, another key");
    assert!(keys.iter().all(|k| k.len() == 32));
    // By default only OpenAI's own server gets one.
    let body = one_body(None, |c| c).await;
    assert!(body.get("prompt_cache_key").is_none());
}

#[tokio::test]
async fn a_refused_prompt_cache_key_falls_back_once() {
    let server = refusing("prompt_cache_key");
    let model = openai(&server, |c| c.with_prompt_cache_key(Some(true))).await;
    let request = request_with_prefix("Be brief.");
    for _ in 0..2 {
        model.complete(&request).await.unwrap();
    }
    let calls = server.calls();
    let keyed: Vec<bool> = calls
        .iter()
        .map(|c| c.body.get("prompt_cache_key").is_some())
        .collect();
    assert_eq!(keyed, vec![true, false, false], "{}", order(&calls));
    // The slot hint was not what the server refused: it is still sent.
    assert!(calls.iter().all(|c| c.id_slot.is_some()));
}

async fn anthropic(server: &SlotServer) -> Arc<dyn LanguageModel> {
    let config = AnthropicConfig::new("claude-sonnet-4-5")
        .with_base_url(server.base())
        .with_context_window(8192)
        .with_num_output(32);
    Arc::new(AnthropicModel::connect(config).await.unwrap())
}

#[tokio::test]
async fn anthropic_marks_the_prefix_only_when_it_is_long_enough_to_be_cached() {
    let server = slot_server(Some(2), 0);
    let model = anthropic(&server).await;
    let long = "Answer from the passages only, citing each one you use. ".repeat(120);
    synthesize(model.clone(), ResponseMode::Accumulate, &long, 2, 1).await;
    synthesize(model, ResponseMode::Accumulate, "Be brief.", 1, 1).await;
    let calls = server.calls();
    assert_eq!(calls.len(), 3);
    for c in &calls[..2] {
        let system = c.body["system"].as_array().expect("system as blocks");
        assert_eq!(system.len(), 1);
        assert_eq!(system[0]["cache_control"]["type"], "ephemeral");
        assert!(
            system[0]["text"]
                .as_str()
                .unwrap()
                .starts_with("Answer from")
        );
        // One breakpoint, on the prefix only.
        assert_eq!(c.body.to_string().matches("cache_control").count(), 1);
        // The Messages API takes no `id_slot`.
        assert!(c.id_slot.is_none());
    }
    assert!(
        calls[2].body["system"].is_string(),
        "a short prefix is not marked"
    );
    assert!(!calls[2].body.to_string().contains("cache_control"));
}

#[tokio::test]
async fn a_refused_cache_control_falls_back_once() {
    let server = refusing("cache_control");
    let model = anthropic(&server).await;
    let long = "Answer from the passages only. ".repeat(300);
    synthesize(model, ResponseMode::Accumulate, &long, 2, 1).await;
    let marked: Vec<(bool, bool)> = server
        .calls()
        .iter()
        .map(|c| (c.body.to_string().contains("cache_control"), c.refused))
        .collect();
    assert_eq!(marked, vec![(true, true), (false, false), (false, false)]);
}

/// A real llama-server takes `id_slot` on its OpenAI API and reuses the slot's prefix:
/// the second call with the same long system message reports cached prompt tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_llama_server_reuses_the_slot_of_a_shared_prefix() {
    let Some(server) = llama::server_with_ctx(2048) else {
        return;
    };
    let config = OpenAiConfig::new("tiny")
        .with_base_url(&server.base)
        .with_timeout(Duration::from_secs(120));
    let model = OpenAiModel::connect(config).await.unwrap();
    if model.server_slots().is_none() {
        // A server given by SYNTHKIT_LLAMA_SERVER that does not report its slots.
        return;
    }
    // The server takes the field (a refusal would only be seen as a silent second send).
    let said = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.base))
        .json(
            &serde_json::json!({"messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2, "id_slot": 1}),
        )
        .send()
        .await
        .unwrap();
    assert!(said.status().is_success(), "{}", said.status());
    let system = "You answer in one short sentence from the passages you are given. ".repeat(8);
    let a = request_with_prefix(&system);
    let first = model.complete(&a).await.unwrap();
    let second = model.complete(&a).await.unwrap();
    let cached = second
        .usage
        .map(|u| u.cached_prompt_tokens)
        .unwrap_or_default();
    assert!(
        cached > 0,
        "the second call reused nothing: {:?} then {:?}",
        first.usage,
        second.usage
    );
}
