//! `synthkit-bench`: benchmarks for synthkit.
//!
//! * `synthkit-bench --corpus FILE [--modes a,b] [--repeat 3] [--latency-ms 50
//!   [--latency-spread 1.0] [--seed 42]] [--concurrency N|unlimited] [--json]`: times
//!   `Synthesizer::synthesize` per response mode with an instant fixed-answer model (or
//!   one that sleeps `--latency-ms` per call, spread log-normally with mean 1 by
//!   `--latency-spread`, seeded by the prompt so every run and commit sees the same
//!   latencies), and reports calls, prompt tokens and peak RSS; with latency also the
//!   mean calls in flight and the list-scheduling bound of the run's own calls. With more than one mode each mode runs
//!   in its own child process (`--isolate`, the default then), so each peak RSS is its own.
//! * `synthkit-bench split --corpus FILE`: token splitter and tokenizer throughput on a
//!   ~10 MB text built from the corpus.
//!
//! Output: one JSON object per line with `--json`, else a plain table.

mod rss;
mod schedule;
mod split_bench;
mod synth_bench;
mod timed_model;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use synthkit::ResponseMode;

/// The query of the benchmark workload (see `shared/bench/README.md`).
pub const DEFAULT_QUERY: &str = "What does the text say about iterables and exceptions?";

/// The modes benchmarked by default, in this order.
pub const DEFAULT_MODES: &str = "refine,compact,tree_summarize,simple_summarize,accumulate,compact_accumulate,generation,no_text,context_only";

/// Options of the synthesis benchmark.
#[derive(Debug, Clone)]
pub struct SynthArgs {
    /// A JSON array of chunk texts (the nodes, ids `n00000`, ...).
    pub corpus: Option<PathBuf>,
    /// Comma-separated response modes.
    pub modes: String,
    /// Timed runs per mode (after one warm-up run); the best is reported.
    pub repeat: usize,
    /// Latency of every model call, in milliseconds (an async sleep); 0 = instant.
    pub latency_ms: u64,
    /// `σ` of the log-normal spread of latencies (mean 1); 0 = every call `latency_ms`.
    pub latency_spread: f64,
    /// Seed of the latency draws.
    pub seed: u64,
    /// Calls in flight for tree levels and accumulate (0 = unlimited); `None` = the
    /// library's default.
    pub concurrency: Option<usize>,
    /// The query.
    pub query: String,
    /// One JSON object per mode per line (else a table).
    pub json: bool,
    /// Run each mode in its own child process.
    pub isolate: bool,
    /// Run every mode in this process.
    pub no_isolate: bool,
    /// Tokio worker threads (default: one per core).
    pub threads: Option<usize>,
}

/// Options of the splitter benchmark.
#[derive(Debug, Clone)]
pub struct SplitArgs {
    /// A JSON array of chunk texts, joined with blank lines (repeated) into the text.
    pub corpus: PathBuf,
    /// Size of the text, in MB (10^6 bytes); the corpus is repeated to reach it.
    pub target_mb: f64,
    /// Chunk size in tokens.
    pub chunk_size: usize,
    /// Chunk overlap in tokens.
    pub chunk_overlap: usize,
    /// Timed runs; the best is reported.
    pub repeat: usize,
    /// One JSON object per measurement per line (else a table).
    pub json: bool,
}

enum Invocation {
    Synth(SynthArgs),
    Split(SplitArgs),
}

// The builder API rather than clap's derive: the derive emits `allow(clippy::restriction)`,
// which the workspace's `forbid` lints (todo, dbg_macro, unimplemented) reject (E0453).
fn cli() -> Command {
    let json = || Arg::new("json").long("json").action(ArgAction::SetTrue);
    let repeat = |help: &'static str| {
        Arg::new("repeat")
            .long("repeat")
            .value_name("N")
            .value_parser(value_parser!(usize))
            .default_value("3")
            .help(help)
    };
    Command::new("synthkit-bench")
        .about("Benchmarks for synthkit: response modes with an instant fixed-answer model, and the splitter")
        .version(env!("CARGO_PKG_VERSION"))
        .args_conflicts_with_subcommands(true)
        .arg(
            Arg::new("corpus")
                .long("corpus")
                .value_name("FILE")
                .value_parser(value_parser!(PathBuf))
                .help("A JSON array of chunk texts (the nodes, ids n00000, ...)"),
        )
        .arg(Arg::new("modes").long("modes").value_name("A,B,...").default_value(DEFAULT_MODES).help("Response modes"))
        .arg(repeat("Timed runs per mode after one warm-up run; the best is reported"))
        .arg(
            Arg::new("latency-ms")
                .long("latency-ms")
                .value_name("MS")
                .value_parser(value_parser!(u64))
                .default_value("0")
                .help("Every model call sleeps this long (async); 0 = instant"),
        )
        .arg(
            Arg::new("latency-spread")
                .long("latency-spread")
                .value_name("SIGMA")
                .value_parser(parse_spread)
                .default_value("0")
                .help("Spread latencies log-normally with this sigma (mean kept); drawn per prompt"),
        )
        .arg(
            Arg::new("seed")
                .long("seed")
                .value_name("N")
                .value_parser(value_parser!(u64))
                .default_value("42")
                .help("Seed of the latency draws"),
        )
        .arg(
            Arg::new("concurrency")
                .long("concurrency")
                .value_name("N|unlimited")
                .value_parser(parse_concurrency)
                .help("Calls in flight for tree levels and accumulate (default: the library's, 8)"),
        )
        .arg(Arg::new("query").long("query").value_name("TEXT").default_value(DEFAULT_QUERY).help("The query"))
        .arg(json().help("One JSON object per mode per line (else a table)"))
        .arg(
            Arg::new("isolate")
                .long("isolate")
                .action(ArgAction::SetTrue)
                .conflicts_with("no-isolate")
                .help("Run each mode in its own child process (the default with more than one mode)"),
        )
        .arg(
            Arg::new("no-isolate")
                .long("no-isolate")
                .action(ArgAction::SetTrue)
                .help("Run every mode in this process (peak RSS is then the maximum so far)"),
        )
        .arg(
            Arg::new("threads")
                .long("threads")
                .value_name("N")
                .value_parser(value_parser!(usize))
                .help("Tokio worker threads (default: one per core)"),
        )
        .subcommand(
            Command::new("split")
                .about("Token splitter and tokenizer throughput on a ~10 MB text built from the corpus")
                .arg(
                    Arg::new("corpus")
                        .long("corpus")
                        .value_name("FILE")
                        .required(true)
                        .value_parser(value_parser!(PathBuf))
                        .help("A JSON array of chunk texts, joined with blank lines (repeated)"),
                )
                .arg(
                    Arg::new("target-mb")
                        .long("target-mb")
                        .value_parser(value_parser!(f64))
                        .default_value("10")
                        .help("Size of the text in MB (10^6 bytes)"),
                )
                .arg(
                    Arg::new("chunk-size")
                        .long("chunk-size")
                        .value_parser(value_parser!(usize))
                        .default_value("256")
                        .help("Chunk size in tokens"),
                )
                .arg(
                    Arg::new("chunk-overlap")
                        .long("chunk-overlap")
                        .value_parser(value_parser!(usize))
                        .default_value("25")
                        .help("Chunk overlap in tokens"),
                )
                .arg(repeat("Timed runs; the best is reported"))
                .arg(json().help("One JSON object per measurement per line (else a table)")),
        )
}

fn parse_args() -> Invocation {
    let m = cli().get_matches();
    let flag = |m: &ArgMatches, id: &str| m.get_flag(id);
    if let Some(("split", s)) = m.subcommand() {
        return Invocation::Split(SplitArgs {
            corpus: s.get_one::<PathBuf>("corpus").cloned().unwrap_or_default(),
            target_mb: s.get_one::<f64>("target-mb").copied().unwrap_or(10.0),
            chunk_size: s.get_one::<usize>("chunk-size").copied().unwrap_or(256),
            chunk_overlap: s.get_one::<usize>("chunk-overlap").copied().unwrap_or(25),
            repeat: s.get_one::<usize>("repeat").copied().unwrap_or(3),
            json: flag(s, "json"),
        });
    }
    Invocation::Synth(SynthArgs {
        corpus: m.get_one::<PathBuf>("corpus").cloned(),
        modes: m
            .get_one::<String>("modes")
            .cloned()
            .unwrap_or_else(|| DEFAULT_MODES.to_string()),
        repeat: m.get_one::<usize>("repeat").copied().unwrap_or(3),
        latency_ms: m.get_one::<u64>("latency-ms").copied().unwrap_or(0),
        latency_spread: m.get_one::<f64>("latency-spread").copied().unwrap_or(0.0),
        seed: m.get_one::<u64>("seed").copied().unwrap_or(42),
        concurrency: m.get_one::<usize>("concurrency").copied(),
        query: m
            .get_one::<String>("query")
            .cloned()
            .unwrap_or_else(|| DEFAULT_QUERY.to_string()),
        json: flag(&m, "json"),
        isolate: flag(&m, "isolate"),
        no_isolate: flag(&m, "no-isolate"),
        threads: m.get_one::<usize>("threads").copied(),
    })
}

fn parse_concurrency(s: &str) -> Result<usize, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "unlimited" | "unbounded" | "none" => Ok(0),
        n => n
            .parse::<usize>()
            .map_err(|_| format!("`{s}` is not a number or `unlimited`")),
    }
}

fn parse_spread(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=4.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "`{s}` is not a spread between 0 and 4 (a log-normal sigma)"
        )),
    }
}

/// Reads the corpus: a JSON array of strings.
pub fn read_corpus(path: &std::path::Path) -> Result<Vec<String>> {
    // Parsed from a buffered reader, so the file's text is never held whole beside the
    // parsed strings (which would inflate the peak RSS every mode reports).
    let file =
        std::fs::File::open(path).with_context(|| format!("reading corpus {}", path.display()))?;
    let docs: Vec<String> = serde_json::from_reader(std::io::BufReader::new(file))
        .with_context(|| format!("{} is not a JSON array of strings", path.display()))?;
    Ok(docs)
}

/// Parses `a,b,c` into modes, keeping order and dropping duplicates.
pub fn parse_modes(s: &str) -> Result<Vec<ResponseMode>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let m: ResponseMode = part.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        bail!("no modes given");
    }
    Ok(out)
}

fn main() -> ExitCode {
    // Feature `otel`: spans exported to `$OTEL_EXPORTER_OTLP_ENDPOINT` when it is set,
    // flushed when the guard drops at the end.
    #[cfg(feature = "otel")]
    let _otel = match synthkit::telemetry::otel::OtelConfig::from_env() {
        Some(config) => match synthkit::telemetry::otel::install(
            Some(config),
            tracing_subscriber::layer::Identity::new(),
        ) {
            Ok(guard) => guard,
            Err(e) => {
                eprintln!("synthkit-bench: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    let result = match parse_args() {
        Invocation::Split(args) => split_bench::run(&args),
        Invocation::Synth(args) => synth_bench::run(&args),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("synthkit-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_consistent() {
        cli().debug_assert();
    }

    #[test]
    fn concurrency_values() {
        assert_eq!(parse_concurrency("unlimited"), Ok(0));
        assert_eq!(parse_concurrency("64"), Ok(64));
        assert!(parse_concurrency("lots").is_err());
    }

    #[test]
    fn modes_parse_in_order_without_duplicates() {
        let modes = parse_modes("tree_summarize, accumulate,tree_summarize").unwrap_or_default();
        assert_eq!(
            modes,
            vec![ResponseMode::TreeSummarize, ResponseMode::Accumulate]
        );
        assert!(parse_modes("nope").is_err());
    }
}
