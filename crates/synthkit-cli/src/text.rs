//! `tokens` and `split`: the text tools. They read a file as `ask` does (`.gz` unpacked,
//! HTML and PDF as text, `--max-file-size`), and refuse binary files.

use std::io::{self, Write};

use anyhow::Result;
use synthkit::text::Tokenizer;

use crate::input;
use crate::output::write_json;
use crate::settings::text::{SplitRun, TokensRun};

/// `synthkit tokens`: prints the token count.
pub fn tokens(args: &TokensRun) -> Result<()> {
    let text = input::read_single(args.input.file.as_deref(), args.input.max_file_size)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{}", args.tokenizer.count(&text))?;
    Ok(out.flush()?)
}

/// `synthkit split`: prints the chunks, each after a header line
/// `--- chunk I/N (T tokens) ---`, or a JSON array of the chunk texts with `--json`.
pub fn split(args: &SplitRun) -> Result<()> {
    let text = input::read_single(args.input.file.as_deref(), args.input.max_file_size)?;
    let chunks = args.splitter.split_chunks(&text);
    let mut out = io::stdout().lock();
    if args.json {
        let texts: Vec<&str> = chunks.iter().map(|c| c.text(&text)).collect();
        write_json(&mut out, &serde_json::json!(texts))?;
        return Ok(());
    }
    let n = chunks.len();
    for (i, c) in chunks.iter().enumerate() {
        let oversized = if c.oversized {
            ", one character over the limit"
        } else {
            ""
        };
        writeln!(
            out,
            "--- chunk {}/{n} ({} tokens{oversized}) ---",
            i + 1,
            c.tokens
        )?;
        writeln!(out, "{}", c.text(&text))?;
    }
    Ok(out.flush()?)
}
