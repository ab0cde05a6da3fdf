//! End-to-end tests of the `synthkit` binary's `ask` and `summarize`, offline: the
//! extractive backend over small files in temporary folders.

use std::path::Path;

use serde_json::Value;
use synthkit::text::{BpeTokenizer, Tokenizer};

use crate::common::{
    MIRROR, QUESTION, all_modes, ask_on, assert_stderr_has, docs, json_of, on, stderr, stdout,
    synthkit, write,
};

#[test]
fn ask_over_a_folder_finds_the_sentence() {
    let dir = docs();
    let out = ask_on(dir.path(), QUESTION, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with(MIRROR), "{text}");
    assert!(text.contains("\nSources:\n"), "{text}");
    // Only the source the answer's sentence came from is listed; the others are counted.
    assert!(
        text.contains("  1. ") && text.contains("maintenance.md#1"),
        "{text}"
    );
    assert!(!text.contains("about.md#1"), "{text}");
    assert!(
        text.contains("(2 other retrieved chunks not cited; --json lists them)"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("extractive answer"),
        "the extractive backend is labelled"
    );
}

#[test]
fn quiet_hides_notes() {
    let dir = docs();
    let out = ask_on(dir.path(), QUESTION, &["--quiet"]);
    assert!(out.status.success());
    assert_eq!(stderr(&out), "");
}

#[test]
fn json_report_shape_and_usage() {
    let dir = docs();
    let out = ask_on(dir.path(), QUESTION, &["--json", "-q"]);
    let v = json_of(&out);
    assert_eq!(v["answer"], MIRROR);
    assert_eq!(v["mode"], "compact");
    assert_eq!(v["backend"], "extractive");
    assert_eq!(v["query"], QUESTION);
    let sources = v["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 3);
    for s in sources {
        assert!(
            s["id"].as_str().unwrap().contains(".md#1")
                || s["id"].as_str().unwrap().contains(".txt#1")
        );
        assert!(s["path"].as_str().is_some());
        assert!(s["excerpt"].as_str().unwrap().chars().count() <= 160);
        assert!(s.get("score").is_some());
    }
    // compact packs three small files into one prompt: one call.
    assert_eq!(v["usage"]["calls"], 1);
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 50);
    // The extractive backend cites the sentence's source ([n], removed from the answer
    // without --cite): its reply is the sentence and the marker.
    let completion = v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(completion >= BpeTokenizer::cl100k_base().count(MIRROR) as u64);
    assert_eq!(v["grounded"], true);
    assert_eq!(sources[0]["cited"], true);
    assert!(
        sources[0]["id"]
            .as_str()
            .unwrap()
            .contains("maintenance.md#1")
    );
    assert_eq!(sources[1]["cited"], false);
    assert!(
        v["timings"]["total_ms"].as_f64().unwrap() >= v["timings"]["model_ms"].as_f64().unwrap()
    );
    assert!(v.get("truncation").is_none());
}

#[test]
fn every_mode_runs() {
    let dir = docs();
    for mode in all_modes() {
        let out = ask_on(dir.path(), QUESTION, &["--json", "-q", "--mode", mode]);
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        let v = json_of(&out);
        assert_eq!(v["mode"], mode);
        let answer = v["answer"].as_str().unwrap();
        let calls = v["usage"]["calls"].as_u64().unwrap();
        match mode {
            "no_text" => assert_eq!((answer, calls), ("", 0)),
            "context_only" => {
                assert_eq!(calls, 0);
                assert!(answer.contains(MIRROR), "{answer}");
            }
            "generation" => assert_eq!(calls, 1),
            "accumulate" => {
                assert_eq!(calls, 3);
                assert!(answer.starts_with("Response 1: "), "{answer}");
                assert!(answer.contains(MIRROR), "{answer}");
            }
            _ => {
                assert!(calls >= 1, "{mode}");
                assert!(answer.contains(MIRROR), "{mode}: {answer}");
            }
        }
    }
}

#[test]
fn unknown_mode_is_a_usage_error() {
    let dir = docs();
    let out = ask_on(dir.path(), QUESTION, &["--mode", "fastest"]);
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_has(&out, "unknown response mode `fastest`");
}

#[test]
fn a_citation_style_written_after_a_space_says_where_the_equals_goes() {
    let dir = docs();
    for style in ["quotes", "markers"] {
        let out = synthkit()
            .current_dir(dir.path())
            .args(["ask", QUESTION, "--cite", style, "."])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert_stderr_has(&out, &format!("--cite={style}"));
        assert!(!stderr(&out).contains("cannot read"), "{}", stderr(&out));
    }
    // A file of that name is read as asked.
    write(
        dir.path(),
        "quotes",
        "The quotes file says the mirror is cleaned weekly.",
    );
    let out = synthkit()
        .current_dir(dir.path())
        .args(["ask", QUESTION, "--cite", "quotes"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn output_schema_gives_a_json_answer_checked_as_the_service_checks_it() {
    let dir = docs();
    let schema = write(
        dir.path(),
        "schema.json",
        r#"{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}"#,
    );
    let out = ask_on(
        dir.path(),
        QUESTION,
        &["--output-schema", schema.to_str().unwrap(), "--quiet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert!(
        answer["answer"].as_str().unwrap().contains("cleaned"),
        "{answer}"
    );
    // A schema that is not one, one too costly to check, and a file that is not JSON are
    // usage errors before any call.
    for (body, says) in [
        (r#"{"type": 5}"#.to_string(), "not a valid JSON schema"),
        (r##"{"$ref": "#"}"##.to_string(), "leads back to itself"),
        ("not json".to_string(), "is not JSON"),
    ] {
        let bad = write(dir.path(), "bad.json", body);
        let out = ask_on(
            dir.path(),
            QUESTION,
            &["--output-schema", bad.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert_stderr_has(&out, says);
    }
}

#[test]
fn summarize_defaults_to_tree_summarize() {
    let dir = docs();
    let out = on(dir.path(), &["summarize", "--json", "-q"]);
    let v = json_of(&out);
    assert_eq!(v["mode"], "tree_summarize");
    assert_eq!(v["query"], "Summarize the text.");
    assert!(!v["answer"].as_str().unwrap().is_empty());
}

#[test]
fn stream_prints_the_same_as_the_plain_answer() {
    let dir = docs();
    for mode in [
        "compact",
        "refine",
        "tree_summarize",
        "accumulate",
        "context_only",
        "no_text",
    ] {
        let plain = ask_on(dir.path(), QUESTION, &["-q", "--mode", mode]);
        let streamed = ask_on(dir.path(), QUESTION, &["-q", "--stream", "--mode", mode]);
        assert!(
            plain.status.success() && streamed.status.success(),
            "{mode}"
        );
        assert_eq!(stdout(&plain), stdout(&streamed), "{mode}");
    }
}

#[test]
fn trace_writes_one_line_per_call() {
    let dir = docs();
    let trace = dir.path().join("trace.jsonl");
    let out = synthkit()
        .args([
            "ask", QUESTION, "--json", "-q", "--mode", "refine", "--trace",
        ])
        .arg(&trace)
        .arg(dir.path().join("about.md"))
        .arg(dir.path().join("maintenance.md"))
        .arg(dir.path().join("notes"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let calls = json_of(&out)["usage"]["calls"].as_u64().unwrap();
    assert_eq!(calls, 3);
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // One line per call, then the run's record (what `synthkit report` draws).
    let (run, lines) = lines.split_last().unwrap();
    assert_eq!(
        run["run"]["steps"].as_array().unwrap().len() as u64,
        calls,
        "{run}"
    );
    assert_eq!(lines.len() as u64, calls);
    for (i, l) in lines.iter().enumerate() {
        for key in [
            "mode",
            "step",
            "level",
            "index",
            "kind",
            "prompt",
            "prompt_tokens",
            "response",
            "completion_tokens",
            "ms",
        ] {
            assert!(l.get(key).is_some(), "line {i} lacks {key}: {l}");
        }
        assert_eq!(l["mode"], "refine");
        assert_eq!(l["index"], i as u64);
        let prompt = l["prompt"].as_str().unwrap();
        assert!(prompt.contains(QUESTION));
        assert_eq!(
            l["prompt_tokens"].as_u64().unwrap(),
            BpeTokenizer::cl100k_base().count(prompt) as u64
        );
    }
    assert_eq!(lines[0]["step"], "qa");
    assert_eq!(lines[0]["kind"], "qa");
    // A step that found nothing leaves no answer to refine: the next chunk is asked the
    // question again.
    let found_nothing = lines[0]["response"]
        .as_str()
        .unwrap()
        .contains("no answer found");
    assert_eq!(
        lines[1]["step"],
        if found_nothing { "qa" } else { "refine" },
        "{}",
        lines[0]["response"]
    );
}

#[test]
fn plan_first_step_matches_the_real_run() {
    let dir = docs();
    let args = [
        "ask",
        QUESTION,
        "--json",
        "-q",
        "--mode",
        "accumulate",
        "--chunk-size",
        "30",
    ];
    let plan = json_of(
        &synthkit()
            .args(args)
            .arg("--plan")
            .arg(dir.path())
            .output()
            .unwrap(),
    );
    let real = json_of(&on(dir.path(), &args));
    // accumulate has one step: its counts are exact.
    assert_eq!(plan["total"]["exact"], true);
    assert_eq!(plan["total"]["calls"], real["usage"]["calls"]);
    assert_eq!(
        plan["total"]["prompt_tokens"],
        real["usage"]["prompt_tokens"]
    );
}

#[test]
fn top_k_keeps_the_most_relevant_chunks() {
    let dir = docs();
    let out = ask_on(
        dir.path(),
        QUESTION,
        &[
            "--json",
            "-q",
            "--top-k",
            "1",
            "--chunk-size",
            "20",
            "--chunk-overlap",
            "0",
        ],
    );
    let v = json_of(&out);
    let sources = v["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 1);
    assert!(
        sources[0]["id"]
            .as_str()
            .unwrap()
            .contains("maintenance.md#")
    );
    assert!(sources[0]["score"].as_f64().unwrap() > 0.0);
    assert!(v["answer"].as_str().unwrap().contains("primary mirror"));
    synthkit()
        .args(["ask", QUESTION, "--top-k", "0"])
        .arg(dir.path())
        .assert()
        .code(2);
}

#[test]
fn custom_templates() {
    let dir = docs();
    let good = write(
        dir.path(),
        "qa.tmpl",
        "CUSTOM QA\n{context_str}\nQuestion: {query_str}\nAnswer:",
    );
    let bad = write(dir.path(), "bad.tmpl", "No variables here.");
    let trace = dir.path().join("t.jsonl");
    let out = synthkit()
        .args(["ask", QUESTION, "-q", "--qa-template"])
        .arg(&good)
        .arg("--trace")
        .arg(&trace)
        .arg(dir.path().join("maintenance.md"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::read_to_string(&trace)
            .unwrap()
            .contains("CUSTOM QA")
    );
    let out = synthkit()
        .args(["ask", QUESTION, "--qa-template"])
        .arg(&bad)
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_has(&out, "{context_str}");
}

#[test]
fn bad_flags_are_usage_errors() {
    let dir = docs();
    for extra in [
        vec!["--overlap", "1.5"],
        vec!["--context-window", "100", "--num-output", "200"],
        vec!["--chunk-size", "10", "--chunk-overlap", "11"],
        vec!["--stream", "--json"],
        vec!["--price-per-1k", "1"],
        vec!["--llm", "magic"],
    ] {
        let out = synthkit()
            .args(["ask", QUESTION])
            .args(&extra)
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).starts_with("error: "), "{extra:?}");
    }
}

// ---------------------------------------------------------------------------------------
// The repository's sample documents

#[test]
fn sample_documents() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/docs");
    if !docs.is_dir() {
        eprintln!("skipped: {} does not exist", docs.display());
        return;
    }
    let out = on(
        &docs,
        &[
            "ask",
            "What is the elevation of the observatory?",
            "--json",
            "-q",
        ],
    );
    let v = json_of(&out);
    assert!(
        v["answer"].as_str().unwrap().contains("1,420 metres"),
        "{}",
        v["answer"]
    );
    assert!(v["sources"].as_array().unwrap().len() >= 6);
}

// ---------------------------------------------------------------------------------------
// citations and grounding

#[test]
fn cite_marks_the_answer_and_lists_cited_sources_first() {
    let dir = docs();
    let out = ask_on(dir.path(), QUESTION, &["--cite", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let cited_answer = MIRROR.replace("snow.", "snow [1].");
    assert!(text.starts_with(&cited_answer), "{text}");
    assert!(text.contains("Sources:\n  [1] "), "{text}");
    assert!(text.contains("maintenance.md#1"), "{text}");
    assert!(
        text.contains("(2 other retrieved chunks not cited"),
        "{text}"
    );

    // Streamed, the same bytes.
    let streamed = ask_on(dir.path(), QUESTION, &["--cite", "-q", "--stream"]);
    assert_eq!(stdout(&streamed), text);

    let out = ask_on(dir.path(), QUESTION, &["--cite", "-q", "--json"]);
    let v = json_of(&out);
    assert_eq!(v["answer"], cited_answer);
    assert_eq!(v["citations"][0]["marker"], 1);
    let cited = v["citations"][0]["node_ids"][0].as_str().unwrap();
    assert!(cited.ends_with("maintenance.md#1"), "{v}");
    assert_eq!(v["sources"][0]["id"], cited);
    assert_eq!(v["sources"][0]["citation"], 1);
    assert_eq!(v["citations_removed"], serde_json::json!([]));
    assert_eq!(v["grounded"], true);
}

#[test]
fn an_off_topic_question_is_not_answered_from_the_documents() {
    let dir = docs();
    let out = on(
        dir.path(),
        &["ask", "Who won the 1998 FIFA World Cup?", "--json", "-q"],
    );
    let v = json_of(&out);
    assert_eq!(
        v["answer"],
        "(no answer found: no passage matches enough of the question)"
    );
    assert_eq!(v["answerable"], false, "{v}");
    assert_eq!(v["grounded"], false);
    assert!(
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["cited"] == false)
    );
    let text = stdout(&on(
        dir.path(),
        &["ask", "Who won the 1998 FIFA World Cup?", "-q"],
    ));
    assert!(
        text.contains("No source was cited (3 chunks retrieved"),
        "{text}"
    );
}

#[test]
fn max_prompt_tokens_plans_smaller_prompts_and_more_calls() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/docs");
    let plan = |extra: &[&str]| {
        let out = synthkit()
            .args(["summarize", "--json", "-q", "--plan", "--mode", "compact"])
            .args(extra)
            .arg(&docs)
            .output()
            .unwrap();
        json_of(&out)
    };
    let whole = plan(&[]);
    let limited = plan(&["--max-prompt-tokens", "600"]);
    let calls = |v: &serde_json::Value| v["total"]["calls"].as_u64().unwrap();
    assert!(calls(&limited) > calls(&whole), "{limited}\n{whole}");
    for step in limited["steps"].as_array().unwrap() {
        assert!(step["max_prompt_tokens"].as_u64().unwrap() <= 600, "{step}");
    }
    let out = synthkit()
        .args(["ask", QUESTION, "--max-prompt-tokens", "0"])
        .arg(&docs)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// `-h` is a screen of the flags most runs use, as ripgrep splits them; `--help` has every
/// flag, with the whole text.
#[test]
fn short_help_is_a_screen_and_long_help_has_every_flag() {
    for verb in ["ask", "summarize", "batch", "eval", "serve"] {
        let short = stdout(&synthkit().args([verb, "-h"]).output().unwrap());
        let long = stdout(&synthkit().args([verb, "--help"]).output().unwrap());
        assert!(
            short.lines().count() <= 80,
            "{verb} -h is {} lines:\n{short}",
            short.lines().count()
        );
        assert!(long.lines().count() > short.lines().count(), "{verb}");
        assert!(short.contains("--base-url"), "{verb}: {short}");
        assert!(long.contains("--retry-max-secs"), "{verb}: {long}");
        assert!(!short.contains("--retry-max-secs"), "{verb}: {short}");
    }
    let short = stdout(&synthkit().args(["ask", "-h"]).output().unwrap());
    for common in [
        "--top-k",
        "--mode",
        "--json",
        "--plan",
        "--max-cost",
        "--evidence",
    ] {
        assert!(short.contains(common), "{common} not in ask -h:\n{short}");
    }
    let long = stdout(&synthkit().args(["ask", "--help"]).output().unwrap());
    assert!(
        long.contains("BM25 over each chunk's text"),
        "the whole text of --top-k: {long}"
    );
}
