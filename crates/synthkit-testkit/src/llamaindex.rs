//! LlamaIndex's JSON shapes, as fixtures for the tests of the readers that take them.

use serde_json::{Value, json};

/// A LlamaIndex `TextNode` as `node.to_dict()` / `node.model_dump()` writes it
/// (llama-index-core 0.14): `metadata`, and `hidden` as its `excluded_llm_metadata_keys`.
pub fn text_node(id: &str, text: &str, metadata: Value, hidden: &[&str]) -> Value {
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

/// A LlamaIndex `ImageNode` as `node.model_dump()` writes it (llama-index-core 0.14.25):
/// a `TextNode`'s fields (`text` the caption) plus `image` (the base64 data, or null),
/// `image_path`, `image_url`, `image_mimetype` and `text_embedding`.
pub fn image_node(id: &str, text: &str, image: Option<&str>, mimetype: Option<&str>) -> Value {
    json!({
        "id_": id,
        "embedding": null,
        "metadata": {},
        "excluded_embed_metadata_keys": [],
        "excluded_llm_metadata_keys": [],
        "relationships": {},
        "metadata_template": "{key}: {value}",
        "metadata_separator": "\n",
        "text": text,
        "mimetype": "text/plain",
        "start_char_idx": null,
        "end_char_idx": null,
        "text_template": "{metadata_str}\n\n{content}",
        "image": image,
        "image_path": null,
        "image_url": null,
        "image_mimetype": mimetype,
        "text_embedding": null,
        "class_name": "ImageNode",
    })
}
