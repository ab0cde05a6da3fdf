//! Prompts: templates, our default prompts, and the prompt budget.

pub mod budget;
pub mod defaults;
mod prefix;
mod source;
pub mod template;

pub use budget::{BudgetError, PromptBudget};
pub(crate) use prefix::VARYING;
pub use prefix::{PrefixKey, PromptPrefix};
pub use source::PromptSource;
pub use template::{
    ChatMessage, ContentPart, MAX_NAMED_VARIABLES, PromptImage, PromptTemplate, RenderedPrompt,
    Role, TemplateError, TemplateKind,
};
