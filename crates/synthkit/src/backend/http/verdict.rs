//! Telling an answer from a refusal or a reply without text, for every HTTP backend and
//! for whole and streamed replies alike.

use crate::model::{ModelError, excerpt};

/// The most characters of a refusal kept in its error.
const MAX_REFUSAL_CHARS: usize = 300;

/// What a reply held besides its text.
#[derive(Debug, Default, Clone)]
pub(crate) struct Held {
    /// Text (not only whitespace) came.
    pub text: bool,
    /// The refusal the model wrote (OpenAI's `refusal`), as far as it came.
    pub refusal: String,
    /// Why the server stopped, when it was a refusal (`content_filter`, `refusal`).
    pub refused_by: Option<&'static str>,
    /// Tool calls came.
    pub tool_calls: bool,
    /// Reasoning ("thinking") came.
    pub reasoning: bool,
    /// The server stopped at the output limit (`length`, `max_tokens`).
    pub cut: bool,
}

impl Held {
    /// Records text.
    pub(crate) fn text(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.text = true;
        }
    }

    /// Records a stop reason (either API's), noting the ones that are refusals.
    pub(crate) fn stop_reason(&mut self, reason: &str) {
        match reason {
            "content_filter" => {
                self.refused_by = Some(
                    "the server's content filter stopped the reply: finish_reason `content_filter`",
                )
            }
            "refusal" => self.refused_by = Some("stop_reason `refusal`"),
            "length" | "max_tokens" => self.cut = true,
            _ => {}
        }
    }

    /// Records (part of) a refusal.
    pub(crate) fn refusal(&mut self, part: &str) {
        if self.refusal.len() < 4 * MAX_REFUSAL_CHARS {
            self.refusal.push_str(part);
        }
    }

    /// `Ok` for an answer; [`ModelError::Refused`] for a refusal (with or without partial
    /// text); [`ModelError::NoText`] for a reply of tool calls or reasoning only.
    pub(crate) fn verdict(&self) -> Result<(), ModelError> {
        let refusal = self.refusal.trim();
        if !refusal.is_empty() {
            return Err(ModelError::Refused {
                reason: format!("it said: {}", excerpt(refusal, MAX_REFUSAL_CHARS)),
            });
        }
        if let Some(by) = self.refused_by {
            return Err(ModelError::Refused {
                reason: by.to_string(),
            });
        }
        if !self.text {
            let what = match (self.tool_calls, self.reasoning) {
                (true, true) => "tool calls and reasoning",
                (true, false) => "tool calls",
                (false, true) => crate::text::thinking::only_thought(self.cut),
                (false, false) => return Ok(()),
            };
            return Err(ModelError::NoText { what: what.into() });
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert!(Held::default().verdict().is_ok());
        let mut h = Held::default();
        h.text("answer");
        h.tool_calls = true;
        assert!(h.verdict().is_ok());
        h.stop_reason("content_filter");
        assert!(matches!(h.verdict(), Err(ModelError::Refused { .. })));
        let mut h = Held::default();
        h.refusal("I can't help with that.");
        let e = h.verdict().unwrap_err().to_string();
        assert!(e.contains("I can't help with that."), "{e}");
        let mut h = Held::default();
        h.text("\n\n");
        h.reasoning = true;
        assert!(
            matches!(h.verdict(), Err(ModelError::NoText { what }) if what.starts_with("reasoning"))
        );
        let h = Held {
            tool_calls: true,
            ..Held::default()
        };
        assert!(matches!(h.verdict(), Err(ModelError::NoText { what }) if what == "tool calls"));
    }
}
