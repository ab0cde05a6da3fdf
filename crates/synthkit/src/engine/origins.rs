//! Which nodes a prompt's context came from, known where the context is packed.
//!
//! A mode lays the texts it packs end to end in one [`Sourced`] string, each with the
//! nodes it came from (a node's own text at the first level, the nodes under a summary
//! above it). Every piece packing cuts is a sub-slice of that string, so its place in it
//! tells which texts it overlaps, and so which nodes the prompt held: the mode attaches
//! them to the request as [`PromptNodes`], and the call's span lists their ids. A prompt
//! whose context is not cut from a [`Sourced`] (a custom request) carries none.
//!
//! Above a tree's first level the texts are the level below's replies, each with the
//! [`CallTag`] of the call that wrote it: a request cut from them also carries the tags
//! of the replies it held ([`PromptInputs`]), so the steps name the summaries a call was
//! given without looking for them in its prompt (citations may have changed a reply's
//! text on its way up).

use crate::model::ModelRequest;

pub(crate) use crate::model::tags::{CallTag, PromptInputs, PromptNodes};

/// Where a text came from: the nodes under it and, for a reply, the call that wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    /// The nodes under the text.
    pub(crate) nodes: PromptNodes,
    /// The calls whose replies the text is (one for a summary; none for a node's text).
    pub(crate) calls: PromptInputs,
}

impl Origin {
    /// The origin of a reply to `request`: the nodes its prompt held, and the call.
    pub(crate) fn of_reply(request: &ModelRequest) -> Self {
        Self {
            nodes: PromptNodes::of(request),
            calls: PromptInputs(CallTag::of(request).into_iter().collect()),
        }
    }

    /// The origin of a context taken back from `request` (a rejected prompt's): the
    /// nodes and the replies it held.
    pub(crate) fn of_context(request: &ModelRequest) -> Self {
        Self {
            nodes: PromptNodes::of(request),
            calls: PromptInputs::of(request),
        }
    }
}

impl From<PromptNodes> for Origin {
    fn from(nodes: PromptNodes) -> Self {
        Self {
            nodes,
            calls: PromptInputs::default(),
        }
    }
}

/// Texts laid end to end in one string, each with the nodes it came from.
#[derive(Debug, Default)]
pub(crate) struct Sourced {
    text: String,
    /// Byte offset of each text kept, and where it ends.
    spans: Vec<(usize, usize)>,
    /// Where each text kept came from.
    owners: Vec<Origin>,
    /// Whether each text is cut on its own ([`Sourced::parts`]).
    separately: bool,
}

impl Sourced {
    /// The join packing makes ([`crate::prompt::PromptBudget::join_for_packing`]): each
    /// text trimmed, empty ones dropped, blank lines between.
    /// The join is cut as one text.
    pub(crate) fn packing_join<'a, O: Into<Origin>>(
        items: impl IntoIterator<Item = (&'a str, O)>,
    ) -> Self {
        Self::join(items, "\n\n", true)
    }

    /// The texts one after the other, whitespace-only ones dropped, each as it is (for
    /// modes that cut each text on its own: take them back with [`Sourced::parts`]).
    pub(crate) fn side_by_side<'a, O: Into<Origin>>(
        items: impl IntoIterator<Item = (&'a str, O)>,
    ) -> Self {
        Self {
            separately: true,
            ..Self::join(items, "", false)
        }
    }

    /// The first-level texts of a synthesis (`texts[i]` is node `i`'s), as
    /// [`Sourced::packing_join`] or [`Sourced::side_by_side`] lays them.
    pub(crate) fn of_nodes(texts: &[std::borrow::Cow<'_, str>], separately: bool) -> Self {
        let items = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_ref(), PromptNodes::one(i)));
        match separately {
            true => Self::side_by_side(items),
            false => Self::packing_join(items),
        }
    }

    /// The texts (each trimmed when `trim`), whitespace-only ones dropped, `separator`
    /// between; cut as one text.
    pub(crate) fn join<'a, O: Into<Origin>>(
        items: impl IntoIterator<Item = (&'a str, O)>,
        separator: &str,
        trim: bool,
    ) -> Self {
        let mut s = Self::default();
        for (text, nodes) in items {
            if text.trim().is_empty() {
                continue;
            }
            let text = if trim { text.trim() } else { text };
            if !s.text.is_empty() {
                s.text.push_str(separator);
            }
            let start = s.text.len();
            s.text.push_str(text);
            s.spans.push((start, s.text.len()));
            s.owners.push(nodes.into());
        }
        s
    }

    /// The whole string.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether no text was kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// What packing cuts, each on its own, as slices of [`Sourced::text`]: every text
    /// kept for [`Sourced::side_by_side`], the whole join otherwise (nothing when empty).
    pub(crate) fn parts(&self) -> Vec<&str> {
        if !self.separately {
            return [self.text.as_str()]
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect();
        }
        self.spans
            .iter()
            .map(|&(a, b)| self.text.get(a..b).unwrap_or_default())
            .collect()
    }

    /// The nodes of the texts with non-space text past byte `end` (what a cut at `end`
    /// leaves out, whole or in part).
    pub(crate) fn cut_after(&self, end: usize) -> PromptNodes {
        let cut = self.spans.iter().zip(&self.owners).filter(|((a, b), _)| {
            let text = self.text.get(*a..*b).unwrap_or_default();
            a + text.trim_end().len() > end
        });
        PromptNodes::union(cut.map(|(_, o)| &o.nodes))
    }

    /// `request` with the nodes and the replies of `piece`, the slice of
    /// [`Sourced::text`] its context was cut from.
    pub(crate) fn tag(&self, request: ModelRequest, piece: &str) -> ModelRequest {
        let owners = self.owners_of(piece);
        let request = request.with_extension(PromptNodes::union(owners.iter().map(|o| &o.nodes)));
        let calls = PromptInputs::union(owners.iter().map(|o| &o.calls));
        match calls.tags().is_empty() {
            true => request,
            false => request.with_extension(calls),
        }
    }

    /// The nodes of the texts that `piece`, a slice of [`Sourced::text`], overlaps (none
    /// when `piece` is not such a slice).
    #[cfg(test)]
    fn nodes_in(&self, piece: &str) -> PromptNodes {
        PromptNodes::union(self.owners_of(piece).iter().map(|o| &o.nodes))
    }

    /// The origins of the texts that `piece`, a slice of [`Sourced::text`], overlaps.
    fn owners_of(&self, piece: &str) -> &[Origin] {
        if piece.is_empty() {
            return &[];
        }
        let base = self.text.as_ptr() as usize;
        let Some(a) = (piece.as_ptr() as usize).checked_sub(base) else {
            return &[];
        };
        let b = a + piece.len();
        if b > self.text.len() {
            return &[];
        }
        let first = self.spans.partition_point(|&(_, end)| end <= a);
        let last = self.spans.partition_point(|&(start, _)| start < b);
        self.owners.get(first..last).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn sourced() -> Sourced {
        Sourced::packing_join([
            ("  alpha  ", PromptNodes::one(0)),
            ("   ", PromptNodes::one(1)),
            ("beta", PromptNodes::one(2)),
            ("gamma", PromptNodes(Arc::from([3, 5]))),
        ])
    }

    #[test]
    fn joins_as_packing_does() {
        let s = sourced();
        assert_eq!(
            s.text(),
            crate::prompt::PromptBudget::join_for_packing(&["  alpha  ", "   ", "beta", "gamma"])
        );
        assert_eq!(s.parts(), [s.text()], "the join is cut as one text");
    }

    #[test]
    fn a_piece_names_the_texts_it_overlaps() {
        let s = sourced();
        let text = s.text();
        let at = |a: usize, b: usize| s.nodes_in(&text[a..b]).positions().to_vec();
        assert_eq!(at(0, 5), [0]);
        assert_eq!(at(2, 9), [0, 2]);
        assert_eq!(
            at(5, 7),
            Vec::<u32>::new(),
            "the separator alone holds no node"
        );
        assert_eq!(at(7, text.len()), [2, 3, 5]);
        assert_eq!(at(3, 3), Vec::<u32>::new(), "an empty piece holds no node");
        let elsewhere = String::from("alpha");
        assert!(
            s.nodes_in(&elsewhere).positions().is_empty(),
            "not a slice of it"
        );
    }

    #[test]
    fn side_by_side_keeps_each_text_whole() {
        let s = Sourced::side_by_side([(" a ", PromptNodes::one(0)), ("b\n", PromptNodes::one(1))]);
        assert_eq!(s.parts(), [" a ", "b\n"]);
        assert_eq!(s.nodes_in(s.parts()[1]).positions(), [1]);
    }
}
