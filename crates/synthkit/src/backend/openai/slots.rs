//! How many requests a server runs at once: llama.cpp's `GET /props` `total_slots`.

use std::time::Duration;

use reqwest::header::AUTHORIZATION;

use super::OpenAiConfig;
use crate::backend::http::discovery::slots_in;
use crate::backend::http::{Link, key_headers};

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
    let transport = config.transport.capped(PROPS_TIMEOUT);
    let link = Link::new(&transport).ok()?;
    let headers = key_headers(AUTHORIZATION, "Bearer ", transport.api_key.as_ref()).ok()?;
    let url = config.root_join("/props");
    let props = link.discover(&transport, &url, headers).await?;
    slots_in(&props)
}
