//! The HTML pages of runs: the record of a run of `ask` or `summarize` and its page
//! (`--report FILE`), and a folder of pages, one per line or run (`batch --report-dir`,
//! `eval --report-dir`). `synthkit report` writes its page with [`write`] too.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use synthkit::prompt::PromptBudget;
use synthkit::steps::StepRecorder;
use synthkit::{Response, ResponseMode};
use synthkit_report::{BudgetRecord, RunRecord};

use crate::backend::Backend;
use crate::error::usage;

/// What a run's record needs besides the response.
pub struct RunFacts<'a> {
    /// The backend that ran the synthesis (its kind and model name are recorded).
    pub backend: &'a Backend,
    /// The query.
    pub query: &'a str,
    /// The response mode.
    pub mode: ResponseMode,
    /// The budget.
    pub budget: &'a PromptBudget,
    /// Whether the answer is grounded, when known.
    pub grounded: Option<bool>,
    /// The run's time so far.
    pub total_ms: f64,
}

impl RunFacts<'_> {
    /// The record's common part: query and mode (given to `start`), the model, the
    /// budget and the time.
    fn record(&self, start: impl FnOnce(&str, ResponseMode) -> RunRecord) -> RunRecord {
        let backend = self.backend;
        start(self.query, self.mode)
            .with_model(backend.backend, backend.model_name())
            .with_budget(BudgetRecord::of(self.budget))
            .with_total_ms(self.total_ms)
    }
}

/// The record of a run over `nodes` that ended with `outcome`, its calls kept by
/// `recorder` ([`RunRecord::of_outcome`]).
pub fn record(
    outcome: Result<&Response, &str>,
    nodes: &[synthkit::Node],
    recorder: &StepRecorder,
    facts: &RunFacts<'_>,
) -> RunRecord {
    let run =
        facts.record(|query, mode| RunRecord::of_outcome(query, mode, nodes, outcome, recorder));
    match outcome {
        Ok(response) => run.with_grounded(facts.grounded).with_setting(
            "citations",
            if response.citations.is_some() {
                "on"
            } else {
                "off"
            },
        ),
        Err(_) => run,
    }
}

/// Writes the page of `run` to `path`.
pub fn write(path: &Path, run: &RunRecord) -> Result<()> {
    let page = synthkit_report::render(run);
    std::fs::write(path, page)
        .map_err(|e| anyhow!("cannot write the report {}: {e}", path.display()))
}

/// The report file for a batch line with `id` in `dir`: the id itself when it is a plain
/// file name (letters, digits, `.`, `_`, `-`, at most 100, not starting with `.`), else
/// its plain characters and a hash of the id, so that two ids never share a file: the number 1 is `1.html`, the string "1" (a string that reads as a number) is
/// `1-HASH.html`, and a plain string that ends like such a name (`-` and 16 hex digits)
/// gets a hash of its own.
pub fn batch_report_path(dir: &Path, id: &serde_json::Value) -> PathBuf {
    let (id, json) = match id {
        serde_json::Value::String(s) => (s.clone(), id.to_string()),
        other => (other.to_string(), other.to_string()),
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let looks_hashed = id.len() > 17
        && id.get(id.len() - 17..).is_some_and(|tail| {
            let digits = tail.strip_prefix('-').unwrap_or_default();
            digits.len() == 16 && digits.chars().all(|c| c.is_ascii_hexdigit())
        });
    let string_like_number =
        json.starts_with('"') && serde_json::from_str::<serde_json::Number>(&id).is_ok();
    let is_plain = !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && id.chars().all(plain)
        && !looks_hashed
        && !string_like_number;
    let name = if is_plain {
        id
    } else {
        let kept: String = id
            .chars()
            .map(|c| if plain(c) { c } else { '_' })
            .take(60)
            .collect();
        format!(
            "{}-{:016x}",
            kept.trim_start_matches('.'),
            fnv1a(id.as_bytes())
        )
    };
    dir.join(format!("{name}.html"))
}

/// `batch --report-dir`: where the reports go and what they say of the model.
pub struct BatchReports {
    dir: PathBuf,
    backend: &'static str,
    model: String,
}

impl BatchReports {
    /// Creates `dir` if missing (a usage error when it cannot be).
    pub fn create(dir: &Path, backend: &Backend) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            usage(format!(
                "cannot create the report folder {}: {e}",
                dir.display()
            ))
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            backend: backend.backend,
            model: backend.model_name(),
        })
    }

    /// Writes the report of line `id`, its synthesis's `run` (answered or failed); a
    /// failure to write is a warning (the line's result still goes to the output).
    pub fn write(&self, id: &serde_json::Value, synth: &synthkit::Synthesizer, run: RunRecord) {
        let run = run
            .with_model(self.backend, &self.model)
            .with_budget(BudgetRecord::of(synth.budget()));
        let path = batch_report_path(&self.dir, id);
        if let Err(e) = write(&path, &run) {
            crate::output::warn(&format!("line {id}: {e}"));
        }
    }
}

/// FNV-1a, 64 bits: a stable hash for file names (not for security).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The page of an evaluation written to `path` (`eval --html`): report links made relative
/// to the page's folder where they can be.
pub fn eval_page(
    path: &Path,
    cases: &[synthkit_frontend::eval::Case],
    rows: &[synthkit_frontend::eval::Row],
    totals: &[synthkit_frontend::eval::Totals],
) -> String {
    let page_dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .and_then(|p| p.canonicalize().ok());
    let rows: Vec<synthkit_frontend::eval::Row> = rows
        .iter()
        .cloned()
        .map(|mut r| {
            r.report = r.report.map(|rep| link(&rep, page_dir.as_deref()));
            r
        })
        .collect();
    let queries: Vec<(&str, &str)> = cases
        .iter()
        .map(|c| (c.id.as_str(), c.query.as_str()))
        .collect();
    synthkit_report::render_eval(&queries, &rows, totals)
}

/// `report` as a link from a page in `page_dir` (the current folder when `None`): the
/// path from there to it (`reports/c1.compact.html`, `../reports/...`); as written when
/// it cannot be found (the page links only relative file names).
fn link(report: &str, page_dir: Option<&Path>) -> String {
    let full = Path::new(report).canonicalize();
    let base = match page_dir {
        Some(d) => Some(d.to_path_buf()),
        None => std::env::current_dir().ok(),
    };
    match (full, base) {
        (Ok(full), Some(base)) => relative_path(&base, &full).display().to_string(),
        _ => report.to_string(),
    }
}

/// The path from the folder `from` to `to` (both absolute): up with `..` to their common
/// folder, then down.
fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let (from, to): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for c in to.iter().skip(common) {
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn report_links_are_relative_paths() {
        let rel = |a: &str, b: &str| relative_path(Path::new(a), Path::new(b));
        assert_eq!(
            rel("/w/out", "/w/out/reports/c1.html"),
            Path::new("reports/c1.html")
        );
        assert_eq!(
            rel("/w/out", "/w/reports/c1.html"),
            Path::new("../reports/c1.html")
        );
        assert_eq!(rel("/w/a/b", "/x/c.html"), Path::new("../../../x/c.html"));
    }

    #[test]
    fn batch_report_names_are_plain_and_distinct() {
        let dir = Path::new("out");
        assert_eq!(batch_report_path(dir, &json!("q1")), dir.join("q1.html"));
        assert_eq!(batch_report_path(dir, &json!(7)), dir.join("7.html"));
        let a = batch_report_path(dir, &json!("../a/b"));
        let b = batch_report_path(dir, &json!("../a_b"));
        assert_ne!(a, b);
        assert!(
            a.starts_with(dir) && !a.to_string_lossy().contains(".."),
            "{a:?}"
        );
        assert_eq!(a.parent(), Some(dir));
        // The number 1 and the string "1" are two ids, with two pages.
        let one = batch_report_path(dir, &json!(1));
        let string_one = batch_report_path(dir, &json!("1"));
        assert_eq!(one, dir.join("1.html"));
        assert_ne!(one, string_one);
        // A plain id cannot take the name of a hashed one.
        let hashed = string_one
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_ne!(batch_report_path(dir, &json!(hashed)), string_one);
    }
}
