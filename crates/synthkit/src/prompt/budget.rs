//! The prompt budget: how many tokens of context fit beside a template.
//!
//! The reference calls this the prompt helper. Every prompt synthkit sends satisfies
//! `tokens(prompt, system prompt and chat overhead included) <= context_window - num_output`
//! (decision 1); [`PromptBudget`] computes the room left for context and packs text into it.
//!
//! A prompt limit ([`PromptBudget::with_max_prompt_tokens`], LangChain's `token_max`)
//! packs prompts below the window: for cost, or for a model that answers worse with long
//! prompts. Every prompt then satisfies `tokens <= min(context_window - num_output, limit)`,
//! and the modes make more, smaller calls to fit.
//!
//! ```
//! use synthkit::prompt::{PromptBudget, PromptTemplate, TemplateKind};
//! let budget = PromptBudget::new(4096, 256).unwrap();
//! let qa = PromptTemplate::completion(TemplateKind::Qa, "Context:\n{context_str}\nQ: {query_str}\nA:");
//! let prompt_tokens = budget.template_tokens(&qa, None);
//! let room = budget.chunk_size(prompt_tokens, 1, 5).unwrap();
//! assert_eq!(room, 4096 - 256 - prompt_tokens - 5);
//! ```

use crate::prompt::{PromptTemplate, RenderedPrompt, TemplateKind};
use crate::text::splitter::ChunkCursor;
use crate::text::{SharedTokenizer, TokenTextSplitter, tokenizer::default_tokenizer};

/// Tokens counted per chat message besides its role and content.
pub const CHAT_MESSAGE_OVERHEAD: usize = 3;
/// The padding the reference keeps between a chunk and the budget's edge.
pub const DEFAULT_PADDING: usize = 5;
/// The reference's default overlap between packed chunks.
pub const DEFAULT_CHUNK_OVERLAP_RATIO: f64 = 0.1;

/// Errors in the prompt budget. Each says what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    /// The output reserve leaves no room for a prompt.
    #[error(
        "the output reserve ({num_output} tokens) must be smaller than the context window ({context_window} tokens): lower num_output or raise the context window"
    )]
    OutputExceedsWindow {
        /// The context window.
        context_window: usize,
        /// The output reserve.
        num_output: usize,
    },
    /// The overlap ratio is outside [0, 1].
    #[error("chunk_overlap_ratio must be between 0 and 1, got {0}")]
    InvalidOverlapRatio(f64),
    /// A prompt limit of 0 tokens leaves no room for any prompt.
    #[error("max_prompt_tokens must be at least 1 (leave it unset for the whole window)")]
    ZeroPromptLimit,
    /// The template (with query, system prompt and any existing answer) alone is larger
    /// than the prompt budget.
    #[error(
        "the {kind} prompt needs {prompt_tokens} tokens before any context, but a prompt may have only {budget} ({}): shorten the query, template or system prompt, {}",
        budget_origin(*context_window, *num_output, *prompt_limit),
        budget_remedy(*prompt_limit)
    )]
    TemplateTooLarge {
        /// The template's kind.
        kind: TemplateKind,
        /// Tokens of the template with empty context.
        prompt_tokens: usize,
        /// `context_window - num_output`.
        budget: usize,
        /// The context window.
        context_window: usize,
        /// The output reserve.
        num_output: usize,
        /// The prompt limit, when one was set ([`PromptBudget::with_max_prompt_tokens`]).
        prompt_limit: Option<usize>,
    },
    /// After the template and padding, no token is left for context.
    #[error(
        "the {kind} prompt leaves no room for context: {prompt_tokens} prompt tokens + {padding} padding of a {budget}-token budget ({}); {}",
        budget_origin(*context_window, *num_output, *prompt_limit),
        budget_remedy(*prompt_limit)
    )]
    NoRoomForContext {
        /// The template's kind.
        kind: TemplateKind,
        /// Tokens of the template with empty context.
        prompt_tokens: usize,
        /// The padding asked for.
        padding: usize,
        /// `context_window - num_output`.
        budget: usize,
        /// The context window.
        context_window: usize,
        /// The output reserve.
        num_output: usize,
        /// The prompt limit, when one was set ([`PromptBudget::with_max_prompt_tokens`]).
        prompt_limit: Option<usize>,
    },
    /// A rendered prompt is over the budget; it was not sent.
    #[error(
        "refusing to send a {tokens}-token {kind} prompt: a prompt may have at most {budget} tokens (context window - num_output, or max_prompt_tokens when lower); this is a bug in packing, please report it"
    )]
    PromptOverBudget {
        /// The template's kind.
        kind: TemplateKind,
        /// Tokens of the rendered prompt.
        tokens: usize,
        /// The budget.
        budget: usize,
    },
}

/// Where a prompt budget comes from, for error messages.
fn budget_origin(context_window: usize, num_output: usize, prompt_limit: Option<usize>) -> String {
    match prompt_limit {
        Some(limit) if limit < context_window - num_output.min(context_window) => {
            format!(
                "max_prompt_tokens {limit}, below context window {context_window} - output {num_output}"
            )
        }
        _ => format!("context window {context_window} - output {num_output}"),
    }
}

/// What to change when a prompt does not fit, for error messages.
fn budget_remedy(prompt_limit: Option<usize>) -> &'static str {
    match prompt_limit {
        Some(_) => "raise max_prompt_tokens, raise the context window, or lower num_output",
        None => "raise the context window or lower num_output",
    }
}

/// Token budgeting for prompts: window, output reserve, prompt limit, overlap and chunk
/// size limit.
#[derive(Debug, Clone)]
pub struct PromptBudget {
    context_window: usize,
    num_output: usize,
    /// A cap on every prompt below `context_window - num_output`, when set.
    prompt_limit: Option<usize>,
    chunk_overlap_ratio: f64,
    chunk_size_limit: Option<usize>,
    separator: String,
    tokenizer: SharedTokenizer,
    /// Whether the tokenizer was chosen with [`PromptBudget::with_tokenizer`] (a
    /// synthesizer then keeps it instead of the model's).
    explicit_tokenizer: bool,
}

impl PromptBudget {
    /// A budget for a window and output reserve, with overlap ratio 0.1, no chunk size
    /// limit, separator `" "` and the default tokenizer (`cl100k_base`).
    pub fn new(context_window: usize, num_output: usize) -> Result<Self, BudgetError> {
        if num_output >= context_window {
            return Err(BudgetError::OutputExceedsWindow {
                context_window,
                num_output,
            });
        }
        Ok(Self {
            context_window,
            num_output,
            prompt_limit: None,
            chunk_overlap_ratio: DEFAULT_CHUNK_OVERLAP_RATIO,
            chunk_size_limit: None,
            separator: " ".to_string(),
            tokenizer: default_tokenizer(),
            explicit_tokenizer: false,
        })
    }

    /// Sets the overlap between packed chunks, a fraction of the chunk size in [0, 1].
    pub fn with_chunk_overlap_ratio(mut self, ratio: f64) -> Result<Self, BudgetError> {
        if !(0.0..=1.0).contains(&ratio) || ratio.is_nan() {
            return Err(BudgetError::InvalidOverlapRatio(ratio));
        }
        self.chunk_overlap_ratio = ratio;
        Ok(self)
    }

    /// Caps every prompt at `limit` tokens (system prompt and chat overhead included), below
    /// what the window allows: the modes pack less context into each call and make more
    /// calls. `None` (the default) lets a prompt fill `context_window - num_output`; a
    /// limit above that changes nothing. A limit of 0 is an error.
    ///
    /// ```
    /// use synthkit::prompt::PromptBudget;
    /// let budget = PromptBudget::new(8192, 512).unwrap();
    /// assert_eq!(budget.max_prompt_tokens(), 7680);
    /// let budget = budget.with_max_prompt_tokens(Some(2000)).unwrap();
    /// assert_eq!(budget.max_prompt_tokens(), 2000);
    /// assert!(budget.clone().with_max_prompt_tokens(Some(0)).is_err());
    /// ```
    pub fn with_max_prompt_tokens(mut self, limit: Option<usize>) -> Result<Self, BudgetError> {
        if limit == Some(0) {
            return Err(BudgetError::ZeroPromptLimit);
        }
        self.prompt_limit = limit;
        Ok(self)
    }

    setters! {
        /// Caps every chunk at this many tokens.
        pub fn with_chunk_size_limit(limit: Option<usize>) => chunk_size_limit;

        /// Sets the word separator used when splitting.
        pub fn with_separator(separator: impl Into<String>) => separator;
    }

    /// Sets the tokenizer that counts prompts and chunks. A synthesizer built with this
    /// budget keeps it instead of the model's tokenizer.
    pub fn with_tokenizer(mut self, tokenizer: SharedTokenizer) -> Self {
        self.tokenizer = tokenizer;
        self.explicit_tokenizer = true;
        self
    }

    /// Whether the tokenizer was set with [`PromptBudget::with_tokenizer`].
    pub fn has_explicit_tokenizer(&self) -> bool {
        self.explicit_tokenizer
    }

    setters! {
        /// The model's tokenizer, where none was set explicitly.
        pub(crate) fn with_model_tokenizer(tokenizer: SharedTokenizer) => tokenizer;
    }

    /// The context window.
    pub fn context_window(&self) -> usize {
        self.context_window
    }

    /// The output reserve.
    pub fn num_output(&self) -> usize {
        self.num_output
    }

    /// The overlap ratio.
    pub fn chunk_overlap_ratio(&self) -> f64 {
        self.chunk_overlap_ratio
    }

    /// The chunk size limit, if any.
    pub fn chunk_size_limit(&self) -> Option<usize> {
        self.chunk_size_limit
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &SharedTokenizer {
        &self.tokenizer
    }

    /// The word separator.
    pub fn separator(&self) -> &str {
        &self.separator
    }

    /// The prompt limit set with [`PromptBudget::with_max_prompt_tokens`], if any.
    pub fn prompt_limit(&self) -> Option<usize> {
        self.prompt_limit
    }

    /// The most tokens a prompt may have: `context_window - num_output`, or the prompt
    /// limit when that is lower.
    pub fn max_prompt_tokens(&self) -> usize {
        let window = self.context_window - self.num_output;
        self.prompt_limit.map_or(window, |limit| limit.min(window))
    }

    /// Counts a rendered prompt: the text, or for chat
    /// `sum(tokens(role) + tokens(content) + image tokens + 3)` over the messages (an
    /// image as its [`crate::prompt::PromptImage::tokens`]).
    pub fn count_prompt(&self, prompt: &RenderedPrompt) -> usize {
        match prompt {
            RenderedPrompt::Text(t) => self.tokenizer.count(t),
            RenderedPrompt::Chat(messages) => messages
                .iter()
                .map(|m| {
                    self.tokenizer.count(m.role.as_str())
                        + self.tokenizer.count(&m.content)
                        + m.image_tokens()
                        + CHAT_MESSAGE_OVERHEAD
                })
                .sum(),
        }
    }

    /// [`PromptBudget::count_prompt`] if the count is at most `limit`, else `None` (stops
    /// counting early).
    pub(crate) fn count_prompt_till_limit(
        &self,
        prompt: &RenderedPrompt,
        limit: usize,
    ) -> Option<usize> {
        match prompt {
            RenderedPrompt::Text(t) => self.tokenizer.count_till_limit(t, limit),
            RenderedPrompt::Chat(messages) => {
                let mut total = 0usize;
                for m in messages {
                    total += self.tokenizer.count(m.role.as_str())
                        + m.image_tokens()
                        + CHAT_MESSAGE_OVERHEAD;
                    let room = limit.checked_sub(total)?;
                    total += self.tokenizer.count_till_limit(&m.content, room)?;
                }
                (total <= limit).then_some(total)
            }
        }
    }

    /// Tokens of `template` with every unfilled variable empty, plus the system prompt as
    /// it will be sent: what a prompt costs before any context.
    pub fn template_tokens(&self, template: &PromptTemplate, system_prompt: Option<&str>) -> usize {
        self.count_prompt(&template.render_empty(&[]).with_system_prompt(system_prompt))
    }

    /// Tokens left for context beside a prompt of `prompt_tokens`.
    pub(crate) fn available_context(
        &self,
        kind: TemplateKind,
        prompt_tokens: usize,
    ) -> Result<usize, BudgetError> {
        self.max_prompt_tokens()
            .checked_sub(prompt_tokens)
            .ok_or(BudgetError::TemplateTooLarge {
                kind,
                prompt_tokens,
                budget: self.max_prompt_tokens(),
                context_window: self.context_window,
                num_output: self.num_output,
                prompt_limit: self.prompt_limit,
            })
    }

    /// The chunk size for `num_chunks` chunks beside a prompt of `prompt_tokens`, minus
    /// `padding`, capped by the chunk size limit: `available // num_chunks - padding`.
    /// An error when nothing is left.
    pub fn chunk_size(
        &self,
        prompt_tokens: usize,
        num_chunks: usize,
        padding: usize,
    ) -> Result<usize, BudgetError> {
        self.chunk_size_for(TemplateKind::Custom, prompt_tokens, num_chunks, padding)
    }

    /// [`PromptBudget::chunk_size`] naming the template kind in errors.
    pub fn chunk_size_for(
        &self,
        kind: TemplateKind,
        prompt_tokens: usize,
        num_chunks: usize,
        padding: usize,
    ) -> Result<usize, BudgetError> {
        let available = self.available_context(kind, prompt_tokens)?;
        let size = (available / num_chunks.max(1)).saturating_sub(padding);
        let size = self.chunk_size_limit.map_or(size, |l| size.min(l));
        if size == 0 {
            return Err(BudgetError::NoRoomForContext {
                kind,
                prompt_tokens,
                padding,
                budget: self.max_prompt_tokens(),
                context_window: self.context_window,
                num_output: self.num_output,
                prompt_limit: self.prompt_limit,
            });
        }
        Ok(size)
    }

    /// The overlap for chunks of `chunk_size` tokens: `floor(ratio * chunk_size)`.
    pub(crate) fn overlap_for(&self, chunk_size: usize) -> usize {
        ((self.chunk_overlap_ratio * chunk_size as f64) as usize).min(chunk_size)
    }

    /// A splitter for chunks of `chunk_size` tokens with this budget's overlap.
    pub fn splitter(
        &self,
        chunk_size: usize,
    ) -> Result<TokenTextSplitter, crate::text::SplitError> {
        Ok(TokenTextSplitter::new(
            chunk_size,
            self.overlap_for(chunk_size),
            self.tokenizer.clone(),
        )?
        .with_separator(self.separator.clone()))
    }

    /// A cursor that hands out consecutive chunks of `text` with this budget's separators.
    pub fn cursor<'t>(&self, text: &'t str) -> ChunkCursor<'t> {
        ChunkCursor::new(
            text,
            &self.separator,
            &["\n".to_string()],
            self.tokenizer.clone(),
        )
    }

    /// Joins the non-empty, trimmed `texts` with blank lines: the text that repacking
    /// splits.
    pub(crate) fn join_for_packing<S: AsRef<str>>(texts: &[S]) -> String {
        let mut out = String::new();
        for t in texts {
            let t = t.as_ref().trim();
            if t.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(t);
        }
        out
    }

    /// Packs `texts` into as few chunks of `chunk_size` tokens as the splitter allows
    /// (trimmed, empties dropped, joined by blank lines, overlap by the ratio). Empty input
    /// gives no chunk.
    pub fn repack<S: AsRef<str>>(&self, texts: &[S], chunk_size: usize) -> Vec<String> {
        let joined = Self::join_for_packing(texts);
        let overlap = self.overlap_for(chunk_size);
        let mut cursor = self.cursor(&joined);
        let mut out = Vec::new();
        while let Some(chunk) = cursor.next_chunk(chunk_size, overlap) {
            out.push(chunk.text(&joined).to_string());
        }
        out
    }

    /// Cuts each of `texts` to its first chunk of at most `chunk_size` tokens (the
    /// reference's truncate; use [`PromptBudget::chunk_size_for`] with `texts.len()` chunks
    /// for an equal share each). Whitespace-only text becomes empty; nothing panics.
    pub fn truncate<S: AsRef<str>>(&self, texts: &[S], chunk_size: usize) -> Vec<String> {
        texts
            .iter()
            .map(|t| {
                let t = t.as_ref();
                self.cursor(t)
                    .next_chunk(chunk_size, 0)
                    .map_or_else(String::new, |c| c.text(t).to_string())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_must_be_below_window() {
        assert!(matches!(
            PromptBudget::new(256, 256),
            Err(BudgetError::OutputExceedsWindow { .. })
        ));
        assert!(matches!(
            PromptBudget::new(100, 300),
            Err(BudgetError::OutputExceedsWindow { .. })
        ));
        let msg = PromptBudget::new(256, 256).unwrap_err().to_string();
        assert!(msg.contains("lower num_output"), "{msg}");
    }

    #[test]
    fn overlap_ratio_is_validated() {
        let b = PromptBudget::new(1000, 100).unwrap();
        assert!(b.clone().with_chunk_overlap_ratio(1.5).is_err());
        assert!(b.clone().with_chunk_overlap_ratio(-0.1).is_err());
        assert!(b.clone().with_chunk_overlap_ratio(f64::NAN).is_err());
        assert!(b.with_chunk_overlap_ratio(1.0).is_ok());
    }

    #[test]
    fn template_too_large() {
        let b = PromptBudget::new(60, 50).unwrap();
        let t = PromptTemplate::completion(TemplateKind::Qa, "word ".repeat(40) + "{context_str}");
        let p = b.template_tokens(&t, None);
        let err = b.chunk_size_for(TemplateKind::Qa, p, 1, 5).unwrap_err();
        assert!(matches!(err, BudgetError::TemplateTooLarge { .. }), "{err}");
        assert!(err.to_string().contains("raise the context window"));
    }

    #[test]
    fn no_room_for_context() {
        let b = PromptBudget::new(110, 100).unwrap();
        let err = b
            .chunk_size_for(TemplateKind::Summary, 7, 1, 5)
            .unwrap_err();
        assert!(matches!(err, BudgetError::NoRoomForContext { .. }), "{err}");
        assert_eq!(b.chunk_size_for(TemplateKind::Summary, 4, 1, 5), Ok(1));
    }

    #[test]
    fn chunk_size_formula_and_limit() {
        let b = PromptBudget::new(11, 1).unwrap();
        // the reference's worked numbers (prompt of 4 tokens)
        assert!(b.chunk_size(4, 1, 6).is_err());
        assert!(b.chunk_size(4, 2, 3).is_err());
        assert_eq!(
            b.clone().with_chunk_size_limit(Some(2)).chunk_size(4, 2, 0),
            Ok(2)
        );
        assert_eq!(b.chunk_size(4, 2, 2), Ok(1));
        assert!(matches!(
            b.chunk_size(14, 1, 0),
            Err(BudgetError::TemplateTooLarge { .. })
        ));
    }

    #[test]
    fn system_prompt_and_chat_overhead_are_counted() {
        let b = PromptBudget::new(4096, 256).unwrap();
        let t = PromptTemplate::completion(TemplateKind::Qa, "Q: {query_str} C: {context_str}");
        assert!(b.template_tokens(&t, Some("You are terse.")) > b.template_tokens(&t, None));
        let c = PromptTemplate::chat(
            TemplateKind::Qa,
            vec![(crate::prompt::Role::User, "{context_str}".into())],
        )
        .unwrap();
        assert_eq!(b.template_tokens(&c, None), 1 + CHAT_MESSAGE_OVERHEAD);
    }

    #[test]
    fn truncate_keeps_a_head_within_the_size() {
        let b = PromptBudget::new(4096, 256).unwrap();
        let texts = ["This is a test foo bar", "Hello world bar foo", "   "];
        let out = b.truncate(&texts, 4);
        assert_eq!(out, vec!["This is a test", "Hello world bar foo", ""]);
        for t in &out {
            assert!(b.tokenizer().count(t) <= 4);
        }
        assert!(b.truncate::<&str>(&[], 4).is_empty());
    }

    #[test]
    fn repack_joins_and_drops_empties() {
        let b = PromptBudget::new(4096, 256).unwrap();
        let out = b.repack(&["  a ", "", "   ", "b"], 100);
        assert_eq!(out, vec!["a\n\nb".to_string()]);
        assert!(b.repack::<&str>(&[], 100).is_empty());
        assert!(b.repack(&["  ", "\n"], 100).is_empty());
    }
}
