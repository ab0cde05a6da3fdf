//! What the response-mode suites share: the scripted model's window, a model answering
//! with its template's kind, the template kinds a model was sent, and synthesizers in a
//! mode over a scripted model.

use std::sync::Arc;

use synthkit::model::{ModelError, ModelInfo, ModelRequest};
use synthkit::prompt::TemplateKind;
use synthkit::testing::ScriptedModel;
use synthkit::{ResponseMode, Synthesizer, SynthesizerBuilder};

use crate::common::fixtures::nodes;

/// The scripted models' window: 4096 tokens, 256 of them for the answer.
pub fn info() -> ModelInfo {
    crate::common::fixtures::scripted(4096, 256)
}

/// A scripted answer naming the template kind of its request ("qa answer", ...).
pub fn echo_kind(r: &ModelRequest) -> Result<String, ModelError> {
    Ok(format!("{} answer", r.source().unwrap().kind))
}

/// Asserts the template kinds of the model's requests, in order.
#[track_caller]
pub fn assert_kinds(model: &ScriptedModel, expected: &[TemplateKind]) {
    let requests = model.requests();
    let kinds: Vec<_> = requests.iter().map(|r| r.source().unwrap().kind).collect();
    assert_eq!(kinds, expected);
}

/// A synthesizer in `mode` over `model`, with the default settings.
pub fn synth(model: &ScriptedModel, mode: ResponseMode) -> Synthesizer {
    synth_with(model, mode, |b| b)
}

/// A synthesizer in `mode` over `model`, with what `configure` sets.
pub fn synth_with(
    model: &ScriptedModel,
    mode: ResponseMode,
    configure: impl FnOnce(SynthesizerBuilder) -> SynthesizerBuilder,
) -> Synthesizer {
    let builder = Synthesizer::builder(Arc::new(model.clone())).mode(mode);
    configure(builder).build().unwrap()
}

/// The answer of a synthesis in `mode` over `model`, to `query` with one node per text.
pub async fn answer(
    model: &ScriptedModel,
    mode: ResponseMode,
    query: &str,
    texts: &[&str],
) -> synthkit::Response {
    synth(model, mode)
        .synthesize(query, nodes(texts))
        .await
        .unwrap()
}
