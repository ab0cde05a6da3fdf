//! Printing: notes and warnings on standard error, answers as text or JSON on standard
//! output.

use std::io::{self, Write};

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};
use synthkit::{Node, Response, ResponseMode};

/// Characters of a source's text shown as its excerpt.
pub const EXCERPT_CHARS: usize = 160;

/// Sources listed in text output (JSON lists them all).
pub const MAX_TEXT_SOURCES: usize = 10;

/// The note printed when the offline extractive backend answers.
pub const EXTRACTIVE_NOTE: &str = "extractive answer: sentences selected from your documents, no language model \
     (use --base-url URL or SYNTHKIT_BASE_URL for an OpenAI-compatible model)";

pub use crate::say::{note, warn};

/// The retriever's notes and warnings ([`synthkit_frontend::retrieval::Tell`]) as this
/// command's own lines on standard error.
pub struct Stderr;

impl synthkit_frontend::retrieval::Tell for Stderr {
    fn note(&self, message: &str) {
        crate::say::note(false, message);
    }

    fn warn(&self, message: &str) {
        crate::say::warn(message);
    }

    fn verbose(&self) -> bool {
        crate::logging::verbose()
    }
}

/// The text on one line (whitespace collapsed), cut to [`EXCERPT_CHARS`] characters with
/// `…` when longer. Leading Markdown heading lines are left out (the source's `section`
/// names them) unless the text has nothing else.
pub fn excerpt(text: &str) -> String {
    let text = &without_html_comments(text);
    let body = text
        .trim_start()
        .lines()
        .skip_while(|l| l.trim_start().starts_with('#') || l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let text = if body.trim().is_empty() { text } else { &body };
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= EXCERPT_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(EXCERPT_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// `text` without `<!-- ... -->` comments (kept from Markdown sources; an unclosed one
/// runs to the end).
fn without_html_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("<!--") {
        out.push_str(rest.get(..open).unwrap_or_default());
        let after = rest.get(open + 4..).unwrap_or_default();
        rest = after
            .find("-->")
            .map_or("", |c| after.get(c + 3..).unwrap_or_default());
    }
    out.push_str(rest);
    out
}

/// The file a node came from (`file_path` metadata), if known.
pub fn node_path(node: &Node) -> Option<&str> {
    node.metadata.get("file_path").and_then(Value::as_str)
}

/// The sources as listed: with citations, the cited ones first (in marker order, each
/// with its marker) and then the others; without, all of them as given.
pub fn ordered_sources(response: &Response) -> Vec<(&Node, Option<u32>)> {
    let Some(citations) = &response.citations else {
        return response.source_nodes.iter().map(|n| (n, None)).collect();
    };
    let mut out: Vec<(&Node, Option<u32>)> = Vec::new();
    for c in &citations.markers {
        for id in &c.node_ids {
            if let Some(n) = response.source_nodes.iter().find(|n| &n.id == id)
                && !out.iter().any(|(seen, _)| seen.id == n.id)
            {
                out.push((n, Some(c.marker)));
            }
        }
    }
    for n in &response.source_nodes {
        if !citations.cites(&n.id) {
            out.push((n, None));
        }
    }
    out
}

/// How a source list is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceStyle {
    /// Every source given, numbered 1, 2, ... (no citations).
    All,
    /// The cited sources with their `[n]` markers, then a count of the others.
    Cited,
    /// The sources the answer used (markers hidden), numbered 1, 2, ..., then a count
    /// of the others.
    Used,
}

impl SourceStyle {
    /// The style for `response`: `Cited` with markers shown, `Used` with citations kept
    /// apart, `All` without citations.
    pub fn of(response: &Response, markers_shown: bool) -> Self {
        match (&response.citations, markers_shown) {
            (None, _) => SourceStyle::All,
            (Some(_), true) => SourceStyle::Cited,
            (Some(_), false) => SourceStyle::Used,
        }
    }
}

/// Writes what follows the answer's text: a newline ending the answer, then the sources.
/// Used after a streamed answer too, so both outputs are identical.
pub fn write_after_answer(
    out: &mut impl Write,
    response: &Response,
    style: SourceStyle,
) -> io::Result<()> {
    let answer = &response.text;
    let sources = ordered_sources(response);
    let listed: Vec<(&Node, Option<u32>)> = match style {
        SourceStyle::All => sources.clone(),
        SourceStyle::Cited | SourceStyle::Used => sources
            .iter()
            .copied()
            .filter(|(_, m)| m.is_some())
            .collect(),
    };
    // The model cited nothing: the sources holding the answer's facts, as the grounding
    // check found them, are listed instead, marked as the engine's.
    let found: Vec<(&Node, Option<u32>)> = match (&response.grounding, style) {
        (Some(g), SourceStyle::Cited | SourceStyle::Used) if listed.is_empty() => g
            .source_ids
            .iter()
            .filter_map(|id| sources.iter().find(|(n, _)| &n.id == id).copied())
            .collect(),
        _ => Vec::new(),
    };
    let (listed, by_engine) = if found.is_empty() {
        (listed, false)
    } else {
        (found, true)
    };
    let others = sources.len() - listed.len();
    if !answer.is_empty() {
        if !answer.ends_with('\n') {
            writeln!(out)?;
        }
        if !sources.is_empty() {
            writeln!(out)?;
        }
    }
    if let Some(e) = &response.escalation
        && e.escalated
    {
        let why = match e.reason {
            Some(synthkit::EscalationReason::Unsupported) => "stated facts found in no source",
            _ => "said the sources do not answer",
        };
        let chunks = if e.first_nodes == 1 {
            "chunk"
        } else {
            "chunks"
        };
        writeln!(
            out,
            "Escalated: {} over the first {} {chunks} {why}; this answer is {} over every chunk.",
            e.from, e.first_nodes, e.to
        )?;
    }
    if let Some(x) = response
        .evidence
        .as_ref()
        .and_then(|e| e.extracted.as_ref())
    {
        let n = x.sources.len();
        let chunks = if n == 1 { "chunk" } else { "chunks" };
        writeln!(
            out,
            "Extracted: the model said the sources do not answer, though they cover the question; this answer is the sentences of {n} {chunks} (--on-declined keep for the model's words)."
        )?;
    }
    if let Some(g) = &response.grounding
        && g.status != synthkit::grounding::GroundingStatus::Supported
        && !g.unsupported.is_empty()
    {
        let status = match g.status {
            synthkit::grounding::GroundingStatus::Unsupported => "unsupported",
            _ => "partly supported",
        };
        writeln!(
            out,
            "Check ({status}): found in no source shown: {}",
            synthkit::text::list_excerpt(&g.unsupported)
        )?;
    }
    if !listed.is_empty() {
        if by_engine {
            writeln!(
                out,
                "Sources (found by the engine: they hold the answer's facts; the model cited none):"
            )?;
        } else {
            writeln!(out, "Sources:")?;
        }
        for (i, (node, marker)) in listed.iter().enumerate().take(MAX_TEXT_SOURCES) {
            let label = match (style, marker) {
                (SourceStyle::Cited, Some(m)) => format!("[{m}]"),
                _ => format!("{}.", i + 1),
            };
            let section = node
                .metadata
                .get("section")
                .and_then(Value::as_str)
                .map(|s| format!(" \u{2014} {s}"))
                .unwrap_or_default();
            match node.score {
                Some(s) => writeln!(out, "  {label} {}{section} (score {s:.2})", node.id)?,
                None => writeln!(out, "  {label} {}{section}", node.id)?,
            }
            match checked_quote(response, &node.id) {
                Some(line) => writeln!(out, "     {line}")?,
                None => {
                    let ex = excerpt(&node.text);
                    if !ex.is_empty() {
                        writeln!(out, "     {ex}")?;
                    }
                }
            }
        }
        if listed.len() > MAX_TEXT_SOURCES {
            writeln!(
                out,
                "  ... and {} more (--json lists them all)",
                listed.len() - MAX_TEXT_SOURCES
            )?;
        }
    }
    if style != SourceStyle::All && others > 0 {
        let chunks = if others == 1 { "chunk" } else { "chunks" };
        if by_engine {
            writeln!(
                out,
                "({others} other retrieved {chunks}; --json lists them)"
            )?;
        } else if listed.is_empty() {
            writeln!(
                out,
                "No source was cited ({others} {chunks} retrieved; --json lists them)."
            )?;
        } else {
            writeln!(
                out,
                "({others} other retrieved {chunks} not cited; --json lists them)"
            )?;
        }
    }
    out.flush()
}

/// Quote mode: the first quote found in node `id` (verified, or re-pointed to it), as a
/// source's line shows it: `“words” (verified, characters 24-71)`, and `from the
/// evidence` when the engine quoted it for a bare marker.
fn checked_quote(response: &Response, id: &str) -> Option<String> {
    let q = response.citations.as_ref()?.quotes.iter().find(|q| {
        q.node_id == id
            && matches!(
                q.status,
                synthkit::QuoteStatus::Verified | synthkit::QuoteStatus::Misattributed
            )
    })?;
    let by = match q.origin {
        synthkit::QuoteOrigin::Evidence => ", from the evidence",
        _ => "",
    };
    let at = match (q.start, q.end) {
        (Some(s), Some(e)) => format!(", characters {s}-{e}"),
        _ => String::new(),
    };
    Some(format!(
        "\u{201C}{}\u{201D} ({}{by}{at})",
        excerpt(&q.quote),
        q.status
    ))
}

/// Writes the answer and its sources as text.
pub fn write_text(out: &mut impl Write, response: &Response, style: SourceStyle) -> io::Result<()> {
    write!(out, "{}", response.text)?;
    write_after_answer(out, response, style)
}

/// What the JSON report says besides the response.
#[derive(Debug, Clone)]
pub struct ReportInfo<'a> {
    /// The response mode.
    pub mode: ResponseMode,
    /// The backend kind (`extractive`, `openai`).
    pub backend: &'a str,
    /// The model's name.
    pub model: &'a str,
    /// The query.
    pub query: &'a str,
    /// Wall time of the whole command, in milliseconds.
    pub total_ms: f64,
    /// Time spent in model calls (sum over calls), in milliseconds.
    pub model_ms: f64,
    /// Whether the answer is drawn from the sources: for the extractive backend, whether
    /// it found an answer; with citations, whether it cites a source; else unknown.
    pub grounded: Option<bool>,
}

/// One entry of the JSON report's `sources`, written straight from its node.
#[derive(Serialize)]
struct SourceEntry<'a> {
    id: &'a str,
    path: Option<&'a str>,
    section: Option<&'a str>,
    score: Option<f64>,
    excerpt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cited: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    citation: Option<Option<u32>>,
}

/// The JSON report's `sources`, made one at a time as they are written: a report of a
/// million nodes holds no JSON value per node (each held about 1.4 KB, twice).
struct Sources<'a>(&'a Response);

impl Serialize for Sources<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let citing = self.0.citations.is_some();
        let sources = ordered_sources(self.0);
        let mut seq = serializer.serialize_seq(Some(sources.len()))?;
        for (n, marker) in sources {
            seq.serialize_element(&SourceEntry {
                id: &n.id,
                path: node_path(n),
                section: n.metadata.get("section").and_then(Value::as_str),
                score: n.score,
                excerpt: excerpt(&n.text),
                cited: citing.then_some(marker.is_some()),
                citation: citing.then_some(marker),
            })?;
        }
        seq.end()
    }
}

/// The JSON report of a synthesis: its fields as a JSON object (`fields`, open to more),
/// and its `sources`, written from the response when the report is.
pub struct JsonReport<'a> {
    /// Every field but `sources` (which stands there as `null`, to keep its place).
    pub fields: Value,
    sources: Sources<'a>,
}

impl Serialize for JsonReport<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(fields) = &self.fields else {
            return self.fields.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (k, v) in fields {
            if k == "sources" {
                map.serialize_entry(k, &self.sources)?;
            } else {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// The JSON report of a synthesis.
pub fn report_json<'a>(response: &'a Response, info: &ReportInfo<'_>) -> JsonReport<'a> {
    let mut report = json!({
        "answer": response.text,
        "answerable": response.answerable,
        "mode": info.mode.as_str(),
        "backend": info.backend,
        "model": info.model,
        "query": info.query,
        "sources": null,
        "usage": {
            "calls": response.usage.calls,
            "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "truncated_calls": response.usage.truncated_calls,
        },
        "timings": {
            "total_ms": round_ms(info.total_ms),
            "model_ms": round_ms(info.model_ms),
        },
    });
    if let Some(obj) = report.as_object_mut() {
        // Reasoning models only: of the completion tokens, those spent thinking.
        if response.usage.reasoning_tokens > 0
            && let Some(usage) = obj.get_mut("usage").and_then(Value::as_object_mut)
        {
            usage.insert(
                "reasoning_tokens".into(),
                response.usage.reasoning_tokens.into(),
            );
        }
        // Servers with a prompt cache: of the prompt tokens, those reused (and stored).
        if let Some(usage) = obj.get_mut("usage").and_then(Value::as_object_mut) {
            for (key, n) in [
                ("cached_prompt_tokens", response.usage.cached_prompt_tokens),
                ("cache_write_tokens", response.usage.cache_write_tokens),
            ] {
                if n > 0 {
                    usage.insert(key.into(), n.into());
                }
            }
            // With the user's prices: what the run cost.
            if let Some(cost) = response.usage.cost_usd {
                usage.insert("cost_usd".into(), cost.into());
            }
        }
        if let Some(t) = &response.truncation {
            obj.insert(
                "truncation".into(),
                json!({"dropped_tokens": t.dropped_tokens, "dropped_node_ids": t.dropped_node_ids}),
            );
        }
        if let Some(s) = &response.structured {
            obj.insert("structured".into(), s.clone());
        }
        if let Some(c) = &response.citations {
            obj.insert("citations".into(), json!(c.markers));
            // The first MAX_REMOVED_LISTED removed markers, and how many in all.
            obj.insert("citations_removed".into(), json!(c.removed));
            obj.insert("citations_removed_count".into(), json!(c.removed_count));
            if c.unchecked_markers > 0 {
                obj.insert("unchecked_markers".into(), json!(c.unchecked_markers));
            }
            // Quote mode: each quote with its status and character offsets, and the
            // numbers no cited source has.
            if !c.quotes.is_empty() {
                obj.insert("quotes".into(), json!(c.quotes));
            }
            if !c.unsupported_numbers.is_empty() {
                obj.insert("unsupported_numbers".into(), json!(c.unsupported_numbers));
            }
        }
        if let Some(g) = info.grounded {
            obj.insert("grounded".into(), Value::Bool(g));
        }
        // The answer's facts looked up in what the model was shown, and what the
        // evidence stage kept and left out.
        if let Some(g) = &response.grounding {
            obj.insert("grounding".into(), json!(g));
        }
        if let Some(e) = &response.evidence {
            obj.insert("evidence".into(), json!(e));
        }
        // --escalate: whether the first answer was set aside, why, and what it spent.
        if let Some(e) = &response.escalation {
            obj.insert("escalation".into(), json!(e));
        }
    }
    JsonReport {
        fields: report,
        sources: Sources(response),
    }
}

/// The report of `--json --format llamaindex`: LlamaIndex's `Response` (`response`,
/// `source_nodes` as `NodeWithScore` objects holding a `TextNode`, `metadata` from node id
/// to its metadata). Its `source_nodes` can be given back to `--nodes`.
pub fn report_llamaindex(response: &Response) -> Value {
    let source_nodes: Vec<Value> = response
        .source_nodes
        .iter()
        .map(Node::to_node_with_score)
        .collect();
    let metadata: serde_json::Map<String, Value> = if response.metadata.is_empty() {
        response
            .source_nodes
            .iter()
            .map(|n| (n.id.clone(), Value::Object(n.metadata.clone())))
            .collect()
    } else {
        response.metadata.clone()
    };
    json!({
        "response": response.text,
        "source_nodes": source_nodes,
        "metadata": metadata,
    })
}

/// The warning printed after an answer when `calls` model replies were cut at the output
/// limit of `num_output` tokens.
pub fn truncated_calls_warning(calls: u64, num_output: usize) -> String {
    let replies = if calls == 1 {
        "1 model reply was".to_string()
    } else {
        format!("{calls} model replies were")
    };
    format!("{replies} cut at the output limit (--num-output {num_output}); raise --num-output")
}

/// The note on standard error after a priced run: `cost: $0.000123 (...)`.
pub fn cost_note(prices: &synthkit::cost::Prices, usage: &synthkit::UsageTotals) -> String {
    format!(
        "cost: ${:.6} at the prices given ({} prompt tokens, {} of them from the server's cache, and {} completion tokens)",
        prices.cost(usage),
        usage.prompt_tokens,
        usage.cached_prompt_tokens.min(usage.prompt_tokens),
        usage.completion_tokens
    )
}

/// Milliseconds rounded to 0.001.
pub fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// Writes a JSON value, pretty-printed, with a final newline (through a buffer: standard
/// output is line-buffered).
pub fn write_json(out: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()
}

/// Opens a results file (`batch`'s and `eval`'s OUT) for appending
/// ([`synthkit_frontend::batch::open_output`]; a usage error when it cannot be opened), saying
/// which of its lines are not results and whether a cut line was removed.
pub fn open_results(
    path: &std::path::Path,
) -> anyhow::Result<(std::fs::File, synthkit_frontend::batch::Existing)> {
    let (file, existing) = synthkit_frontend::batch::open_output(path)
        .map_err(|e| crate::error::usage(e.to_string()))?;
    for number in &existing.not_results {
        warn(&format!(
            "line {number} of the output {} is not a batch result (no `id`): left as it is",
            path.display()
        ));
    }
    if let Some(bytes) = existing.cut {
        note(
            false,
            &format!("the output's last line was cut ({bytes} bytes): rewriting it"),
        );
    }
    Ok((file, existing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_and_flat() {
        for (text, short) in [
            ("a\n\n b  c", "a b c"),
            ("## Title\n\nBody text.", "Body text."),
            ("# Only a title", "# Only a title"),
            ("<!-- note -->\nTokio 1.70. <!-- x", "Tokio 1.70."),
        ] {
            assert_eq!(excerpt(text), short, "{text:?}");
        }
        let long = "word ".repeat(100);
        let e = excerpt(&long);
        assert!(e.chars().count() <= EXCERPT_CHARS);
        assert!(e.ends_with('…'));
    }

    #[test]
    fn text_layout() {
        let mut response = Response::default();
        response.text = "Blue.".into();
        response.source_nodes = vec![Node::new("a.md#1", "The sky is blue.").with_score(1.5)];
        let mut out = Vec::new();
        write_text(&mut out, &response, SourceStyle::All).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Blue.\n\nSources:\n  1. a.md#1 (score 1.50)\n     The sky is blue.\n"
        );
    }

    #[test]
    fn cited_sources_come_first_and_the_rest_are_counted() {
        let mut response = Response::default();
        response.text = "Blue [1].".into();
        response.source_nodes = vec![
            Node::new("a", "Grass is green."),
            Node::new("b", "The sky is blue.").with_metadata("section", "Sky"),
        ];
        response.citations = Some(synthkit::Citations {
            markers: vec![synthkit::Citation {
                marker: 1,
                node_ids: vec!["b".into()],
            }],
            removed: vec![],
            ..synthkit::Citations::default()
        });
        let mut out = Vec::new();
        write_text(&mut out, &response, SourceStyle::Cited).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Blue [1].\n\nSources:\n  [1] b \u{2014} Sky\n     The sky is blue.\n(1 other retrieved chunk not cited; --json lists them)\n"
        );
        let info = ReportInfo {
            mode: ResponseMode::Compact,
            backend: "x",
            model: "m",
            query: "q",
            total_ms: 0.0,
            model_ms: 0.0,
            grounded: Some(true),
        };
        let json = serde_json::to_value(report_json(&response, &info)).unwrap();
        assert_eq!(json["sources"][0]["id"], "b");
        assert_eq!(json["sources"][0]["cited"], true);
        assert_eq!(json["sources"][1]["cited"], false);
        assert_eq!(json["citations"][0]["node_ids"][0], "b");
        assert_eq!(json["grounded"], true);
    }
}
