//! [`PromptPrefix`]: the part of a prompt that repeats across the calls of a synthesis
//! and of the syntheses of one batch (the system messages and the template text before
//! the first value a synthesis fills), with a stable key for it.
//!
//! The engine attaches one to every request it makes (a request extension), so that
//! backends can help their server reuse what it already read of that prefix: llama.cpp's
//! `id_slot` (the slot that last held the prefix), OpenAI's `prompt_cache_key`,
//! Anthropic's `cache_control` breakpoints. The prefix is found by rendering the
//! request's template with every filled variable (`context_str`, `query_str`,
//! `existing_answer`, `context_msg` and the call's own) set to a marker: whatever comes
//! before the first marker is the same bytes in every call of that template, and is the
//! prefix. The key is a hash of those bytes (SHA-256, cut to 128 bits), the same in every
//! process and on every platform; it never changes what is counted or sent as the prompt.

use std::fmt;

use sha2::{Digest, Sha256};

use super::{ChatMessage, RenderedPrompt};

/// The value every filled variable takes in the shape a prefix is read from: text no
/// template holds.
pub(crate) const VARYING: &str = "\u{0}synthkit:varying\u{0}";

/// The stable key of a prompt prefix: 128 bits of the SHA-256 of its bytes. Shown (and
/// sent as OpenAI's `prompt_cache_key`) as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PrefixKey(u128);

impl PrefixKey {
    /// The key as 32 lowercase hex digits.
    pub fn hex(&self) -> String {
        format!("{:032x}", self.0)
    }
}

impl fmt::Display for PrefixKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for PrefixKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrefixKey({self})")
    }
}

/// The shared prefix of a request's prompt (a request extension): its key, where it
/// ends, and the tokens of the leading messages it holds whole.
///
/// ```
/// use synthkit::prompt::{ChatMessage, PromptPrefix, RenderedPrompt, Role};
///
/// let ask = |q: &str| RenderedPrompt::Chat(vec![
///     ChatMessage::new(Role::System, "Answer from the passages."),
///     ChatMessage::new(Role::User, format!("Passages: {q}")),
/// ]);
/// // The system message whole and the first 10 bytes of the user message.
/// let a = PromptPrefix::leading(&ask("one"), 1, 10, 5).unwrap();
/// let b = PromptPrefix::leading(&ask("two"), 1, 10, 5).unwrap();
/// assert_eq!(a.key, b.key);
/// assert_eq!(a.key.hex().len(), 32);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptPrefix {
    /// The prefix's stable key.
    pub key: PrefixKey,
    /// The leading messages the prefix holds whole (0 for a completion prompt).
    pub whole_messages: usize,
    /// The bytes of the next message (of a completion prompt's text) the prefix holds.
    pub partial_bytes: usize,
    /// The tokens of the whole leading messages' text, by the synthesizer's tokenizer:
    /// what a backend weighs against its server's minimum for caching (Anthropic's).
    pub whole_message_tokens: usize,
}

impl PromptPrefix {
    /// The prefix of `prompt` made of its first `whole_messages` messages and the first
    /// `partial_bytes` bytes of the next one (of a completion prompt's text), whose whole
    /// messages count `whole_message_tokens`. Both are clamped to the prompt (a cut
    /// inside a character moves back to its start); `None` for an empty prefix.
    pub fn leading(
        prompt: &RenderedPrompt,
        whole_messages: usize,
        partial_bytes: usize,
        whole_message_tokens: usize,
    ) -> Option<Self> {
        let mut hasher = Sha256::new();
        hasher.update(b"synthkit prefix 1\0");
        let (whole, partial) = match prompt {
            RenderedPrompt::Text(text) => (0, cut(text, partial_bytes)),
            RenderedPrompt::Chat(messages) => {
                let whole = whole_messages.min(messages.len());
                for m in messages.iter().take(whole) {
                    hash_message(&mut hasher, m, m.content.len());
                }
                let partial = messages.get(whole).map_or(0, |m| {
                    let n = cut(&m.content, partial_bytes);
                    if n > 0 {
                        hash_message(&mut hasher, m, n);
                    }
                    n
                });
                (whole, partial)
            }
        };
        if let RenderedPrompt::Text(text) = prompt {
            hasher.update(text.get(..partial).unwrap_or_default().as_bytes());
        }
        if whole == 0 && partial == 0 {
            return None;
        }
        let digest = hasher.finalize();
        let mut bytes = [0u8; 16];
        for (b, d) in bytes.iter_mut().zip(digest.iter()) {
            *b = *d;
        }
        Some(Self {
            key: PrefixKey(u128::from_be_bytes(bytes)),
            whole_messages: whole,
            partial_bytes: partial,
            whole_message_tokens: if whole == 0 { 0 } else { whole_message_tokens },
        })
    }

    /// The prefix of `shape` (a prompt rendered with every filled variable set to
    /// `marker`): everything before the first `marker` (the whole prompt when it has
    /// none), its whole messages counted with `count`.
    pub(crate) fn before_marker(
        shape: &RenderedPrompt,
        marker: &str,
        count: impl Fn(&str) -> usize,
    ) -> Option<Self> {
        match shape {
            RenderedPrompt::Text(text) => {
                let end = text.find(marker).unwrap_or(text.len());
                Self::leading(shape, 0, end, 0)
            }
            RenderedPrompt::Chat(messages) => {
                let (whole, partial) = messages
                    .iter()
                    .enumerate()
                    .find_map(|(i, m)| m.content.find(marker).map(|at| (i, at)))
                    .unwrap_or((messages.len(), 0));
                let tokens = messages.iter().take(whole).map(|m| count(&m.content)).sum();
                Self::leading(shape, whole, partial, tokens)
            }
        }
    }

    /// The prefix a request carries, if any.
    pub fn of(request: &crate::model::ModelRequest) -> Option<&Self> {
        request.extensions.get::<Self>()
    }
}

/// `n` clamped to `text` and moved back to a character boundary.
fn cut(text: &str, n: usize) -> usize {
    let mut n = n.min(text.len());
    while n > 0 && !text.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// Adds the first `bytes` of `m` (its role, that much of its text, and the images placed
/// within it) to `hasher`.
fn hash_message(hasher: &mut Sha256, m: &ChatMessage, bytes: usize) {
    hasher.update(m.role.as_str().as_bytes());
    hasher.update(b"\0");
    hasher.update(m.content.get(..bytes).unwrap_or_default().as_bytes());
    for image in m.images.iter().filter(|i| i.at <= bytes) {
        hasher.update(format!("\0{}@{}", image.at, image.image.fingerprint()).as_bytes());
    }
    hasher.update(b"\x1e");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Role;

    fn chat(system: &str, user: &str) -> RenderedPrompt {
        RenderedPrompt::Chat(vec![
            ChatMessage::new(Role::System, system),
            ChatMessage::new(Role::User, user),
        ])
    }

    #[test]
    fn the_prefix_ends_at_the_first_marker() {
        let shape = chat("Be brief.", &format!("Passages:\n{VARYING}\nQ: {VARYING}"));
        let p = PromptPrefix::before_marker(&shape, VARYING, |t| t.len()).unwrap();
        assert_eq!((p.whole_messages, p.partial_bytes), (1, 10));
        assert_eq!(p.whole_message_tokens, "Be brief.".len());
        // The same bytes in a real prompt give the same key.
        let real = chat("Be brief.", "Passages:\nsome text\nQ: why?");
        assert_eq!(
            PromptPrefix::leading(&real, 1, 10, 0).map(|r| r.key),
            Some(p.key)
        );
        // Another system message is another prefix.
        let other = chat("Be long.", &format!("Passages:\n{VARYING}"));
        let q = PromptPrefix::before_marker(&other, VARYING, |t| t.len()).unwrap();
        assert_ne!(p.key, q.key);
    }

    #[test]
    fn text_prompts_and_empty_prefixes() {
        let shape = RenderedPrompt::Text(format!("Context: {VARYING}"));
        let p = PromptPrefix::before_marker(&shape, VARYING, |_| 1).unwrap();
        assert_eq!(
            (p.whole_messages, p.partial_bytes, p.whole_message_tokens),
            (0, 9, 0)
        );
        let empty = RenderedPrompt::Text(format!("{VARYING} and more"));
        assert!(PromptPrefix::before_marker(&empty, VARYING, |_| 1).is_none());
        // Cuts past the end or inside a character never fail.
        let t = RenderedPrompt::Text("é".into());
        assert_eq!(PromptPrefix::leading(&t, 9, 1, 0), None);
        assert_eq!(
            PromptPrefix::leading(&t, 9, 99, 0).map(|p| p.partial_bytes),
            Some(2)
        );
    }

    #[test]
    fn a_prompt_without_markers_is_its_own_prefix() {
        let shape = chat("Be brief.", "Say hello.");
        let p = PromptPrefix::before_marker(&shape, VARYING, |_| 3).unwrap();
        assert_eq!(
            (p.whole_messages, p.partial_bytes, p.whole_message_tokens),
            (2, 0, 6)
        );
    }
}
