//! Placeholder for the budget.
#![allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error("x")]
    X,
}
#[derive(Debug, Clone)]
pub struct PromptBudget;
