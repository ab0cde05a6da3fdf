//! Nodes with images (issue 34): read and kept, but not yet sent to models, so a synthesis
//! given one fails before any call, in every mode, rather than answer without the image.

use synthkit::node::NodeImage;
use synthkit::testing::ScriptedModel;
use synthkit::{Node, ResponseMode, SynthError, Synthesizer};

/// The first bytes of a PNG file, as base64.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQ";

#[tokio::test]
async fn a_synthesis_given_an_image_fails_before_any_call() {
    let image = NodeImage::from_base64(PNG_B64, Some("image/png")).unwrap();
    let nodes = vec![
        Node::new("t", "The sky is blue."),
        Node::new("photo-1", "a photo of the sky").with_image(image),
    ];
    for mode in ResponseMode::ALL {
        let model = ScriptedModel::constant(crate::common::fixtures::scripted(1024, 64), "ok");
        let s = Synthesizer::builder(model.clone())
            .mode(mode)
            .build()
            .unwrap();
        let e = s
            .synthesize("what colour?", nodes.clone())
            .await
            .unwrap_err();
        assert!(matches!(e, SynthError::InvalidOption(_)), "{mode}: {e:?}");
        assert_eq!(
            e.to_string(),
            "node 2 (\"photo-1\") carries an image (image/png, 24 bytes), and synthkit does not send images to models yet: leave the image out, or put what it shows into the node's text",
            "{mode}"
        );
        assert!(
            s.stream("what colour?", nodes.clone()).await.is_err(),
            "{mode}"
        );
        assert!(model.requests().is_empty(), "{mode}: the model was called");
        // The same nodes without the image are answered.
        let plain: Vec<Node> = nodes
            .iter()
            .cloned()
            .map(|n| Node { image: None, ..n })
            .collect();
        s.synthesize("what colour?", plain).await.unwrap();
    }
}
