//! Where each source is on the page and which calls read it ([`Index`]), for every
//! section that links sources and calls.

use std::cell::Cell;
use std::collections::HashMap;

use crate::caps;
use crate::html::Html;
use crate::record::{ImageRecord, RunRecord};

/// Where each source is on the page (`#src-K`) and which calls read it.
pub(crate) struct Index<'a> {
    /// Node id to its position among the sources.
    pub(crate) position: HashMap<&'a str, usize>,
    /// Source position to the calls that read it directly, in call order.
    pub(crate) readers: Vec<Vec<u64>>,
    /// Source position to the answer's markers citing it.
    pub(crate) markers: Vec<Vec<u32>>,
    /// Source position to its section.
    pub(crate) sections: Vec<Option<&'a str>>,
    /// Call number to its box's place: level and index in the level.
    pub(crate) places: HashMap<u64, (u32, usize)>,
    /// Source position to its image, for image nodes.
    pub(crate) images: Vec<Option<&'a ImageRecord>>,
    /// Bytes of image data URLs the page may still embed (from [`caps::PAGE_IMAGE_BYTES`]).
    image_room: Cell<usize>,
}

impl<'a> Index<'a> {
    pub(crate) fn new(run: &'a RunRecord) -> Self {
        let position: HashMap<&str, usize> = run
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let mut readers = vec![Vec::new(); run.sources.len()];
        for step in run.steps.iter().filter(|s| s.input_calls.is_empty()) {
            for id in &step.node_ids {
                if let Some(&p) = position.get(id.as_str()) {
                    readers[p].push(step.call);
                }
            }
        }
        let places: HashMap<u64, (u32, usize)> = run
            .steps
            .iter()
            .map(|s| (s.call, (s.level, s.index)))
            .collect();
        for r in &mut readers {
            r.sort_unstable_by_key(|c| (places.get(c).copied(), *c));
            r.dedup();
        }
        let mut markers = vec![Vec::new(); run.sources.len()];
        for c in run.citations.iter().flatten() {
            for id in &c.node_ids {
                if let Some(&p) = position.get(id.as_str()) {
                    markers[p].push(c.marker);
                }
            }
        }
        Self {
            position,
            readers,
            markers,
            sections: run.sources.iter().map(|s| s.section.as_deref()).collect(),
            places,
            images: run.sources.iter().map(|s| s.image.as_ref()).collect(),
            image_room: Cell::new(caps::PAGE_IMAGE_BYTES),
        }
    }

    /// Node `id`'s image, when it is a listed image node.
    pub(crate) fn image_of(&self, id: &str) -> Option<&'a ImageRecord> {
        let p = *self.position.get(id)?;
        self.images.get(p).copied().flatten()
    }

    /// Writes a thumbnail of node `id`'s `image` (`alt` and title its id), or, past the
    /// page's image budget or without the image's data, the id and why it is not shown.
    pub(crate) fn thumbnail(&self, h: &mut Html, id: &str, image: &ImageRecord) {
        let len = image.data_url_len();
        let url = (len <= self.image_room.get())
            .then(|| image.data_url())
            .flatten();
        match url {
            Some(url) => {
                self.image_room.set(self.image_room.get() - len);
                h.markup("<img class=\"thumb\" src=\"")
                    .text(&url)
                    .markup("\" alt=\"")
                    .text(id)
                    .markup("\" title=\"")
                    .text(id)
                    .markup("\">");
            }
            None => {
                h.markup("<span class=\"thumb none\">")
                    .text(id)
                    .markup(": image not embedded (page image budget)</span>");
            }
        }
    }

    /// Writes a link to call `call`'s box, named as its box is (`L0 #3`: level 0, the
    /// level's call at index 3).
    pub(crate) fn call_link(&self, h: &mut Html, call: u64) {
        h.markup("<a href=\"#call-").value(call).markup("\">");
        match self.places.get(&call) {
            Some((level, index)) => h.value(format_args!("L{level} #{index}")),
            None => h.value(format_args!("call {call}")),
        };
        h.markup("</a>");
    }

    /// Writes a link to node `id` (plain text when it is not listed).
    pub(crate) fn node_link(&self, h: &mut Html, id: &str) {
        match self.position.get(id) {
            Some(&p) => {
                h.markup("<a class=\"node\" href=\"#src-")
                    .value(p)
                    .markup("\">")
                    .text(id)
                    .markup("</a>");
            }
            None => {
                h.element("span", "node", id);
            }
        }
    }
}
