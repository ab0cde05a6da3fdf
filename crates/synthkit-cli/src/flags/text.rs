//! The flags of `tokens` and `split`, the text tools.

use std::path::PathBuf;

use clap::Args;
use synthkit::text::BpeTokenizer;

use super::values::{DEFAULT_MAX_FILE_SIZE, FileSize, parse_size, parse_tokenizer};

/// `synthkit tokens`.
#[derive(Debug, Args)]
pub struct TokensArgs {
    /// The file to count (`-` or nothing: standard input), read as `ask` reads it: `.gz`
    /// unpacked, HTML and PDF as text, binary files refused.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The largest file read (and `.gz` unpacked): bytes, or with K, M or G (KiB, MiB,
    /// GiB); `none` for no limit.
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_MAX_FILE_SIZE, value_parser = parse_size)]
    pub max_file_size: FileSize,
    /// The tokenizer: cl100k_base or o200k_base.
    #[arg(long, value_name = "NAME", default_value = "cl100k_base", value_parser = parse_tokenizer)]
    pub tokenizer: BpeTokenizer,
}

/// `synthkit split`.
#[derive(Debug, Args)]
pub struct SplitArgs {
    /// The file to split (`-` or nothing: standard input), read as `ask` reads it: `.gz`
    /// unpacked, HTML and PDF as text, binary files refused.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The largest file read (and `.gz` unpacked): bytes, or with K, M or G (KiB, MiB,
    /// GiB); `none` for no limit.
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_MAX_FILE_SIZE, value_parser = parse_size)]
    pub max_file_size: FileSize,
    /// The most tokens in a chunk.
    #[arg(long, value_name = "N")]
    pub chunk_size: usize,
    /// Tokens a chunk repeats from the previous one [default: 20, capped below the chunk size].
    #[arg(long, value_name = "M")]
    pub overlap: Option<usize>,
    /// The tokenizer: cl100k_base or o200k_base.
    #[arg(long, value_name = "NAME", default_value = "cl100k_base", value_parser = parse_tokenizer)]
    pub tokenizer: BpeTokenizer,
    /// Print a JSON array of the chunk texts.
    #[arg(long)]
    pub json: bool,
}
