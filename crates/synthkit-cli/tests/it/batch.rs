//! `synthkit batch`'s input and output: JSON lines in, one result line per request out,
//! against loopback fake models ([`synthkit_testkit::FakeOpenAi`]). Output order and ids,
//! an empty input, `--unordered`, lines whose `paths` are read and ranked (under the input's
//! folder only, a named pipe never blocking) and a line whose node is an image.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::batch_common::{
    RUN_TIMEOUT, batch, finish, ids, line, numbered, results, run, slow_fake, write_lines,
};
use crate::common::{assert_stderr_has, stderr};

#[test]
fn results_keep_the_input_order_and_ids() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Answered."));
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        line(Some(json!("a")), "first"),
        line(None, "second"),
        String::new(),
        line(Some(json!(7)), "fourth"),
        line(None, "fifth"),
    ];
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output).args([
        "--jobs",
        "3",
        "--evidence",
        "off",
        "--on-unsupported",
        "warn",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let results = results(&output);
    // The default id is the line number (the blank line 3 counts, and is skipped).
    assert_eq!(ids(&results), [json!("a"), json!(2), json!(7), json!(5)]);
    // The response is the service's: synthkit::Response as JSON.
    let response = &results[0]["response"];
    let mut keys: Vec<&str> = response
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "answerable",
            "citations",
            "grounding",
            "metadata",
            "source_nodes",
            "structured",
            "text",
            "truncation",
            "usage"
        ]
    );
    assert_eq!(response["text"], "Answered.");
    assert_eq!(response["source_nodes"][0]["text"], "A fact about first.");
    assert_eq!(fake.requests(), 4);
    assert_stderr_has(&out, "batch: 4 lines: 4 answered, 0 failed");
}

#[test]
fn an_empty_input_is_an_empty_output() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "").unwrap();
    let output = dir.path().join("out.jsonl");
    let out = run(&mut batch(&fake, &input, &output));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "");
    assert_stderr_has(&out, "batch: 0 lines");
    assert_eq!(fake.requests(), 0);

    // An unreadable input is a usage error.
    let missing = dir.path().join("missing.jsonl");
    let out = run(&mut batch(&fake, &missing, &output));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// Line 1 takes three calls (refine over three nodes), the others one each.
fn slow_first(dir: &Path) -> PathBuf {
    let mut lines = numbered(4);
    lines[0] = json!({"id": "q0", "query": "slow", "mode": "refine",
        "nodes": ["one fact.", "two facts.", "three facts."]})
    .to_string();
    write_lines(dir, "in.jsonl", &lines)
}

#[test]
fn unordered_writes_results_as_they_finish() {
    let fake = slow_fake(200);
    let dir = tempfile::tempdir().unwrap();
    let input = slow_first(dir.path());
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output)
        .args(["--jobs", "4", "--unordered"])
        .args(["--evidence", "off"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let got = ids(&results(&output));
    assert_eq!(got.len(), 4);
    // Three 200 ms calls in a row finish after three single calls started with them.
    assert_eq!(got[3], json!("q0"), "{got:?}");

    let ordered = dir.path().join("ordered.jsonl");
    let out = run(batch(&fake, &input, &ordered).args(["--jobs", "4", "--evidence", "off"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let got = ids(&results(&ordered));
    assert_eq!(got, [json!("q0"), json!("q1"), json!("q2"), json!("q3")]);
}

/// The prompts the fake was sent, as one text.
fn prompts_sent(fake: &FakeOpenAi) -> String {
    fake.bodies()
        .iter()
        .map(|b| b["messages"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_line_with_paths_reads_and_ranks_its_files_as_ask_does() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("mirror.md"),
        "The primary mirror is cleaned every three months.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("dome.md"),
        "The dome opens when the sky is clear.\n",
    )
    .unwrap();
    std::fs::write(docs.join("cafe.md"), "Visitors park behind the cafe.\n").unwrap();
    let question = "How often is the primary mirror cleaned, and when does the dome open?";
    let lines = vec![
        // A folder, relative to the current folder, ranked (its top_k): the cafe (no
        // shared word) left out.
        json!({"id": "folder", "query": question, "paths": ["docs"], "top_k": 5}).to_string(),
        // A folder of no more chunks than the default top-k: sent whole, as `ask` does.
        json!({"id": "small", "query": question, "paths": ["docs"]}).to_string(),
        // Its own top_k.
        json!({"id": "one", "query": question, "paths": ["docs"], "top_k": 1}).to_string(),
        // A file: read whole, not ranked.
        json!({"id": "file", "query": "What is behind the cafe?", "paths": ["docs/cafe.md"]})
            .to_string(),
        json!({"id": "both", "query": question, "nodes": ["n"], "paths": ["docs"]}).to_string(),
        json!({"id": "missing", "query": question, "paths": ["nowhere"]}).to_string(),
        json!({"id": "nothing", "query": "Zebras?", "paths": ["docs"], "top_k": 5}).to_string(),
    ];
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output)
        .current_dir(dir.path())
        .args(["--evidence", "off"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let by_id: HashMap<String, Value> = results(&output)
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r))
        .collect();
    let sources = |id: &str| -> Vec<String> {
        let r = &by_id[id];
        r["response"]["source_nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|n| {
                n["node"]["id_"]
                    .as_str()
                    .or(n["id"].as_str())
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let folder = sources("folder");
    assert_eq!(folder.len(), 2, "{folder:?}");
    assert!(folder.iter().all(|s| !s.contains("cafe")), "{folder:?}");
    assert_eq!(sources("small").len(), 3);
    assert_eq!(sources("one").len(), 1);
    assert_eq!(sources("file").len(), 1);
    let error = |id: &str| by_id[id]["error"].clone();
    assert_eq!(error("both")["kind"], "invalid_request");
    assert!(
        error("both")["message"]
            .as_str()
            .unwrap()
            .contains("not both"),
        "{}",
        error("both")
    );
    assert_eq!(error("missing")["kind"], "invalid_request");
    // No chunk shares a word with the question: nothing is sent, and the line says the
    // sources do not answer (a result, not an error).
    let nothing = &by_id["nothing"];
    assert_eq!(nothing["error"], Value::Null, "{nothing}");
    assert_eq!(nothing["response"]["answerable"], false, "{nothing}");
    assert_eq!(sources("nothing").len(), 0);
    // What reached the model: the cafe only from the small folder sent whole and from
    // the file, never from a ranked folder.
    let sent = prompts_sent(&fake);
    assert!(sent.contains("primary mirror is cleaned"), "{sent}");
    assert_eq!(fake.requests(), 4, "{sent}");
    assert_eq!(sent.matches("Visitors park").count(), 2, "{sent}");
}

/// A line whose node is a LlamaIndex `ImageNode` sends its image to the model as an image
/// part; its answer line is an answer.
#[test]
fn an_image_node_line_sends_its_image() {
    let fake = FakeOpenAi::start(FakeConfig::replying("A chart."));
    let dir = tempfile::tempdir().unwrap();
    let image =
        synthkit::node::NodeImage::from_bytes(&synthkit_testkit::png::png(8, 8, 5), None).unwrap();
    let request = json!({"id": "img", "query": "What does the chart show?", "nodes": [
        {"id_": "chart", "text": "The chart.", "image": image.base64(), "image_mimetype": "image/png"}
    ]});
    let input = write_lines(dir.path(), "in.jsonl", &[request.to_string()]);
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output).args(["--evidence", "off"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = results(&output);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["id"], "img");
    assert_eq!(results[0]["response"]["text"], "A chart.", "{}", results[0]);
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let urls = synthkit_testkit::openai::image_urls(&bodies[0]);
    assert_eq!(urls, [image.data_url()]);
}

/// Issue 42, item 9: a line's `paths` are read under IN's folder (whatever the current
/// folder), an absolute path, `..` or a link out of it is an error line, a named pipe is
/// skipped with a note and never opened (on today's main the batch blocks on it), and
/// nothing outside reaches the model; `--allow-paths-outside` reads them.
#[cfg(unix)]
#[test]
fn line_paths_stay_under_the_input_folder_and_a_pipe_never_blocks() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "The vault code is 4711.\n").unwrap();
    let root = dir.path().join("jobs");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(
        root.join("docs/vault.md"),
        "The vault code is kept at the desk.\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret, root.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(&secret, root.join("docs/leak.txt")).unwrap();
    let made = Command::new("mkfifo")
        .arg(root.join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    let q = "What is the vault code?";
    let lines = vec![
        json!({"id": "abs", "query": q, "paths": [secret.display().to_string()]}).to_string(),
        json!({"id": "up", "query": q, "paths": ["../secret.txt"]}).to_string(),
        json!({"id": "link", "query": q, "paths": ["leak.txt"]}).to_string(),
        json!({"id": "fifo", "query": q, "paths": ["fifo", "docs"]}).to_string(),
        json!({"id": "docs", "query": q, "paths": ["docs"]}).to_string(),
    ];
    let input = write_lines(&root, "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    // Run from elsewhere: the paths are IN's folder's.
    let out = finish(
        batch(&fake, &input, &output).current_dir(dir.path()),
        RUN_TIMEOUT,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let by_id: HashMap<String, Value> = results(&output)
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r))
        .collect();
    for (id, why) in [
        ("abs", "is an absolute path"),
        ("up", "goes up a folder"),
        ("link", "leads outside"),
    ] {
        let e = &by_id[id]["error"];
        assert_eq!(e["kind"], "invalid_request", "{id}: {e}");
        assert!(e["message"].as_str().unwrap().contains(why), "{id}: {e}");
    }
    assert!(
        stderr(&out).contains("skipping `fifo`: not a file"),
        "{}",
        stderr(&out)
    );
    for id in ["fifo", "docs"] {
        let r = &by_id[id];
        let sources: Vec<&str> = r["response"]["source_nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|n| n["node"]["id_"].as_str().or(n["id"].as_str()).unwrap())
            .collect();
        // Named as the line wrote them, relative to IN's folder; the link not followed.
        assert_eq!(sources, ["docs/vault.md#1"], "{id}: {r}");
    }
    let sent = prompts_sent(&fake);
    assert!(!sent.contains("4711"), "{sent}");
    assert!(sent.contains("kept at the desk"), "{sent}");

    // Opted in: read (the pipe still skipped).
    std::fs::remove_file(&output).unwrap();
    let out = finish(
        batch(&fake, &input, &output).arg("--allow-paths-outside"),
        RUN_TIMEOUT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(prompts_sent(&fake).contains("4711"));
}
