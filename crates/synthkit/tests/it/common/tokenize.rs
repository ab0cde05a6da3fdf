//! A fake llama.cpp `/tokenize` route for tests of the server counter.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{MethodRouter, post};
use serde_json::{Value, json};

/// `POST /tokenize` as llama.cpp answers it, one token per whitespace-separated word (the
/// token is the word's length in bytes; no `content`: no tokens). Counts its calls in
/// `calls`, and answers 500 to every call after the first `fail_after`.
pub fn llama_tokenize(calls: Arc<AtomicUsize>, fail_after: usize) -> MethodRouter {
    post(move |body: axum::Json<Value>| {
        let calls = calls.clone();
        async move {
            if calls.fetch_add(1, Ordering::SeqCst) >= fail_after {
                return (StatusCode::INTERNAL_SERVER_ERROR, "tokenizer down").into_response();
            }
            let text = body.get("content").and_then(Value::as_str).unwrap_or("");
            let tokens: Vec<u32> = text.split_whitespace().map(|w| w.len() as u32).collect();
            axum::Json(json!({ "tokens": tokens })).into_response()
        }
    })
}
