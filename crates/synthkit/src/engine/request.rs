//! The requests of a job: prompts rendered from templates and sources, counted (locally,
//! then by the server's counter where it has one, the local count calibrated by what the
//! server said) and fitted to the budget.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::citation::{self, label_before, label_lines, numbers_in};
use crate::error::SynthError;
use crate::model::{ModelError, ModelRequest, StepInfo};
use crate::prompt::{
    BudgetError, PromptPrefix, PromptSource, PromptTemplate, RenderedPrompt, TemplateKind, VARYING,
    defaults,
};
use crate::text::{Chunk, ChunkCursor};

impl Job {
    pub(super) fn vars<'a>(&'a self, vars: &'a [(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut all: Vec<(&str, &str)> = vars.to_vec();
        all.extend(self.variables.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        all
    }

    pub(super) fn finish_prompt(
        &self,
        kind: TemplateKind,
        rendered: RenderedPrompt,
        schema: Option<&Value>,
    ) -> RenderedPrompt {
        let rendered = match schema {
            None => rendered,
            Some(schema) => {
                let suffix = defaults::json_instructions(schema);
                match rendered {
                    RenderedPrompt::Text(t) => RenderedPrompt::Text(format!("{t}\n\n{suffix}")),
                    RenderedPrompt::Chat(m) => RenderedPrompt::Chat(append_to_last(m, &suffix)),
                }
            }
        };
        // Citation instructions go on every call that shows sources (all but
        // generation's query-only prompt): at the end of a chat's last message, where
        // small chat models heed them (as a system message they were ignored), and before
        // a completion prompt, whose end is the answer's cue.
        let instructions = match self.s.citation_style {
            citation::CitationStyle::Quotes => citation::QUOTE_CITATION_INSTRUCTIONS,
            _ => defaults::CITATION_INSTRUCTIONS,
        };
        let rendered = match rendered {
            RenderedPrompt::Chat(m) if self.cites(kind) => {
                RenderedPrompt::Chat(append_to_last(m, instructions))
            }
            RenderedPrompt::Text(t) if self.cites(kind) => {
                RenderedPrompt::Text(format!("{instructions}\n\n{t}"))
            }
            other => other,
        };
        rendered.with_system_prompt(self.s.system_prompt.as_deref())
    }

    /// Whether prompts of `kind` carry citation instructions.
    pub(super) fn cites(&self, kind: TemplateKind) -> bool {
        self.ledger.is_some() && kind != TemplateKind::Simple
    }

    /// Tokens of `template` before any context: empty variables, extra variables, the
    /// system prompt and the JSON instructions of a structured call.
    pub(crate) fn overhead(&self, template: &PromptTemplate, schema: Option<&Value>) -> usize {
        let vars = self.vars(&[]);
        let rendered = template.render_empty(&vars);
        self.budget()
            .count_prompt(&self.finish_prompt(template.kind(), rendered, schema))
    }

    /// The context room beside `template` (minus the reference's padding of 5), under the
    /// job's current limit.
    pub(crate) fn room(
        &self,
        template: &PromptTemplate,
        schema: Option<&Value>,
    ) -> Result<usize, SynthError> {
        let overhead = self.overhead(template, schema);
        let shrink = self.shrink();
        let kind = template.kind();
        let padding = crate::prompt::budget::DEFAULT_PADDING;
        self.budget()
            .chunk_size_for(kind, overhead + shrink, 1, padding)
            .map_err(|e| {
                // Blame what made the fixed part too large: the template only when neither
                // a carried answer nor the server's smaller room is part of it.
                let answer_tokens = template
                    .partial_value("existing_answer")
                    .map_or(0, |a| self.budget().tokenizer().count(a));
                if answer_tokens == 0 && shrink == 0 {
                    return SynthError::Budget(e);
                }
                SynthError::NoRoomForContext {
                    kind,
                    budget: self.budget().max_prompt_tokens(),
                    template_tokens: overhead.saturating_sub(answer_tokens),
                    answer_tokens,
                    server_shrink: shrink,
                }
            })
    }

    /// The prompt for `template` with `vars`, the extra variables, JSON instructions and
    /// the system prompt.
    pub(super) fn render(
        &self,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        schema: Option<&Value>,
    ) -> RenderedPrompt {
        let prompt = self.finish_prompt(template.kind(), template.render(&self.vars(vars)), schema);
        match &self.images {
            Some(table) => table.attach(prompt),
            None => prompt,
        }
    }

    /// The exact count of `prompt` with the model's counter; `None` without one. A count
    /// that keeps failing stops the run ([`SynthError::Count`]): counts never switch to
    /// another tokenizer in the middle of a run.
    pub(super) async fn count_exact(
        &self,
        prompt: &RenderedPrompt,
    ) -> Result<Option<usize>, SynthError> {
        let Some(counter) = &self.s.counter else {
            return Ok(None);
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match counter.count_prompts(std::slice::from_ref(prompt)).await {
                Ok(counts) => {
                    return match counts.first() {
                        Some(&n) => Ok(Some(n)),
                        None => Err(SynthError::Count {
                            counter: counter.name().to_string(),
                            source: ModelError::Malformed("no count for the prompt".into()),
                        }),
                    };
                }
                Err(e) if e.is_transient() && attempt < MAX_COUNT_ATTEMPTS => {
                    tracing::warn!(target: "synthkit", counter = counter.name(), attempt, error = %e, "counting a prompt failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
                Err(source) => {
                    return Err(SynthError::Count {
                        counter: counter.name().to_string(),
                        source,
                    });
                }
            }
        }
    }

    /// A request for `template` with `vars`, counted exactly.
    pub(crate) async fn request(
        &self,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> Result<ModelRequest, SynthError> {
        let prompt = self.render(template, vars, schema.as_deref());
        let prompt_tokens = match self.count_exact(&prompt).await? {
            Some(n) => n,
            None => self.budget().count_prompt(&prompt),
        };
        Ok(self.request_from(prompt, prompt_tokens, template, vars, step, schema))
    }

    /// A request from a prompt already rendered and counted.
    pub(super) fn request_from(
        &self,
        prompt: RenderedPrompt,
        prompt_tokens: usize,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> ModelRequest {
        let all = self.vars(vars);
        let mut variables: Vec<(String, String)> = Vec::with_capacity(all.len() + 2);
        if let Some(q) = template.partial_value("query_str") {
            variables.push(("query_str".to_string(), q.to_string()));
        }
        for (k, v) in all {
            if !variables.iter().any(|(n, _)| n == k) {
                variables.push((k.to_string(), v.to_string()));
            }
        }
        if let Some(a) = template.partial_value("existing_answer") {
            variables.push(("existing_answer".to_string(), a.to_string()));
        }
        let prefix = self.prefix(template, vars, schema.as_deref());
        let request = ModelRequest::new(prompt)
            .with_schema(schema)
            .with_max_tokens(self.max_tokens())
            .with_prompt_tokens(prompt_tokens)
            .with_extension(step)
            .with_extension(PromptSource::new(template.kind(), variables));
        match prefix {
            Some(prefix) => request.with_extension(prefix),
            None => request,
        }
    }

    /// The part of `template`'s prompts that every call of it repeats (the system
    /// messages and the template text before the first value a synthesis fills), read
    /// from the prompt rendered with each filled variable and each of `vars` set to a
    /// marker ([`PromptPrefix`]). It only labels the request: the prompt sent and its
    /// count are those rendered above.
    fn prefix(
        &self,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        schema: Option<&Value>,
    ) -> Option<PromptPrefix> {
        let filled = template.kind().filled_variables().iter().copied();
        let varying: Vec<(&str, &str)> = filled
            .chain(vars.iter().map(|(name, _)| *name))
            .map(|name| (name, VARYING))
            .collect();
        let shape = template.render(&self.vars(&varying));
        let shape = self.finish_prompt(template.kind(), shape, schema);
        let tokenizer = self.budget().tokenizer();
        PromptPrefix::before_marker(&shape, VARYING, |text| tokenizer.count(text))
    }

    /// The next request from `cursor`: as much of its text as fits beside `template`
    /// under the job's limit, overlapping the previous piece by the budget's ratio, or
    /// `None` when the text is used up.
    ///
    /// The prompt is counted once, as a whole. With the model's exact counter the local
    /// tokenizer finds the piece (under a limit scaled by what earlier prompts showed of
    /// the two tokenizers) and the counter confirms the whole prompt; a prompt the counter
    /// finds too long is packed again, smaller.
    pub(crate) async fn next_request(
        &self,
        cursor: &mut ChunkCursor<'_>,
        template: &PromptTemplate,
        var: &str,
        size: usize,
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> Result<Option<(ModelRequest, Chunk)>, SynthError> {
        let limit = self.corrections.limit();
        if self.s.counter.is_none() {
            let next = self.fit_local(cursor, template, var, size, limit, step, schema);
            if let Some((request, _)) = &next {
                self.check_images(request, template, var, limit)?;
            }
            return Ok(next);
        }
        let ratio = self.calibration();
        let mut local_limit = scale(limit, ratio);
        for _ in 0..MAX_FIT_ATTEMPTS {
            let saved = cursor.clone();
            let local_size = scale(size, local_limit as f64 / limit.max(1) as f64).max(1);
            let Some((mut request, chunk)) = self.fit_local(
                cursor,
                template,
                var,
                local_size,
                local_limit,
                step,
                schema.clone(),
            ) else {
                return Ok(None);
            };
            let local = request.prompt_tokens;
            let exact = self.count_exact(&request.prompt).await?.unwrap_or(local);
            if exact > 0 && local > 0 {
                self.learn(local as f64 / exact as f64);
            }
            request.prompt_tokens = exact;
            if exact <= limit || chunk.oversized {
                self.check_images(&request, template, var, limit)?;
                return Ok(Some((request, chunk)));
            }
            // Too long by the exact count: pack this piece again, smaller.
            *cursor = saved;
            let scaled = scale(local, limit as f64 / exact as f64);
            local_limit = scaled
                .min(local.saturating_sub(1))
                .min(local_limit.saturating_sub(1));
            if local_limit == 0 {
                break;
            }
        }
        Err(BudgetError::PromptOverBudget {
            kind: template.kind(),
            tokens: limit + 1,
            budget: limit,
        }
        .into())
    }

    /// [`Job::next_request`] with the local tokenizer only, under `limit`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fit_local(
        &self,
        cursor: &mut ChunkCursor<'_>,
        template: &PromptTemplate,
        var: &str,
        size: usize,
        limit: usize,
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> Option<(ModelRequest, Chunk)> {
        let overlap = self.budget().overlap_for(size);
        let text = cursor.text();
        // With citations, a piece that starts inside a source starts with its label again.
        let labels = self.ledger.is_some() && step.level == 0;
        let labeled = |piece: &'_ str| -> Option<String> {
            if !labels {
                return None;
            }
            let offset = (piece.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
            label_before(text, offset).map(|n| format!("{}{piece}", citation::label(n)))
        };
        let mut fitted: Option<(RenderedPrompt, usize)> = None;
        let chunk = cursor.next_chunk_fitting(size, overlap, &mut |piece| {
            let full = labeled(piece);
            let shown = full.as_deref().unwrap_or(piece);
            let prompt = self.render(template, &[(var, shown)], schema.as_deref());
            let n = self.budget().count_prompt_till_limit(&prompt, limit)?;
            fitted = Some((prompt, n));
            Some(n)
        })?;
        let piece = chunk.text(text);
        let full = labeled(piece);
        let piece = full.as_deref().unwrap_or(piece);
        let (prompt, n) = match fitted {
            Some(f) if !chunk.oversized => f,
            _ => {
                let prompt = self.render(template, &[(var, piece)], schema.as_deref());
                let n = self.budget().count_prompt(&prompt);
                (prompt, n)
            }
        };
        let request = self.request_from(prompt, n, template, &[(var, piece)], step, schema);
        Some((request, chunk))
    }

    /// The source numbers `request` showed the model: label lines in a first-level
    /// context, markers in summaries and in the existing answer.
    pub(crate) fn shown_sources(&self, request: &ModelRequest) -> BTreeSet<u32> {
        let Some(ledger) = &self.ledger else {
            return BTreeSet::new();
        };
        let mut shown = BTreeSet::new();
        let variables = request.source().map(|s| s.variables.as_slice());
        for (name, value) in variables.unwrap_or_default() {
            match name.as_str() {
                "context_str" | "context_msg" if request.step().level == 0 => {
                    shown.extend(label_lines(value));
                }
                "context_str" | "context_msg" | "existing_answer" => {
                    shown.extend(numbers_in(value));
                }
                _ => {}
            }
        }
        let all = ledger.all();
        shown.retain(|n| all.contains(n));
        shown
    }

    /// An intermediate answer with the markers its prompt did not show removed.
    pub(crate) fn checked(&self, request: &ModelRequest, answer: String) -> String {
        match &self.ledger {
            Some(ledger) => ledger.check(self.shown_sources(request), &answer),
            None => answer,
        }
    }

    pub(super) fn calibration(&self) -> f64 {
        *self
            .calibration
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn learn(&self, local_per_exact: f64) {
        if local_per_exact.is_finite() && local_per_exact > 0.0 {
            *self
                .calibration
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = local_per_exact;
        }
    }
}
