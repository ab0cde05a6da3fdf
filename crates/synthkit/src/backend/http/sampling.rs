//! [`Sampling`]: how the server picks the reply's tokens, for every HTTP backend.

use serde_json::{Map, Value, json};

/// How the server samples: temperature, nucleus, top-k, seed and stop texts. Each is
/// sent only when set (the temperature is 0.1 by default; the rest are left to the
/// server), under the API's own names.
///
/// ```
/// use synthkit::backend::http::Sampling;
///
/// let s = Sampling::default().with_top_p(0.9).with_seed(7);
/// assert_eq!(s.temperature, Some(Sampling::DEFAULT_TEMPERATURE));
/// assert_eq!((s.top_p, s.seed, s.top_k), (Some(0.9), Some(7), None));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Sampling {
    /// The sampling temperature (default 0.1); `None` leaves it to the server.
    pub temperature: Option<f32>,
    /// The nucleus-sampling `top_p` (default `None`: left to the server).
    pub top_p: Option<f32>,
    /// Sample from the `top_k` likeliest tokens (default `None`: left to the server;
    /// OpenAI's own API has none, llama.cpp and vLLM take it).
    pub top_k: Option<u32>,
    /// The sampling `seed` (default `None`: left to the server); servers that honour it
    /// (llama.cpp, vLLM, OpenAI) then sample reproducibly. Anthropic's Messages API has
    /// none.
    pub seed: Option<i64>,
    /// Texts that end a reply when the model writes them (OpenAI's `stop`, Anthropic's
    /// `stop_sequences`; default none).
    pub stop: Vec<String>,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: Some(Self::DEFAULT_TEMPERATURE),
            top_p: None,
            top_k: None,
            seed: None,
            stop: Vec::new(),
        }
    }
}

impl Sampling {
    /// The default sampling temperature.
    pub const DEFAULT_TEMPERATURE: f32 = 0.1;

    setters! {
        /// Sets the temperature; `None` leaves it to the server.
        pub fn with_temperature(temperature: impl Into<Option<f32>>) => temperature;

        /// Sets `top_p`; `None` leaves it to the server.
        pub fn with_top_p(top_p: impl Into<Option<f32>>) => top_p;

        /// Sets `top_k`; `None` leaves it to the server.
        pub fn with_top_k(top_k: impl Into<Option<u32>>) => top_k;

        /// Sets the sampling `seed`; `None` leaves it to the server.
        pub fn with_seed(seed: impl Into<Option<i64>>) => seed;
    }

    /// Sets the stop texts.
    pub fn with_stop(mut self, stops: impl IntoIterator<Item = String>) -> Self {
        self.stop = stops.into_iter().collect();
        self
    }

    /// Adds the fields that are set to a request `body`, the stop texts under `stop_key`.
    pub(crate) fn write(&self, body: &mut Map<String, Value>, stop_key: &str) {
        if let Some(t) = self.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = self.top_p {
            body.insert("top_p".into(), json!(p));
        }
        if let Some(k) = self.top_k {
            body.insert("top_k".into(), Value::from(k));
        }
        if let Some(seed) = self.seed {
            body.insert("seed".into(), Value::from(seed));
        }
        if !self.stop.is_empty() {
            body.insert(stop_key.into(), json!(self.stop));
        }
    }

    /// The part of a response-cache key after the temperature: the fields that are set,
    /// so the keys of runs without them stay as they were.
    pub(crate) fn identity_tail(&self) -> String {
        let mut tail = String::new();
        if let Some(p) = self.top_p {
            tail.push_str(&format!(" top_p={p:?}"));
        }
        if let Some(k) = self.top_k {
            tail.push_str(&format!(" top_k={k}"));
        }
        if let Some(seed) = self.seed {
            tail.push_str(&format!(" seed={seed}"));
        }
        if !self.stop.is_empty() {
            tail.push_str(&format!(" stop={:?}", self.stop));
        }
        tail
    }
}
