//! Unit tests of the markup-aware sentence splitter.

use super::sentences::{Kind, Sentence, parse};

/// The sentences, headings aside (they are candidates only for questions about titles).
fn texts(text: &str) -> Vec<String> {
    parse(text)
        .sentences
        .into_iter()
        .filter(|s| s.kind != Kind::Heading)
        .map(|s| s.text)
        .collect()
}

fn prose(text: &str) -> Vec<String> {
    parse(text)
        .sentences
        .into_iter()
        .filter(|s| s.kind != Kind::Code && s.kind != Kind::Heading)
        .map(|s| s.text)
        .collect()
}

fn kinds(text: &str) -> Vec<(Kind, String)> {
    parse(text)
        .sentences
        .into_iter()
        .filter(|s| s.kind != Kind::Heading)
        .map(|s: Sentence| (s.kind, s.text))
        .collect()
}

#[test]
fn rst_and_setext_headings_are_skipped_and_not_glued() {
    let text = "=========\nThe Title\n=========\n\nSection\n-------\nBody text starts here.\n\n\
                Setext heading\n==============\nMore text.\n\nSub\n~~~\nLast.";
    assert_eq!(
        texts(text),
        vec!["Body text starts here.", "More text.", "Last."]
    );
}

#[test]
fn fences_hold_across_blank_lines() {
    let text = "Before.\n\n```rust\nfn main() {\n\n    // A comment. With sentences.\n}\n```\n\n\
                After.\n\n~~~\nOne.\n\nTwo.\n~~~\nEnd.";
    let k = kinds(text);
    let prose: Vec<&str> = k
        .iter()
        .filter(|(k, _)| *k != Kind::Code)
        .map(|(_, t)| t.as_str())
        .collect();
    assert_eq!(prose, vec!["Before.", "After.", "End."]);
    assert!(k.contains(&(Kind::Code, "// A comment. With sentences.".to_string())));
    assert!(k.contains(&(Kind::Code, "Two.".to_string())));
}

#[test]
fn indented_blocks_are_code_lists_or_prose() {
    // Code after a paragraph (Markdown's indented code block).
    let text = "Run the tool:\n\n    tool --all ./data\n    tool --check\n\nDone.";
    assert_eq!(prose(text), vec!["Run the tool:", "Done."]);
    // Short word lines after a lead-in: a list.
    let text =
        "The package provides:\n\n    a parser for the format\n    a pretty printer\n\nDone.";
    let p = parse(text);
    assert_eq!(p.sentences.first().map(|s| s.items), Some(2));
    // An indented paragraph of prose (plain-text documents) stays prose.
    let text = "Intro.\n\n    This whole paragraph is indented by four spaces, as some plain\n    \
                text documents do, and it reads as ordinary sentences.\n";
    assert_eq!(
        prose(text),
        vec![
            "Intro.",
            "This whole paragraph is indented by four spaces, as some plain text documents \
             do, and it reads as ordinary sentences."
        ]
    );
    // Short lines indented under a colon, no blank line: a list too.
    let text = "Options:\n  fast mode for quick checks\n  slow mode for full checks\nThe end.";
    let p = parse(text);
    assert_eq!(p.sentences.first().map(|s| s.items), Some(2), "{p:?}");
}

#[test]
fn rst_literal_blocks_and_directives() {
    let text = "Install it with::\n\n   pip install thing\n\nThen read on. ::\n\n   more code\n\n\
                .. code:: python\n\n   print('x')\n\n.. image:: logo.png\n   :alt: Logo text\n\n\
                .. _target:\n\n.. note:: Mind the gap.\n\n   Second note sentence.\n\nBack.";
    assert_eq!(
        prose(text),
        vec![
            "Install it with:",
            "Then read on.",
            "Mind the gap.",
            "Second note sentence.",
            "Back."
        ]
    );
    let code: Vec<String> = kinds(text)
        .into_iter()
        .filter(|(k, _)| *k == Kind::Code)
        .map(|(_, t)| t)
        .collect();
    assert_eq!(code, vec!["pip install thing", "more code", "print('x')"]);
}

#[test]
fn list_items_continue_and_nest() {
    let text = "It offers these:\n\n- one item that wraps\n  onto a second line\n- two\n  - nested\n\n  \
                A further paragraph of two.\n- three\n\nAfter.";
    let k = kinds(text);
    assert_eq!(
        k,
        vec![
            (Kind::Prose, "It offers these:".to_string()),
            (
                Kind::Item { depth: 0 },
                "one item that wraps onto a second line".to_string()
            ),
            (Kind::Item { depth: 0 }, "two".to_string()),
            (
                Kind::Item { depth: 1 },
                "nested A further paragraph of two.".to_string()
            ),
            (Kind::Item { depth: 0 }, "three".to_string()),
            (Kind::Prose, "After.".to_string()),
        ]
    );
    assert_eq!(parse(text).sentences.first().map(|s| s.items), Some(4));
    // A list after a paragraph without a colon has no lead-in.
    let p = parse("Plain paragraph.\n\n- a thing\n- another");
    assert!(p.sentences.iter().all(|s| s.lead.is_none() && s.items == 0));
}

#[test]
fn html_comments_tags_and_badges() {
    let text = "<!--\nA hidden comment. Never a sentence.\n-->\n<p align=\"center\">\n  \
                <img src=\"logo.png\">\n</p>\n\n\
                [![CI](https://ci/badge.svg)](https://ci) [![Docs](https://d/b.svg)](https://d)\n\n\
                [Home](https://x.org) | [Docs](https://x.org/docs)\n\n\
                Real <b>text</b> with a [link](https://x.org).\n\n[docs]: https://x.org/docs";
    assert_eq!(texts(text), vec!["Real text with a link."]);
}

#[test]
fn tables_keep_rows_with_their_headers() {
    // Issue 23: a row with short cells holds facts too (`Linux | GCC >= 10.1`); each cell
    // after its column's header, empty cells left out.
    let text = "| Key | Meaning | Note |\n| --- | --- | --- |\n| `a` | all | |\n\
                | `b` | Show the hidden files too, including backups. | new |";
    assert_eq!(
        kinds(text),
        vec![
            (Kind::Row, "Key: `a`; Meaning: all".to_string()),
            (
                Kind::Row,
                "Key: `b`; Meaning: Show the hidden files too, including backups.; Note: new"
                    .to_string()
            )
        ]
    );
    // Without a header row, only rows with prose.
    let text = "| `a` | all |\n| `b` | Show the hidden files too, including backups. |";
    assert_eq!(
        kinds(text),
        vec![(
            Kind::Row,
            "`b`; Show the hidden files too, including backups.".to_string()
        )]
    );
}

#[test]
fn labels_headings_and_notes() {
    let text = "[1]\nfile_path: news.txt\n\n* Release 2.0\n\n** Fixes\n\n  Fixed the frobnicator.\n  \
                [bug introduced in 1.4] Later text here.\n\n\
                [2]\nfile_path: news.txt\n\n  Continued piece.\n\n\
                [3]\nfile_path: other.txt\n\nOther file.";
    let p = parse(text);
    assert!(p.labelled);
    let got: Vec<(Option<u32>, Option<usize>, &str)> = p
        .sentences
        .iter()
        .filter(|s| s.kind != Kind::Heading)
        .map(|s| (s.source, s.heading, s.text.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Some(1),
                Some(0),
                "Fixed the frobnicator. [bug introduced in 1.4]"
            ),
            (Some(1), Some(0), "Later text here."),
            // The same file continued: its release heading carries over.
            (Some(2), Some(0), "Continued piece."),
            (Some(3), None, "Other file."),
        ]
    );
    assert_eq!(p.headings, vec!["Release 2.0"]);
}

#[test]
fn titles_come_from_headings_and_section_metadata() {
    let text = "## Mirror care\n\nIt is cleaned monthly. Second one here.\n\n\
                [2]\nfile_path: a.md\nsection: Guide > Weather limits\n\nShort.\n\nClose the dome at once.";
    let p = parse(text);
    let titles: Vec<Option<&str>> = p
        .sentences
        .iter()
        .filter(|s| s.kind != Kind::Heading)
        .map(|s| s.title.as_deref())
        .collect();
    // A sentence of under four words does not take the title: the next one does.
    assert_eq!(
        titles,
        vec![Some("Mirror care"), None, None, Some("Weather limits")]
    );
    // The heading itself is a sentence of its own kind.
    assert_eq!(p.sentences.first().map(|s| s.kind), Some(Kind::Heading));
}

#[test]
fn inline_code_is_never_split() {
    assert_eq!(
        texts("Convert it with `yq -y . < in.json`. Then stop."),
        vec!["Convert it with `yq -y . < in.json`.", "Then stop."]
    );
}
