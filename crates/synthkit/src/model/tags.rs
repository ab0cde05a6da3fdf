//! Tags the engine attaches to a model request (request extensions): the nodes its
//! context held ([`PromptNodes`]), its call's number ([`CallTag`]) and the calls whose
//! replies its context held ([`PromptInputs`]). They live beside the request, below the
//! engine that sets them and the step recorder that reads them.

use std::sync::Arc;

use crate::model::ModelRequest;

/// The tag of type `T` that `request` carries, or the empty one.
fn carried<T: Clone + Default + Send + Sync + 'static>(request: &ModelRequest) -> T {
    request.extensions.get::<T>().cloned().unwrap_or_default()
}

/// The nodes whose text a request's context held, as positions among the synthesis's
/// nodes, ascending and without repeats (a request extension).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PromptNodes(pub(crate) Arc<[u32]>);

impl PromptNodes {
    /// The node at position `i` alone.
    pub(crate) fn one(i: usize) -> Self {
        Self(Arc::from([u32::try_from(i).unwrap_or(u32::MAX)]))
    }

    /// The nodes `request` carries (none when it carries no [`PromptNodes`]).
    pub(crate) fn of(request: &ModelRequest) -> Self {
        carried(request)
    }

    /// The positions `request` carries, ascending (none when it carries no
    /// [`PromptNodes`]).
    pub(crate) fn positions_in(request: &ModelRequest) -> &[u32] {
        request
            .extensions
            .get::<Self>()
            .map_or(&[][..], |n| n.positions())
    }

    /// The union of `sets`.
    pub(crate) fn union<'a>(sets: impl Iterator<Item = &'a Self>) -> Self {
        Self(sorted_union(sets.map(|s| &s.0[..])))
    }

    /// The positions, ascending.
    pub(crate) fn positions(&self) -> &[u32] {
        &self.0
    }
}

/// The values of `sets`, ascending and without repeats.
fn sorted_union<'a, T: Copy + Ord + 'a>(sets: impl Iterator<Item = &'a [T]>) -> Arc<[T]> {
    let mut all: Vec<T> = sets.flat_map(|s| s.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    all.into()
}

/// A call's number within its synthesis, in the order the calls were started (a request
/// extension, set by the engine as it starts each call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallTag(pub(crate) u64);

impl CallTag {
    /// The tag `request` carries, if any.
    pub(crate) fn of(request: &ModelRequest) -> Option<u64> {
        request.extensions.get::<Self>().map(|t| t.0)
    }
}

/// The calls (by [`CallTag`]) whose replies a request's context held, ascending and
/// without repeats (a request extension; empty at a first level).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PromptInputs(pub(crate) Arc<[u64]>);

impl PromptInputs {
    /// The calls `request` carries (none when it carries no [`PromptInputs`]).
    pub(crate) fn of(request: &ModelRequest) -> Self {
        carried(request)
    }

    /// The union of `sets`.
    pub(crate) fn union<'a>(sets: impl Iterator<Item = &'a Self>) -> Self {
        Self(sorted_union(sets.map(|s| &s.0[..])))
    }

    /// The calls' tags, ascending.
    pub(crate) fn tags(&self) -> &[u64] {
        &self.0
    }
}
