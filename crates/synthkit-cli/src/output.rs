//! Printing: notes and warnings on standard error, answers as text or JSON on standard
//! output.

use std::io::{self, Write};

use serde_json::{Value, json};
use synthkit::{Node, Response, ResponseMode};

/// Characters of a source's text shown as its excerpt.
pub const EXCERPT_CHARS: usize = 160;

/// Sources listed in text output (JSON lists them all).
pub const MAX_TEXT_SOURCES: usize = 10;

/// The note printed when the offline extractive backend answers.
pub const EXTRACTIVE_NOTE: &str = "extractive answer: sentences selected from your documents, no language model \
     (use --base-url URL or SYNTHKIT_BASE_URL for an OpenAI-compatible model)";

/// An informational note on standard error (hidden by `--quiet`).
pub fn note(quiet: bool, message: &str) {
    if !quiet {
        eprintln!("note: {message}");
    }
}

/// A warning on standard error (always shown).
pub fn warn(message: &str) {
    eprintln!("warning: {message}");
}

/// The text on one line (whitespace collapsed), cut to [`EXCERPT_CHARS`] characters with
/// `…` when longer.
pub fn excerpt(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= EXCERPT_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(EXCERPT_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// The file a node came from (`file_path` metadata), if known.
pub fn node_path(node: &Node) -> Option<&str> {
    node.metadata.get("file_path").and_then(Value::as_str)
}

/// Writes what follows the answer's text: a newline ending the answer, then the sources.
/// Used after a streamed answer too, so both outputs are identical.
pub fn write_after_answer(out: &mut impl Write, answer: &str, sources: &[Node]) -> io::Result<()> {
    if !answer.is_empty() {
        if !answer.ends_with('\n') {
            writeln!(out)?;
        }
        if !sources.is_empty() {
            writeln!(out)?;
        }
    }
    if !sources.is_empty() {
        writeln!(out, "Sources:")?;
        for (i, node) in sources.iter().enumerate().take(MAX_TEXT_SOURCES) {
            match node.score {
                Some(s) => writeln!(out, "  {}. {} (score {s:.2})", i + 1, node.id)?,
                None => writeln!(out, "  {}. {}", i + 1, node.id)?,
            }
            let ex = excerpt(&node.text);
            if !ex.is_empty() {
                writeln!(out, "     {ex}")?;
            }
        }
        if sources.len() > MAX_TEXT_SOURCES {
            writeln!(
                out,
                "  ... and {} more (--json lists them all)",
                sources.len() - MAX_TEXT_SOURCES
            )?;
        }
    }
    out.flush()
}

/// Writes the answer and its sources as text.
pub fn write_text(out: &mut impl Write, response: &Response) -> io::Result<()> {
    write!(out, "{}", response.text)?;
    write_after_answer(out, &response.text, &response.source_nodes)
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
}

/// The JSON report of a synthesis.
pub fn report_json(response: &Response, info: &ReportInfo<'_>) -> Value {
    let sources: Vec<Value> = response
        .source_nodes
        .iter()
        .map(|n| {
            json!({
                "id": n.id,
                "path": node_path(n),
                "section": n.metadata.get("section").and_then(Value::as_str),
                "score": n.score,
                "excerpt": excerpt(&n.text),
            })
        })
        .collect();
    let mut report = json!({
        "answer": response.text,
        "mode": info.mode.as_str(),
        "backend": info.backend,
        "model": info.model,
        "query": info.query,
        "sources": sources,
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
        if let Some(t) = &response.truncation {
            obj.insert(
                "truncation".into(),
                json!({"dropped_tokens": t.dropped_tokens, "dropped_node_ids": t.dropped_node_ids}),
            );
        }
        if let Some(s) = &response.structured {
            obj.insert("structured".into(), s.clone());
        }
    }
    report
}

/// The report of `--json --format llamaindex`: LlamaIndex's `Response` (`response`,
/// `source_nodes` as `NodeWithScore` objects holding a `TextNode`, `metadata` from node id
/// to its metadata). Its `source_nodes` can be given back to `--nodes`.
pub fn report_llamaindex(response: &Response) -> Value {
    let source_nodes: Vec<Value> = response
        .source_nodes
        .iter()
        .map(|n| {
            json!({
                "node": {
                    "id_": n.id,
                    "text": n.text,
                    "metadata": n.metadata,
                    "excluded_llm_metadata_keys": n.excluded_llm_metadata_keys,
                    "class_name": "TextNode",
                },
                "score": n.score,
            })
        })
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

/// Milliseconds rounded to 0.001.
pub fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// Writes a JSON value, pretty-printed, with a final newline.
pub fn write_json(out: &mut impl Write, value: &Value) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_and_flat() {
        assert_eq!(excerpt("a\n\n b  c"), "a b c");
        let long = "word ".repeat(100);
        let e = excerpt(&long);
        assert!(e.chars().count() <= EXCERPT_CHARS);
        assert!(e.ends_with('…'));
    }

    #[test]
    fn text_layout() {
        let response = Response {
            text: "Blue.".into(),
            source_nodes: vec![Node::new("a.md#1", "The sky is blue.").with_score(1.5)],
            ..Response::default()
        };
        let mut out = Vec::new();
        write_text(&mut out, &response).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Blue.\n\nSources:\n  1. a.md#1 (score 1.50)\n     The sky is blue.\n"
        );
    }
}
