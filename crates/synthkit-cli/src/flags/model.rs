//! The model flags shared by `ask`, `summarize` and `serve`: which backend, where the
//! server is, which model, its window and output reserve, timeouts, sampling and the
//! tokenizer. One definition, so every verb takes the same flags with the same meaning.

use anyhow::Result;
use clap::{Args, ValueEnum};
use synthkit::backend::anthropic::{Anthropic, AnthropicConfig};
use synthkit::backend::http::{HttpApi, HttpConfig, Sampling, Transport};
use synthkit::backend::openai::{OpenAi, OpenAiConfig};
use synthkit::text::BpeTokenizer;

use super::values::{
    parse_extra_body, parse_temperature, parse_tokenizer, parse_top_p, seconds, usage,
};

/// The variable read for the base URL when neither `--base-url` nor `SYNTHKIT_BASE_URL`
/// is set (as OpenAI's SDKs read it).
pub const OPENAI_BASE_URL_VAR: &str = "OPENAI_BASE_URL";

/// Which backend answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LlmKind {
    /// Offline: sentences selected from your documents, no language model.
    Extractive,
    /// A model server: OpenAI-compatible (OpenAI, vLLM, llama.cpp, Ollama, ...), or
    /// Anthropic's Messages API with --api anthropic.
    Openai,
    /// A server of Anthropic's Messages API (chosen with --api anthropic, not --llm).
    #[value(skip)]
    Anthropic,
}

/// What calls tell the server so that it reuses what it read of their shared prefix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ReuseHints {
    /// llama.cpp's id_slot where the server reports its slots, prompt_cache_key to
    /// OpenAI's own server, Anthropic's cache_control where the prefix is long enough.
    #[default]
    Auto,
    /// As auto, and prompt_cache_key to every OpenAI-compatible server.
    All,
    /// None of them.
    None,
}

/// The API a model server speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Api {
    /// OpenAI's: `/v1/chat/completions` (or `/v1/completions`), `Authorization: Bearer`.
    #[default]
    Openai,
    /// Anthropic's Messages API: `/v1/messages`, `x-api-key`.
    Anthropic,
}

/// The model flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Model")]
pub struct ModelArgs {
    /// The backend [default: extractive, or a model server when --base-url,
    /// SYNTHKIT_BASE_URL, OPENAI_BASE_URL (ANTHROPIC_BASE_URL with --api anthropic) or
    /// --api anthropic is given].
    #[arg(hide_short_help = true, long, value_enum, value_name = "KIND")]
    pub llm: Option<LlmKind>,
    /// The API the server speaks: openai or anthropic.
    ///
    /// The API the model server speaks: openai (/v1/chat/completions) or anthropic
    /// (Anthropic's Messages API, /v1/messages: Anthropic, llama.cpp) [default: openai].
    #[arg(long, value_enum, value_name = "API", env = "SYNTHKIT_API")]
    pub api: Option<Api>,
    /// The model server's API base URL (an OpenAI-compatible server).
    ///
    /// The API base URL (with or without /v1 for anthropic); without this flag and
    /// SYNTHKIT_BASE_URL, OPENAI_BASE_URL is used (ANTHROPIC_BASE_URL with --api
    /// anthropic).
    #[arg(long, value_name = "URL", env = "SYNTHKIT_BASE_URL")]
    pub base_url: Option<String>,
    /// The model name [default: the server's first model].
    ///
    /// The model name [env: SYNTHKIT_MODEL; default: the first model the server lists at
    /// /models when a base URL is given, else gpt-4o-mini]. JSON reports name the model
    /// the server says answered.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The environment variable that holds the API key (the key itself is never printed)
    /// [default: OPENAI_API_KEY, ANTHROPIC_API_KEY with --api anthropic].
    #[arg(hide_short_help = true, long, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// The model's context window in tokens [default: asked from the server].
    ///
    /// The model's context window in tokens [default: asked from the server, else 3900;
    /// 8192 for extractive].
    #[arg(long, value_name = "N")]
    pub context_window: Option<usize>,
    /// Tokens reserved for each answer.
    ///
    /// Tokens reserved for each answer [default: 256].
    #[arg(long, value_name = "N")]
    pub num_output: Option<usize>,
    /// Use the completions endpoint (/completions) instead of chat.
    #[arg(hide_short_help = true, long)]
    pub completion_api: bool,
    /// Count tokens with the server's /tokenize (llama.cpp, vLLM) and warn when it has
    /// none. Without this flag it is used anyway when the server has one, unless
    /// --tokenizer or --no-server-tokenizer is given.
    #[arg(hide_short_help = true, long, conflicts_with = "no_server_tokenizer")]
    pub server_tokenizer: bool,
    /// Never ask the server to count tokens; use the built-in tokenizer.
    #[arg(hide_short_help = true, long)]
    pub no_server_tokenizer: bool,
    /// The request timeout in seconds [default: 600]: how long a model call may wait for
    /// its whole reply, or a streamed call for its first token (the server reads the
    /// whole prompt first: minutes for long prompts on a CPU).
    #[arg(hide_short_help = true, long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Seconds opening a connection to the server may take [default: 10].
    #[arg(hide_short_help = true, long, value_name = "SECS")]
    pub connect_timeout: Option<f64>,
    /// Seconds a streamed reply may stay silent between two tokens [default: 120]; a
    /// stream that keeps producing is never cut.
    #[arg(hide_short_help = true, long, value_name = "SECS")]
    pub idle_timeout: Option<f64>,
    /// The most bytes read of one model reply, streamed or not (SSE framing included)
    /// [default: 8388608, 8 MiB]: a larger reply is refused, never held whole.
    #[arg(hide_short_help = true, long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_reply_bytes: Option<u64>,
    /// The sampling temperature [default: 0.1].
    #[arg(long, value_name = "T", value_parser = parse_temperature)]
    pub temperature: Option<f32>,
    /// Nucleus sampling: sample from the tokens of this cumulative probability (0 to 1)
    /// [default: the server's].
    #[arg(hide_short_help = true, long, value_name = "P", value_parser = parse_top_p)]
    pub top_p: Option<f32>,
    /// The sampling seed, for reproducible answers where the server honours it.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub seed: Option<i64>,
    /// A JSON object merged into every request body, for server-specific parameters
    /// (for example '{"top_k": 40, "cache_prompt": true}'); its fields win over synthkit's.
    #[arg(hide_short_help = true, long, value_name = "JSON", value_parser = parse_extra_body)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// The tokenizer for splitting and budgets: cl100k_base or o200k_base [default: the
    /// model's own when known, else cl100k_base].
    #[arg(hide_short_help = true, long, value_name = "NAME", value_parser = parse_tokenizer)]
    pub tokenizer: Option<BpeTokenizer>,
    /// Say the model takes images, whatever its server says (llama.cpp's /props, the
    /// models listing).
    #[arg(hide_short_help = true, long, overrides_with = "no_vision")]
    pub vision: bool,
    /// Say the model takes no images: image nodes are refused before any call.
    #[arg(hide_short_help = true, long, overrides_with = "vision")]
    pub no_vision: bool,
    /// What calls tell the server so that it reuses the prompt prefix they share (the
    /// system messages and template text). They never change the prompt, its count or a
    /// budget; a server that refuses one gets the call again without it, once.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "WHICH",
        default_value = "auto"
    )]
    pub reuse_hints: ReuseHints,
}

impl ModelArgs {
    /// `--vision` / `--no-vision`: whether the model takes images, if said.
    pub fn vision_override(&self) -> Option<bool> {
        match (self.vision, self.no_vision) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }

    /// The API a model server speaks: `--api` (or `SYNTHKIT_API`), else openai.
    pub fn api(&self) -> Api {
        self.api.unwrap_or_default()
    }

    /// The variable that holds the API key: `--api-key-env`, else the API's own
    /// (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
    pub fn api_key_env(&self) -> &str {
        match (&self.api_key_env, self.api()) {
            (Some(name), _) => name,
            (None, Api::Openai) => OpenAiConfig::DEFAULT_KEY_VAR,
            (None, Api::Anthropic) => AnthropicConfig::DEFAULT_KEY_VAR,
        }
    }

    /// The server's base URL: `--base-url` (or `SYNTHKIT_BASE_URL`), else the API's own
    /// variable (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`); with the name of where it came
    /// from.
    pub fn base_url(&self) -> Option<(String, &'static str)> {
        let given = |u: &str| Some(u.trim().to_string()).filter(|u| !u.is_empty());
        let var = match self.api() {
            Api::Openai => OPENAI_BASE_URL_VAR,
            Api::Anthropic => AnthropicConfig::BASE_URL_VAR,
        };
        self.base_url
            .as_deref()
            .and_then(given)
            .map(|u| (u, "--base-url"))
            .or_else(|| {
                std::env::var(var)
                    .ok()
                    .as_deref()
                    .and_then(given)
                    .map(|u| (u, var))
            })
    }

    /// The backend these flags ask for: `--llm`, else a server when a base URL (or
    /// `--api anthropic`) is given; a server speaks the API of `--api`.
    pub fn kind(&self) -> LlmKind {
        let server = match self.api() {
            Api::Openai => LlmKind::Openai,
            Api::Anthropic => LlmKind::Anthropic,
        };
        match self.llm {
            Some(LlmKind::Extractive) => LlmKind::Extractive,
            Some(_) => server,
            None if self.base_url().is_some() || self.api == Some(Api::Anthropic) => server,
            None => LlmKind::Extractive,
        }
    }

    /// What to say when a server that needs a key (the API's own URL) has none.
    pub fn no_key(&self, url: &str) -> String {
        format!(
            "no API key for {url}: set the environment variable {} (or name another one with --api-key-env), or point --base-url at a local server",
            self.api_key_env()
        )
    }

    /// The base URL, checked to be http(s), with where it came from.
    fn checked_base_url(&self) -> Result<Option<String>> {
        let Some((url, from)) = self.base_url() else {
            return Ok(None);
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(usage(format!(
                "{from} must start with http:// or https://, got `{}`",
                synthkit::secret::redact_url(&url)
            )));
        }
        Ok(Some(url))
    }

    /// Whether a model is named (`--model` or `SYNTHKIT_MODEL`).
    fn model_named(&self) -> bool {
        self.model.is_some() || std::env::var("SYNTHKIT_MODEL").is_ok_and(|m| !m.trim().is_empty())
    }

    /// Sets the flags' base URL, timeouts and reply cap on `transport`; returns the base
    /// URL given, if any (it decides whether the server is asked for its model).
    fn transport(&self, transport: &mut Transport) -> Result<Option<String>> {
        let url = self.checked_base_url()?;
        if let Some(url) = &url {
            transport.base_url.clone_from(url);
        }
        let given =
            |flag, secs, default| Ok::<_, anyhow::Error>(seconds(flag, secs)?.unwrap_or(default));
        transport.timeout = given("--timeout", self.timeout, transport.timeout)?;
        transport.connect_timeout = given(
            "--connect-timeout",
            self.connect_timeout,
            transport.connect_timeout,
        )?;
        transport.idle_timeout =
            given("--idle-timeout", self.idle_timeout, transport.idle_timeout)?;
        if let Some(n) = self.max_reply_bytes {
            transport.max_reply_bytes = usize::try_from(n).unwrap_or(usize::MAX);
        }
        Ok(url)
    }

    /// Sets the flags' temperature, `top_p` and seed on `sampling`.
    fn sampling(&self, sampling: &mut Sampling) {
        sampling.temperature = self.temperature.or(sampling.temperature);
        sampling.top_p = self.top_p.or(sampling.top_p);
        sampling.seed = self.seed.or(sampling.seed);
    }

    /// The config of a server of the API `A` from the environment and the flags both APIs
    /// share: the base URL, timeouts and reply cap, the sampling, whether to ask the
    /// server which model it serves (no model named, a base URL given, and not the API's
    /// own server, whose list is no answer), the server tokenizer, the model's name,
    /// window and output reserve, and the extra body fields. Fails with the error of a
    /// bad base URL or timeout.
    fn server_config<A: HttpApi>(&self) -> Result<HttpConfig<A>> {
        let mut config = HttpConfig::<A>::from_env_with_key_var(self.api_key_env());
        let url = self.transport(&mut config.transport)?;
        self.sampling(&mut config.sampling);
        config.discover_model = !self.model_named() && url.is_some() && !config.is_api_server();
        config.server_tokenizer = self.server_tokenizer;
        if let Some(m) = &self.model {
            config.model.clone_from(m);
        }
        config.context_window = self.context_window.or(config.context_window);
        config.num_output = self.num_output.unwrap_or(config.num_output);
        config.vision = self.vision_override();
        config
            .extra_body
            .extend(self.extra_body.clone().unwrap_or_default());
        Ok(config)
    }

    /// The Anthropic Messages API config from the environment and the flags (`--seed`
    /// and `--completion-api` are OpenAI's only: refused).
    pub fn anthropic_config(&self) -> Result<AnthropicConfig> {
        if self.seed.is_some() || self.completion_api {
            return Err(usage(
                "--seed and --completion-api are not part of Anthropic's Messages API: drop them, or use --api openai",
            ));
        }
        self.server_config::<Anthropic>()
    }

    /// The OpenAI-compatible config from the environment and the flags.
    pub fn openai_config(&self) -> Result<OpenAiConfig> {
        let config = self.server_config::<OpenAi>()?;
        Ok(config.with_chat(!self.completion_api))
    }
}
