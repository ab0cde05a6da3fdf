//! Runs and page checks shared by the modules.

use std::collections::HashSet;
use std::sync::Arc;

use synthkit::model::ModelInfo;
use synthkit::testing::ScriptedModel;
use synthkit::{Node, ResponseMode, Synthesizer};
use synthkit_report::{BudgetRecord, RunRecord};

/// A chunk an attacker wrote: markup and a script end tag.
pub const HOSTILE: &str = "Boats </script><script>alert(1)</script> <img src=x onerror=alert(2)> & \"quotes\" sail at dawn.";

/// Eight nodes, the third hostile, with sections and scores.
pub fn nodes() -> Vec<Node> {
    (0..8)
        .map(|i| {
            let text = if i == 2 {
                HOSTILE.to_string()
            } else {
                let words: Vec<String> = (0..50).map(|w| format!("w{i}x{w}")).collect();
                format!("Fact {i}: {}.", words.join(" "))
            };
            let mut n =
                Node::new(format!("doc#{i}"), text).with_metadata("section", format!("Part {i}"));
            n.score = Some(1.0 - i as f64 / 10.0);
            n
        })
        .collect()
}

/// The record of a `mode` run whose model answers `reply` (with citations on).
pub async fn run(mode: ResponseMode, reply: &str) -> RunRecord {
    let info = ModelInfo::new("scripted")
        .with_context_window(600)
        .with_num_output(60);
    let model = ScriptedModel::constant(info, reply);
    let synth = Synthesizer::builder(Arc::new(model))
        .mode(mode)
        .citations(true)
        .return_steps(true)
        .build()
        .unwrap();
    let query = "When do the boats sail?";
    let response = synth.synthesize(query, nodes()).await.unwrap();
    RunRecord::from_response(query, mode, &response)
        .with_model("scripted", "scripted")
        .with_budget(BudgetRecord::of(synth.budget()))
}

/// The values of `attr="..."` in `page`.
pub fn attr_values<'a>(page: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!("{attr}=\"");
    page.match_indices(&needle)
        .filter_map(|(i, _)| {
            let rest = &page[i + needle.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

/// Every `href="#x"` of `page` names an `id="x"` of `page`.
pub fn assert_anchors_resolve(page: &str) {
    let ids: HashSet<&str> = attr_values(page, "id").into_iter().collect();
    for href in attr_values(page, "href") {
        let target = href
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("a link leaves the page: {href}"));
        assert!(ids.contains(target), "#{target} is not on the page");
    }
}
