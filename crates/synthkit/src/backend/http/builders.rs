//! The `with_*` methods every HTTP backend's config has, written once.
//!
//! A config holds a [`Transport`](super::Transport) in `transport`, a
//! [`Sampling`](super::Sampling) in `sampling`, and the model's facts in fields of the
//! same names on every backend (`model`, `context_window`, `num_output`,
//! `system_prompt`, `server_tokenizer`, `discover_model`, `extra_body`).
//! `config_builders!(Config, own fields: [name: default, ..])` gives it its defaults (`with_transport_for`),
//! its `Debug` (the shared fields and the named own ones, never the key nor `extra_body`'s values) and the builder methods for all of them, so the
//! builders keep their short names (`config.with_timeout(..)`) without a trait to
//! import, and each backend writes only its own options. It also gives the
//! constructors (`new`, `from_env`, `from_env_with_key_var`, `from_lookup`, `Default`),
//! from the config's `DEFAULT_BASE_URL`, `DEFAULT_MODEL`, `DEFAULT_KEY_VAR` and
//! `BASE_URL_VAR`.

/// Implements the shared `with_*` methods on a backend config (see the module doc).
macro_rules! config_builders {
    ($config:ty, own fields: [$($own:ident: $default:expr),* $(,)?]) => {
        impl $config {
            /// A config for `model` over `transport`: the shared fields' defaults (no
            /// context window, [`ModelInfo::DEFAULT_NUM_OUTPUT`](crate::model::ModelInfo::DEFAULT_NUM_OUTPUT),
            /// no system prompt, no server tokenizer or model discovery, no extra body
            /// fields) and the backend's own defaults.
            fn with_transport_for(model: impl Into<String>, transport: $crate::backend::http::Transport) -> Self {
                Self {
                    transport,
                    sampling: $crate::backend::http::Sampling::default(),
                    model: model.into(),
                    context_window: None,
                    num_output: $crate::model::ModelInfo::DEFAULT_NUM_OUTPUT,
                    system_prompt: None,
                    server_tokenizer: false,
                    discover_model: false,
                    extra_body: serde_json::Map::new(),
                    $($own: $default,)*
                }
            }
        }

        impl std::fmt::Debug for $config {
            /// Every field, the backend's own after `model`; of `extra_body` only the
            /// names (the transport hides the key itself).
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($config))
                    .field("transport", &self.transport)
                    .field("sampling", &self.sampling)
                    .field("model", &self.model)
                    $(.field(stringify!($own), &self.$own))*
                    .field("context_window", &self.context_window)
                    .field("num_output", &self.num_output)
                    .field("system_prompt", &self.system_prompt)
                    .field("server_tokenizer", &self.server_tokenizer)
                    .field("discover_model", &self.discover_model)
                    .field("extra_body", &self.extra_body.keys().collect::<Vec<_>>())
                    .finish()
            }
        }

        impl $config {
            /// A config for `model` at the API's own server ([`Self::DEFAULT_BASE_URL`]),
            /// with no key and the defaults (the [`Transport`](crate::backend::http::Transport)
            /// and [`Sampling`](crate::backend::http::Sampling) defaults every HTTP backend
            /// has).
            pub fn new(model: impl Into<String>) -> Self {
                Self::with_transport_for(
                    model,
                    $crate::backend::http::Transport::new(Self::DEFAULT_BASE_URL),
                )
            }

            /// A config from the environment: the base URL from `SYNTHKIT_BASE_URL`, else
            /// the variable [`Self::BASE_URL_VAR`], else [`Self::DEFAULT_BASE_URL`]; the
            /// model from `SYNTHKIT_MODEL`, else [`Self::DEFAULT_MODEL`]; the key from the
            /// variable [`Self::DEFAULT_KEY_VAR`] (empty means none).
            pub fn from_env() -> Self {
                Self::from_env_with_key_var(Self::DEFAULT_KEY_VAR)
            }

            /// Like [`Self::from_env`], with the key read from the variable `key_var`.
            pub fn from_env_with_key_var(key_var: &str) -> Self {
                Self::from_lookup(key_var, |name| std::env::var(name).ok())
            }

            /// Like [`Self::from_env`], reading variables through `lookup` (for tests and
            /// for settings that come from elsewhere).
            pub fn from_lookup(key_var: &str, lookup: impl Fn(&str) -> Option<String>) -> Self {
                let vars = (Self::BASE_URL_VAR, key_var);
                let (transport, model) = $crate::backend::http::Transport::from_lookup(
                    Self::DEFAULT_BASE_URL,
                    vars,
                    lookup,
                );
                let model = model.unwrap_or_else(|| Self::DEFAULT_MODEL.to_string());
                Self::with_transport_for(model, transport)
            }

            setters! {
                /// Replaces the whole transport ([`Transport`](crate::backend::http::Transport)).
                pub fn with_transport(transport: $crate::backend::http::Transport) => transport;

                /// Replaces the whole sampling ([`Sampling`](crate::backend::http::Sampling)).
                pub fn with_sampling(sampling: $crate::backend::http::Sampling) => sampling;

                /// Sets the base URL ([`Transport::base_url`](crate::backend::http::Transport::base_url)).
                pub fn with_base_url(url: impl Into<String>) => via transport.with_base_url;

                /// Sets the API key.
                pub fn with_api_key(key: impl Into<secrecy::SecretString>) => via transport.with_api_key;

                /// Sets the request timeout ([`Transport::timeout`](crate::backend::http::Transport::timeout)).
                pub fn with_timeout(timeout: std::time::Duration) => via transport.with_timeout;

                /// Sets the connect timeout ([`Transport::connect_timeout`](crate::backend::http::Transport::connect_timeout)).
                pub fn with_connect_timeout(timeout: std::time::Duration) => via transport.with_connect_timeout;

                /// Sets the idle timeout between stream events
                /// ([`Transport::idle_timeout`](crate::backend::http::Transport::idle_timeout)).
                pub fn with_idle_timeout(timeout: std::time::Duration) => via transport.with_idle_timeout;

                /// Sends with `client` instead of a client of synthkit's own
                /// ([`Transport::http_client`](crate::backend::http::Transport::http_client)).
                pub fn with_http_client(client: reqwest::Client) => via transport.with_http_client;

                /// Sets the most bytes read of one reply
                /// ([`Transport::max_reply_bytes`](crate::backend::http::Transport::max_reply_bytes)).
                pub fn with_max_reply_bytes(bytes: usize) => via transport.with_max_reply_bytes;

                /// Sets the temperature; `None` leaves it to the server.
                pub fn with_temperature(temperature: impl Into<Option<f32>>) => via sampling.with_temperature;

                /// Sets `top_p`; `None` leaves it to the server.
                pub fn with_top_p(top_p: impl Into<Option<f32>>) => via sampling.with_top_p;

                /// Sets `top_k`; `None` leaves it to the server.
                pub fn with_top_k(top_k: impl Into<Option<u32>>) => via sampling.with_top_k;

                /// Sets the sampling `seed`; `None` leaves it to the server.
                pub fn with_seed(seed: impl Into<Option<i64>>) => via sampling.with_seed;

                /// Sets the stop texts ([`Sampling::stop`](crate::backend::http::Sampling::stop)).
                pub fn with_stop_sequences(stops: impl IntoIterator<Item = String>) => via sampling.with_stop;

                /// Sets the model name.
                pub fn with_model(model: impl Into<String>) => model;

                /// Sets the context window, overriding discovery.
                pub fn with_context_window(tokens: usize) => Some(context_window);

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
            pub fn with_extra_body(
                mut self,
                key: impl Into<String>,
                value: serde_json::Value,
            ) -> Self {
                self.extra_body.insert(key.into(), value);
                self
            }

            /// Adds every field of `fields` to every request body (a field already there
            /// is replaced).
            pub fn with_extra_body_fields(
                mut self,
                fields: serde_json::Map<String, serde_json::Value>,
            ) -> Self {
                self.extra_body.extend(fields);
                self
            }

            /// The base URL without its query and trailing slashes.
            pub fn base(&self) -> &str {
                self.transport.base()
            }

            /// The server root: the base URL without its query, trailing slashes and
            /// `/v1`.
            pub fn root_url(&self) -> &str {
                self.transport.root_url()
            }

            /// `path` under the base URL, with the base URL's query
            /// ([`Transport::api_url`](crate::backend::http::Transport::api_url)).
            pub fn api_url(&self, path: &str) -> String {
                self.transport.api_url(path)
            }

            /// `path` under the server root, with the base URL's query
            /// ([`Transport::root_join`](crate::backend::http::Transport::root_join)).
            pub fn root_join(&self, path: &str) -> String {
                self.transport.root_join(path)
            }

            /// Whether this is the API's own server ([`Self::DEFAULT_BASE_URL`]) with no
            /// key: front ends refuse such a config before any call.
            pub fn lacks_key(&self) -> bool {
                self.transport.lacks_key_for(Self::DEFAULT_BASE_URL)
            }

            /// The model's facts: the name, the window (the config's, else `discovered`,
            /// else [`ModelInfo::DEFAULT_CONTEXT_WINDOW`](crate::model::ModelInfo::DEFAULT_CONTEXT_WINDOW)),
            /// the output reserve and the system prompt.
            pub(crate) fn model_info(&self, discovered: Option<usize>) -> $crate::model::ModelInfo {
                $crate::model::ModelInfo::new(self.model.clone())
                    .with_context_window(
                        self.context_window
                            .or(discovered)
                            .unwrap_or($crate::model::ModelInfo::DEFAULT_CONTEXT_WINDOW),
                    )
                    .with_num_output(self.num_output)
                    .with_system_prompt(self.system_prompt.clone())
            }
        }

        impl Default for $config {
            fn default() -> Self {
                Self::new(Self::DEFAULT_MODEL)
            }
        }
    };
}

pub(crate) use config_builders;
