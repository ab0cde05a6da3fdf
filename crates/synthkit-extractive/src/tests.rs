//! Unit tests of the extractive backend.

use std::sync::Arc;

use super::*;
use synthkit::mode::{ResponseMode, Step};
use synthkit::model::StepInfo;
use synthkit::prompt::RenderedPrompt;

/// A question-answering request about [`OBSERVATORY`] (256 tokens for the answer).
fn observatory_qa(query: &str) -> ModelRequest {
    let vars = [("context_str", OBSERVATORY), ("query_str", query)];
    request(TemplateKind::Qa, &vars, 256)
}

fn request(kind: TemplateKind, vars: &[(&str, &str)], max_tokens: usize) -> ModelRequest {
    ModelRequest::new(RenderedPrompt::Text("ignored".into()))
        .with_schema(None)
        .with_max_tokens(max_tokens)
        .with_prompt_tokens(42)
        .with_extension(StepInfo::new(ResponseMode::Compact, Step::Qa))
        .with_extension(synthkit::prompt::PromptSource::new(
            kind,
            vars.iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        ))
}

/// The sentences of `text`, as shown.
/// The sentences, headings aside (candidates only for questions about titles).
fn split(text: &str) -> Vec<String> {
    parse(text)
        .sentences
        .into_iter()
        .filter(|s| s.kind != super::sentences::Kind::Heading)
        .map(|s| s.text)
        .collect()
}

fn run(model: &ExtractiveModel, req: &ModelRequest) -> Completion {
    futures::executor::block_on(model.complete(req)).unwrap_or_default()
}

/// Asserts that `model` replies `expected` to `req`.
#[track_caller]
fn assert_reply(model: &ExtractiveModel, req: &ModelRequest, expected: &str) {
    assert_eq!(run(model, req).text, expected);
}

const OBSERVATORY: &str = "file_path: docs/maintenance.md\n\n\
    # Mirror care\n\n\
    The observatory opened in 1987. The primary mirror is cleaned with CO2 snow every \
    three months. Dr. Okafor leads the cleaning crew. The dome is painted white.\n\n\
    - Check the collimation weekly.\n- Oil the dome gears each spring.";

#[test]
fn picks_the_sentence_with_query_terms() {
    let m = ExtractiveModel::new();
    let req = observatory_qa("How often is the mirror cleaned?");
    let c = run(&m, &req);
    assert_eq!(
        c.text,
        "The primary mirror is cleaned with CO2 snow every three months."
    );
    assert_eq!(c.finish_reason, Some(FinishReason::Stop));
    let usage = c.usage.unwrap_or_default();
    assert_eq!(usage.prompt_tokens, 42);
    assert_eq!(usage.completion_tokens, m.tokenizer.count(&c.text) as u64);
}

#[test]
fn splits_sentences_and_skips_metadata_and_headings() {
    assert_eq!(
        split(OBSERVATORY),
        vec![
            "The observatory opened in 1987.",
            "The primary mirror is cleaned with CO2 snow every three months.",
            "Dr. Okafor leads the cleaning crew.",
            "The dome is painted white.",
            "Check the collimation weekly.",
            "Oil the dome gears each spring.",
        ]
    );
    let out = split(
        "It costs approx. 5 euros, e.g. for tea. Is it? Yes! Wrapped line that is long enough to be joined\nwith the next one. Short title\nNext line",
    );
    assert_eq!(
        out,
        vec![
            "It costs approx. 5 euros, e.g. for tea.",
            "Is it?",
            "Yes!",
            "Wrapped line that is long enough to be joined with the next one.",
            "Short title",
            "Next line",
        ]
    );
}

#[test]
fn respects_max_tokens() {
    let m = ExtractiveModel::new().with_min_relative_score(0.0);
    let context = (0..50)
        .map(|i| format!("Telescope fact number {i} concerns the telescope mirror."))
        .collect::<Vec<_>>()
        .join(" ");
    for budget in [1, 5, 12, 30, 100] {
        let req = request(
            TemplateKind::Qa,
            &[("context_str", &context), ("query_str", "telescope mirror")],
            budget,
        );
        let c = run(&m, &req);
        assert!(m.tokenizer.count(&c.text) <= budget, "{budget}: {}", c.text);
    }
    // One sentence longer than the budget is cut at a word boundary.
    let long = "mirror ".repeat(200);
    let req = request(
        TemplateKind::Qa,
        &[("context_str", &long), ("query_str", "mirror")],
        10,
    );
    let c = run(&m, &req);
    assert!(!c.text.is_empty());
    assert!(m.tokenizer.count(&c.text) <= 10);
    // A window (here the start, every word matching), cut at a word boundary.
    assert!(
        c.text.starts_with("mirror") && c.text.ends_with("mirror …"),
        "{}",
        c.text
    );
    assert_eq!(c.finish_reason, Some(FinishReason::Length));
}

#[test]
fn refine_keeps_a_good_existing_answer() {
    let m = ExtractiveModel::new();
    let req = request(
        TemplateKind::Refine,
        &[
            ("query_str", "How often is the mirror cleaned?"),
            (
                "existing_answer",
                "The mirror is cleaned every three months.",
            ),
            (
                "context_msg",
                "The gift shop sells postcards. Parking is free on weekends.",
            ),
        ],
        256,
    );
    assert_reply(&m, &req, "The mirror is cleaned every three months.");

    // A better new sentence replaces it; with no relevance floor both are kept, the
    // existing answer first.
    let vars = [
        ("query_str", "How often is the mirror cleaned?"),
        ("existing_answer", "The mirror is cleaned by hand."),
        (
            "context_msg",
            "Parking is free. The mirror is cleaned often, every three months.",
        ),
    ];
    let req = request(TemplateKind::Refine, &vars, 256);
    assert_reply(&m, &req, "The mirror is cleaned often, every three months.");
    // Nothing matches the question: the existing answer stays as it is.
    let unmatched = request(
        TemplateKind::Refine,
        &[
            ("query_str", "Who founded the society?"),
            ("existing_answer", "The mirror is cleaned by hand."),
            ("context_msg", "Parking is free. Parking is near the gate."),
        ],
        256,
    );
    assert_eq!(run(&m, &unmatched).text, "The mirror is cleaned by hand.");
    let all = ExtractiveModel::new().with_min_relative_score(0.0);
    assert_reply(
        &all,
        &req,
        "The mirror is cleaned by hand. The mirror is cleaned often, every three months.",
    );
}

#[test]
fn empty_and_missing_context() {
    let m = ExtractiveModel::new();
    let req = request(
        TemplateKind::Qa,
        &[("context_str", ""), ("query_str", "anything")],
        256,
    );
    assert_eq!(run(&m, &req).text, "");
    let req = request(
        TemplateKind::Qa,
        &[("context_str", "  \n\n---\n"), ("query_str", "")],
        256,
    );
    assert_eq!(run(&m, &req).text, "");
    let req = request(TemplateKind::Simple, &[("query_str", "Hello?")], 256);
    assert_eq!(run(&m, &req).text, ExtractiveModel::NO_CONTEXT_ANSWER);
}

#[test]
fn no_query_uses_centrality() {
    let m = ExtractiveModel::new();
    let context = "The telescope mirror is cleaned in spring. The telescope mirror is \
        aluminised every five years. Bananas are yellow. The telescope mirror weighs 40 kg.";
    let req = request(
        TemplateKind::Summary,
        &[("context_str", context), ("query_str", "")],
        12,
    );
    let text = run(&m, &req).text;
    assert!(text.contains("telescope mirror"), "{text}");
    assert!(!text.contains("Bananas"), "{text}");
    // Unmatched question words fall back to centrality too.
    let req = request(
        TemplateKind::Summary,
        &[
            ("context_str", context),
            ("query_str", "Summarize everything"),
        ],
        12,
    );
    assert_eq!(run(&m, &req).text, text);
}

#[test]
fn braces_and_unicode() {
    let m = ExtractiveModel::new();
    let context = "Le télescope {context_str} est nettoyé chaque année. \
        望远镜每年清洁一次。\u{1F52D} {\"json\": true} The dome 🚀 rotates. Ünïcödé façade!";
    for query in ["télescope nettoyé", "望远镜", "{query_str}", "🚀", ""] {
        let req = request(
            TemplateKind::Qa,
            &[("context_str", context), ("query_str", query)],
            64,
        );
        let c = run(&m, &req);
        assert!(m.tokenizer.count(&c.text) <= 64);
    }
    let req = request(
        TemplateKind::Qa,
        &[("context_str", context), ("query_str", "télescope")],
        64,
    );
    assert_reply(
        &m,
        &req,
        "Le télescope {context_str} est nettoyé chaque année.",
    );
    let req = request(
        TemplateKind::Qa,
        &[("context_str", context), ("query_str", "望远镜")],
        64,
    );
    assert_eq!(run(&m, &req).text, "望远镜每年清洁一次。");
}

#[test]
fn deterministic_and_deduplicated() {
    let m = ExtractiveModel::new();
    let context = "Mirror A is clean. Mirror B is clean.\n\nMirror A is clean. Mirror C is dusty.";
    let req = request(
        TemplateKind::Qa,
        &[("context_str", context), ("query_str", "mirror")],
        256,
    );
    let first = run(&m, &req).text;
    for _ in 0..5 {
        assert_eq!(run(&m, &req).text, first);
    }
    assert_eq!(
        first,
        "Mirror A is clean. Mirror B is clean. Mirror C is dusty."
    );
    // Ties: with room for one sentence, the earliest wins.
    let req = request(
        TemplateKind::Qa,
        &[("context_str", context), ("query_str", "mirror")],
        6,
    );
    assert_eq!(run(&m, &req).text, "Mirror A is clean.");
}

#[test]
fn structured_refine_reply() {
    let m = ExtractiveModel::new();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "query_satisfied": {"type": "boolean"},
            "answer": {"type": "string"}
        },
        "required": ["query_satisfied", "answer"]
    });
    let mut req = observatory_qa("When did the observatory open?");
    req.schema = Some(Arc::new(schema));
    let value: serde_json::Value = serde_json::from_str(&run(&m, &req).text).unwrap_or_default();
    assert_eq!(
        value,
        serde_json::json!({"query_satisfied": true, "answer": "The observatory opened in 1987."})
    );
    req.extensions.insert(synthkit::prompt::PromptSource::new(
        TemplateKind::Qa,
        vec![
            ("context_str".into(), OBSERVATORY.into()),
            ("query_str".into(), "Who won the football match?".into()),
        ],
    ));
    let text = run(&m, &req).text;
    assert!(text.starts_with("{\"query_satisfied\":false,"), "{text}");
}

#[test]
fn structured_other_schemas() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "ok": {"type": "boolean"},
            "points": {"type": "array", "items": {"type": "string"}},
            "count": {"type": "integer"},
            "level": {"enum": ["low", "high"]},
            "note": {"type": ["null", "string"]}
        }
    });
    let out = structured_reply(&schema, "A.", true);
    assert_eq!(
        out,
        r#"{"summary":"A.","ok":true,"points":["A."],"count":0,"level":"low","note":"A."}"#
    );
    assert_eq!(
        structured_reply(&serde_json::json!({"type": "string"}), "x", false),
        "\"x\""
    );
    assert_eq!(
        structured_reply(&serde_json::json!(true), "x", false),
        r#"{"answer":"x"}"#
    );
}

#[test]
fn stemming() {
    use rank::terms;
    assert_eq!(
        terms("Mirrors cleaned cleaning clean"),
        vec!["mirror", "clean", "clean", "clean"]
    );
    // Snowball stems are not always words; what matters is that forms of a word meet.
    assert_eq!(
        terms("schedule scheduled batteries battery"),
        vec!["schedul", "schedul", "batteri", "batteri"]
    );
    assert_eq!(
        terms("running the 2 CO2 lamps"),
        vec!["run", "2", "co2", "lamp"]
    );
}

#[test]
fn analyzer_keeps_scripts_as_written() {
    use rank::terms;
    // No transliteration: each CJK ideograph is a term, accents stay, emoji are no terms.
    assert_eq!(terms("望远镜"), vec!["望", "远", "镜"]);
    assert_eq!(terms("Le télescope"), terms("le TÉLESCOPE"));
    assert_ne!(terms("télescope"), terms("telescope"));
    assert!(terms("🔭 🚀").is_empty());
    // Stop words only: no terms, so the question counts as empty.
    assert!(terms("What is it?").is_empty());
}

#[test]
fn info_is_a_completion_model() {
    let info = ExtractiveModel::new().with_context_window(4096).info();
    assert_eq!(info.name, "extractive");
    assert_eq!(info.context_window, 4096);
    assert_eq!(info.num_output, 256);
    assert!(!info.is_chat);
}

/// A 5,000-sentence context is answered (how fast is `synthkit-bench`'s to show, not a
/// test's to assert).
#[test]
fn large_context_is_answered() {
    let m = ExtractiveModel::new();
    let context: String = (0..5000)
        .map(|i| format!("Sentence {i} talks about topic{} and mirrors. ", i % 37))
        .collect();
    for query in ["", "topic5 mirrors"] {
        let req = request(
            TemplateKind::Summary,
            &[("context_str", &context), ("query_str", query)],
            256,
        );
        let c = run(&m, &req);
        assert!(!c.text.is_empty());
    }
}

#[test]
fn not_answered_through_requests() {
    let m = ExtractiveModel::new();
    // A question the passages do not answer: the fixed reply, and an unsatisfied
    // structured refine reply.
    let req = observatory_qa("Who won the 1998 World Cup?");
    assert_eq!(run(&m, &req).text, ExtractiveModel::NOT_ANSWERED);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "query_satisfied": {"type": "boolean"},
            "answer": {"type": "string"}
        }
    });
    let mut structured = req.clone();
    structured.schema = Some(Arc::new(schema));
    let text = run(&m, &structured).text;
    assert!(text.starts_with("{\"query_satisfied\":false,"), "{text}");
    // A refine step whose existing answer is the fixed reply treats it as none.
    let req = request(
        TemplateKind::Refine,
        &[
            ("query_str", "How often is the mirror cleaned?"),
            ("existing_answer", ExtractiveModel::NOT_ANSWERED),
            ("context_msg", OBSERVATORY),
        ],
        256,
    );
    assert_reply(
        &m,
        &req,
        "The primary mirror is cleaned with CO2 snow every three months.",
    );
}

#[test]
fn labelled_context_through_requests() {
    let m = ExtractiveModel::new();
    let context = format!(
        "[1]\n{OBSERVATORY}\n\n[2]\nIn winter the primary mirror is cleaned by hand with soft brushes."
    );
    let req = request(
        TemplateKind::Qa,
        &[
            ("context_str", &context),
            ("query_str", "How often is the mirror cleaned?"),
        ],
        256,
    );
    // Sentences from two sources answering alike, in order, each with its marker.
    assert_eq!(
        run(&m, &req).text,
        "The primary mirror is cleaned with CO2 snow every three months [1]. In winter the \
         primary mirror is cleaned by hand with soft brushes [2]."
    );
    let e = m.extract("When is the mirror cleaned by hand?", None, &context, 256);
    assert_eq!(
        e.text,
        "In winter the primary mirror is cleaned by hand with soft brushes [2]."
    );
    assert_eq!(e.sources, vec![2]);
}
