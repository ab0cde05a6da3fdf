//! `max_prompt_tokens`: every prompt of every packing mode stays under the limit (the
//! count the engine charged, and a recount of the prompt as sent), the modes make more
//! calls than with the whole window, and no text is lost: every node still reaches a
//! prompt.

use std::sync::Arc;

use crate::common::fixtures::PACKING_MODES;
use synthkit::model::ModelInfo;
use synthkit::prompt::PromptBudget;
use synthkit::testing::ScriptedModel;
use synthkit::{Node, ResponseMode, SynthError, Synthesizer};

const WINDOW: usize = 8192;
const OUTPUT: usize = 256;
const LIMIT: usize = 700;

fn nodes() -> Vec<Node> {
    (0..12)
        .map(|i| {
            let words: Vec<String> = (0..120).map(|w| format!("n{i}w{w}")).collect();
            Node::new(format!("node{i}"), words.join(" "))
        })
        .collect()
}

async fn run(mode: ResponseMode, limit: Option<usize>) -> Vec<synthkit::model::ModelRequest> {
    let info = ModelInfo::new("m")
        .with_context_window(WINDOW)
        .with_num_output(OUTPUT);
    let model = Arc::new(ScriptedModel::constant(info, "A short answer."));
    let mut builder = Synthesizer::builder(model.clone()).mode(mode);
    if let Some(limit) = limit {
        builder = builder.max_prompt_tokens(limit);
    }
    let synth = builder.build().unwrap();
    synth
        .synthesize("What do the nodes say?", nodes())
        .await
        .unwrap();
    model.requests()
}

#[tokio::test]
async fn every_prompt_of_every_packing_mode_stays_under_the_limit() {
    let budget = PromptBudget::new(WINDOW, OUTPUT).unwrap();
    for mode in PACKING_MODES {
        let whole = run(mode, None).await;
        let limited = run(mode, Some(LIMIT)).await;
        for r in &limited {
            let recount = budget.count_prompt(&r.prompt);
            assert!(
                r.prompt_tokens <= LIMIT && recount <= LIMIT,
                "{mode}: a {}-token prompt (recount {recount}) over the {LIMIT}-token limit",
                r.prompt_tokens
            );
        }
        // Packing modes fit fewer chunks into each call; refine and accumulate already
        // make one call per chunk, and simple_summarize one call in all.
        let packs = matches!(
            mode,
            ResponseMode::Compact | ResponseMode::TreeSummarize | ResponseMode::CompactAccumulate
        );
        let more = if packs {
            limited.len() > whole.len()
        } else {
            limited.len() >= whole.len()
        };
        assert!(
            more,
            "{mode}: {} calls with the limit, {} without",
            limited.len(),
            whole.len()
        );
        // Nothing lost: every node's last word reaches some prompt.
        let sent: String = limited.iter().map(|r| r.prompt.to_text()).collect();
        for i in 0..12 {
            if mode == ResponseMode::SimpleSummarize {
                break; // simple_summarize truncates to one prompt by design (and says so)
            }
            assert!(
                sent.contains(&format!("n{i}w119")),
                "{mode}: node {i}'s end never sent"
            );
        }
    }
}

#[tokio::test]
async fn a_zero_limit_or_one_below_the_template_is_refused_with_what_to_change() {
    let info = ModelInfo::new("m")
        .with_context_window(WINDOW)
        .with_num_output(OUTPUT);
    let model = Arc::new(ScriptedModel::constant(info, "x"));
    let e = Synthesizer::builder(model.clone())
        .max_prompt_tokens(0)
        .build()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("max_prompt_tokens must be at least 1"),
        "{e}"
    );
    let synth = Synthesizer::builder(model.clone())
        .max_prompt_tokens(20)
        .build()
        .unwrap();
    let e = synth.synthesize("q", nodes()).await.unwrap_err();
    assert!(matches!(e, SynthError::Budget(_)), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("max_prompt_tokens 20") && msg.contains("raise max_prompt_tokens"),
        "{msg}"
    );
    assert!(model.requests().is_empty(), "nothing may be sent");
}
