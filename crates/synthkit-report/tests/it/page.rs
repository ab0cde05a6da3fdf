//! Pages of refine, compact, tree_summarize and accumulate runs: every call present,
//! every link resolving, hostile text escaped, caps said.

use synthkit::ResponseMode;
use synthkit_report::render;

use crate::common::{HOSTILE, assert_anchors_resolve, attr_values, run};

const MODES: [ResponseMode; 4] = [
    ResponseMode::Refine,
    ResponseMode::Compact,
    ResponseMode::TreeSummarize,
    ResponseMode::Accumulate,
];

#[tokio::test]
async fn every_call_has_a_box_and_every_link_resolves() {
    for mode in MODES {
        let run = run(mode, "They sail at dawn [1].").await;
        assert!(run.steps.len() > 1, "{mode}: {} calls", run.steps.len());
        let page = render(&run);
        let ids = attr_values(&page, "id");
        for s in &run.steps {
            let id = format!("call-{}", s.call);
            assert!(ids.contains(&id.as_str()), "{mode}: no box for {id}");
        }
        for p in 0..run.sources.len() {
            assert!(
                ids.contains(&format!("src-{p}").as_str()),
                "{mode}: source {p}"
            );
        }
        assert_anchors_resolve(&page);
        assert!(
            page.contains("class=\"cite\" href=\"#src-0\""),
            "{mode}: the citation links to its chunk"
        );
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "{mode}: nothing fetched"
        );
    }
}

#[tokio::test]
async fn untrusted_text_is_shown_as_text() {
    let reply = "Summary: </script><img src=x onerror=alert(3)> [1]";
    for mode in MODES {
        let run = run(mode, reply).await;
        let page = render(&run);
        // Our own script is the only one; no element comes from a chunk or a reply.
        assert_eq!(page.matches("<script").count(), 1, "{mode}");
        assert_eq!(page.matches("</script>").count(), 1, "{mode}");
        assert!(!page.contains("<img"), "{mode}");
        assert!(
            page.contains("&lt;img src=x onerror=alert(2)&gt;"),
            "{mode}: the chunk is shown"
        );
        assert!(
            page.contains("&lt;/script&gt;&lt;img src=x onerror=alert(3)&gt;"),
            "{mode}: the reply is shown"
        );
    }
    assert!(HOSTILE.contains("</script>"));
}

#[tokio::test]
async fn a_query_and_ids_with_markup_are_escaped_too() {
    let mut run = run(ResponseMode::Compact, "ok").await;
    run.query = "<b>bold</b>?".into();
    run.sources[0].id = "\"><svg onload=alert(1)>".into();
    let page = render(&run);
    assert!(!page.contains("<svg") && !page.contains("<b>bold"));
    assert!(page.contains("&lt;b&gt;bold&lt;/b&gt;?"));
}

#[tokio::test]
async fn long_replies_and_sources_are_capped_on_the_page() {
    let long = "x".repeat(20_000);
    let run = run(ResponseMode::Accumulate, &long).await;
    let page = render(&run);
    assert!(page.contains("more bytes not kept"));
    // The answer shows every reply whole; the boxes show only their start.
    assert_eq!(page.matches(long.as_str()).count(), run.steps.len());
}

#[tokio::test]
async fn quotes_are_listed_with_their_status_and_highlighted_in_their_source() {
    use std::sync::Arc;
    use synthkit::model::ModelInfo;
    use synthkit::testing::ScriptedModel;
    use synthkit::{CitationStyle, Node, Synthesizer};
    let reply = "Dawn [1] \"boats sail at dawn\" and [2] \"never written\".";
    let model = ScriptedModel::constant(ModelInfo::new("s"), reply);
    let synth = Synthesizer::builder(Arc::new(model))
        .citations(true)
        .citation_style(CitationStyle::Quotes)
        .build()
        .unwrap();
    let nodes = vec![
        Node::new("harbour", "Über alles: <b> boats sail at dawn."),
        Node::new("other", "Nothing here."),
    ];
    let response = synth.synthesize("When?", nodes).await.unwrap();
    let record =
        synthkit_report::RunRecord::from_response("When?", ResponseMode::Compact, &response);
    assert_eq!(record.quotes.len(), 2);
    let page = render(&record);
    assert!(page.contains("<ul class=\"quotes\">"), "{page}");
    assert!(page.contains(">verified</span>"), "{page}");
    assert!(page.contains(">not_found</span>"), "{page}");
    assert!(
        page.contains("Über alles: &lt;b&gt; <mark class=\"quote verified\" title=\"verified\">boats sail at dawn</mark>."),
        "{page}"
    );
    crate::common::assert_anchors_resolve(&page);
}
