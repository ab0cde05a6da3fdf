//! The totals as the plain-text table `synthkit eval` prints ([`table`]).

use super::totals::Totals;

/// The headings of [`table`]: who and how many, the scores ([`Totals::SCORE_HEADINGS`]),
/// then the cost.
pub const TABLE_HEADINGS: [&str; 15] = [
    "system",
    "mode",
    "cases",
    Totals::SCORE_HEADINGS[0],
    Totals::SCORE_HEADINGS[1],
    Totals::SCORE_HEADINGS[2],
    Totals::SCORE_HEADINGS[3],
    Totals::SCORE_HEADINGS[4],
    Totals::SCORE_HEADINGS[5],
    Totals::SCORE_HEADINGS[6],
    Totals::SCORE_HEADINGS[7],
    Totals::SCORE_HEADINGS[8],
    "calls",
    "prompt tok",
    "wall s",
];

/// The heading of the quote column [`table`] adds when a row checked quotes: verified,
/// misattributed and not found quotes.
pub const QUOTES_HEADING: &str = "quotes v/m/nf";

/// The heading of the guard column [`table`] adds when a guard acted in some row:
/// replies set aside, of those the steps that kept their previous answer, and
/// intermediate replies cut at the size of their input.
pub const GUARDS_HEADING: &str = "guards set/kept/bound";

/// The heading of the cost column [`table`] adds when rows were priced.
pub const COST_HEADING: &str = "cost $";

/// The heading of the grounding column [`table`] adds when rows were grounding-checked:
/// answers checked, partly supported, unsupported.
pub const GROUNDING_HEADING: &str = "grounded checked/partly/unsupp";

/// The totals as a plain-text table, one line per (system, mode) under a line of
/// [`TABLE_HEADINGS`] (and [`COST_HEADING`] when rows were priced, [`QUOTES_HEADING`]
/// when a row checked quotes,
/// [`GUARDS_HEADING`] when a guard acted), each column
/// padded to its widest cell, then one line per paired comparison
/// ([`super::noise::Paired::describe`]): what `synthkit eval` prints.
pub fn table(totals: &[Totals], paired: &[super::noise::Paired]) -> String {
    let quotes = totals.iter().any(|t| t.quotes.is_some());
    let guards = totals.iter().any(|t| t.guards.is_some());
    let grounding = totals.iter().any(|t| t.grounding.is_some());
    let cost = totals.iter().any(|t| t.cost_usd.is_some());
    let lines: Vec<Vec<String>> = totals
        .iter()
        .map(|t| {
            let quote_cell = quotes.then(|| {
                t.quotes.map_or_else(
                    || "-".to_string(),
                    |q| format!("{}/{}/{}", q.verified, q.misattributed, q.not_found),
                )
            });
            [t.system.clone(), t.mode.clone(), t.cases.to_string()]
                .into_iter()
                .chain(t.score_cells())
                .chain([
                    t.calls.to_string(),
                    t.prompt_tokens.to_string(),
                    format!("{:.1}", t.wall_ms / 1000.0),
                ])
                .chain(cost.then(|| {
                    t.cost_usd
                        .map_or_else(|| "-".to_string(), |c| format!("{c:.6}"))
                }))
                .chain(quote_cell)
                .chain(guards.then(|| {
                    t.guards.map_or_else(
                        || "-".to_string(),
                        |g| format!("{}/{}/{}", g.set_aside, g.kept_previous, g.bounded),
                    )
                }))
                .chain(grounding.then(|| {
                    t.grounding.map_or_else(
                        || "-".to_string(),
                        |g| format!("{}/{}/{}", g.checked, g.partly, g.unsupported),
                    )
                }))
                .collect()
        })
        .collect();
    let headings: Vec<&str> = TABLE_HEADINGS
        .iter()
        .copied()
        .chain(cost.then_some(COST_HEADING))
        .chain(quotes.then_some(QUOTES_HEADING))
        .chain(guards.then_some(GUARDS_HEADING))
        .chain(grounding.then_some(GROUNDING_HEADING))
        .collect();
    let mut widths: Vec<usize> = headings.iter().map(|h| h.chars().count()).collect();
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    table_line(&mut out, headings.iter().copied(), &widths);
    for line in &lines {
        table_line(&mut out, line.iter().map(String::as_str), &widths);
    }
    for t in totals {
        if let Some(line) = t.wrong_line() {
            out.push_str(&line);
            out.push('\n');
        }
        if let Some(line) = t.unknown_evidence_line() {
            out.push_str(&line);
            out.push('\n');
        }
    }
    for p in paired {
        out.push_str(&p.describe());
        out.push('\n');
    }
    out
}

impl Totals {
    /// `wrong in SYSTEM/MODE (N): id, id, ... and M more`: the cases answered wrong, the
    /// first [`NAMED_WRONG`](super::totals::NAMED_WRONG) by id; `None` when none was.
    pub fn wrong_line(&self) -> Option<String> {
        let wrong = self.cases.saturating_sub(self.correct);
        if wrong == 0 {
            return None;
        }
        let more = wrong.saturating_sub(self.wrong_ids.len());
        let rest = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "wrong in {}/{} ({wrong}): {}{rest}",
            self.system,
            self.mode,
            self.wrong_ids.join(", ")
        ))
    }

    /// A warning when some rows' evidence names no node of their run; `None` otherwise.
    pub fn unknown_evidence_line(&self) -> Option<String> {
        (self.unknown_evidence > 0).then(|| {
            format!(
                "warning: in {}/{}, {} row{} name evidence that is no node of the run (see \
                 each row's unknown_evidence; the nodes of `paths` are PATH#N): their \
                 citation recall counts it as not cited",
                self.system,
                self.mode,
                self.unknown_evidence,
                if self.unknown_evidence == 1 { "" } else { "s" }
            )
        })
    }
}

/// One line of the table: each cell padded to its column's width.
fn table_line<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>, widths: &[usize]) {
    let mut line = String::new();
    for (cell, &w) in cells.zip(widths) {
        line.push_str(&format!("{cell:<w$}  "));
    }
    out.push_str(line.trim_end());
    out.push('\n');
}
