//! [`ScriptedLlama`]: a llama.cpp-like server (chat completions, `/props`, `/tokenize`,
//! `/apply-template`) whose replies follow a script of texts of varying length, each cut
//! at the request's `max_tokens`, and whose tokenizer is its own (not cl100k): one token
//! per `bytes_per_token` bytes of text, spaces included, rounded up (3: more tokens than
//! cl100k counts, as SmolLM2 gives; 6: fewer). Its chat template wraps each message in
//! `<|im_start|>role ... <|im_end|>` and adds a default system message when there is
//! none, as SmolLM2's does, so a prompt costs more here than a local count says.
//!
//! For tests of the plan: the calls and prompt tokens a run spends (recorded, as the
//! server charges them) against what was planned.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, response::IntoResponse};
use serde_json::{Value, json};

use crate::openai::chat_reply;
use crate::server::Server;

/// The default system message of the fake's chat template.
const DEFAULT_SYSTEM: &str = "You are a helpful assistant named Scripted, trained to answer.";

/// The fake's token count of `text`: one token per `per` bytes, rounded up.
pub fn count(text: &str, per: usize) -> usize {
    text.len().div_ceil(per.max(1))
}

/// The fake's chat template over `messages` (`[{role, content}]`), with the reply's
/// opening.
pub fn template(messages: &[Value]) -> String {
    let mut out = String::new();
    let has_system = messages.iter().any(|m| m["role"] == "system");
    if !has_system {
        out.push_str(&format!("<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"));
    }
    for m in messages {
        let role = m["role"].as_str().unwrap_or("user");
        let content = m["content"].as_str().unwrap_or("");
        out.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

/// `text` cut to its first words that fit `max_tokens`, and whether it was cut.
fn cut(text: &str, max_tokens: usize, per: usize) -> (String, bool) {
    let mut kept = String::new();
    for word in text.split_whitespace() {
        let longer = match kept.is_empty() {
            true => word.to_string(),
            false => format!("{kept} {word}"),
        };
        if count(&longer, per) > max_tokens {
            return (kept, true);
        }
        kept = longer;
    }
    (kept, false)
}

#[derive(Default)]
struct Record {
    calls: AtomicUsize,
    prompt_tokens: Mutex<Vec<usize>>,
}

#[derive(Clone)]
struct Fake {
    replies: Arc<Vec<String>>,
    n_ctx: usize,
    per: usize,
    record: Arc<Record>,
}

/// A running scripted server; dropping it stops it.
pub struct ScriptedLlama {
    /// `http://127.0.0.1:PORT/v1`.
    pub base: String,
    record: Arc<Record>,
    _server: Server,
}

impl ScriptedLlama {
    /// A server with a context window of `n_ctx` tokens (its `/props`) counting one token
    /// per `bytes_per_token` bytes, answering call `i` with `replies[i % replies.len()]`,
    /// cut at the request's `max_tokens`.
    pub fn start(n_ctx: usize, bytes_per_token: usize, replies: Vec<String>) -> Self {
        let record = Arc::new(Record::default());
        let fake = Fake {
            replies: Arc::new(replies),
            n_ctx,
            per: bytes_per_token,
            record: Arc::clone(&record),
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/props", get(props))
            .route("/tokenize", post(tokenize))
            .route("/apply-template", post(apply_template))
            .with_state(fake);
        let server = Server::start(app);
        Self {
            base: server.base.clone(),
            record,
            _server: server,
        }
    }

    /// Replies of varied length: long ones (cut at `max_tokens`), short ones and middling
    /// ones, in a fixed order.
    pub fn varied_replies() -> Vec<String> {
        let long = "The survey found that the observatory's mirror, cleaned every six months \
                    since the refurbishment, keeps its reflectivity; maintenance logs, budgets \
                    and the dome's motors are described at length with figures and dates. "
            .repeat(40);
        vec![
            long.clone(),
            "Short answer.".to_string(),
            "A middling summary that names the mirror, the dome and the schedule of cleaning."
                .repeat(3),
            long,
            "Yes.".to_string(),
        ]
    }

    /// Completion calls so far.
    pub fn calls(&self) -> usize {
        self.record.calls.load(Ordering::SeqCst)
    }

    /// Each completion call's prompt tokens, as the server charged them.
    pub fn prompt_tokens(&self) -> Vec<usize> {
        self.record.prompt_tokens.lock().unwrap().clone()
    }
}

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": "scripted", "object": "model"}]}))
}

async fn props(State(fake): State<Fake>) -> Json<Value> {
    Json(json!({
        "default_generation_settings": {"n_ctx": fake.n_ctx},
        "total_slots": 1,
    }))
}

/// llama.cpp's `/tokenize`: `{content, add_special}` → `{tokens}` (BOS is one more token).
async fn tokenize(State(fake): State<Fake>, Json(body): Json<Value>) -> Json<Value> {
    let text = body["content"].as_str().unwrap_or("");
    let special = usize::from(body["add_special"].as_bool() == Some(true));
    let tokens: Vec<u32> = (0..count(text, fake.per) + special)
        .map(|i| i as u32)
        .collect();
    Json(json!({ "tokens": tokens }))
}

async fn apply_template(Json(body): Json<Value>) -> Json<Value> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    Json(json!({ "prompt": template(&messages) }))
}

async fn chat(State(fake): State<Fake>, Json(body): Json<Value>) -> axum::response::Response {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    // As the counter counts it: the template with BOS.
    let prompt = count(&template(&messages), fake.per) + 1;
    let i = fake.record.calls.fetch_add(1, Ordering::SeqCst);
    fake.record.prompt_tokens.lock().unwrap().push(prompt);
    if prompt + 1 > fake.n_ctx {
        let message = format!(
            "request ({prompt} tokens) exceeds the available context size ({} tokens)",
            fake.n_ctx
        );
        let error = json!({"error": {"code": 400, "message": message,
            "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": fake.n_ctx}});
        return (axum::http::StatusCode::BAD_REQUEST, Json(error)).into_response();
    }
    let max_tokens = body["max_tokens"]
        .as_u64()
        .or_else(|| body["max_completion_tokens"].as_u64())
        .unwrap_or(u64::MAX) as usize;
    let script = &fake.replies[i % fake.replies.len().max(1)];
    let (text, was_cut) = cut(script, max_tokens, fake.per);
    let completion = count(&text, fake.per);
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion});
    let finish = if was_cut { "length" } else { "stop" };
    Json(chat_reply("scripted", &text, finish, &usage)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_cuts_and_templates() {
        assert_eq!(count("a abcd abcdefg", 3), 5);
        let (text, was_cut) = cut("aaa bbb ccc", 3, 3);
        assert_eq!((text.as_str(), was_cut), ("aaa bbb", true));
        assert!(!cut("aaa", 5, 3).1);
        let t = template(&[json!({"role": "user", "content": "hi"})]);
        assert!(t.contains(DEFAULT_SYSTEM) && t.ends_with("assistant\n"));
    }
}
