//! Placeholder for default prompts.
