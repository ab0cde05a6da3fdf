//! Nodes with images (issue 34): each image goes to the model at its node's place, as an
//! image part of the user message, counted exactly and never cut; a model without vision
//! is refused before any call.

use synthkit::model::ModelInfo;
use synthkit::node::{ImageCost, NodeImage};
use synthkit::prompt::{ContentPart, RenderedPrompt, Role};
use synthkit::testing::ScriptedModel;
use synthkit::{Node, ResponseMode, SynthError, Synthesizer};
use synthkit_testkit::png::png;

fn image(w: u32, h: u32, seed: u8) -> NodeImage {
    NodeImage::from_bytes(&png(w, h, seed), None).unwrap()
}

fn chat_model(window: usize, output: usize, answer: &str) -> ScriptedModel {
    let info = crate::common::fixtures::scripted(window, output).with_chat(true);
    ScriptedModel::constant(info, answer)
}

/// A text node, an image node with a caption, a text node.
fn mixed() -> Vec<Node> {
    vec![
        Node::new("t1", "The sky is blue."),
        Node::new("photo-1", "A photo of the sky at noon.").with_image(image(64, 64, 1)),
        Node::new("t2", "Grass is green."),
    ]
}

/// The user messages' parts of `prompt`, as strings (`<image N>` for an image of N
/// tokens).
fn parts(prompt: &RenderedPrompt) -> Vec<String> {
    let RenderedPrompt::Chat(messages) = prompt else {
        panic!("images need a chat prompt: {prompt:?}");
    };
    messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.parts())
        .map(|p| match p {
            ContentPart::Text(t) => t.to_string(),
            ContentPart::Image(i) => format!("<image {}>", i.tokens),
        })
        .collect()
}

#[tokio::test]
async fn the_image_stands_at_its_nodes_place_with_its_text_and_boundaries_kept() {
    let model = chat_model(4096, 256, "Blue.");
    let s = Synthesizer::builder(model.clone()).build().unwrap();
    let r = s
        .synthesize("What colour is the sky?", mixed())
        .await
        .unwrap();
    assert_eq!(r.text, "Blue.");
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let parts = parts(&requests[0].prompt);
    // 64x64 is one OpenAI tile: 85 + 170 tokens (no exact counter here).
    let at = parts.iter().position(|p| p == "<image 255>").unwrap();
    let (before, after) = (&parts[at - 1], &parts[at + 1]);
    assert!(
        before.ends_with("The sky is blue.\n\nA photo of the sky at noon.\n\n"),
        "{before:?}"
    );
    assert!(after.starts_with("\n\nGrass is green."), "{after:?}");
    // The budget counts the image as it is charged.
    let text_only = s
        .budget()
        .count_prompt(&requests[0].prompt.without_images());
    assert_eq!(requests[0].prompt_tokens, text_only + 255);
}

#[tokio::test]
async fn every_mode_that_sends_nodes_sends_the_image() {
    for mode in [
        ResponseMode::Compact,
        ResponseMode::Refine,
        ResponseMode::TreeSummarize,
        ResponseMode::SimpleSummarize,
        ResponseMode::Accumulate,
        ResponseMode::CompactAccumulate,
    ] {
        let model = chat_model(4096, 256, "Blue.");
        let s = Synthesizer::builder(model.clone())
            .mode(mode)
            .return_steps(true)
            .citations(true)
            .build()
            .unwrap();
        let r = s.synthesize("What colour?", mixed()).await.unwrap();
        let requests = model.requests();
        let with_image: Vec<_> = requests.iter().filter(|r| r.prompt.has_images()).collect();
        assert!(!with_image.is_empty(), "{mode}: no image sent");
        // The image node is labelled like the others.
        let text = parts(&with_image[0].prompt).join("");
        assert!(text.contains("[2]\nA photo of the sky"), "{mode}: {text}");
        // Its step names it.
        let steps = r.steps.unwrap();
        assert!(
            steps
                .iter()
                .any(|s| s.node_ids.iter().any(|id| id == "photo-1")),
            "{mode}: {steps:?}"
        );
    }
    // Modes that send no node send no image.
    for mode in [ResponseMode::ContextOnly, ResponseMode::NoText] {
        let model = chat_model(4096, 256, "x");
        let s = Synthesizer::builder(model.clone())
            .mode(mode)
            .build()
            .unwrap();
        let r = s.synthesize("q", mixed()).await.unwrap();
        assert!(!r.text.contains('\u{F0000}'), "{mode}: {:?}", r.text);
        assert!(model.requests().is_empty());
    }
}

#[tokio::test]
async fn an_image_only_node_is_sent_too() {
    let model = chat_model(4096, 256, "A cat.");
    let s = Synthesizer::builder(model.clone()).build().unwrap();
    let nodes = vec![Node::new("img", "").with_image(image(16, 16, 3))];
    s.synthesize("What is it?", nodes).await.unwrap();
    let parts = parts(&model.requests()[0].prompt);
    assert_eq!(parts.iter().filter(|p| p.starts_with("<image")).count(), 1);
}

#[tokio::test]
async fn packing_never_goes_over_the_window_with_many_images() {
    let nodes: Vec<Node> = (0..30)
        .map(|i| {
            Node::new(
                format!("n{i}"),
                format!("Picture {i} shows item number {i} on a shelf. ").repeat(3),
            )
            .with_image(image(32, 32, i as u8))
        })
        .collect();
    for mode in [ResponseMode::Compact, ResponseMode::TreeSummarize] {
        let model = chat_model(1024, 64, "Items on shelves.");
        let s = Synthesizer::builder(model.clone())
            .mode(mode)
            .image_cost(ImageCost::Fixed(200))
            .build()
            .unwrap();
        s.synthesize("What is on the shelves?", nodes.clone())
            .await
            .unwrap();
        let requests = model.requests();
        assert!(requests.len() >= 8, "{mode}: {} calls", requests.len());
        let mut seen = std::collections::BTreeSet::new();
        for r in &requests {
            let counted = s.budget().count_prompt(&r.prompt);
            assert!(counted <= 1024 - 64, "{mode}: {counted}");
            assert_eq!(r.prompt_tokens, counted, "{mode}");
            if let RenderedPrompt::Chat(m) = &r.prompt {
                for i in m.iter().flat_map(|m| &m.images) {
                    seen.insert(i.image.base64().to_string());
                }
            }
        }
        assert_eq!(seen.len(), 30, "{mode}: every image is sent");
    }
}

#[tokio::test]
async fn an_image_too_large_for_any_prompt_is_an_error_naming_it() {
    let model = chat_model(1024, 64, "x");
    let s = Synthesizer::builder(model.clone())
        .image_cost(ImageCost::Fixed(5000))
        .build()
        .unwrap();
    let e = s.synthesize("q", mixed()).await.unwrap_err();
    assert!(matches!(e, SynthError::ImageTooLarge { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("node `photo-1`") && text.contains("5000 prompt tokens"),
        "{text}"
    );
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn a_model_without_vision_is_refused_before_any_call() {
    let info = crate::common::fixtures::scripted(4096, 256)
        .with_chat(true)
        .with_vision(Some(false));
    let model = ScriptedModel::constant(info, "x");
    let s = Synthesizer::builder(model.clone()).build().unwrap();
    let e = s.synthesize("q", mixed()).await.unwrap_err();
    assert!(matches!(e, SynthError::ImagesUnsupported { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("node `photo-1`") && text.contains("does not take images"),
        "{text}"
    );
    assert!(s.stream("q", mixed()).await.is_err());
    assert!(model.requests().is_empty());
    // The override sends them anyway.
    let s = Synthesizer::builder(model.clone())
        .vision(true)
        .build()
        .unwrap();
    s.synthesize("q", mixed()).await.unwrap();
    assert_eq!(model.requests().len(), 1);
    // And a model said to have vision can be told it has none.
    let model = chat_model(4096, 256, "x");
    let s = Synthesizer::builder(model.clone())
        .vision(false)
        .build()
        .unwrap();
    assert!(s.synthesize("q", mixed()).await.is_err());
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn a_completion_model_cannot_take_images() {
    let model = ScriptedModel::constant(ModelInfo::new("completion"), "x");
    let s = Synthesizer::builder(model.clone()).build().unwrap();
    let e = s.synthesize("q", mixed()).await.unwrap_err();
    assert!(e.to_string().contains("completion prompts"), "{e}");
    assert!(model.requests().is_empty());
}
