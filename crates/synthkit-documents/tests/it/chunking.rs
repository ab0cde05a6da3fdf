//! Structure-aware chunks (`synthkit_documents::chunk`): headings first, code blocks and
//! lists kept whole, heading paths as `section` metadata, nothing lost, the limit kept.
//!
//! Run more property cases with `PROPTEST_CASES=5000 cargo test -p synthkit-documents --test it chunking`.
//! Print the chunks of real files with
//! `CHUNK_FILES=README.md,/usr/share/doc/bash/RBASH cargo test -p synthkit-documents --test it chunking -- --ignored --nocapture`.

use proptest::prelude::*;
use synthkit::Node;
use synthkit::testing::LumpyTokenizer;
use synthkit::text::{BpeTokenizer, SharedTokenizer, TokenTextSplitter};
use synthkit_documents::chunk::{TextChunk, chunk, chunk_text};
use synthkit_documents::{Document, Format};

fn cl100k() -> SharedTokenizer {
    BpeTokenizer::cl100k_base().shared()
}

fn splitter(size: usize, overlap: usize) -> TokenTextSplitter {
    TokenTextSplitter::new(size, overlap, cl100k()).unwrap()
}

fn texts<'a>(text: &'a str, chunks: &[TextChunk]) -> Vec<&'a str> {
    chunks.iter().map(|c| c.text(text)).collect()
}

fn sections(chunks: &[TextChunk]) -> Vec<String> {
    chunks.iter().map(TextChunk::section_path).collect()
}

fn md(text: &str, size: usize) -> Vec<TextChunk> {
    chunk_text(text, Format::Markdown, &splitter(size, 0))
}

/// Words `from..to` as one sentence-ish line: "w3 w4 w5".
fn words(from: usize, to: usize) -> String {
    (from..to)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------
// Headings and sections

#[test]
fn markdown_is_split_on_headings_with_section_paths() {
    let text = "Intro before any heading.\n\n\
                # Guide\n\nWelcome.\n\n\
                ## Installation\n\nPick one.\n\n\
                ### From source\n\nClone and build.\n\n\
                ### From crates.io ###\n\nRun cargo install.\n\n\
                ## Usage\n\nRun it.\n\n\
                Setext title\n============\n\nUnder setext.\n\n\
                Sub title\n---------\n\nUnder the sub title.\n";
    // A chunk size large enough for the whole document: sections still never mix.
    let chunks = md(text, 1000);
    assert_eq!(
        texts(text, &chunks),
        [
            "Intro before any heading.",
            "# Guide\n\nWelcome.",
            "## Installation\n\nPick one.",
            "### From source\n\nClone and build.",
            "### From crates.io ###\n\nRun cargo install.",
            "## Usage\n\nRun it.",
            "Setext title\n============\n\nUnder setext.",
            "Sub title\n---------\n\nUnder the sub title.",
        ]
    );
    assert_eq!(
        sections(&chunks),
        [
            "",
            "Guide",
            "Guide > Installation",
            "Guide > Installation > From source",
            "Guide > Installation > From crates.io",
            "Guide > Usage",
            "Setext title",
            "Setext title > Sub title",
        ]
    );
}

#[test]
fn headings_inside_code_are_not_headings() {
    let text = "# Setup\n\nRun:\n\n```sh\n# install the tool\ncargo install x\n\n# then run it\nx --help\n```\n\n    # indented code\n    more\n\nDone.\n";
    let chunks = md(text, 1000);
    assert_eq!(chunks.len(), 1, "{:?}", texts(text, &chunks));
    assert_eq!(chunks[0].section_path(), "Setup");
}

#[test]
fn rst_is_split_on_section_titles() {
    let text = "=========\nThe Guide\n=========\n\nIntro.\n\n\
                Installation\n------------\n\nPick one.\n\n\
                From source\n~~~~~~~~~~~\n\nClone it::\n\n    git clone x\n    cd x\n\n\
                Usage\n-----\n\nRun it.\n\n\
                .. code-block:: sh\n\n   x --help\n";
    let chunks = chunk_text(text, Format::Rst, &splitter(1000, 0));
    assert_eq!(
        texts(text, &chunks),
        [
            "=========\nThe Guide\n=========\n\nIntro.",
            "Installation\n------------\n\nPick one.",
            "From source\n~~~~~~~~~~~\n\nClone it::\n\n    git clone x\n    cd x",
            "Usage\n-----\n\nRun it.\n\n.. code-block:: sh\n\n   x --help",
        ]
    );
    assert_eq!(
        sections(&chunks),
        [
            "The Guide",
            "The Guide > Installation",
            "The Guide > Installation > From source",
            "The Guide > Usage",
        ]
    );
}

#[test]
fn html_converted_text_is_split_on_its_headings() {
    // What HTML becomes: Markdown-style text with `#` headings, lists and tables.
    let text = "# Release notes\n\nThis page lists the changes.\n\n## Version 2.0\n\nBreaking changes:\n\n- The `--fast` flag is gone.\n- Config moved to `~/.config/tool`.\n\n| Option | Default |\n| --- | --- |\n| size | 10 |\n\n## Version 1.9\n\nBug fixes only.\n";
    let doc = Document::new("notes.html", text, Format::Markdown);
    let nodes = chunk(&doc, &splitter(1000, 0));
    let got: Vec<(&str, &str)> = nodes
        .iter()
        .map(|n| {
            (
                n.id.as_str(),
                n.metadata.get("section").and_then(|v| v.as_str()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("notes.html#1", "Release notes"),
            ("notes.html#2", "Release notes > Version 2.0"),
            ("notes.html#3", "Release notes > Version 1.9"),
        ]
    );
    assert!(
        nodes[1]
            .text
            .starts_with("## Version 2.0\n\nBreaking changes:\n\n- The")
    );
    assert!(nodes[1].text.ends_with("| size | 10 |"));
}

#[test]
fn plain_text_release_headers_are_sections() {
    // A GNU NEWS outline, a release line, and bash's rule-and-paragraph headers.
    let text = "Toolbox NEWS                    -*- outline -*-\n\n\
                * Noteworthy changes in release 9.1 (2022-04-15) [stable]\n\n\
                ** Bug fixes\n\n  chmod -R works again.\n\n\
                * Noteworthy changes in release 9.0 (2021-09-24) [stable]\n\n\
                ** New features\n\n  date prints weeks.\n\n\
                Version 2.0 (2020-01-01)\n\nA release line.\n\n\
                -------------------------------------------------------------------------------\n\
                This is a terse description of the new features added to shell-4.0 since\n\
                the release of shell-3.2.  As always, read the manual.\n\n\
                b. There is a new shell option: `starglob'.\n";
    let chunks = chunk_text(text, Format::Plain, &splitter(16, 0));
    let paths = sections(&chunks);
    assert!(
        paths.contains(
            &"Noteworthy changes in release 9.1 (2022-04-15) [stable] > Bug fixes".to_string()
        ),
        "{paths:?}"
    );
    assert!(
        paths.contains(
            &"Noteworthy changes in release 9.0 (2021-09-24) [stable] > New features".to_string()
        ),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"Version 2.0 (2020-01-01)".to_string()),
        "{paths:?}"
    );
    let shell = "This is a terse description of the new features added to shell-4.0 since the release of shell-3.2.";
    let last = chunks.last().unwrap();
    assert_eq!(last.section_path(), shell);
    assert!(last.text(text).contains("starglob"));
    // Nothing is lost, and a list item naming a version is no heading.
    let item = "Changes:\n\n* When using Python 2, version 2.7 is now required. Python 2.6\n  support ended.\n";
    let chunks = chunk_text(item, Format::Plain, &splitter(64, 0));
    assert_no_sections(&chunks);
    // A paragraph after a rule naming a version but no release is no heading.
    let readme = "Intro.\n\n----------------------------------------\n\"make check\" failure on IRIX 6.5\n\nSome text.\n";
    let chunks = chunk_text(readme, Format::Plain, &splitter(64, 0));
    assert_no_sections(&chunks);
}

#[test]
fn a_long_section_is_split_and_every_part_keeps_the_path() {
    let paragraphs: Vec<String> = (0..6).map(|i| words(i * 20, i * 20 + 20) + ".").collect();
    let text = format!("# Big\n\n{}\n\n# Next\n\nShort.\n", paragraphs.join("\n\n"));
    let chunks = md(&text, 70);
    assert!(chunks.len() >= 3, "{:?}", texts(&text, &chunks));
    let (big, next) = chunks.split_at(chunks.len() - 1);
    assert!(big.iter().all(|c| c.section_path() == "Big"));
    assert_eq!(next[0].section_path(), "Next");
    assert_eq!(next[0].text(&text), "# Next\n\nShort.");
    // The heading line is kept at the start of the section's first chunk.
    assert!(big[0].text(&text).starts_with("# Big\n\nw0 w1"));
    // Paragraphs that fit are whole: every chunk ends at a paragraph's end.
    for c in big {
        assert!(c.text(&text).ends_with('.'), "{:?}", c.text(&text));
        assert!(c.tokens <= 70);
    }
}

#[test]
fn a_heading_keeps_the_start_of_a_paragraph_too_long_to_sit_beside_it() {
    let text = format!("## A rather long heading for this\n\n{}\n", words(0, 60));
    let chunks = md(&text, 40);
    assert!(
        chunks[0]
            .text(&text)
            .starts_with("## A rather long heading for this\n\nw0 w1"),
        "{:?}",
        texts(&text, &chunks)
    );
    assert!(chunks.iter().all(|c| c.tokens <= 40));
}

// ---------------------------------------------------------------------------------------
// Code blocks and lists

/// Fails the test unless chunking `text` keeps `piece` whole in one chunk where the plain
/// token splitter (the same sizes) cuts it.
#[track_caller]
fn assert_kept_whole(text: &str, format: Format, splitter: &TokenTextSplitter, piece: &str) {
    let got = texts(text, &chunk_text(text, format, splitter));
    assert!(
        got.iter().any(|t| t.contains(piece)),
        "{piece:?} is in one chunk: {got:#?}"
    );
    let cut = splitter.split_text(text);
    assert!(
        cut.iter().all(|t| !t.contains(piece)),
        "the test needs {piece:?} the token splitter would cut"
    );
}

/// Fails the test if any chunk has a section path (a line was taken for a heading).
#[track_caller]
fn assert_no_sections(chunks: &[TextChunk]) {
    let found = sections(chunks);
    assert!(found.iter().all(String::is_empty), "{found:?}");
}

/// `n` lines of Rust, one statement each (`let v0 = compute(0);` ...).
fn code_lines(n: usize) -> String {
    let lines: Vec<String> = (0..n)
        .map(|i| format!("let v{i} = compute({i});"))
        .collect();
    lines.join("\n")
}

#[test]
fn a_code_block_that_fits_is_never_split() {
    let code = code_lines(12);
    let block = format!("```rust\n{code}\n\n// still inside the fence\n```");
    let lead = words(0, 40);
    let text = format!("{lead}\n\n{block}\n\n{}\n", words(40, 50));
    let splitter = splitter(150, 0);
    let (block_tokens, lead_tokens) = (cl100k().count(&block), cl100k().count(&lead));
    assert!(
        block_tokens < 150 && block_tokens + lead_tokens > 150,
        "{block_tokens} {lead_tokens}"
    );
    assert_kept_whole(&text, Format::Markdown, &splitter, &block);
    // Tildes too.
    let tilde = block.replace("```rust", "~~~").replace("```", "~~~");
    let text = format!("{lead}\n\n{tilde}\n");
    let chunks = chunk_text(&text, Format::Markdown, &splitter);
    assert!(texts(&text, &chunks).iter().any(|t| t.contains(&tilde)));
}

#[test]
fn a_code_block_too_long_for_a_chunk_is_cut_at_lines() {
    let code = code_lines(60);
    let text = format!("# Code\n\n```rust\n{code}\n```\n");
    let chunks = md(&text, 100);
    assert!(chunks.len() > 2);
    for c in &chunks {
        assert!(c.tokens <= 100);
        let t = c.text(&text);
        // Cut at line breaks: every chunk holds whole lines.
        assert!(
            t.ends_with(';') || t.ends_with("```"),
            "{t:?} ends mid-line"
        );
        assert_eq!(c.section_path(), "Code");
    }
}

#[test]
fn a_list_stays_with_its_lead_in() {
    // RBASH-like plain text: a lead-in paragraph, then an indented list after a blank line.
    let intro = format!(
        "{} with the exception that the following are disallowed:",
        words(0, 25)
    );
    let items: Vec<String> = (0..6)
        .map(|i| format!("   * Item {i} about {}.", words(i * 5, i * 5 + 5)))
        .collect();
    let list = items.join("\n");
    let text = format!(
        "{}\n\n{intro}\n\n{list}\n\nAfter the list.\n",
        words(100, 140)
    );
    let splitter = splitter(170, 0);
    let together = format!("{intro}\n\n{list}");
    assert_kept_whole(&text, Format::Plain, &splitter, &together);

    // Markdown, the list right under the lead-in.
    let text = format!(
        "# Rules\n\n{}\n\n{intro}\n- one {}\n- two\n  continued\n- three\n\nLater text.\n",
        words(100, 160),
        words(0, 10)
    );
    let chunks = md(&text, 100);
    let got = texts(&text, &chunks);
    assert!(
        got.iter()
            .any(|t| t.starts_with(&intro) && t.contains("- three")),
        "{got:#?}"
    );
}

#[test]
fn a_long_list_is_cut_between_items_after_its_lead_in() {
    let items: Vec<String> = (0..20)
        .map(|i| format!("- item {i}: {}", words(i * 8, i * 8 + 8)))
        .collect();
    let text = format!(
        "{}\n\nthe following are disallowed:\n\n{}\n",
        words(500, 520),
        items.join("\n")
    );
    let chunks = md(&text, 80);
    let got = texts(&text, &chunks);
    // The lead-in is followed by the first item in its chunk.
    let lead_chunk = got.iter().find(|t| t.contains("disallowed:")).unwrap();
    assert!(
        lead_chunk.ends_with(&format!("disallowed:\n\n{}", items[0])),
        "{got:#?}"
    );
    // Every chunk of the list is whole items.
    for t in got.iter().filter(|t| t.contains("- item")) {
        assert!(t.ends_with(|c: char| c.is_ascii_digit()), "{t:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Plain text

#[test]
fn plain_paragraphs_are_packed_greedily_and_kept_whole() {
    let paragraphs: Vec<String> = (0..7).map(|i| words(i * 12, i * 12 + 12) + ".").collect();
    let text = paragraphs.join("\n\n");
    let p_tokens = cl100k().count(&paragraphs[0]);
    // Room for three paragraphs (and the blank lines between them), not four.
    let size = 3 * p_tokens + 6;
    assert!(4 * p_tokens > size);
    let chunks = chunk_text(&text, Format::Plain, &splitter(size, 0));
    let got = texts(&text, &chunks);
    assert_eq!(
        got,
        [
            paragraphs[0..3].join("\n\n"),
            paragraphs[3..6].join("\n\n"),
            paragraphs[6].clone(),
        ]
    );
    // Markdown headings mean nothing in plain text.
    let text = "# not a heading\n\nbody\n";
    let chunks = chunk_text(text, Format::Plain, &splitter(100, 0));
    assert_eq!(texts(text, &chunks), ["# not a heading\n\nbody"]);
    assert_eq!(chunks[0].section_path(), "");
}

#[test]
fn empty_and_whitespace_text_give_no_chunk() {
    for format in [Format::Plain, Format::Markdown, Format::Rst] {
        assert!(chunk_text("", format, &splitter(10, 0)).is_empty());
        assert!(chunk_text(" \n\n\t \n", format, &splitter(10, 0)).is_empty());
    }
}

// ---------------------------------------------------------------------------------------
// Nodes

#[test]
fn nodes_have_ids_file_path_section_and_hidden_chunk_numbers() {
    let doc = Document::new(
        "docs/guide.md",
        "Preface.\n\n# Install\n\nFrom source:\n\n```sh\nmake\n```\n",
        Format::Markdown,
    );
    let nodes = chunk(&doc, &splitter(100, 0));
    let ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["docs/guide.md#1", "docs/guide.md#2"]);
    assert_eq!(nodes[0].llm_text(), "file_path: docs/guide.md\n\nPreface.");
    assert_eq!(
        nodes[1].llm_text(),
        "file_path: docs/guide.md\nsection: Install\n\n# Install\n\nFrom source:\n\n```sh\nmake\n```"
    );
    assert_eq!(nodes[1].metadata["chunk"], 2);
    assert_eq!(nodes[1].excluded_llm_metadata_keys, ["chunk"]);
    let keys: Vec<&str> = nodes[1].metadata.keys().map(String::as_str).collect();
    assert_eq!(keys, ["file_path", "section", "chunk"]);
    assert!(nodes.iter().all(|n: &Node| n.score.is_none()));
}

// ---------------------------------------------------------------------------------------
// Properties: nothing lost or reordered, the limit kept

/// Lines biased to the structures the chunker reads (and their edge cases).
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,8}( [a-zA-Z0-9.,]{1,10}){0,12}",
        1 => "[a-z ]{0,30}:",
        1 => "",
        1 => "  ",
        1 => "#{1,7} [A-Za-z ]{0,12}#{0,2}",
        1 => "(=|-|~|\\^){2,12}",
        1 => "(```|~~~)[a-z]{0,4}",
        1 => " {0,5}([-*+]|[0-9]{1,3}[.)]|#\\.) [a-z ]{0,30}",
        1 => "(    |\t| {1,3})[a-z(){};= ]{0,30}",
        1 => "\\.\\. [a-z-]{1,10}:: ?[a-z]{0,6}",
        1 => "[\\PC]{1,20}",
        1 => "[ \t]*\r?",
    ]
}

fn doc_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(line(), 0..60).prop_map(|lines| lines.join("\n"))
}

fn format() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::Plain),
        Just(Format::Markdown),
        Just(Format::Rst)
    ]
}

fn non_ws(s: &str) -> Vec<char> {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether `needle` is a subsequence of `hay`.
fn is_subsequence(needle: &[char], hay: &[char]) -> bool {
    let mut it = hay.iter();
    needle.iter().all(|c| it.any(|h| h == c))
}

fn check(text: &str, format: Format, splitter: &TokenTextSplitter) -> Result<(), TestCaseError> {
    let chunks = chunk_text(text, format, splitter);
    let size = splitter.chunk_size();
    let mut joined = Vec::new();
    let mut prev_start = 0;
    for c in &chunks {
        let t = c.text(text);
        prop_assert_eq!(text.get(c.start..c.end), Some(t));
        prop_assert!(!t.trim().is_empty(), "empty chunk");
        prop_assert_eq!(t, t.trim(), "chunks are trimmed");
        let counted = splitter.tokenizer().count(t);
        prop_assert_eq!(c.tokens, counted, "tokens are exact");
        prop_assert!(counted <= size, "{} tokens > {}: {:?}", counted, size, t);
        prop_assert!(c.start >= prev_start, "chunks are in order");
        prev_start = c.start;
        joined.extend(non_ws(t));
    }
    let all = non_ws(text);
    if splitter.chunk_overlap() == 0 {
        // Without overlap: exactly the input's characters, in order.
        prop_assert_eq!(joined, all);
    } else {
        prop_assert!(is_subsequence(&all, &joined), "text lost or reordered");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
    ))]

    #[test]
    fn nothing_is_lost_and_the_limit_holds(
        text in doc_text(),
        format in format(),
        size in 8usize..80,
        overlap_pick in 0usize..3,
    ) {
        let overlap = [0, 3, 10][overlap_pick].min(size);
        check(&text, format, &splitter(size, overlap))?;
    }

    #[test]
    fn the_limit_holds_with_a_non_additive_tokenizer(
        text in doc_text(),
        format in format(),
        size in 8usize..60,
    ) {
        let splitter = TokenTextSplitter::new(size, 0, std::sync::Arc::new(LumpyTokenizer)).unwrap();
        check(&text, format, &splitter)?;
    }
}

// ---------------------------------------------------------------------------------------
// Real files

/// Prints the chunks of the files named in `CHUNK_FILES` (comma-separated), with
/// `CHUNK_SIZE` tokens (default 256).
#[test]
#[ignore = "prints the chunks of real files named in CHUNK_FILES"]
fn print_chunks_of_real_files() {
    let size = std::env::var("CHUNK_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let splitter = splitter(size, 20);
    for path in std::env::var("CHUNK_FILES").unwrap_or_default().split(',') {
        if path.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let format = match path.rsplit('.').next() {
            Some("md" | "markdown") => Format::Markdown,
            Some("rst") => Format::Rst,
            _ => Format::Plain,
        };
        let nodes = chunk(&Document::new(path, text.as_str(), format), &splitter);
        check(&text, format, &splitter).unwrap();
        println!(
            "===== {path}: {} chunks of at most {size} tokens",
            nodes.len()
        );
        for n in &nodes {
            let tokens = splitter.tokenizer().count(&n.text);
            println!("----- {} ({tokens} tokens)\n{}\n", n.id, n.llm_text());
        }
    }
}
