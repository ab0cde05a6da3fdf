//! Tests of the scores, totals and table.
#![allow(clippy::unwrap_used)]

use super::answers::AnswerLine;
use super::case::Case;
use super::score::*;
use super::table::*;
use super::totals::*;
use crate::eval::case::parse_case;

fn case(answerable: bool) -> Case {
    let text = if answerable {
        r#"{"id": "c", "query": "How often?", "nodes": [{"id": "n1", "text": "Cleaned every six months."}, {"id": "n2", "text": "Other."}],
            "answers": ["six months", {"regex": "\\b6 months\\b"}], "evidence": ["n1"], "tags": ["t"]}"#
    } else {
        r#"{"id": "u", "query": "What colour?", "nodes": ["Cleaned every six months."], "answerable": false}"#
    };
    parse_case(text, 1).unwrap().unwrap()
}

fn line(answer: &str) -> AnswerLine {
    AnswerLine::new("c", "compact", answer)
}

#[test]
fn an_answerable_case() {
    let c = case(true);
    let mut a = line("Every six months.");
    a.citations = Some(vec!["n1".into(), "n2".into()]);
    a.prompts = Some(vec!["Context: Cleaned every six months.".into()]);
    a.calls = Some(2);
    a.wall_ms = Some(10.0);
    let r = score(&c, "sys", &a, Some("Cleaned every six months."));
    assert!(r.correct && !r.abstained);
    assert!((r.f1 - 0.8).abs() < 1e-9, "{}", r.f1);
    assert_eq!((r.in_nodes, r.in_prompts), (Some(true), Some(true)));
    assert_eq!((r.cite_precision, r.cite_recall), (Some(0.5), Some(1.0)));
    assert_eq!((r.system.as_str(), r.calls, r.wall_ms), ("sys", 2, 10.0));
    assert_eq!(r.tags, ["t"]);

    let r = score(&c, "sys", &line("After 6 months."), None);
    assert!(r.correct, "the regex alternative");
    assert_eq!(r.in_nodes, None);

    let r = score(&c, "sys", &line("Not in the sources."), Some("nothing"));
    assert!(!r.correct && r.abstained);
    assert_eq!(
        (r.f1, r.in_nodes, r.cite_precision),
        (0.0, Some(false), None)
    );

    let mut failed = line("six months");
    failed.error = Some("boom".into());
    failed.system = Some("other".into());
    let r = score(&c, "sys", &failed, None);
    assert!(!r.correct && !r.abstained && r.f1 == 0.0);
    assert_eq!(r.system, "other");
}

#[test]
fn an_unanswerable_case() {
    let c = case(false);
    let r = score(&c, "s", &line("The context does not say."), Some("x"));
    assert!(r.correct && r.abstained && r.f1 == 1.0);
    assert_eq!(r.in_nodes, None);
    let r = score(&c, "s", &line("Blue."), None);
    assert!(!r.correct && r.f1 == 0.0);
    let mut said = line("Blue.");
    said.abstained = Some(true);
    assert!(score(&c, "s", &said, None).correct);
}

#[test]
fn a_failed_run_is_an_error_not_a_lost_answer() {
    let a = case(true);
    let mut failed = line("");
    failed.error = Some("connection refused".into());
    failed.prompts = Some(vec![]);
    let row = score(&a, "s", &failed, Some("Cleaned every six months."));
    assert_eq!(row.in_prompts, Some(false));
    let t = Totals::of(&[&row]);
    assert_eq!((t.errors, t.answerable, t.false_abstentions), (1, 1, 0));
    assert_eq!(
        (t.lost_in_retrieval, t.lost_in_packing, t.lost_in_synthesis),
        (0, 0, 0)
    );
}

#[test]
fn totals_per_system_and_mode() {
    let a = case(true);
    let u = case(false);
    let with = |answer: &str, mode: &str, prompts: Option<&str>| {
        let mut l = line(answer);
        l.mode = mode.into();
        l.calls = Some(1);
        l.prompt_tokens = Some(100);
        l.prompts = prompts.map(|p| vec![p.to_string()]);
        l
    };
    let nodes = Some("Cleaned every six months.");
    let rows = vec![
        score(
            &a,
            "s",
            &with("six months", "compact", Some("six months")),
            nodes,
        ),
        score(
            &a,
            "s",
            &with("I don't know", "compact", Some("six months")),
            nodes,
        ),
        score(&a, "s", &with("Blue", "compact", Some("cut")), nodes),
        score(&a, "s", &with("Blue", "compact", None), Some("nothing")),
        score(
            &u,
            "s",
            &with("Not in the context.", "compact", None),
            nodes,
        ),
        score(&u, "s", &with("Blue", "refine", None), nodes),
    ];
    let t = totals(&rows);
    assert_eq!(t.len(), 2);
    let c = &t[0];
    assert_eq!((c.system.as_str(), c.mode.as_str()), ("s", "compact"));
    assert_eq!(
        (c.cases, c.correct, c.answerable, c.answerable_correct),
        (5, 2, 4, 1)
    );
    assert_eq!(
        (c.unanswerable, c.abstained_right, c.false_abstentions),
        (1, 1, 1)
    );
    assert_eq!(
        (c.lost_in_retrieval, c.lost_in_packing, c.lost_in_synthesis),
        (1, 1, 1)
    );
    assert!((c.correct_rate - 0.4).abs() < 1e-9);
    let (low, high) = c.correct_interval.unwrap();
    assert!(low < 0.4 && high > 0.4, "{low} {high}");
    assert_eq!(c.score_cells()[0], "2 (40%)");
    assert_eq!(
        c.score_cells()[1],
        format!("{:.0}-{:.0}%", low * 100.0, high * 100.0)
    );
    assert!((c.f1_mean - 0.4).abs() < 1e-9, "{}", c.f1_mean);
    assert_eq!((c.calls, c.prompt_tokens), (5, 500));
    assert_eq!(c.cite_precision, None);
    let r = &t[1];
    assert_eq!(
        (r.mode.as_str(), r.cases, r.correct, r.unanswerable),
        ("refine", 1, 0, 1)
    );
    assert!(totals(&[]).is_empty());
}

#[test]
fn the_table_has_a_line_per_system_and_mode_in_aligned_columns() {
    let a = case(true);
    let mut long = line("six months");
    long.system = Some("a-long-system-name".into());
    long.calls = Some(3);
    long.prompt_tokens = Some(1234);
    long.wall_ms = Some(2500.0);
    let rows = vec![
        score(&a, "s", &line("six months"), None),
        score(&a, "s", &long, None),
    ];
    let text = table(&totals(&rows), &[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let head: Vec<&str> = lines[0]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(head, TABLE_HEADINGS);
    // Each column starts where its heading does.
    let at = |line: &str, cell: &str| line.find(cell).unwrap();
    assert_eq!(at(lines[0], "mode"), at(lines[2], "compact"));
    assert_eq!(at(lines[0], "mode"), "a-long-system-name".len() + 2);
    assert!(
        lines[2].starts_with("a-long-system-name  compact  1      1 (100%)  100-100%      1/1"),
        "{text}"
    );
    assert!(lines[2].ends_with("3      1234        2.5"), "{text}");
    assert!(table(&[], &[]).lines().count() == 1);
    // The paired comparisons follow the totals.
    let text = table(&totals(&rows), &crate::eval::paired(&rows));
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("s/compact vs a-long-system-name/compact on 1 case:"),
        "{text}"
    );
}

#[test]
fn totals_saturate_instead_of_wrapping() {
    let a = case(true);
    let mut huge = line("six months");
    huge.calls = Some(u64::MAX);
    huge.prompt_tokens = Some(u64::MAX - 1);
    huge.completion_tokens = Some(u64::MAX);
    huge.truncated_calls = Some(u64::MAX);
    huge.guards = Some(super::answers::GuardCounts {
        set_aside: u64::MAX,
        kept_previous: 1,
        bounded: 0,
    });
    let mut quotes = synthkit::citation::QuoteCounts::default();
    quotes.verified = u64::MAX;
    quotes.not_found = 2;
    huge.quotes = Some(quotes);
    let row = score(&a, "s", &huge, None);
    let t = Totals::of(&[&row, &row, &row]);
    assert_eq!(
        (
            t.calls,
            t.prompt_tokens,
            t.completion_tokens,
            t.truncated_calls
        ),
        (u64::MAX, u64::MAX, u64::MAX, u64::MAX)
    );
    let guards = t.guards.unwrap();
    assert_eq!((guards.set_aside, guards.kept_previous), (u64::MAX, 3));
    let quotes = t.quotes.unwrap();
    assert_eq!((quotes.verified, quotes.not_found), (u64::MAX, 6));
}

#[test]
fn the_table_names_the_cases_answered_wrong() {
    let a = case(true);
    let mut rows = Vec::new();
    for i in 0..(NAMED_WRONG + 3) {
        let mut l = line(if i % 2 == 0 { "Blue" } else { "six months" });
        l.id = format!("c{i}");
        let mut r = score(&a, "s", &l, None);
        r.id = format!("c{i}");
        rows.push(r);
    }
    let t = totals(&rows);
    let wrong = t[0].cases - t[0].correct;
    assert_eq!(wrong, 6);
    assert_eq!(t[0].wrong_ids, ["c0", "c2", "c4", "c6", "c8", "c10"]);
    let text = table(&t, &[]);
    assert!(
        text.contains("wrong in s/compact (6): c0, c2, c4, c6, c8, c10\n"),
        "{text}"
    );
    // Past NAMED_WRONG, a count of the rest.
    let many: Vec<Row> = (0..NAMED_WRONG + 4)
        .map(|i| {
            let mut r = score(&a, "s", &line("Blue"), None);
            r.id = format!("w{i}");
            r
        })
        .collect();
    let t = totals(&many);
    assert_eq!(t[0].wrong_ids.len(), NAMED_WRONG);
    let text = table(&t, &[]);
    assert!(text.contains(" and 4 more\n"), "{text}");
    assert!(text.contains("wrong in s/compact (12): w0, w1,"), "{text}");
    // All right: no such line.
    let right = vec![score(&a, "s", &line("six months"), None)];
    assert!(!table(&totals(&right), &[]).contains("wrong in"));
}

#[test]
fn evidence_that_names_no_node_read_is_a_counted_warning() {
    let a = case(true);
    let mut r = score(&a, "s", &line("six months"), None);
    assert_eq!(r.check_evidence(&a.evidence, ["docs/a.md#1"]), ["n1"]);
    let t = totals(&[r.clone()]);
    assert_eq!(t[0].unknown_evidence, 1);
    let text = table(&t, &[]);
    assert!(
        text.contains("warning: in s/compact, 1 row name evidence that is no node"),
        "{text}"
    );
    assert!(r.check_evidence(&a.evidence, ["n1", "n2"]).is_empty());
    assert!(!table(&totals(&[r]), &[]).contains("warning"));
}

#[test]
fn rows_keep_the_hashes_of_their_case_and_answers_line() {
    let a = case(true);
    let r = score(&a, "s", &line("six months"), None);
    assert_eq!(r.case_sha256.as_deref(), Some(a.sha256.as_str()));
    assert_eq!(r.answer_sha256, None, "a run made here");
    let read =
        crate::eval::parse_answer_line(r#"{"id": "c", "mode": "compact", "answer": "x"}"#, 1)
            .unwrap()
            .unwrap();
    let r = score(&a, "s", &read, None);
    assert_eq!(r.answer_sha256, read.sha256);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["case_sha256"], a.sha256.as_str());
    let back: Row = serde_json::from_value(json).unwrap();
    assert_eq!(back, r);
}

fn row(id: &str, system: &str, mode: &str, correct: bool) -> Row {
    Row {
        id: id.into(),
        system: system.into(),
        mode: mode.into(),
        correct,
        ..Row::default()
    }
}

#[test]
fn paired_counts_matched_cases_only() {
    let rows = vec![
        row("1", "sk", "compact", true),
        row("2", "sk", "compact", true),
        row("3", "sk", "compact", false),
        row("4", "sk", "compact", true),
        row("1", "ref", "compact", true),
        row("2", "ref", "compact", false),
        row("3", "ref", "compact", true),
        // Case 4 has no reference row: left out.
        row("1", "sk", "refine", false),
        row("1", "ref", "refine", false),
    ];
    let pairs = paired(&rows);
    // sk/compact-ref/compact, sk/compact-sk/refine, ref/compact-ref/refine,
    // sk/refine-ref/refine; never ref/compact with sk/refine.
    let names: Vec<(String, String)> = pairs.iter().map(|p| (p.a.clone(), p.b.clone())).collect();
    assert_eq!(
        names,
        [
            ("sk/compact".to_string(), "ref/compact".to_string()),
            ("sk/compact".to_string(), "sk/refine".to_string()),
            ("ref/compact".to_string(), "ref/refine".to_string()),
            ("sk/refine".to_string(), "ref/refine".to_string()),
        ]
    );
    let p = &pairs[0];
    assert_eq!(
        (p.cases, p.both, p.only_a, p.only_b, p.neither),
        (3, 1, 1, 1, 0)
    );
    assert_eq!(p.p_value, 1.0);
    assert!(
        p.describe()
            .contains("sk/compact vs ref/compact on 3 cases")
    );
}
