//! Image nodes (issue 34): each call's box shows a thumbnail of every image its prompt
//! carried, the sources show image nodes' thumbnails, and the page embeds at most
//! `caps::PAGE_IMAGE_BYTES` of images.

use std::sync::Arc;

use synthkit::model::ModelInfo;
use synthkit::node::NodeImage;
use synthkit::testing::ScriptedModel;
use synthkit::{Node, ResponseMode, Synthesizer};
use synthkit_report::{RunRecord, caps, render};
use synthkit_testkit::png::png;

const NOTE: &str = "image not embedded (page image budget)";

fn image_node(id: &str, w: u32, h: u32, seed: u8) -> Node {
    let image = NodeImage::from_bytes(&png(w, h, seed), None).unwrap();
    Node::new(id, format!("Figure {id}.")).with_image(image)
}

async fn record(nodes: Vec<Node>) -> RunRecord {
    let info = ModelInfo::new("scripted")
        .with_context_window(32_000)
        .with_num_output(60)
        .with_chat(true)
        .with_vision(Some(true));
    let synth = Synthesizer::builder(Arc::new(ScriptedModel::constant(info, "Boats.")))
        .mode(ResponseMode::Compact)
        .return_steps(true)
        .build()
        .unwrap();
    let response = synth.synthesize("What sails?", nodes).await.unwrap();
    RunRecord::from_response("What sails?", ResponseMode::Compact, &response)
}

/// The `<img>` tags of `page`.
fn thumbnails(page: &str) -> Vec<&str> {
    page.match_indices("<img class=\"thumb\"")
        .map(|(i, _)| &page[i..i + page[i..].find('>').unwrap()])
        .collect()
}

#[tokio::test]
async fn a_call_with_an_image_shows_its_thumbnail_and_so_do_the_sources() {
    let photo = image_node("photo<1>", 16, 16, 3);
    let url = photo.image.as_ref().unwrap().data_url();
    let nodes = vec![Node::new("t1", "Boats sail at dawn."), photo];
    let page = render(&record(nodes).await);
    let thumbs = thumbnails(&page);
    // One in the call's box, one in the sources; alt is the node id, escaped.
    assert_eq!(thumbs.len(), 2, "{thumbs:?}");
    for t in &thumbs {
        assert!(t.contains(&format!("src=\"{url}\"")), "{t}");
        assert!(t.contains("alt=\"photo&lt;1&gt;\""), "{t}");
    }
    let call = &page[page.find("id=\"call-1\"").unwrap()..];
    let call = &call[..call.find("</details>").unwrap()];
    assert!(call.contains("<img class=\"thumb\""), "{call}");
    assert!(page.contains("img.thumb{max-width:96px"));
    assert!(!page.contains(NOTE));
}

#[tokio::test]
async fn images_past_the_page_budget_are_named_not_embedded() {
    // Three images of about 3.6 MiB of base64 each: more than the 8 MiB budget.
    let nodes: Vec<Node> = (0..3)
        .map(|i| image_node(&format!("big-{i}"), 1024, 880, i))
        .collect();
    let each = nodes[0].image.as_ref().unwrap().base64().len();
    assert!(3 * each > caps::PAGE_IMAGE_BYTES && 2 * each < caps::PAGE_IMAGE_BYTES);
    let run = record(nodes).await;
    // The record keeps the images that fit the budget, the others' type and size only.
    let kept: Vec<bool> = run
        .sources
        .iter()
        .map(|s| s.image.as_ref().unwrap().data.is_some())
        .collect();
    assert_eq!(kept, [true, true, false]);
    let back: RunRecord = serde_json::from_str(&serde_json::to_string(&run).unwrap()).unwrap();
    assert_eq!(back, run);

    let page = render(&run);
    let embedded: usize = thumbnails(&page).iter().map(|t| t.len()).sum();
    assert!(embedded <= caps::PAGE_IMAGE_BYTES + 1024, "{embedded}");
    assert_eq!(thumbnails(&page).len(), 2);
    assert!(
        page.contains(&format!("big-2: {NOTE}")),
        "the third image's note"
    );
    // The sources come after the calls: their thumbnails are over the budget.
    let sources = &page[page.find("id=\"sources\"").unwrap()..];
    assert_eq!(sources.matches(NOTE).count(), 3);
}
