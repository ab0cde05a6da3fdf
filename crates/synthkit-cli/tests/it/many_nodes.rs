//! `summarize --nodes` over many tiny nodes in bounded memory: the `--json` report is
//! written from the response as it goes, holding no JSON value per source (it held two,
//! about 1.4 KB a node: 2.7 GB of peak RSS for a million nodes of 21 MB).

use serde_json::Value;
use std::fs::File;
use std::process::Stdio;

use crate::common::{spawn_synthkit, wait_writing};

#[cfg(target_os = "linux")]
#[test]
fn a_json_report_of_many_nodes_holds_no_value_per_node() {
    const NODES: usize = 60_000;
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.jsonl");
    let text: String = (0..NODES)
        .map(|i| format!("{{\"text\":\"fact {i}\"}}\n"))
        .collect();
    std::fs::write(&nodes, &text).unwrap();
    let out = dir.path().join("out.json");
    let mut child = spawn_synthkit()
        .args(["summarize", "--nodes"])
        .arg(&nodes)
        .args(["--llm", "extractive", "--quiet", "--json"])
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // No bound on the run's time: only a run that stops using CPU (and writing its
    // report) fails, as hung.
    let (status, peak) = wait_writing(&mut child, "summarize of 60,000 nodes", &out);
    assert!(status.success());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let sources = report["sources"].as_array().unwrap();
    assert_eq!(sources.len(), NODES);
    assert_eq!(sources[7]["excerpt"], "fact 7");
    let input_kb = text.len() as u64 / 1024;
    eprintln!(
        "{NODES} nodes ({input_kb} KiB): peak RSS {:.1} MiB",
        peak as f64 / 1024.0
    );
    assert!(peak > 0, "no RSS figure was read");
    // Release builds: 205 MiB before (a JSON value per source, twice), 88 MiB without
    // `--json` (the nodes and the synthesis's own copies), which is what it is now.
    assert!(
        peak < 150 * 1024,
        "peak RSS {peak} KiB for {input_kb} KiB of nodes"
    );
}
