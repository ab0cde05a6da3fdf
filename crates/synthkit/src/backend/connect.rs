//! One way from a server's settings to a connected model, ready for the stack.
//!
//! Every front end (the CLI's `ask`/`summarize`/`batch`, `synthkit serve`, the Python
//! bindings) turns its own flags or arguments into an [`OpenAiConfig`] or an
//! `AnthropicConfig` and hands it to [`Connect`], which does the rest the same way for
//! all of them: it refuses the API's own server without a key ([`ConnectError::NoKey`]),
//! connects (discovery: the model, the window, the slots, as the config asks), chooses how
//! prompts are counted ([`Counting`]) and returns a [`ConnectedServer`]: the model, its
//! cache identity, the server's slots and a [`StackBuilder`] with the calls in flight set.
//! Front ends keep only their own parsing and how they present a [`ConnectError`] (which
//! names no key and no URL user-info: the configs keep both secret).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use synthkit::backend::connect::{Connect, Counting};
//! use synthkit::backend::openai::OpenAiConfig;
//!
//! let config = OpenAiConfig::new("qwen2.5").with_base_url("http://127.0.0.1:8080/v1");
//! let server = Connect::new(config)
//!     .counting(Counting::ServerWhereAvailable)
//!     .connect()
//!     .await?;
//! let stack = server.stack_builder(8).build();
//! println!("{} (slots {:?})", stack.model().info().name, server.server_slots);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

#[cfg(feature = "anthropic")]
use crate::backend::anthropic::AnthropicConfig;
use crate::backend::http::clock::ServedModel;
use crate::backend::http::{HttpApi, HttpConfig, HttpModel};
#[cfg(feature = "openai")]
use crate::backend::openai::OpenAiConfig;
use crate::backend::probe::Readiness;
use crate::layer::stack::{CacheIdentity, ModelStack, StackBuilder};
use crate::model::{LanguageModel, ModelError};
use crate::text::SharedTokenizer;

/// The server to connect to: which API it speaks, with that API's config.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServerSettings {
    /// An OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama).
    #[cfg(feature = "openai")]
    OpenAi(Box<OpenAiConfig>),
    /// A server of Anthropic's Messages API (Anthropic, llama.cpp).
    #[cfg(feature = "anthropic")]
    Anthropic(Box<AnthropicConfig>),
    /// The test-only echo API (`backend::echo`): what a third API adds here.
    #[cfg(test)]
    Echo(Box<crate::backend::echo::EchoConfig>),
}

#[cfg(test)]
impl From<crate::backend::echo::EchoConfig> for ServerSettings {
    fn from(config: crate::backend::echo::EchoConfig) -> Self {
        ServerSettings::Echo(Box::new(config))
    }
}

#[cfg(feature = "openai")]
impl From<OpenAiConfig> for ServerSettings {
    fn from(config: OpenAiConfig) -> Self {
        ServerSettings::OpenAi(Box::new(config))
    }
}

#[cfg(feature = "anthropic")]
impl From<AnthropicConfig> for ServerSettings {
    fn from(config: AnthropicConfig) -> Self {
        ServerSettings::Anthropic(Box::new(config))
    }
}

impl ServerSettings {
    /// The API's name (`openai`, `anthropic`): the backend's name in reports.
    pub fn api_name(&self) -> &'static str {
        match self {
            #[cfg(feature = "openai")]
            ServerSettings::OpenAi(_) => <crate::backend::openai::OpenAi as HttpApi>::NAME,
            #[cfg(feature = "anthropic")]
            ServerSettings::Anthropic(_) => <crate::backend::anthropic::Anthropic as HttpApi>::NAME,
            #[cfg(test)]
            ServerSettings::Echo(_) => <crate::backend::echo::Echo as HttpApi>::NAME,
        }
    }

    /// The probe that tells whether the server is there (its models listing, with the
    /// headers of its API).
    pub fn readiness(&self) -> Readiness {
        match self {
            #[cfg(feature = "openai")]
            ServerSettings::OpenAi(c) => Readiness::of_server(c.as_ref()),
            #[cfg(feature = "anthropic")]
            ServerSettings::Anthropic(c) => Readiness::of_server(c.as_ref()),
            #[cfg(test)]
            ServerSettings::Echo(c) => Readiness::of_server(c.as_ref()),
        }
    }

    /// The API's own server (`https://api.openai.com/v1`, `https://api.anthropic.com`).
    pub(crate) fn api_url(&self) -> &'static str {
        match self {
            #[cfg(feature = "openai")]
            ServerSettings::OpenAi(_) => OpenAiConfig::DEFAULT_BASE_URL,
            #[cfg(feature = "anthropic")]
            ServerSettings::Anthropic(_) => AnthropicConfig::DEFAULT_BASE_URL,
            #[cfg(test)]
            ServerSettings::Echo(_) => crate::backend::echo::EchoConfig::DEFAULT_BASE_URL,
        }
    }

    /// Whether the settings point at the API's own server without a key.
    pub(crate) fn lacks_key(&self) -> bool {
        match self {
            #[cfg(feature = "openai")]
            ServerSettings::OpenAi(c) => c.lacks_key(),
            #[cfg(feature = "anthropic")]
            ServerSettings::Anthropic(c) => c.lacks_key(),
            #[cfg(test)]
            ServerSettings::Echo(c) => c.lacks_key(),
        }
    }

    /// `Err(ConnectError::NoKey)` when the settings point at the API's own server
    /// without a key; the check [`Connect::connect`] makes first, for front ends that
    /// refuse such settings before they open anything else.
    pub fn check_key(&self) -> Result<(), ConnectError> {
        if self.lacks_key() {
            return Err(ConnectError::NoKey {
                url: self.api_url(),
            });
        }
        Ok(())
    }
}

/// How a connected model counts prompts for budgets and packing.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Counting {
    /// As the config says (its `server_tokenizer`: ask the server and warn where it
    /// cannot count), else the built-in tokenizer.
    #[default]
    AsConfigured,
    /// Also ask the server for exact counts when the config's own probe did not find a
    /// counter (llama.cpp's and vLLM's `/tokenize`, `/v1/messages/count_tokens`),
    /// quietly keeping the built-in tokenizer where it cannot count.
    ServerWhereAvailable,
    /// Count with this tokenizer; the server is asked only if the config says so.
    Tokenizer(SharedTokenizer),
}

/// Why [`Connect::connect`] gave no model. Names neither the key nor a URL's user-info.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The settings point at the API's own server (`url`), which needs a key, and have
    /// none.
    #[error("no API key for {url}")]
    NoKey {
        /// The API's own server.
        url: &'static str,
    },
    /// The client could not be set up (a bad base URL, a TLS setup failure, ...).
    #[error("cannot set up the model client: {0}")]
    Setup(#[source] ModelError),
}

/// Connects to a model server: [`Connect::new`], the options, then [`Connect::connect`].
#[derive(Debug, Clone)]
#[must_use]
pub struct Connect {
    server: ServerSettings,
    counting: Counting,
    require_key: bool,
}

impl Connect {
    /// Connects to `server`, counting as the config says and refusing the API's own
    /// server without a key.
    pub fn new(server: impl Into<ServerSettings>) -> Self {
        Self {
            server: server.into(),
            counting: Counting::default(),
            require_key: true,
        }
    }

    setters! {
        /// Sets how prompts are counted.
        pub fn counting(counting: Counting) => counting;

        /// Whether to refuse the API's own server without a key (`true` by default; `false`
        /// for a plan that makes no model call, or a caller that checked already).
        pub fn require_key(require: bool) => require_key;
    }

    /// Connects: the key check, the config's discovery (model, window, slots, and the
    /// server's counter when the config asks), then [`Counting`]. Makes no model call.
    pub async fn connect(self) -> Result<ConnectedServer, ConnectError> {
        if self.require_key {
            self.server.check_key()?;
        }
        match self.server {
            #[cfg(feature = "openai")]
            ServerSettings::OpenAi(config) => connected(*config, self.counting).await,
            #[cfg(feature = "anthropic")]
            ServerSettings::Anthropic(config) => connected(*config, self.counting).await,
            #[cfg(test)]
            ServerSettings::Echo(config) => connected(*config, self.counting).await,
        }
    }
}

/// A connected server's model and what the stack and the reports need of it.
#[derive(Clone)]
#[non_exhaustive]
pub struct ConnectedServer {
    /// The model, without layers.
    pub model: Arc<dyn LanguageModel>,
    /// What the replies depend on beyond the request (for cache keys).
    pub identity: CacheIdentity,
    /// The requests the server runs at once, when it said (llama.cpp's `/props`).
    pub server_slots: Option<usize>,
    /// How to ask whether the server is still there (its models listing, with the
    /// headers of its API).
    pub readiness: Readiness,
    /// Where the model records the name the server says answered.
    served: ServedModel,
}

impl ConnectedServer {
    /// The model name the server gave in its latest reply, if it gave one (it can
    /// differ from the configured name: servers that serve one model, such as
    /// llama.cpp's, answer with their own).
    pub fn served_model(&self) -> Option<String> {
        self.served.get()
    }

    /// The stack's builder over the model: at most `max_in_flight` calls in flight
    /// (0: no cap), never more than the server's slots when it said. Add the rates,
    /// retries and cache (with [`ConnectedServer::identity`]) and build.
    pub fn stack_builder(&self, max_in_flight: usize) -> StackBuilder {
        ModelStack::builder_arc(Arc::clone(&self.model))
            .max_in_flight(max_in_flight)
            .server_slots(self.server_slots)
    }
}

impl std::fmt::Debug for ConnectedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectedServer")
            .field("model", &self.model.info().name)
            .field("server_slots", &self.server_slots)
            .finish_non_exhaustive()
    }
}

/// Connects to the server of `config`, counting as `counting` says.
async fn connected<A: HttpApi>(
    config: HttpConfig<A>,
    counting: Counting,
) -> Result<ConnectedServer, ConnectError> {
    let identity = config.cache_identity();
    let readiness = Readiness::of_server(&config);
    let model = HttpModel::connect(config)
        .await
        .map_err(ConnectError::Setup)?;
    let model = count(model, counting).await;
    Ok(ConnectedServer {
        identity,
        readiness,
        server_slots: model.server_slots(),
        served: model.served(),
        model: Arc::new(model),
    })
}

/// `model`, counting as `counting` says.
async fn count<A: HttpApi>(mut model: HttpModel<A>, counting: Counting) -> HttpModel<A> {
    match counting {
        Counting::AsConfigured => {}
        Counting::ServerWhereAvailable => {
            if model.counter().is_none() {
                model.use_server_counter().await;
            }
        }
        Counting::Tokenizer(tokenizer) => model = model.with_tokenizer(tokenizer),
    }
    model
}

#[cfg(all(test, feature = "openai"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_api_server_without_a_key_is_refused_before_any_request() {
        let config = OpenAiConfig::new("gpt-4o-mini");
        let settings = ServerSettings::from(config.clone());
        assert!(settings.lacks_key());
        let err = Connect::new(config).connect().await.unwrap_err();
        assert!(
            matches!(err, ConnectError::NoKey { url } if url == OpenAiConfig::DEFAULT_BASE_URL),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!("no API key for {}", OpenAiConfig::DEFAULT_BASE_URL)
        );
    }
}
