//! Every response mode on the same small set of nodes, with the offline extractive model.
//!
//! ```text
//! cargo run -p synthkit-extractive --example modes
//! ```

use std::sync::Arc;

use futures::StreamExt;
use synthkit::{Node, ResponseMode, SynthError, Synthesizer};
use synthkit_extractive::ExtractiveModel;

#[tokio::main]
async fn main() -> Result<(), SynthError> {
    let nodes = vec![
        Node::new(
            "mirror",
            "The primary mirror is cleaned every six months with CO2 snow.",
        )
        .with_metadata("file", "maintenance.md"),
        Node::new(
            "dome",
            "The dome shutter is greased each spring. It is closed when wind exceeds 40 km/h.",
        )
        .with_metadata("file", "safety.md"),
        Node::new(
            "nights",
            "Public nights take place on the first Friday of each month.",
        )
        .with_metadata("file", "public.md"),
    ];
    let model = Arc::new(ExtractiveModel::new());
    let query = "How often is the mirror cleaned?";
    for mode in ResponseMode::ALL {
        let synth = Synthesizer::builder(model.clone()).mode(mode).build()?;
        let response = synth.synthesize(query, nodes.clone()).await?;
        println!(
            "== {mode} ({} calls)\n{}\n",
            response.usage.calls, response.text
        );
    }
    // Streaming: deltas as they arrive; the drained text equals the non-streamed answer.
    let synth = Synthesizer::builder(model)
        .mode(ResponseMode::TreeSummarize)
        .build()?;
    let mut stream = synth.stream(query, nodes).await?;
    while let Some(delta) = stream.next().await {
        print!("{}", delta?);
    }
    println!();
    Ok(())
}
