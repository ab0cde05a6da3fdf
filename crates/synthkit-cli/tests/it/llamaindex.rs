//! LlamaIndex interop: `--nodes` reads LlamaIndex `TextNode` and `NodeWithScore` JSON
//! (arrays or JSON lines, mixed with synthkit's own form), and `--json --format llamaindex`
//! prints LlamaIndex's `Response` shape, whose `source_nodes` `--nodes` reads back.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::common::{
    MIRROR, QUESTION, assert_stderr_has, assert_stdout_has, json_lines, json_of, source_ids,
    stderr, stdout, synthkit, temp_file, write,
};

fn run(args: &[&str], nodes: &Path) -> Output {
    synthkit()
        .args(args)
        .arg("--nodes")
        .arg(nodes)
        .output()
        .unwrap()
}

use synthkit_testkit::llamaindex::text_node;

fn nodes() -> Vec<Value> {
    vec![
        text_node(
            "node-1",
            "The dome opens at dusk.",
            json!({"file_path": "about.md", "secret": "do-not-show"}),
            &["secret"],
        ),
        text_node(
            "node-2",
            MIRROR,
            json!({"file_path": "maintenance.md", "page": 3, "internal_id": "zz-77"}),
            &["internal_id", "page"],
        ),
    ]
}

#[test]
fn text_node_array_is_read() {
    let (_dir, path) = temp_file(
        "nodes.json",
        serde_json::to_string_pretty(&nodes()).unwrap(),
    );
    let v = json_of(&run(&["ask", QUESTION, "--json", "-q"], &path));
    assert_eq!(v["answer"], MIRROR);
    // The source the answer came from first (cited), then the others as given.
    assert_eq!(v["sources"][0]["id"], "node-2");
    assert_eq!(v["sources"][0]["cited"], true);
    assert_eq!(v["sources"][0]["path"], "maintenance.md");
    assert_eq!(v["sources"][0]["score"], Value::Null);
    assert_eq!(v["sources"][1]["id"], "node-1");
    assert_eq!(v["sources"][1]["cited"], false);
}

#[test]
fn node_with_score_jsonl_keeps_scores() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b] = <[Value; 2]>::try_from(nodes()).unwrap();
    let jsonl = format!(
        "{}\n\n{}\n{}\n",
        json!({"node": a, "score": 0.83, "class_name": "NodeWithScore"}),
        json!({"node": b, "score": null}),
        // synthkit's own form, mixed in.
        json!({"id": "n3", "text": "Visitors park behind the cafe.", "score": 0.1}),
    );
    let path = write(dir.path(), "nodes.jsonl", jsonl);
    let v = json_of(&run(&["ask", QUESTION, "--json", "-q"], &path));
    let sources = v["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 3);
    assert_eq!(sources[0]["id"], "node-2");
    assert_eq!(sources[0]["score"], Value::Null);
    assert_eq!(sources[1]["id"], "node-1");
    assert_eq!(sources[1]["score"], 0.83);
    assert_eq!(sources[2]["id"], "n3");
    assert_eq!(sources[2]["score"], 0.1);
}

#[test]
fn hidden_metadata_keys_are_not_shown_to_the_model() {
    let (_dir, path) = temp_file("nodes.json", serde_json::to_string(&nodes()).unwrap());
    let out = run(&["ask", QUESTION, "-q", "--mode", "context_only"], &path);
    assert!(out.status.success(), "{}", stderr(&out));
    let context = stdout(&out);
    assert!(context.contains("file_path: about.md"), "{context}");
    assert!(context.contains("file_path: maintenance.md"), "{context}");
    assert!(context.contains(MIRROR), "{context}");
    for hidden in ["secret", "do-not-show", "internal_id", "zz-77", "page: 3"] {
        assert!(!context.contains(hidden), "{hidden} shown: {context}");
    }
}

#[test]
fn a_malformed_node_names_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = nodes();
    bad.push(json!({"node": {"id_": "node-3"}, "score": 0.5}));
    let path = write(
        dir.path(),
        "bad.json",
        serde_json::to_string_pretty(&bad).unwrap(),
    );
    let out = run(&["ask", QUESTION], &path);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("bad.json: line "), "{err}");
    assert!(err.contains("(index 2): node 3 has no `text`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // JSON lines: the line; a wrong type; a node whose `id` and `id_` differ; a
    // NodeWithScore with fields beside `node`.
    let cases: [(&str, &[&str]); 4] = [
        (
            "{\"id_\":\"a\",\"text\":\"x\"}\n{\"node\":{\"id_\":\"b\",\"text\":\"y\"},\"score\":\"high\"}\n",
            &[
                "line 2",
                "node 2: `score` must be a number or null, got a string",
            ],
        ),
        (
            "{\"id\":\"a\",\"id_\":\"b\",\"text\":\"x\",\"metadata\":{}}\n",
            &["line 1", "node 1: `id` (\"a\") and `id_` (\"b\") differ"],
        ),
        (
            "{\"id_\":\"a\",\"text\":\"x\",\"excluded_llm_metadata_keys\":\"k\"}\n",
            &[
                "line 1",
                "`excluded_llm_metadata_keys` must be a list of strings",
            ],
        ),
        (
            "{\"node\":{\"id_\":\"a\",\"text\":\"x\"},\"text\":\"y\"}\n",
            &["line 1", "`text` beside `node`"],
        ),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let path = write(dir.path(), &format!("bad{i}.jsonl"), text);
        let out = run(&["ask", QUESTION], &path);
        assert_eq!(out.status.code(), Some(1), "case {i}: {}", stderr(&out));
        let err = stderr(&out);
        for needle in *needles {
            assert!(err.contains(needle), "case {i}: {needle:?} not in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// One id rule for every front end (issue 17): `id`, else `id_`, else `node_id`, else the
/// 1-based position. Before, `--nodes` refused this list (a node without an id).
#[test]
fn ids_follow_the_one_rule_and_must_be_unique() {
    let dir = tempfile::tempdir().unwrap();
    let list = json!([
        {"node": {"id_": "li-7", "text": "The dome opens at dusk."}},
        {"text": MIRROR},
        {"id": "x", "text": "Visitors park behind the cafe."},
    ]);
    let jsonl = json_lines(&list);
    for path in [
        write(
            dir.path(),
            "list.json",
            serde_json::to_string_pretty(&list).unwrap(),
        ),
        write(dir.path(), "list.jsonl", jsonl),
    ] {
        let v = json_of(&run(
            &["ask", QUESTION, "--json", "-q", "--mode", "no_text"],
            &path,
        ));
        let ids = source_ids(&v);
        assert_eq!(ids, ["li-7", "2", "x"], "{}", path.display());
    }

    // Duplicate ids (a given id equal to another node's position too) and a node whose
    // id fields differ are refused, naming the line and the nodes.
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "dup.json",
            "[\n{\"id_\": \"li-7\", \"text\": \"a\"},\n{\"node\": {\"id_\": \"li-7\", \"text\": \"b\"}, \"score\": 0.5}\n]\n",
            &[
                "dup.json: line 3, ",
                "(index 1): node 2 has the id \"li-7\", as node 1 does",
                "give each node its own id",
            ],
        ),
        (
            "position.jsonl",
            "\"first\"\n{\"id\": \"1\", \"text\": \"b\"}\n",
            &[
                "position.jsonl: line 2, ",
                "node 2 has the id \"1\", as node 1 does (node 1 gives no id, so its position is its id)",
            ],
        ),
        (
            "conflict.jsonl",
            "{\"id\": \"a\", \"text\": \"b\"}\n{\"id_\": \"b\", \"node_id\": \"c\", \"text\": \"b\"}\n",
            &[
                "conflict.jsonl: line 2, ",
                "node 2: `id_` (\"b\") and `node_id` (\"c\") differ: give one id",
            ],
        ),
    ];
    for (name, text, needles) in cases {
        let path = write(dir.path(), name, text);
        let out = run(&["ask", QUESTION], &path);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{err}");
        for needle in needles {
            assert!(err.contains(needle), "{name}: {needle:?} not in {err}");
        }
    }
}

#[test]
fn llamaindex_format_has_the_response_shape_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b] = <[Value; 2]>::try_from(nodes()).unwrap();
    let path = write(
        dir.path(),
        "nodes.jsonl",
        format!(
            "{}\n{}\n",
            json!({"node": a, "score": 0.5}),
            json!({"node": b, "score": 0.9})
        ),
    );
    let args = ["ask", QUESTION, "--json", "--format", "llamaindex", "-q"];
    let v = json_of(&run(&args, &path));
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["response", "source_nodes", "metadata"]);
    assert_eq!(v["response"], MIRROR);
    let sources = v["source_nodes"].as_array().unwrap();
    assert_eq!(sources.len(), 2);
    let second = &sources[1];
    assert_eq!(second["score"], 0.9);
    assert_eq!(second["node"]["id_"], "node-2");
    assert_eq!(second["node"]["text"], MIRROR);
    assert_eq!(second["node"]["class_name"], "TextNode");
    assert_eq!(second["node"]["metadata"]["page"], 3);
    assert_eq!(
        second["node"]["excluded_llm_metadata_keys"],
        json!(["internal_id", "page"])
    );
    assert_eq!(v["metadata"]["node-1"]["file_path"], "about.md");
    assert_eq!(v["metadata"]["node-2"]["internal_id"], "zz-77");

    // Round trip: the emitted source_nodes are read back by --nodes, unchanged.
    let again_path = write(
        dir.path(),
        "again.json",
        serde_json::to_string(&v["source_nodes"]).unwrap(),
    );
    let again = json_of(&run(&args, &again_path));
    assert_eq!(again, v);
    // The whole output, as printed, is read back too: its source_nodes are the nodes.
    let whole_path = write(
        dir.path(),
        "whole.json",
        serde_json::to_string_pretty(&v).unwrap(),
    );
    assert_eq!(json_of(&run(&args, &whole_path)), v);
    // And the hidden keys are still hidden from the model.
    let out = run(
        &["ask", QUESTION, "-q", "--mode", "context_only"],
        &again_path,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains("zz-77"), "{}", stdout(&out));
}

#[test]
fn llamaindex_format_needs_json() {
    let (_dir, path) = temp_file("nodes.json", serde_json::to_string(&nodes()).unwrap());
    let out = run(&["ask", QUESTION, "--format", "llamaindex"], &path);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_stderr_has(&out, "--json");
    // The default needs nothing.
    let out = run(&["ask", QUESTION, "-q", "--format", "synthkit"], &path);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(
        &[
            "ask",
            QUESTION,
            "--json",
            "--format",
            "llamaindex",
            "--plan",
        ],
        &path,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_stderr_has(&out, "--format llamaindex");
    let out = synthkit().args(["ask", "--help"]).output().unwrap();
    assert_stdout_has(&out, "llamaindex");
}
