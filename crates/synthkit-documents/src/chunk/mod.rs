//! Structure-aware chunks: a document is cut at its headings first, then packed into
//! chunks of whole blocks, each carrying its heading path.
//!
//! How a document's text becomes chunks:
//!
//! 1. **Blocks.** The text is read as blocks: headings, paragraphs, lists, code.
//!    - Markdown (also HTML converted to Markdown-style text): ATX headings (`## Title`),
//!      setext headings (a line underlined with `===` or `---`), fenced code (```` ``` ````
//!      or `~~~`, blank lines inside included), indented code (4 spaces or a tab), a YAML
//!      front matter block, lists (`-`, `*`, `+`, `1.`, `1)` items with their continuation
//!      lines), and paragraphs.
//!    - reStructuredText: section titles underlined, or over- and underlined, with a
//!      punctuation character (levels in order of first appearance, as docutils does),
//!      indented blocks (literal blocks, directive bodies, quotes) kept as code, lists and
//!      paragraphs.
//!    - Plain text: paragraphs (blank-line separated) and lists; release headers are
//!      headings (GNU NEWS `* Noteworthy changes in release 9.1` and `** Bug fixes`
//!      lines, a release line on its own such as `Version 1.2 (2020-01-01)` or a Debian
//!      changelog's `pkg (1.2-3) unstable; urgency=low`, and a paragraph naming a version
//!      right after a rule line, as bash's NEWS has), so a chunk of a NEWS file knows its
//!      release.
//! 2. **Sections.** Each heading starts a section that runs to the next heading. A section's
//!    heading path (`Installation > From source`) is the titles of the headings above it;
//!    text before the first heading has an empty path. Sections are chunked on their own:
//!    no chunk holds text of two sections.
//! 3. **Units.** A block that fits in a chunk is never split. A paragraph that ends with
//!    `:` (a lead-in, such as `the following are disallowed:` or reStructuredText's `::`)
//!    or an RST directive (`.. code-block:: rust`) is kept with the list or code block that
//!    follows when the two fit together; when they do not, the list is cut between its
//!    items and the lead-in goes only into a chunk that also takes the first item. A list
//!    too long for one chunk is cut between its items; a paragraph, item or code block too
//!    long for one chunk is cut by the [`TokenTextSplitter`] (code at line breaks first),
//!    with its overlap.
//! 4. **Packing.** Units are packed greedily into chunks of at most `chunk_size` tokens,
//!    counted exactly by the splitter's tokenizer on the chunk's final text. The heading
//!    line stays in the text of its section's first chunk; when the block after a heading
//!    is a paragraph or list that does not fit beside it, the block is cut so that its
//!    start does (a code block or a lead-in group that fits a chunk alone is kept whole,
//!    and the heading then has a chunk of its own).
//!
//! A chunk's text is a slice of the document: the blocks it holds with the whitespace
//! between them, as written. No text is lost: the chunk texts, read in order, hold every
//! non-whitespace character of the document in order (with an overlap of 0, exactly those
//! characters; with an overlap, some repeated). The only chunk that can pass the limit is
//! a single character that alone takes more tokens than the limit (as in the splitter).
//!
//! ```
//! use synthkit_documents::{Document, Format, chunk::chunk};
//! use synthkit::text::{BpeTokenizer, TokenTextSplitter};
//!
//! let splitter = TokenTextSplitter::new(64, 0, BpeTokenizer::cl100k_base().shared()).unwrap();
//! let doc = Document::new(
//!     "guide.md",
//!     "# Guide\n\nIntro.\n\n## Install\n\nRun:\n\n```sh\ncargo install guide\n```\n",
//!     Format::Markdown,
//! );
//! let nodes = chunk(&doc, &splitter);
//! assert_eq!(nodes.len(), 2);
//! assert_eq!(nodes[1].id, "guide.md#2");
//! assert_eq!(nodes[1].metadata["section"], "Guide > Install");
//! assert_eq!(
//!     nodes[1].llm_text(),
//!     "file_path: guide.md\nsection: Guide > Install\n\n## Install\n\nRun:\n\n```sh\ncargo install guide\n```"
//! );
//! ```

use crate::{Document, Format};
use synthkit::Node;
use synthkit::text::{ChunkCursor, SharedTokenizer, TokenTextSplitter};

/// What joins the titles of a heading path in the `section` metadata.
pub const SECTION_SEPARATOR: &str = " > ";

/// One chunk of a document's text: a slice of it, with its heading path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TextChunk {
    /// Byte offset of the chunk's first byte in the text (a char boundary).
    pub start: usize,
    /// Byte offset just past the chunk's last byte; the text is `&input[start..end]`.
    pub end: usize,
    /// The exact token count of the chunk text, by the splitter's tokenizer.
    pub tokens: usize,
    /// The titles of the headings above the chunk, outermost first (empty before the
    /// first heading, and in plain text without release headers).
    pub section: Vec<String>,
}

impl TextChunk {
    /// The chunk's text in `input`, the text it was cut from (empty if it does not fit).
    pub fn text<'a>(&self, input: &'a str) -> &'a str {
        input.get(self.start..self.end).unwrap_or_default()
    }

    /// The heading path as shown in the `section` metadata: the non-empty titles joined
    /// with [`SECTION_SEPARATOR`] (`Installation > From source`); empty when there is none.
    pub fn section_path(&self) -> String {
        self.section
            .iter()
            .map(String::as_str)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(SECTION_SEPARATOR)
    }
}

/// Cuts `doc` into nodes (see the [module documentation](self)).
///
/// Node `N` (from 1) has the id `{path}#{N}` and the metadata `file_path` (the path),
/// `section` (the heading path, when there is one) and `chunk` (`N`, hidden from the
/// model). Whitespace-only text gives no node.
pub fn chunk(doc: &Document, splitter: &TokenTextSplitter) -> Vec<Node> {
    chunk_nodes(
        &doc.path.display().to_string(),
        &doc.text,
        doc.format,
        splitter,
    )
}

/// [`chunk`] for a document held as parts: its path (as shown), text and format.
pub fn chunk_nodes(
    path: &str,
    text: &str,
    format: Format,
    splitter: &TokenTextSplitter,
) -> Vec<Node> {
    chunk_text(text, format, splitter)
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let n = i + 1;
            let mut node =
                Node::new(format!("{path}#{n}"), c.text(text)).with_metadata("file_path", path);
            let section = c.section_path();
            if !section.is_empty() {
                node = node.with_metadata("section", section);
            }
            node.with_metadata("chunk", n).exclude_from_llm("chunk")
        })
        .collect()
}

/// Cuts `text`, written in `format`, into chunks of at most `splitter.chunk_size()` tokens
/// (see the [module documentation](self)). Whitespace-only text gives no chunk.
pub fn chunk_text(text: &str, format: Format, splitter: &TokenTextSplitter) -> Vec<TextChunk> {
    let ctx = Ctx {
        text,
        splitter,
        tokenizer: splitter.tokenizer(),
        size: splitter.chunk_size().max(1),
    };
    let mut out = Vec::new();
    for section in sections(parse(text, format)) {
        let atoms = ctx.atoms(&section.blocks);
        ctx.pack(&atoms, &section.path, &mut out);
    }
    out
}

mod blocks;

use blocks::*;

// ---------------------------------------------------------------------------------------
// Atoms and packing

/// A piece of a section that is never cut: a whole block or group of blocks that fits
/// a chunk, a list item, or a splitter chunk of a block too long for one.
#[derive(Debug, Clone)]
struct Atom {
    start: usize,
    end: usize,
    /// Exact tokens of the atom's own text.
    tokens: usize,
    /// Tokens of the whitespace between the previous atom and this one.
    gap: usize,
    /// Goes into a chunk only together with the atom after it (a lead-in with the first
    /// item of its list), unless it starts the chunk.
    glue: bool,
}

/// The heading before a block: where it starts, so that "fits beside the heading" can be
/// counted.
type Head = Option<usize>;

struct Ctx<'a> {
    text: &'a str,
    splitter: &'a TokenTextSplitter,
    tokenizer: &'a SharedTokenizer,
    size: usize,
}

impl Ctx<'_> {
    /// The exact tokens of `start..end` when at most the chunk size.
    fn fits(&self, start: usize, end: usize) -> Option<usize> {
        let slice = self.text.get(start..end)?;
        self.tokenizer.count_till_limit(slice, self.size)
    }

    /// Tokens of `start..end`, whatever its size (0 for an empty or reversed range).
    fn count(&self, start: usize, end: usize) -> usize {
        self.text
            .get(start..end)
            .map_or(0, |s| self.tokenizer.count(s))
    }

    fn push_atom(&self, atoms: &mut Vec<Atom>, start: usize, end: usize, tokens: usize) {
        atoms.push(Atom {
            start,
            end,
            tokens,
            gap: 0,
            glue: false,
        });
    }

    /// The room a block right after a heading has in the heading's chunk, when enough
    /// is left to be worth cutting the block for.
    fn room_after(&self, head: Head, start: usize) -> Option<usize> {
        let used = self.count(head?, start);
        let room = self.size.saturating_sub(used);
        (room >= (self.size / 4).max(1)).then_some(room)
    }

    /// Cuts `start..end` with the splitter (code at line breaks first); the first piece
    /// has at most `first` tokens when given.
    fn pieces(
        &self,
        atoms: &mut Vec<Atom>,
        start: usize,
        end: usize,
        code: bool,
        first: Option<usize>,
    ) {
        let Some(slice) = self.text.get(start..end) else {
            return;
        };
        let mut cursor = if code {
            ChunkCursor::new(
                slice,
                "\n",
                &[" ".to_string()],
                SharedTokenizer::clone(self.tokenizer),
            )
        } else {
            self.splitter.cursor(slice)
        };
        let mut size = first.unwrap_or(self.size);
        let overlap = self.splitter.chunk_overlap();
        while let Some(c) = cursor.next_chunk(size, overlap) {
            self.push_atom(atoms, start + c.start, start + c.end, c.tokens);
            size = self.size;
        }
    }

    /// The atoms of one block. `head`: the start of the heading right before it.
    /// `by_items`: a list is cut into its items even when it fits (after a lead-in it
    /// does not fit beside).
    fn block(&self, atoms: &mut Vec<Atom>, block: &Block, head: Head, by_items: bool) {
        let (start, end) = (block.start, block.end);
        let beside_head = || !by_items && head.is_none_or(|h| self.fits(h, end).is_some());
        match &block.kind {
            Kind::Code => match self.fits(start, end) {
                Some(t) => self.push_atom(atoms, start, end, t),
                None => self.pieces(atoms, start, end, true, self.room_after(head, start)),
            },
            Kind::List { items } => match self.fits(start, end) {
                Some(t) if beside_head() => self.push_atom(atoms, start, end, t),
                _ => {
                    let ends = items.iter().skip(1).copied().chain(std::iter::once(end));
                    for (i, (&s, e)) in items.iter().zip(ends).enumerate() {
                        let Some((s, e)) = trim_range(self.text, s, e) else {
                            continue;
                        };
                        match self.fits(s, e) {
                            Some(t) => self.push_atom(atoms, s, e, t),
                            None => {
                                let first = if i == 0 {
                                    self.room_after(head, s)
                                } else {
                                    None
                                };
                                self.pieces(atoms, s, e, false, first);
                            }
                        }
                    }
                }
            },
            Kind::Paragraph | Kind::Heading { .. } => match self.fits(start, end) {
                Some(t) if beside_head() || self.room_after(head, start).is_none() => {
                    self.push_atom(atoms, start, end, t);
                }
                _ => self.pieces(atoms, start, end, false, self.room_after(head, start)),
            },
        }
    }

    /// The atoms of a section's blocks, with the whitespace between them counted.
    fn atoms(&self, blocks: &[Block]) -> Vec<Atom> {
        let mut atoms: Vec<Atom> = Vec::new();
        let mut i = 0;
        while let Some(block) = blocks.get(i) {
            let head = i
                .checked_sub(1)
                .and_then(|p| blocks.get(p))
                .filter(|b| matches!(b.kind, Kind::Heading { .. }))
                .map(|b| b.start);
            let first = atoms.len();
            match (&block.kind, blocks.get(i + 1)) {
                (Kind::Heading { .. }, _) => self.block(&mut atoms, block, None, false),
                (Kind::Paragraph, Some(next)) if self.leads_in(block, next) => {
                    match self.fits(block.start, next.end) {
                        Some(t) => self.push_atom(&mut atoms, block.start, next.end, t),
                        None => {
                            self.block(&mut atoms, block, head, false);
                            let made = atoms.len() > first;
                            if let Some(a) = atoms.last_mut().filter(|_| made) {
                                a.glue = true;
                            }
                            self.block(&mut atoms, next, None, true);
                        }
                    }
                    i += 2;
                    continue;
                }
                _ => self.block(&mut atoms, block, head, false),
            }
            i += 1;
        }
        let mut prev_end = None;
        for a in &mut atoms {
            a.gap = prev_end.map_or(0, |p| self.count(p, a.start));
            prev_end = Some(a.end);
        }
        atoms
    }

    /// A paragraph that introduces the block after it: a lead-in ending with `:` before a
    /// list or code, or an RST directive (`.. name::`) before its indented body.
    fn leads_in(&self, block: &Block, next: &Block) -> bool {
        let text = self.text.get(block.start..block.end).unwrap_or_default();
        match next.kind {
            Kind::List { .. } => text.ends_with(':'),
            Kind::Code => text.ends_with(':') || text.starts_with(".. "),
            _ => false,
        }
    }

    /// Packs a section's atoms greedily into chunks of at most the chunk size.
    fn pack(&self, atoms: &[Atom], path: &[String], out: &mut Vec<TextChunk>) {
        let mut i = 0;
        while let Some(first) = atoms.get(i) {
            // Take atoms while the estimate (sum of the parts) fits.
            let mut est = first.tokens;
            let mut j = i + 1;
            while let Some(a) = atoms.get(j) {
                let next = atoms.get(j + 1).filter(|_| a.glue);
                let with_next = next.map_or(0, |n| n.gap + n.tokens);
                if est + a.gap + a.tokens + with_next > self.size {
                    break;
                }
                est += a.gap + a.tokens;
                j += 1;
            }
            // Then count the chunk exactly, giving back atoms until it fits.
            loop {
                let end = atoms
                    .get(i..j)
                    .and_then(|run| run.iter().map(|a| a.end).max())
                    .unwrap_or(first.end);
                let exact = self.fits(first.start, end);
                if exact.is_none() && j > i + 1 {
                    j -= 1;
                    // A lead-in is not left at the end of a chunk without its list.
                    while j > i + 1 && atoms.get(j - 1).is_some_and(|a| a.glue) {
                        j -= 1;
                    }
                    continue;
                }
                out.push(TextChunk {
                    start: first.start,
                    end,
                    tokens: exact.unwrap_or_else(|| self.count(first.start, end)),
                    section: path.to_vec(),
                });
                break;
            }
            i = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_and_headings_are_recognised() {
        for (line, item) in [
            ("- a", true),
            ("   * Changing", true),
            ("12. twelve", true),
            ("3) three", true),
            ("#. auto", true),
            ("**bold**", false),
            ("---", false),
        ] {
            assert_eq!(is_list_item(line), item, "{line:?}");
        }
        assert_eq!(atx_heading("## Install ##"), Some((2, "Install".into())));
        assert_eq!(atx_heading("#hashtag"), None);
        assert_eq!(atx_heading("    # code"), None);
        assert_eq!(atx_heading("# C#"), Some((1, "C#".into())));
        assert_eq!(setext_underline("----"), Some(2));
        assert_eq!(adornment("~~~~~"), Some(('~', 5)));
        assert_eq!(adornment("=== ==="), None);
    }

    #[test]
    fn titles_are_cleaned_of_markup() {
        assert_eq!(
            clean_title("Serde &emsp; [![Build Status]][actions] [![Latest Version]](https://x)"),
            "Serde"
        );
        assert_eq!(
            clean_title("![logo](l.png) My [lib](https://x) <sup>beta</sup>"),
            "My lib beta"
        );
        assert_eq!(
            clean_title("Vec<T> and Option[T] &amp; more"),
            "Vec<T> and Option[T] & more"
        );
        assert_eq!(clean_title("  `serde_json`  "), "`serde_json`");
    }

    #[test]
    fn rst_levels_follow_first_appearance() {
        let text = "=====\nTitle\n=====\n\nA\n---\n\nx\n\nB\n---\n\nC\n~~~\n\ny\n";
        let blocks = parse(text, Format::Rst);
        let levels: Vec<_> = blocks
            .iter()
            .filter_map(|b| match &b.kind {
                Kind::Heading { level, title } => Some((*level, title.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(levels, [(1, "Title"), (2, "A"), (2, "B"), (3, "C")]);
    }
}
