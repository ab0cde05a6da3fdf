//! Tests of `json`.

#![allow(clippy::unwrap_used)]
use super::*;
use serde_json::json;

#[test]
fn long_ids_and_many_keys_are_cut_in_messages() {
    let id = "x".repeat(10_000);
    let e = nodes_from_json([
        json!({"id": id, "text": "a"}),
        json!({"id": id, "text": "b"}),
    ])
    .unwrap_err()
    .to_string();
    assert!(e.len() < 300, "{e}");
    assert!(
        e.contains(&format!("\"{}\"...", "x".repeat(SHOWN_CHARS))),
        "{e}"
    );
    let many: Map<String, Value> = (0..50).map(|i| (format!("k{i}"), json!(i))).collect();
    let e = Node::from_json(Value::Object(many), 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"k7\", and 42 more"), "{e}");
    assert!(!e.contains("k8"), "{e}");
}

#[test]
fn a_failed_push_adds_nothing() {
    let mut reader = NodeListReader::new();
    reader.push(json!({"id": "a", "text": "x"})).unwrap();
    assert!(reader.push(json!({"id": "a", "text": "y"})).is_err());
    assert!(reader.push(json!(3)).is_err());
    reader.push(json!("z")).unwrap();
    let nodes = reader.into_nodes();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[1].id, "2");
}
