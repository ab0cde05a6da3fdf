//! Reading traces back: a run line gives the whole record; call lines alone give the calls.

use synthkit::ResponseMode;
use synthkit_report::{TraceError, read_trace, render};

use crate::common::run;

#[tokio::test]
async fn a_run_line_round_trips() {
    let record = run(ResponseMode::TreeSummarize, "Dawn [1].").await;
    let text = format!(
        "{{\"call\":1,\"mode\":\"tree_summarize\",\"step\":\"summary\",\"level\":0,\"index\":0,\"prompt\":\"p\",\"prompt_tokens\":5,\"response\":\"r\",\"completion_tokens\":1,\"usage_reported\":false,\"ms\":1.0}}\n{}\n",
        serde_json::json!({ "run": record })
    );
    let back = read_trace(text.as_bytes()).unwrap();
    assert_eq!(back, record);
}

#[test]
fn call_lines_alone_give_the_calls() {
    let text = "{\"call\":1,\"mode\":\"refine\",\"step\":\"qa\",\"level\":0,\"index\":0,\"kind\":\"qa\",\"prompt\":\"P\",\"prompt_tokens\":10,\"counted_prompt_tokens\":9,\"response\":\"first <i>\",\"completion_tokens\":2,\"usage_reported\":true,\"ms\":3.5}\n\
                {\"call\":2,\"mode\":\"refine\",\"step\":\"refine\",\"level\":0,\"index\":1,\"kind\":\"refine\",\"prompt\":\"P\",\"prompt_tokens\":12,\"response\":\"second\",\"completion_tokens\":3,\"usage_reported\":true,\"ms\":4.0}\n";
    let run = read_trace(text.as_bytes()).unwrap();
    assert_eq!(run.steps.len(), 2);
    assert_eq!(run.usage.prompt_tokens, 22);
    assert!(run.answer.is_none());
    let page = render(&run);
    assert!(page.contains("id=\"call-2\"") && page.contains("first &lt;i&gt;"));
}

#[test]
fn bad_traces_are_clear_errors() {
    let e = read_trace("not json\n".as_bytes()).unwrap_err();
    assert!(matches!(e, TraceError::Line { line: 1, .. }), "{e}");
    assert!(matches!(read_trace("".as_bytes()), Err(TraceError::Empty)));
    let plan = "{\"call\":1,\"dry_run\":true,\"response\":\"\"}\n";
    assert!(matches!(
        read_trace(plan.as_bytes()),
        Err(TraceError::DryRun)
    ));
    let e = read_trace("{\"nothing\":1}\n".as_bytes()).unwrap_err();
    assert!(e.to_string().contains("line 1"), "{e}");
}

/// A call line of a tree_summarize trace at level 0, `index`, naming `listed` of its
/// `nodes` nodes.
fn tree_line(call: u64, index: usize, listed: usize, nodes: usize) -> String {
    let ids: Vec<String> = (0..listed).map(|i| format!("n{index}-{i}")).collect();
    serde_json::json!({
        "call": call, "mode": "tree_summarize", "step": "summary", "level": 0,
        "index": index, "kind": "summary", "prompt": "P", "prompt_tokens": 10,
        "response": format!("summary {index}"), "completion_tokens": 2,
        "usage_reported": false, "ms": 1.0, "nodes": nodes, "node_ids": ids,
    })
    .to_string()
}

/// A killed run's trace (no run line): each call's nodes come from its line (the first
/// 100 and their count), the level it reached is not called the final summary, and the
/// boxes are numbered and ordered by their index in the level, not by finishing order.
#[test]
fn a_killed_trees_calls_are_drawn_by_what_is_known() {
    let text = format!("{}\n{}\n", tree_line(1, 1, 3, 3), tree_line(2, 0, 100, 250));
    let run = read_trace(text.as_bytes()).unwrap();
    assert_eq!(run.steps.len(), 2);
    let page = render(&run);
    assert!(!page.contains("call · the final summary"), "{page}");
    assert!(!page.contains("calls · the final summary"), "{page}");
    assert!(page.contains("not the final summary"), "{page}");
    assert!(page.contains("did not finish"), "{page}");
    assert!(page.contains("killed or is incomplete"), "{page}");
    assert!(!page.contains("not known</p>"), "{page}");
    let first = page.find("id=\"call-2\"").unwrap();
    let second = page.find("id=\"call-1\"").unwrap();
    assert!(first < second, "index 0 is drawn first");
    assert!(page[first..second].contains("<b>#0 summary</b>"), "{page}");
    assert!(page[second..].contains("<b>#1 summary</b>"), "{page}");
    assert!(page[first..second].contains("nodes (250)"), "{page}");
    assert!(page[first..second].contains("+210 more"), "{page}");
    assert!(page[second..].contains("nodes (3)"), "{page}");
}

/// Boxes go by index whatever order the record lists its steps in; a finished tree's
/// top level is its final summary, and links to a box name it as the box does.
#[tokio::test]
async fn boxes_are_numbered_by_their_index_in_the_level() {
    let mut record = run(ResponseMode::TreeSummarize, "Dawn [1].").await;
    assert!(record.answer.is_some());
    // The first level's first two calls finished the other way round.
    let (a, b) = {
        let mut level0 = record
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.level == 0)
            .map(|(i, _)| i);
        (level0.next().unwrap(), level0.next().unwrap())
    };
    let (ca, cb) = (record.steps[a].call, record.steps[b].call);
    record.steps[a].call = cb;
    record.steps[b].call = ca;
    for s in &mut record.steps {
        for c in &mut s.input_calls {
            if *c == ca {
                *c = cb;
            } else if *c == cb {
                *c = ca;
            }
        }
    }
    record.steps.reverse();
    let page = render(&record);
    let first = page.find(&format!("id=\"call-{cb}\"")).unwrap();
    let second = page.find(&format!("id=\"call-{ca}\"")).unwrap();
    assert!(first < second, "index 0 is drawn first");
    assert!(page[first..second].contains("<b>#0 summary</b>"), "{page}");
    assert!(page[second..].contains("<b>#1 summary</b>"), "{page}");
    assert!(page.contains("the final summary"), "{page}");
    assert!(
        page.contains(&format!("<a href=\"#call-{cb}\">L0 #0</a>")),
        "{page}"
    );
}
