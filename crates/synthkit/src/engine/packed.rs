//! The requests of one packed level (a tree level, a map or a reduce level): a level's
//! texts packed into as few prompts as fit, built one at a time as they are asked for.

use std::sync::Arc;

use serde_json::Value;

use super::Job;
use super::fanout::RequestSource;
use super::origins::Sourced;
use crate::error::SynthError;
use crate::mode::{ResponseMode, Step};
use crate::model::{ModelRequest, StepInfo};
use crate::prompt::PromptTemplate;
use crate::text::ChunkCursor;

/// The requests of one level over `source`'s texts, each a `template` prompt of at most
/// `size` context tokens, tagged with the nodes its piece holds; steps are numbered
/// `(level, 0)`, `(level, 1)`, ... in packing order.
pub(crate) struct PackedLevel<'a> {
    job: &'a Job,
    template: &'a PromptTemplate,
    schema: Option<Arc<Value>>,
    size: usize,
    source: &'a Sourced,
    cursor: ChunkCursor<'a>,
    mode: ResponseMode,
    step: Step,
    level: u32,
    index: usize,
}

/// What a level's steps are: their mode, step and level.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LevelStep {
    pub(crate) mode: ResponseMode,
    pub(crate) step: Step,
    pub(crate) level: u32,
}

impl<'a> PackedLevel<'a> {
    /// The level of `source` packed into `template` prompts of `size` context tokens;
    /// `schema`: the replies' JSON schema, if any.
    pub(crate) fn new(
        job: &'a Job,
        template: &'a PromptTemplate,
        schema: Option<Arc<Value>>,
        size: usize,
        source: &'a Sourced,
        at: LevelStep,
    ) -> Self {
        Self {
            job,
            template,
            schema,
            size,
            source,
            cursor: job.budget().cursor(source.text()),
            mode: at.mode,
            step: at.step,
            level: at.level,
            index: 0,
        }
    }
}

impl RequestSource for PackedLevel<'_> {
    async fn next_request(&mut self) -> Result<Option<ModelRequest>, SynthError> {
        let step = StepInfo::new(self.mode, self.step).at(self.level, self.index);
        self.index += 1;
        let next = self
            .job
            .next_request(
                &mut self.cursor,
                self.template,
                "context_str",
                self.size,
                step,
                self.schema.clone(),
            )
            .await?;
        let text = self.cursor.text();
        Ok(next.map(|(request, piece)| self.source.tag(request, piece.text(text))))
    }
}
