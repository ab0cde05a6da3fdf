//! [`PromptSource`]: what a rendered prompt was made from.

use super::TemplateKind;

/// What a synthesis rendered a prompt from: the template's kind and the variables
/// (`query_str`, `context_str`, `existing_answer`, ...). The engine attaches it to every
/// request it makes ([`crate::model::ModelRequest::source`]); an offline backend answers
/// from it instead of parsing the prompt, and traces show it. Other backends ignore it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptSource {
    /// The kind of template the prompt was rendered from.
    pub kind: TemplateKind,
    /// The variables it was rendered with, in order.
    pub variables: Vec<(String, String)>,
}

impl PromptSource {
    /// A source of `kind` with `variables`.
    pub fn new(kind: TemplateKind, variables: Vec<(String, String)>) -> Self {
        Self { kind, variables }
    }

    /// The value of the variable `name`, if the prompt was rendered with it.
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}
