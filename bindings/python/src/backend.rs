//! The model behind a synthesizer: the offline extractive backend, an OpenAI-compatible
//! server, or a server of Anthropic's Messages API, chosen from the constructor's
//! arguments and built by the setup every front end shares (`synthkit_frontend`).

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use synthkit::backend::anthropic::{Anthropic, AnthropicConfig};
use synthkit::backend::http::reuse::ReuseHints;
use synthkit::backend::connect::{ConnectError, Counting};
use synthkit::backend::http::{HttpApi, HttpConfig, Sampling, Transport};
use synthkit::backend::openai::{OpenAi, OpenAiConfig};
use synthkit::layer::sharing::Sharing;
use synthkit::model::LanguageModel;
use synthkit_frontend::{ModelSetup, StackOptions};

use crate::{InputError, SynthkitError};

/// The API a server speaks (`api=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// OpenAI's `/chat/completions` and `/completions` (the default).
    OpenAi,
    /// Anthropic's Messages API (`/v1/messages`: Anthropic, llama.cpp's `llama-server`).
    Anthropic,
}

impl Api {
    /// The API named `name` (`openai` or `anthropic`).
    pub(crate) fn parse(name: &str) -> PyResult<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(Api::OpenAi),
            "anthropic" => Ok(Api::Anthropic),
            _ => Err(InputError::new_err(format!(
                "unknown api `{name}`: use openai (OpenAI-compatible servers) or anthropic (Anthropic's Messages API)"
            ))),
        }
    }

    /// The environment variable read for the key when `api_key_env` is not given.
    pub(crate) fn default_key_var(self) -> &'static str {
        match self {
            Api::OpenAi => OpenAiConfig::DEFAULT_KEY_VAR,
            Api::Anthropic => AnthropicConfig::DEFAULT_KEY_VAR,
        }
    }
}

/// What the Python constructor says about the model.
#[derive(Debug, Clone)]
pub(crate) struct BackendOptions {
    /// The API the server speaks.
    pub api: Api,
    /// The server's base URL (up to `/v1`); `None` means the extractive backend for the
    /// OpenAI API, Anthropic's own server for the Anthropic API.
    pub base_url: Option<String>,
    /// The model name; `None` asks the server (`GET /models`).
    pub model: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: String,
    /// The context window; `None` asks the server (else the library's default).
    pub context_window: Option<usize>,
    /// Tokens reserved for each answer.
    pub num_output: usize,
    /// Whether the model takes images, over what its server says (`vision=`).
    pub vision: Option<bool>,
    /// Calls in flight at most (0: no limit).
    pub concurrency: usize,
    /// The sampling temperature; `None` keeps the library's default (0.1).
    pub temperature: Option<f32>,
    /// The request timeout in seconds; `None` keeps the library's default (600 s).
    pub timeout: Option<f64>,
    /// Chat API (`/chat/completions`) or completion API (`/completions`).
    pub chat: bool,
    /// Which prompt-reuse hints calls carry (`reuse_hints=`).
    pub reuse_hints: ReuseHints,
}

/// The model and what the synthesizer reports about it.
pub(crate) struct Backend {
    /// The model, behind its layers.
    pub model: Arc<dyn LanguageModel>,
    /// `extractive`, `openai`, `anthropic`, or `python` (a Python LLM object or callable:
    /// `crate::pyllm`).
    pub kind: &'static str,
    /// Calls in flight the synthesizer allows (the server's slots may lower it).
    pub concurrency: usize,
    /// A Python LLM's adapter (its `id()`): a synthesis started from inside one of its
    /// calls is refused.
    pub llm_adapter: Option<usize>,
}

/// Checks what can be checked without the network.
pub(crate) fn check(opts: &BackendOptions) -> PyResult<()> {
    if let Some(url) = &opts.base_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(InputError::new_err(format!(
            "base_url must start with http:// or https://, got `{}`",
            synthkit::secret::redact_url(url)
        )));
    }
    if opts.num_output == 0 {
        return Err(InputError::new_err("num_output must be at least 1"));
    }
    if opts.context_window.is_some_and(|w| w <= opts.num_output) {
        return Err(InputError::new_err(format!(
            "context_window ({}) must be larger than num_output ({})",
            opts.context_window.unwrap_or_default(),
            opts.num_output
        )));
    }
    if let Some(t) = opts.temperature
        && !(t.is_finite() && t >= 0.0)
    {
        return Err(InputError::new_err(format!(
            "temperature must be a number >= 0, got {t}"
        )));
    }
    timeout(opts.timeout)?;
    if opts.api == Api::Anthropic && !opts.chat {
        return Err(InputError::new_err(
            "chat=False asks for the completion API, which Anthropic's Messages API does not have: drop it, or use api=\"openai\"",
        ));
    }
    Ok(())
}

fn timeout(secs: Option<f64>) -> PyResult<Option<Duration>> {
    let Some(secs) = secs else { return Ok(None) };
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .map(Some)
        .ok_or_else(|| {
            InputError::new_err(format!(
                "timeout must be a positive number of seconds, got {secs}"
            ))
        })
}

/// The config of a server of the API `A` with what the constructor says: the key from
/// `api_key_env` only, the base URL (without trailing slashes), the model (else the
/// server's, asked at its models listing, unless it is the API's own server), the output
/// reserve, the window, the temperature and the timeout.
fn configured<A: HttpApi>(opts: &BackendOptions) -> PyResult<HttpConfig<A>> {
    let mut config = HttpConfig::<A>::from_lookup(&opts.api_key_env, key_lookup(opts))
        .with_num_output(opts.num_output);
    if let Some(url) = &opts.base_url {
        config = config.with_base_url(url.trim_end_matches('/').to_string());
    }
    if let Some(m) = &opts.model {
        config = config.with_model(m.clone());
    }
    let served_elsewhere = !config.is_api_server();
    config = config.with_model_discovery(opts.model.is_none() && served_elsewhere);
    settings(
        opts,
        &mut config.transport,
        &mut config.sampling,
        &mut config.context_window,
    )?;
    Ok(config.with_vision(opts.vision))
}

/// Builds the model through the setup every front end shares (`synthkit_frontend`). For a
/// server this asks it which model it serves (when `model` is not given), its context
/// window (when not given) and whether it counts tokens (`/tokenize`); it never makes a
/// model call. `sharing` is the rate budget and the cache (`crate::sharing`).
pub(crate) async fn connect(opts: BackendOptions, sharing: &Sharing) -> PyResult<Backend> {
    let setup = match (opts.api, &opts.base_url) {
        // Anthropic's Messages API: its window and slots from llama.cpp's `/props` where
        // the server has one, its model from `/v1/models` when not given, exact prompt
        // counts from `/v1/messages/count_tokens` where the server counts.
        (Api::Anthropic, _) => {
            ModelSetup::anthropic(
                configured::<Anthropic>(&opts)?
                    .with_server_tokenizer(true)
                    .with_reuse_hints(opts.reuse_hints),
            )
                .with_counting(Counting::AsConfigured)
        }
        (Api::OpenAi, None) => ModelSetup::extractive()
            .with_window(opts.context_window, Some(opts.num_output))
            .with_name(opts.model.clone()),
        // Budgets match the model best when the server counts: its /tokenize where it has
        // one (llama.cpp, vLLM); servers without one keep the built-in tokenizer.
        (Api::OpenAi, Some(_)) => {
            ModelSetup::openai(
                configured::<OpenAi>(&opts)?
                    .with_chat(opts.chat)
                    .with_reuse_hints(opts.reuse_hints),
            )
        }
    };
    Backend::build(setup, opts.concurrency, sharing, None)
        .await
        .map_err(|e| match e {
            ConnectError::NoKey { url } => InputError::new_err(format!(
                "no API key for {url}: set the environment variable {} (or name another one with api_key_env=)",
                opts.api_key_env
            )),
            other => SynthkitError::new_err(other.to_string()),
        })
}

impl Backend {
    /// Builds `setup` behind the stack every Python synthesizer has: at most
    /// `concurrency` calls in flight (0: no cap; never more than the server's slots),
    /// the default retries, `sharing`'s budget and cache. `llm_adapter`: a Python LLM's
    /// adapter (its `id()`).
    pub(crate) async fn build(
        setup: ModelSetup,
        concurrency: usize,
        sharing: &Sharing,
        llm_adapter: Option<usize>,
    ) -> Result<Self, ConnectError> {
        let stack = StackOptions::default()
            .with_calls_in_flight(Some(concurrency))
            .with_sharing(sharing.clone());
        let built = setup.with_stack(stack).build().await?;
        Ok(Backend {
            model: built.model(),
            kind: built.backend,
            concurrency: built.calls_in_flight,
            llm_adapter,
        })
    }
}

/// The window, temperature and timeout given to the constructor, set on either API's
/// config (their shared fields).
fn settings(
    opts: &BackendOptions,
    transport: &mut Transport,
    sampling: &mut Sampling,
    window: &mut Option<usize>,
) -> PyResult<()> {
    if let Some(w) = opts.context_window {
        *window = Some(w);
    }
    if let Some(t) = opts.temperature {
        *sampling = sampling.clone().with_temperature(t);
    }
    if let Some(t) = timeout(opts.timeout)? {
        *transport = transport.clone().with_timeout(t);
    }
    Ok(())
}

/// The key lookup for `opts.api_key_env`: the key comes from that variable only (never
/// from the arguments, so it is in no repr or traceback).
fn key_lookup(opts: &BackendOptions) -> impl Fn(&str) -> Option<String> + use<> {
    let key_var = opts.api_key_env.clone();
    move |name| {
        (name == key_var)
            .then(|| std::env::var(name).ok())
            .flatten()
    }
}
