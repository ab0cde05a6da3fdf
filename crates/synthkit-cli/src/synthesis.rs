//! `ask` and `summarize`: gather nodes, build the synthesizer, answer (or plan), print.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, anyhow};
use futures::StreamExt;
use synthkit::layer::cost::CostCapped;
use synthkit::model::{LanguageModel, ModelError, TimeoutKind};
use synthkit::text::TokenTextSplitter;
use synthkit::{Node, Observer, Response, ResponseMode, SynthError, SynthesisInput, Synthesizer};
use synthkit_extractive::ExtractiveModel;

use crate::backend::{self, Backend};
use crate::error::usage;
use crate::flags::JsonFormat;
use crate::input;
use crate::observe::{Fanout, ModelTime};
use crate::output::{self, EXTRACTIVE_NOTE, note, warn};
use crate::pace;
use crate::plan::{self, Estimate};
use crate::progress::Progress;
use crate::settings::SynthRun;
use crate::settings::run::SourceSettings;
use crate::spinner::{Spinner, thousands};
use crate::trace::Trace;
use synthkit_frontend::AnswerChecks;
use synthkit_frontend::retrieval::chunks::{self, ChunkSource, Chunks};
use synthkit_frontend::retrieval::rank;

/// One synthesis of `ask` or `summarize`: the backend and the run (mode, query, options,
/// templates), the nodes given beside it. Its run, its estimate and its `--plan` build
/// their synthesizers from it, so that a plan mirrors the run.
#[derive(Clone)]
pub struct Synthesis<'a> {
    /// The backend whose model answers (or that a plan mirrors).
    pub backend: &'a Backend,
    /// What the flags ask for.
    pub run: &'a SynthRun<'a>,
    /// Evidence first and the policy for unsupported answers.
    pub checks: AnswerChecks,
}

impl<'a> Synthesis<'a> {
    /// The synthesis `run` asks for with `backend` (its checks those of the backend).
    pub fn new(backend: &'a Backend, run: &'a SynthRun<'a>) -> Self {
        Self {
            backend,
            run,
            checks: run.checks.for_backend(backend.backend),
        }
    }

    /// The synthesizer over `model` with these flags and templates, reporting to
    /// `observer`; a `dry_run` (one that plans, [`Synthesizer::plan`]) makes no spans.
    pub fn synthesizer(
        &self,
        model: Arc<dyn LanguageModel>,
        observer: Arc<dyn Observer>,
        dry_run: bool,
    ) -> Result<Synthesizer> {
        build_synthesizer(model, self, observer, dry_run)
    }

    /// Counts the calls this synthesis of `nodes` will make (no model call): [`plan::estimate`]
    /// with a dry run's synthesizer.
    pub async fn estimate(&self, nodes: Vec<Node>) -> Result<Estimate> {
        let synth = self.synthesizer(self.backend.model(), Arc::new(Fanout::default()), true)?;
        plan::estimate(&synth, self.run.query, nodes).await
    }

    /// `--plan`: plans the synthesis of `nodes` (no model call, the plan's steps on
    /// `trace`) and prints the plan.
    async fn dry_run(&self, nodes: Vec<Node>, trace: Option<Arc<Trace>>) -> Result<()> {
        let info = self.backend.model().info();
        let observer = trace.map(|t| t as Arc<dyn Observer>);
        let synth = self.synthesizer(self.backend.model(), Arc::new(Fanout::default()), true)?;
        let node_count = nodes.len();
        let input = SynthesisInput::new(self.run.query, nodes);
        let plan = synth.plan_observed(&input, observer).await.map_err(|e| {
            anyhow!(
                "planning failed, assuming every answer takes all {} output tokens: {e}",
                info.num_output
            )
        })?;
        let prices = self
            .run
            .cost
            .filter(|_| !self.backend.is_extractive())
            .map(|c| c.prices);
        plan::print(
            &plan,
            self.backend,
            &info,
            self.run.mode,
            node_count,
            &self.run.output,
            prices,
        )
    }
}

/// Builds a synthesizer for `model` (the backend's, or a planner standing in for it) with
/// the options of `synthesis` ([`SynthesisSettings::options`]: its flags, mode, templates
/// and answer checks).
pub fn build_synthesizer(
    model: Arc<dyn LanguageModel>,
    synthesis: &Synthesis<'_>,
    observer: Arc<dyn Observer>,
    dry_run: bool,
) -> Result<Synthesizer> {
    let run = synthesis.run;
    let options = run.synthesis.options(
        synthesis.backend,
        &model.info(),
        run.mode,
        run.templates.list(),
        &synthesis.checks,
    )?;
    // A dry run makes no spans: no trace shows calls that were never made.
    let builder = options
        .apply(Synthesizer::builder(model))
        .observer(observer)
        .spans(!dry_run);
    builder.build().map_err(|e| usage(e.to_string()))
}

/// Gathers the nodes: `--nodes`, then the files (split into nodes), then the best chunks
/// for `query` as `sources.top_k` says.
pub(crate) fn gather_nodes(
    sources: &SourceSettings,
    query: &str,
    backend: &Backend,
    spinner: &Spinner,
) -> Result<Vec<Node>> {
    let splitter = TokenTextSplitter::new(
        sources.chunk_size,
        sources.chunk_overlap,
        backend.split_tokenizer.clone(),
    )
    .map_err(|e| usage(format!("{e} (see --chunk-size and --chunk-overlap)")))?;
    let mut nodes = match &sources.nodes {
        Some(p) => input::read_nodes(p, sources.max_file_size)?,
        None => Vec::new(),
    };
    let mut from_folder = false;
    let mut images = Vec::new();
    let mut chunks = None;
    if sources.reads_files() {
        let source = ChunkSource {
            paths: &sources.paths,
            options: &sources.read,
            // `--nodes` are ranked with the files' chunks: all in memory.
            index_dir: sources
                .index_dir
                .as_deref()
                .filter(|_| sources.nodes.is_none()),
            splitter: &splitter,
            naming: "",
            rename: None,
            say: input::say(sources.quiet),
        };
        // No path: standard input, read as a file is (never through the index).
        let read = chunks::read_chunks(&source, spinner)?;
        from_folder = read.from_folder;
        let model = backend.model();
        let info = model.info();
        images = crate::images::image_nodes(
            &read.images,
            &sources.images,
            crate::images::VisionWord::of(
                sources.images.vision,
                backend.is_extractive(),
                info.vision,
            ),
            &info.name,
            sources.quiet,
        )?;
        if read.chunks.is_empty() && nodes.is_empty() && images.is_empty() {
            return Err(match read.names.as_slice() {
                [] => anyhow!("no text to work on: every file given was skipped"),
                [one] => anyhow!("no text to work on: {one} is empty"),
                many => anyhow!("no text to work on: {} are empty", many.join(", ")),
            });
        }
        chunks = Some(read.chunks);
    }
    // `--nodes` first, then the files' chunks: in memory, or still in the index.
    let total = nodes.len() + chunks.as_ref().map_or(0, Chunks::len);
    let indexed = match chunks {
        Some(Chunks::Memory(read)) => {
            nodes.extend(read);
            None
        }
        indexed => indexed,
    };
    let k = sources.top_k.keep(from_folder);
    // Ranked when the folder holds more than `k` chunks, or with --top-k: then a chunk
    // with no relevance to the question is never sent. A small folder goes whole. Images
    // (no text to rank) all go, after the text.
    if total == 0 {
        spinner.clear();
        return Ok(images);
    }
    if let Some(k) = k.filter(|&k| k < total || sources.top_k.given()) {
        spinner.set(format!("ranking {} chunks", thousands(total)));
        nodes = match indexed {
            Some(indexed) => indexed.top_k(query, k)?,
            None => rank::top_k(nodes, query, k),
        };
        if nodes.is_empty() {
            // Nothing to answer from: the synthesis of no nodes says the sources do not
            // answer (`answerable: false`, exit 0), as a retriever that found nothing.
            spinner.clear();
            note(sources.quiet, &rank::nothing_relevant(total));
            return Ok(images);
        }
        if !sources.top_k.given() && nodes.len() < total {
            note(
                sources.quiet,
                &format!(
                    "kept the {} chunks most relevant to the question of {} (--top-k N or --top-k all to change)",
                    nodes.len(),
                    thousands(total)
                ),
            );
        }
    } else if let Some(indexed) = indexed {
        nodes = indexed.into_nodes()?;
    }
    spinner.clear();
    nodes.extend(images);
    Ok(nodes)
}

/// Runs `ask` or `summarize` as `run` says.
pub async fn run(run: &SynthRun<'_>) -> Result<()> {
    let start = Instant::now();
    let (query, mode, out) = (run.query, run.mode, &run.output);
    let backend = backend::connect_with(run.stack).await?;
    // The extractive backend is free: no prices, no cap.
    let cost = run.cost.filter(|_| !backend.is_extractive());
    let spinner = Spinner::new(!out.quiet);
    let nodes = gather_nodes(&run.sources, query, &backend, &spinner)?;

    let trace = match &out.trace {
        Some(p) => Some(Arc::new(Trace::create(p, run.plan)?)),
        None => None,
    };
    let planned = Synthesis::new(&backend, run);
    if run.plan {
        let outcome = planned.dry_run(nodes, trace.clone()).await;
        if let Some(t) = &trace {
            t.finish()?;
        }
        return outcome;
    }

    let progress = Arc::new(Progress::new(!out.quiet));
    let guarded = !backend.is_extractive() && !run.guards.yes;
    // --max-cost is checked against the plan whatever --yes says.
    let capped = cost.and_then(|c| c.max_cost.map(|cap| (c.prices, cap)));
    let mut planned_calls = None;
    if (progress.draws() || guarded || capped.is_some()) && mode.calls_model() {
        // The bar's length and the size and cost checks: the calls counted up front with
        // the run's packing (no model call). If counting fails, the run reports the error
        // (a capped run is not started: its cost cannot be checked); the bar follows the
        // library.
        spinner.set(format!(
            "planning the calls over {} chunks",
            thousands(nodes.len())
        ));
        let counted = planned.estimate(nodes.clone()).await;
        spinner.clear();
        match counted {
            Ok(estimate) => {
                if guarded && plan::too_large(&estimate, &run.guards) {
                    plan::print_refusal(&backend, mode, &estimate)?;
                    return Err(usage(plan::refusal_message(&estimate, &run.guards)));
                }
                if let Some((prices, cap)) = &capped
                    && plan::cost_bound(&estimate, prices) > *cap
                {
                    plan::print_refusal(&backend, mode, &estimate)?;
                    return Err(usage(plan::cost_refusal_message(&estimate, prices, *cap)));
                }
                progress.fix_total(&estimate);
                planned_calls = Some(estimate);
            }
            Err(e) if capped.is_some() => {
                return Err(anyhow!(
                    "not started: --max-cost needs the run's plan, and counting its calls failed: {e:#}"
                ));
            }
            Err(_) => {}
        }
    }
    let model_time = Arc::new(ModelTime::default());
    let mut fanout = Fanout::default();
    fanout.push(progress.clone());
    fanout.push(model_time.clone());
    if let Some(t) = &trace {
        fanout.push(t.clone());
    }
    // A question that will keep the user waiting is told so once, with what would help:
    // a small window from the plan now, else a slow server after the first call.
    let ranked = run.sources.top_k.folder.is_some();
    if let Some(estimate) = planned_calls.filter(|_| ranked && !backend.is_extractive()) {
        let window = backend.model().info().context_window;
        let checks = &planned.checks;
        let evidence = checks.evidence.then_some(checks.evidence_tokens);
        match pace::window_hint(&estimate, window, nodes.len(), evidence) {
            Some(line) => note(out.quiet, &line),
            None => fanout.push(Arc::new(pace::SlowServer::new(
                estimate,
                nodes.len(),
                evidence,
                out.quiet,
                progress.clone(),
            ))),
        }
    }
    // The report's and the trace's calls, kept when the run fails too (what was called
    // before the failure).
    let failure_record = (trace.is_some() || out.report.is_some()).then(|| {
        let recorder = Synthesizer::builder(backend.model())
            .citations(run.synthesis.shows_citations(&backend))
            .step_recorder(&nodes);
        (Arc::new(recorder), nodes.clone())
    });
    if let Some((recorder, _)) = &failure_record {
        fanout.push(recorder.clone());
    }
    // Every call is held to --max-cost as it goes out (the plan is an upper bound; this
    // is the promise).
    let model: Arc<dyn LanguageModel> = match cost.and_then(|c| c.ledger()) {
        Some(ledger) => Arc::new(CostCapped::new(backend.model(), ledger)),
        None => backend.model(),
    };
    let synth = planned.synthesizer(model, Arc::new(fanout), false)?;
    if backend.is_extractive() && mode.calls_model() {
        note(out.quiet, EXTRACTIVE_NOTE);
    }

    let outcome = if out.stream {
        stream_answer(&synth, run, nodes, &progress).await
    } else {
        let response = synth.synthesize(query, nodes).await;
        progress.clear();
        response.map_err(|e| explain(e, run))
    };
    // Priced before anything shows it (the report, the trace, --json, the note).
    let outcome = outcome.map(|mut r| {
        if let Some(c) = &cost {
            c.prices.price(&mut r.usage);
        }
        r
    });
    let grounded_answer = outcome
        .as_ref()
        .ok()
        .and_then(|r| grounded(r, backend.is_extractive(), mode));
    let facts = crate::pages::RunFacts {
        backend: &backend,
        query,
        mode,
        budget: synth.budget(),
        grounded: grounded_answer,
        total_ms: start.elapsed().as_secs_f64() * 1000.0,
    };
    let run_record = failure_record.map(|(recorder, nodes)| {
        let error;
        let ended = match &outcome {
            Ok(response) => Ok(response),
            Err(e) => {
                error = format!("{e:#}");
                Err(error.as_str())
            }
        };
        crate::pages::record(ended, &nodes, &recorder, &facts)
    });
    if let Some(t) = &trace {
        if let Some(run) = &run_record {
            t.write_run(run);
        }
        t.finish()?;
    }
    if let Some(n) = backend::cache_note(&backend) {
        note(out.quiet, &n);
    }
    if let (Some(path), Some(record)) = (&out.report, &run_record) {
        crate::pages::write(path, record)?;
        let what = if outcome.is_ok() {
            "report"
        } else {
            "report of the failed run (its calls so far)"
        };
        note(
            out.quiet,
            &format!(
                "{what} written to {} (open it in a browser)",
                path.display()
            ),
        );
    }
    let response = outcome?;
    if let Some(t) = &response.truncation {
        warn(&format!(
            "{mode} cut {} tokens of context to fit one prompt (from {}); use tree_summarize or compact to read everything",
            t.dropped_tokens,
            t.dropped_node_ids.join(", ")
        ));
    }
    let style = output::SourceStyle::of(&response, out.cites);
    let stdout = io::stdout();
    if out.json && out.format == JsonFormat::Llamaindex {
        output::write_json(&mut stdout.lock(), &output::report_llamaindex(&response))?;
    } else if out.json {
        let info = output::ReportInfo {
            mode,
            backend: backend.backend,
            model: &backend.model_name(),
            query,
            total_ms: start.elapsed().as_secs_f64() * 1000.0,
            model_ms: model_time.millis(),
            grounded: grounded_answer,
        };
        let mut report = output::report_json(&response, &info);
        if out.steps
            && let Some(obj) = report.fields.as_object_mut()
        {
            obj.insert("steps".into(), serde_json::json!(response.steps));
        }
        backend::report_cache(&mut report.fields, &backend);
        backend::report_concurrency(&mut report.fields, &backend);
        output::write_json(&mut stdout.lock(), &report)?;
    } else if !out.stream {
        output::write_text(&mut stdout.lock(), &response, style)?;
    }
    if let Some(n) = backend::concurrency_note(&backend) {
        note(out.quiet, &n);
    }
    if let Some(c) = &cost {
        note(out.quiet, &output::cost_note(&c.prices, &response.usage));
    }
    if response.usage.truncated_calls > 0 && !out.quiet {
        warn(&output::truncated_calls_warning(
            response.usage.truncated_calls,
            synth.budget().num_output(),
        ));
    }
    Ok(())
}

/// Streams the answer to standard output as it arrives, then prints the sources.
async fn stream_answer(
    synth: &Synthesizer,
    run: &SynthRun<'_>,
    nodes: Vec<Node>,
    progress: &Progress,
) -> Result<Response> {
    let mut stream = synth.stream(run.query, nodes).await.map_err(|e| {
        progress.clear();
        explain(e, run)
    })?;
    let stdout = io::stdout();
    while let Some(delta) = stream.next().await {
        progress.clear();
        let delta = delta.map_err(|e| explain(e, run))?;
        let mut out = stdout.lock();
        out.write_all(delta.as_bytes())?;
        out.flush()?;
    }
    let response = stream.finish().await.map_err(|e| explain(e, run))?;
    progress.clear();
    let style = output::SourceStyle::of(&response, run.output.cites);
    output::write_after_answer(&mut stdout.lock(), &response, style)?;
    Ok(response)
}

/// Whether the answer is drawn from the sources: never in `generation` (the query
/// alone) and `no_text` (no answer), always in `context_only` (the answer is the
/// sources); the extractive backend knows (it says so when nothing matched well); with
/// citations, an answer citing nothing is not; otherwise unknown.
fn grounded(response: &Response, extractive: bool, mode: ResponseMode) -> Option<bool> {
    match mode {
        ResponseMode::Generation | ResponseMode::NoText => return Some(false),
        ResponseMode::ContextOnly => return Some(!response.text.trim().is_empty()),
        _ => {}
    }
    if extractive {
        let text = response.text_without_markers();
        return Some(!text.is_empty() && text != ExtractiveModel::NOT_ANSWERED);
    }
    response.citations.as_ref().map(|c| !c.markers.is_empty())
}

/// A synthesis error with a hint when the server could not be reached.
fn explain(e: SynthError, run: &SynthRun<'_>) -> anyhow::Error {
    if matches!(e, SynthError::DuplicateNodeId { .. }) {
        return usage(format!(
            "{e} (--nodes ids must be unique, and differ from the PATH#N ids of files read)"
        ));
    }
    // Budget errors say "context window" and "num_output": name the flags too.
    if matches!(
        e,
        SynthError::Budget(_)
            | SynthError::NoRoomForContext { .. }
            | SynthError::TreeNotConverging { .. }
            | SynthError::Model {
                source: ModelError::ContextTooLong { .. },
                ..
            }
    ) {
        return anyhow!("{e} (see --context-window and --num-output)");
    }
    if let Some(synthkit::layer::limit::LimitError::OverBudget { tokens, .. }) = e
        .model_error()
        .and_then(synthkit::layer::limit::limit_error)
    {
        return anyhow!(
            "{e} (raise --tpm to at least {tokens}, or lower --num-output or --context-window)"
        );
    }
    if let SynthError::Truncated {
        step, max_tokens, ..
    } = &e
    {
        return anyhow!(
            "the {} {} reply (level {}, index {}) was cut at the output limit (--num-output {max_tokens}); raise --num-output, or pass --on-truncation warn to keep cut replies",
            step.mode,
            step.step,
            step.level,
            step.index
        );
    }
    let unreachable = matches!(
        &e,
        SynthError::Model {
            source: ModelError::Connection(_) | ModelError::Timeout { .. },
            ..
        } | SynthError::Count { .. }
    );
    // The library names its settings; name the flag that sets the one that fired.
    let flag = match &e {
        SynthError::Model {
            source: ModelError::Timeout { kind, .. },
            ..
        } => Some(match kind {
            TimeoutKind::Connect => "--connect-timeout SECS",
            TimeoutKind::Idle => "--idle-timeout SECS",
            _ => "--timeout SECS",
        }),
        SynthError::Model {
            source: ModelError::ReplyTooLarge { .. },
            ..
        } => Some("--max-reply-bytes BYTES"),
        _ => None,
    };
    let e = match flag {
        Some(flag) => anyhow!("{e} ({flag})"),
        None => anyhow::Error::new(e),
    };
    match (unreachable, &run.base_url) {
        (true, Some((url, from))) => {
            let url = synthkit::secret::redact_url(url);
            anyhow!("{e}; check that a server is running at {url} ({from})")
        }
        _ => e,
    }
}
