//! Prompts: templates, our default prompts, and the prompt budget.

pub mod budget;
pub mod defaults;
mod source;
pub mod template;

pub use budget::{BudgetError, PromptBudget};
pub use source::PromptSource;
pub use template::{
    ChatMessage, MAX_NAMED_VARIABLES, PromptTemplate, RenderedPrompt, Role, TemplateError,
    TemplateKind,
};
