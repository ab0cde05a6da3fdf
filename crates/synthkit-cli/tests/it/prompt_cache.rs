//! Issue 45: the prompt tokens a server read from its prompt cache are counted: `--json`'s
//! `usage.cached_prompt_tokens` and each step's, from `prompt_tokens_details` (and from
//! llama.cpp's `timings.cache_n` where the usage lacks them), and absent when none were.

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, error_reply};

use crate::common::{QUESTION, docs, json_of, stderr, synthkit};

/// A server that says it reused `details` (as `prompt_tokens_details`) and `timings`.
fn server(details: Value, timings: Value) -> Server {
    let chat = move |axum::Json(_): axum::Json<Value>| {
        let (details, timings) = (details.clone(), timings.clone());
        async move {
            let usage = json!({"prompt_tokens": 100, "completion_tokens": 4,
                               "prompt_tokens_details": details});
            let mut reply = chat_reply("m", "Every three months.", "stop", &usage);
            reply["timings"] = timings;
            axum::Json(reply).into_response()
        }
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .fallback(|| async { error_reply(404, None, "not found") });
    Server::start(app)
}

fn ask(server: &Server) -> Value {
    let dir = docs();
    let out = synthkit()
        .args(["ask", QUESTION, "--json", "--steps", "-q"])
        .args(["--base-url", &server.base, "--context-window", "4096"])
        .args(["--evidence", "off", "--on-unsupported", "warn"])
        .arg(dir.path())
        .env("OPENAI_API_KEY", "")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    json_of(&out)
}

#[test]
fn the_usage_counts_the_prompt_tokens_the_server_reused() {
    let v = ask(&server(json!({"cached_tokens": 60}), json!({"cache_n": 3})));
    assert_eq!(v["usage"]["prompt_tokens"], 100, "{v:#}");
    assert_eq!(v["usage"]["cached_prompt_tokens"], 60, "{v:#}");
    assert_eq!(v["steps"][0]["cached_prompt_tokens"], 60, "{v:#}");

    // llama.cpp without `prompt_tokens_details`: its timings say.
    let v = ask(&server(Value::Null, json!({"cache_n": 55, "prompt_n": 45})));
    assert_eq!(v["usage"]["cached_prompt_tokens"], 55, "{v:#}");

    // Nothing reused: the usage is as it always was.
    let v = ask(&server(json!({"cached_tokens": 0}), Value::Null));
    assert!(v["usage"].get("cached_prompt_tokens").is_none(), "{v:#}");
    assert!(v["steps"][0].get("cached_prompt_tokens").is_none(), "{v:#}");
}
