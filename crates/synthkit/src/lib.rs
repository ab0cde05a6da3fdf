#![doc = include_str!("../../../README.md")]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

pub mod call;
pub mod error;
pub mod model;
pub mod node;
pub mod prompt;
pub mod response;
pub mod synth;
pub mod text;

pub use call::{Observer, SynthEvent, UsageTotals};
pub use error::SynthError;
pub use node::Node;
pub use response::{Response, StreamingResponse, Truncation};
pub use synth::{ResponseMode, SynthesisInput, Synthesizer, SynthesizerBuilder, Templates};
