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

/// Statuses and reasons of a quote-mode answer over `texts`, and its citations.
async fn statuses(texts: &[&str], answer: &str) -> synthkit::Citations {
    let model = ScriptedModel::constant(info(16_384, 256), answer);
    let synth = Synthesizer::builder(Arc::new(model))
        .citations(true)
        .citation_style(CitationStyle::Quotes)
        .build()
        .unwrap();
    let nodes: Vec<Node> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Node::new(format!("n{}", i + 1), *t))
        .collect();
    synth
        .synthesize("q", nodes)
        .await
        .unwrap()
        .citations
        .unwrap()
}

#[tokio::test]
async fn fabricated_quotes_inside_words_short_or_closed_by_another_mark_are_not_verified() {
    let source = "The drug is ineffective and unsafe for children. A ward opens at dawn.";
    let cases = [
        ("It works [1] \"effective\".", QuoteStatus::NotFound, None),
        (
            "Safe [1] \"safe for children\".",
            QuoteStatus::NotFound,
            None,
        ),
        (
            "One letter [1] \"a\".",
            QuoteStatus::Unchecked,
            Some("too_short"),
        ),
        (
            "Dawn [1] \u{201C}opens at dawn\".",
            QuoteStatus::Unchecked,
            Some("unclosed"),
        ),
        (
            "Dawn [1] \u{ab}opens at dawn\".",
            QuoteStatus::Unchecked,
            Some("unclosed"),
        ),
    ];
    for (answer, status, reason) in cases {
        let c = statuses(&[source], answer).await;
        assert_eq!(c.quotes.len(), 1, "{answer}: {c:?}");
        let q = &c.quotes[0];
        assert_eq!(q.status, status, "{answer}: {q:?}");
        assert_eq!(q.reason.map(|r| r.as_str()), reason, "{answer}");
        assert_eq!((q.start, q.end), (None, None));
        // The marker's only use is a failed quote: the node is not cited.
        assert!(c.markers.is_empty(), "{answer}: {c:?}");
        assert!(!c.cites("n1"));
    }
    // The same words where the source has them, whole.
    let c = statuses(&[source], "Unsafe [1] \u{201C}unsafe for children\u{201D}.").await;
    assert_eq!(c.quotes[0].status, QuoteStatus::Verified);
    assert!(c.cites("n1"));
}

#[tokio::test]
async fn over_long_and_unclosed_quotes_are_listed_as_unchecked_and_cite_nothing() {
    let long = "the dome opens at dusk ".repeat(50);
    let answer = format!("Dusk [1] \"{long}\". Cleaned [2] \"cleaned every six months");
    let c = statuses(&[DOME, MIRROR], &answer).await;
    let reasons: Vec<_> = c
        .quotes
        .iter()
        .map(|q| (q.status, q.reason.map(|r| r.as_str())))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (QuoteStatus::Unchecked, Some("too_long")),
            (QuoteStatus::Unchecked, Some("unclosed"))
        ]
    );
    assert!(c.markers.is_empty(), "{c:?}");
    assert_eq!(c.quote_counts().unchecked, 2);
    let json = serde_json::to_value(&c.quotes[1]).unwrap();
    assert_eq!(json["status"], "unchecked");
    assert_eq!(json["reason"], "unclosed");
}

#[tokio::test]
async fn a_quote_in_decomposed_unicode_matches_its_precomposed_source() {
    // The source writes "é" precomposed; the model's quote writes e and a combining accent.
    let c = statuses(
        &["Le caf\u{e9} ferme t\u{f4}t."],
        "Early [1] \"cafe\u{301} ferme to\u{302}t\".",
    )
    .await;
    assert_eq!(c.quotes[0].status, QuoteStatus::Verified, "{c:?}");
    assert_eq!((c.quotes[0].start, c.quotes[0].end), (Some(3), Some(17)));
}

#[tokio::test]
async fn a_reply_of_markers_only_is_read_up_to_the_cap() {
    // The attack: 128 KB of `[1] ` (82 s of CPU before the check was linear).
    let answer = "[1] ".repeat(32 * 1024);
    let c = statuses(&[DOME, MIRROR], &answer).await;
    assert_eq!(
        c.unchecked_markers,
        32 * 1024 - synthkit::citation::MAX_CHECKED_MARKERS
    );
    assert!(c.cites("n1"));
    // Long quotes: only the first MAX_QUOTES are checked.
    let quote = format!("[2] \"{}\" ", "made up words ".repeat(70));
    let c = statuses(&[DOME, MIRROR], &quote.repeat(1000)).await;
    assert_eq!(c.quotes.len(), synthkit::citation::MAX_QUOTES);
    assert_eq!(c.unchecked_markers, 1000 - synthkit::citation::MAX_QUOTES);
    assert!(c.markers.is_empty());
}
