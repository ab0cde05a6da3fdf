//! Prompts: templates, our default prompts, and the prompt budget.

pub mod budget;
pub mod defaults;
pub mod template;

pub use budget::{BudgetError, PromptBudget};
pub use template::{
    ChatMessage, PromptTemplate, RenderedPrompt, Role, TemplateError, TemplateKind,
};
