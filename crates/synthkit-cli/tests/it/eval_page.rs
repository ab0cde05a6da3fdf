//! `synthkit eval --html`: the page links each answer to its run's report, and the
//! `report` of a row read back from ROWS never becomes a script link.

use serde_json::{Value, json};

use crate::common::{stderr, synthkit};
use crate::eval_common::cases;

#[test]
fn the_page_links_each_answer_to_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let page = dir.path().join("eval.html");
    let reports = dir.path().join("reports");
    let out = synthkit()
        .args(["eval", "-q", "--modes", "compact,tree_summarize", "--html"])
        .arg(&page)
        .arg("--report-dir")
        .arg(&reports)
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<th>synthkit · compact</th><th>synthkit · tree_summarize</th>"));
    assert!(html.contains("href=\"reports/c1.compact.html\""), "{html}");
    assert!(reports.join("c1.compact.html").is_file());
    assert!(reports.join("c3.tree_summarize.html").is_file());
    assert!(html.contains("Which bank financed the observatory&#39;s parking garage?"));
}

/// Issue 42, item 11: the `report` of a row read back from ROWS is input: the page links
/// only relative file names, never `javascript:`.
#[test]
fn a_rows_report_field_never_becomes_a_script_link() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let rows = dir.path().join("rows.jsonl");
    let first = synthkit()
        .args(["eval", "-q", "--modes", "compact", "-o"])
        .arg(&rows)
        .arg(&cases)
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let text = std::fs::read_to_string(&rows).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["report"] = json!("javascript:alert(document.domain)");
    lines[1]["report"] = json!("https://example.com/phish.html");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&rows, text).unwrap();
    let page = dir.path().join("eval.html");
    let out = synthkit()
        .args(["eval", "-q", "--modes", "compact", "-o"])
        .arg(&rows)
        .arg("--html")
        .arg(&page)
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("href=\"javascript:"), "{html}");
    assert!(!html.contains("href=\"https://example.com"), "{html}");
    assert_eq!(html.matches("report not linked").count(), 2, "{html}");
}
