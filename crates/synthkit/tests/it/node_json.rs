//! Node JSON (`synthkit::node::json`): every accepted shape, the one id rule and every
//! error, with the position it names.

use serde_json::{Value, json};
use synthkit::Node;
use synthkit::node::{NodeJsonError, NodeListReader, nodes_from_json};

fn ids(values: Value) -> Vec<String> {
    let Value::Array(values) = values else {
        panic!("not an array")
    };
    nodes_from_json(values)
        .unwrap()
        .into_iter()
        .map(|n| n.id)
        .collect()
}

fn error(values: Value) -> NodeJsonError {
    let Value::Array(values) = values else {
        panic!("not an array")
    };
    nodes_from_json(values).unwrap_err()
}

/// A LlamaIndex `TextNode` with metadata, one key of it hidden from the model.
fn text_node(id: &str, text: &str) -> Value {
    let metadata = json!({"file_path": "m.md", "secret": "s"});
    synthkit_testkit::llamaindex::text_node(id, text, metadata, &["secret"])
}

#[test]
fn the_issue_list_gets_one_id_per_rule() {
    // The list of issue 17: before, the CLI refused it, the service named the nodes
    // `li-7, 2, x` and the Python package `li-7, 1, x`.
    assert_eq!(
        ids(
            json!([{"node": {"id_": "li-7", "text": "a"}}, {"text": "b"}, {"id": "x", "text": "c"}])
        ),
        ["li-7", "2", "x"]
    );
}

#[test]
fn id_comes_from_id_then_id_then_node_id_then_position() {
    assert_eq!(
        ids(json!([
            {"id": "a", "text": "t"},
            {"id_": "b", "text": "t"},
            {"node_id": "c", "text": "t"},
            {"text": "t"},
            "plain",
            {"id": "f", "id_": "f", "node_id": "f", "text": "t"},
            {"id": null, "id_": "g", "text": "t"},
            {"node": {"node_id": "h", "text": "t"}},
            {"node": {"text": "t"}, "score": 0.1},
        ])),
        ["a", "b", "c", "4", "5", "f", "g", "h", "9"]
    );
}

#[test]
fn synthkit_nodes_are_read_whole() {
    let node = Node::from_json(
        json!({"id": "a", "text": "The sky.", "metadata": {"file": "s.md", "page": 3},
               "excluded_llm_metadata_keys": ["page"], "score": 0.5, "unknown": [1]}),
        1,
    )
    .unwrap();
    let want = Node::new("a", "The sky.")
        .with_metadata("file", "s.md")
        .with_metadata("page", 3)
        .exclude_from_llm("page")
        .with_score(0.5);
    assert_eq!(node, want);
    // Metadata keeps its order.
    let keys: Vec<&String> = node.metadata.keys().collect();
    assert_eq!(keys, ["file", "page"]);
}

#[test]
fn text_nodes_and_nodes_with_score_are_read() {
    let node = Node::from_json(text_node("li-1", "Mirror."), 1).unwrap();
    assert_eq!(node.id, "li-1");
    assert_eq!(node.text, "Mirror.");
    assert_eq!(node.metadata["file_path"], "m.md");
    assert_eq!(node.excluded_llm_metadata_keys, ["secret"]);
    assert_eq!(node.score, None);
    assert_eq!(node.llm_text(), "file_path: m.md\n\nMirror.");

    let scored =
        json!({"node": text_node("li-2", "Dome."), "score": 0.83, "class_name": "NodeWithScore"});
    let node = Node::from_json(scored, 2).unwrap();
    assert_eq!((node.id.as_str(), node.score), ("li-2", Some(0.83)));
    // Score: the wrapper's, else the inner node's, else none.
    for (value, score) in [
        (
            json!({"node": {"text": "t", "score": 0.2}, "score": 0.9}),
            Some(0.9),
        ),
        (
            json!({"node": {"text": "t", "score": 0.2}, "score": null}),
            Some(0.2),
        ),
        (json!({"node": {"text": "t", "score": 0.2}}), Some(0.2)),
        (json!({"node": {"text": "t"}}), None),
        (json!({"node": {"text": "t"}, "score": 1}), Some(1.0)),
    ] {
        assert_eq!(
            Node::from_json(value.clone(), 1).unwrap().score,
            score,
            "{value}"
        );
    }
    // Null optional fields count as absent; nulls beside `node` too.
    let node = Node::from_json(
        json!({"node": {"text": "t", "metadata": null, "excluded_llm_metadata_keys": null},
               "text": null, "id": null}),
        4,
    )
    .unwrap();
    assert_eq!(node, Node::new("4", "t"));
}

#[test]
fn plain_strings_are_texts_with_their_position_as_id() {
    let nodes = nodes_from_json([json!("a"), json!(""), json!("c")]).unwrap();
    assert_eq!(nodes[0], Node::new("1", "a"));
    assert_eq!(nodes[1], Node::new("2", ""));
    assert_eq!(Node::from_json(json!("x"), 7).unwrap(), Node::new("7", "x"));
}

#[test]
fn synthkit_and_llamaindex_output_read_back_unchanged() {
    let nodes = vec![
        Node::new("a", "one")
            .with_metadata("file", "a.md")
            .with_metadata("tags", json!(["x", 1]))
            .exclude_from_llm("tags")
            .with_score(0.25),
        Node::new("b", "two"),
    ];
    // synthkit's own form (`Node`'s Serialize).
    let Value::Array(values) = serde_json::to_value(&nodes).unwrap() else {
        panic!("not an array")
    };
    assert_eq!(nodes_from_json(values).unwrap(), nodes);
    // The `source_nodes` of `synthkit ask --json --format llamaindex`.
    let source_nodes: Vec<Value> = nodes.iter().map(Node::to_node_with_score).collect();
    assert_eq!(nodes_from_json(source_nodes).unwrap(), nodes);
}

#[test]
fn duplicate_ids_name_both_positions() {
    let e = error(json!([{"id": "x", "text": "a"}, "b", {"id_": "x", "text": "c"}]));
    assert_eq!(
        e,
        NodeJsonError::DuplicateId {
            position: 3,
            first: 1,
            id: "x".into(),
            from_position: None
        }
    );
    assert_eq!(e.position(), 3);
    assert_eq!(
        e.to_string(),
        "node 3 has the id \"x\", as node 1 does: give each node its own id (ids must be unique in one list)"
    );
    // A given id equal to another node's position.
    let e = error(json!(["a", {"id": "1", "text": "b"}]));
    assert_eq!(e.position(), 2);
    assert!(
        e.to_string()
            .contains("as node 1 does (node 1 gives no id, so its position is its id)"),
        "{e}"
    );
    let e = error(json!([{"id": "2", "text": "a"}, "b"]));
    assert!(
        e.to_string()
            .starts_with("node 2 has the id \"2\", as node 1 does (node 2 gives no id"),
        "{e}"
    );
    // Through NodeWithScore and node_id alike.
    let e = error(json!([{"node": {"id_": "li", "text": "a"}}, {"node_id": "li", "text": "b"}]));
    assert_eq!(e.position(), 2);
}

#[test]
fn conflicting_id_fields_are_refused() {
    for (value, first, second) in [
        (json!({"id": "a", "id_": "b", "text": "t"}), "id", "id_"),
        (
            json!({"id": "a", "node_id": "b", "text": "t"}),
            "id",
            "node_id",
        ),
        (
            json!({"id_": "a", "node_id": "b", "text": "t"}),
            "id_",
            "node_id",
        ),
        (
            json!({"id": "a", "id_": "a", "node_id": "b", "text": "t"}),
            "id",
            "node_id",
        ),
        (
            json!({"node": {"id": "a", "id_": "b", "text": "t"}}),
            "id",
            "id_",
        ),
    ] {
        let e = Node::from_json(value.clone(), 5).unwrap_err();
        let NodeJsonError::ConflictingIds {
            position,
            first: f,
            second: s,
            ..
        } = &e
        else {
            panic!("{value}: {e:?}")
        };
        assert_eq!((*position, *f, *s), (5, first, second), "{value}");
        assert!(e.to_string().starts_with("node 5: `"), "{e}");
        assert!(e.to_string().contains("give one id"), "{e}");
    }
}

#[test]
fn every_error_names_the_position_and_what_to_change() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!(3),
            "node 2: expected a string (the node's text) or an object with a `text`",
        ),
        (json!(null), "got null"),
        (json!([{"text": "t"}]), "got an array"),
        (
            json!({"id": "a"}),
            "node 2 has no `text`: give its text as a string (keys given: \"id\")",
        ),
        (json!({"id": "a", "text": null}), "has no `text`"),
        (json!({}), "keys given: none"),
        (
            json!({"text": 3}),
            "node 2: `text` must be a string, got a number",
        ),
        (
            json!({"id": 2, "text": "t"}),
            "node 2: `id` must be a string, got a number",
        ),
        (
            json!({"id_": ["a"], "text": "t"}),
            "`id_` must be a string, got an array",
        ),
        (
            json!({"node_id": true, "text": "t"}),
            "`node_id` must be a string, got a boolean",
        ),
        (
            json!({"id": "", "text": "t"}),
            "node 2: `id` is empty: give a non-empty id, or none",
        ),
        (
            json!({"text": "t", "metadata": [1]}),
            "node 2: `metadata` must be an object, got an array",
        ),
        (
            json!({"text": "t", "metadata": "file: a"}),
            "`metadata` must be an object, got a string",
        ),
        (
            json!({"text": "t", "excluded_llm_metadata_keys": "k"}),
            "`excluded_llm_metadata_keys` must be a list of strings, got a string",
        ),
        (
            json!({"text": "t", "excluded_llm_metadata_keys": ["a", 1]}),
            "`excluded_llm_metadata_keys[1]` must be a string (a metadata key), got a number",
        ),
        (
            json!({"text": "t", "score": "high"}),
            "node 2: `score` must be a number or null, got a string",
        ),
        (
            json!({"node": {"text": "t"}, "score": "high"}),
            "`score` must be a number or null",
        ),
        (
            json!({"node": "t"}),
            "node 2: `node` must be an object (a TextNode), got a string",
        ),
        (
            json!({"node": null, "score": 0.1}),
            "`node` must be an object (a TextNode), got null",
        ),
        (json!({"node": {"id_": "a"}}), "node 2 has no `text`"),
        (json!({"node": {"text": 1}}), "`text` must be a string"),
        (
            json!({"node": {"node": {"text": "t"}}}),
            "node 2: a NodeWithScore's `node` holds another NodeWithScore",
        ),
        (
            json!({"node": {"text": "t"}, "text": "u"}),
            "node 2: `text` beside `node`: a NodeWithScore holds its node's fields under `node`; move `text` there",
        ),
        (
            json!({"node": {"text": "t"}, "id": "a"}),
            "`id` beside `node`",
        ),
        (
            json!({"node": {"text": "t"}, "metadata": {}}),
            "`metadata` beside `node`",
        ),
    ];
    for (value, needle) in cases {
        let e = error(json!(["first", value]));
        assert_eq!(e.position(), 2, "{value}: {e}");
        assert!(e.to_string().contains(needle), "{value}: {e}");
        // The same node alone, at position 1.
        let alone = Node::from_json(value.clone(), 1).unwrap_err();
        assert!(alone.to_string().starts_with("node 1"), "{value}: {alone}");
    }
}

#[test]
fn the_reader_reports_at_the_value_and_keeps_the_nodes_before() {
    let mut reader = NodeListReader::with_capacity(3);
    assert!(reader.is_empty());
    reader.push(json!({"id_": "a", "text": "x"})).unwrap();
    reader.push(json!("y")).unwrap();
    let e = reader
        .push(json!({"node_id": "a", "text": "z"}))
        .unwrap_err();
    assert_eq!(e.position(), 3);
    assert_eq!(reader.len(), 2);
    // The failed value took no position: the next node is node 3.
    reader.push(json!("w")).unwrap();
    let ids: Vec<String> = reader.into_nodes().into_iter().map(|n| n.id).collect();
    assert_eq!(ids, ["a", "2", "3"]);
}

#[test]
fn an_empty_list_is_no_nodes() {
    assert_eq!(nodes_from_json(Vec::new()).unwrap(), Vec::<Node>::new());
}

/// Node-shaped JSON values: strings, objects mixing the id fields, text, metadata, scores
/// and `node` wrappers, with wrong types among them.
fn nodeish() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        (-2.0f64..2.0).prop_map(Value::from),
        "[a-c]{0,2}".prop_map(Value::from),
    ];
    let field = prop_oneof![
        Just("id"),
        Just("id_"),
        Just("node_id"),
        Just("text"),
        Just("metadata"),
        Just("excluded_llm_metadata_keys"),
        Just("score"),
        Just("embedding"),
    ];
    let value = scalar.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            proptest::collection::vec(("[a-c]", inner), 0..3)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    });
    let object = proptest::collection::vec((field, value), 0..5)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    prop_oneof![
        "[a-c]{0,3}".prop_map(Value::from),
        object.clone(),
        (object, proptest::option::of(-1.0f64..1.0))
            .prop_map(|(node, score)| json!({"node": node, "score": score})),
        Just(json!(7)),
    ]
}

/// 5,000 random lists: nodes or an error naming a position in the list, never a panic;
/// what is read has unique ids and reads back unchanged from synthkit's own form.
#[test]
fn random_lists_read_or_fail_cleanly() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: 5_000,
        failure_persistence: None,
        ..Config::default()
    });
    let lists = proptest::collection::vec(nodeish(), 0..6);
    let (ok, failed) = (
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
    );
    runner
        .run(&lists, |values| {
            let len = values.len();
            match nodes_from_json(values) {
                Ok(nodes) => {
                    ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let mut ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    proptest::prop_assert_eq!(ids.len(), nodes.len());
                    let Value::Array(again) = serde_json::to_value(&nodes).unwrap() else {
                        panic!("not an array")
                    };
                    proptest::prop_assert_eq!(nodes_from_json(again).unwrap(), nodes);
                }
                Err(e) => {
                    failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    proptest::prop_assert!((1..=len).contains(&e.position()), "{e}");
                    proptest::prop_assert!(e.to_string().starts_with("node "), "{e}");
                }
            }
            Ok(())
        })
        .unwrap();
    println!(
        "random node lists: {} read, {} refused",
        ok.into_inner(),
        failed.into_inner()
    );
}

/// The first bytes of a PNG file (enough for its signature), as base64.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQ";

#[test]
fn image_nodes_read_in_both_shapes_and_round_trip() {
    use synthkit::node::ImageFormat;
    let li = synthkit_testkit::llamaindex::image_node(
        "img-1",
        "a cat",
        Some(PNG_B64),
        Some("image/png"),
    );
    let node = Node::from_json(li.clone(), 1).unwrap();
    assert_eq!(node.id, "img-1");
    assert_eq!(node.text, "a cat");
    let image = node.image.clone().unwrap();
    assert_eq!(
        (image.format(), image.base64(), image.len()),
        (ImageFormat::Png, PNG_B64, 24)
    );
    // As a NodeWithScore; the mime type left out (the bytes say it).
    let mut bare = li.clone();
    bare["image_mimetype"] = Value::Null;
    let scored = Node::from_json(json!({"node": bare, "score": 0.5}), 1).unwrap();
    assert_eq!(scored.image, node.image);
    // synthkit's own form, written and read back; an image node may leave out its text.
    let own = json!({"id": "p", "image": {"data": PNG_B64, "mime_type": "image/png"}});
    let p = Node::from_json(own, 1).unwrap();
    assert_eq!(
        (p.text.as_str(), p.image.as_ref()),
        ("", node.image.as_ref())
    );
    let written = serde_json::to_value(&node).unwrap();
    assert_eq!(
        written["image"],
        json!({"mime_type": "image/png", "data": PNG_B64})
    );
    assert_eq!(Node::from_json(written.clone(), 1).unwrap(), node);
    assert_eq!(serde_json::from_value::<Node>(written).unwrap(), node);
    // LlamaIndex's shape written back: an ImageNode.
    let out = node.to_node_with_score();
    assert_eq!(out["node"]["class_name"], "ImageNode");
    assert_eq!(out["node"]["image"], PNG_B64);
    assert_eq!(out["node"]["image_mimetype"], "image/png");
    assert_eq!(Node::from_json(out, 1).unwrap(), node);
    // A data URL in image_url.
    let url = json!({"text": "t", "image_url": format!("data:image/png;base64,{PNG_B64}")});
    assert_eq!(Node::from_json(url, 1).unwrap().image, node.image);
    // Debug never shows the data.
    assert!(!format!("{node:?}").contains(PNG_B64));
}

#[test]
fn bad_images_name_the_node_and_field() {
    use synthkit::node::ImageError;
    let image = |image: Value, mime: Option<&str>| {
        synthkit_testkit::llamaindex::image_node("i", "t", None, mime)
            .as_object()
            .cloned()
            .map(|mut m| {
                m.insert("image".into(), image);
                Value::Object(m)
            })
            .unwrap()
    };
    let e = error(json!(["a", image(json!("iVBO%w0KGgo="), None)]));
    assert!(
        matches!(
            &e,
            NodeJsonError::Image {
                position: 2,
                field: "image",
                error: ImageError::Base64 { .. }
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("node 2: `image`: not valid base64 (character 4 is '%')"),
        "{e}"
    );
    // A PDF's bytes.
    let e = error(json!([image(json!("JVBERi0xLjcK"), None)]));
    assert!(
        e.to_string().contains("not a PNG, JPEG, WebP or GIF image"),
        "{e}"
    );
    // A mime type the bytes deny.
    let e = error(json!([image(json!(PNG_B64), Some("image/jpeg"))]));
    assert!(
        e.to_string()
            .contains("the mime type is image/jpeg but the bytes are a PNG image"),
        "{e}"
    );
    // synthkit's form: the field is image.data; a wrong type is named.
    let e = error(json!([{"text": "t", "image": {"data": "JVBERi0xLjcK"}}]));
    assert!(e.to_string().starts_with("node 1: `image.data`:"), "{e}");
    let e = error(json!([{"text": "t", "image": 3}]));
    assert!(
        e.to_string()
            .contains("`image` must be a string (base64) or an object"),
        "{e}"
    );
    // Over the cap: the reader's, naming the node.
    let mut reader = NodeListReader::new().with_max_image_bytes(10);
    reader.push(json!("a")).unwrap();
    let e = reader.push(image(json!(PNG_B64), None)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "node 2: `image`: the image is 24 bytes, over the limit of 10 bytes an image: give a smaller image (scale it down or compress it)"
    );
    // URLs and paths are never fetched or read; the URL is not repeated.
    let mut li = synthkit_testkit::llamaindex::image_node("u", "t", None, None);
    li["image_url"] = json!("https://user:pw@example.com/cat.png?sig=s3cret");
    let e = error(json!([li]));
    assert!(
        matches!(
            &e,
            NodeJsonError::Image {
                field: "image_url",
                error: ImageError::Url,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        !e.to_string().contains("s3cret") && !e.to_string().contains("pw@"),
        "{e}"
    );
    let mut li = synthkit_testkit::llamaindex::image_node("p", "t", None, Some("image/png"));
    li["image_path"] = json!("/etc/passwd.png");
    let e = error(json!([li]));
    assert!(
        matches!(
            &e,
            NodeJsonError::Image {
                field: "image_path",
                error: ImageError::Path,
                ..
            }
        ),
        "{e:?}"
    );
    // Image fields beside a NodeWithScore's node.
    let e = error(json!([{"node": {"text": "t"}, "image": PNG_B64}]));
    assert!(
        matches!(e, NodeJsonError::FieldBesideNode { field: "image", .. }),
        "{e:?}"
    );
}

#[test]
fn a_text_node_without_image_fields_is_unchanged() {
    let node = Node::from_json(text_node("a", "x"), 1).unwrap();
    assert_eq!(node.image, None);
    let li = synthkit_testkit::llamaindex::image_node("b", "caption only", None, None);
    assert_eq!(
        Node::from_json(li, 1).unwrap(),
        Node::new("b", "caption only")
    );
}
