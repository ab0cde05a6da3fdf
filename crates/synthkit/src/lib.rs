#![doc = include_str!("../../../README.md")]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

pub mod backend;
pub mod call;
pub mod citation;
pub mod documents;
pub mod error;
pub mod layer;
pub mod mode;
pub mod model;
pub mod node;
pub mod prompt;
pub mod response;
pub mod schema;
pub mod secret;
pub mod synth;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;

pub use call::{CallDoor, Observer, SynthEvent, UsageTotals};
pub use citation::{Citation, Citations};
pub use error::SynthError;
pub use mode::{ResponseMode, Step};
pub use node::{Node, NodeJsonError};
pub use response::{Response, StreamingResponse, Truncation};
pub use synth::{
    AnswerFiltering, Concurrency, OnTruncation, SynthesisInput, Synthesizer, SynthesizerBuilder,
    Templates,
};
