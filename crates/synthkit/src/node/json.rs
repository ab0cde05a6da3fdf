//! Nodes from JSON values: the one reader behind every front end (the CLI's `--nodes`, the
//! service's `nodes`, the Python package), with one id rule.
//!
//! A node is any of:
//! - a string: the node's text, with no metadata;
//! - synthkit's object `{id, text, metadata, excluded_llm_metadata_keys, score}`, all but
//!   `text` optional (what [`Node`]'s `Serialize` writes);
//! - a LlamaIndex `TextNode` as `to_dict()` / `model_dump()` writes it: `id_`, `text`,
//!   `metadata`, `excluded_llm_metadata_keys` (other fields, such as `embedding`,
//!   `relationships` or `class_name`, are ignored);
//! - a LlamaIndex `NodeWithScore`: `{"node": {...}, "score": 0.83}`, the score optional (when
//!   it is absent or null, the inner node's own `score`, if any).
//!
//! **Images.** A node may carry an image ([`NodeImage`]): synthkit's `"image": {"data":
//! "<base64>", "mime_type": "image/png"}`, or a LlamaIndex `ImageNode`'s `"image":
//! "<base64>"` with `image_mimetype` (the mime type may be left out: the bytes say it), or
//! an `image_url` that is a `data:<mime type>;base64,<data>` URL. PNG, JPEG, WebP and GIF,
//! checked (base64, signature, mime type) and at most [`DEFAULT_MAX_IMAGE_BYTES`] decoded
//! ([`NodeListReader::with_max_image_bytes`] sets another cap). An `image_url` that is not
//! a data URL and an `image_path` are errors when the node has no `image` data: synthkit
//! never fetches or reads an image (beside data, they are ignored, as LlamaIndex prefers
//! the data). A node with an image may leave out `text` (it is then empty).
//!
//! **The id rule.** A node's id is its `id`, else its `id_`, else its `node_id`, else its
//! 1-based position in the list (`"1"`, `"2"`, ...). A node giving two of `id`, `id_` and
//! `node_id` with different values is an error, and so are two nodes of one list with the
//! same id. A `null` field counts as absent (but a node needs its `text`).
//!
//! Every error is a [`NodeJsonError`] naming the node's position and what to change.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use serde_json::{Map, Value};

use super::Node;
use super::image::{DEFAULT_MAX_IMAGE_BYTES, ImageError, NodeImage};

/// The fields that may hold a node's id, in the order the id rule reads them.
const ID_FIELDS: [&str; 3] = ["id", "id_", "node_id"];

/// The fields of a node object (all but `score`): the ones a `NodeWithScore` holds under
/// `node`, not beside it. Front ends that convert their own objects to node JSON (the
/// Python bindings) check these fields' types.
pub const NODE_FIELDS: [&str; 6] = [
    "id",
    "id_",
    "node_id",
    "text",
    "metadata",
    "excluded_llm_metadata_keys",
];

/// The image fields of a node object (synthkit's `image`, LlamaIndex `ImageNode`'s
/// `image`, `image_mimetype`, `image_url` and `image_path`), held under a `NodeWithScore`'s
/// `node` like [`NODE_FIELDS`].
pub const IMAGE_FIELDS: [&str; 4] = ["image", "image_mimetype", "image_url", "image_path"];

/// The most characters of an id, and the most keys, that an error message shows.
const SHOWN_CHARS: usize = 80;
const SHOWN_KEYS: usize = 8;

/// Why a JSON value is not a node, or a list of values is not a list of nodes. Each
/// variant names the node's 1-based position ([`NodeJsonError::position`]); the message
/// says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeJsonError {
    /// The value is neither a string nor an object.
    #[error(
        "node {position}: expected a string (the node's text) or an object with a `text` (a synthkit node, a LlamaIndex TextNode or a NodeWithScore), got {found}"
    )]
    NotANode {
        /// The node's position (1-based).
        position: usize,
        /// What the value is (`a number`, `an array`, ...).
        found: &'static str,
    },
    /// An object without a `text` (or with a null one).
    #[error("node {position} has no `text`: give its text as a string (keys given: {keys})")]
    MissingText {
        /// The node's position (1-based).
        position: usize,
        /// The keys the object has (the first few), for spotting a misspelt `text`.
        keys: String,
    },
    /// A field of the wrong type.
    #[error("node {position}: `{field}` must be {expected}, got {found}")]
    WrongType {
        /// The node's position (1-based).
        position: usize,
        /// The field (`text`, `metadata`, `excluded_llm_metadata_keys[2]`, ...).
        field: String,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: &'static str,
    },
    /// An id field holding the empty string.
    #[error(
        "node {position}: `{field}` is empty: give a non-empty id, or none to let the node's position be its id"
    )]
    EmptyId {
        /// The node's position (1-based).
        position: usize,
        /// The field (`id`, `id_` or `node_id`).
        field: &'static str,
    },
    /// Two id fields of one node with different values.
    #[error(
        "node {position}: `{first}` ({}) and `{second}` ({}) differ: give one id (the id is `id`, else `id_`, else `node_id`)",
        shown(.first_id),
        shown(.second_id)
    )]
    ConflictingIds {
        /// The node's position (1-based).
        position: usize,
        /// The first id field given.
        first: &'static str,
        /// Its value.
        first_id: String,
        /// The later id field that differs.
        second: &'static str,
        /// Its value.
        second_id: String,
    },
    /// Two nodes of one list with the same id.
    #[error(
        "node {position} has the id {}, as node {first} does{}: give each node its own id (ids must be unique in one list)",
        shown(.id),
        position_note(.from_position)
    )]
    DuplicateId {
        /// The later node's position (1-based).
        position: usize,
        /// The position of the earlier node with this id.
        first: usize,
        /// The id.
        id: String,
        /// Which of the two nodes gave no id, so that its position is its id, if one did.
        from_position: Option<usize>,
    },
    /// A `NodeWithScore` whose `node` is another `NodeWithScore`.
    #[error(
        "node {position}: a NodeWithScore's `node` holds another NodeWithScore: put the TextNode itself under `node`"
    )]
    NestedNode {
        /// The node's position (1-based).
        position: usize,
    },
    /// A node field beside a `NodeWithScore`'s `node` (it would be ignored).
    #[error(
        "node {position}: `{field}` beside `node`: a NodeWithScore holds its node's fields under `node`; move `{field}` there"
    )]
    FieldBesideNode {
        /// The node's position (1-based).
        position: usize,
        /// The field.
        field: &'static str,
    },
    /// An image field that is not an image the node may carry (bad base64, an unknown
    /// format, over the size cap, a URL or file path, ...).
    #[error("node {position}: `{field}`: {error}")]
    Image {
        /// The node's position (1-based).
        position: usize,
        /// The field (`image`, `image.data`, `image_url`, `image_path`, ...).
        field: &'static str,
        /// What is wrong with it.
        #[source]
        error: ImageError,
    },
}

impl NodeJsonError {
    /// The 1-based position of the node at fault (for a duplicate id, the later node).
    pub fn position(&self) -> usize {
        match self {
            NodeJsonError::NotANode { position, .. }
            | NodeJsonError::MissingText { position, .. }
            | NodeJsonError::WrongType { position, .. }
            | NodeJsonError::EmptyId { position, .. }
            | NodeJsonError::ConflictingIds { position, .. }
            | NodeJsonError::DuplicateId { position, .. }
            | NodeJsonError::NestedNode { position }
            | NodeJsonError::FieldBesideNode { position, .. }
            | NodeJsonError::Image { position, .. } => *position,
        }
    }
}

/// An id as an error message shows it: quoted, its first [`SHOWN_CHARS`] characters.
fn shown(id: &str) -> String {
    match id.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{:?}...", id.get(..cut).unwrap_or(id)),
        None => format!("{id:?}"),
    }
}

fn position_note(from_position: &Option<usize>) -> String {
    match from_position {
        Some(p) => format!(" (node {p} gives no id, so its position is its id)"),
        None => String::new(),
    }
}

/// What a JSON value is, for error messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Where a node's id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdFrom {
    /// One of `id`, `id_`, `node_id`.
    Given,
    /// The node's position.
    Position,
}

impl Node {
    /// Reads one node from JSON in any accepted form (see [`crate::node::json`]): a string,
    /// synthkit's object, a LlamaIndex `TextNode` or `NodeWithScore`. `position` is the
    /// node's 1-based position in its list: errors name it, and it is the id of a node that
    /// gives none. To read a whole list, checking that ids are unique, use
    /// [`nodes_from_json`].
    ///
    /// ```
    /// use serde_json::json;
    /// use synthkit::Node;
    ///
    /// let li = json!({"node": {"id_": "li-7", "text": "a", "class_name": "TextNode"}, "score": 0.83});
    /// let node = Node::from_json(li, 1)?;
    /// assert_eq!((node.id.as_str(), node.score), ("li-7", Some(0.83)));
    /// assert_eq!(Node::from_json(json!("just text"), 2)?.id, "2");
    ///
    /// let e = Node::from_json(json!({"id": "x", "id_": "y", "text": "t"}), 3).unwrap_err();
    /// assert!(e.to_string().starts_with("node 3: `id` (\"x\") and `id_` (\"y\") differ"));
    /// # Ok::<(), synthkit::node::NodeJsonError>(())
    /// ```
    pub fn from_json(value: Value, position: usize) -> Result<Node, NodeJsonError> {
        read_node(value, position, DEFAULT_MAX_IMAGE_BYTES).map(|(node, _)| node)
    }

    /// The node as a LlamaIndex `NodeWithScore` holding a `TextNode` (`id_`, `text`,
    /// `metadata`, `excluded_llm_metadata_keys`) and the node's `score`: the
    /// `source_nodes` of a LlamaIndex `Response`, which [`Node::from_json`] reads back. A
    /// node with an image is an `ImageNode` (`image`: the base64 data, `image_mimetype`).
    ///
    /// ```
    /// use synthkit::Node;
    ///
    /// let node = Node::new("n1", "The sky is blue.");
    /// assert_eq!(Node::from_json(node.to_node_with_score(), 1)?, node);
    /// # Ok::<(), synthkit::node::NodeJsonError>(())
    /// ```
    pub fn to_node_with_score(&self) -> Value {
        let mut node = serde_json::json!({
            "id_": self.id,
            "text": self.text,
            "metadata": self.metadata,
            "excluded_llm_metadata_keys": self.excluded_llm_metadata_keys,
            "class_name": "TextNode",
        });
        if let (Some(image), Value::Object(fields)) = (&self.image, &mut node) {
            fields.insert("image".into(), image.base64().into());
            fields.insert("image_mimetype".into(), image.mime_type().into());
            fields.insert("class_name".into(), "ImageNode".into());
        }
        serde_json::json!({"node": node, "score": self.score})
    }
}

/// Reads a list of nodes from JSON values (each in any accepted form, mixed freely; see
/// [`crate::node::json`]), applying the id rule: `id`, else `id_`, else `node_id`, else the
/// node's 1-based position. Two nodes with the same id are an error naming both positions.
///
/// ```
/// use serde_json::json;
/// use synthkit::node::nodes_from_json;
///
/// let values = json!([{"node": {"id_": "li-7", "text": "a"}}, {"text": "b"}, {"id": "x", "text": "c"}]);
/// let nodes = nodes_from_json(values.as_array().cloned().unwrap_or_default())?;
/// let ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
/// assert_eq!(ids, ["li-7", "2", "x"]);
///
/// let e = nodes_from_json([json!({"id": "x", "text": "a"}), json!({"id": "x", "text": "b"})]).unwrap_err();
/// assert_eq!(e.position(), 2);
/// assert!(e.to_string().contains("as node 1 does"));
/// # Ok::<(), synthkit::node::NodeJsonError>(())
/// ```
pub fn nodes_from_json<I>(values: I) -> Result<Vec<Node>, NodeJsonError>
where
    I: IntoIterator<Item = Value>,
{
    let values = values.into_iter();
    let mut reader = NodeListReader::with_capacity(values.size_hint().0);
    for value in values {
        reader.push(value)?;
    }
    Ok(reader.into_nodes())
}

/// Reads a list of nodes one JSON value at a time, as [`nodes_from_json`] does: for
/// callers that read values from a stream and want an error at the value that causes it
/// (the CLI names the line of a duplicate id this way). It holds the nodes read and their
/// ids; bound the list's length yourself (the service's `--max-nodes`).
///
/// ```
/// use serde_json::json;
/// use synthkit::node::NodeListReader;
///
/// let mut reader = NodeListReader::new();
/// reader.push(json!("first"))?;
/// let e = reader.push(json!({"id": "1", "text": "second"})).unwrap_err();
/// assert!(e.to_string().contains("node 1 gives no id, so its position is its id"));
/// assert_eq!(reader.len(), 1);
/// let nodes = reader.into_nodes();
/// assert_eq!(nodes[0].id, "1");
/// # Ok::<(), synthkit::node::NodeJsonError>(())
/// ```
#[derive(Debug)]
pub struct NodeListReader {
    nodes: Vec<Node>,
    /// Each id read so far: its node's position and where the id came from.
    ids: HashMap<String, (usize, IdFrom)>,
    /// The most decoded bytes of one node's image.
    max_image_bytes: usize,
}

impl Default for NodeListReader {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl NodeListReader {
    /// An empty reader; the next node is node 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty reader with room for `n` nodes.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            nodes: Vec::with_capacity(n),
            ids: HashMap::with_capacity(n),
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
        }
    }

    /// Caps each node's image at `max_bytes` decoded (default
    /// [`DEFAULT_MAX_IMAGE_BYTES`], 20 MiB); a larger one is [`NodeJsonError::Image`]
    /// naming the node.
    pub fn with_max_image_bytes(mut self, max_bytes: usize) -> Self {
        self.max_image_bytes = max_bytes;
        self
    }

    /// Reads the next node (its position is [`NodeListReader::len`] + 1). On an error the
    /// node is not added, and the reader holds the nodes before it.
    pub fn push(&mut self, value: Value) -> Result<(), NodeJsonError> {
        let position = self.nodes.len() + 1;
        let (node, from) = read_node(value, position, self.max_image_bytes)?;
        match self.ids.entry(node.id.clone()) {
            Entry::Occupied(earlier) => {
                let (first, first_from) = *earlier.get();
                let from_position = if first_from == IdFrom::Position {
                    Some(first)
                } else if from == IdFrom::Position {
                    Some(position)
                } else {
                    None
                };
                Err(NodeJsonError::DuplicateId {
                    position,
                    first,
                    id: node.id,
                    from_position,
                })
            }
            Entry::Vacant(slot) => {
                slot.insert((position, from));
                self.nodes.push(node);
                Ok(())
            }
        }
    }

    /// The nodes read so far.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node was read yet.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The nodes read, in order.
    pub fn into_nodes(self) -> Vec<Node> {
        self.nodes
    }
}

/// One node and where its id came from.
fn read_node(
    value: Value,
    position: usize,
    max_image_bytes: usize,
) -> Result<(Node, IdFrom), NodeJsonError> {
    match value {
        Value::String(text) => Ok((Node::new(position.to_string(), text), IdFrom::Position)),
        Value::Object(map) => read_object(map, position, max_image_bytes),
        other => Err(NodeJsonError::NotANode {
            position,
            found: kind(&other),
        }),
    }
}

/// An object: a `NodeWithScore` when it has a `node`, else a node's own fields.
fn read_object(
    mut map: Map<String, Value>,
    position: usize,
    max_image_bytes: usize,
) -> Result<(Node, IdFrom), NodeJsonError> {
    let Some(inner) = map.remove("node") else {
        return read_fields(map, position, max_image_bytes);
    };
    if let Some(field) = NODE_FIELDS
        .into_iter()
        .chain(IMAGE_FIELDS)
        .find(|f| map.get(*f).is_some_and(|v| !v.is_null()))
    {
        return Err(NodeJsonError::FieldBesideNode { position, field });
    }
    let Value::Object(inner) = inner else {
        return Err(NodeJsonError::WrongType {
            position,
            field: "node".into(),
            expected: "an object (a TextNode)",
            found: kind(&inner),
        });
    };
    if inner.get("node").is_some_and(|v| !v.is_null()) {
        return Err(NodeJsonError::NestedNode { position });
    }
    let score = read_score(map.remove("score"), position)?;
    let (mut node, from) = read_fields(inner, position, max_image_bytes)?;
    if score.is_some() {
        node.score = score;
    }
    Ok((node, from))
}

/// A node's own fields (synthkit's or a `TextNode`'s); other keys are ignored.
fn read_fields(
    mut map: Map<String, Value>,
    position: usize,
    max_image_bytes: usize,
) -> Result<(Node, IdFrom), NodeJsonError> {
    let image = read_image(&mut map, position, max_image_bytes)?;
    let text = match map.remove("text") {
        Some(Value::String(text)) => text,
        None | Some(Value::Null) if image.is_some() => String::new(),
        None | Some(Value::Null) => {
            return Err(NodeJsonError::MissingText {
                position,
                keys: keys_of(&map),
            });
        }
        Some(other) => return Err(wrong_type(position, "text", "a string", &other)),
    };
    let (id, from) = match read_id(&mut map, position)? {
        Some(id) => (id, IdFrom::Given),
        None => (position.to_string(), IdFrom::Position),
    };
    let metadata = match map.remove("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(wrong_type(position, "metadata", "an object", &other)),
    };
    let excluded_llm_metadata_keys = match map.remove("excluded_llm_metadata_keys") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(key) => Ok(key),
                other => Err(NodeJsonError::WrongType {
                    position,
                    field: format!("excluded_llm_metadata_keys[{i}]"),
                    expected: "a string (a metadata key)",
                    found: kind(&other),
                }),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(wrong_type(
                position,
                "excluded_llm_metadata_keys",
                "a list of strings",
                &other,
            ));
        }
    };
    let score = read_score(map.remove("score"), position)?;
    Ok((
        Node {
            id,
            text,
            metadata,
            excluded_llm_metadata_keys,
            score,
            image,
        },
        from,
    ))
}

/// The node's image, if it gives one (see the module's **Images**); removes the image
/// fields from `map`.
fn read_image(
    map: &mut Map<String, Value>,
    position: usize,
    max_bytes: usize,
) -> Result<Option<NodeImage>, NodeJsonError> {
    let image_error = |field, error| NodeJsonError::Image {
        position,
        field,
        error,
    };
    let mut take_string = |field: &'static str| match map.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(wrong_type(position, field, "a string", &other)),
    };
    let mime_type = take_string("image_mimetype")?;
    let url = take_string("image_url")?;
    let path = take_string("image_path")?;
    let image = match map.remove("image") {
        None | Some(Value::Null) => None,
        // LlamaIndex's ImageNode: base64 data, its mime type beside it.
        Some(Value::String(data)) => Some(
            NodeImage::from_base64_capped(data, mime_type.as_deref(), max_bytes)
                .map_err(|e| image_error("image", e))?,
        ),
        // synthkit's: {data, mime_type}.
        Some(Value::Object(mut fields)) => {
            let data = match fields.remove("data") {
                Some(Value::String(data)) => data,
                None | Some(Value::Null) => {
                    return Err(NodeJsonError::WrongType {
                        position,
                        field: "image.data".into(),
                        expected: "a string (the image's bytes in base64)",
                        found: "nothing",
                    });
                }
                Some(other) => {
                    return Err(wrong_type(
                        position,
                        "image.data",
                        "a string (the image's bytes in base64)",
                        &other,
                    ));
                }
            };
            let mime = match fields.remove("mime_type") {
                None | Some(Value::Null) => mime_type,
                Some(Value::String(mime)) => Some(mime),
                Some(other) => {
                    return Err(wrong_type(position, "image.mime_type", "a string", &other));
                }
            };
            Some(
                NodeImage::from_base64_capped(data, mime.as_deref(), max_bytes)
                    .map_err(|e| image_error("image.data", e))?,
            )
        }
        Some(other) => {
            return Err(wrong_type(
                position,
                "image",
                "a string (base64) or an object {data, mime_type}",
                &other,
            ));
        }
    };
    if image.is_some() {
        return Ok(image);
    }
    if let Some(url) = url {
        return NodeImage::from_data_url(&url, max_bytes)
            .map(Some)
            .map_err(|e| image_error("image_url", e));
    }
    if path.is_some() {
        return Err(image_error("image_path", ImageError::Path));
    }
    Ok(None)
}

/// The id the node gives (`id`, else `id_`, else `node_id`), if any; two that differ are
/// an error.
fn read_id(map: &mut Map<String, Value>, position: usize) -> Result<Option<String>, NodeJsonError> {
    let mut chosen: Option<(&'static str, String)> = None;
    for field in ID_FIELDS {
        let id = match map.remove(field) {
            None | Some(Value::Null) => continue,
            Some(Value::String(id)) => id,
            Some(other) => return Err(wrong_type(position, field, "a string", &other)),
        };
        if id.is_empty() {
            return Err(NodeJsonError::EmptyId { position, field });
        }
        match chosen {
            Some((first, first_id)) if first_id != id => {
                return Err(NodeJsonError::ConflictingIds {
                    position,
                    first,
                    first_id,
                    second: field,
                    second_id: id,
                });
            }
            Some(same) => chosen = Some(same),
            None => chosen = Some((field, id)),
        }
    }
    Ok(chosen.map(|(_, id)| id))
}

/// A score: a number, or absent (null or missing).
fn read_score(value: Option<Value>, position: usize) -> Result<Option<f64>, NodeJsonError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(score) => Ok(Some(score)),
            None => Err(NodeJsonError::WrongType {
                position,
                field: "score".into(),
                expected: "a number that fits a 64-bit float",
                found: "a number out of range",
            }),
        },
        Some(other) => Err(wrong_type(position, "score", "a number or null", &other)),
    }
}

fn wrong_type(
    position: usize,
    field: &str,
    expected: &'static str,
    found: &Value,
) -> NodeJsonError {
    NodeJsonError::WrongType {
        position,
        field: field.to_string(),
        expected,
        found: kind(found),
    }
}

/// The first keys of an object, for an error message.
fn keys_of(map: &Map<String, Value>) -> String {
    if map.is_empty() {
        return "none".to_string();
    }
    let mut keys: Vec<String> = map.keys().take(SHOWN_KEYS).map(|k| shown(k)).collect();
    if map.len() > SHOWN_KEYS {
        keys.push(format!("and {} more", map.len() - SHOWN_KEYS));
    }
    keys.join(", ")
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
