//! The options of one synthesis from the flags of `ask`, `summarize` or `eval`: the one
//! mapping of those flags to [`SynthesisOptions`], so that eval measures what `ask` runs
//! (the same window rules, citation rule, truncation policy, thinking reserve and vision).

use std::path::Path;

use anyhow::Result;
use synthkit::model::ModelInfo;
use synthkit::prompt::{PromptBudget, PromptTemplate};
use synthkit::{
    AnswerFiltering, CitationStyle, Concurrency, OnTruncation, ResponseMode, SynthesisOptions,
};
use synthkit_frontend::{AnswerChecks, BuiltModel};

use crate::flags::{EvalArgs, SynthArgs, TruncationPolicy, WindowArgs, usage};

/// The largest `--output-schema` file read: 1 MiB.
pub const MAX_OUTPUT_SCHEMA_BYTES: u64 = 1 << 20;

/// What the flags ask of every synthesis of a run, whatever its mode.
#[derive(Debug, Clone)]
pub struct SynthesisSettings {
    /// `--overlap`, `--max-prompt-tokens`, `--thinking-reserve`, `--on-truncation`.
    pub window: WindowArgs,
    /// `--concurrency`: calls in flight of one synthesis.
    pub concurrency: Option<usize>,
    /// `--structured-filtering`.
    pub structured_filtering: bool,
    /// `--cite` / `--cite-quotes`: the markers' style, `None` without them.
    pub cite: Option<CitationStyle>,
    /// Whether the response carries its steps (`--steps`, not with `--plan`).
    pub return_steps: bool,
    /// `--system-prompt`.
    pub system_prompt: Option<String>,
    /// `--not-in-sources`.
    pub not_in_sources: Option<String>,
    /// `--vision` / `--no-vision`.
    pub vision: Option<bool>,
    /// `--escalate[=N]`.
    pub escalate: Option<u32>,
    /// `--output-schema`, read and checked.
    pub output_schema: Option<serde_json::Value>,
}

impl SynthesisSettings {
    /// The settings of `ask` and `summarize`: `--output-schema` read and checked, and
    /// `--escalate` with `--stream` refused.
    pub fn of_synth(args: &SynthArgs) -> Result<Self> {
        if args.escalation.escalate.is_some() && args.stream {
            return Err(usage(
                "--escalate judges a whole answer before it is shown: drop --stream or --escalate",
            ));
        }
        Ok(Self {
            window: args.window.clone(),
            concurrency: args.concurrency,
            structured_filtering: args.structured_filtering,
            cite: args.cites().then(|| args.citation_style()),
            return_steps: !args.dry_run.plan && args.report.steps,
            system_prompt: args.prompts.system_prompt.clone(),
            not_in_sources: args.not_in_sources.clone(),
            vision: args.answering.model_args.vision_override(),
            escalate: args.escalation.escalate,
            output_schema: args
                .output_schema
                .as_deref()
                .map(read_output_schema)
                .transpose()?,
        })
    }

    /// The settings of `eval`: its runs answer as `ask` does with the same flags.
    pub fn of_eval(args: &EvalArgs) -> Self {
        Self {
            window: args.window.clone(),
            concurrency: args.concurrency,
            structured_filtering: false,
            cite: args.cites().then(|| args.citation_style()),
            return_steps: false,
            system_prompt: args.prompts.system_prompt.clone(),
            not_in_sources: None,
            vision: args.answering.model_args.vision_override(),
            escalate: args.escalation.escalate,
            output_schema: None,
        }
    }

    /// Whether the model sees numbered sources: with `--cite`, and for the extractive
    /// backend (it cites what it quotes) unless the answer is JSON (`--output-schema`).
    pub fn shows_citations(&self, backend: &BuiltModel) -> bool {
        self.cite.is_some() || (backend.is_extractive() && self.output_schema.is_none())
    }

    /// The options of a synthesis in `mode` by the model `info` describes (the backend's,
    /// or a planner standing in for it), with `templates` and `checks`.
    ///
    /// Citations are on with `--cite`, and always with the extractive backend, which
    /// cites exactly: without `--cite` its markers are removed from the answer, and the
    /// citations still say which sources its sentences came from.
    pub fn options(
        &self,
        backend: &BuiltModel,
        info: &ModelInfo,
        mode: ResponseMode,
        templates: Vec<PromptTemplate>,
        checks: &AnswerChecks,
    ) -> Result<SynthesisOptions> {
        let window = &self.window;
        let budget = PromptBudget::new(info.context_window, info.num_output)
            .map_err(|e| usage(format!("{e} (see --context-window and --num-output)")))?
            .with_chunk_overlap_ratio(window.overlap)
            .map_err(|e| usage(format!("{e} (see --overlap)")))?
            .with_tokenizer(backend.budget_tokenizer.clone())
            .with_max_prompt_tokens(window.max_prompt_tokens)
            .map_err(|e| usage(format!("{e} (see --max-prompt-tokens)")))?;
        let mut options = SynthesisOptions::default();
        options.mode = Some(mode);
        options.budget = Some(budget);
        options.concurrency = Some(Concurrency::for_server(
            self.concurrency,
            backend.server_slots,
        ));
        options.answer_filtering = Some(if self.structured_filtering {
            AnswerFiltering::on()
        } else {
            AnswerFiltering::Off
        });
        options.on_truncation = Some(match window.on_truncation {
            TruncationPolicy::Warn => OnTruncation::Warn,
            TruncationPolicy::Error => OnTruncation::Error,
        });
        options.citations = Some(self.shows_citations(backend));
        options.citation_markers = Some(self.cite.is_some());
        options.citation_style = Some(self.cite.unwrap_or_default());
        options.return_steps = Some(self.return_steps);
        options.system_prompt = self.system_prompt.clone();
        options.templates = templates;
        options.thinking_reserve = Some(window.thinking_reserve);
        options.not_in_sources_answer = self.not_in_sources.clone();
        options.vision = self.vision;
        checks.set(&mut options);
        options.escalation = self
            .escalate
            .map(|first| Some(synthkit::Escalation::new(first as usize)));
        options.output_schema = self.output_schema.clone();
        Ok(options)
    }
}

/// `--output-schema FILE`: its JSON, checked as a schema (shape and cost) before any call.
fn read_output_schema(path: &Path) -> Result<serde_json::Value> {
    let cannot_read = |e: &dyn std::fmt::Display| {
        usage(format!(
            "cannot read --output-schema `{}`: {e}",
            path.display()
        ))
    };
    let file = std::fs::File::open(path).map_err(|e| cannot_read(&e))?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_OUTPUT_SCHEMA_BYTES + 1),
        &mut bytes,
    )
    .map_err(|e| cannot_read(&e))?;
    if bytes.len() as u64 > MAX_OUTPUT_SCHEMA_BYTES {
        return Err(usage(format!(
            "--output-schema `{}` is over 1 MiB: a schema that large is not one a model can follow",
            path.display()
        )));
    }
    let schema: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        usage(format!(
            "--output-schema `{}` is not JSON: {e}",
            path.display()
        ))
    })?;
    synthkit::schema::CompiledSchema::new(schema.clone())
        .map_err(|e| usage(format!("--output-schema `{}`: {e}", path.display())))?;
    Ok(schema)
}
