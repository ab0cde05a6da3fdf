//! Evidence first with the extractive selector and a scripted model: what reaches the
//! prompt, when no call is made, and what the grounding check says of the answer.

use std::sync::Arc;

use synthkit::evidence::{DEFAULT_EXTRACT_COVERAGE, Evidence};
use synthkit::grounding::{GroundingStatus, OnUnsupported};
use synthkit::model::ModelInfo;
use synthkit::testing::ScriptedModel;
use synthkit::{Node, Response, Synthesizer};
use synthkit_extractive::ExtractiveEvidence;

use crate::common::repo_path;

/// The sample documents' paragraphs as nodes (`file#n`), as a retriever's chunks.
fn sample_nodes() -> Vec<Node> {
    let mut nodes = Vec::new();
    let dir = repo_path("examples/docs");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, para) in text.split("\n\n").enumerate() {
            if !para.trim().is_empty() {
                nodes.push(Node::new(format!("{name}#{i}"), para.trim()));
            }
        }
    }
    nodes
}

fn evidence() -> Evidence {
    Evidence::new(Arc::new(ExtractiveEvidence::new()))
}

/// A synthesizer over `model` with `evidence`.
fn synthesizer(model: Arc<ScriptedModel>, evidence: Evidence) -> Synthesizer {
    Synthesizer::builder(model)
        .evidence(evidence)
        .build()
        .unwrap()
}

/// What `synth` answers to `question` over the sample nodes.
async fn ask(synth: &Synthesizer, question: &str) -> Response {
    synth.synthesize(question, sample_nodes()).await.unwrap()
}

/// A model that always replies `reply`.
fn replying(reply: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::constant(ModelInfo::new("m"), reply))
}

/// A synthesizer whose model always replies `reply`, with evidence, that does `on` with an
/// unsupported answer.
fn checking(reply: &str, on: OnUnsupported) -> Synthesizer {
    Synthesizer::builder(replying(reply))
        .evidence(evidence())
        .on_unsupported(on)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_prompt_holds_the_bearing_sentence_and_not_its_neighbours() {
    let model = replying("Every three months.");
    let synth = synthesizer(model.clone(), evidence());
    let nodes = sample_nodes();
    let all = nodes.len();
    let r = synth
        .synthesize("How often is the mirror cleaned?", nodes)
        .await
        .unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let prompt = requests[0].prompt.to_text();
    assert!(
        prompt
            .contains("The primary mirror is cleaned with carbon dioxide snow every three months"),
        "{prompt}"
    );
    // The sentences around it do not bear on the question.
    assert!(!prompt.contains("The CO2 snow lifts dust"), "{prompt}");
    assert!(!prompt.contains("Rafael Okonkwo"), "{prompt}");
    let evidence = r.evidence.unwrap();
    assert!(evidence.answerable);
    assert!(evidence.dropped_count + evidence.kept.len() <= all);
    assert!(evidence.dropped_count > all / 2, "{evidence:?}");
    // Each kept sentence says where it is in its node.
    let kept = evidence
        .kept
        .iter()
        .flat_map(|k| k.sentences.iter().map(move |s| (k, s)))
        .find(|(_, s)| s.text.contains("carbon dioxide snow every three months"))
        .unwrap();
    let node = r
        .source_nodes
        .iter()
        .find(|n| n.id == kept.0.node_id)
        .unwrap();
    let (start, end) = (kept.1.start.unwrap(), kept.1.end.unwrap());
    let found: String = node.text.chars().skip(start).take(end - start).collect();
    assert!(
        found.starts_with("The primary mirror is cleaned"),
        "{found}"
    );
    // The answer's facts are in what the model was shown.
    assert_eq!(r.grounding.unwrap().status, GroundingStatus::Supported);
    assert!(r.answerable);
}

#[tokio::test]
async fn nothing_bearing_on_the_question_is_answered_without_a_call() {
    let model = replying("Made up.");
    let synth = Synthesizer::builder(model.clone())
        .evidence(evidence())
        .not_in_sources_answer("Not in the documents.")
        .build()
        .unwrap();
    let r = ask(&synth, "Who won the 1998 World Cup?").await;
    assert!(model.requests().is_empty());
    assert!(!r.answerable);
    assert_eq!(r.text, "Not in the documents.");
    assert!(r.evidence.unwrap().abstained);
    // Without abstention the model is asked anyway.
    let synth = synth
        .to_builder()
        .evidence(evidence().with_abstain(false))
        .build()
        .unwrap();
    ask(&synth, "Who won the 1998 World Cup?").await;
    assert!(!model.requests().is_empty());
}

#[tokio::test]
async fn an_answer_stating_a_number_no_source_holds_is_unsupported() {
    let question = "How often is the mirror cleaned?";
    let model = replying("It is cleaned every 9 weeks by Dr. Helga Brandt.");
    for evidence_on in [true, false] {
        let mut builder = Synthesizer::builder(model.clone());
        if evidence_on {
            builder = builder.evidence(evidence());
        }
        let r = ask(&builder.build().unwrap(), question).await;
        let g = r.grounding.unwrap();
        assert!(
            g.unsupported.iter().any(|u| u.contains("Helga Brandt")),
            "{g:?}"
        );
        if evidence_on {
            // The model was shown the mirror's sentences only: no 9 there.
            assert_eq!(g.status, GroundingStatus::Unsupported, "{g:?}");
            assert!(g.unsupported.contains(&"9".to_string()), "{g:?}");
        } else {
            // Shown every chunk, one of which has a 9 (another matter's).
            assert_eq!(g.status, GroundingStatus::Partly, "{g:?}");
        }

        // Warned, not replaced, by default.
        assert!(r.answerable);
        assert!(r.text.contains("9 weeks"));
    }
    // Abstain: "not in the sources", the model's answer kept aside.
    let synth = Synthesizer::builder(model.clone())
        .evidence(evidence())
        .on_unsupported(OnUnsupported::Abstain)
        .build()
        .unwrap();
    let r = ask(&synth, question).await;
    assert!(!r.answerable);
    assert_eq!(
        r.text,
        synthkit::text::abstention::DEFAULT_NOT_IN_SOURCES_ANSWER
    );
    assert!(r.grounding.unwrap().withheld.unwrap().contains("9 weeks"));
    // Error: the synthesis fails, naming what was not found.
    let synth = synth
        .to_builder()
        .on_unsupported(OnUnsupported::Error)
        .build()
        .unwrap();
    let e = synth
        .synthesize(question, sample_nodes())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("\"9\""), "{e}");
    // A supported answer is left alone, and names the node holding its facts.
    let synth = checking(
        "Every three months, in March, June, September and December.",
        OnUnsupported::Error,
    );
    let r = ask(&synth, question).await;
    let g = r.grounding.unwrap();
    assert_eq!(g.status, GroundingStatus::Supported, "{g:?}");
    assert!(
        g.source_ids[0].starts_with("02-telescope-maintenance.md"),
        "{g:?}"
    );
}

#[tokio::test]
async fn a_streamed_answer_is_checked_when_it_ends() {
    let synth = checking("It is cleaned every 9 weeks.", OnUnsupported::Abstain);
    let stream = synth
        .stream("How often is the mirror cleaned?", sample_nodes())
        .await
        .unwrap();
    let r = stream.finish().await.unwrap();
    assert!(!r.answerable);
    let g = r.grounding.unwrap();
    assert_eq!(g.status, GroundingStatus::Unsupported);
    assert!(g.withheld.unwrap().contains("9 weeks"));
}

/// The label `[n]` of the source whose text (as the prompt shows it) holds `needle`.
fn label_of(prompt: &str, needle: &str) -> Option<u32> {
    let at = prompt.find(needle)?;
    prompt[..at]
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
}

/// A model that cites the mirror's source by number only, as small models do: no quote
/// copied.
fn cites_by_number() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(ModelInfo::new("m"), |r| {
        let prompt = r.prompt.to_text();
        let n = label_of(&prompt, "carbon dioxide snow").unwrap_or(99);
        Ok(format!("It is cleaned every three months [{n}]."))
    }))
}

#[tokio::test]
async fn a_bare_marker_becomes_a_verified_quote_of_its_evidence() {
    let model = cites_by_number();
    let synth = Synthesizer::builder(model.clone())
        .citations(true)
        .citation_style(synthkit::CitationStyle::Quotes)
        .evidence(evidence())
        .build()
        .unwrap();
    let r = ask(&synth, "How often is the mirror cleaned?").await;
    assert_eq!(r.text, "It is cleaned every three months [1].");
    let c = r.citations.unwrap();
    assert_eq!(c.quotes.len(), 1, "{:?}", c.quotes);
    let q = &c.quotes[0];
    assert_eq!(q.status, synthkit::QuoteStatus::Verified);
    assert_eq!(q.origin, synthkit::QuoteOrigin::Evidence);
    assert_eq!(q.marker, 1);
    assert!(
        q.quote
            .contains("The primary mirror is cleaned with carbon dioxide snow every three months"),
        "{q:?}"
    );
    // The quote is the node's own characters at the offsets given.
    let node = r.source_nodes.iter().find(|n| n.id == q.node_id).unwrap();
    let (start, end) = (q.start.unwrap(), q.end.unwrap());
    let at: String = node.text.chars().skip(start).take(end - start).collect();
    assert_eq!(at, q.quote);
    assert_eq!(c.markers[0].node_ids, vec![q.node_id.clone()]);
    // In JSON it says who wrote it; a quote the model wrote says nothing.
    let json = serde_json::to_value(q).unwrap();
    assert_eq!(json["origin"], "evidence");
}

#[tokio::test]
async fn without_evidence_a_bare_marker_gets_no_quote() {
    let model = cites_by_number();
    let synth = Synthesizer::builder(model)
        .citations(true)
        .citation_style(synthkit::CitationStyle::Quotes)
        .build()
        .unwrap();
    let r = ask(&synth, "How often is the mirror cleaned?").await;
    let c = r.citations.unwrap();
    assert!(c.quotes.is_empty(), "{:?}", c.quotes);
    assert_eq!(c.markers.len(), 1);
}

/// A model that declines every question.
fn declines() -> Arc<ScriptedModel> {
    replying("Not in the sources.")
}

#[tokio::test]
async fn a_declined_question_the_evidence_covers_is_answered_from_its_sentences() {
    let model = declines();
    let synth = synthesizer(model.clone(), evidence());
    let r = ask(&synth, "How often is the primary mirror cleaned?").await;
    assert_eq!(model.requests().len(), 1, "the model was asked");
    assert!(r.answerable, "{}", r.text);
    assert!(r.text.contains("every three months"), "{}", r.text);
    assert!(!r.text.contains('['), "no marker: {}", r.text);
    let evidence = r.evidence.as_ref().unwrap();
    let extracted = evidence.extracted.as_ref().unwrap();
    // What the model's reply was read as: "not in the sources".
    assert_eq!(
        extracted.declined,
        "The sources do not answer this question."
    );
    assert!(!extracted.sources.is_empty());
    // The sources' own sentences, checked as any answer is.
    let grounding = r.grounding.as_ref().unwrap();
    assert_eq!(
        grounding.status,
        GroundingStatus::Supported,
        "{grounding:?}"
    );
    assert!(
        grounding.source_ids.contains(&extracted.sources[0]),
        "{grounding:?}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(
        json["evidence"]["extracted"]["sources"][0],
        extracted.sources[0].as_str()
    );
}

#[tokio::test]
async fn a_declined_question_stays_declined_when_told_or_the_evidence_covers_too_little() {
    // Told to keep the model's words.
    let model = declines();
    let synth = synthesizer(model.clone(), evidence().with_extract_when_declined(None));
    let r = ask(&synth, "How often is the primary mirror cleaned?").await;
    assert!(!r.answerable, "{}", r.text);
    assert!(r.evidence.as_ref().unwrap().extracted.is_none());
    // The default floor (0.75) above what the best sentence covers (about 0.68: nothing
    // says "winter"), though it covers enough for the model to be asked.
    let model = declines();
    let synth = synthesizer(model.clone(), evidence());
    let r = ask(&synth, "How often is the primary mirror cleaned in winter?").await;
    assert_eq!(model.requests().len(), 1, "the model was asked");
    let evidence = r.evidence.as_ref().unwrap();
    assert!(evidence.coverage < DEFAULT_EXTRACT_COVERAGE, "{evidence:?}");
    assert!(!r.answerable, "{}", r.text);
    assert!(evidence.extracted.is_none());
}

#[tokio::test]
async fn a_name_whose_words_are_in_a_nodes_id_is_not_missing() {
    let model = replying("A reactor backed by the operating system's event queue.");
    let synth = synthesizer(model.clone(), evidence());
    let nodes = vec![
        Node::new(
            "tokio/README.md#0",
            "Tokio is an event-driven platform. It provides a reactor backed by the \
             operating system's event queue.",
        ),
        Node::new("other#0", "The cafe sells tea and cake."),
    ];
    let r = synth
        .synthesize(
            "What does the Tokio README say the reactor is backed by?",
            nodes.clone(),
        )
        .await
        .unwrap();
    assert!(r.evidence.unwrap().missing.is_empty());
    // A name a word of which no node has is still missing.
    let r = synth
        .synthesize(
            "What does the Varnholm README say the reactor is backed by?",
            nodes,
        )
        .await
        .unwrap();
    assert!(!r.answerable);
    assert_eq!(
        r.evidence.unwrap().missing,
        vec!["Varnholm README".to_string()]
    );
}
