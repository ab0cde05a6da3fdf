//! Offline answers worth reading: the extractive backend over documents shaped like real
//! ones (Debian docs, crate READMEs, reStructuredText guides, HTML converted to
//! Markdown-style text, GNU NEWS files). The fixtures under `tests/fixtures/extractive/`
//! are written for these tests, in the structure of the real files.

use std::path::PathBuf;

use synthkit::text::{BpeTokenizer, Tokenizer};
use synthkit_documents::html::html_to_markdown;
use synthkit_extractive::{Extraction, ExtractiveModel};

use crate::common::{fixture_path, repo_path};

fn fixture(name: &str) -> String {
    let path = fixture_path("extractive", name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The repository's sample documents, in name order, each after its metadata line.
fn sample_docs() -> String {
    let dir = repo_path("examples/docs");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            format!(
                "file_path: {}\n\n{}",
                p.display(),
                std::fs::read_to_string(p).unwrap()
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn ask(context: &str, question: &str, budget: usize) -> Extraction {
    ExtractiveModel::new().extract(question, None, context, budget)
}

/// Fails the test unless the answer `a` contains `part` (and shows the answer when not).
#[track_caller]
fn assert_has(a: &Extraction, part: &str) {
    assert!(a.text.contains(part), "{}", a.text);
}

/// Fails the test unless the answer to `question` from `context` (a 256-token budget) is
/// `expected`.
#[track_caller]
fn assert_answer(context: &str, question: &str, expected: &str) {
    assert_eq!(ask(context, question, 256).text, expected, "{question}");
}

fn tokens(text: &str) -> usize {
    BpeTokenizer::cl100k_base().count(text)
}

#[test]
fn a_list_is_kept_with_its_lead_in() {
    let doc = fixture("restricted.txt");
    let a = ask(&doc, "What does the sandboxed editor disallow?", 512);
    assert!(
        a.text.starts_with(
            "A sandboxed editor behaves like 'quill' except that the following are \
             disallowed or ignored:\n- Opening files outside the directory"
        ),
        "{}",
        a.text
    );
    // Every item, each on its own line, wrapped lines joined.
    assert!(
        a.text
            .contains("\n- Turning off sandboxed mode with 'set nosandbox' or ':unsafe on'."),
        "{}",
        a.text
    );
    assert_eq!(a.text.matches("\n- ").count(), 7, "{}", a.text);
    // The heading is no sentence.
    assert!(!a.text.contains("4.2 The Sandboxed Editor"), "{}", a.text);
    assert!(a.grounded);

    // A small budget: as many items as fit, then `- …`.
    let a = ask(&doc, "What does the sandboxed editor disallow?", 60);
    assert!(tokens(&a.text) <= 60, "{}", a.text);
    assert_has(&a, ":\n- Opening files");
    assert!(a.text.ends_with("\n- …"), "{}", a.text);
}

#[test]
fn a_list_announced_by_the_sentence_before_its_lead_in() {
    // HTML converted as the CLI reads it: "Keep these rules in mind" refers back.
    let doc = html_to_markdown(&fixture("options.html"));
    let a = ask(&doc, "What are the queue ownership rules?", 256);
    assert_has(
        &a,
        "First, let’s take a look at the queue ownership rules. Keep these rules in mind \
             as we work through the examples:\n- Each job in a queue has exactly one owner.\n\
             - A job can be handed to another owner only while it is paused.\n\
             - When the owner stops, its jobs are cancelled.",
    );
    // The code block's comment mentions the owner too, but code is no prose answer.
    assert!(!a.text.contains("//"), "{}", a.text);
}

#[test]
fn code_is_never_picked_for_a_prose_question() {
    let doc = fixture("readme.md");
    let a = ask(&doc, "How is the prediction computed?", 256);
    assert_eq!(
        a.text,
        "The prediction is computed from up to 37 harmonic constituents, so it stays within \
         ten centimetres of the published tables for most harbours."
    );
    // Indented and fenced code (blank lines inside the fence included) never answers…
    let a = ask(&doc, "How are the harbour constants shipped?", 256);
    assert!(!a.text.contains("cargo run"), "{}", a.text);
    assert_has(&a, "The harbour constants ship separately.");
    // A question only code answers is not answered from prose.
    let a = ask(&doc, "Which region do I fetch the constants for?", 256);
    assert_eq!(a.text, ExtractiveModel::NOT_ANSWERED);
    // …unless the question names code.
    let a = ask(&doc, "What does --region do?", 256);
    assert_has(&a, "--region north-sea");
}

#[test]
fn badges_links_and_html_lines_are_skipped() {
    let doc = fixture("readme.md");
    for question in [
        "Summarize the text.",
        "What are the docs and crates of tidewater?",
    ] {
        let a = ask(&doc, question, 256);
        for noise in [
            "shields",
            "badge",
            "Crates.io",
            "Docs.rs",
            "](",
            "<img",
            "<p",
            "|",
        ] {
            assert!(!a.text.contains(noise), "{question}: {noise} in {}", a.text);
        }
    }
    // Inline markup is cleaned: bold markers and link targets go, link text stays.
    let a = ask(&doc, "What does Tidewater predict?", 256);
    assert!(
        a.text.starts_with(
            "Tidewater predicts tide heights for any harbour from its harmonic constants."
        ),
        "{}",
        a.text
    );
}

#[test]
fn rst_headings_directives_and_literal_blocks() {
    let doc = fixture("guide.rst");
    // The underlined title is not glued to the sentence after it.
    assert_answer(
        &doc,
        "What does Lantern need to run?",
        "Lantern runs on any machine with Python 3.9 or later.",
    );
    assert_answer(
        &doc,
        "Where is the configuration file read from?",
        "The configuration file is read from `~/.config/lantern/lantern.toml`.",
    );
    // Roles and references show their text; `::` shows as `:`; images and targets never
    // show; a literal block shows only under the sentence announcing it, for a question
    // asking how (issue 23).
    let a = ask(
        &doc,
        "How do I install lantern with pip and configure the port?",
        256,
    );
    for noise in ["badge", ":target:", "_installation", "::", "port = 8080"] {
        assert!(!a.text.contains(noise), "{noise} in {}", a.text);
    }
    assert_has(
        &a,
        "Install it from the package index with the usual tool:\n    pip install lantern",
    );
    let a = ask(&doc, "What does Lantern read its configuration from?", 256);
    assert!(!a.text.contains("pip install"), "{}", a.text);
    let a = ask(&doc, "What happens when the port is already in use?", 256);
    assert_eq!(
        a.text,
        "The server refuses to start when the port is already in use; it does not pick \
         another port on its own."
    );
    let a = ask(&doc, "How do I see every request in the log?", 256);
    assert_has(&a, "as described in the logging chapter.");
}

#[test]
fn html_tables_answer_with_their_rows_and_headers() {
    let doc = html_to_markdown(&fixture("options.html"));
    assert!(
        doc.contains("| --- | --- |"),
        "the converter's table: {doc}"
    );
    let a = ask(
        &doc,
        "Which option underlines the part of each line that decides its place?",
        256,
    );
    assert_eq!(
        a.text,
        "Option: `--debug`; Meaning: Underline the part of each line that decides its place in \
         the order, and warn about doubtful options."
    );
    // Rows of short cells hold facts too (issue 23), each cell after its header; separator
    // rows are no sentences.
    let a = ask(&doc, "What does reverse numeric order mean?", 256);
    assert!(!a.text.contains("---"), "{}", a.text);
}

#[test]
fn a_run_on_sentence_is_shown_as_a_window() {
    let filler = "and the committee went on to discuss the parking arrangements, the colour of \
                  the new curtains, the catering for the summer fair, the state of the gutters ";
    let mut sentence = String::from("At the meeting the members agreed on many things ");
    while tokens(&sentence) < 1000 {
        sentence.push_str(filler);
    }
    sentence.push_str(
        "and finally that the secondary mirror will be recoated by Halden Optics in March, \
         after which the meeting closed with thanks to the hosts.",
    );
    let doc = format!("{sentence}\n\nThe dome was painted in 2019.");
    let a = ask(&doc, "Who will recoat the secondary mirror?", 256);
    assert!(a.text.starts_with("… "), "{}", a.text);
    assert!(
        a.text
            .contains("the secondary mirror will be recoated by Halden Optics in March"),
        "{}",
        a.text
    );
    let words = a.text.split_whitespace().count();
    assert!(words <= 50, "{words} words: {}", a.text);
    // A budget smaller than the window: still the fact, cut to fit.
    let a = ask(&doc, "Who will recoat the secondary mirror?", 12);
    assert!(tokens(&a.text) <= 12, "{}", a.text);
    assert_has(&a, "secondary mirror will be recoated");
    assert!(a.truncated);
}

#[test]
fn a_weak_best_match_is_not_an_answer() {
    let docs = sample_docs();
    let a = ask(&docs, "Who won the 1998 FIFA World Cup?", 256);
    assert_eq!(a.text, ExtractiveModel::NOT_ANSWERED);
    assert!(!a.grounded);
    assert!(!a.satisfied(true));
    let a = ask(&docs, "How often is the primary mirror cleaned?", 256);
    assert_eq!(
        a.text,
        "The primary mirror is cleaned with carbon dioxide snow every three months, in the \
         first week of March, June, September and December."
    );
    assert!(a.grounded && a.satisfied(true));
    // A question without terms is never weak: a summary.
    let a = ask(&docs, "Summarize the documents", 256);
    assert!(a.grounded && !a.text.is_empty(), "{}", a.text);
    assert_ne!(a.text, ExtractiveModel::NOT_ANSWERED);
    // One common word is not enough…
    let a = ask(&docs, "What is the speed of sound in Paris?", 256);
    assert!(a.query_matched, "\"speed\" matches");
    assert_eq!(a.text, ExtractiveModel::NOT_ANSWERED);
    // …unless the threshold (an option) says so: 0 answers whenever a word matches.
    let lenient = ExtractiveModel::new().with_min_coverage(0.0);
    let a = lenient.extract("What is the speed of sound in Paris?", None, &docs, 256);
    assert!(a.grounded && a.text.contains("speed"), "{}", a.text);
}

#[test]
fn which_release_shows_the_release_heading() {
    let doc = fixture("news.txt");
    let a = ask(&doc, "Which ferrule release added the --trace option?", 256);
    assert_has(
        &a,
        "Noteworthy changes in release 2.4 (2019-02-11) [stable]: ferrule now accepts the \
             --trace option",
    );
    // The outline headings are no sentences.
    assert!(!a.text.contains("** "), "{}", a.text);
    assert!(!a.text.contains("-*-"), "{}", a.text);
    // One release answers: not the later fix to the option, whose provenance note names
    // the release that added it.
    assert!(!a.text.contains("3.2"), "{}", a.text);

    // In a refine chain (the CLI's compact mode over a long NEWS file), an earlier answer
    // naming the later fix gives way to the note announcing the option.
    let (newer, older) = doc.split_at(doc.find("* Noteworthy changes in release 2.4").unwrap());
    let first = ask(
        newer,
        "Which ferrule release added the --trace option?",
        256,
    );
    assert!(first.text.contains("3.2"), "{}", first.text);
    let refined = ExtractiveModel::new().extract(
        "Which ferrule release added the --trace option?",
        Some(&first.text),
        older,
        256,
    );
    assert!(
        refined.text.contains("release 2.4") && !refined.text.contains("3.2"),
        "{}",
        refined.text
    );
}

#[test]
fn labels_give_markers_and_sources() {
    let context = "[1]\nfile_path: a.md\n\nThe dome opens at dusk.\n\n[2]\nThe mirror is cleaned \
                   every six months.";
    let a = ask(context, "How often is the mirror cleaned?", 256);
    assert_eq!(a.text, "The mirror is cleaned every six months [2].");
    assert_eq!(a.sources, vec![2]);
    // A piece of a source continued later starts with its label again; a list unit gets
    // its marker on the lead-in.
    let context = "[3]\nThe sandbox disallows the following:\n\n- Opening files.\n- Running \
                   shell commands.\n\n[1]\nThe sandbox starts with the -s flag.";
    let a = ask(context, "What does the sandbox disallow?", 256);
    assert_eq!(
        a.text,
        "The sandbox disallows the following [3]:\n- Opening files.\n- Running shell commands."
    );
    assert_eq!(a.sources, vec![3]);
    // Label lines are never sentences; without labels, no markers.
    let a = ask("[7]\n", "anything at all", 256);
    assert_eq!(a.text, "");
    let a = ask("The mirror is cleaned every six months.", "mirror", 256);
    assert_eq!(a.text, "The mirror is cleaned every six months.");
    assert!(a.sources.is_empty());
}

#[test]
fn refine_keeps_existing_markers() {
    let m = ExtractiveModel::new();
    let existing = "The mirror is cleaned every six months [2].";
    // Nothing new on the question: the existing answer, markers and all.
    let a = m.extract(
        "How often is the mirror cleaned?",
        Some(existing),
        "[3]\nParking is free on weekends.",
        256,
    );
    assert_eq!(a.text, existing);
    assert_eq!(a.sources, vec![2]);
    // A new sentence joins it; the old keeps its marker, the new gets its own, and the
    // same sentence with another marker is a repeat.
    let a = m.with_min_relative_score(0.0).extract(
        "How often is the mirror cleaned?",
        Some(existing),
        "[3]\nThe mirror is cleaned every six months.\n\nThe mirror is cleaned with snow.",
        256,
    );
    assert_eq!(
        a.text,
        "The mirror is cleaned every six months [2]. The mirror is cleaned with snow [3]."
    );
    assert_eq!(a.sources, vec![2, 3]);
}

#[test]
fn not_answered_is_no_answer_in_later_steps() {
    let m = ExtractiveModel::new();
    // A refine step after an unanswered first prompt.
    let a = m.extract(
        "How often is the mirror cleaned?",
        Some(ExtractiveModel::NOT_ANSWERED),
        "The mirror is cleaned every six months.",
        256,
    );
    assert_eq!(a.text, "The mirror is cleaned every six months.");
    // tree_summarize's upper level: earlier answers, some unanswered.
    let context = format!(
        "{}\n\nThe mirror is cleaned every six months [2].\n\n{}",
        ExtractiveModel::NOT_ANSWERED,
        ExtractiveModel::NOT_ANSWERED
    );
    let a = m.extract("How often is the mirror cleaned?", None, &context, 256);
    assert_eq!(a.text, "The mirror is cleaned every six months [2].");
    assert_eq!(a.sources, vec![2]);
    // Only unanswered ones: still unanswered.
    let context = format!("{0}\n\n{0}", ExtractiveModel::NOT_ANSWERED);
    let a = m.extract("How often is the mirror cleaned?", None, &context, 256);
    assert_eq!(a.text, ExtractiveModel::NOT_ANSWERED);
    assert!(!a.grounded);
}

#[test]
fn an_item_answers_under_its_lead_in() {
    let doc = "## Supported platforms\n\n- Linux on x86-64 and ARM64.\n- macOS 12 or later.\n\
               - Windows 10 with WSL.\n\n## History\n\nThe project started as a weekend hack.";
    let a = ask(doc, "Which macOS is needed?", 256);
    assert_eq!(
        a.text,
        "Supported platforms:\n- …\n- macOS 12 or later.\n- …"
    );
    // With no room for the lead-in, the item alone.
    let a = ask(doc, "Which macOS is needed?", 8);
    assert_eq!(a.text, "macOS 12 or later.");
}

#[test]
fn a_sentence_announcing_code_answers_with_its_code_when_asked_how() {
    // Issue 23: the code a sentence announces is the answer to "How do I ...?"; asked
    // about something else, such a sentence never dangles with its colon.
    let doc = fixture("guide.rst");
    assert_answer(
        &doc,
        "How do I install it from the package index?",
        "Install it from the package index with the usual tool:\n    pip install lantern",
    );
    let a = ask(&doc, "Which package index tool is usual?", 256);
    assert!(!a.text.ends_with(':'), "{}", a.text);
    assert!(!a.text.contains("pip install"), "{}", a.text);
}

#[test]
fn what_is_x_prefers_the_sentence_defining_x() {
    let context = "[1]\nUnderstanding ownership takes time, and ownership shows up in every chapter.\n\
                   Taking ownership and returning ownership is tedious.\n\n\
                   [2]\nOwnership is a set of rules that govern how a program manages memory. \
                   Memory is freed when its owner goes away.";
    let a = ask(context, "What is ownership?", 256);
    assert!(
        a.text
            .starts_with("Ownership is a set of rules that govern how a program manages memory"),
        "{}",
        a.text
    );
    assert_eq!(a.sources, vec![2], "{}", a.text);
}

#[test]
fn a_sentence_pointing_below_answers_with_what_it_points_to() {
    // Issue 30: "Open the dome shutter only when all of the weather limits below are met."
    // matches every word of the question but holds none of the limits: the lead-in and
    // list under "## Weather limits" that it points to answer with it.
    let docs = sample_docs();
    let question = "What are the weather limits for opening the dome?";
    let a = ask(&docs, question, 256);
    for part in ["85 percent", "45 kilometres", "rain detector", "dew point"] {
        assert_has(&a, part);
    }
    assert!(tokens(&a.text) <= 256, "{}", a.text);
    // With little room, the limits come before the sentence pointing to them.
    let a = ask(&docs, question, 40);
    assert!(tokens(&a.text) <= 40, "{}", a.text);
    assert_has(&a, "The dome must be closed, or stay closed");
    assert!(!a.text.contains("below are met"), "{}", a.text);

    // The same file cut into two chunks between the pointer and its section.
    let chunked = "[1]\nfile_path: docs/nights.md\nsection: Nights > Before opening\n\n\
                   1. Check the weather station screen.\n\
                   2. Open the dome shutter only when all of the weather limits below are met.\n\n\
                   [2]\nfile_path: docs/nights.md\nsection: Nights > Weather limits\n\n\
                   The dome must be closed when any of these conditions holds:\n\n\
                   - the humidity is above 85 percent;\n\
                   - gusts exceed 45 km/h.\n";
    let a = ask(chunked, question, 256);
    assert_has(&a, "the humidity is above 85 percent");
    assert_eq!(a.sources, vec![1, 2], "{}", a.text);
}

#[test]
fn see_the_steps_below_answers_with_the_steps() {
    let doc = "# Logger guide\n\n\
               The logger runs on any Linux machine with Python 3.10 or newer.\n\n\
               To install the logger, see the steps below.\n\n\
               ## Steps\n\n\
               1. Download the archive from the releases page.\n\
               2. Unpack it into the opt folder.\n\
               3. Start the setup script as root.\n\n\
               ## Troubleshooting\n\n\
               If the setup script fails, read its log in the var folder.\n";
    assert_answer(
        doc,
        "How do I install the logger?",
        "To install the logger, see the steps below. Steps:\n\
         - Download the archive from the releases page.\n\
         - Unpack it into the opt folder.\n\
         - Start the setup script as root.",
    );
    // "below" naming a place or a quantity points nowhere.
    let doc = "The pump room is below the workshop.\n\n## Valves\n\nThe valves are red.";
    assert_answer(
        doc,
        "Where is the pump room?",
        "The pump room is below the workshop.",
    );
    // The pointing sentence is the only match and nothing follows it: it answers alone.
    let doc = "The pump room is in the basement.\n\n\
               Open the valve only when the pressure limits below are met.";
    assert_answer(
        doc,
        "When may the valve be opened?",
        "Open the valve only when the pressure limits below are met.",
    );
}
