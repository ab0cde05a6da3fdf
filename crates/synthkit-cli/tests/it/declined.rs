//! `--on-declined`: a question the model declines though the evidence covers it is
//! answered with the sources' own sentences (the default), marked in `--json` and under
//! the text answer; `keep` keeps the model's words.

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, error_reply};

use crate::common::{ask_at, docs, json_of, stdout};

/// A server that declines every question.
fn declining() -> Server {
    let chat = |axum::Json(_): axum::Json<Value>| async move {
        let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
        axum::Json(chat_reply("m", "Not in the sources.", "stop", &usage))
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .fallback(|| async { error_reply(404, None, "not found") });
    Server::start(app)
}

#[test]
fn a_declined_question_the_sources_cover_is_answered_with_their_sentences() {
    let dir = docs();
    let server = declining();
    let v = json_of(&ask_at(&server.base, dir.path(), &["--json"]));
    let answer = v["answer"].as_str().unwrap();
    assert!(answer.contains("every three months"), "{v:#}");
    let extracted = &v["evidence"]["extracted"];
    assert_eq!(
        extracted["declined"],
        "The sources do not answer this question."
    );
    assert!(
        !extracted["sources"].as_array().unwrap().is_empty(),
        "{v:#}"
    );
    assert_eq!(v["grounding"]["status"], "supported", "{v:#}");
    // The text output says where the answer came from.
    let text = stdout(&ask_at(&server.base, dir.path(), &[]));
    assert!(text.contains("every three months"), "{text}");
    assert!(
        text.contains("Extracted: the model said the sources do not answer"),
        "{text}"
    );
}

#[test]
fn on_declined_keep_keeps_the_models_words() {
    let dir = docs();
    let server = declining();
    let v = json_of(&ask_at(
        &server.base,
        dir.path(),
        &["--json", "--on-declined", "keep"],
    ));
    assert_eq!(
        v["answer"], "The sources do not answer this question.",
        "{v:#}"
    );
    assert!(v["evidence"].get("extracted").is_none(), "{v:#}");
}
