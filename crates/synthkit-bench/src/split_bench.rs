//! The splitter benchmark: the corpus chunks joined with blank lines (repeated) until the
//! text reaches the target size, then best-of-`repeat` throughput of the token splitter
//! (`TokenTextSplitter::split_chunks`) and of the tokenizer (`count`, `encode`).

use std::time::Instant;

use anyhow::{Result, bail};
use serde::Serialize;
use synthkit::text::{BpeTokenizer, TokenTextSplitter, Tokenizer};

use crate::{SplitArgs, read_corpus, rss};

/// One throughput measurement (one JSON line).
#[derive(Debug, Clone, Serialize)]
pub struct SplitResult {
    /// What was measured: `split_chunks`, `count` or `encode`.
    pub bench: &'static str,
    /// Bytes of text.
    pub bytes: usize,
    /// Best wall time, in seconds.
    pub best_s: f64,
    /// Every run, in seconds.
    pub runs_s: Vec<f64>,
    /// Megabytes (10^6 bytes) per second of the best run.
    pub mb_per_s: f64,
    /// Chunks (splitter) or tokens (tokenizer) produced.
    pub items: usize,
    /// Chunk size and overlap (splitter only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<usize>,
    /// Chunk overlap (splitter only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_overlap: Option<usize>,
    /// Peak RSS of the process so far, in KiB.
    pub peak_rss_kb: Option<u64>,
}

/// The corpus chunks joined with `"\n\n"`, cycling, until at least `target` bytes.
pub fn build_text(docs: &[String], target: usize) -> String {
    let mut text = String::with_capacity(target + docs.first().map_or(0, String::len) + 2);
    for d in docs.iter().cycle() {
        if text.len() >= target {
            break;
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(d);
    }
    text
}

fn best_of<F: FnMut() -> usize>(repeat: usize, mut f: F) -> (Vec<f64>, usize) {
    let mut runs = Vec::with_capacity(repeat);
    let mut items = 0;
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        items = std::hint::black_box(f());
        runs.push(start.elapsed().as_secs_f64());
    }
    (runs, items)
}

/// Runs the splitter and tokenizer benchmarks and prints the results.
pub fn run(args: &SplitArgs) -> Result<bool> {
    let docs = read_corpus(&args.corpus)?;
    if docs.iter().all(|d| d.is_empty()) {
        bail!("the corpus has no text");
    }
    let target = (args.target_mb * 1e6) as usize;
    let text = build_text(&docs, target);
    drop(docs);
    let tok = BpeTokenizer::cl100k_base();
    let splitter = TokenTextSplitter::new(args.chunk_size, args.chunk_overlap, tok.shared())?;
    let bytes = text.len();
    let result = |bench, (runs, items): (Vec<f64>, usize), sizes: Option<(usize, usize)>| {
        let best = runs.iter().copied().fold(f64::INFINITY, f64::min);
        SplitResult {
            bench,
            bytes,
            best_s: best,
            runs_s: runs,
            mb_per_s: bytes as f64 / best / 1e6,
            items,
            chunk_size: sizes.map(|s| s.0),
            chunk_overlap: sizes.map(|s| s.1),
            peak_rss_kb: rss::peak_rss_kb(),
        }
    };
    if !args.json {
        println!(
            "{:<14} {:>10} {:>9} {:>9} {:>10}",
            "bench", "MB", "best_s", "MB/s", "items"
        );
    }
    let runs = best_of(args.repeat, || splitter.split_chunks(&text).len());
    emit(
        &result(
            "split_chunks",
            runs,
            Some((args.chunk_size, args.chunk_overlap)),
        ),
        args.json,
    );
    let runs = best_of(args.repeat, || tok.count(&text));
    emit(&result("count", runs, None), args.json);
    let runs = best_of(args.repeat, || tok.encode(&text).len());
    emit(&result("encode", runs, None), args.json);
    Ok(true)
}

fn emit(r: &SplitResult, json: bool) {
    if json {
        match serde_json::to_string(r) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("synthkit-bench: cannot serialise the result: {e}"),
        }
    } else {
        println!(
            "{:<14} {:>10.2} {:>9.3} {:>9.2} {:>10}",
            r.bench,
            r.bytes as f64 / 1e6,
            r.best_s,
            r.mb_per_s,
            r.items
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_text_reaches_target() {
        let docs = vec!["abc".to_string(), "de".to_string()];
        let t = build_text(&docs, 10);
        assert_eq!(t, "abc\n\nde\n\nabc");
        assert!(t.len() >= 10);
    }
}
