//! The `nodes` of `POST /v1/synthesize` are read by the library's one node reader: its id
//! rule (`id`, else `id_`, else `node_id`, else the 1-based position) and its errors.

use serde_json::{Value, json};
use synthkit_serve::ServiceLimits;

use crate::common::{Service, source_ids};

async fn post(service: &Service, nodes: Value) -> (u16, Value) {
    let body =
        json!({"query": "How often is the mirror cleaned?", "nodes": nodes, "mode": "no_text"});
    service.post(&body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_follow_the_one_rule_and_must_be_unique() {
    let service = Service::extractive(ServiceLimits::default()).await;
    // The list of issue 17 (the CLI refused it, the Python package named it `li-7, 1, x`).
    let (status, response) = post(
        &service,
        json!([{"node": {"id_": "li-7", "text": "a"}}, {"text": "b"}, {"id": "x", "text": "c"}]),
    )
    .await;
    assert_eq!(status, 200, "{response}");
    let ids = source_ids(&response);
    assert_eq!(ids, ["li-7", "2", "x"]);

    // Accepted before, refused now: two nodes with one id (a given id equal to another
    // node's position too), and a node whose id fields differ.
    let cases = [
        (
            json!([{"id": "x", "text": "a"}, {"node": {"id_": "x", "text": "b"}, "score": 0.5}]),
            "nodes[1]: node 2 has the id \"x\", as node 1 does: give each node its own id",
        ),
        (
            json!(["a", {"node_id": "1", "text": "b"}]),
            "nodes[1]: node 2 has the id \"1\", as node 1 does (node 1 gives no id, so its position is its id)",
        ),
        (
            json!([{"id": "a", "id_": "b", "text": "t"}]),
            "nodes[0]: node 1: `id` (\"a\") and `id_` (\"b\") differ: give one id",
        ),
        (
            json!(["a", {"text": "t", "metadata": ["k"]}]),
            "nodes[1]: node 2: `metadata` must be an object, got an array",
        ),
    ];
    for (nodes, message) in cases {
        let (status, e) = post(&service, nodes.clone()).await;
        assert_eq!(status, 400, "{nodes}: {e}");
        assert_eq!(e["error"]["kind"], "invalid_request", "{nodes}: {e}");
        let got = e["error"]["message"].as_str().unwrap();
        assert!(got.starts_with(message), "{nodes}: {got}");
    }
}

/// A LlamaIndex `ImageNode` (as `model_dump()` writes it, under a `NodeWithScore`) and
/// synthkit's `{"image": {"data", "mime_type"}}` reach the model as image parts of the
/// chat request, each at its node's place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_nodes_reach_the_model_as_image_parts() {
    let fake =
        synthkit_testkit::FakeOpenAi::start(synthkit_testkit::FakeConfig::replying("A chart."));
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let chart =
        synthkit::node::NodeImage::from_bytes(&synthkit_testkit::png::png(8, 8, 1), None).unwrap();
    let photo =
        synthkit::node::NodeImage::from_bytes(&synthkit_testkit::png::png(4, 4, 9), None).unwrap();
    let nodes = json!([
        {"node": {"id_": "chart", "text": "The sales chart.", "image": chart.base64(),
                  "image_mimetype": "image/png", "class_name": "ImageNode"}, "score": 0.9},
        {"id": "photo", "text": "", "image": {"data": photo.base64(), "mime_type": "image/png"}},
    ]);
    let body = json!({"query": "What does the chart show?", "nodes": nodes, "mode": "compact",
                      "evidence": false});
    let (status, response) = service.post(&body).await;
    assert_eq!(status, 200, "{response}");
    assert_eq!(response["text"], "A chart.");
    assert_eq!(source_ids(&response), ["chart", "photo"]);
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let urls = synthkit_testkit::openai::image_urls(&bodies[0]);
    assert_eq!(urls, [chart.data_url(), photo.data_url()]);
}
