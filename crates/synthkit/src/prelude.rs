//! What most programs need, in one import.
//!
//! ```
//! use synthkit::prelude::*;
//! use synthkit::testing::ScriptedModel;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let model = ScriptedModel::constant(ModelInfo::new("demo"), "Every six months.");
//! let synth = Synthesizer::builder(std::sync::Arc::new(model))
//!     .mode(ResponseMode::Compact)
//!     .build()?;
//! let nodes = vec![Node::new("m", "The mirror is cleaned every six months.")];
//! let response: Response = synth.synthesize("How often is the mirror cleaned?", nodes).await?;
//! assert_eq!(response.text, "Every six months.");
//! # Ok::<(), SynthError>(())
//! # }).unwrap();
//! ```

#[cfg(feature = "anthropic")]
pub use crate::backend::anthropic::AnthropicConfig;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub use crate::backend::connect::Connect;
#[cfg(feature = "openai")]
pub use crate::backend::openai::OpenAiConfig;
pub use crate::error::SynthError;
pub use crate::layer::stack::ModelStack;
pub use crate::mode::ResponseMode;
pub use crate::model::{LanguageModel, ModelInfo};
pub use crate::node::Node;
pub use crate::observe::{Observer, SynthEvent};
pub use crate::prompt::PromptTemplate;
pub use crate::response::{Response, StreamingResponse};
pub use crate::synth::{SynthesisInput, Synthesizer, SynthesizerBuilder};
