//! The report of a tree_summarize run over the first N chunks of a bench corpus, made with
//! a model that answers at once (a fixed 40-word answer), for the report's figures:
//! `cargo run --release -p synthkit-report --example report_figures -- CORPUS.json N OUT.html`
//! prints the calls, the page's size and the time to build it; `scripts/report-figures.sh`
//! adds the time headless Chromium takes to open it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use synthkit::model::ModelInfo;
use synthkit::testing::FixedModel;
use synthkit::{Node, ResponseMode, Synthesizer};
use synthkit_report::{BudgetRecord, RunRecord, render};

const QUERY: &str = "What does the text say about iterables and exceptions?";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, corpus, n, out] = args.as_slice() else {
        eprintln!("usage: report_figures CORPUS.json N OUT.html");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("N is a number");
    let texts: Vec<String> =
        serde_json::from_slice(&std::fs::read(corpus).expect("the corpus")).expect("a JSON array");
    let nodes: Vec<Node> = texts
        .into_iter()
        .take(n)
        .enumerate()
        .map(|(i, t)| Node::new(format!("n{i:05}"), t))
        .collect();
    let answer = ["word"; 40].join(" ");
    let info = ModelInfo::new("instant")
        .with_context_window(4096)
        .with_num_output(256);
    let synth = Synthesizer::builder(Arc::new(FixedModel::new(info, answer, 40)))
        .mode(ResponseMode::TreeSummarize)
        .return_steps(true)
        .build()
        .unwrap();
    let start = Instant::now();
    let response = synth.synthesize(QUERY, nodes).await.unwrap();
    let synth_ms = start.elapsed().as_secs_f64() * 1000.0;
    let start = Instant::now();
    let run = RunRecord::from_response(QUERY, ResponseMode::TreeSummarize, &response)
        .with_model("instant", "instant")
        .with_budget(BudgetRecord::of(synth.budget()));
    let page = render(&run);
    let render_ms = start.elapsed().as_secs_f64() * 1000.0;
    std::fs::write(out, &page).unwrap();
    println!(
        "{{\"chunks\": {n}, \"calls\": {}, \"bytes\": {}, \"synth_ms\": {synth_ms:.0}, \"render_ms\": {render_ms:.0}}}",
        response.usage.calls,
        page.len()
    );
}
