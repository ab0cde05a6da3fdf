//! The one conversion from flags to built things, as ripgrep's `HiArgs`: what several
//! verbs build from the same flags is built here, once, so that `ask`, `eval`, `batch`
//! and `serve` cannot drift apart in how they read them.
//!
//! - [`model`]: the model setup (backend, counting, key rule) and the stack around it;
//! - [`synthesis`]: the options of one synthesis, for `ask`, `summarize` and `eval`;
//! - [`cost`]: the prices and the cost cap.
//!
//! This tier imports `flags` and the libraries, never a service or a verb.

pub mod cost;
pub mod model;
pub mod synthesis;

pub use cost::CostSettings;
pub use model::{StackFlags, check_key, connect_error, model_setup, stack_options};
pub use synthesis::SynthesisSettings;
