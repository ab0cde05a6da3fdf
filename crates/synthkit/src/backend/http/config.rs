//! [`HttpConfig`]: one HTTP backend's config, the same for every API: how to reach the
//! server ([`Transport`]), how it samples ([`Sampling`]), the model's facts, and the
//! API's own options (`api`). Its defaults, `Debug`, builders and constructors are
//! written once here for every [`HttpApi`].

use std::fmt;
use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Map, Value};

use super::api::HttpApi;
use super::{Sampling, Transport};
use crate::layer::stack::CacheIdentity;
use crate::model::ModelInfo;

/// How to reach a server of the API `A` and what to ask of it. The backends name it:
/// [`OpenAiConfig`](crate::backend::openai::OpenAiConfig),
/// `anthropic::AnthropicConfig` (feature `anthropic`).
///
/// Build with [`HttpConfig::new`] or [`HttpConfig::from_env`] and the `with_*` methods.
/// Where the server is and how to reach it is its [`Transport`] (the same for every
/// API): the API key is a [`SecretString`] that never appears in `Debug` output, logs or
/// errors, and a base URL with user-info (`http://user:password@host/v1`, sent as basic
/// authentication) is shown without it everywhere ([`crate::secret::redact_url`]:
/// `http://***@host/v1`). `Debug` shows of `extra_body` only the names. The config is
/// not serializable.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpConfig<A: HttpApi> {
    /// How to reach the server: the API base URL (default [`HttpConfig::DEFAULT_BASE_URL`]),
    /// the key (local servers need none), the timeouts, the client and the reply cap.
    pub transport: Transport,
    /// How the server samples (`temperature`, `top_p`, `top_k`, `seed`, the stop texts;
    /// those not set are not sent).
    pub sampling: Sampling,
    /// The model name sent with every request.
    pub model: String,
    /// The context window, if known; else `connect` asks the server (llama.cpp's
    /// `/props`, a `/models` listing), and failing that
    /// [`ModelInfo::DEFAULT_CONTEXT_WINDOW`] is used.
    pub context_window: Option<usize>,
    /// Tokens reserved for the output (default 256).
    pub num_output: usize,
    /// A system prompt for every request (reported by `info()`, added by the synthesizer).
    pub system_prompt: Option<String>,
    /// Whether `connect` asks the server to count prompts exactly (OpenAI-compatible
    /// servers' `/tokenize`, the Messages API's `/v1/messages/count_tokens`; default
    /// false).
    pub server_tokenizer: bool,
    /// Whether `connect` asks the server which model it serves (its models listing) and
    /// uses the first one's id instead of [`HttpConfig::model`] (default false).
    pub discover_model: bool,
    /// Extra fields merged into every request body; they override the fields synthkit
    /// sets (`cache_prompt`, `min_p`, ...).
    pub extra_body: Map<String, Value>,
    /// Whether the model takes images, over what its server says (`None`, the default:
    /// as llama.cpp's `/props` or the models listing says): the front ends'
    /// `--vision`/`--no-vision`.
    pub vision: Option<bool>,
    /// The API's own options.
    pub api: A::Options,
}

impl<A: HttpApi> fmt::Debug for HttpConfig<A> {
    /// Every field; of `extra_body` only the names (the transport hides the key itself).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(A::CONFIG_NAME)
            .field("transport", &self.transport)
            .field("sampling", &self.sampling)
            .field("model", &self.model)
            .field("api", &self.api)
            .field("context_window", &self.context_window)
            .field("num_output", &self.num_output)
            .field("system_prompt", &self.system_prompt)
            .field("server_tokenizer", &self.server_tokenizer)
            .field("discover_model", &self.discover_model)
            .field("extra_body", &self.extra_body.keys().collect::<Vec<_>>())
            .field("vision", &self.vision)
            .finish()
    }
}

impl<A: HttpApi> Default for HttpConfig<A> {
    fn default() -> Self {
        Self::new(A::DEFAULT_MODEL)
    }
}

impl<A: HttpApi> HttpConfig<A> {
    /// The API's own server.
    pub const DEFAULT_BASE_URL: &'static str = A::DEFAULT_BASE_URL;
    /// The model used when none is named.
    pub const DEFAULT_MODEL: &'static str = A::DEFAULT_MODEL;
    /// The environment variable read for the API key by [`HttpConfig::from_env`].
    pub const DEFAULT_KEY_VAR: &'static str = A::DEFAULT_KEY_VAR;
    /// The environment variable read for the base URL after `SYNTHKIT_BASE_URL`.
    pub const BASE_URL_VAR: &'static str = A::BASE_URL_VAR;

    /// A config for `model` over `transport`: no context window,
    /// [`ModelInfo::DEFAULT_NUM_OUTPUT`], no system prompt, no server tokenizer or model
    /// discovery, no extra body fields, and the API's default options.
    fn with_transport_for(model: impl Into<String>, transport: Transport) -> Self {
        Self {
            transport,
            sampling: Sampling::default(),
            model: model.into(),
            context_window: None,
            num_output: ModelInfo::DEFAULT_NUM_OUTPUT,
            system_prompt: None,
            server_tokenizer: false,
            discover_model: false,
            extra_body: Map::new(),
            vision: None,
            api: A::Options::default(),
        }
    }

    /// A config for `model` at the API's own server ([`Self::DEFAULT_BASE_URL`]), with no
    /// key and the defaults (the [`Transport`] and [`Sampling`] defaults every HTTP
    /// backend has).
    pub fn new(model: impl Into<String>) -> Self {
        Self::with_transport_for(model, Transport::new(A::DEFAULT_BASE_URL))
    }

    /// A config from the environment: the base URL from `SYNTHKIT_BASE_URL`, else the
    /// variable [`Self::BASE_URL_VAR`], else [`Self::DEFAULT_BASE_URL`]; the model from
    /// `SYNTHKIT_MODEL`, else [`Self::DEFAULT_MODEL`]; the key from the variable
    /// [`Self::DEFAULT_KEY_VAR`] (empty means none).
    pub fn from_env() -> Self {
        Self::from_env_with_key_var(A::DEFAULT_KEY_VAR)
    }

    /// Like [`Self::from_env`], with the key read from the variable `key_var`.
    pub fn from_env_with_key_var(key_var: &str) -> Self {
        Self::from_lookup(key_var, |name| std::env::var(name).ok())
    }

    /// Like [`Self::from_env`], reading variables through `lookup` (for tests and for
    /// settings that come from elsewhere).
    pub fn from_lookup(key_var: &str, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let vars = (A::BASE_URL_VAR, key_var);
        let (transport, model) = Transport::from_lookup(A::DEFAULT_BASE_URL, vars, lookup);
        let model = model.unwrap_or_else(|| A::DEFAULT_MODEL.to_string());
        Self::with_transport_for(model, transport)
    }

    setters! {
        /// Replaces the whole transport ([`Transport`]).
        pub fn with_transport(transport: Transport) => transport;

        /// Replaces the whole sampling ([`Sampling`]).
        pub fn with_sampling(sampling: Sampling) => sampling;

        /// Replaces the API's own options.
        pub fn with_api_options(options: A::Options) => api;

        /// Sets the base URL ([`Transport::base_url`]).
        pub fn with_base_url(url: impl Into<String>) => via transport.with_base_url;

        /// Sets the API key.
        pub fn with_api_key(key: impl Into<SecretString>) => via transport.with_api_key;

        /// Sets the request timeout ([`Transport::timeout`]).
        pub fn with_timeout(timeout: Duration) => via transport.with_timeout;

        /// Sets the connect timeout ([`Transport::connect_timeout`]).
        pub fn with_connect_timeout(timeout: Duration) => via transport.with_connect_timeout;

        /// Sets the idle timeout between stream events ([`Transport::idle_timeout`]).
        pub fn with_idle_timeout(timeout: Duration) => via transport.with_idle_timeout;

        /// Sends with `client` instead of a client of synthkit's own
        /// ([`Transport::http_client`]).
        pub fn with_http_client(client: reqwest::Client) => via transport.with_http_client;

        /// Sets the most bytes read of one reply ([`Transport::max_reply_bytes`]).
        pub fn with_max_reply_bytes(bytes: usize) => via transport.with_max_reply_bytes;

        /// Sets the temperature; `None` leaves it to the server.
        pub fn with_temperature(temperature: impl Into<Option<f32>>) => via sampling.with_temperature;

        /// Sets `top_p`; `None` leaves it to the server.
        pub fn with_top_p(top_p: impl Into<Option<f32>>) => via sampling.with_top_p;

        /// Sets `top_k`; `None` leaves it to the server.
        pub fn with_top_k(top_k: impl Into<Option<u32>>) => via sampling.with_top_k;

        /// Sets the sampling `seed`; `None` leaves it to the server.
        pub fn with_seed(seed: impl Into<Option<i64>>) => via sampling.with_seed;

        /// Sets the stop texts ([`Sampling::stop`]).
        pub fn with_stop_sequences(stops: impl IntoIterator<Item = String>) => via sampling.with_stop;

        /// Sets the model name.
        pub fn with_model(model: impl Into<String>) => model;

        /// Sets the context window, overriding discovery.
        pub fn with_context_window(tokens: usize) => Some(context_window);

        /// Says whether the model takes images, over what its server says.
        pub fn with_vision(vision: Option<bool>) => vision;

        /// Sets the output reserve.
        pub fn with_num_output(tokens: usize) => num_output;

        /// Sets the system prompt.
        pub fn with_system_prompt(prompt: impl Into<Option<String>>) => system_prompt;

        /// Whether `connect` asks the server to count prompts exactly (its
        /// `server_tokenizer` field).
        pub fn with_server_tokenizer(enabled: bool) => server_tokenizer;

        /// Whether `connect` uses the first model the server lists (its
        /// `discover_model` field).
        pub fn with_model_discovery(enabled: bool) => discover_model;
    }

    /// Adds a field to every request body.
    pub fn with_extra_body(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra_body.insert(key.into(), value);
        self
    }

    /// Adds every field of `fields` to every request body (a field already there is
    /// replaced).
    pub fn with_extra_body_fields(mut self, fields: Map<String, Value>) -> Self {
        self.extra_body.extend(fields);
        self
    }

    /// The base URL without its query and trailing slashes.
    pub fn base(&self) -> &str {
        self.transport.base()
    }

    /// The server root: the base URL without its query, trailing slashes and `/v1`.
    pub fn root_url(&self) -> &str {
        self.transport.root_url()
    }

    /// `path` under the base URL, with the base URL's query ([`Transport::api_url`]).
    pub fn api_url(&self, path: &str) -> String {
        self.transport.api_url(path)
    }

    /// `path` under the server root, with the base URL's query
    /// ([`Transport::root_join`]).
    pub(crate) fn root_join(&self, path: &str) -> String {
        self.transport.root_join(path)
    }

    /// Whether this is the API's own server ([`Self::DEFAULT_BASE_URL`]) with no key:
    /// front ends refuse such a config before any call.
    pub(crate) fn lacks_key(&self) -> bool {
        self.transport.lacks_key_for(A::DEFAULT_BASE_URL)
    }

    /// Whether the base URL is the API's own server ([`Self::DEFAULT_BASE_URL`]), whose
    /// models listing is no answer to "which model does it serve".
    pub fn is_api_server(&self) -> bool {
        self.transport.is_server(A::DEFAULT_BASE_URL)
    }

    /// Where model calls go (`{base}/chat/completions`, `{root}/v1/messages`, ...).
    pub fn endpoint(&self) -> String {
        A::endpoint(self)
    }

    /// What replies depend on beyond the request, for response-cache keys: the API and
    /// its endpoint, the sampling parameters (those after the temperature only when
    /// set), the API's options and the extra body fields. The model's name is part of
    /// every key already.
    pub fn cache_identity(&self) -> CacheIdentity {
        let params = format!(
            "{}extra_body={}{}",
            A::cache_params(self),
            Value::Object(self.extra_body.clone()),
            self.sampling.identity_tail()
        );
        CacheIdentity::new(format!("{} {}", A::NAME, self.endpoint()), params)
    }

    /// The model's facts: the name, the window (the config's, else `discovered`, else
    /// [`ModelInfo::DEFAULT_CONTEXT_WINDOW`]), the output reserve and the system prompt.
    pub(crate) fn model_info(&self, discovered: Option<usize>) -> ModelInfo {
        ModelInfo::new(self.model.clone())
            .with_context_window(
                self.context_window
                    .or(discovered)
                    .unwrap_or(ModelInfo::DEFAULT_CONTEXT_WINDOW),
            )
            .with_num_output(self.num_output)
            .with_system_prompt(self.system_prompt.clone())
    }
}
