//! Quote mode: `[n] "exact words"` citations checked against the cited node's text
//! (verified with character offsets, misattributed and re-pointed, or not found and left
//! out of the citations), numbers of cited sentences checked against their sources, and
//! the same answer and citations streamed or not.

use std::sync::Arc;

use futures::StreamExt;
use synthkit::citation::QUOTE_CITATION_INSTRUCTIONS;
use synthkit::prompt::RenderedPrompt;
use synthkit::testing::ScriptedModel;
use synthkit::{CitationStyle, Node, QuoteStatus, Response, Synthesizer};

use crate::common::fixtures::scripted as info;

/// Non-ASCII text before the quoted words, so byte and character offsets differ.
const DOME: &str = "Die Kuppel öffnet sich — «Abenddämmerung»: the dome opens at dusk.";
const MIRROR: &str = "The mirror is cleaned every six months by 2 technicians.";

fn nodes() -> Vec<Node> {
    vec![Node::new("dome", DOME), Node::new("mirror", MIRROR)]
}

async fn ask(answer: &str) -> (Response, ScriptedModel) {
    let model = ScriptedModel::constant(info(4096, 256), answer);
    let synth = Synthesizer::builder(Arc::new(model.clone()))
        .citations(true)
        .citation_style(CitationStyle::Quotes)
        .build()
        .unwrap();
    (synth.synthesize("When?", nodes()).await.unwrap(), model)
}

fn chars(text: &str, start: usize, end: usize) -> String {
    text.chars().skip(start).take(end - start).collect()
}

#[tokio::test]
async fn a_verified_quote_has_character_offsets_into_its_node() {
    let (response, model) = ask("At dusk [1] \"the dome opens at dusk\".").await;
    // The prompt asks for quotes.
    let prompt = match &model.requests()[0].prompt {
        RenderedPrompt::Chat(m) => m.last().unwrap().content.clone(),
        RenderedPrompt::Text(t) => t.clone(),
    };
    assert!(prompt.contains(QUOTE_CITATION_INSTRUCTIONS), "{prompt}");
    // The quote stays in the answer as written.
    assert_eq!(response.text, "At dusk [1] \"the dome opens at dusk\".");
    let c = response.citations.unwrap();
    assert_eq!(c.quotes.len(), 1);
    let q = &c.quotes[0];
    assert_eq!(q.status, QuoteStatus::Verified);
    assert_eq!((q.marker, q.node_id.as_str()), (1, "dome"));
    let (start, end) = (q.start.unwrap(), q.end.unwrap());
    assert_eq!(chars(DOME, start, end), "the dome opens at dusk");
    assert_ne!(
        DOME.find("the dome").unwrap(),
        start,
        "offsets count characters"
    );
    assert!(c.cites("dome"));
    assert!(c.unsupported_numbers.is_empty());
}

#[tokio::test]
async fn a_fabricated_quote_is_not_found_and_left_out_of_the_citations() {
    let (response, _) = ask("Weekly [2] \"polished every single week\".").await;
    assert!(!response.is_cited("mirror"));
    let c = response.citations.unwrap();
    assert_eq!(c.quotes[0].status, QuoteStatus::NotFound);
    assert_eq!(c.quotes[0].node_id, "mirror");
    assert_eq!((c.quotes[0].start, c.quotes[0].end), (None, None));
    assert!(!c.cites("mirror"), "{c:?}");
    assert!(c.markers.is_empty());
}

#[tokio::test]
async fn a_misattributed_quote_is_re_pointed_to_the_source_holding_it() {
    let (response, _) = ask("Every six months [1] \"cleaned every six months\".").await;
    let c = response.citations.unwrap();
    let q = &c.quotes[0];
    assert_eq!(q.status, QuoteStatus::Misattributed);
    assert_eq!(q.node_id, "mirror");
    assert_eq!(q.marked_node_id, "dome");
    assert_eq!(
        chars(MIRROR, q.start.unwrap(), q.end.unwrap()),
        "cleaned every six months"
    );
    assert_eq!(c.markers[0].node_ids, vec!["mirror".to_string()]);
    assert!(!c.cites("dome"));
}

#[tokio::test]
async fn whitespace_case_and_curly_quotes_are_normalised() {
    let (response, _) = ask("Dusk [1] \u{201C}The  DOME\n opens at dusk.\u{201D}").await;
    let c = response.citations.unwrap();
    assert_eq!(c.quotes[0].status, QuoteStatus::Verified, "{c:?}");
    let (start, end) = (c.quotes[0].start.unwrap(), c.quotes[0].end.unwrap());
    assert_eq!(chars(DOME, start, end), "the dome opens at dusk.");
}

#[tokio::test]
async fn a_number_in_no_cited_source_is_flagged() {
    let (response, _) = ask("Every six months, by 3 technicians [2]. By 2 people [2].").await;
    let c = response.citations.unwrap();
    assert_eq!(c.unsupported_numbers.len(), 1, "{c:?}");
    let u = &c.unsupported_numbers[0];
    assert_eq!(u.number, "3");
    assert_eq!(u.markers, vec![1]);
    assert_eq!(u.sentence, "Every six months, by 3 technicians.");
}

#[tokio::test]
async fn markers_mode_checks_no_quotes() {
    let model = ScriptedModel::constant(info(4096, 256), "X [1] \"not there\" 7.");
    let synth = Synthesizer::builder(Arc::new(model))
        .citations(true)
        .build()
        .unwrap();
    let c = synth
        .synthesize("q", nodes())
        .await
        .unwrap()
        .citations
        .unwrap();
    assert!(c.quotes.is_empty() && c.unsupported_numbers.is_empty());
    assert!(c.cites("dome"));
}

#[tokio::test]
async fn streamed_quotes_match_the_plain_call() {
    let answer = "Dusk [1] \"the dome opens at dusk\". Cleaned [1] \"cleaned every six months\", \
                  by 4 [2] \"invented words\". Gone [7].";
    for hide in [false, true] {
        let build = || {
            Synthesizer::builder(Arc::new(ScriptedModel::constant(info(4096, 256), answer)))
                .citations(true)
                .citation_markers(!hide)
                .citation_style(CitationStyle::Quotes)
                .build()
                .unwrap()
        };
        let plain = build().synthesize("q", nodes()).await.unwrap();
        let mut stream = build().stream("q", nodes()).await.unwrap();
        let mut text = String::new();
        while let Some(d) = stream.next().await {
            text.push_str(&d.unwrap());
        }
        let streamed = stream.finish().await.unwrap();
        assert_eq!(text, plain.text);
        assert_eq!(streamed.citations, plain.citations);
        let c = plain.citations.unwrap();
        let statuses: Vec<QuoteStatus> = c.quotes.iter().map(|q| q.status).collect();
        assert_eq!(
            statuses,
            vec![
                QuoteStatus::Verified,
                QuoteStatus::Misattributed,
                QuoteStatus::NotFound
            ]
        );
        assert_eq!(c.removed, vec!["[7]".to_string()]);
        assert_eq!(c.unsupported_numbers[0].number, "4");
    }
}
