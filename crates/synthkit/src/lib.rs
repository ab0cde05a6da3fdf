#![doc = include_str!("../README.md")]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

pub mod backend;
pub mod citation;
pub(crate) mod engine;
pub mod error;
pub mod layer;
pub mod mode;
pub mod model;
pub(crate) mod modes;
pub mod node;
pub mod observe;
pub mod options;
pub mod prompt;
pub mod response;
pub mod schema;
pub mod secret;
pub mod synth;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;

pub use citation::{Citation, Citations};
pub use engine::CallDoor;
pub use error::SynthError;
pub use mode::{ResponseMode, Step};
pub use node::{Node, NodeJsonError};
pub use observe::{CallReport, Observer, OnTruncation, SynthEvent, UsageTotals};
pub use options::{Concurrency, Templates};
pub use response::{Response, StreamingResponse, Truncation};
pub use synth::{AnswerFiltering, SynthesisInput, Synthesizer, SynthesizerBuilder};
