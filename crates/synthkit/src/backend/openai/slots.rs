//! How many requests a server runs at once: llama.cpp's `GET /props` `total_slots`.

use std::time::Duration;

use reqwest::header::AUTHORIZATION;
use secrecy::ExposeSecret;
use serde_json::Value;

use super::OpenAiConfig;
use crate::backend::http::discovery::slots_in;

/// How long the question may take.
const PROPS_TIMEOUT: Duration = Duration::from_secs(10);

/// The number of requests the server at `config`'s base URL processes at once, when it
/// says (llama.cpp's `/props` `total_slots`); `None` for servers that do not (OpenAI,
/// vLLM, Ollama) or when it cannot be asked. Never fails.
///
/// More calls than slots only queue at the server; with llama.cpp's unified KV cache
/// (its default) several long prompts at once can even exhaust the cache, so a client
/// should keep its calls in flight at or below this number (see
/// [`crate::layer::adaptive`]).
pub async fn server_slots(config: &OpenAiConfig) -> Option<usize> {
    let client = super::tokenizer::http_client(config)?;
    let mut req = client
        .get(format!("{}/props", config.root_url()))
        .timeout(PROPS_TIMEOUT);
    if let Some(key) = &config.api_key {
        let mut v =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
                .ok()?;
        v.set_sensitive(true);
        req = req.header(AUTHORIZATION, v);
    }
    let resp = req.send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let body = crate::backend::http::body::read_capped(resp, config.max_reply_bytes)
        .await
        .ok()?;
    let props: Value = serde_json::from_slice(&body).ok()?;
    slots_in(&props)
}
