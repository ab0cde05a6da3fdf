//! The one conversion from flags to built things, as ripgrep's `HiArgs`: what several
//! verbs build from the same flags is built here, once, so that `ask`, `eval`, `batch`
//! and `serve` cannot drift apart in how they read them.
//!
//! - [`model`]: the model setup (backend, counting, key rule) and the stack around it;
//! - [`synthesis`]: the options of one synthesis, for `ask`, `summarize` and `eval`;
//! - [`cost`]: the prices and the cost cap;
//! - [`checks`]: the answer's checks, a verb's defaults then the flags;
//! - [`templates`]: the template files, read;
//! - [`run`]: what one `ask` or `summarize` runs, all of the above and the sources,
//!   guards and output, so that the verb reads no flag;
//! - [`batch`] and [`eval`]: what one `batch` and one `eval` run, likewise;
//! - `serve`: what one `serve` runs (with the `serve` feature);
//! - [`text`]: what `tokens`, `split` and `report` run.
//!
//! This tier imports `flags`, the leaf `say` and the libraries, never a service or a verb.

pub mod batch;
pub mod checks;
pub mod cost;
pub mod eval;
pub mod model;
pub mod run;
#[cfg(feature = "serve")]
pub mod serve;
pub mod synthesis;
pub mod templates;
pub mod text;

pub use batch::BatchRun;
pub use eval::EvalRun;
pub use model::{StackFlags, check_key, connect_error, model_setup, stack_options};
pub use run::SynthRun;
#[cfg(feature = "serve")]
pub use serve::ServeRun;
