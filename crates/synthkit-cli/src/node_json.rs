//! `--nodes`: pre-retrieved nodes as JSON, in synthkit's form or LlamaIndex's (`TextNode`
//! with `id_`, `NodeWithScore` with `{node, score}`), as an array or JSON lines. Errors
//! name the line and column and say which shapes are accepted.

use anyhow::{Result, anyhow};
use synthkit::Node;

/// A serde_json message without its trailing ` at line L column C`.
fn bare_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s.get(..i).unwrap_or(&s).to_string(),
        None => s,
    }
}

/// What a node may hold, in synthkit's form or LlamaIndex's (hint for errors).
const NODE_SHAPES: &str = "a node is {id, text, metadata, excluded_llm_metadata_keys, score}, a LlamaIndex TextNode {id_, text, metadata, excluded_llm_metadata_keys, ...} or a NodeWithScore {node: TextNode, score}";

/// The fields of one node object as read, in either form: synthkit's `{id, text, ...}`, a
/// LlamaIndex `TextNode` (`id_` for `id`; its other fields, such as `embedding`,
/// `relationships` or `class_name`, ignored) or a LlamaIndex `NodeWithScore`
/// (`{"node": TextNode, "score": f64 | null}`).
#[derive(serde::Deserialize)]
#[serde(rename = "Node")]
struct RawNode {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    id_: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    excluded_llm_metadata_keys: Option<Vec<String>>,
    #[serde(default)]
    score: Option<f64>,
    #[serde(default)]
    node: Option<Box<InputNode>>,
}

/// One node read from `--nodes`, whatever its form.
struct InputNode {
    node: Node,
    /// Whether it was a `NodeWithScore` (which may not nest).
    wrapper: bool,
}

impl RawNode {
    /// The node these fields describe, or what is wrong with them.
    fn into_node(self) -> std::result::Result<InputNode, String> {
        if let Some(inner) = self.node {
            if inner.wrapper {
                return Err("a NodeWithScore's `node` holds another NodeWithScore".into());
            }
            for (field, given) in [
                ("id", self.id.is_some()),
                ("id_", self.id_.is_some()),
                ("text", self.text.is_some()),
                ("metadata", self.metadata.is_some()),
                (
                    "excluded_llm_metadata_keys",
                    self.excluded_llm_metadata_keys.is_some(),
                ),
            ] {
                if given {
                    return Err(format!(
                        "`{field}` beside `node`: a NodeWithScore holds its node's fields under `node`"
                    ));
                }
            }
            let mut node = inner.node;
            if self.score.is_some() {
                node.score = self.score;
            }
            return Ok(InputNode {
                node,
                wrapper: true,
            });
        }
        let id = match (self.id, self.id_) {
            (Some(a), Some(b)) if a != b => {
                return Err(format!("`id` ({a:?}) and `id_` ({b:?}) differ"));
            }
            (Some(id), _) | (None, Some(id)) => id,
            (None, None) => return Err("missing field `id` (LlamaIndex: `id_`)".into()),
        };
        let text = self.text.ok_or("missing field `text`")?;
        Ok(InputNode {
            node: Node {
                id,
                text,
                metadata: self.metadata.unwrap_or_default(),
                excluded_llm_metadata_keys: self.excluded_llm_metadata_keys.unwrap_or_default(),
                score: self.score,
            },
            wrapper: false,
        })
    }
}

impl<'de> serde::Deserialize<'de> for InputNode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        /// Reads the object's fields and checks them while the parser still knows where
        /// the object is, so that errors carry its line and column.
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = InputNode;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("struct Node")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<InputNode, A::Error> {
                use serde::Deserialize;
                let raw = RawNode::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                raw.into_node().map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A JSON array of nodes, noting the index of the element being read.
struct NodeArray<'a>(&'a std::cell::Cell<usize>);

impl<'de> serde::de::DeserializeSeed<'de> for NodeArray<'_> {
    type Value = Vec<Node>;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Vec<Node>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for NodeArray<'_> {
    type Value = Vec<Node>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of nodes")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Vec<Node>, A::Error> {
        let mut nodes = Vec::new();
        loop {
            self.0.set(nodes.len());
            match seq.next_element::<InputNode>()? {
                Some(n) => nodes.push(n.node),
                None => return Ok(nodes),
            }
        }
    }
}

/// Parses one node (a JSON object in any accepted form).
fn parse_node(text: &str) -> serde_json::Result<Node> {
    serde_json::from_str::<InputNode>(text).map(|n| n.node)
}

/// Parses nodes: a JSON array, or JSON lines (one node per line; blank lines ignored), each
/// node in synthkit's form or LlamaIndex's (`TextNode`, `NodeWithScore`), mixed freely.
/// Errors name the line (and, in an array, the node's index).
pub fn parse_nodes(text: &str, name: &str) -> Result<Vec<Node>> {
    let trimmed = text.trim_start();
    let nodes = if trimmed.starts_with('[') {
        use serde::de::DeserializeSeed;
        let at = std::cell::Cell::new(0);
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed = NodeArray(&at)
            .deserialize(&mut de)
            .and_then(|nodes| de.end().map(|()| nodes));
        parsed.map_err(|e| {
            let index = if e.is_syntax() && e.to_string().contains("trailing characters") {
                String::new()
            } else {
                format!("node {} (index {}): ", at.get() + 1, at.get())
            };
            anyhow!(
                "{name}: line {}, column {}: {index}not a valid array of nodes: {} ({NODE_SHAPES})",
                e.line(),
                e.column(),
                bare_message(&e)
            )
        })?
    } else {
        let mut nodes = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match parse_node(line) {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    // A single pretty-printed object is not JSON lines, but it is clear.
                    if trimmed.starts_with('{')
                        && let Ok(n) = parse_node(text)
                    {
                        return Ok(vec![n]);
                    }
                    // A line holding only `{` opens an object spanning lines (pretty-printed):
                    // its own error says where it breaks, not "EOF on line 1".
                    if line.trim() == "{"
                        && let Err(whole) = parse_node(text)
                    {
                        return Err(anyhow!(
                            "{name}: line {}, column {}: not a valid node: {} ({NODE_SHAPES})",
                            whole.line(),
                            whole.column(),
                            bare_message(&whole)
                        ));
                    }
                    return Err(anyhow!(
                        "{name}: line {}, column {}: node {}: not a valid node: {} (each line must be one JSON object; {NODE_SHAPES})",
                        i + 1,
                        e.column(),
                        nodes.len() + 1,
                        bare_message(&e)
                    ));
                }
            }
        }
        nodes
    };
    if nodes.is_empty() {
        return Err(anyhow!(
            "{name} has no nodes: give a JSON array or one JSON node per line"
        ));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = parse_nodes(bad, "n.jsonl").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("missing field `text`"), "{e}");
        assert!(!e.contains("at line 1 column"), "{e}");
        // A pretty-printed object: the line where it breaks, not line 1.
        let e = parse_nodes("{\n  \"id\": \"a\",\n  \"txt\": \"x\"\n}\n", "n.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 4"), "{e}");
        assert!(e.contains("missing field `text`"), "{e}");
        let e = parse_nodes("{\n  \"id\": \"a\",\n  \"text\": oops\n}\n", "n.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
        let e = parse_nodes("[{\"id\":\"a\",\n\"text\": 3}]", "n.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(parse_nodes("  \n", "n").is_err());
    }
}
