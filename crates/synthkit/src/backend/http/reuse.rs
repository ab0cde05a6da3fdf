//! What an HTTP backend tells its server so that it reuses what it already read of a
//! prompt's shared prefix ([`PromptPrefix`]): llama.cpp's `id_slot` (the slot that last
//! held the prefix, from a small table of the server's slots), OpenAI's
//! `prompt_cache_key`, Anthropic's `cache_control` breakpoints. Each API writes the hints
//! it speaks ([`HttpApi::write_hints`](super::HttpApi::write_hints)); this module holds
//! what is the same for all: the slot table, and what the server refused.
//!
//! Hints never change the prompt, its count or the output cap: they only add a field or
//! two to the body. A server that refuses a request carrying them (an HTTP 4xx naming a
//! hint's field, or any 4xx on the first call sent with hints) gets the same request
//! once more without them, and the refused hints are never sent to it again. The refused
//! request cost the server no tokens (it was turned away before reading the prompt), so
//! no budget is touched; each call sends at most one such second request.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::Stream;
use serde_json::Value;

use crate::model::CompletionStream;
use crate::prompt::{PrefixKey, PromptPrefix};

/// The most slots the table tracks: a server with more has its first
/// `MAX_TRACKED_SLOTS` addressed by `id_slot` (calls past them go to whichever slot the
/// server picks).
pub const MAX_TRACKED_SLOTS: usize = 64;

/// Which reuse hints a model's calls carry, as a user chooses them (`--reuse-hints`, the
/// Python package's `reuse_hints=`); each API's config applies it
/// (`OpenAiConfig::with_reuse_hints`, `AnthropicConfig::with_reuse_hints`).
///
/// ```
/// use synthkit::backend::http::reuse::ReuseHints;
///
/// assert_eq!("none".parse::<ReuseHints>(), Ok(ReuseHints::None));
/// assert!("off".parse::<ReuseHints>().unwrap_err().contains("auto, all or none"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReuseHints {
    /// llama.cpp's `id_slot` where the server reports its slots, `prompt_cache_key` to
    /// OpenAI's own server only, Anthropic's `cache_control` where the prefix is long
    /// enough to be cached.
    #[default]
    Auto,
    /// As `Auto`, and `prompt_cache_key` to every OpenAI-compatible server.
    All,
    /// None of them.
    None,
}

impl std::str::FromStr for ReuseHints {
    type Err = String;

    /// `auto`, `all` or `none`; anything else is an error that names them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "all" => Ok(Self::All),
            "none" => Ok(Self::None),
            other => Err(format!(
                "reuse hints must be auto, all or none, got `{}`",
                crate::model::excerpt(other, 40)
            )),
        }
    }
}

impl ReuseHints {
    /// Whether calls carry the hints a server takes without being asked (`id_slot`,
    /// `cache_control`): all but `None`.
    pub fn slots_and_breakpoints(self) -> bool {
        self != Self::None
    }

    /// Whether calls carry `prompt_cache_key`: `None` leaves it to the server's address
    /// (only OpenAI's own), `Some(true)` to every server, `Some(false)` to none.
    pub fn prompt_cache_key(self) -> Option<bool> {
        match self {
            Self::Auto => None,
            Self::All => Some(true),
            Self::None => Some(false),
        }
    }
}

/// A set of hints (which fields a request carried, or which the server refused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HintSet(u8);

impl HintSet {
    /// No hint.
    pub const NONE: Self = Self(0);
    /// llama.cpp's `id_slot`.
    pub const ID_SLOT: Self = Self(1);
    /// OpenAI's `prompt_cache_key`.
    pub const PROMPT_CACHE_KEY: Self = Self(2);
    /// Anthropic's `cache_control`.
    pub const CACHE_CONTROL: Self = Self(4);

    const ALL: [(Self, &'static str); 3] = [
        (Self::ID_SLOT, "id_slot"),
        (Self::PROMPT_CACHE_KEY, "prompt_cache_key"),
        (Self::CACHE_CONTROL, "cache_control"),
    ];

    /// Whether the set holds every hint of `other`.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set holds no hint.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The set with `other`'s hints too.
    #[must_use]
    pub fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// The hints of the set whose field names `text` holds.
    fn named_in(self, text: &str) -> Self {
        Self::ALL
            .iter()
            .filter(|(h, name)| self.contains(*h) && text.contains(name))
            .fold(Self::NONE, |set, (h, _)| set.with(*h))
    }

    /// The field names of the set, for messages.
    fn names(self) -> Vec<&'static str> {
        Self::ALL
            .iter()
            .filter(|(h, _)| self.contains(*h))
            .map(|(_, name)| *name)
            .collect()
    }
}

/// What one request may carry: the prompt's shared prefix, the slot leased for it, and
/// the hints the server has not refused.
#[derive(Debug, Clone, Copy)]
pub struct Hints<'a> {
    /// The prompt's shared prefix, when the request carries one.
    pub prefix: Option<&'a PromptPrefix>,
    /// The llama.cpp slot the call goes to, when the server's slots are known.
    pub slot: Option<usize>,
    refused: HintSet,
}

impl Hints<'_> {
    /// Whether `hint` may be sent (the server has not refused it).
    pub fn allows(&self, hint: HintSet) -> bool {
        !self.refused.contains(hint)
    }
}

/// What a backend's model keeps about hints: the slot table (llama.cpp, when the server
/// reported its slots), and which hints the server refused.
#[derive(Debug, Default)]
pub(crate) struct Reuse {
    slots: Option<Arc<SlotTable>>,
    refused: AtomicU8,
    /// Whether a call with hints was answered (or refused without them too): a later
    /// refusal that names no hint is then not the hints' doing.
    proven: AtomicBool,
}

impl Reuse {
    /// Tracks `slots` slots (none: no `id_slot` is sent).
    pub(crate) fn set_slots(&mut self, slots: Option<usize>) {
        self.slots = slots.and_then(SlotTable::new).map(Arc::new);
    }

    /// A slot for a call whose prompt has `prefix`, when the table has an idle one.
    pub(crate) fn lease(&self, prefix: Option<&PromptPrefix>) -> Option<SlotLease> {
        let table = self.slots.as_ref()?;
        if self.refused().contains(HintSet::ID_SLOT) {
            return None;
        }
        table.lease(prefix.map(|p| p.key))
    }

    /// The hints of a request with `prefix`, going to `lease`'s slot.
    pub(crate) fn hints<'a>(
        &self,
        prefix: Option<&'a PromptPrefix>,
        lease: Option<&SlotLease>,
    ) -> Hints<'a> {
        Hints {
            prefix,
            slot: lease.map(|l| l.slot),
            refused: self.refused(),
        }
    }

    /// [`Reuse::hints`] without `dropped` (for the request sent again after a refusal).
    pub(crate) fn hints_without<'a>(
        &self,
        prefix: Option<&'a PromptPrefix>,
        lease: Option<&SlotLease>,
        dropped: HintSet,
    ) -> Hints<'a> {
        let mut hints = self.hints(prefix, lease);
        hints.refused = hints.refused.with(dropped);
        hints
    }

    fn refused(&self) -> HintSet {
        HintSet(self.refused.load(Ordering::Relaxed))
    }

    /// The hints to leave out of a second request after the server refused (HTTP
    /// `status`, `body`) a request carrying `sent`: those the body names, else all of
    /// them on the first call sent with hints; `None` when the refusal is not the
    /// hints' doing.
    pub(crate) fn to_drop(&self, sent: HintSet, body: &str) -> Option<HintSet> {
        if sent.is_empty() {
            return None;
        }
        let named = sent.named_in(body);
        if !named.is_empty() {
            return Some(named);
        }
        (!self.proven.load(Ordering::Relaxed)).then_some(sent)
    }

    /// Records how the request sent without `dropped` went (`answered`): the hints are
    /// refused for good when the server named them or answered without them.
    pub(crate) fn after_resend(&self, dropped: HintSet, named: bool, answered: bool) {
        self.proven.store(true, Ordering::Relaxed);
        if !(named || answered) {
            return;
        }
        let before = HintSet(self.refused.fetch_or(dropped.0, Ordering::Relaxed));
        let new = HintSet(dropped.0 & !before.0);
        if !new.is_empty() {
            tracing::debug!(
                fields = ?new.names(),
                "the server refused a request carrying these prompt-reuse hints; sending them no more"
            );
        }
    }

    /// Records that a request carrying hints was answered.
    pub(crate) fn answered(&self) {
        self.proven.store(true, Ordering::Relaxed);
    }

    /// Whether the server named one of `sent`'s fields in `body`.
    pub(crate) fn names_any(sent: HintSet, body: &str) -> bool {
        !sent.named_in(body).is_empty()
    }
}

/// The server's slots as this backend uses them: for each, our calls in it now, the
/// prefix it last held (as far as we know) and when it was last given out. Bounded by
/// [`MAX_TRACKED_SLOTS`] entries.
#[derive(Debug)]
pub(crate) struct SlotTable {
    state: Mutex<Slots>,
}

#[derive(Debug)]
struct Slots {
    busy: Vec<u32>,
    held: Vec<Option<PrefixKey>>,
    used: Vec<u64>,
    tick: u64,
}

impl SlotTable {
    /// A table of `slots` slots (at most [`MAX_TRACKED_SLOTS`]); `None` for none.
    fn new(slots: usize) -> Option<Self> {
        let n = slots.min(MAX_TRACKED_SLOTS);
        (n > 0).then(|| Self {
            state: Mutex::new(Slots {
                busy: vec![0; n],
                held: vec![None; n],
                used: vec![0; n],
                tick: 0,
            }),
        })
    }

    /// An idle slot for a prompt with prefix `key`: the idle slot that last held it
    /// (the latest, when several did), else an idle slot never used, else the idle slot
    /// used longest ago (so the prefixes of the others stay warm); `None` when every
    /// slot has a call of ours (the server then picks, as without the table).
    fn lease(self: &Arc<Self>, key: Option<PrefixKey>) -> Option<SlotLease> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = || (0..s.busy.len()).filter(|&i| s.busy.get(i) == Some(&0));
        let used = |i: &usize| s.used.get(*i).copied().unwrap_or_default();
        let warm = key.and_then(|k| {
            idle()
                .filter(|&i| s.held.get(i) == Some(&Some(k)))
                .max_by_key(used)
        });
        let slot = warm.or_else(|| {
            idle().min_by_key(|&i| (s.used.get(i).is_some_and(|&u| u > 0), used(&i)))
        })?;
        s.tick += 1;
        let tick = s.tick;
        if let Some(b) = s.busy.get_mut(slot) {
            *b += 1;
        }
        if let Some(h) = s.held.get_mut(slot) {
            *h = key;
        }
        if let Some(u) = s.used.get_mut(slot) {
            *u = tick;
        }
        Some(SlotLease {
            table: Arc::clone(self),
            slot,
        })
    }
}

/// A slot given to one call: the table counts it busy until the lease is dropped (the
/// call finished, failed or was cancelled).
#[derive(Debug)]
pub(crate) struct SlotLease {
    table: Arc<SlotTable>,
    slot: usize,
}

impl Drop for SlotLease {
    fn drop(&mut self) {
        let mut s = self
            .table
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = s.busy.get_mut(self.slot) {
            *b = b.saturating_sub(1);
        }
    }
}

/// Sets `field` of `body` to `value` unless it is set already (by the extra body
/// fields); returns `hint` when it set it.
pub fn put(body: &mut Value, field: &str, value: Value, hint: HintSet) -> HintSet {
    match body {
        Value::Object(fields) if !fields.contains_key(field) => {
            fields.insert(field.to_string(), value);
            hint
        }
        _ => HintSet::NONE,
    }
}

/// `stream` holding `lease` until it is dropped: a streamed call keeps its slot until
/// its reader is done with it.
pub(crate) fn hold(stream: CompletionStream, lease: Option<SlotLease>) -> CompletionStream {
    match lease {
        Some(lease) => Box::pin(Leased {
            stream,
            _lease: lease,
        }),
        None => stream,
    }
}

/// A stream and the slot its call holds.
struct Leased {
    stream: CompletionStream,
    _lease: SlotLease,
}

impl Stream for Leased {
    type Item = <CompletionStream as Stream>::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.stream.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::{ChatMessage, RenderedPrompt, Role};

    fn prefix(system: &str) -> PromptPrefix {
        let p = RenderedPrompt::Chat(vec![ChatMessage::new(Role::System, system)]);
        PromptPrefix::leading(&p, 1, 0, 1).unwrap()
    }

    fn reuse(slots: usize) -> Reuse {
        let mut r = Reuse::default();
        r.set_slots(Some(slots));
        r
    }

    #[test]
    fn a_prefix_goes_back_to_its_slot_and_parallel_calls_spread() {
        let r = reuse(3);
        let (a, b) = (prefix("a"), prefix("b"));
        let first = r.lease(Some(&a)).unwrap().slot;
        // Free again: the same prefix goes back to the same slot.
        assert_eq!(r.lease(Some(&a)).unwrap().slot, first);
        // At once: a different prefix, and the same prefix while its slot is busy,
        // go to other slots; a fourth call finds none idle.
        let held = r.lease(Some(&a)).unwrap();
        let other = r.lease(Some(&b)).unwrap();
        let again = r.lease(Some(&a)).unwrap();
        let mut slots = vec![held.slot, other.slot, again.slot];
        slots.sort_unstable();
        assert_eq!(slots, vec![0, 1, 2]);
        assert!(r.lease(Some(&a)).is_none());
        drop(other);
        // `b` keeps its slot warm for the next `b` call.
        let b_slot = r.lease(Some(&b)).unwrap().slot;
        assert_ne!(b_slot, held.slot);
        assert_ne!(b_slot, again.slot);
    }

    #[test]
    fn refusals_drop_the_named_hints_or_all_on_the_first_try() {
        let r = reuse(2);
        let sent = HintSet::ID_SLOT.with(HintSet::PROMPT_CACHE_KEY);
        assert_eq!(
            r.to_drop(sent, "unknown field id_slot"),
            Some(HintSet::ID_SLOT)
        );
        assert_eq!(r.to_drop(sent, "bad request"), Some(sent));
        assert_eq!(r.to_drop(HintSet::NONE, "id_slot"), None);
        // The second request failed too, and nothing was named: the hints stay.
        r.after_resend(sent, false, false);
        assert!(r.hints(None, None).allows(HintSet::ID_SLOT));
        assert_eq!(r.to_drop(sent, "bad request"), None);
        // Named: dropped for good, and no slot is leased any more.
        r.after_resend(HintSet::ID_SLOT, true, false);
        assert!(!r.hints(None, None).allows(HintSet::ID_SLOT));
        assert!(r.lease(None).is_none());
        assert!(r.hints(None, None).allows(HintSet::PROMPT_CACHE_KEY));
    }

    #[test]
    fn tables_are_bounded() {
        assert!(SlotTable::new(0).is_none());
        let r = reuse(1000);
        let leases: Vec<_> = (0..MAX_TRACKED_SLOTS + 5)
            .filter_map(|_| r.lease(None))
            .collect();
        assert_eq!(leases.len(), MAX_TRACKED_SLOTS);
    }
}
