//! `--nodes`: pre-retrieved nodes as JSON, a JSON array or JSON lines, each node read by
//! the library's one node reader ([`synthkit::node::NodeListReader`]: plain strings,
//! synthkit's form, LlamaIndex's `TextNode` and `NodeWithScore`, one id rule), or a
//! LlamaIndex `Response` (`ask --json --format llamaindex`), whose `source_nodes` are the
//! nodes. Errors name the line and column (and, in an array, the node's index).

use anyhow::{Result, anyhow};
use serde::de::{self, DeserializeSeed, Visitor};
use serde_json::Value;
use synthkit::Node;
use synthkit::node::{NodeJsonError, NodeListReader};

/// A serde_json message without its trailing ` at line L column C`.
fn bare_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s.get(..i).unwrap_or(&s).to_string(),
        None => s,
    }
}

/// What a node may be (hint for JSON syntax errors).
const NODE_SHAPES: &str = "a node is a string (its text), {id, text, metadata, excluded_llm_metadata_keys, score}, a LlamaIndex TextNode {id_, text, metadata, excluded_llm_metadata_keys, ...} or ImageNode (TextNode plus image: base64, image_mimetype), a NodeWithScore {node: TextNode or ImageNode, score}, or any of these with image {data: base64, mime_type} (PNG, JPEG, WebP, GIF)";

/// Reads one JSON value and hands it to the reader, so that a node error is raised while
/// the parser still knows where the value ends (serde_json adds that line and column).
/// The node error itself is kept in `failed`.
struct NodeSeed<'a> {
    reader: &'a mut NodeListReader,
    failed: &'a mut Option<NodeJsonError>,
}

impl NodeSeed<'_> {
    fn accept<E: de::Error>(self, value: Value) -> std::result::Result<(), E> {
        self.reader.push(value).map_err(|e| {
            let message = e.to_string();
            *self.failed = Some(e);
            E::custom(message)
        })
    }
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a node")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<(), E> {
        self.accept(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<(), E> {
        self.accept(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<(), E> {
        self.accept(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<(), E> {
        self.accept(Value::from(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<(), E> {
        self.accept(Value::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<(), E> {
        self.accept(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        self.accept(Value::Null)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> std::result::Result<(), A::Error> {
        use serde::Deserialize;
        let value = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        self.accept(value)
    }
    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> std::result::Result<(), A::Error> {
        use serde::Deserialize;
        let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        self.accept(value)
    }
}

/// A JSON array of nodes, each handed to the reader as it is read (the visitor of
/// `deserialize_seq`).
struct ArraySeed<'a> {
    reader: &'a mut NodeListReader,
    failed: &'a mut Option<NodeJsonError>,
}

impl<'de> Visitor<'de> for ArraySeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of nodes")
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        loop {
            let seed = NodeSeed {
                reader: &mut *self.reader,
                failed: &mut *self.failed,
            };
            if seq.next_element_seed(seed)?.is_none() {
                return Ok(());
            }
        }
    }
}

/// Reads `text` as one node (after the nodes already in `reader`), and nothing after it.
fn read_one(
    text: &str,
    reader: &mut NodeListReader,
    failed: &mut Option<NodeJsonError>,
) -> serde_json::Result<()> {
    let mut de = serde_json::Deserializer::from_str(text);
    NodeSeed { reader, failed }.deserialize(&mut de)?;
    de.end()
}

/// Parses nodes: a JSON array, or JSON lines (one node per line; blank lines ignored), each
/// node in any form the library reads, mixed freely, with its one id rule. Errors name the
/// line and column (and, in an array, the node's index).
pub fn parse_nodes(text: &str, name: &str) -> Result<Vec<Node>> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{')
        && let Some(nodes) = response_source_nodes(text, name)
    {
        return nodes;
    }
    let mut reader = NodeListReader::new();
    let mut failed = None;
    if trimmed.starts_with('[') {
        let mut de = serde_json::Deserializer::from_str(text);
        let array = ArraySeed {
            reader: &mut reader,
            failed: &mut failed,
        };
        let parsed = de::Deserializer::deserialize_seq(&mut de, array).and_then(|()| de.end());
        if let Err(e) = parsed {
            let (line, column) = (e.line(), e.column());
            return Err(match failed {
                Some(node) => anyhow!(
                    "{name}: line {line}, column {column} (index {}): {node}",
                    node.position().saturating_sub(1)
                ),
                None if e.is_syntax() && e.to_string().contains("trailing characters") => {
                    anyhow!(
                        "{name}: line {line}, column {column}: not a valid array of nodes: {} ({NODE_SHAPES})",
                        bare_message(&e)
                    )
                }
                None => anyhow!(
                    "{name}: line {line}, column {column}: node {} (index {}): not a valid array of nodes: {} ({NODE_SHAPES})",
                    reader.len() + 1,
                    reader.len(),
                    bare_message(&e)
                ),
            });
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let Err(e) = read_one(line, &mut reader, &mut failed) else {
                continue;
            };
            // A single pretty-printed object is not JSON lines, but it is clear.
            if trimmed.starts_with('{') {
                let (mut whole, mut whole_failed) = (NodeListReader::new(), None);
                match read_one(text, &mut whole, &mut whole_failed) {
                    Ok(()) => return Ok(whole.into_nodes()),
                    // A line holding only `{` opens an object spanning lines
                    // (pretty-printed): its own error says where it breaks, not "EOF on
                    // line 1".
                    Err(whole_error) if line.trim() == "{" => {
                        return Err(line_error(
                            name,
                            &whole_error,
                            whole_error.line(),
                            1,
                            whole_failed,
                        ));
                    }
                    Err(_) => {}
                }
            }
            return Err(line_error(name, &e, i + 1, reader.len() + 1, failed));
        }
    }
    if reader.is_empty() {
        return Err(anyhow!(
            "{name} has no nodes: give a JSON array or one JSON node per line"
        ));
    }
    Ok(reader.into_nodes())
}

/// The nodes of a LlamaIndex `Response` (what `ask --json --format llamaindex` prints:
/// `{"response", "source_nodes": [NodeWithScore...], "metadata"}`), so that an answer's
/// sources can be asked again; `None` when `text` is not one such object.
fn response_source_nodes(text: &str, name: &str) -> Option<Result<Vec<Node>>> {
    let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    if !object.contains_key("response") {
        return None;
    }
    let Some(Value::Array(nodes)) = object.remove("source_nodes") else {
        return None;
    };
    let mut reader = NodeListReader::new();
    for (i, node) in nodes.into_iter().enumerate() {
        if let Err(e) = reader.push(node) {
            return Some(Err(anyhow!(
                "{name}: a LlamaIndex Response's source_nodes[{i}]: {e}"
            )));
        }
    }
    if reader.is_empty() {
        return Some(Err(anyhow!(
            "{name} is a LlamaIndex Response with no source_nodes: there are no nodes to answer from"
        )));
    }
    Some(Ok(reader.into_nodes()))
}

/// The error of node `position`, read from `line` (JSON lines, or one pretty-printed
/// object): the library's, or serde_json's.
fn line_error(
    name: &str,
    e: &serde_json::Error,
    line: usize,
    position: usize,
    failed: Option<NodeJsonError>,
) -> anyhow::Error {
    let column = e.column();
    match failed {
        Some(node) => anyhow!("{name}: line {line}, column {column}: {node}"),
        None => anyhow!(
            "{name}: line {line}, column {column}: node {position}: not valid JSON: {} (each line must be one node; {NODE_SHAPES})",
            bare_message(e)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error `parse_nodes` gives for `text` read as the file `name`.
    fn error_of(text: &str, name: &str) -> String {
        parse_nodes(text, name).unwrap_err().to_string()
    }

    /// The `--nodes` parser on 10,000 arbitrary byte strings (decoded lossily, as the CLI
    /// reads them) and 10,000 JSON-shaped ones: nodes or an error, never a panic.
    #[test]
    fn nodes_parser_never_panics_on_arbitrary_bytes() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let mut runner = TestRunner::new(Config {
            cases: 10_000,
            ..Config::default()
        });
        let bytes = proptest::collection::vec(any::<u8>(), 0..400);
        runner
            .run(&bytes, |b| {
                let text = String::from_utf8_lossy(&b);
                let _ = parse_nodes(&text, "fuzz.jsonl");
                Ok(())
            })
            .unwrap();
        let jsonish = proptest::string::string_regex(
            r#"[\[\]{}",:\n a-z0-9"]{0,200}|\{"id": ?"[a-z]{0,4}", ?"text": ?"[^"\\]{0,20}"(, ?"score": ?-?[0-9.e]{1,6})?\}(\n\{"id":"x","text":"y"\})*"#,
        )
        .unwrap();
        runner
            .run(&jsonish, |t| {
                if let Ok(nodes) = parse_nodes(&t, "fuzz.json") {
                    // What parses survives a round trip through the array form.
                    let again = parse_nodes(&serde_json::to_string(&nodes).unwrap(), "again.json");
                    prop_assert_eq!(again.ok(), Some(nodes));
                }
                Ok(())
            })
            .unwrap();
        println!("nodes parser: {} cases", 2 * 10_000);
    }

    #[test]
    fn jsonl_and_array() {
        let jsonl =
            "{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"b\",\"text\":\"y\",\"score\":0.5}\n";
        let n = parse_nodes(jsonl, "n.jsonl").unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n[1].score, Some(0.5));
        let arr = "[{\"id\":\"a\",\"text\":\"x\",\"metadata\":{\"k\":1}}]";
        assert_eq!(parse_nodes(arr, "n.json").unwrap()[0].metadata["k"], 1);
        let pretty = "{\n  \"id\": \"a\",\n  \"text\": \"x\"\n}\n";
        assert_eq!(parse_nodes(pretty, "n.json").unwrap().len(), 1);
    }

    #[test]
    fn errors_name_the_line() {
        let bad = "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"b\"}\n";
        let e = error_of(bad, "n.jsonl");
        assert!(
            e.starts_with("n.jsonl: line 2, column 10: node 2 has no `text`"),
            "{e}"
        );
        assert!(!e.contains("at line 1 column"), "{e}");
        // A pretty-printed object: the line where it breaks, not line 1.
        let e = error_of("{\n  \"id\": \"a\",\n  \"txt\": \"x\"\n}\n", "n.json");
        assert!(e.contains("line 4"), "{e}");
        assert!(e.contains("node 1 has no `text`"), "{e}");
        let e = error_of("{\n  \"id\": \"a\",\n  \"text\": oops\n}\n", "n.json");
        assert!(e.contains("line 3"), "{e}");
        let e = error_of("[{\"id\":\"a\",\n\"text\": 3}]", "n.json");
        assert!(e.contains("line 2"), "{e}");
        assert!(
            e.contains("(index 0): node 1: `text` must be a string"),
            "{e}"
        );
        assert!(parse_nodes("  \n", "n").is_err());
    }

    /// The list of issue 17 (refused here before): ids by the library's one rule.
    #[test]
    fn ids_follow_the_one_rule() {
        let list =
            r#"[{"node": {"id_": "li-7", "text": "a"}}, {"text": "b"}, {"id": "x", "text": "c"}]"#;
        let jsonl = list
            .trim_matches(['[', ']'])
            .replace("}, {\"text\"", "}\n{\"text\"")
            .replace("}, {\"id\"", "}\n{\"id\"");
        assert_eq!(jsonl.lines().count(), 3, "{jsonl}");
        for text in [list, jsonl.as_str()] {
            let ids: Vec<String> = parse_nodes(text, "n")
                .unwrap()
                .into_iter()
                .map(|n| n.id)
                .collect();
            assert_eq!(ids, ["li-7", "2", "x"], "{text}");
        }
        // Plain strings too.
        let nodes = parse_nodes("\"one\"\n\n\"two\"\n", "n.jsonl").unwrap();
        assert_eq!(nodes[1], Node::new("2", "two"));
    }

    #[test]
    fn duplicate_and_conflicting_ids_name_their_line() {
        let array =
            "[\n {\"id\": \"x\", \"text\": \"a\"},\n \"b\",\n {\"id_\": \"x\", \"text\": \"c\"}\n]";
        let e = error_of(array, "n.json");
        assert!(
            e.starts_with(
                "n.json: line 4, column 26 (index 2): node 3 has the id \"x\", as node 1 does"
            ),
            "{e}"
        );
        let jsonl = "{\"id\": \"x\", \"text\": \"a\"}\n\n{\"id\": \"x\", \"text\": \"b\"}\n";
        let e = error_of(jsonl, "n.jsonl");
        assert!(
            e.starts_with("n.jsonl: line 3, column 24: node 2 has the id \"x\""),
            "{e}"
        );
        let e = error_of(
            "{\"id\": \"x\", \"id_\": \"y\", \"text\": \"a\"}",
            "n.jsonl",
        );
        assert!(e.contains("line 1"), "{e}");
        assert!(
            e.contains("node 1: `id` (\"x\") and `id_` (\"y\") differ"),
            "{e}"
        );
    }
}
