//! Prompt templates with `{name}` variables.
//!
//! Formatting is one pass over the template text (decision 15): every `{name}` whose name
//! is supplied is replaced by its value; anything else in braces (`{x:>3}`, JSON, `{}`,
//! `{{name}}`'s outer braces) stays as written; substituted values are never scanned again,
//! so braces inside documents, queries or answers are always safe.
//!
//! ```
//! use synthkit::prompt::{PromptTemplate, TemplateKind};
//! let t = PromptTemplate::completion(TemplateKind::Qa, "Context: {context_str}\nQ: {query_str} {json}");
//! assert_eq!(t.variables(), vec!["context_str", "query_str", "json"]);
//! let t = t.partial("query_str", "why {context_str}?");
//! let out = t.render(&[("context_str", "{query_str}")]);
//! assert_eq!(out.as_text(), Some("Context: {query_str}\nQ: why {context_str}? {json}"));
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a template is for; modes pick templates by kind and backends may use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum TemplateKind {
    /// Answer a question from context (`context_str`, `query_str`).
    Qa,
    /// Improve an existing answer with more context (`query_str`, `existing_answer`, `context_msg`).
    Refine,
    /// Combine passages into one answer (`context_str`, `query_str`).
    Summary,
    /// The query alone (`query_str`), used by `generation`.
    Simple,
    /// Extract a record about the query from context (`context_str`, `query_str`), used
    /// by `map_reduce`'s first level.
    Map,
    /// Combine records into one answer (`context_str`, `query_str`), used by
    /// `map_reduce`'s levels above the first.
    Reduce,
    /// Anything else.
    Custom,
}

impl TemplateKind {
    /// The snake-case name (`qa`, `refine`, `summary`, `simple`, `map`, `reduce`,
    /// `custom`).
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateKind::Qa => "qa",
            TemplateKind::Refine => "refine",
            TemplateKind::Summary => "summary",
            TemplateKind::Simple => "simple",
            TemplateKind::Map => "map",
            TemplateKind::Reduce => "reduce",
            TemplateKind::Custom => "custom",
        }
    }

    /// The variables a synthesis fills in a template of this kind: the ones
    /// [`TemplateKind::required_variables`] names, and the query (all four for a custom
    /// template).
    pub fn filled_variables(self) -> &'static [&'static str] {
        match self {
            TemplateKind::Qa | TemplateKind::Summary | TemplateKind::Map | TemplateKind::Reduce => {
                &["context_str", "query_str"]
            }
            TemplateKind::Refine => &["query_str", "existing_answer", "context_msg"],
            TemplateKind::Simple => &["query_str"],
            TemplateKind::Custom => &["context_str", "query_str", "existing_answer", "context_msg"],
        }
    }

    /// The variables a mode must be able to fill in a template of this kind.
    pub fn required_variables(self) -> &'static [&'static str] {
        match self {
            TemplateKind::Qa | TemplateKind::Summary | TemplateKind::Map | TemplateKind::Reduce => {
                &["context_str"]
            }
            TemplateKind::Refine => &["existing_answer", "context_msg"],
            TemplateKind::Simple => &["query_str"],
            TemplateKind::Custom => &[],
        }
    }
}

impl fmt::Display for TemplateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The author of a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user's turn.
    User,
    /// The model's turn.
    Assistant,
}

impl Role {
    /// The wire name (`system`, `user`, `assistant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One chat message: its text, and the images shown within it (at byte offsets of the
/// text), if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said: the text (of every text part, in order, when the message has images).
    pub content: String,
    /// The images of the message, in order of their place in [`ChatMessage::content`]
    /// (see [`ChatMessage::parts`]); empty for a text message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<PromptImage>,
}

/// An image within a chat message: shown before the text at byte offset `at` of the
/// message's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptImage {
    /// The byte offset in the message's content the image stands at (a char boundary; at
    /// most the content's length).
    pub at: usize,
    /// The image.
    pub image: crate::node::NodeImage,
    /// What the image costs in prompt tokens by the synthesizer's count
    /// ([`crate::node::ImageCost`]): prompt budgets count the message's text plus this.
    pub tokens: usize,
}

/// One part of a chat message's content ([`ChatMessage::parts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentPart<'a> {
    /// Text (never empty).
    Text(&'a str),
    /// An image.
    Image(&'a PromptImage),
}

impl ChatMessage {
    /// A message from `role` with `content`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            images: Vec::new(),
        }
    }

    /// The content as parts: the text cut at each image's offset, the images between
    /// (empty text parts left out). A text message is one text part.
    pub fn parts(&self) -> Vec<ContentPart<'_>> {
        let mut out = Vec::with_capacity(2 * self.images.len() + 1);
        let mut last = 0;
        for image in &self.images {
            let at = image.at.clamp(last, self.content.len());
            if let Some(text) = self.content.get(last..at).filter(|t| !t.is_empty()) {
                out.push(ContentPart::Text(text));
            }
            out.push(ContentPart::Image(image));
            last = at;
        }
        if let Some(text) = self.content.get(last..).filter(|t| !t.is_empty()) {
            out.push(ContentPart::Text(text));
        }
        out
    }

    /// The prompt tokens of the images, by the synthesizer's count.
    pub fn image_tokens(&self) -> usize {
        self.images.iter().map(|i| i.tokens).sum()
    }
}

/// A prompt ready to send: one text (completion models) or chat messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RenderedPrompt {
    /// A single completion prompt.
    Text(String),
    /// Chat messages, in order.
    Chat(Vec<ChatMessage>),
}

impl RenderedPrompt {
    /// The text of a completion prompt, `None` for chat messages.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            RenderedPrompt::Text(t) => Some(t),
            RenderedPrompt::Chat(_) => None,
        }
    }

    /// The prompt as one text: a completion prompt as is; chat messages as `role: content`
    /// lines followed by `assistant: ` (how a chat prompt is shown to a completion model).
    pub fn to_text(&self) -> String {
        match self {
            RenderedPrompt::Text(t) => t.clone(),
            RenderedPrompt::Chat(messages) => {
                let mut out = String::new();
                for m in messages {
                    out.push_str(m.role.as_str());
                    out.push_str(": ");
                    out.push_str(&m.content);
                    out.push('\n');
                }
                out.push_str("assistant: ");
                out
            }
        }
    }

    /// Whether any message holds an image.
    pub fn has_images(&self) -> bool {
        match self {
            RenderedPrompt::Text(_) => false,
            RenderedPrompt::Chat(messages) => messages.iter().any(|m| !m.images.is_empty()),
        }
    }

    /// The prompt with its messages' images taken out (their text kept).
    pub fn without_images(&self) -> RenderedPrompt {
        match self {
            RenderedPrompt::Text(t) => RenderedPrompt::Text(t.clone()),
            RenderedPrompt::Chat(messages) => RenderedPrompt::Chat(
                messages
                    .iter()
                    .map(|m| ChatMessage::new(m.role, m.content.clone()))
                    .collect(),
            ),
        }
    }

    /// The images of the prompt as a short key (each image's message, place and
    /// fingerprint): with [`RenderedPrompt::without_images`], a cache key that never holds
    /// image data. Empty for a prompt without images.
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    pub(crate) fn image_key(&self) -> String {
        let RenderedPrompt::Chat(messages) = self else {
            return String::new();
        };
        let mut key = String::new();
        for (i, m) in messages.iter().enumerate() {
            for image in &m.images {
                key.push_str(&format!(
                    "\u{0}{i}@{}:{}",
                    image.at,
                    image.image.fingerprint()
                ));
            }
        }
        key
    }

    /// Adds a system prompt: a leading system message for chat, or the system prompt and a
    /// blank line before a completion prompt (as the reference does).
    pub fn with_system_prompt(self, system_prompt: Option<&str>) -> Self {
        match (self, system_prompt) {
            (p, None) => p,
            (RenderedPrompt::Text(t), Some(s)) => RenderedPrompt::Text(format!("{s}\n\n{t}")),
            (RenderedPrompt::Chat(mut m), Some(s)) => {
                m.insert(0, ChatMessage::new(Role::System, s));
                RenderedPrompt::Chat(m)
            }
        }
    }
}

/// The most variables a [`TemplateError::UnknownVariables`] names, of the unknown ones
/// and of the known ones each.
pub const MAX_NAMED_VARIABLES: usize = 10;

/// Errors in templates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// A mode needs a variable the template does not contain.
    #[error(
        "the {kind} template has no `{{{variable}}}` variable, which this mode fills; add `{{{variable}}}` to the template"
    )]
    MissingVariable {
        /// The template's kind.
        kind: TemplateKind,
        /// The missing variable.
        variable: String,
    },
    /// A chat template with no message.
    #[error("a chat template needs at least one message")]
    EmptyChat,
    /// The template has `{name}` variables that nothing fills: they would be sent as
    /// written, and the prompt budget (which counts them as empty) would be wrong.
    #[error(
        "the {kind} template has {count} variable{plural} that nothing fills: {named}{past}; the variables it may use are {usable}: take the others out of the template, or give each a value (a variable of the synthesizer, or a partial value of the template)",
        count = .unknown.len() + .more,
        plural = plural_s(.unknown.len() + .more),
        named = braced(.unknown),
        past = and_more(.more),
        usable = braced(.known)
    )]
    UnknownVariables {
        /// The template's kind.
        kind: TemplateKind,
        /// The first unknown variables (at most [`MAX_NAMED_VARIABLES`]), in order.
        unknown: Vec<String>,
        /// Unknown variables past those named.
        more: usize,
        /// The variables the template may use (at most [`MAX_NAMED_VARIABLES`] of the
        /// extra ones, after synthkit's own).
        known: Vec<String>,
    },
}

/// `s` unless `n` is 1.
fn plural_s(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// ` and N more` for an error message (nothing for 0).
fn and_more(n: &usize) -> String {
    match *n {
        0 => String::new(),
        n => format!(" and {n} more"),
    }
}

/// `` `{a}`, `{b}` `` for an error message.
fn braced(names: &[String]) -> String {
    let named: Vec<String> = names.iter().map(|n| format!("`{{{n}}}`")).collect();
    named.join(", ")
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    Text(String),
    Chat(Vec<(Role, String)>),
}

/// A completion or chat template with `{name}` variables and optional partial values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    kind: TemplateKind,
    body: Body,
    partials: Vec<(String, String)>,
}

impl PromptTemplate {
    /// A completion template (one text).
    pub fn completion(kind: TemplateKind, text: impl Into<String>) -> Self {
        Self {
            kind,
            body: Body::Text(text.into()),
            partials: Vec::new(),
        }
    }

    /// A chat template: messages with their roles, each a template text.
    pub fn chat(kind: TemplateKind, messages: Vec<(Role, String)>) -> Result<Self, TemplateError> {
        if messages.is_empty() {
            return Err(TemplateError::EmptyChat);
        }
        Ok(Self {
            kind,
            body: Body::Chat(messages),
            partials: Vec::new(),
        })
    }

    /// What the template is for.
    pub fn kind(&self) -> TemplateKind {
        self.kind
    }

    setters! {
        /// The same template with another kind.
        pub fn with_kind(kind: TemplateKind) => kind;
    }

    /// Whether this is a chat template.
    pub fn is_chat(&self) -> bool {
        matches!(self.body, Body::Chat(_))
    }

    /// The template texts: one for a completion template, one per message for chat.
    pub fn texts(&self) -> Vec<&str> {
        match &self.body {
            Body::Text(t) => vec![t.as_str()],
            Body::Chat(m) => m.iter().map(|(_, t)| t.as_str()).collect(),
        }
    }

    /// Every variable name in the template, in order of first appearance, including the
    /// ones that have a partial value.
    pub fn variables(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for text in self.texts() {
            for (_, _, name) in placeholders(text) {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// The role of the first message holding `{name}` in a chat template (`None` for a
    /// completion template, or when no message holds it).
    pub fn role_of(&self, name: &str) -> Option<Role> {
        match &self.body {
            Body::Text(_) => None,
            Body::Chat(m) => m
                .iter()
                .find(|(_, t)| placeholders(t).any(|(_, _, n)| n == name))
                .map(|(r, _)| *r),
        }
    }

    /// Whether the template contains `{name}`.
    pub fn has_variable(&self, name: &str) -> bool {
        self.texts()
            .iter()
            .any(|t| placeholders(t).any(|(_, _, n)| n == name))
    }

    /// Checks that every variable in `names` is in the template.
    pub fn require(&self, names: &[&str]) -> Result<(), TemplateError> {
        for name in names {
            if !self.has_variable(name) {
                return Err(TemplateError::MissingVariable {
                    kind: self.kind,
                    variable: (*name).to_string(),
                });
            }
        }
        Ok(())
    }

    /// Checks the variables a mode fills for this template's kind.
    pub fn validate(&self) -> Result<(), TemplateError> {
        self.require(self.kind.required_variables())
    }

    /// Checks that every variable in the template has a value: one synthkit fills
    /// ([`TemplateKind::filled_variables`]), one of `extra` (the synthesizer's variables), or a partial
    /// value. An unknown variable would be sent as written, uncounted by the budget:
    /// [`TemplateError::UnknownVariables`] names the first [`MAX_NAMED_VARIABLES`] of them
    /// and the known ones.
    pub(crate) fn check_known(&self, extra: &[&str]) -> Result<(), TemplateError> {
        let filled = self.kind.filled_variables();
        let mut seen = std::collections::HashSet::new();
        let mut unknown = Vec::new();
        let mut more = 0;
        for text in self.texts() {
            for (_, _, name) in placeholders(text) {
                let known = filled.contains(&name)
                    || extra.contains(&name)
                    || self.partial_value(name).is_some();
                if known || !seen.insert(name) {
                    continue;
                }
                if unknown.len() < MAX_NAMED_VARIABLES {
                    unknown.push(name.to_string());
                } else {
                    more += 1;
                }
            }
        }
        if unknown.is_empty() {
            return Ok(());
        }
        let mut known: Vec<String> = filled.iter().map(|n| n.to_string()).collect();
        let others = extra
            .iter()
            .copied()
            .chain(self.partials.iter().map(|(n, _)| n.as_str()));
        for name in others {
            if !known.iter().any(|k| k == name) && known.len() < filled.len() + MAX_NAMED_VARIABLES
            {
                known.push(name.to_string());
            }
        }
        Err(TemplateError::UnknownVariables {
            kind: self.kind,
            unknown,
            more,
            known,
        })
    }

    /// A copy with `name` set to `value`; values given at render time take precedence.
    pub fn partial(&self, name: &str, value: &str) -> Self {
        let mut out = self.clone();
        out.partials.retain(|(n, _)| n != name);
        out.partials.push((name.to_string(), value.to_string()));
        out
    }

    /// The partial value of `name`, if set.
    pub(crate) fn partial_value(&self, name: &str) -> Option<&str> {
        self.partials
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Renders in one pass. A `{name}` is replaced when `vars` or the partial values hold
    /// `name` (call-time values first); every other `{...}` stays as written.
    pub fn render(&self, vars: &[(&str, &str)]) -> RenderedPrompt {
        self.render_inner(vars, false)
    }

    /// Like [`PromptTemplate::render`], but every template variable without a value
    /// renders as empty text: the form the prompt budget counts.
    pub fn render_empty(&self, vars: &[(&str, &str)]) -> RenderedPrompt {
        self.render_inner(vars, true)
    }

    fn render_inner(&self, vars: &[(&str, &str)], empty_missing: bool) -> RenderedPrompt {
        let lookup = |name: &str| -> Option<&str> {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .or_else(|| self.partial_value(name))
                .or(if empty_missing { Some("") } else { None })
        };
        match &self.body {
            Body::Text(t) => RenderedPrompt::Text(format_one_pass(t, &lookup)),
            Body::Chat(m) => RenderedPrompt::Chat(
                m.iter()
                    .map(|(role, t)| ChatMessage::new(*role, format_one_pass(t, &lookup)))
                    .collect(),
            ),
        }
    }
}

/// Substitutes `{name}` placeholders in one left-to-right pass.
///
/// `lookup` returns the value of a name or `None` to leave the placeholder as written.
/// Values are copied into the output and never scanned.
pub fn format_one_pass<'v>(template: &str, lookup: &dyn Fn(&str) -> Option<&'v str>) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut last = 0;
    for (start, end, name) in placeholders(template) {
        if let Some(value) = lookup(name) {
            out.push_str(&template[last..start]);
            out.push_str(value);
            last = end;
        }
    }
    out.push_str(&template[last..]);
    out
}

/// Finds `{identifier(.identifier)*}` placeholders: (start, end, name) byte ranges,
/// `start` at the `{` and `end` after the `}`.
fn placeholders(text: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            if bytes.get(i) == Some(&b'{') {
                let start = i;
                let mut j = i + 1;
                let mut ok = true;
                let mut seg_start = true;
                while let Some(&b) = bytes.get(j) {
                    if b == b'}' {
                        break;
                    }
                    let valid = if seg_start {
                        b.is_ascii_alphabetic() || b == b'_'
                    } else {
                        b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
                    };
                    if !valid {
                        ok = false;
                        break;
                    }
                    seg_start = b == b'.';
                    j += 1;
                }
                if ok && bytes.get(j) == Some(&b'}') && j > start + 1 && !seg_start {
                    i = j + 1;
                    // The slice is ASCII and on char boundaries.
                    if let Some(name) = text.get(start + 1..j) {
                        return Some((start, j + 1, name));
                    }
                }
                i = start + 1;
            } else {
                i += 1;
            }
        }
        None
    })
}

#[cfg(test)]
#[path = "template_tests.rs"]
mod tests;
