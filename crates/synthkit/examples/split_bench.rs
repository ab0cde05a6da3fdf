//! Throughput of the token text splitter against a raw token count of the same text.
//!
//! ```text
//! cargo run --release -p synthkit --example split_bench -- [CORPUS.json] [--size 256] [--overlap 25] [--mb 10]
//! ```
//!
//! `CORPUS.json` is a JSON array of strings (default: `../shared/bench/corpus_n10000_s42.json`
//! relative to the workspace root). They are joined with blank lines until the text holds at
//! least `--mb` megabytes; the example then times `split_chunks` and `Tokenizer::count` on
//! that text (best of 3 each) and prints one JSON object.

use std::error::Error;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use synthkit::text::{BpeTokenizer, TokenTextSplitter};

const DEFAULT_CORPUS: &str = "../shared/bench/corpus_n10000_s42.json";

struct Args {
    corpus: PathBuf,
    size: usize,
    overlap: usize,
    megabytes: usize,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let mut corpus = None;
    let mut size = 256;
    let mut overlap = 25;
    let mut megabytes = 10;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> Result<usize, Box<dyn Error>> {
            let v = args.next().ok_or_else(|| format!("{name} needs a value"))?;
            Ok(v.parse()?)
        };
        match arg.as_str() {
            "--size" => size = value("--size")?,
            "--overlap" => overlap = value("--overlap")?,
            "--mb" => megabytes = value("--mb")?,
            "-h" | "--help" => {
                println!("usage: split_bench [CORPUS.json] [--size 256] [--overlap 25] [--mb 10]");
                std::process::exit(0);
            }
            _ => corpus = Some(PathBuf::from(arg)),
        }
    }
    let corpus = match corpus {
        Some(p) => p,
        None => {
            // Relative to the workspace root, whether run from there or from the crate.
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
            let from_root = root.join(DEFAULT_CORPUS);
            if from_root.exists() {
                from_root
            } else {
                PathBuf::from(DEFAULT_CORPUS)
            }
        }
    };
    Ok(Args {
        corpus,
        size,
        overlap,
        megabytes,
    })
}

/// The best (shortest) of `runs` timings of `f`, and its last result.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, Option<T>) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed());
        out = Some(r);
    }
    (best, out)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    let raw = std::fs::read_to_string(&args.corpus)
        .map_err(|e| format!("cannot read {}: {e}", args.corpus.display()))?;
    let docs: Vec<String> = serde_json::from_str(&raw)?;
    if docs.is_empty() {
        return Err("the corpus is empty".into());
    }
    let target = args.megabytes * 1_000_000;
    let mut text = String::with_capacity(target + 4096);
    for doc in docs.iter().cycle() {
        if text.len() >= target {
            break;
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(doc);
    }

    let tokenizer = BpeTokenizer::cl100k_base().shared();
    let splitter = TokenTextSplitter::new(args.size, args.overlap, tokenizer.clone())?;
    // Warm up (builds the tokenizer's tables).
    let _ = tokenizer.count("warm up");

    let (split_time, chunks) = best_of(3, || splitter.split_chunks(&text));
    let chunks = chunks.unwrap_or_default();
    let (count_time, tokens) = best_of(3, || tokenizer.count(&text));
    let tokens = tokens.unwrap_or_default();

    let mb = text.len() as f64 / 1e6;
    let max_tokens = chunks.iter().map(|c| c.tokens).max().unwrap_or(0);
    let over = chunks
        .iter()
        .filter(|c| c.tokens > args.size && !c.oversized)
        .count();
    let mean_tokens = if chunks.is_empty() {
        0.0
    } else {
        chunks.iter().map(|c| c.tokens as f64).sum::<f64>() / chunks.len() as f64
    };
    let report = serde_json::json!({
        "corpus": args.corpus.display().to_string(),
        "bytes": text.len(),
        "tokens": tokens,
        "chunk_size": args.size,
        "chunk_overlap": args.overlap,
        "chunks": chunks.len(),
        "max_chunk_tokens": max_tokens,
        "mean_chunk_tokens": (mean_tokens * 10.0).round() / 10.0,
        "chunks_over_limit": over,
        "split_secs": split_time.as_secs_f64(),
        "split_mb_per_s": (mb / split_time.as_secs_f64() * 10.0).round() / 10.0,
        "count_secs": count_time.as_secs_f64(),
        "count_mb_per_s": (mb / count_time.as_secs_f64() * 10.0).round() / 10.0,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
