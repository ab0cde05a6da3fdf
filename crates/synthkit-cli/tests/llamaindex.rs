//! LlamaIndex interop: `--nodes` reads LlamaIndex `TextNode` and `NodeWithScore` JSON
//! (arrays or JSON lines, mixed with synthkit's own form), and `--json --format llamaindex`
//! prints LlamaIndex's `Response` shape, whose `source_nodes` `--nodes` reads back.

// Test helpers outside `#[test]` functions: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::{Value, json};

const MIRROR: &str = "The primary mirror is cleaned every three months with carbon dioxide snow.";
const QUESTION: &str = "How often is the primary mirror cleaned?";

fn synthkit() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synthkit"));
    cmd.env_remove("SYNTHKIT_BASE_URL")
        .env_remove("SYNTHKIT_MODEL")
        .env_remove("OPENAI_BASE_URL");
    cmd
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn run(args: &[&str], nodes: &Path) -> Output {
    synthkit()
        .args(args)
        .arg("--nodes")
        .arg(nodes)
        .output()
        .unwrap()
}

fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr_of(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A LlamaIndex `TextNode` as `node.model_dump()` / `node.to_dict()` writes it.
fn text_node(id: &str, text: &str, metadata: Value, hidden: &[&str]) -> Value {
    json!({
        "id_": id,
        "embedding": null,
        "metadata": metadata,
        "excluded_embed_metadata_keys": ["file_path"],
        "excluded_llm_metadata_keys": hidden,
        "relationships": {"1": {"node_id": "doc-1", "node_type": "4", "metadata": {}, "hash": "abc", "class_name": "RelatedNodeInfo"}},
        "metadata_template": "{key}: {value}",
        "metadata_separator": "\n",
        "text": text,
        "mimetype": "text/plain",
        "start_char_idx": 0,
        "end_char_idx": text.len(),
        "metadata_seperator": "\n",
        "text_template": "{metadata_str}\n\n{content}",
        "class_name": "TextNode",
    })
}

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
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
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
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "nodes.json",
        serde_json::to_string(&nodes()).unwrap(),
    );
    let out = run(&["ask", QUESTION, "-q", "--mode", "context_only"], &path);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let context = stdout_of(&out);
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
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("bad.json: line "), "{err}");
    assert!(err.contains("(index 2)"), "{err}");
    assert!(err.contains("missing field `text`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // JSON lines: the line; a wrong type; a node with neither `id` nor `id_`; a
    // NodeWithScore with fields beside `node`.
    let cases: [(&str, &[&str]); 4] = [
        (
            "{\"id_\":\"a\",\"text\":\"x\"}\n{\"node\":{\"id_\":\"b\",\"text\":\"y\"},\"score\":\"high\"}\n",
            &["line 2", "expected f64"],
        ),
        (
            "{\"text\":\"x\",\"metadata\":{}}\n",
            &["line 1", "missing field `id` (LlamaIndex: `id_`)"],
        ),
        (
            "{\"id_\":\"a\",\"text\":\"x\",\"excluded_llm_metadata_keys\":\"k\"}\n",
            &["line 1", "expected a sequence"],
        ),
        (
            "{\"node\":{\"id_\":\"a\",\"text\":\"x\"},\"text\":\"y\"}\n",
            &["line 1", "`text` beside `node`"],
        ),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let path = write(dir.path(), &format!("bad{i}.jsonl"), text);
        let out = run(&["ask", QUESTION], &path);
        assert_eq!(out.status.code(), Some(1), "case {i}: {}", stderr_of(&out));
        let err = stderr_of(&out);
        for needle in *needles {
            assert!(err.contains(needle), "case {i}: {needle:?} not in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
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
    // And the hidden keys are still hidden from the model.
    let out = run(
        &["ask", QUESTION, "-q", "--mode", "context_only"],
        &again_path,
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(!stdout_of(&out).contains("zz-77"), "{}", stdout_of(&out));
}

#[test]
fn llamaindex_format_needs_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "nodes.json",
        serde_json::to_string(&nodes()).unwrap(),
    );
    let out = run(&["ask", QUESTION, "--format", "llamaindex"], &path);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("--json"), "{}", stderr_of(&out));
    // The default needs nothing.
    let out = run(&["ask", QUESTION, "-q", "--format", "synthkit"], &path);
    assert!(out.status.success(), "{}", stderr_of(&out));
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
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("--format llamaindex"),
        "{}",
        stderr_of(&out)
    );
    let out = synthkit().args(["ask", "--help"]).output().unwrap();
    assert!(
        stdout_of(&out).contains("llamaindex"),
        "{}",
        stdout_of(&out)
    );
}
