//! Context-overflow self-correction: a server whose tokenizer counts more than ours rejects
//! prompts as too long; the synthesis shrinks its budget, re-packs that step and completes.

use crate::common::fixtures::Events;
use std::sync::Arc;

use synthkit::model::{ModelError, ModelInfo};
use synthkit::prompt::PromptBudget;
use synthkit::testing::ScriptedModel;
use synthkit::{Node, ResponseMode, SynthError, SynthEvent, Synthesizer};

const WINDOW: usize = 1024;
const OUTPUT: usize = 128;

/// Counts 30% more tokens than we do, like a model with another tokenizer.
fn server_tokens(ours: usize) -> u64 {
    (ours as u64 * 13).div_ceil(10)
}

fn strict_server() -> ScriptedModel {
    ScriptedModel::new(ModelInfo::new("strict"), |r| {
        let theirs = server_tokens(r.prompt_tokens);
        if theirs + OUTPUT as u64 > WINDOW as u64 {
            return Err(ModelError::ContextTooLong {
                message: "request exceeds the available context size".into(),
                prompt_tokens: Some(theirs),
                context_window: Some(WINDOW as u64),
            });
        }
        Ok(format!("answer {} {}", r.step().level, r.step().index))
    })
}

fn nodes() -> Vec<Node> {
    (0..6)
        .map(|i| {
            Node::new(
                format!("n{i}"),
                format!("chunk {i} ") + &"lorem ipsum dolor sit amet ".repeat(150),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_packing_mode_corrects_and_completes() {
    for mode in crate::common::fixtures::PACKING_MODES {
        let mut texts = Vec::new();
        for streaming in [false, true] {
            let model = strict_server();
            let events = Arc::new(Events::default());
            let s = Synthesizer::builder(Arc::new(model.clone()))
                .mode(mode)
                .budget(PromptBudget::new(WINDOW, OUTPUT).unwrap())
                .observer(events.clone())
                .build()
                .unwrap();
            let text = if streaming {
                s.stream("what?", nodes())
                    .await
                    .unwrap()
                    .finish()
                    .await
                    .map_err(|e| format!("{mode} streamed: {e}"))
                    .unwrap()
                    .text
            } else {
                s.synthesize("what?", nodes())
                    .await
                    .map_err(|e| format!("{mode}: {e}"))
                    .unwrap()
                    .text
            };
            assert!(
                text.contains("answer"),
                "{mode} streaming={streaming}: {text}"
            );
            texts.push(text);
            let corrected = events
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|e| matches!(e, SynthEvent::ContextCorrected { .. }))
                .count();
            assert!(corrected >= 1, "{mode}: no correction event");
            assert!(corrected <= 4, "{mode}: {corrected} corrections");
            // Every word of every node still reached an accepted prompt (simple_summarize
            // truncates by design).
            if mode != ResponseMode::SimpleSummarize {
                let accepted: Vec<String> = model
                    .requests()
                    .iter()
                    .filter(|r| server_tokens(r.prompt_tokens) + OUTPUT as u64 <= WINDOW as u64)
                    .map(|r| r.prompt.to_text())
                    .collect();
                for n in nodes() {
                    let head = n
                        .text
                        .split_whitespace()
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" ");
                    assert!(
                        accepted.iter().any(|p| p.contains(&head)),
                        "{mode}: {head} never accepted"
                    );
                }
            }
        }
        assert_eq!(texts[0], texts[1], "{mode}: streamed text differs");
    }
}

#[tokio::test]
async fn corrections_are_bounded() {
    // A server that rejects everything: the synthesis stops with the typed error.
    let model = ScriptedModel::new(ModelInfo::new("never"), |_| {
        Err(ModelError::ContextTooLong {
            message: "no".into(),
            prompt_tokens: None,
            context_window: None,
        })
    });
    let s = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::TreeSummarize)
        .budget(PromptBudget::new(WINDOW, OUTPUT).unwrap())
        .build()
        .unwrap();
    let err = s.synthesize("q", nodes()).await.unwrap_err();
    assert!(err.to_string().contains("too long"), "{err}");
    assert!(
        model.requests().len() < 200,
        "{} requests",
        model.requests().len()
    );
}

#[tokio::test]
async fn generation_cannot_shrink_and_says_so() {
    let model = strict_server();
    let s = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Generation)
        .budget(PromptBudget::new(WINDOW, OUTPUT).unwrap())
        .build()
        .unwrap();
    let q = "why ".repeat(800);
    let err = s.synthesize(&q, vec![]).await.unwrap_err();
    assert!(err.to_string().contains("too long"), "{err}");
}

#[tokio::test]
async fn a_reply_past_max_tokens_is_blamed_not_the_template() {
    // A model that ignores max_tokens: its first answer (about 1,200 of our tokens, far
    // past the 128 asked) leaves refine's next prompt no room. The error names the answer
    // carried over, not the template, and says what to change.
    let model = ScriptedModel::new(ModelInfo::new("long-winded"), |r| {
        Ok("and so on ".repeat(400) + &r.step().index.to_string())
    });
    let s = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Refine)
        .budget(PromptBudget::new(WINDOW, OUTPUT).unwrap())
        .build()
        .unwrap();
    let err = s.synthesize("what?", nodes()).await.unwrap_err();
    let SynthError::NoRoomForContext {
        answer_tokens,
        server_shrink,
        template_tokens,
        budget,
        ..
    } = &err
    else {
        panic!("expected NoRoomForContext, got {err:?}");
    };
    assert!(*answer_tokens > 800, "{err}");
    assert_eq!(*server_shrink, 0);
    assert!(*template_tokens < 200, "{err}");
    assert_eq!(*budget, WINDOW - OUTPUT);
    let msg = err.to_string();
    assert!(msg.contains("the answer so far"), "{msg}");
    assert!(msg.contains("lower num_output"), "{msg}");
    assert!(!msg.contains("shorten the query"), "{msg}");
    assert_eq!(
        model.requests().len(),
        1,
        "no prompt was sent over the budget"
    );
}

#[tokio::test]
async fn a_server_with_less_room_is_blamed_not_the_template() {
    // A server that accepts only 40-token prompts: after its rejections the budget shrinks
    // until not even the template fits; the error names the server's smaller room and
    // that the fixed part alone is over it.
    let model = ScriptedModel::new(ModelInfo::new("tiny-slot"), |r| {
        if r.prompt_tokens > 40 {
            return Err(ModelError::ContextTooLong {
                message: "request exceeds the available context size".into(),
                prompt_tokens: Some(r.prompt_tokens as u64),
                context_window: Some(40 + OUTPUT as u64),
            });
        }
        Ok("fine".into())
    });
    let s = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Compact)
        .budget(PromptBudget::new(WINDOW, OUTPUT).unwrap())
        .build()
        .unwrap();
    let err = s.synthesize("what?", nodes()).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, SynthError::NoRoomForContext { server_shrink, answer_tokens: 0, .. } if server_shrink > 0),
        "{err:?}"
    );
    assert!(msg.contains("tokens the server takes"), "{msg}");
    assert!(msg.contains("shorten the query"), "{msg}");
}
