//! Replays a conformance trace through synthkit with the replay model and prints one JSON
//! object: `{"runs": {MODE: {"outcome", "error", "response", "calls": [{"kind", "prompt", "prompt_tokens"}]}}}`.
//!
//! ```text
//! cargo run --release -p synthkit --example replay -- crates/synthkit/tests/conformance/traces/five_medium.json
//! ```

#[path = "../tests/it/common/replay.rs"]
mod replay;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: replay TRACE.json");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let trace: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{path} is not JSON: {e}");
            std::process::exit(1);
        }
    };
    println!("{}", replay::replay_json(&trace).await);
}
