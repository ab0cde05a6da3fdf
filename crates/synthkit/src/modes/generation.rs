//! `generation`: one call with the query alone (the simple template); the nodes are only
//! sources. Zero nodes still make the call.

use crate::engine::{FinalHow, Job, Outcome};
use crate::error::SynthError;
use crate::mode::{ResponseMode, Step};
use crate::model::StepInfo;
use crate::prompt::TemplateKind;

pub(crate) async fn run(job: &Job) -> Result<Outcome, SynthError> {
    let template = job.template(TemplateKind::Simple);
    let schema = job.output_schema();
    let overhead = job.overhead(&template, schema.as_deref());
    job.budget()
        .available_context(TemplateKind::Simple, overhead)?;
    let request = job
        .request(
            &template,
            &[],
            StepInfo::new(ResponseMode::Generation, Step::Generate),
            schema.clone(),
        )
        .await?;
    let how = FinalHow::for_schema(schema.as_deref());
    Ok(Outcome::final_call(request, how))
}
