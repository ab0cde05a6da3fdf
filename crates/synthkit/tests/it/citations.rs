//! Citations through every mode: labels in prompts, markers kept through refine and
//! tree_summarize, invalid markers removed, renumbering, streaming, and the property that
//! a summary's markers only name nodes that reached its subtree.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use proptest::prelude::*;
use synthkit::model::ModelRequest;
use synthkit::prompt::RenderedPrompt;
use synthkit::prompt::defaults::CITATION_INSTRUCTIONS;
use synthkit::testing::ScriptedModel;
use synthkit::{Node, ResponseMode, SynthError, Synthesizer};

use crate::common::fixtures::scripted as info;

/// Nodes `n1`, `n2`, ... (citation labels count from 1).
fn nodes(texts: &[&str]) -> Vec<Node> {
    crate::common::fixtures::nodes_from(1, texts)
}

/// The context a request carries (first-level context, summaries or a refine's new text).
fn context(r: &ModelRequest) -> &str {
    r.source()
        .unwrap()
        .variable("context_msg")
        .or_else(|| r.source().unwrap().variable("context_str"))
        .unwrap_or_default()
}

/// Numbers of `[n]` markers and label lines in `text`.
fn markers(text: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find('[') {
        rest = &rest[i + 1..];
        if let Some(j) = rest.find(']') {
            for part in rest[..j].split(',') {
                if let Ok(n) = part.trim().parse::<u32>() {
                    out.insert(n);
                }
            }
        }
    }
    out
}

/// A model that cites the first label of its context, plus a hallucinated `[9]`.
fn citing_model() -> ScriptedModel {
    ScriptedModel::new(info(4096, 128), |r| {
        let first = markers(context(r)).into_iter().next().unwrap_or(1);
        let existing = r
            .source()
            .unwrap()
            .variable("existing_answer")
            .unwrap_or_default();
        Ok(format!("{existing} Fact [{first}] and more [9].")
            .trim()
            .to_string())
    })
}

#[tokio::test]
async fn every_mode_labels_sources_and_checks_markers() {
    let texts = ["Alpha is first.", "Beta is second.", "Gamma is third."];
    for mode in crate::common::fixtures::PACKING_MODES {
        let model = citing_model();
        let synth = Synthesizer::builder(Arc::new(model.clone()))
            .mode(mode)
            .citations(true)
            .build()
            .unwrap();
        let response = synth.synthesize("What?", nodes(&texts)).await.unwrap();
        let requests = model.requests();
        assert!(!requests.is_empty(), "{mode}");
        // Labels and instructions reach the model.
        let first = &requests[0];
        assert!(context(first).starts_with("[1]\n"), "{mode}: {first:?}");
        assert!(
            first.prompt.to_text().contains("Cite sources as [n]"),
            "{mode}"
        );
        // The hallucinated [9] never survives; every marker maps to a node.
        assert!(!response.text.contains("[9]"), "{mode}: {}", response.text);
        let citations = response.citations.clone().unwrap();
        assert!(citations.removed.iter().all(|m| m == "[9]"), "{mode}");
        assert!(!citations.removed.is_empty(), "{mode}");
        for (i, c) in citations.markers.iter().enumerate() {
            assert_eq!(c.marker, i as u32 + 1, "{mode}");
            assert_eq!(c.node_ids.len(), 1, "{mode}");
            assert!(response.text.contains(&format!("[{}]", c.marker)), "{mode}");
        }
        assert!(response.is_cited("n1"), "{mode}: {}", response.text);
    }
}

#[tokio::test]
async fn generation_and_no_citations_leave_prompts_alone() {
    let model = citing_model();
    let synth = Synthesizer::builder(Arc::new(model.clone()))
        .build()
        .unwrap();
    let response = synth.synthesize("What?", nodes(&["Alpha."])).await.unwrap();
    assert!(response.citations.is_none());
    assert!(
        response.text.contains("[9]"),
        "no checking without citations"
    );
    assert!(!context(&model.requests()[0]).contains("[1]"));

    let model = citing_model();
    let synth = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Generation)
        .citations(true)
        .build()
        .unwrap();
    synth.synthesize("What?", nodes(&["Alpha."])).await.unwrap();
    assert!(!model.requests()[0].prompt.to_text().contains("Cite"));
}

#[tokio::test]
async fn refine_keeps_the_existing_answers_markers_and_renumbers() {
    // Step 1 cites [1]; step 2 keeps it and adds [3]; step 3 adds [2].
    let model = ScriptedModel::new(info(4096, 128), |r| {
        let existing = r
            .source()
            .unwrap()
            .variable("existing_answer")
            .unwrap_or_default();
        let n = markers(context(r)).into_iter().next().unwrap();
        Ok(format!("{existing} Claim [{n}].").trim().to_string())
    });
    let synth = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Refine)
        .citations(true)
        .build()
        .unwrap();
    let mut ns = nodes(&["One.", "Two.", "Three."]);
    ns.swap(1, 2); // ids n1, n3, n2: labels follow the order given
    let response = synth.synthesize("What?", ns).await.unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[1].source().unwrap().variable("existing_answer"),
        Some("Claim [1].")
    );
    assert_eq!(response.text, "Claim [1]. Claim [2]. Claim [3].");
    let c = response.citations.unwrap();
    let ids: Vec<&str> = c.cited_node_ids();
    assert_eq!(ids, vec!["n1", "n3", "n2"]);
}

#[tokio::test]
async fn first_use_order_and_unknown_numbers() {
    let model = ScriptedModel::constant(info(4096, 128), "B [2]. A [1, 2]. X [4]. Y [2-3].");
    let synth = Synthesizer::builder(Arc::new(model))
        .citations(true)
        .build()
        .unwrap();
    let response = synth
        .synthesize("q", nodes(&["a.", "b.", "c."]))
        .await
        .unwrap();
    assert_eq!(response.text, "B [1]. A [2, 1]. X. Y [1, 3].");
    let c = response.citations.unwrap();
    assert_eq!(c.removed, vec!["[4]"]);
    let by_marker: BTreeMap<u32, String> = c
        .markers
        .iter()
        .map(|m| (m.marker, m.node_ids[0].clone()))
        .collect();
    assert_eq!(by_marker[&1], "n2");
    assert_eq!(by_marker[&2], "n1");
    assert_eq!(by_marker[&3], "n3");
}

#[tokio::test]
async fn a_long_node_continued_in_another_prompt_keeps_its_label() {
    let long = "word ".repeat(600);
    let model = ScriptedModel::constant(info(400, 64), "ok");
    let synth = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Refine)
        .citations(true)
        .build()
        .unwrap();
    synth
        .synthesize(
            "q",
            vec![Node::new("short", "Hi."), Node::new("long", long)],
        )
        .await
        .unwrap();
    let requests = model.requests();
    assert!(requests.len() > 2, "{}", requests.len());
    for r in &requests[1..] {
        assert!(context(r).starts_with("[2]\n"), "{:?}", &context(r)[..20]);
    }
}

#[tokio::test]
async fn streaming_renumbers_like_the_plain_call() {
    let answer = "B [2]. A [1]. X [7].";
    let plain = Synthesizer::builder(Arc::new(ScriptedModel::constant(info(4096, 64), answer)))
        .citations(true)
        .build()
        .unwrap()
        .synthesize("q", nodes(&["a.", "b."]))
        .await
        .unwrap();
    let synth = Synthesizer::builder(Arc::new(ScriptedModel::constant(info(4096, 64), answer)))
        .citations(true)
        .build()
        .unwrap();
    let mut stream = synth.stream("q", nodes(&["a.", "b."])).await.unwrap();
    let mut text = String::new();
    while let Some(d) = stream.next().await {
        text.push_str(&d.unwrap());
    }
    let streamed = stream.finish().await.unwrap();
    assert_eq!(text, plain.text);
    assert_eq!(streamed.text, plain.text);
    assert_eq!(streamed.citations, plain.citations);
}

#[tokio::test]
async fn citations_and_an_output_schema_are_refused() {
    let err = Synthesizer::builder(Arc::new(citing_model()))
        .citations(true)
        .output_schema(serde_json::json!({"type": "object"}))
        .build()
        .unwrap_err();
    assert!(matches!(err, SynthError::InvalidOption(_)), "{err}");
}

/// The summary model of the tree property: its reply names itself (`S<level>.<index>`),
/// cites up to two numbers it was shown, and hallucinates one it was not shown.
fn tree_model(window: usize, sources: u32) -> ScriptedModel {
    ScriptedModel::new(info(window, 40), move |r| {
        let shown = markers(context(r));
        let mut cited: Vec<u32> = shown.iter().copied().take(2).collect();
        if let Some(h) = (1..=sources).find(|n| !shown.contains(n)) {
            cited.push(h);
        }
        // Each marker carries the summary's name, so a context shows where it came
        // from; padded, so that summaries fill the prompts above them and trees grow deep.
        let name = format!("S{}.{}", r.step().level, r.step().index);
        let list: Vec<String> = cited.iter().map(|n| format!("{name}[{n}]")).collect();
        Ok(format!(
            "{}. {}",
            list.join(" "),
            "more ".repeat(24).trim_end()
        ))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// In a tree of random depth, every marker a summary passes up names a node that
    /// reached that summary's subtree, and so does every final citation.
    #[test]
    fn tree_markers_map_to_nodes_of_their_subtree(
        count in 2usize..60,
        words in 5usize..80,
        window in 260usize..520,
    ) {
        check_tree(count, words, window)?;
    }
}

#[test]
fn a_deep_tree_keeps_the_property() {
    let depth = check_tree(60, 70, 300).unwrap();
    assert!(depth >= 2, "depth {depth}");
}

/// Runs one tree and checks the property; returns the tree's depth.
fn check_tree(count: usize, words: usize, window: usize) -> Result<u32, TestCaseError> {
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let texts: Vec<String> = (0..count)
            .map(|i| format!("Node {i} says {}", "text ".repeat(words)))
            .collect();
        let ns: Vec<Node> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Node::new(format!("n{}", i + 1), t.clone()))
            .collect();
        let model = tree_model(window, count as u32);
        let synth = Synthesizer::builder(Arc::new(model.clone()))
            .mode(ResponseMode::TreeSummarize)
            .citations(true)
            .build()
            .unwrap();
        let response = match rt.block_on(synth.synthesize("q", ns)) {
            Ok(r) => r,
            // Tiny windows may not converge; that is a typed error, not this property.
            Err(SynthError::TreeNotConverging { .. }) => return Ok(0),
            Err(e) => panic!("{e}"),
        };
        // What each summary may cite: the labels of its subtree, built level by level.
        let mut subtree: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        let mut requests = model.requests();
        requests.sort_by_key(|r| (r.step().level, r.step().index));
        for r in &requests {
            let ctx = context(r);
            let reachable: BTreeSet<u32> = if r.step().level == 0 {
                ctx.lines()
                    .filter_map(|l| l.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
                    .collect()
            } else {
                // Every marker in this context must name a node of the subtree of the
                // summary it came from.
                let mut reachable = BTreeSet::new();
                for word in ctx.split_whitespace().filter(|w| w.contains('[')) {
                    let (name, marker) = word.split_once('[').unwrap();
                    let from = subtree.get(name);
                    prop_assert!(from.is_some(), "marker {word:?} without its summary's name");
                    let from = from.unwrap();
                    let seen = markers(&format!("[{marker}"));
                    prop_assert!(
                        seen.is_subset(from),
                        "level {} context cites {:?} beyond the subtree {:?} of {}",
                        r.step().level,
                        seen,
                        from,
                        name
                    );
                    reachable.extend(from.iter().copied());
                }
                reachable
            };
            subtree.insert(format!("S{}.{}", r.step().level, r.step().index), reachable);
        }
        let last = requests.last().unwrap();
        let root = &subtree[&format!("S{}.{}", last.step().level, last.step().index)];
        let cited: BTreeSet<u32> = response
            .citations
            .unwrap()
            .cited_node_ids()
            .iter()
            .map(|id| id.trim_start_matches('n').parse().unwrap())
            .collect();
        prop_assert!(cited.is_subset(root), "{cited:?} vs {root:?}");
        prop_assert!(!cited.is_empty());
        Ok(last.step().level)
    }
}

/// Citation prompts (labels and instructions) cost at most 5% more prompt tokens than
/// plain ones over the conformance inputs, in every mode that sends context. Run with
/// `--nocapture` for the per-trace figures.
#[tokio::test]
async fn citation_prompts_cost_at_most_five_percent_more() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/traces");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let modes = [
        "refine",
        "compact",
        "tree_summarize",
        "simple_summarize",
        "accumulate",
        "compact_accumulate",
    ];
    let (mut plain_all, mut cited_all) = (0usize, 0usize);
    let (mut plain_calls, mut cited_calls) = (0usize, 0usize);
    println!("trace                         plain  cited  extra  calls");
    for path in &paths {
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let (mut plain, mut cited) = (0usize, 0usize);
        let (mut pc, mut cc) = (0usize, 0usize);
        for mode in modes {
            let a = crate::common::replay::run_mode_with(&trace, mode, false, false).await;
            let b = crate::common::replay::run_mode_with(&trace, mode, false, true).await;
            assert_eq!(a.outcome, b.outcome, "{path:?} {mode}: {:?}", b.error);
            plain += a.calls.iter().map(|c| c.prompt_tokens).sum::<usize>();
            cited += b.calls.iter().map(|c| c.prompt_tokens).sum::<usize>();
            pc += a.calls.len();
            cc += b.calls.len();
        }
        let name = path.file_stem().unwrap().to_string_lossy();
        let extra = if plain == 0 {
            0.0
        } else {
            100.0 * (cited as f64 / plain as f64 - 1.0)
        };
        println!("{name:<28} {plain:>6} {cited:>6} {extra:>5.1}% {pc:>3}->{cc}");
        plain_all += plain;
        cited_all += cited;
        plain_calls += pc;
        cited_calls += cc;
    }
    let extra = 100.0 * (cited_all as f64 / plain_all as f64 - 1.0);
    println!(
        "all                          {plain_all:>6} {cited_all:>6} {extra:>5.1}% {plain_calls:>3}->{cited_calls}"
    );
    assert!(
        extra <= 5.0,
        "citations cost {extra:.1}% more prompt tokens"
    );
}

#[tokio::test]
async fn hidden_markers_still_say_which_sources_were_used() {
    let model = ScriptedModel::constant(info(4096, 64), "B is second [2]. Nothing [5].");
    let synth = Synthesizer::builder(Arc::new(model))
        .citations(true)
        .citation_markers(false)
        .build()
        .unwrap();
    let response = synth.synthesize("q", nodes(&["a.", "b."])).await.unwrap();
    assert_eq!(response.text, "B is second. Nothing.");
    let c = response.citations.unwrap();
    assert_eq!(c.cited_node_ids(), vec!["n2"]);
    assert_eq!(c.removed, vec!["[5]"]);
}

#[tokio::test]
async fn chat_prompts_end_with_the_instruction_and_completion_prompts_start_with_it() {
    for chat in [true, false] {
        let model = ScriptedModel::constant(info(4096, 64).with_chat(chat), "x");
        let synth = Synthesizer::builder(Arc::new(model.clone()))
            .citations(true)
            .build()
            .unwrap();
        synth.synthesize("q", nodes(&["a."])).await.unwrap();
        match &model.requests()[0].prompt {
            RenderedPrompt::Chat(m) => {
                assert!(chat);
                assert!(m.last().unwrap().content.ends_with(CITATION_INSTRUCTIONS));
                // One system message at most: the instruction does not add one.
                let systems = m
                    .iter()
                    .filter(|x| x.role == synthkit::prompt::Role::System)
                    .count();
                assert!(systems <= 1, "{m:?}");
            }
            RenderedPrompt::Text(t) => {
                assert!(!chat);
                assert!(t.starts_with(CITATION_INSTRUCTIONS));
            }
        }
    }
}

#[tokio::test]
async fn removed_markers_are_listed_up_to_the_bound_counted_and_logged_short() {
    // The case, smaller: markers naming sources never shown.
    let markers = 100_000;
    let answer = format!("Fact [1].{}", " [123456789]".repeat(markers));
    let model = ScriptedModel::constant(info(4096, 128), &answer);
    let synth = Synthesizer::builder(Arc::new(model))
        .citations(true)
        .build()
        .unwrap();
    let (guard, logs) = crate::common::logs::capture();
    let r = synth
        .synthesize("q", nodes(&["alpha", "beta"]))
        .await
        .unwrap();
    drop(guard);
    assert_eq!(r.text, "Fact [1].");
    let c = r.citations.unwrap();
    assert_eq!(c.removed.len(), synthkit::citation::MAX_REMOVED_LISTED);
    assert_eq!(c.removed_count, markers);
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["removed_count"], markers);
    assert!(json["removed"].is_array());
    let logs = logs.text();
    let warnings: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("markers were removed"))
        .collect();
    assert_eq!(warnings.len(), 1, "{logs:.2000}");
    assert!(warnings[0].contains("removed=100000"), "{}", warnings[0]);
    assert!(warnings[0].len() < 1024, "{} bytes", warnings[0].len());
}
