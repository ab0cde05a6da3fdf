//! Image files in `ask`'s folders and arguments (`--images auto|on|off`, `--vision`):
//! against a loopback fake whose discovery says whether the model takes images, and which
//! records every chat request, so each test sees whether an image part reached it.

use std::path::Path;
use std::process::Output;

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{Value, json};
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, error_reply};
use synthkit_testkit::png::png;
use synthkit_testkit::record::Recorder;

use crate::common::{QUESTION, docs, stderr, write};

/// A fake OpenAI-compatible server: `vision` is what its `/props` and models listing say
/// (`None`: neither says anything of images).
struct Fake {
    server: Server,
    seen: Recorder,
}

impl Fake {
    fn start(vision: Option<bool>) -> Self {
        let props = move || async move {
            let mut props = json!({"default_generation_settings": {"n_ctx": 4096}});
            if let Some(v) = vision {
                props["modalities"] = json!({"vision": v});
            }
            axum::Json(props)
        };
        let models = move || async move {
            let caps = match vision {
                Some(true) => json!(["completion", "multimodal"]),
                _ => json!(["completion"]),
            };
            axum::Json(json!({"data": [{"id": "m", "capabilities": caps}]}))
        };
        let chat = |axum::Json(_): axum::Json<Value>| async move {
            let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
            axum::Json(chat_reply("m", "A chart.", "stop", &usage)).into_response()
        };
        let seen = Recorder::default();
        let app = Router::new()
            .route("/props", get(props))
            .route("/v1/props", get(props))
            .route("/v1/models", get(models))
            .route("/v1/chat/completions", post(chat))
            .fallback(|| async { error_reply(404, None, "not found") });
        Self {
            server: Server::start(seen.wrap(app)),
            seen,
        }
    }

    /// The image parts of every chat request: their URLs.
    fn image_urls(&self) -> Vec<String> {
        let mut urls = Vec::new();
        for r in self.seen.to("/chat/completions") {
            let body = r.json();
            for m in body["messages"].as_array().into_iter().flatten() {
                for part in m["content"].as_array().into_iter().flatten() {
                    if part["type"] == "image_url" {
                        urls.push(part["image_url"]["url"].as_str().unwrap().to_string());
                    }
                }
            }
        }
        urls
    }

    fn completions(&self) -> usize {
        self.seen.to("/chat/completions").len()
    }
}

/// `synthkit ask QUESTION PATHS --base-url FAKE -q?` with `extra` flags.
fn ask(fake: &Fake, paths: &[&Path], extra: &[&str]) -> Output {
    crate::common::synthkit()
        .args([
            "ask",
            QUESTION,
            "--base-url",
            &fake.server.base,
            "--llm",
            "openai",
        ])
        .args(["--model", "m"])
        .args(extra)
        .args(paths)
        .output()
        .unwrap()
}

/// A folder of documents and one PNG, `chart.png`, and the PNG's bytes.
fn docs_with_image() -> (tempfile::TempDir, Vec<u8>) {
    let dir = docs();
    let image = png(8, 8, 3);
    write(dir.path(), "chart.png", &image);
    (dir, image)
}

fn data_url(bytes: &[u8]) -> String {
    synthkit::node::NodeImage::from_bytes(bytes, None)
        .unwrap()
        .data_url()
}

#[test]
fn images_in_folders_and_arguments_reach_a_vision_model() {
    let (dir, image) = docs_with_image();
    let fake = Fake::start(Some(true));
    let out = ask(&fake, &[dir.path()], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fake.image_urls(), vec![data_url(&image)]);
    assert!(!stderr(&out).contains("skipping"), "{}", stderr(&out));

    // A file named on the command line, alone: the image is the whole input.
    let fake = Fake::start(Some(true));
    let out = ask(
        &fake,
        &[&dir.path().join("chart.png")],
        &["--evidence", "off"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fake.image_urls(), vec![data_url(&image)]);
}

#[test]
fn auto_skips_images_with_one_note_when_the_model_takes_none() {
    let (dir, _) = docs_with_image();
    for vision in [Some(false), None] {
        let fake = Fake::start(vision);
        let out = ask(&fake, &[dir.path()], &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(fake.completions() > 0);
        assert!(fake.image_urls().is_empty());
        let err = stderr(&out);
        assert_eq!(err.matches("skipping image file").count(), 1, "{err}");
        assert!(err.contains("--images on"), "{err}");
        // Not counted as a binary file skipped.
        assert!(!err.contains("binary"), "{err}");
    }
    // --vision says the model takes images when its server does not say.
    let fake = Fake::start(None);
    let out = ask(&fake, &[dir.path()], &["--vision"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fake.image_urls().len(), 1);
}

#[test]
fn images_on_refuses_a_model_without_vision_before_any_call() {
    let (dir, _) = docs_with_image();
    let fake = Fake::start(Some(false));
    let out = ask(&fake, &[dir.path()], &["--images", "on"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("takes no images"), "{}", stderr(&out));
    assert_eq!(fake.completions(), 0);

    // --images off leaves them out whatever the model takes.
    let fake = Fake::start(Some(true));
    let out = ask(&fake, &[dir.path()], &["--images", "off"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(fake.image_urls().is_empty());
    assert!(fake.completions() > 0);
}

#[test]
fn images_over_the_limit_and_false_images_are_not_sent() {
    let dir = docs();
    write(dir.path(), "big.png", png(64, 64, 1));
    // Named .png, but text: read as text, never as an image.
    write(dir.path(), "notes.png", "The dome opens at dusk.\n");
    let fake = Fake::start(Some(true));
    let out = ask(&fake, &[dir.path()], &["--max-image-bytes", "1K"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(fake.image_urls().is_empty());
    assert!(
        stderr(&out).contains("--max-image-bytes"),
        "{}",
        stderr(&out)
    );
    let out = ask(&fake, &[dir.path()], &["--max-image-bytes", "21M"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn vision_and_no_vision_work_on_batch_lines_too() {
    let image = png(8, 8, 3);
    let b64 = data_url(&image)
        .split_once(',')
        .map(|(_, b)| b.to_string())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let line = json!({"id": "q1", "query": "What does the chart show?", "nodes": [
        {"id_": "chart", "text": "Q3 sales.", "image": b64, "image_mimetype": "image/png"}]});
    let input = write(dir.path(), "in.jsonl", format!("{line}\n"));
    let batch = |fake: &Fake, flag: &str, out: &str| {
        crate::common::synthkit()
            .args(["batch", input.to_str().unwrap(), "-o", out])
            .args([
                "--base-url",
                &fake.server.base,
                "--llm",
                "openai",
                "--model",
                "m",
            ])
            .arg(flag)
            .args(["--evidence", "off"])
            .output()
            .unwrap()
    };
    // The server says nothing of images: --vision sends them.
    let fake = Fake::start(None);
    let out_path = dir.path().join("yes.jsonl");
    let out = batch(&fake, "--vision", out_path.to_str().unwrap());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fake.image_urls(), vec![data_url(&image)]);
    // The server says it takes them: --no-vision refuses the line before any call.
    let fake = Fake::start(Some(true));
    let out_path = dir.path().join("no.jsonl");
    let out = batch(&fake, "--no-vision", out_path.to_str().unwrap());
    let written = std::fs::read_to_string(&out_path).unwrap_or_default();
    assert!(
        written.contains("does not take images"),
        "{written} {}",
        stderr(&out)
    );
    assert_eq!(fake.completions(), 0);
}

#[test]
fn hints_say_who_knows_whether_the_model_takes_images() {
    let (dir, _) = docs_with_image();
    // The offline backend: no server to blame, and --images on cannot help.
    let offline = |extra: &[&str]| {
        crate::common::synthkit()
            .args(["ask", QUESTION])
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let out = offline(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("the offline backend reads text only"), "{err}");
    assert!(!err.contains("server says"), "{err}");
    assert!(!err.contains("--images on or"), "{err}");
    let out = offline(&["--images", "on"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("offline backend reads text only"), "{err}");
    assert!(!err.contains("server says"), "{err}");

    // --no-vision: the user said so, not the server (which says it takes images).
    let fake = Fake::start(Some(true));
    let out = ask(&fake, &[dir.path()], &["--no-vision"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--no-vision says"), "{err}");
    assert!(!err.contains("server says"), "{err}");
    let fake = Fake::start(Some(true));
    let out = ask(&fake, &[dir.path()], &["--no-vision", "--images", "on"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("drop one of the two"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fake.completions(), 0);

    // A server that says nothing: not blamed for saying no.
    let fake = Fake::start(None);
    let out = ask(&fake, &[dir.path()], &[]);
    let err = stderr(&out);
    assert!(err.contains("its server does not say"), "{err}");
}
