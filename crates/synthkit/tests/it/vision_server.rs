//! The tiny vision server itself (issue 34): a real llama.cpp `llama-server` serving the
//! tiny random-weight model with a LLaVA-style projector (`synthkit_testkit::llama::
//! tiny_vision`). It advertises vision, takes `image_url` parts, and counts a request with
//! images before sending (`POST /v1/chat/completions/input_tokens`) exactly as the
//! completion's `usage.prompt_tokens` charges it: 16 tokens an image, whatever its size.
//!
//! When llama-server cannot be built here the test prints a skip message, unless `CI` is
//! set: then it fails.

use serde_json::{Value, json};
use synthkit::node::NodeImage;
use synthkit_testkit::llama::{self, LlamaServer, TINY_VISION_IMAGE_TOKENS};
use synthkit_testkit::png::png;

async fn post(server: &LlamaServer, path: &str, body: &Value) -> (u16, Value) {
    let root = server.base.trim_end_matches("/v1");
    let reply = reqwest::Client::new()
        .post(format!("{root}{path}"))
        .json(body)
        .timeout(std::time::Duration::from_secs(120))
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let bytes = reply.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// A chat with one user message: a question, then the images as `image_url` data URLs.
fn chat(images: &[Vec<u8>]) -> Value {
    let mut content = vec![json!({"type": "text", "text": "What is in the picture?"})];
    for image in images {
        let url = NodeImage::from_bytes(image, None).unwrap().data_url();
        content.push(json!({"type": "image_url", "image_url": {"url": url}}));
    }
    json!({"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 2, "temperature": 0})
}

#[tokio::test]
async fn image_requests_are_counted_before_sending_as_they_are_charged() {
    let Some(server) = llama::tiny_vision(1024, "-np 1") else {
        return;
    };
    let root = server.base.trim_end_matches("/v1");
    let props: Value = reqwest::get(format!("{root}/props"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(props["modalities"]["vision"], true, "{props}");

    let (small, square, wide) = (png(16, 16, 1), png(64, 64, 5), png(300, 200, 9));
    let cases = [
        vec![],
        vec![small.clone()],
        vec![square],
        vec![wide.clone()],
        vec![small, wide],
    ];
    let mut counted = Vec::new();
    for images in &cases {
        let body = chat(images);
        let (status, count) = post(&server, "/v1/chat/completions/input_tokens", &body).await;
        assert_eq!(status, 200, "{count}");
        let (status, reply) = post(&server, "/v1/chat/completions", &body).await;
        assert_eq!(status, 200, "{reply}");
        let charged = reply["usage"]["prompt_tokens"].as_u64().unwrap();
        assert_eq!(
            count["input_tokens"].as_u64(),
            Some(charged),
            "{} images",
            images.len()
        );
        counted.push(charged);
    }
    let text = counted[0];
    let expected: Vec<u64> = cases
        .iter()
        .map(|images| text + TINY_VISION_IMAGE_TOKENS * images.len() as u64)
        .collect();
    assert_eq!(counted, expected);
}

/// Records each call's prompt tokens as synthkit counted them and as the server charged
/// them.
struct Recording {
    inner: std::sync::Arc<synthkit::backend::openai::OpenAiModel>,
    calls: std::sync::Mutex<Vec<(usize, u64, bool)>>,
}

impl synthkit::model::ModelLayer for Recording {
    type Inner = synthkit::backend::openai::OpenAiModel;

    fn inner(&self) -> &Self::Inner {
        &self.inner
    }

    fn complete<'a>(
        &'a self,
        request: &'a synthkit::model::ModelRequest,
    ) -> synthkit::model::ModelFuture<'a, synthkit::model::Completion> {
        Box::pin(async move {
            let c = synthkit::model::LanguageModel::complete(&*self.inner, request).await?;
            let charged = c.usage.map(|u| u.prompt_tokens).unwrap_or_default();
            self.calls.lock().unwrap().push((
                request.prompt_tokens,
                charged,
                request.prompt.has_images(),
            ));
            Ok(c)
        })
    }
}

#[tokio::test]
async fn syntheses_over_images_count_every_prompt_as_the_server_charges_it() {
    use std::sync::Arc;
    use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
    use synthkit::{Node, ResponseMode, Synthesizer};
    const CTX: usize = 512;
    let Some(server) = llama::tiny_vision(CTX, "-np 1") else {
        return;
    };
    let config = OpenAiConfig::new("tiny")
        .with_base_url(&server.base)
        .with_timeout(std::time::Duration::from_secs(120))
        .with_server_tokenizer(true)
        .with_num_output(8)
        .with_temperature(0.0);
    let model = Arc::new(OpenAiModel::connect(config).await.unwrap());
    {
        use synthkit::model::LanguageModel as _;
        assert_eq!(model.info().vision, Some(true));
        assert!(model.counter().is_some());
    }
    let sizes = [(16, 16), (64, 64), (300, 200), (1024, 768)];
    let mut nodes = Vec::new();
    for i in 0..12u8 {
        let text = format!("Note {i}: the shelf holds item {i} and a label. ").repeat(4);
        let mut node = Node::new(format!("n{i}"), text);
        if i % 2 == 1 {
            let (w, h) = sizes[usize::from(i / 2) % sizes.len()];
            node = node.with_image(NodeImage::from_bytes(&png(w, h, i), None).unwrap());
        }
        nodes.push(node);
    }
    for mode in [ResponseMode::Compact, ResponseMode::TreeSummarize] {
        let recording = Arc::new(Recording {
            inner: Arc::clone(&model),
            calls: Default::default(),
        });
        let s = Synthesizer::builder(Arc::clone(&recording))
            .mode(mode)
            .build()
            .unwrap();
        s.synthesize("What is on the shelf?", nodes.clone())
            .await
            .unwrap();
        let calls = recording.calls.lock().unwrap().clone();
        let with_images = calls.iter().filter(|c| c.2).count();
        eprintln!(
            "{mode}: {} calls ({with_images} with images): {calls:?}",
            calls.len()
        );
        assert!(with_images >= 1, "{mode}");
        for (counted, charged, _) in &calls {
            assert_eq!(*counted as u64, *charged, "{mode}: {calls:?}");
            assert!(*counted <= CTX - 8, "{mode}: {calls:?}");
        }
    }
}
