//! `map_reduce` with scripted models: map records (parsed, dropped, unparseable), the
//! reduce prompt, collapse levels, citations, streaming and the plan.

use std::sync::Arc;

use serde_json::json;
use synthkit::model::LanguageModel;
use synthkit::model::{ModelError, ModelInfo, ModelRequest};
use synthkit::prompt::PromptBudget;
use synthkit::prompt::TemplateKind;
use synthkit::testing::{ScriptedModel, WordTokenizer};
use synthkit::{Node, ResponseMode, SynthError, Synthesizer, SynthesizerBuilder};

use crate::common::fixtures::{scripted, stream_whole};

/// Nodes `n1`, `n2`, ... (citation labels count from 1).
fn nodes(texts: &[String]) -> Vec<Node> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    crate::common::fixtures::nodes_from(1, &refs)
}

/// Words of an [`about`] node: twice a map prompt's room ([`ROOM`]), so a map prompt
/// holds at most one node's header (`Alpha facts:`).
const NODE_WORDS: usize = 120;

/// Words of context in a map prompt.
const ROOM: usize = 60;

/// A node about `topic`, of [`NODE_WORDS`] words.
fn about(topic: &str) -> String {
    about_words(topic, NODE_WORDS)
}

/// A node about `topic`, of `n` words.
fn about_words(topic: &str, n: usize) -> String {
    let filler: Vec<String> = (2..n).map(|i| format!("{topic}{i}")).collect();
    format!("{topic} facts: {}.", filler.join(" "))
}

fn small() -> ModelInfo {
    scripted(2000, 96)
}

/// A model counting words as tokens (so chunks are whole nodes).
fn words_model(
    info: ModelInfo,
    answer: impl Fn(&ModelRequest) -> Result<String, ModelError> + Send + Sync + 'static,
) -> ScriptedModel {
    ScriptedModel::new(info, answer).with_tokenizer(Arc::new(WordTokenizer))
}

/// A map_reduce synthesizer over `model` whose map prompts hold at most `chunk` words of
/// context, without overlap (its window is sized for it; reduce prompts, without the
/// record's schema, have more room).
async fn builder(model: &ScriptedModel, chunk: usize) -> SynthesizerBuilder {
    let info = model.info();
    let window = info.num_output + map_overhead(model, info.num_output).await + 5 + chunk;
    let budget = PromptBudget::new(window, info.num_output)
        .unwrap()
        .with_chunk_overlap_ratio(0.0)
        .unwrap();
    Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::MapReduce)
        .budget(budget)
}

/// The words of a map prompt besides its context (the template, the schema's
/// instructions) with a one-word query: a plan's map prompt over a one-word node, less
/// that word.
async fn map_overhead(model: &ScriptedModel, num_output: usize) -> usize {
    let budget = PromptBudget::new(100_000, num_output).unwrap();
    let synth = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::MapReduce)
        .budget(budget)
        .build()
        .unwrap();
    let plan = synth.plan("q", nodes(&["word".to_string()])).await;
    plan.unwrap().rows[0].max_prompt_tokens - 1
}

fn kind(r: &ModelRequest) -> TemplateKind {
    r.source().unwrap().kind
}

fn context(r: &ModelRequest) -> &str {
    r.source()
        .unwrap()
        .variable("context_str")
        .unwrap_or_default()
}

/// Map replies by the node whose header the prompt holds: Alpha is sure, Beta unsure,
/// Garbled is not JSON, anything else (another node, or no header) has nothing; reduce
/// replies name their step and whether they were structured.
fn topical(r: &ModelRequest) -> Result<String, ModelError> {
    let c = context(r);
    match kind(r) {
        TemplateKind::Map => {
            assert!(r.schema.is_some(), "map calls are structured");
            let record = if c.contains("Alpha facts:") {
                json!({"information": "Alpha opens at dusk.", "rationale": "stated", "answer": "dusk", "confidence": 5, "no_information": false})
            } else if c.contains("Beta facts:") {
                json!({"information": "Beta opens at noon.", "rationale": "implied", "answer": "noon", "confidence": 2, "no_information": false})
            } else if c.contains("Garbled facts:") {
                return Ok("Garbled says it opens at midnight".into());
            } else {
                json!({"information": "", "rationale": "", "answer": "", "confidence": 1, "no_information": true})
            };
            Ok(record.to_string())
        }
        TemplateKind::Reduce if r.schema.is_some() => Ok(json!({
            "information": format!("collapsed {} records", c.matches("Confidence:").count()),
            "rationale": "", "answer": "", "confidence": 4, "no_information": false
        })
        .to_string()),
        TemplateKind::Reduce => Ok("It opens at dusk.".into()),
        other => Err(ModelError::Other(format!("unexpected {other} call"))),
    }
}

async fn synth(model: &ScriptedModel) -> Synthesizer {
    builder(model, ROOM).await.build().unwrap()
}

fn kinds(model: &ScriptedModel) -> Vec<(TemplateKind, bool, u32)> {
    model
        .requests()
        .iter()
        .map(|r| (kind(r), r.schema.is_some(), r.step().level))
        .collect()
}

#[tokio::test]
async fn map_reduce_records_reach_the_reduce_prompt_with_their_confidence() {
    let model = words_model(small(), topical);
    let texts = [
        about("Alpha"),
        about("Noise"),
        about("Beta"),
        about("Garbled"),
    ];
    let r = synth(&model)
        .await
        .synthesize("When?", nodes(&texts))
        .await
        .unwrap();
    assert_eq!(r.text, "It opens at dusk.");
    let requests = model.requests();
    let maps = requests
        .iter()
        .filter(|r| kind(r) == TemplateKind::Map)
        .count();
    assert!(
        maps >= 8,
        "two map calls or more per node: {:?}",
        kinds(&model)
    );
    let last = requests.last().unwrap();
    assert_eq!(
        (kind(last), last.schema.is_none()),
        (TemplateKind::Reduce, true)
    );
    assert_eq!(
        requests.len(),
        maps + 1,
        "the map calls and the final reduce call"
    );
    let reduce = context(last);
    assert!(
        reduce.contains(
            "Confidence: 5/5\nInformation: Alpha opens at dusk.\nRationale: stated\nAnswer: dusk"
        ),
        "{reduce}"
    );
    assert!(reduce.contains("Confidence: 2/5\nInformation: Beta opens at noon."));
    // The unparseable reply is kept as information with middle confidence.
    assert!(reduce.contains("Confidence: 3/5\nInformation: Garbled says it opens at midnight"));
    // The "no information" record is dropped.
    assert_eq!(reduce.matches("Confidence:").count(), 3, "{reduce}");
    // Records keep the nodes' order.
    let (a, b) = (reduce.find("Alpha").unwrap(), reduce.find("Beta").unwrap());
    assert!(a < b);
    // The reduce prompt tells the model to weigh confidence.
    assert!(last.prompt.to_text().contains("more confident"));
    assert_eq!(r.usage.calls as usize, maps + 1);
}

#[tokio::test]
async fn map_reduce_makes_no_reduce_call_when_every_record_has_nothing() {
    let model = words_model(small(), topical);
    let texts = [about("Noise"), about("Static")];
    let s = synth(&model).await;
    let r = s.synthesize("When?", nodes(&texts)).await.unwrap();
    assert_eq!(r.text, "The sources do not answer this question.");
    assert!(!r.answerable);
    assert!(
        kinds(&model)
            .iter()
            .all(|(k, _, _)| *k == TemplateKind::Map),
        "{:?}",
        kinds(&model)
    );
    let streamed = stream_whole(&s, "When?", nodes(&texts)).await;
    assert_eq!(streamed.text, r.text);
}

#[tokio::test]
async fn map_reduce_collapses_records_that_do_not_fit_one_reduce_prompt() {
    // Records of about 63 words in chunks of 200: a reduce prompt holds three of them.
    let info = scripted(2000, 160);
    let long = |r: &ModelRequest| -> Result<String, ModelError> {
        match (kind(r), r.schema.is_some()) {
            (TemplateKind::Map, _) => {
                let words: Vec<String> = (0..60).map(|i| format!("fact{i}")).collect();
                Ok(json!({"information": words.join(" "), "confidence": 4, "no_information": false}).to_string())
            }
            (TemplateKind::Reduce, true) => Ok(json!({
                "information": format!("collapsed {} records", context(r).matches("Confidence:").count()),
                "confidence": 4, "no_information": false
            })
            .to_string()),
            (TemplateKind::Reduce, false) => Ok(format!("final over: {}", context(r))),
            (other, _) => Err(ModelError::Other(format!("unexpected {other} call"))),
        }
    };
    let model = words_model(info, long);
    let texts: Vec<String> = ["A", "B", "C", "D", "E", "F"]
        .iter()
        .map(|t| about_words(t, 200))
        .collect();
    let s = builder(&model, 200).await.build().unwrap();
    let r = s.synthesize("What?", nodes(&texts)).await.unwrap();
    let calls = kinds(&model);
    let maps = calls.iter().filter(|c| c.0 == TemplateKind::Map).count();
    let collapses: Vec<_> = calls
        .iter()
        .filter(|c| c.0 == TemplateKind::Reduce && c.1)
        .collect();
    assert!(maps >= 6, "{calls:?}");
    assert!(collapses.len() >= 2, "a collapse level: {calls:?}");
    assert!(collapses.len() < 6, "the collapse reduces: {calls:?}");
    assert!(collapses.iter().all(|c| c.2 == 1), "collapse at level 1");
    let last = calls.last().unwrap();
    assert_eq!(
        *last,
        (TemplateKind::Reduce, false, 2),
        "the final call above it"
    );
    // Every record went into some collapse call, and the final answer read the collapsed.
    let collapsed: usize = model
        .requests()
        .iter()
        .filter(|r| kind(r) == TemplateKind::Reduce && r.schema.is_some())
        .map(|r| context(r).matches("Confidence:").count())
        .sum();
    assert!(collapsed >= maps, "{collapsed}");
    assert!(
        r.text
            .starts_with("final over: Confidence: 4/5\nInformation: collapsed")
    );
    // Streaming gives the same answer with the same calls.
    let before = model.requests().len();
    let streamed = stream_whole(&s, "What?", nodes(&texts)).await;
    assert_eq!(streamed.text, r.text);
    assert_eq!(model.requests().len() - before, before);
}

#[tokio::test]
async fn map_reduce_that_cannot_converge_stops_with_an_error() {
    // Records longer than a reduce prompt's chunk: no level reduces them.
    let huge = |_: &ModelRequest| -> Result<String, ModelError> {
        let words: Vec<String> = (0..100).map(|i| format!("fact{i}")).collect();
        Ok(json!({"information": words.join(" "), "confidence": 4}).to_string())
    };
    let model = words_model(small(), huge);
    let texts: Vec<String> = ["A", "B", "C"].iter().map(|t| about(t)).collect();
    let err = synth(&model)
        .await
        .synthesize("What?", nodes(&texts))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            SynthError::TreeNotConverging {
                mode: ResponseMode::MapReduce,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().starts_with("map_reduce cannot converge"),
        "{err}"
    );
}

/// Numbers of `[n]` markers in `text`.
fn markers(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('[') {
        rest = &rest[i + 1..];
        if let Some(j) = rest.find(']')
            && let Ok(n) = rest[..j].trim().parse::<u32>()
        {
            out.push(n);
        }
    }
    out
}

#[tokio::test]
async fn map_reduce_carries_citations_to_the_final_answer() {
    // Map records cite the first label their prompt showed, and a made-up [9]; the
    // reduce answer cites every marker its records hold.
    let cite = |r: &ModelRequest| -> Result<String, ModelError> {
        let c = context(r);
        let first = markers(c).first().copied().unwrap_or(0);
        match kind(r) {
            TemplateKind::Map => Ok(json!({
                "information": format!("Fact [{first}] and more [9]."),
                "rationale": "", "answer": format!("yes [{first}]"), "confidence": 4, "no_information": false
            })
            .to_string()),
            _ => {
                let unique: std::collections::BTreeSet<u32> = markers(c).into_iter().collect();
                let all: Vec<String> = unique.iter().map(|n| format!("[{n}]")).collect();
                Ok(format!("Both {} and [7].", all.join(" ")))
            }
        }
    };
    let model = words_model(small(), cite);
    let texts = [about("Alpha"), about("Beta")];
    let s = builder(&model, ROOM).await.citations(true).build().unwrap();
    let r = s.synthesize("What?", nodes(&texts)).await.unwrap();
    let requests = model.requests();
    assert_eq!(kind(requests.last().unwrap()), TemplateKind::Reduce);
    // Map prompts show labels; the reduce prompt holds the records' checked markers.
    assert!(context(&requests[0]).starts_with("[1]\n"));
    let reduce = context(requests.last().unwrap());
    assert!(
        reduce.contains("Fact [1]") && reduce.contains("Fact [2]"),
        "{reduce}"
    );
    assert!(
        !reduce.contains("[9]"),
        "the map's made-up marker is removed: {reduce}"
    );
    // The final answer cites both nodes; the reduce's made-up [7] is removed.
    assert_eq!(r.text, "Both [1] [2] and.", "{}", r.text);
    assert!(r.is_cited("n1") && r.is_cited("n2"), "{}", r.text);
    let citations = r.citations.clone().unwrap();
    assert!(
        citations.removed.contains(&"[7]".to_string()),
        "{citations:?}"
    );
    // Streamed, the same answer and citations.
    let streamed = stream_whole(&s, "What?", nodes(&texts)).await;
    assert_eq!(streamed.text, r.text);
    assert_eq!(streamed.citations, r.citations);
}

#[tokio::test]
async fn map_reduce_streams_what_it_answers() {
    let model = words_model(small(), topical);
    let texts = [about("Alpha"), about("Beta")];
    let s = synth(&model).await;
    let plain = s.synthesize("When?", nodes(&texts)).await.unwrap();
    let mut stream = s.stream("When?", nodes(&texts)).await.unwrap();
    let mut deltas = 0;
    let mut text = String::new();
    while let Some(d) = futures::StreamExt::next(&mut stream).await {
        text.push_str(&d.unwrap());
        deltas += 1;
    }
    assert_eq!(text, plain.text);
    assert!(deltas >= 1);
    let calls = model.requests().len();
    assert_eq!(calls % 2, 0, "as many calls each: {calls}");
}

#[tokio::test]
async fn map_reduce_plan_counts_the_map_calls_exactly() {
    // A small output reserve: the plan's longest records still fit a reduce prompt.
    let model = words_model(scripted(2000, 16), topical);
    let texts = [about("Alpha"), about("Noise"), about("Beta")];
    let s = synth(&model).await;
    let plan = s.plan("When?", nodes(&texts)).await.unwrap();
    assert!(model.requests().is_empty(), "a plan makes no call");
    let r = s.synthesize("When?", nodes(&texts)).await.unwrap();
    let requests = model.requests();
    let maps: Vec<_> = requests
        .iter()
        .filter(|r| kind(r) == TemplateKind::Map)
        .collect();
    let map_row = &plan.rows[0];
    assert_eq!(
        (map_row.step, map_row.level, map_row.exact),
        ("map", 0, true)
    );
    assert_eq!(map_row.calls, maps.len());
    assert_eq!(
        map_row.prompt_tokens,
        maps.iter().map(|r| r.prompt_tokens).sum::<usize>()
    );
    // The levels above are bounds: at least the calls made.
    assert!(!plan.exact);
    assert!(plan.calls >= r.usage.calls as usize, "{plan:?}");
    assert_eq!(plan.rows.last().unwrap().step, "reduce");
}

#[tokio::test]
async fn map_reduce_templates_can_be_replaced() {
    use synthkit::prompt::PromptTemplate;
    let model = words_model(small(), topical);
    let s = builder(&model, ROOM)
        .await
        .map_template(PromptTemplate::completion(
            TemplateKind::Custom,
            "MAPPING {context_str} for {query_str}",
        ))
        .reduce_template(PromptTemplate::completion(
            TemplateKind::Custom,
            "REDUCING {context_str} for {query_str}",
        ))
        .build()
        .unwrap();
    s.synthesize("When?", nodes(&[about("Alpha")]))
        .await
        .unwrap();
    let requests = model.requests();
    assert!(
        requests[0]
            .prompt
            .to_text()
            .starts_with("MAPPING Alpha facts")
    );
    let last = requests.last().unwrap();
    assert!(
        last.prompt
            .to_text()
            .starts_with("REDUCING Confidence: 5/5")
    );
    // A template without the context is refused when the synthesizer is built.
    let refused = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::MapReduce)
        .reduce_template(PromptTemplate::completion(
            TemplateKind::Custom,
            "{query_str}",
        ))
        .build();
    assert!(refused.is_err());
}
