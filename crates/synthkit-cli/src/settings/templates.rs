//! The prompt templates of `--qa-template`, `--refine-template` and `--summary-template`
//! (`ask`, `summarize`, `eval`), read from their files.

use std::path::PathBuf;

use anyhow::Result;
use synthkit::prompt::{PromptTemplate, TemplateKind};

use synthkit_documents::decode::decode_always;

use crate::flags::{PromptArgs, usage};
use crate::say::warn;

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
                decode(&bytes, &p.display().to_string()),
            )))
        };
        Ok(Self {
            qa: read(&prompts.qa_template, TemplateKind::Qa)?,
            refine: read(&prompts.refine_template, TemplateKind::Refine)?,
            summary: read(&prompts.summary_template, TemplateKind::Summary)?,
        })
    }

    /// The templates read, to lay over the defaults ([`synthkit::SynthesisOptions::templates`]).
    pub fn list(&self) -> Vec<PromptTemplate> {
        [&self.qa, &self.refine, &self.summary]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }
}

/// `bytes` as text, decoded as every file read is (a legacy 8-bit file, `name`, named in
/// a warning).
pub fn decode(bytes: &[u8], name: &str) -> String {
    let decoded = decode_always(bytes);
    if let Some(n) = &decoded.note {
        warn(&format!("{name} {n}"));
    }
    decoded.text
}
