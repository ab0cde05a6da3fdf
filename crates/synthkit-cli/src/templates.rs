//! The prompt templates of `--qa-template`, `--refine-template` and `--summary-template`
//! (`ask`, `summarize`, `eval`): read from their files, and set with `--system-prompt` on
//! a synthesizer's builder.

use std::path::PathBuf;

use anyhow::Result;
use synthkit::SynthesizerBuilder;
use synthkit::prompt::{PromptTemplate, TemplateKind};

use crate::error::usage;
use crate::flags::PromptArgs;
use crate::input;

/// Custom templates read from `--qa-template`, `--refine-template`, `--summary-template`.
#[derive(Debug, Clone, Default)]
pub struct CustomTemplates {
    qa: Option<PromptTemplate>,
    refine: Option<PromptTemplate>,
    summary: Option<PromptTemplate>,
}

impl CustomTemplates {
    /// Reads the template files named in `prompts`.
    pub fn read(prompts: &PromptArgs) -> Result<Self> {
        let read = |path: &Option<PathBuf>, kind: TemplateKind| -> Result<Option<PromptTemplate>> {
            let Some(p) = path else { return Ok(None) };
            let bytes = std::fs::read(p).map_err(|e| {
                usage(format!(
                    "cannot read the {kind} template `{}`: {e}",
                    p.display()
                ))
            })?;
            Ok(Some(PromptTemplate::completion(
                kind,
                input::decode(bytes, &p.display().to_string()),
            )))
        };
        Ok(Self {
            qa: read(&prompts.qa_template, TemplateKind::Qa)?,
            refine: read(&prompts.refine_template, TemplateKind::Refine)?,
            summary: read(&prompts.summary_template, TemplateKind::Summary)?,
        })
    }

    /// `builder` with these templates and `system_prompt`, where given.
    pub fn apply(
        &self,
        mut builder: SynthesizerBuilder,
        system_prompt: Option<&str>,
    ) -> SynthesizerBuilder {
        if let Some(sp) = system_prompt {
            builder = builder.system_prompt(sp.to_string());
        }
        if let Some(t) = &self.qa {
            builder = builder.qa_template(t.clone());
        }
        if let Some(t) = &self.refine {
            builder = builder.refine_template(t.clone());
        }
        if let Some(t) = &self.summary {
            builder = builder.summary_template(t.clone());
        }
        builder
    }
}
