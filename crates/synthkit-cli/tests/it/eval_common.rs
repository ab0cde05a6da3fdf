//! What the `eval` suites share: the cases file they run or score (three cases over two
//! nodes) and a report's row for one case and mode.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{MIRROR, QUESTION, write};

/// Three cases: one the nodes answer, one whose accepted answer is not in the nodes, one
/// the nodes cannot answer.
pub fn cases(dir: &Path) -> std::path::PathBuf {
    let nodes = json!([
        {"id": "mirror", "text": MIRROR},
        {"id": "dome", "text": "The dome opens at dusk and closes before sunrise."}
    ]);
    let lines = [
        json!({"id": "c1", "query": QUESTION, "nodes": nodes,
               "answers": ["three months", {"regex": "\\b3 months\\b"}], "evidence": ["mirror"],
               "answerable": true, "tags": ["needle"]}),
        json!({"id": "c2", "query": "When does the dome open?", "nodes": nodes,
               "answers": ["at dawn"], "evidence": ["dome"], "answerable": true}),
        json!({"id": "c3", "query": "Which bank financed the observatory's parking garage?",
               "nodes": nodes, "answers": [], "answerable": false}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    write(dir, "cases.jsonl", text)
}

/// The row of case `id` in `mode` in an `eval --json` report (none fails the test).
pub fn row<'a>(report: &'a Value, id: &str, mode: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id && r["mode"] == mode)
        .unwrap_or_else(|| panic!("no row {id} {mode} in {report:#}"))
}
