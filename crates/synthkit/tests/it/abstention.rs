//! "Not in the sources" and the small-model guards, against scripted models: a reply
//! that says the sources do not answer, a refine chain that never finds anything, a tree
//! whose summaries all abstain, a refine reply that only talks about the answer, a summary
//! that would outgrow its input, a refine reply whose facts are in no passage shown in
//! place of a grounded answer; streamed and not, through a loopback server too.

use std::sync::Arc;

use futures::StreamExt;
use synthkit::model::{FinishReason, ModelRequest};
use synthkit::node::Node;
use synthkit::observe::OnTruncation;
use synthkit::prompt::TemplateKind;
use synthkit::testing::ScriptedModel;
use synthkit::text::abstention::ReplyReading;
use synthkit::{Response, ResponseMode, Synthesizer, SynthesizerBuilder};

fn info() -> synthkit::model::ModelInfo {
    crate::common::fixtures::scripted(4096, 256)
}

fn nodes(texts: &[&str]) -> Vec<Node> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Node::new(format!("n{i}"), *t))
        .collect()
}

/// A model that answers the call at `index` (its step index) with `replies[index]`.
fn by_index(replies: &'static [&'static str]) -> ScriptedModel {
    ScriptedModel::new(info(), move |r: &ModelRequest| {
        Ok(replies
            .get(r.step().index)
            .copied()
            .unwrap_or("spare")
            .to_string())
    })
}

fn build(
    model: &ScriptedModel,
    mode: ResponseMode,
    configure: impl FnOnce(SynthesizerBuilder) -> SynthesizerBuilder,
) -> Synthesizer {
    configure(
        Synthesizer::builder(Arc::new(model.clone()))
            .mode(mode)
            .return_steps(true),
    )
    .build()
    .unwrap()
}

/// The response, whole and streamed (which must agree, text and `answerable`).
async fn both(synth: &Synthesizer, texts: &[&str]) -> Response {
    let whole = synth.synthesize("When?", nodes(texts)).await.unwrap();
    let mut stream = synth.stream("When?", nodes(texts)).await.unwrap();
    let mut streamed = String::new();
    while let Some(d) = stream.next().await {
        streamed.push_str(&d.unwrap());
    }
    let done = stream.finish().await.unwrap();
    assert_eq!(streamed, whole.text);
    assert_eq!(done.text, whole.text);
    assert_eq!(done.answerable, whole.answerable);
    whole
}

fn kinds(model: &ScriptedModel) -> Vec<TemplateKind> {
    model
        .requests()
        .iter()
        .map(|r| r.source().unwrap().kind)
        .collect()
}

#[tokio::test]
async fn a_refine_step_that_finds_nothing_asks_the_next_chunk_the_question_again() {
    let model = by_index(&[
        "Not in the sources.",
        "Every six months, in spring and in autumn, by the keeper of the dome.",
        "The original answer remains accurate.",
    ]);
    let synth = build(&model, ResponseMode::Refine, |b| b);
    let r = both(
        &synth,
        &["The dome.", "Cleaned every six months.", "Other."],
    )
    .await;
    assert!(r.answerable);
    assert_eq!(
        r.text,
        "Every six months, in spring and in autumn, by the keeper of the dome."
    );
    // The second call is a question, not a refinement of "Not in the sources".
    assert_eq!(
        &kinds(&model)[..3],
        &[TemplateKind::Qa, TemplateKind::Qa, TemplateKind::Refine]
    );
    let steps = r.steps.unwrap();
    assert_eq!(steps[0].not_used, Some(ReplyReading::NotInSources));
    assert!(!steps[0].kept_previous);
    assert_eq!(steps[1].not_used, None);
    // The last reply only talked about the answer: the answer was kept, and said so.
    assert_eq!(steps[2].not_used, Some(ReplyReading::TalksAboutAnswer));
    assert!(steps[2].kept_previous);
}

#[tokio::test]
async fn a_chain_that_never_finds_anything_is_not_in_the_sources() {
    let model =
        ScriptedModel::constant(info(), "**Not in the sources.** The text is about ferries.");
    let synth = build(&model, ResponseMode::Refine, |b| {
        b.not_in_sources_answer("Nothing here.")
    });
    let r = both(&synth, &["One.", "Two.", "Three."]).await;
    assert!(!r.answerable);
    assert_eq!(r.text, "Nothing here.");
    assert_eq!(r.usage.calls, 3);
    assert!(kinds(&model).iter().all(|k| *k == TemplateKind::Qa));
}

#[tokio::test]
async fn the_default_answer_and_a_short_abstention_in_other_words() {
    let model = ScriptedModel::constant(info(), "Not in the sources");
    let r = both(&build(&model, ResponseMode::Compact, |b| b), &["One."]).await;
    assert!(!r.answerable);
    assert_eq!(r.text, "The sources do not answer this question.");

    // Other words: the model's text stays (a stream has shown it), the flag says so.
    let model = ScriptedModel::constant(info(), "The passages do not say when.");
    let r = both(&build(&model, ResponseMode::Compact, |b| b), &["One."]).await;
    assert!(!r.answerable);
    assert_eq!(r.text, "The passages do not say when.");

    // A long answer that lacks one detail is an answer.
    let long = "The mirror is cleaned every six months by the keeper, who climbs to the dome \
        with a ladder and a bucket, works through the night, and closes the shutters at dawn; \
        the passages do not mention what the keeper is paid for this work.";
    let model = ScriptedModel::constant(info(), long);
    let r = both(&build(&model, ResponseMode::Compact, |b| b), &["One."]).await;
    assert!(r.answerable);
    assert_eq!(r.text, long);
}

#[tokio::test]
async fn no_nodes_and_modes_that_ask_nothing() {
    let model = ScriptedModel::constant(info(), "Not in the sources.");
    let r = build(&model, ResponseMode::Compact, |b| b)
        .synthesize("When?", vec![])
        .await
        .unwrap();
    assert!(!r.answerable);
    assert_eq!(r.text, "Empty Response");
    // Generation answers the query alone: its reply is not read.
    let r = both(&build(&model, ResponseMode::Generation, |b| b), &["One."]).await;
    assert!(r.answerable);
    assert_eq!(r.text, "Not in the sources.");
}

#[tokio::test]
async fn tree_summaries_that_find_nothing_are_left_out_of_the_next_level() {
    // Three nodes of 3,000 tokens each: one summary prompt per node in a 4,096 window.
    let text = "word ".repeat(3000);
    let texts = [text.as_str(), text.as_str(), text.as_str()];
    let model = ScriptedModel::new(info(), |r: &ModelRequest| {
        let s = r.step();
        Ok(match (s.level, s.index) {
            (0, 1) => "The keeper cleans it every six months.".to_string(),
            (0, _) => "Not in the sources.".to_string(),
            _ => "Every six months.".to_string(),
        })
    });
    let synth = build(&model, ResponseMode::TreeSummarize, |b| b);
    let r = both(&synth, &texts).await;
    assert!(r.answerable);
    assert_eq!(r.text, "Every six months.");
    let requests = model.requests();
    let last = requests.last().unwrap();
    let context = last.source().unwrap().variable("context_str").unwrap();
    assert_eq!(context, "The keeper cleans it every six months.");

    // Every summary found nothing: no call above them.
    let model = ScriptedModel::constant(info(), "Not in the sources.");
    let synth = build(&model, ResponseMode::TreeSummarize, |b| b);
    let r = synth.synthesize("When?", nodes(&texts)).await.unwrap();
    assert!(!r.answerable);
    assert_eq!(r.text, "The sources do not answer this question.");
    assert_eq!(r.usage.calls, 3);
    let steps = r.steps.unwrap();
    assert!(
        steps
            .iter()
            .all(|s| s.not_used == Some(ReplyReading::NotInSources))
    );
}

#[tokio::test]
async fn a_final_refine_reply_about_the_answer_keeps_it_streamed_or_not() {
    for last in [
        "The existing answer is already correct.",
        "Not in the sources.",
        "The new passages do not mention the mirror.",
    ] {
        let replies: &'static [&'static str] = Box::leak(Box::new([
            "Every six months, said the keeper of the dome, in spring and autumn.",
            "Every six months, in spring and in autumn, by the keeper of the dome.",
            last,
        ]));
        let model = by_index(replies);
        let synth = build(&model, ResponseMode::Refine, |b| b);
        let r = both(&synth, &["One.", "Two.", "Three."]).await;
        assert!(r.answerable, "{last}");
        assert_eq!(r.text, replies[1], "{last}");
        let steps = r.steps.unwrap();
        assert!(steps[2].kept_previous, "{last}");
    }
}

/// The mirror's passages: the first says how often, the second says nothing of it.
const CLEANED: &str = "The keeper cleans the mirror every 6 months.";
const DOME: &str = "The dome opens at dusk and closes at dawn.";
const GROUNDED: &str = "The mirror is cleaned every 6 months.";
const UNGROUNDED: &str = "It is cleaned every 14 weeks in 1935.";

async fn ask(synth: &Synthesizer, texts: &[&str]) -> Response {
    synth
        .synthesize("How often is the mirror cleaned?", nodes(texts))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_final_refine_reply_with_no_fact_in_the_sources_keeps_a_grounded_answer() {
    let model = by_index(&[GROUNDED, UNGROUNDED]);
    let synth = build(&model, ResponseMode::Refine, |b| b);
    let r = ask(&synth, &[CLEANED, DOME]).await;
    assert!(r.answerable);
    assert_eq!(r.text, GROUNDED);
    assert_eq!(
        r.grounding.as_ref().map(|g| g.status),
        Some(synthkit::grounding::GroundingStatus::Supported)
    );
    let steps = r.steps.unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].not_used, None);
    assert_eq!(steps[1].not_used, Some(ReplyReading::Ungrounded));
    assert!(steps[1].kept_previous);
    let json = serde_json::to_value(&steps[1]).unwrap();
    assert_eq!(json["not_used"], "ungrounded");
    assert_eq!(json["kept_previous"], true);

    // Streamed, the final reply has been shown as it came: it stays, and the grounding
    // gate flags it.
    let mut stream = synth
        .stream("How often is the mirror cleaned?", nodes(&[CLEANED, DOME]))
        .await
        .unwrap();
    let mut streamed = String::new();
    while let Some(d) = stream.next().await {
        streamed.push_str(&d.unwrap());
    }
    let done = stream.finish().await.unwrap();
    assert_eq!(streamed, UNGROUNDED);
    assert_eq!(
        done.grounding.map(|g| g.status),
        Some(synthkit::grounding::GroundingStatus::Unsupported)
    );
}

#[tokio::test]
async fn an_intermediate_refine_reply_with_no_fact_in_the_sources_keeps_the_answer() {
    // Streamed or not: the step before the last is read whole either way.
    let model = by_index(&[
        GROUNDED,
        UNGROUNDED,
        "The original answer remains accurate.",
    ]);
    let synth = build(&model, ResponseMode::Refine, |b| b);
    let r = both(&synth, &[CLEANED, DOME, "The keeper lives in the village."]).await;
    assert_eq!(r.text, GROUNDED);
    // The last step refined the kept answer, not the set-aside reply.
    let requests = model.requests();
    let existing = requests[2].source().unwrap().variable("existing_answer");
    assert_eq!(existing, Some(GROUNDED));
    let steps = r.steps.unwrap();
    assert_eq!(steps[1].not_used, Some(ReplyReading::Ungrounded));
    assert!(steps[1].kept_previous);
    assert_eq!(steps[2].not_used, Some(ReplyReading::TalksAboutAnswer));
}

#[tokio::test]
async fn a_refine_reply_grounded_in_its_own_passage_is_used() {
    let model = by_index(&[GROUNDED, UNGROUNDED]);
    let synth = build(&model, ResponseMode::Refine, |b| b);
    let r = ask(
        &synth,
        &[CLEANED, "Since 1935 it has been cleaned every 14 weeks."],
    )
    .await;
    assert_eq!(r.text, UNGROUNDED);
    let steps = r.steps.unwrap();
    assert!(steps.iter().all(|s| s.not_used.is_none()));
    assert!(steps.iter().all(|s| !s.kept_previous));
}

#[tokio::test]
async fn an_ungrounded_answer_so_far_is_replaced_as_before() {
    // The first answer's facts are in no passage either: there is nothing to keep.
    let model = by_index(&["The mirror is cleaned every 3 years.", UNGROUNDED]);
    let synth = build(&model, ResponseMode::Refine, |b| b);
    let r = ask(&synth, &[CLEANED, DOME]).await;
    assert_eq!(r.text, UNGROUNDED);
    assert!(r.steps.unwrap().iter().all(|s| s.not_used.is_none()));

    // A reply with no fact to check is used too.
    let model = by_index(&[GROUNDED, "It is cleaned regularly by the keeper."]);
    let synth = build(&model, ResponseMode::Refine, |b| b);
    let r = ask(&synth, &[CLEANED, DOME]).await;
    assert_eq!(r.text, "It is cleaned regularly by the keeper.");
}

#[tokio::test]
async fn compact_keeps_a_grounded_answer_over_an_ungrounded_reply() {
    // Two nodes of about 3,000 tokens each: one compact prompt per node in a 4,096
    // window, the fact at the first one's start, nothing of it in the second.
    let first = format!("{CLEANED} {}", "The keeper climbs the stairs. ".repeat(500));
    let second = DOME.repeat(300);
    let model = by_index(&[GROUNDED, UNGROUNDED, UNGROUNDED, UNGROUNDED]);
    let synth = build(&model, ResponseMode::Compact, |b| b);
    let r = ask(&synth, &[&first, &second]).await;
    let steps = r.steps.unwrap();
    assert!(steps.len() >= 2, "{}", steps.len());
    assert_eq!(r.text, GROUNDED);
    for s in &steps[1..] {
        assert_eq!(s.not_used, Some(ReplyReading::Ungrounded));
        assert!(s.kept_previous);
    }
}

#[tokio::test]
async fn intermediate_outputs_are_bounded_by_their_input() {
    // Short nodes, a large output reserve: refine's steps before the last may write at
    // most what they read (at least 64 tokens); the last call keeps the whole reserve.
    let model = ScriptedModel::constant(info(), "An answer.");
    let synth = build(&model, ResponseMode::Refine, |b| {
        b.budget(synthkit::prompt::PromptBudget::new(4096, 1024).unwrap())
    });
    synth
        .synthesize("When?", nodes(&["One.", "Two.", "Three."]))
        .await
        .unwrap();
    let max: Vec<usize> = model.requests().iter().map(|r| r.max_tokens).collect();
    assert_eq!(max, vec![64, 64, 1024]);
}

#[tokio::test]
async fn the_output_bound_is_the_input_counted_exactly_up_to_the_reserve() {
    // A first step that reads fewer tokens than the reserve may write as many as it
    // reads, to the token; one that reads the reserve or more keeps the whole reserve.
    let tokenizer = synthkit::text::tokenizer::default_tokenizer();
    for (words, reserve) in [(90, 100), (99, 100), (100, 100), (400, 100)] {
        let text = "mirror ".repeat(words);
        let read = tokenizer.count(text.trim());
        let model = ScriptedModel::constant(info(), "An answer.");
        let synth = build(&model, ResponseMode::Refine, |b| {
            b.budget(synthkit::prompt::PromptBudget::new(4096, reserve).unwrap())
        });
        synth
            .synthesize("When?", nodes(&[&text, "Two."]))
            .await
            .unwrap();
        let first = model.requests()[0].max_tokens;
        let expected = if read < reserve {
            read.max(64)
        } else {
            reserve
        };
        assert_eq!(first, expected, "{words} words, {read} tokens");
    }
}

#[tokio::test]
async fn an_expanding_answer_is_cut_at_the_size_of_its_input() {
    // A model that writes as much as it may (a server cuts it at max_tokens): refine's
    // steps before the last may write at most what they read, and a reply cut there is
    // no truncation, even where truncations are errors; the last call keeps the reserve.
    let text = "The keeper of the dome cleans the mirror. ".repeat(30);
    let texts = [text.as_str(), text.as_str(), text.as_str()];
    let model = ScriptedModel::new(info(), |r: &ModelRequest| {
        Ok(if r.max_tokens < 3000 {
            "story ".repeat(r.max_tokens)
        } else {
            "Every six months.".to_string()
        })
    })
    .with_finish_reason(|r: &ModelRequest| {
        if r.max_tokens < 3000 {
            FinishReason::Length
        } else {
            FinishReason::Stop
        }
    });
    let synth = build(&model, ResponseMode::Refine, |b| {
        b.budget(synthkit::prompt::PromptBudget::new(8192, 3000).unwrap())
            .on_truncation(OnTruncation::Error)
    });
    let r = synth.synthesize("When?", nodes(&texts)).await.unwrap();
    assert_eq!(r.usage.truncated_calls, 0);
    assert_eq!(r.text, "Every six months.");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for step in &requests[..2] {
        let source = step.source().unwrap();
        let read: usize = ["context_str", "context_msg", "existing_answer"]
            .iter()
            .filter_map(|v| source.variable(v))
            .map(str::len)
            .sum();
        // The bound is what the step reads: far below the reserve, near a quarter of
        // its characters.
        assert!(step.max_tokens < 3000, "{}", step.max_tokens);
        assert!(
            step.max_tokens > read / 8,
            "{} for {read} bytes",
            step.max_tokens
        );
    }
    assert_eq!(requests[2].max_tokens, 3000);
}

#[tokio::test]
async fn a_summary_may_not_outgrow_what_it_summarises() {
    // A 4,096 window with a 3,000-token reserve leaves about 1,000 tokens of context a
    // prompt, so the tree has several leaves: each leaf's output limit is the size of
    // the context it reads, far under the reserve; the last call keeps the reserve.
    let text = "The keeper of the dome cleans the mirror. ".repeat(60);
    let texts = [text.as_str(), text.as_str(), text.as_str()];
    let model = ScriptedModel::new(info(), |r: &ModelRequest| {
        Ok(if r.step().level == 0 {
            "story ".repeat(r.max_tokens / 4)
        } else {
            "Every six months.".to_string()
        })
    });
    let synth = build(&model, ResponseMode::TreeSummarize, |b| {
        b.budget(synthkit::prompt::PromptBudget::new(4096, 3000).unwrap())
            .on_truncation(OnTruncation::Error)
    });
    let r = synth.synthesize("When?", nodes(&texts)).await.unwrap();
    assert_eq!(r.usage.truncated_calls, 0);
    assert_eq!(r.text, "Every six months.");
    let requests = model.requests();
    let leaves: Vec<&ModelRequest> = requests.iter().filter(|r| r.step().level == 0).collect();
    assert!(leaves.len() >= 2, "{}", leaves.len());
    for leaf in leaves {
        let input = leaf.source().unwrap().variable("context_str").unwrap();
        // The bound is the context's own size: far below the reserve, near a quarter
        // of its characters.
        assert!(leaf.max_tokens < 1100, "{}", leaf.max_tokens);
        assert!(leaf.max_tokens > input.len() / 8, "{}", leaf.max_tokens);
    }
    assert_eq!(requests.last().unwrap().max_tokens, 3000);
}

#[cfg(feature = "openai")]
#[tokio::test]
async fn not_in_the_sources_through_a_loopback_server() {
    use serde_json::{Value, json};
    use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
    use synthkit_testkit::hostile::{HostilePeer, json_with_headers};
    use synthkit_testkit::openai::{chat_reply, chat_stream};
    let peer = HostilePeer::start(move |_, body: &Value| {
        let usage = json!({"prompt_tokens": 50, "completion_tokens": 5});
        if body["stream"] == json!(true) {
            return chat_stream("m", &["Not", " in the", " sources", "."], "stop", &usage);
        }
        json_with_headers(
            200,
            &[],
            &chat_reply("m", "Not in the sources.", "stop", &usage),
        )
    });
    let model = OpenAiModel::new(
        OpenAiConfig::new("m")
            .with_base_url(&peer.base)
            .with_context_window(1024),
    )
    .unwrap();
    let synth = Synthesizer::builder(model)
        .not_in_sources_answer("No idea, sorry.")
        .build()
        .unwrap();
    let r = both(&synth, &["The dome opens at dusk."]).await;
    assert!(!r.answerable);
    assert_eq!(r.text, "No idea, sorry.");
}

#[tokio::test]
async fn accumulates_labels_are_not_claims_the_grounding_check_looks_up() {
    // Each answer is in its source; the labels `Response 1:`, `Response 2:` (numbers no
    // source holds) are the engine's text, not the model's claims.
    let model = by_index(&[GROUNDED, "The dome opens at dusk."]);
    let synth = build(&model, ResponseMode::Accumulate, |b| {
        b.on_unsupported(synthkit::grounding::OnUnsupported::Abstain)
    });
    let r = both(&synth, &[CLEANED, DOME]).await;
    assert!(r.answerable, "{}", r.text);
    assert!(r.text.starts_with("Response 1: "), "{}", r.text);
    let g = r.grounding.expect("checked");
    assert_eq!(
        g.status,
        synthkit::grounding::GroundingStatus::Supported,
        "{g:?}"
    );
    assert!(g.unsupported.is_empty(), "{g:?}");

    // A claim in no source is still found among the labels.
    let model = by_index(&[GROUNDED, UNGROUNDED]);
    let synth = build(&model, ResponseMode::Accumulate, |b| b);
    let g = both(&synth, &[CLEANED, DOME])
        .await
        .grounding
        .expect("checked");
    assert_eq!(
        g.status,
        synthkit::grounding::GroundingStatus::Partly,
        "{g:?}"
    );
    assert!(g.unsupported.iter().any(|u| u.contains("14")), "{g:?}");
    assert!(
        !g.unsupported.iter().any(|u| u == "2" || u == "Response"),
        "{g:?}"
    );
}
