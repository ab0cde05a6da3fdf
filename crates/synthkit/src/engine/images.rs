//! Images in prompts: each image node's image stands in its node's model-visible text as
//! one marker character (from Unicode's Supplementary Private Use Area-A), so packing
//! handles an image as one indivisible unit at its node's place: the job's tokenizer
//! counts a marker as what its image costs ([`ImageCost`]), and rendering turns each
//! marker in a prompt into a [`PromptImage`] at its place in the message (a completion
//! prompt becomes one user message). No marker ever reaches a model.
//!
//! A node's own text may not hold marker characters: [`sanitize`] replaces them.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::error::SynthError;
use crate::model::{ModelError, SharedCounter};
use crate::node::{ImageCost, Node, NodeImage};
use crate::prompt::{ChatMessage, PromptImage, RenderedPrompt, Role};
use crate::text::{SharedTokenizer, Tokenizer};

/// The first marker character (U+F0000).
const MARKER_BASE: u32 = 0xF_0000;
/// The most images one synthesis may carry: the markers U+F0000 to U+FFFFD.
pub(crate) const MAX_IMAGES: usize = 0xFFFE;

/// The marker of the `k`-th image.
pub(crate) fn marker(k: usize) -> Option<char> {
    let k = u32::try_from(k)
        .ok()
        .filter(|&k| (k as usize) < MAX_IMAGES)?;
    char::from_u32(MARKER_BASE + k)
}

/// The image number a marker stands for.
fn index_of(c: char) -> Option<usize> {
    let v = u32::from(c);
    (MARKER_BASE..MARKER_BASE + MAX_IMAGES as u32)
        .contains(&v)
        .then(|| (v - MARKER_BASE) as usize)
}

/// Whether `text` holds a marker. Every marker (U+F0000 to U+FFFFD) is written in UTF-8
/// from the byte 0xF3, which most text never holds: a byte search first, the characters
/// decoded only when it finds one.
fn holds_marker(text: &str) -> bool {
    text.as_bytes().contains(&0xF3) && text.chars().any(|c| index_of(c).is_some())
}

/// `text` with every marker character replaced by U+FFFD (a node's own text never
/// stands for an image).
pub(crate) fn sanitize(text: Cow<'_, str>) -> Cow<'_, str> {
    if !holds_marker(&text) {
        return text;
    }
    Cow::Owned(
        text.chars()
            .map(|c| if index_of(c).is_some() { '\u{FFFD}' } else { c })
            .collect(),
    )
}

/// `text` without its markers (what a person is shown of a model-visible text).
pub(crate) fn strip(text: &str) -> Cow<'_, str> {
    if !holds_marker(text) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().filter(|c| index_of(*c).is_none()).collect())
}

/// One image of a synthesis.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The node's id.
    pub(crate) id: String,
    pub(crate) image: NodeImage,
    /// What it costs in prompt tokens.
    pub(crate) tokens: usize,
}

/// The images of one synthesis, by marker number, and how their costs were counted.
#[derive(Debug)]
pub(crate) struct ImageTable {
    pub(crate) entries: Vec<Entry>,
    pub(crate) rule: ImageCost,
}

impl ImageTable {
    /// The images of `nodes` (the `k`-th image node's is image `k`), each costed by
    /// `rule`: [`ImageCost::ServerCount`] asks `counter` for a prompt with the image and
    /// one without. `None` when no node has an image.
    pub(crate) async fn build(
        nodes: &[Node],
        rule: ImageCost,
        counter: Option<&SharedCounter>,
    ) -> Result<Option<Self>, SynthError> {
        let with: Vec<&Node> = nodes.iter().filter(|n| n.image.is_some()).collect();
        let Some(first) = with.first() else {
            return Ok(None);
        };
        if with.len() > MAX_IMAGES {
            return Err(SynthError::ImagesUnsupported {
                node: first.id.clone(),
                why: format!(
                    "one synthesis may carry at most {MAX_IMAGES} images, and {} nodes carry one: split the nodes over several syntheses",
                    with.len()
                ),
            });
        }
        let images: Vec<NodeImage> = with.iter().filter_map(|n| n.image.clone()).collect();
        let costs = match (rule.tokens_of(&images), counter) {
            (Some(costs), _) => costs,
            (None, Some(counter)) => server_costs(counter, &images).await?,
            (None, None) => {
                return Err(SynthError::ImagesUnsupported {
                    node: first.id.clone(),
                    why: "images are to be counted by the server (ImageCost::ServerCount) and the model has no exact counter: turn the server's counter on (llama.cpp, vLLM: `server_tokenizer`), or count images by another rule (`image_cost`)".into(),
                });
            }
        };
        let entries = with
            .iter()
            .zip(images)
            .zip(costs)
            .map(|((n, image), tokens)| Entry {
                id: n.id.clone(),
                image,
                tokens,
            })
            .collect();
        Ok(Some(Self { entries, rule }))
    }

    /// `prompt` with its markers turned into images at their places: a chat's in its
    /// messages; a completion prompt with markers becomes one user message.
    pub(crate) fn attach(&self, prompt: RenderedPrompt) -> RenderedPrompt {
        match prompt {
            RenderedPrompt::Text(t) if holds_marker(&t) => {
                RenderedPrompt::Chat(vec![self.attach_message(ChatMessage::new(Role::User, t))])
            }
            RenderedPrompt::Chat(messages) => RenderedPrompt::Chat(
                messages
                    .into_iter()
                    .map(|m| self.attach_message(m))
                    .collect(),
            ),
            text => text,
        }
    }

    fn attach_message(&self, mut m: ChatMessage) -> ChatMessage {
        if !holds_marker(&m.content) {
            return m;
        }
        let mut text = String::with_capacity(m.content.len());
        for c in m.content.chars() {
            match index_of(c) {
                Some(k) => {
                    if let Some(e) = self.entries.get(k) {
                        m.images.push(PromptImage {
                            at: text.len(),
                            image: e.image.clone(),
                            tokens: e.tokens,
                        });
                    }
                }
                None => text.push(c),
            }
        }
        m.content = text;
        m
    }

    /// The images whose markers are in `text`, in order.
    pub(crate) fn in_text<'a>(&'a self, text: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        text.chars()
            .filter_map(index_of)
            .filter_map(|k| self.entries.get(k))
    }

    /// `inner` counting each marker as its image's cost.
    pub(crate) fn tokenizer(self: &Arc<Self>, inner: SharedTokenizer) -> SharedTokenizer {
        Arc::new(ImageTokenizer {
            inner,
            table: Arc::clone(self),
        })
    }

    /// The text and the image tokens of `text`.
    fn split<'t>(&self, text: &'t str) -> (Cow<'t, str>, usize) {
        let images: usize = self.in_text(text).map(|e| e.tokens).sum();
        (strip(text), images)
    }
}

impl ImageCost {
    /// The costs of `images` by a local rule; `None` for the server's count.
    fn tokens_of(self, images: &[NodeImage]) -> Option<Vec<usize>> {
        images.iter().map(|i| self.tokens(i)).collect()
    }
}

/// Each image's cost as the server counts it: a user message with the image, less the
/// same message without it (both counted by the model's exact counter at once).
async fn server_costs(
    counter: &SharedCounter,
    images: &[NodeImage],
) -> Result<Vec<usize>, SynthError> {
    let probe = |image: Option<&NodeImage>| {
        let mut m = ChatMessage::new(Role::User, "Image:");
        if let Some(image) = image {
            m.images.push(PromptImage {
                at: m.content.len(),
                image: image.clone(),
                tokens: 0,
            });
        }
        RenderedPrompt::Chat(vec![m])
    };
    let mut prompts = vec![probe(None)];
    prompts.extend(images.iter().map(|i| probe(Some(i))));
    let counted = counter
        .count_prompts(&prompts)
        .await
        .map_err(|source| SynthError::Count {
            counter: counter.name().to_string(),
            source,
        })?;
    let (Some(&base), Some(with)) = (counted.first(), counted.get(1..)) else {
        return Err(SynthError::Count {
            counter: counter.name().to_string(),
            source: ModelError::Malformed("no count for the images".into()),
        });
    };
    if with.len() != images.len() {
        return Err(SynthError::Count {
            counter: counter.name().to_string(),
            source: ModelError::Malformed("a count is missing for an image".into()),
        });
    }
    Ok(with
        .iter()
        .map(|&n| n.saturating_sub(base).max(1))
        .collect())
}

/// A tokenizer that counts each marker as its image's cost, and the rest with `inner`.
struct ImageTokenizer {
    inner: SharedTokenizer,
    table: Arc<ImageTable>,
}

impl fmt::Debug for ImageTokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageTokenizer")
            .field("inner", &self.inner)
            .field("images", &self.table.entries.len())
            .field("rule", &self.table.rule)
            .finish()
    }
}

impl Tokenizer for ImageTokenizer {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn count(&self, text: &str) -> usize {
        let (text, images) = self.table.split(text);
        self.inner.count(&text).saturating_add(images)
    }

    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        let (text, images) = self.table.split(text);
        let room = limit.checked_sub(images)?;
        self.inner.count_till_limit(&text, room).map(|n| n + images)
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        self.inner.encode(&strip(text))
    }

    fn decode(&self, tokens: &[u32]) -> Option<String> {
        self.inner.decode(tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Arc<ImageTable> {
        let image = NodeImage::from_bytes(b"\x89PNG\r\n\x1a\n", None).unwrap();
        Arc::new(ImageTable {
            entries: vec![
                Entry {
                    id: "a".into(),
                    image: image.clone(),
                    tokens: 100,
                },
                Entry {
                    id: "b".into(),
                    image,
                    tokens: 7,
                },
            ],
            rule: ImageCost::Fixed(0),
        })
    }

    #[test]
    fn markers_count_as_their_images_and_become_parts() {
        let t = table();
        let (m0, m1) = (marker(0).unwrap(), marker(1).unwrap());
        let tok = t.tokenizer(crate::text::tokenizer::default_tokenizer());
        let plain = tok.count("one\n\ntwo");
        assert_eq!(tok.count(&format!("one\n\n{m0}\n\ntwo{m1}")), plain + 107);
        assert_eq!(tok.count_till_limit(&format!("{m0}"), 99), None);
        let prompt = t.attach(RenderedPrompt::Text(format!("x {m0}y{m1}")));
        let RenderedPrompt::Chat(messages) = &prompt else {
            panic!("{prompt:?}");
        };
        assert_eq!(messages[0].role, Role::User);
        assert_eq!(messages[0].content, "x y");
        let at: Vec<(usize, usize)> = messages[0]
            .images
            .iter()
            .map(|i| (i.at, i.tokens))
            .collect();
        assert_eq!(at, [(2, 100), (3, 7)]);
        let plain = RenderedPrompt::Text("no images".into());
        assert_eq!(t.attach(plain.clone()), plain);
    }

    #[test]
    fn node_text_never_stands_for_an_image() {
        let m0 = marker(0).unwrap();
        let text = format!("a{m0}b");
        assert_eq!(sanitize(Cow::Borrowed(&text)), "a\u{FFFD}b");
        assert_eq!(strip(&text), "ab");
        // Other characters written from the byte 0xF3 (U+C0000, U+FFFFE) are kept.
        let other = "a\u{C0000}b\u{FFFFE}";
        assert!(matches!(sanitize(Cow::Borrowed(other)), Cow::Borrowed(t) if t == other));
        assert_eq!(strip(other), other);
        assert_eq!(marker(MAX_IMAGES), None);
        assert_eq!(
            index_of(marker(MAX_IMAGES - 1).unwrap()),
            Some(MAX_IMAGES - 1)
        );
    }
}
