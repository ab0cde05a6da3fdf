//! Nodes: the retrieved text chunks a synthesizer answers from.
//!
//! Build them with [`Node::new`] and its `with_*` methods, or read them from JSON in
//! synthkit's form or LlamaIndex's with [`Node::from_json`] and [`nodes_from_json`] (the
//! one reader of node JSON, with one id rule: see [`json`]). A node may carry an image
//! ([`NodeImage`], LlamaIndex's `ImageNode`), sent to vision models at the node's place:
//! see [`image`].

pub mod image;
pub mod image_cost;
pub mod json;

pub use image::{DEFAULT_MAX_IMAGE_BYTES, ImageError, ImageFormat, NodeImage};
pub use image_cost::ImageCost;
pub use json::{NodeJsonError, NodeListReader, nodes_from_json};

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A retrieved chunk of text with ordered metadata and an optional relevance score.
///
/// The model sees [`Node::llm_text`]: each metadata entry not excluded from the model as a
/// `key: value` line, a blank line, then the text (or the text alone when no metadata is
/// shown).
///
/// ```
/// use synthkit::Node;
/// let node = Node::new("a", "The sky is blue.")
///     .with_metadata("file", "sky.md")
///     .with_metadata("secret", "x")
///     .exclude_from_llm("secret");
/// assert_eq!(node.llm_text(), "file: sky.md\n\nThe sky is blue.");
/// ```
///
/// Its `Serialize` and `Deserialize` are synthkit's exact form (`id` and `text` required).
/// To read nodes as users give them (LlamaIndex's forms, plain strings, ids by position),
/// use [`Node::from_json`] or [`nodes_from_json`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Node {
    /// A unique id (for sources and response metadata).
    pub id: String,
    /// The text.
    pub text: String,
    /// Metadata in insertion order.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Metadata keys the model does not see.
    #[serde(default)]
    pub excluded_llm_metadata_keys: Vec<String>,
    /// The retriever's relevance score, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// An image the node carries (LlamaIndex's `ImageNode`), if any; [`Node::text`] stays
    /// the node's text (a caption, or empty), sent before the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<NodeImage>,
}

impl Node {
    /// A node with an id and text and no metadata.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            text: text.into(),
            ..Self::default()
        }
    }

    /// Adds (or replaces) a metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Hides a metadata key from the model (it stays in the response metadata).
    pub fn exclude_from_llm(mut self, key: impl Into<String>) -> Self {
        self.excluded_llm_metadata_keys.push(key.into());
        self
    }

    setters! {
        /// Sets the relevance score.
        pub fn with_score(score: f64) => Some(score);
        /// Sets the image the node carries.
        pub fn with_image(image: NodeImage) => Some(image);
    }

    /// The metadata lines the model sees (`key: value`, joined by newlines).
    pub fn llm_metadata_str(&self) -> String {
        let mut out = String::new();
        for (key, value) in &self.metadata {
            if self.excluded_llm_metadata_keys.iter().any(|k| k == key) {
                continue;
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(key);
            out.push_str(": ");
            match value {
                Value::String(s) => out.push_str(s),
                other => python_repr(other, &mut out),
            }
        }
        out
    }

    /// The text the model sees: metadata lines, a blank line, then the text, with outer
    /// whitespace trimmed; the raw text when no metadata is shown.
    pub fn llm_text(&self) -> Cow<'_, str> {
        let meta = self.llm_metadata_str();
        if meta.is_empty() {
            Cow::Borrowed(&self.text)
        } else {
            Cow::Owned(format!("{meta}\n\n{}", self.text).trim().to_string())
        }
    }
}

/// Writes `value` as the reference shows metadata values (Python's `str` of the value:
/// `['x', 'y']`, `True`, `None`, `{'k': 1}`), so prompts match the reference's.
fn python_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => python_str_repr(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_repr(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_str_repr(k, out);
                out.push_str(": ");
                python_repr(v, out);
            }
            out.push('}');
        }
    }
}

fn python_str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_when_no_metadata() {
        let n = Node::new("a", "  x  ");
        assert_eq!(n.llm_text(), "  x  ");
    }

    #[test]
    fn non_string_values_render_as_the_reference_does() {
        let n = Node::new("a", "t")
            .with_metadata("page", 3)
            .with_metadata("ok", true)
            .with_metadata("tags", serde_json::json!(["x", "it's"]))
            .with_metadata("m", serde_json::json!({"k": null}));
        assert_eq!(
            n.llm_text(),
            "page: 3\nok: True\ntags: ['x', \"it's\"]\nm: {'k': None}\n\nt"
        );
    }

    #[test]
    fn all_excluded_is_plain() {
        let n = Node::new("a", "t")
            .with_metadata("k", "v")
            .exclude_from_llm("k");
        assert_eq!(n.llm_text(), "t");
    }
}
