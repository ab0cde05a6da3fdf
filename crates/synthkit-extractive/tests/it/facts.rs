//! The offline answerer finds facts where documents keep them (issue 23): in titles and
//! headings (Markdown, reStructuredText, GNU NEWS outlines, plain-text release
//! paragraphs), in table cells and in code blocks when the question asks for them; it
//! answers from one place rather than padding with sentences from elsewhere, and says
//! plainly when it found no answer. The fixtures under `tests/fixtures/folders/` are
//! written for these tests in the shape of the real files (a GNU NEWS file, a CPython-style
//! README, bash's NEWS, Node's BUILDING.md, a Debian FAQ, mdBook pages).

use std::path::Path;
use std::sync::Arc;

use synthkit::text::{BpeTokenizer, TokenTextSplitter};
use synthkit::{Node, ResponseMode, Synthesizer};
use synthkit_documents::chunk::chunk;
use synthkit_documents::{ReadOptions, Reader};
use synthkit_extractive::ExtractiveModel;

use crate::common::fixture_path;

/// The nodes of fixture `name`, read and chunked as the CLI does, as if found at `path`.
fn nodes(name: &str, path: &str) -> Vec<Node> {
    let file = fixture_path("folders", name);
    let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let read = Reader::new(ReadOptions::new())
        .read_bytes(Path::new(path), bytes)
        .unwrap();
    let splitter = TokenTextSplitter::new(1024, 20, BpeTokenizer::cl100k_base().shared()).unwrap();
    chunk(&read.document, &splitter)
}

/// The CLI's answer (compact, sources numbered, markers hidden) over `nodes`.
fn answer(question: &str, nodes: Vec<Node>) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let synth = Synthesizer::builder(Arc::new(ExtractiveModel::new()))
        .mode(ResponseMode::Compact)
        .citations(true)
        .citation_markers(false)
        .build()
        .unwrap();
    rt.block_on(synth.synthesize(question, nodes)).unwrap().text
}

/// Every fixture, as found in a documentation folder.
fn folder() -> Vec<Node> {
    [
        ("coreutils-NEWS", "doc/toolbox/NEWS"),
        ("README.rst", "doc/snake3.11/README.rst"),
        ("shell-NEWS", "doc/shell/NEWS"),
        ("BUILDING.md", "doc/widget/BUILDING.md"),
        ("README.Debian", "doc/shell/README.Debian"),
        ("operators.html", "book/appendix-02-operators.html"),
        ("ch16-00-concurrency.html", "book/ch16-00-concurrency.html"),
    ]
    .iter()
    .flat_map(|(name, path)| nodes(name, path))
    .collect()
}

/// The latest release is the highest release heading; a title names the version; a
/// heading answers a question about titles.
#[test]
fn titles_and_headings_answer_with_themselves() {
    let folder = folder();
    for (question, expected) in [
        (
            "What is the latest toolbox release?",
            "Noteworthy changes in release 9.1 (2022-04-15) [stable]",
        ),
        (
            "Which Snake version is this?",
            "This is Snake version 3.11.2",
        ),
        ("What is the title of chapter 16?", "Fearless Concurrency"),
    ] {
        assert_eq!(answer(question, folder.clone()), expected, "{question}");
    }
}

#[test]
fn a_release_paragraph_heads_what_follows_it() {
    let a = answer("Which shell version added the starglob option?", folder());
    assert!(a.contains("shell-4.0"), "{a}");
    assert!(a.contains("starglob"), "{a}");
    assert!(!a.contains("shell-5.2"), "{a}");
    let a = answer(
        "Which toolbox release added the --debug option to date?",
        folder(),
    );
    assert!(a.starts_with("Noteworthy changes in release 8.26"), "{a}");
    assert!(a.contains("date now accepts the --debug option"), "{a}");
}

#[test]
fn a_table_cell_answers_with_its_headers() {
    let a = answer(
        "Which GCC version is needed to build Widget on Linux?",
        folder(),
    );
    assert_eq!(a, "Operating System: Linux; Compiler Versions: GCC >= 10.1");
    let a = answer("What does the ? operator do?", folder());
    assert!(a.contains("Error propagation"), "{a}");
}

#[test]
fn code_answers_a_question_asking_for_a_command() {
    let a = answer("What command verifies the Widget build?", folder());
    assert_eq!(a, "To verify the build:\n    make test-only");
    // Asked about, not for: the sentence, not its code.
    let a = answer("Why verify the Widget build?", folder());
    assert!(!a.contains("make test-only"), "{a}");
}

#[test]
fn a_faq_question_is_answered_by_what_follows_it() {
    let a = answer(
        "How do I get rid of annoying beeps for ambiguous completions?",
        folder(),
    );
    assert!(a.contains("set show-all-if-ambiguous on"), "{a}");
}

#[test]
fn an_answer_is_not_padded_from_elsewhere() {
    // The FAQ entry that answers, under its list's lead-in; not the other entries.
    let a = answer("When does the shell read /etc/shell.shellrc?", folder());
    assert!(
        a.contains("The Debian version of the shell reads /etc/shell.shellrc before ~/.shellrc for interactive non-login shells."),
        "{a}"
    );
    assert!(!a.contains("beeps") && !a.contains("symlink"), "{a}");
    assert!(!a.contains("toolbox") && !a.contains("Snake"), "{a}");
}

#[test]
fn no_answer_is_said_about_the_answer() {
    let a = answer("Who won the 1998 football World Cup?", folder());
    assert_eq!(a, ExtractiveModel::NOT_ANSWERED);
    assert!(a.starts_with("(no answer found"), "{a}");
}

#[test]
fn a_marker_after_a_quoted_terminator_stays_with_its_sentence() {
    // An earlier answer re-read in a refine step keeps the marker of each sentence.
    let model = ExtractiveModel::new();
    let existing = "The separator is \".\" [2]. Fixed a crash in the parser ([#6635]) [3].";
    let context = "[4]\nThe mirror is cleaned every month.";
    let a = model.extract("What is the separator?", Some(existing), context, 256);
    assert_eq!(a.text, "The separator is \".\" [2].");
    assert_eq!(a.sources, vec![2]);
    let a = model.extract(
        "Which crash in the parser was fixed?",
        Some(existing),
        context,
        256,
    );
    assert_eq!(a.text, "Fixed a crash in the parser ([#6635]) [3].");
    assert_eq!(a.sources, vec![3]);
}

#[test]
fn sentences_of_a_marked_window_keep_its_marker_in_a_refine_step() {
    // A long sentence shown as a window ends with `… [1]`: re-read, it is several
    // sentences, and each keeps the source.
    let model = ExtractiveModel::new();
    let existing = "The shell hashes the location of commands. When a command moves, the table \
                    still records the old location. For … [1]";
    let context = "[2]\nParking is free on weekends.";
    let a = model.extract(
        "Why does the shell record the old location of a command?",
        Some(existing),
        context,
        256,
    );
    assert!(a.text.contains("[1]"), "{}", a.text);
    assert_eq!(a.sources, vec![1]);
}
