//! What `tokens`, `split` and `report` run, built from their flags once: the text tools'
//! input and tokenizer, `split`'s splitter (its sizes checked here), the report's files.

use std::path::PathBuf;

use anyhow::Result;
use synthkit::text::{BpeTokenizer, TokenTextSplitter};

use crate::flags::{ReportVerbArgs, SplitArgs, TokensArgs, default_overlap, usage};

/// The file a text tool reads (`None` or `-`: standard input) and `--max-file-size`.
#[derive(Debug, Clone)]
pub struct TextInput {
    /// The file.
    pub file: Option<PathBuf>,
    /// `--max-file-size` (`None`: no limit).
    pub max_file_size: Option<u64>,
}

/// One `synthkit tokens`.
#[derive(Debug)]
pub struct TokensRun {
    /// What is counted.
    pub input: TextInput,
    /// `--tokenizer`.
    pub tokenizer: BpeTokenizer,
}

impl TokensRun {
    /// The count `args` ask for.
    pub fn of(args: TokensArgs) -> Self {
        Self {
            input: TextInput {
                file: args.file,
                max_file_size: args.max_file_size.0,
            },
            tokenizer: args.tokenizer,
        }
    }
}

/// One `synthkit split`.
#[derive(Debug)]
pub struct SplitRun {
    /// What is split.
    pub input: TextInput,
    /// `--chunk-size`, `--overlap` (else the default for the size) and `--tokenizer`.
    pub splitter: TokenTextSplitter,
    /// `--json`: a JSON array of the chunks' texts.
    pub json: bool,
}

impl SplitRun {
    /// The split `args` ask for; sizes the splitter cannot take refused.
    pub fn of(args: SplitArgs) -> Result<Self> {
        let overlap = args
            .overlap
            .unwrap_or_else(|| default_overlap(args.chunk_size));
        let splitter = TokenTextSplitter::new(args.chunk_size, overlap, args.tokenizer.shared())
            .map_err(|e| usage(format!("{e} (see --chunk-size and --overlap)")))?;
        Ok(Self {
            input: TextInput {
                file: args.file,
                max_file_size: args.max_file_size.0,
            },
            splitter,
            json: args.json,
        })
    }
}

/// One `synthkit report TRACE -o FILE`.
#[derive(Debug, Clone)]
pub struct ReportRun {
    /// The trace read.
    pub trace: PathBuf,
    /// The page written.
    pub output: PathBuf,
}

impl ReportRun {
    /// The report `args` ask for.
    pub fn of(args: ReportVerbArgs) -> Self {
        Self {
            trace: args.trace,
            output: args.output,
        }
    }
}
