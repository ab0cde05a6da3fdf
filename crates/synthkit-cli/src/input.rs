//! Reading input: one file for `tokens` and `split`, pre-retrieved nodes (`--nodes`), and
//! how the command says what a read of files and folders says.
//!
//! Files and folders are read by the front ends' retriever
//! ([`synthkit_frontend::retrieval`]): folders are walked like ripgrep does
//! (.gitignore/.ignore and hidden files respected unless `--no-ignore` / `--hidden`,
//! `--include`/`--exclude` globs, symbolic links followed with loops named, in sorted
//! order), and every file is read by its content: text in any name (`README.Debian`,
//! `changelog.1`), UTF-16 with a byte-order mark, windows-1252 for legacy 8-bit text (with
//! a warning naming the file), `.gz` transparently, HTML as Markdown-style text, PDF text.
//! Every file skipped is named with its reason (the first few by default, all with `-v`)
//! and a note counts them: `read 37 files (2 skipped: 1 binary, 1 symlink loop)`. A file
//! named on the command line is read even when hidden or ignored.
//!
//! Image files (PNG, JPEG, WebP, GIF: a known name whose first bytes are that image) are
//! set apart from the binary files skipped: [`crate::images::image_nodes`] makes them image
//! nodes when `--images` and the model allow (`auto`: a model known to take images).

use std::fs;
use std::io;
use std::path::Path;

use anyhow::{Result, anyhow};
use synthkit::Node;
use synthkit_documents::{ReadOptions, Reader, SkipReason};
use synthkit_frontend::retrieval::Say;
use synthkit_frontend::retrieval::read::{STDIN_NAME, is_stdin, read_capped, read_stdin};

use crate::error::usage;
use crate::output::{Stderr, warn};
use crate::settings::templates::decode;

/// What a read says on standard error: notes unless `--quiet`, every file named with `-v`
/// (or a `RUST_LOG` at info or more).
pub fn say(quiet: bool) -> Say<'static> {
    Say::new(&Stderr)
        .quiet(quiet)
        .verbose(crate::logging::verbose())
}

/// Reads one file, or standard input for `None` or `-` (for `tokens` and `split`), as
/// `ask` reads a file: `.gz` unpacked, HTML and PDF as text, the size limit applied; a
/// binary or empty file is an error.
pub fn read_single(path: Option<&Path>, max_file_size: Option<u64>) -> Result<String> {
    let reader = Reader::new(ReadOptions::new().max_file_size(max_file_size));
    let (name, read) = match path {
        Some(p) if !is_stdin(p) => {
            fs::metadata(p).map_err(|e| usage(format!("cannot read `{}`: {e}", p.display())))?;
            (p.display().to_string(), reader.read_file(p))
        }
        _ => (
            STDIN_NAME.to_string(),
            reader.read_bytes(Path::new(STDIN_NAME), read_stdin(max_file_size)?),
        ),
    };
    match read {
        Ok(read) => {
            if let Some(n) = &read.note {
                warn(&format!("{name} {n}"));
            }
            Ok(read.document.text)
        }
        Err(SkipReason::Empty) => Ok(String::new()),
        Err(SkipReason::Binary) => Err(anyhow!(
            "{name} is a binary file, not text: nothing to count or split"
        )),
        Err(reason @ SkipReason::TooLarge { .. }) => {
            Err(usage(format!("{name} is {reason} (see --max-file-size)")))
        }
        Err(reason) => Err(anyhow!("cannot read {name}: {reason}")),
    }
}

/// Reads pre-retrieved nodes from a file (`-`: standard input), refusing one larger than
/// `max` bytes (`--max-file-size`; `None`: no limit) before reading past it.
pub fn read_nodes(path: &Path, max: Option<u64>) -> Result<Vec<Node>> {
    let (bytes, name) = if is_stdin(path) {
        (read_stdin(max)?, STDIN_NAME.to_string())
    } else {
        let name = path.display().to_string();
        let cannot = |e: io::Error| usage(format!("cannot read --nodes `{name}`: {e}"));
        let file = fs::File::open(path).map_err(cannot)?;
        (read_capped(file, max).map_err(cannot)?, name)
    };
    if let Some(max) = max.filter(|&m| bytes.len() as u64 > m) {
        return Err(usage(format!(
            "--nodes {name} is larger than {max} bytes: raise --max-file-size (or `none`), or send fewer nodes"
        )));
    }
    let text = decode(&bytes, &name);
    crate::node_json::parse_nodes(&text, &name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossy_decoding_and_bom() {
        assert_eq!(decode(b"\xEF\xBB\xBFhi", "x"), "hi");
        // Legacy 8-bit text is windows-1252; damaged UTF-8 keeps U+FFFD.
        assert_eq!(decode(b"a\xFFb", "x"), "a\u{FF}b");
        assert_eq!(decode(b"\xC3\xA9 \xFF", "x"), "\u{E9} \u{FFFD}");
    }
}
