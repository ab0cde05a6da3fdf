//! The page of an evaluation (`synthkit eval --html`, feature `eval`): the totals of each
//! system and mode, then each case with the answers of every system and mode side by
//! side, each marked right or wrong and linked to its run's report when there is one.
//!
//! The same style as the run report (one file, nothing fetched, every text escaped by
//! [`crate::html`]); answers are cut at [`EVAL_ANSWER_CHARS`] characters.

use synthkit_frontend::eval::{Row, Totals};

use crate::html::Html;
use crate::style::STYLE;
use crate::text::{first_chars, thousands};

/// Characters of an answer shown on the page.
pub const EVAL_ANSWER_CHARS: usize = 2_000;

/// The page for `rows` and their `totals`; `cases` gives each case's id and query, in
/// order (the page lists the cases in this order).
pub fn render_eval(cases: &[(&str, &str)], rows: &[Row], totals: &[Totals]) -> String {
    let mut h = Html::new();
    h.markup(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'\">\
         <meta name=\"generator\" content=\"synthkit-report\"><title>synthkit eval</title><style>",
    )
    .markup(STYLE)
    .markup(
        ".cases td{min-width:14rem}.cases td.answer{white-space:pre-wrap}\
         td.num{text-align:right;font-variant-numeric:tabular-nums}</style></head><body>\n",
    );
    h.markup("<header><h1>synthkit eval</h1><p class=\"meta\">");
    h.element(
        "span",
        "tag",
        &format!("{} cases", thousands(cases.len() as u64)),
    );
    h.element(
        "span",
        "tag",
        &format!("{} rows", thousands(rows.len() as u64)),
    );
    h.markup("</p></header>\n");
    totals_table(&mut h, totals);
    paired_list(&mut h, rows);
    h.markup("<h2>Cases</h2>\n");
    for (id, query) in cases {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.id == *id).collect();
        if mine.is_empty() {
            continue;
        }
        case(&mut h, id, query, &mine, totals);
    }
    h.markup("</body></html>\n");
    h.finish()
}

fn totals_table(h: &mut Html, totals: &[Totals]) {
    h.markup(
        "<h2>Totals</h2>\n<table><thead><tr><th>system</th><th>mode</th><th>cases</th>\
         <th>correct</th><th>95% interval</th><th>answerable right</th><th>abstained (unanswerable)</th>\
         <th>false abstentions</th><th>F1</th><th>cite P</th><th>cite R</th>\
         <th>lost in retrieval / packing / synthesis</th><th>errors</th><th>calls</th>\
         <th>prompt tokens</th><th>completion tokens</th><th>truncated</th><th>wall s</th>\
         </tr></thead><tbody>\n",
    );
    for t in totals {
        h.markup("<tr>");
        h.element("td", "", &t.system);
        h.element("td", "", &t.mode);
        let cells = std::iter::once(t.cases.to_string())
            .chain(t.score_cells())
            .chain([
                t.errors.to_string(),
                thousands(t.calls),
                thousands(t.prompt_tokens),
                thousands(t.completion_tokens),
                t.truncated_calls.to_string(),
                format!("{:.1}", t.wall_ms / 1000.0),
            ]);
        for c in cells {
            h.element("td", "num", &c);
        }
        h.markup("</tr>\n");
    }
    h.markup("</tbody></table>\n");
}

/// Each pair of systems (same mode) and of modes (same system) on the cases both answered.
fn paired_list(h: &mut Html, rows: &[Row]) {
    let pairs = synthkit_frontend::eval::paired(rows);
    if pairs.is_empty() {
        return;
    }
    h.markup(
        "<h2>Side by side</h2>\n<p class=\"meta\">On the cases both sides answered: where only \
         one was right, and the sign test's chance of a split at least that uneven if neither \
         were better.</p>\n<ul>\n",
    );
    for p in &pairs {
        h.element("li", "", &p.describe());
    }
    h.markup("</ul>\n");
}

fn case(h: &mut Html, id: &str, query: &str, rows: &[&Row], totals: &[Totals]) {
    h.markup("<section class=\"source\" id=\"case-")
        .text(id)
        .markup("\"><h3>")
        .text(id)
        .markup("</h3><p class=\"query\">")
        .text(query)
        .markup("</p><p class=\"meta\">");
    if let Some(first) = rows.first() {
        if !first.answerable {
            h.element("span", "tag", "unanswerable");
        }
        for tag in &first.tags {
            h.element("span", "tag", tag);
        }
    }
    h.markup("</p><table class=\"cases\"><thead><tr>");
    // One column per (system, mode), in the totals' order.
    let columns: Vec<(&str, &str)> = totals
        .iter()
        .map(|t| (t.system.as_str(), t.mode.as_str()))
        .collect();
    for (system, mode) in &columns {
        h.element("th", "", &format!("{system} · {mode}"));
    }
    h.markup("</tr></thead><tbody><tr>");
    for (system, mode) in &columns {
        match rows.iter().find(|r| r.system == *system && r.mode == *mode) {
            Some(r) => cell(h, r),
            None => {
                h.element("td", "note", "not run");
            }
        }
    }
    h.markup("</tr></tbody></table></section>\n");
}

/// Whether `report` is a relative file name, the only links the page makes (a rows file
/// is input: its `report` could be `javascript:...`, `data:...` or another site): not
/// empty, no scheme or drive (no `:`), not from the root (`/`), no backslash, no control
/// character.
fn relative_file_name(report: &str) -> bool {
    !report.is_empty()
        && !report.starts_with('/')
        && !report.contains([':', '\\'])
        && !report.chars().any(char::is_control)
}

fn cell(h: &mut Html, r: &Row) {
    h.markup("<td><p class=\"meta\">");
    if r.correct {
        h.element("span", "tag good", "correct");
    } else {
        h.element("span", "tag bad", "wrong");
    }
    h.element("span", "tag", &format!("F1 {:.2}", r.f1));
    if r.abstained {
        h.element("span", "tag", "abstained");
    }
    if r.in_nodes == Some(false) {
        h.element("span", "tag bad", "not in the nodes");
    } else if r.in_prompts == Some(false) {
        h.element("span", "tag bad", "not in the prompts");
    }
    if let (Some(p), Some(rc)) = (r.cite_precision, r.cite_recall) {
        h.element("span", "tag", &format!("cite P {p:.2} R {rc:.2}"));
    }
    h.element(
        "span",
        "tag",
        &format!(
            "{} calls · {} prompt tokens · {:.0} ms",
            r.calls,
            thousands(r.prompt_tokens),
            r.wall_ms
        ),
    );
    match r
        .report
        .as_deref()
        .map(|report| (report, relative_file_name(report)))
    {
        Some((report, true)) => {
            h.markup("<a href=\"").text(report).markup("\">report</a>");
        }
        Some((_, false)) => {
            h.element(
                "span",
                "tag bad",
                "report not linked: not a relative file name",
            );
        }
        None => {}
    }
    h.markup("</p>");
    match &r.error {
        Some(e) => {
            h.element("div", "failed", e);
        }
        None => {
            h.element("div", "answer", &first_chars(&r.answer, EVAL_ANSWER_CHARS));
        }
    }
    h.markup("</td>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use synthkit_frontend::eval::{AnswerLine, parse_case, score, totals};

    #[test]
    fn answers_side_by_side_escaped_and_linked() {
        let case = parse_case(
            r#"{"id": "q<1>", "query": "Which <b>tag</b>?", "nodes": ["t"], "answers": ["blue"]}"#,
            1,
        )
        .unwrap()
        .unwrap();
        let mut rows = vec![
            score(
                &case,
                "s",
                &AnswerLine::new("q<1>", "compact", "Blue <script>x</script>"),
                None,
            ),
            score(&case, "s", &AnswerLine::new("q<1>", "refine", "Red"), None),
        ];
        rows[0].report = Some("r/q\"1.html".into());
        let t = totals(&rows);
        let page = render_eval(&[("q<1>", "Which <b>tag</b>?")], &rows, &t);
        assert!(page.contains("Which &lt;b&gt;tag&lt;/b&gt;?"));
        assert!(page.contains("Blue &lt;script&gt;x&lt;/script&gt;"));
        assert!(!page.contains("<script>"));
        assert!(page.contains("<a href=\"r/q&quot;1.html\">report</a>"));
        assert!(page.contains("<th>s · compact</th><th>s · refine</th>"));
        assert!(page.contains("<th>95% interval</th>"));
        assert!(page.contains("s/compact vs s/refine on 1 case:"), "{page}");
        // Only relative file names become links.
        for bad in [
            "javascript:alert(1)",
            " JavaScript:alert(1)",
            "data:text/html,x",
            "https://example.com/r.html",
            "//example.com/r.html",
            "/etc/r.html",
            "C:\\r.html",
            "r\n.html",
        ] {
            assert!(!relative_file_name(bad), "{bad:?}");
            let mut rows = rows.clone();
            rows[0].report = Some(bad.into());
            let page = render_eval(&[("q<1>", "Q")], &rows, &t);
            assert!(!page.contains("\">report</a>"), "{bad:?}");
            assert!(page.contains("report not linked"), "{bad:?}");
        }
        for good in ["r/q1.html", "../reports/q1.compact.html", "q 1.html"] {
            assert!(relative_file_name(good), "{good:?}");
        }
        let good = page.find("tag good\">correct").unwrap();
        let bad = page.find("tag bad\">wrong").unwrap();
        assert!(good < bad, "compact right, then refine wrong");
    }
}
