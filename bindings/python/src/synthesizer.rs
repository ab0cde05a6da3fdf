//! `synthkit_rs.Synthesizer`: the Python face of [`synthkit::Synthesizer`].

use std::sync::Arc;

use pyo3::prelude::*;
use synthkit::backend::http::reuse::ReuseHints;
use synthkit::layer::sharing::Sharing;
use synthkit::model::LanguageModel;
use synthkit::prompt::PromptBudget;
use synthkit::{Concurrency, ResponseMode, SynthesisInput};

use crate::backend::{self, Api, BackendOptions};
use crate::call_events::CallHook;
use crate::errors::to_py;
use crate::nodes::nodes_from;
use crate::pyllm::bridge::Caller;
use crate::pyllm::scope::{Configure, PerCaller};
use crate::pyllm::{self, LlmOptions};
use crate::response::Response;
use crate::sharing::{self, SharingArgs};
use crate::stream::ResponseStream;
use crate::structured::Structured;
use crate::templates::TemplateArgs;
use crate::truncation::TruncationPolicy;
use crate::{InputError, block_on, runtime};

/// The names of the response modes, as `mode=` takes them.
pub(crate) fn mode_names() -> Vec<&'static str> {
    ResponseMode::ALL.iter().map(|m| m.as_str()).collect()
}

/// Turns a query and retrieved nodes into an answer with a language model.
///
/// With `llm`, that Python object answers: a LlamaIndex LLM (its own methods, async from
/// asyncio callers) or any callable `(messages or prompt) -> str`, behind synthkit's
/// budgets, concurrency limit and retries (`retry_on` names the exception classes to
/// retry). With `base_url`, an OpenAI-compatible server at that URL (up to and including
/// `/v1`) does, through `/chat/completions` (or `/completions` with `chat=False`); the API
/// key is read from the environment variable named by `api_key_env` (default
/// `OPENAI_API_KEY`). With `api="anthropic"`, a server of Anthropic's Messages API does
/// (`base_url` with or without `/v1`; Anthropic's own without it), with the key from
/// `ANTHROPIC_API_KEY` unless `api_key_env` names another variable. With neither `llm` nor
/// `base_url` (and the OpenAI API), synthkit's offline extractive backend answers (no
/// network, no key, no model: it quotes the nodes).
///
/// `output_schema` (a JSON schema dict, a JSON string or a pydantic model class) asks for
/// a final answer that follows it (`Response.structured`); `structured_answer_filtering`
/// (refine and compact) has each step say whether its context answered the query, and
/// unsatisfied steps leave the answer as it was. `on_call` is told about every model call
/// (`call_started(prompt) -> token`, `call_finished(token, reply, usage)`,
/// `call_failed(token, message)`), in the caller's context.
///
/// `rpm=` / `tpm=` cap requests and tokens per minute; with `redis_url=` (and
/// `redis_prefix=`) that budget is one for every process sharing the Redis. `cache=`
/// answers repeated model calls: `"memory"`, `"redis"` or an SQLite file's path
/// (`crate::sharing`). `synthesize_many` runs many requests at once (`crate::many`).
///
/// `max_prompt_tokens` caps every prompt below the window (LangChain's `token_max`): less
/// context in each call, more calls.
///
/// A model (`llm` or `base_url`) answers evidence first unless `evidence=False`: each node
/// is shown as its sentences bearing on the query, and a query nothing bears on is
/// answered "not in the sources" without a call. An answer whose facts are in no node it
/// was shown abstains unless `on_unsupported=` says `"warn"` or `"error"`. A query the
/// model declines though a sentence covers most of it is answered with the sources' own
/// sentences unless `on_declined="keep"` (`response.evidence["extracted"]` says so). The
/// extractive backend ranks sentences itself: there evidence defaults to off and `"warn"`.
///
/// `reuse_hints=` says what calls tell a server so that it reuses what it already read
/// of their shared prefix: `"auto"` (llama.cpp's `id_slot` where the server reports its
/// slots, `prompt_cache_key` to OpenAI's own server, Anthropic's `cache_control` where
/// the prefix is long enough), `"all"` (and `prompt_cache_key` to every server) or
/// `"none"`. Hints never change a prompt, its count or a budget.
#[pyclass(module = "synthkit_rs._synthkit", frozen)]
pub struct Synthesizer {
    inner: PerCaller,
    kind: &'static str,
    base_url: Option<String>,
    model_name: String,
    context_window: usize,
    num_output: usize,
    concurrency: usize,
    citations: bool,
    /// `citations="quotes"`: quoted citations, checked.
    quotes: bool,
    sharing: Sharing,
    /// A Python LLM's adapter (its `id()`), when the synthesizer calls one.
    llm_adapter: Option<usize>,
    /// What a reply cut at the output limit does.
    on_truncation: TruncationPolicy,
    /// Evidence first and the policy for unsupported answers (also `synthesize_many`'s
    /// defaults).
    pub(crate) checks: synthkit_frontend::AnswerChecks,
    /// `escalate=`: answers are judged whole before they are shown, so no stream.
    escalates: bool,
}

impl Synthesizer {
    /// What a reply cut at the output limit does (`on_truncation=`).
    pub(crate) fn truncation_policy(&self) -> TruncationPolicy {
        self.on_truncation
    }
}

/// `escalate=`: `None`/`False` (off), `True` (the first 5 nodes) or a number of nodes.
fn escalation(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<synthkit::Escalation>> {
    const MUST: &str =
        "escalate= must be True, False, None or the number of nodes read first (at least 1)";
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(b) = value.cast::<pyo3::types::PyBool>() {
        return Ok(b.is_true().then(synthkit::Escalation::default));
    }
    match value.extract::<u64>() {
        Ok(n) if n >= 1 => Ok(Some(synthkit::Escalation::new(
            usize::try_from(n).map_err(|_| InputError::new_err(MUST))?,
        ))),
        _ => Err(InputError::new_err(MUST)),
    }
}

#[pymethods]
impl Synthesizer {
    #[new]
    #[pyo3(signature = (
        mode = "compact",
        base_url = None,
        model = None,
        api_key_env = None,
        context_window = None,
        num_output = None,
        concurrency = None,
        citations = None,
        temperature = None,
        timeout = None,
        system_prompt = None,
        qa_template = None,
        refine_template = None,
        summary_template = None,
        chat = true,
        chunk_overlap_ratio = None,
        llm = None,
        retry_on = None,
        tokenizer = None,
        // the API, structured answers, call events, generation
        api = "openai",
        output_schema = None,
        structured_answer_filtering = false,
        on_call = None,
        simple_template = None,
        // where the rate budget and the response cache live
        rpm = None,
        tpm = None,
        redis_url = None,
        redis_prefix = None,
        cache = None,
        cache_ttl = None,
        // the prompt limit
        max_prompt_tokens = None,
        // the intermediate steps
        return_steps = false,
        // replies cut at the output limit
        on_truncation = "warn",
        // extra output tokens for a reasoning model's thinking
        thinking_reserve = 0,
        // the answer when the sources do not answer
        not_in_sources_answer = None,
        // whether the model takes images, over what its server says
        vision = None,
        // evidence first: None for the default (on with a model, off for the extractive backend)
        evidence = None,
        evidence_tokens = None,
        // an answer whose facts are in no source: "warn", "abstain", "error" (None: abstain
        // with a model, warn for the extractive backend)
        on_unsupported = None,
        // a query the model declines though the evidence covers it: "extract" (the
        // default: the sources' sentences) or "keep" (the model's words)
        on_declined = None,
        // escalation: True (the first 5 nodes) or a number of nodes read first; then
        // map_reduce over every node when that answer abstains or is found in no source
        escalate = None,
        // what calls tell a server so that it reuses the prompt prefix they share:
        // "auto", "all" or "none"
        reuse_hints = "auto",
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        mode: &str,
        base_url: Option<String>,
        model: Option<String>,
        api_key_env: Option<String>,
        context_window: Option<usize>,
        num_output: Option<usize>,
        concurrency: Option<usize>,
        citations: Option<&Bound<'_, PyAny>>,
        temperature: Option<f32>,
        timeout: Option<f64>,
        system_prompt: Option<String>,
        qa_template: Option<&Bound<'_, PyAny>>,
        refine_template: Option<&Bound<'_, PyAny>>,
        summary_template: Option<&Bound<'_, PyAny>>,
        chat: bool,
        chunk_overlap_ratio: Option<f64>,
        llm: Option<&Bound<'_, PyAny>>,
        retry_on: Option<&Bound<'_, PyAny>>,
        tokenizer: Option<&Bound<'_, PyAny>>,
        api: &str,
        output_schema: Option<&Bound<'_, PyAny>>,
        structured_answer_filtering: bool,
        on_call: Option<&Bound<'_, PyAny>>,
        simple_template: Option<&Bound<'_, PyAny>>,
        rpm: Option<i64>,
        tpm: Option<i64>,
        redis_url: Option<String>,
        redis_prefix: Option<String>,
        cache: Option<&Bound<'_, PyAny>>,
        cache_ttl: Option<f64>,
        max_prompt_tokens: Option<usize>,
        return_steps: bool,
        on_truncation: &str,
        thinking_reserve: usize,
        not_in_sources_answer: Option<String>,
        vision: Option<bool>,
        evidence: Option<bool>,
        evidence_tokens: Option<usize>,
        on_unsupported: Option<&str>,
        on_declined: Option<&str>,
        escalate: Option<&Bound<'_, PyAny>>,
        reuse_hints: &str,
    ) -> PyResult<Self> {
        let reuse_hints: ReuseHints = reuse_hints.parse().map_err(InputError::new_err)?;
        let escalation = escalation(escalate)?;
        let extract_when_declined = match on_declined {
            None | Some("extract") => None,
            Some("keep") => Some(false),
            Some(other) => {
                return Err(InputError::new_err(format!(
                    "unknown on_declined `{other}`: use \"extract\" or \"keep\""
                )));
            }
        };
        let on_unsupported: Option<synthkit::grounding::OnUnsupported> = on_unsupported
            .map(str::parse)
            .transpose()
            .map_err(InputError::new_err)?;
        let on_truncation = TruncationPolicy::parse(on_truncation)?;
        // The library's one default for calls in flight.
        let concurrency = concurrency.unwrap_or(synthkit::synth::DEFAULT_CONCURRENCY);
        let mode: ResponseMode = mode.parse().map_err(|_| {
            InputError::new_err(format!(
                "unknown mode `{mode}`: use one of {}",
                mode_names().join(", ")
            ))
        })?;
        let base_url = base_url
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty());
        let llm = llm.filter(|l| !l.is_none());
        let api = Api::parse(api)?;
        let structured = Structured::read(output_schema, structured_answer_filtering, mode)?;
        let hook = CallHook::read(on_call)?;
        let templates = TemplateArgs {
            qa: qa_template,
            refine: refine_template,
            summary: summary_template,
            simple: simple_template,
        };
        let overrides = templates.read()?;
        let sharing = SharingArgs {
            rpm,
            tpm,
            redis_url,
            redis_prefix,
            cache,
            cache_ttl,
        }
        .options()?;
        let sharing = block_on(py, sharing::open(sharing))?;
        let backend = match llm {
            Some(llm) => {
                let given = [
                    ("base_url", base_url.is_some()),
                    ("api", api != Api::OpenAi),
                    ("api_key_env", api_key_env.is_some()),
                    ("temperature", temperature.is_some()),
                    ("timeout", timeout.is_some()),
                    ("reuse_hints", reuse_hints != ReuseHints::Auto),
                ];
                if let Some((name, _)) = given.iter().find(|(_, set)| *set) {
                    return Err(InputError::new_err(format!(
                        "{name} does not apply with llm=: synthkit calls the llm object, so set it on the LLM (or drop llm= to have synthkit call a server itself)"
                    )));
                }
                if let Some(w) = context_window
                    && num_output.is_some_and(|n| w <= n)
                {
                    return Err(InputError::new_err(format!(
                        "context_window ({w}) must be larger than num_output ({})",
                        num_output.unwrap_or_default()
                    )));
                }
                pyllm::backend(
                    py,
                    &LlmOptions {
                        llm,
                        name: model,
                        context_window,
                        num_output,
                        concurrency,
                        retry_on,
                        tokenizer,
                        chat,
                    },
                    &sharing,
                )?
            }
            None => {
                if retry_on.is_some_and(|r| !r.is_none()) || tokenizer.is_some_and(|t| !t.is_none())
                {
                    return Err(InputError::new_err(
                        "retry_on and tokenizer apply to llm= only",
                    ));
                }
                let opts = BackendOptions {
                    api,
                    base_url: base_url.clone(),
                    model,
                    api_key_env: api_key_env.unwrap_or_else(|| api.default_key_var().to_string()),
                    context_window,
                    num_output: num_output.unwrap_or(DEFAULT_NUM_OUTPUT),
                    vision,
                    concurrency,
                    temperature,
                    timeout,
                    chat,
                    reuse_hints,
                };
                backend::check(&opts)?;
                {
                    let shared = sharing.clone();
                    block_on(py, async move { backend::connect(opts, &shared).await })?
                }
            }
        };
        let info = backend.model.info();
        let budget = match chunk_overlap_ratio {
            Some(ratio) => Some(
                PromptBudget::new(info.context_window, info.num_output)
                    .and_then(|b| b.with_chunk_overlap_ratio(ratio))
                    .map_err(|e| InputError::new_err(e.to_string()))?,
            ),
            None => None,
        };
        let allowed = match backend.concurrency {
            0 => Concurrency::Unlimited,
            n => Concurrency::limit(n),
        };
        let mut options = synthkit::SynthesisOptions::default();
        options.mode = Some(mode);
        options.on_truncation = Some(on_truncation.library());
        let (citations, quotes) = citing(citations)?;
        options.citations = Some(citations);
        if quotes {
            options.citation_style = Some(synthkit::CitationStyle::Quotes);
        }
        options.return_steps = Some(return_steps);
        options.concurrency = Some(allowed);
        options.templates = overrides;
        options.budget = budget;
        options.system_prompt = system_prompt;
        options.max_prompt_tokens = max_prompt_tokens;
        options.thinking_reserve = Some(thinking_reserve);
        options.not_in_sources_answer = not_in_sources_answer;
        options.vision = vision;
        options.escalation = Some(escalation);
        let mut checks = synthkit_frontend::AnswerChecks::for_questions_to(backend.kind);
        if let Some(on) = evidence {
            checks = checks.with_evidence(on);
        }
        if let Some(tokens) = evidence_tokens {
            checks = checks.with_evidence_tokens(tokens);
        }
        if let Some(policy) = on_unsupported {
            checks = checks.with_on_unsupported(policy);
        }
        if let Some(on) = extract_when_declined {
            checks = checks.with_extract_when_declined(on);
        }
        checks.set(&mut options);
        structured.set(&mut options);
        let configure: Configure = Arc::new(move |model: Arc<dyn LanguageModel>| {
            options
                .clone()
                .apply(synthkit::Synthesizer::builder(model))
                .build()
        });
        let built = configure(backend.model.clone()).map_err(to_py)?;
        let mut inner = if backend.kind == "python" {
            PerCaller::python(built, backend.model.clone(), configure.clone())
        } else {
            PerCaller::fixed(built)
        };
        if let Some(hook) = hook {
            inner = inner.with_hook(hook, backend.model.clone(), configure);
        }
        Ok(Self {
            inner,
            kind: backend.kind,
            base_url,
            model_name: info.name,
            context_window: info.context_window,
            num_output: info.num_output,
            concurrency: backend.concurrency,
            citations,
            quotes,
            sharing,
            llm_adapter: backend.llm_adapter,
            on_truncation,
            checks,
            escalates: escalation.is_some(),
        })
    }

    /// Answers `query` from `nodes` and returns a `Response`. Blocks with the GIL released;
    /// Ctrl-C cancels the model calls in flight.
    fn synthesize(
        &self,
        py: Python<'_>,
        query: &str,
        nodes: &Bound<'_, PyAny>,
    ) -> PyResult<Response> {
        let input = SynthesisInput::new(query, nodes_from(nodes)?);
        let synth = self.for_caller(py, false)?;
        let response = block_on(py, async move {
            synth
                .synthesize_input(input)
                .await
                .map(Response::new)
                .map_err(to_py)
        })?;
        self.on_truncation.check(py, response.inner())?;
        Ok(response)
    }

    /// Like `synthesize`, as an awaitable (asyncio). Cancelling the awaiting task cancels
    /// the model calls in flight.
    fn asynthesize<'py>(
        &self,
        py: Python<'py>,
        query: &str,
        nodes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let input = SynthesisInput::new(query, nodes_from(nodes)?);
        let synth = self.for_caller(py, true)?;
        let policy = self.on_truncation;
        runtime()?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let response = synth
                .synthesize_input(input)
                .await
                .map(Response::new)
                .map_err(to_py)?;
            Python::attach(|py| policy.check(py, response.inner()))?;
            Ok(response)
        })
    }

    /// Answers `query` from `nodes` as a stream of text deltas: iterate it (`for`) or
    /// iterate it asynchronously (`async for`); afterwards `.response` is the `Response`.
    /// Nothing is sent before the first delta is asked for.
    fn stream(
        &self,
        py: Python<'_>,
        query: &str,
        nodes: &Bound<'_, PyAny>,
    ) -> PyResult<ResponseStream> {
        self.refuse_reentry(py)?;
        if self.escalates {
            return Err(InputError::new_err(
                "escalate= judges a whole answer before it is shown: use synthesize(), or a \
                 Synthesizer without escalate= for stream()",
            ));
        }
        let input = SynthesisInput::new(query, nodes_from(nodes)?);
        Ok(ResponseStream::new(
            self.inner.clone(),
            input,
            self.on_truncation,
        ))
    }

    /// The response mode.
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.built().mode().as_str()
    }

    /// `extractive`, `openai`, `anthropic` (`api="anthropic"`: a Messages API server), or
    /// `python` (`llm=`: a Python LLM object or callable).
    #[getter]
    fn backend(&self) -> &'static str {
        self.kind
    }

    /// The model's name (for a server: the one it said it serves, or the one given).
    #[getter]
    fn model(&self) -> &str {
        &self.model_name
    }

    /// The context window in tokens (given, or the server's, or the default).
    #[getter]
    fn context_window(&self) -> usize {
        self.context_window
    }

    /// Tokens reserved for each answer.
    #[getter]
    fn num_output(&self) -> usize {
        self.num_output
    }

    fn __repr__(&self) -> String {
        let url = match &self.base_url {
            // No user-info (`http://user:password@host`) in a repr.
            Some(u) => format!(", base_url={:?}", synthkit::secret::redact_url(u)),
            None => String::new(),
        };
        format!(
            "Synthesizer(mode={:?}, backend={:?}{url}, model={:?}, context_window={}, num_output={}, concurrency={}, citations={}{})",
            self.inner.built().mode().as_str(),
            self.kind,
            self.model_name,
            self.context_window,
            self.num_output,
            self.concurrency,
            match (self.citations, self.quotes) {
                (true, true) => "'quotes'",
                (true, false) => "True",
                _ => "False",
            },
            sharing::describe(&self.sharing),
        )
    }
}

impl Synthesizer {
    /// Calls in flight the synthesizer allows (0: no limit).
    pub(crate) fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Whether answers cite their sources (`citations=`).
    pub(crate) fn citations(&self) -> bool {
        self.citations
    }

    /// `citations=` as a request's `citations`: a boolean, or `"quotes"`.
    pub(crate) fn citations_value(&self) -> serde_json::Value {
        if self.citations && self.quotes {
            serde_json::Value::String("quotes".into())
        } else {
            serde_json::Value::Bool(self.citations)
        }
    }

    /// The synthesizer for one synthesis started from this thread: from a coroutine
    /// (`asyncio`) or a blocking call.
    pub(crate) fn for_caller(
        &self,
        py: Python<'_>,
        asyncio: bool,
    ) -> PyResult<synthkit::Synthesizer> {
        self.refuse_reentry(py)?;
        if !self.inner.needs_caller() {
            return Ok(self.inner.built().clone());
        }
        let caller = if asyncio {
            Caller::asyncio(py)?
        } else {
            Caller::blocking(py)?
        };
        self.inner.for_caller(caller).map_err(to_py)
    }

    /// Refuses a synthesis started from inside one of this synthesizer's own `llm` calls:
    /// it would wait for a place in flight that the call it came from holds.
    fn refuse_reentry(&self, py: Python<'_>) -> PyResult<()> {
        let Some(adapter) = self.llm_adapter else {
            return Ok(());
        };
        if crate::pyllm::in_call(py, adapter)? {
            return Err(InputError::new_err(
                "this Synthesizer was called from inside its own llm: the inner synthesis would wait for the calls in flight that the outer one holds; build a second Synthesizer (synthkit_rs.Synthesizer(..., llm=...)) for the inner call",
            ));
        }
        Ok(())
    }
}

/// The answer length reserved when nothing says otherwise (as LlamaIndex).
const DEFAULT_NUM_OUTPUT: usize = 256;

/// Reads `citations=`: `True`/`False` (`None`: off), `"markers"` or `"quotes"`;
/// (on, quotes).
fn citing(value: Option<&Bound<'_, PyAny>>) -> PyResult<(bool, bool)> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok((false, false));
    };
    if let Ok(on) = value.extract::<bool>() {
        return Ok((on, false));
    }
    let Ok(style) = value.extract::<String>() else {
        return Err(InputError::new_err(
            "citations= must be True, False, \"markers\" or \"quotes\"",
        ));
    };
    match style.parse::<synthkit::CitationStyle>() {
        Ok(synthkit::CitationStyle::Quotes) => Ok((true, true)),
        Ok(_) => Ok((true, false)),
        Err(e) => Err(InputError::new_err(format!("citations=: {e}"))),
    }
}
