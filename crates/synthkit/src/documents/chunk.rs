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
//!    - Plain text: paragraphs (blank-line separated) and lists.
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
//! use synthkit::documents::{Document, Format, chunk::chunk};
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

use crate::Node;
use crate::documents::{Document, Format};
use crate::text::{ChunkCursor, SharedTokenizer, TokenTextSplitter};

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
    /// first heading and in plain text).
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

// ---------------------------------------------------------------------------------------
// Lines

/// One line: its byte range without the line break, and its text.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    start: usize,
    end: usize,
    text: &'a str,
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for raw in text.split_inclusive('\n') {
        let body = raw.strip_suffix('\n').unwrap_or(raw);
        let body = body.strip_suffix('\r').unwrap_or(body);
        out.push(Line {
            start,
            end: start + body.len(),
            text: body,
        });
        start += raw.len();
    }
    out
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// The width of the leading whitespace (a tab goes to the next multiple of 4).
fn indent(line: &str) -> usize {
    let mut width = 0;
    for c in line.chars() {
        match c {
            ' ' => width += 1,
            '\t' => width += 4 - width % 4,
            _ => break,
        }
    }
    width
}

/// A list item: `-`, `*`, `+`, `1.`, `1)` or RST's `#.`, followed by whitespace (or the
/// end of the line for numbers).
fn is_list_item(line: &str) -> bool {
    let t = line.trim_start();
    let mut chars = t.chars();
    match chars.next() {
        Some('-' | '*' | '+') => chars.next().is_some_and(char::is_whitespace),
        Some('#') => t.starts_with("#.") && t.get(2..).is_some_and(starts_with_space),
        Some(c) if c.is_ascii_digit() => {
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            let rest = t.get(digits..).unwrap_or_default();
            digits <= 9
                && (rest.starts_with('.') || rest.starts_with(')'))
                && rest.get(1..).is_some_and(starts_with_space)
        }
        _ => false,
    }
}

fn starts_with_space(s: &str) -> bool {
    s.is_empty() || s.starts_with(char::is_whitespace)
}

/// A Markdown code fence opening: its character and length.
fn fence_open(line: &str) -> Option<(char, usize)> {
    if indent(line) > 3 {
        return None;
    }
    let t = line.trim_start();
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.chars().take_while(|x| *x == c).count();
    let info = t.get(n..).unwrap_or_default();
    (n >= 3 && !(c == '`' && info.contains('`'))).then_some((c, n))
}

fn fence_close(line: &str, c: char, n: usize) -> bool {
    if indent(line) > 3 {
        return false;
    }
    let t = line.trim();
    t.chars().count() >= n && t.chars().all(|x| x == c)
}

/// A Markdown ATX heading: its level and title.
fn atx_heading(line: &str) -> Option<(usize, String)> {
    if indent(line) > 3 {
        return None;
    }
    let t = line.trim_start();
    let level = t.bytes().take_while(|b| *b == b'#').count();
    let rest = t.get(level..)?;
    if !(1..=6).contains(&level) || !starts_with_space(rest) {
        return None;
    }
    let title = rest.trim();
    let closed = title.trim_end_matches('#');
    let title = if closed.is_empty() || closed.ends_with(char::is_whitespace) {
        closed.trim_end()
    } else {
        title
    };
    Some((level, title.to_string()))
}

/// A Markdown setext underline: level 1 (`===`) or 2 (`---`).
fn setext_underline(line: &str) -> Option<usize> {
    if indent(line) > 3 {
        return None;
    }
    let t = line.trim();
    if !t.is_empty() && t.chars().all(|c| c == '=') {
        Some(1)
    } else if !t.is_empty() && t.chars().all(|c| c == '-') {
        Some(2)
    } else {
        None
    }
}

/// A reStructuredText adornment line: one punctuation character repeated (at least
/// twice), from the first column. Its character and length.
fn adornment(line: &str) -> Option<(char, usize)> {
    let t = line.trim_end();
    let c = t.chars().next().filter(char::is_ascii_punctuation)?;
    let n = t.chars().count();
    (n >= 2 && t.chars().all(|x| x == c)).then_some((c, n))
}

/// A heading's title as plain text: images and badges dropped, links reduced to their
/// text, HTML tags dropped, entities decoded (`&nbsp;` and the like as spaces), and
/// whitespace collapsed.
fn clean_title(title: &str) -> String {
    let mut out = String::new();
    let mut rest = title;
    while let Some(c) = rest.chars().next() {
        let tail = rest.get(c.len_utf8()..).unwrap_or_default();
        if c == '!'
            && let Some((_, after)) = bracketed(tail, false)
        {
            rest = after;
            continue;
        }
        if c == '['
            && let Some((text, after)) = bracketed(rest, true)
        {
            out.push_str(&clean_title(text));
            rest = after;
            continue;
        }
        if c == '<'
            && let Some(close) = tail.find('>')
            && is_html_tag(tail.get(..close).unwrap_or_default())
        {
            out.push(' ');
            rest = tail.get(close + 1..).unwrap_or_default();
            continue;
        }
        if c == '&'
            && let Some(semi) = tail.find(';').filter(|&i| (2..=8).contains(&i))
            && let Some(name) = tail
                .get(..semi)
                .filter(|n| n.chars().all(|x| x.is_ascii_alphanumeric() || x == '#'))
        {
            out.push(match name {
                "amp" => '&',
                "lt" => '<',
                "gt" => '>',
                "quot" => '"',
                "apos" | "#39" => '\'',
                _ => ' ',
            });
            rest = tail.get(semi + 1..).unwrap_or_default();
            continue;
        }
        out.push(c);
        rest = tail;
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A `[text]` at the start of `s` (brackets may nest) followed by a `(url)` or `[ref]`
/// target (required when `target`): the text and what follows the target.
fn bracketed(s: &str, target: bool) -> Option<(&str, &str)> {
    if !s.starts_with('[') {
        return None;
    }
    let mut depth = 0usize;
    let close = s.char_indices().find_map(|(i, ch)| {
        match ch {
            '[' => depth += 1,
            ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        None
    })?;
    let text = s.get(1..close)?;
    let after = s.get(close + 1..)?;
    for (open, end) in [('(', ')'), ('[', ']')] {
        if after.starts_with(open)
            && let Some(j) = after.find(end)
        {
            return Some((text, after.get(j + 1..)?));
        }
    }
    (!target).then_some((text, after))
}

/// The inside of `<...>` is an HTML tag (not `Vec<T>`).
fn is_html_tag(inner: &str) -> bool {
    const TAGS: &[&str] = &[
        "a", "b", "br", "code", "div", "em", "i", "img", "kbd", "p", "picture", "small", "source",
        "span", "strong", "sub", "sup",
    ];
    let inner = inner.strip_prefix('/').unwrap_or(inner);
    let name: String = inner
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    inner.starts_with('!') || TAGS.contains(&name.as_str())
}

// ---------------------------------------------------------------------------------------
// Blocks

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Heading {
        level: usize,
        title: String,
    },
    Paragraph,
    /// A list, with the byte offsets where its top-level items start.
    List {
        items: Vec<usize>,
    },
    Code,
}

/// A block: its byte range, trimmed of whitespace, and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Block {
    start: usize,
    end: usize,
    kind: Kind,
}

/// Trims whitespace off the range `start..end` of `text`; `None` when nothing is left.
fn trim_range(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let slice = text.get(start..end)?;
    let head = slice.trim_start();
    let s = start + (slice.len() - head.len());
    let e = s + head.trim_end().len();
    (s < e).then_some((s, e))
}

struct Parser<'a> {
    text: &'a str,
    lines: Vec<Line<'a>>,
    blocks: Vec<Block>,
    /// RST title styles (character, overlined) in order of first appearance.
    rst_styles: Vec<(char, bool)>,
}

impl Parser<'_> {
    /// Adds the block made of lines `from..to`.
    fn push(&mut self, from: usize, to: usize, kind: Kind) {
        if to <= from {
            return;
        }
        let (Some(first), Some(last)) =
            (self.lines.get(from), self.lines.get(to.saturating_sub(1)))
        else {
            return;
        };
        if let Some((start, end)) = trim_range(self.text, first.start, last.end) {
            self.blocks.push(Block { start, end, kind });
        }
    }

    fn line(&self, k: usize) -> Option<&str> {
        self.lines.get(k).map(|l| l.text)
    }

    /// The end of the block opened by line `k` and continued by the lines after it that
    /// are indented at least `min`, with the blank lines between them.
    fn indented_end(&self, k: usize, min: usize) -> usize {
        let mut last = k;
        let mut e = k + 1;
        while let Some(l) = self.line(e) {
            if is_blank(l) {
            } else if indent(l) >= min {
                last = e;
            } else {
                break;
            }
            e += 1;
        }
        last + 1
    }

    /// The end of the list starting at line `k`, and the lines of its top-level items.
    fn list_end(&self, k: usize, md: bool) -> (usize, Vec<usize>) {
        let base = self.line(k).map(indent).unwrap_or_default();
        let mut items = vec![k];
        let mut last = k;
        let mut e = k + 1;
        while let Some(l) = self.line(e) {
            if is_blank(l) {
                e += 1;
                continue;
            }
            let ind = indent(l);
            let after_blank = e > last + 1;
            if is_list_item(l) && ind <= base {
                items.push(e);
            } else if ind > base {
                // A continuation line, a nested list or code inside an item.
            } else if after_blank || (md && (atx_heading(l).is_some() || fence_open(l).is_some())) {
                break;
            }
            // Otherwise a lazy continuation of the item's paragraph.
            last = e;
            e += 1;
        }
        (last + 1, items)
    }

    /// A reStructuredText section title starting at line `k`: its title, style and the
    /// line after it.
    fn rst_title(&self, k: usize) -> Option<(String, (char, bool), usize)> {
        let l0 = self.line(k)?;
        if let Some((c, _)) = adornment(l0) {
            let l1 = self.line(k + 1)?;
            let (c2, _) = adornment(self.line(k + 2)?)?;
            return (c2 == c && !is_blank(l1) && adornment(l1).is_none())
                .then(|| (l1.trim().to_string(), (c, true), k + 3));
        }
        if indent(l0) > 0 {
            return None;
        }
        let (c, n) = adornment(self.line(k + 1)?)?;
        let title = l0.trim();
        (n >= title.chars().count() || n >= 4).then(|| (title.to_string(), (c, false), k + 2))
    }

    fn rst_level(&mut self, style: (char, bool)) -> usize {
        match self.rst_styles.iter().position(|s| *s == style) {
            Some(i) => i + 1,
            None => {
                self.rst_styles.push(style);
                self.rst_styles.len()
            }
        }
    }

    /// A YAML front matter block at the start of a Markdown text: the line after it.
    fn front_matter(&self) -> Option<usize> {
        if self.line(0)?.trim_end() != "---" {
            return None;
        }
        (1..self.lines.len())
            .find(|&k| {
                self.line(k)
                    .is_some_and(|l| matches!(l.trim_end(), "---" | "..."))
            })
            .map(|k| k + 1)
    }
}

/// Reads `text` as blocks of `format`.
fn parse(text: &str, format: Format) -> Vec<Block> {
    let md = format == Format::Markdown;
    let rst = format == Format::Rst;
    let mut p = Parser {
        text,
        lines: split_lines(text),
        blocks: Vec::new(),
        rst_styles: Vec::new(),
    };
    let mut k = 0;
    if md && let Some(e) = p.front_matter() {
        p.push(0, e, Kind::Code);
        k = e;
    }
    'blocks: while let Some(line) = p.line(k) {
        if is_blank(line) {
            k += 1;
            continue;
        }
        if md {
            if let Some((c, n)) = fence_open(line) {
                let mut e = k + 1;
                while let Some(l) = p.line(e) {
                    e += 1;
                    if fence_close(l, c, n) {
                        break;
                    }
                }
                p.push(k, e, Kind::Code);
                k = e;
                continue;
            }
            if let Some((level, title)) = atx_heading(line) {
                p.push(k, k + 1, Kind::Heading { level, title });
                k += 1;
                continue;
            }
            if indent(line) >= 4 {
                let e = p.indented_end(k, 4);
                p.push(k, e, Kind::Code);
                k = e;
                continue;
            }
        }
        if rst {
            if let Some((title, style, e)) = p.rst_title(k) {
                let level = p.rst_level(style);
                p.push(k, e, Kind::Heading { level, title });
                k = e;
                continue;
            }
            // A directive (`.. code-block:: rust`, `.. note::`) with its indented body, or
            // an indented block (a literal block, a quote).
            if line.starts_with(".. ") || (indent(line) >= 1 && !is_list_item(line)) {
                let e = p.indented_end(k, 1);
                p.push(k, e, Kind::Code);
                k = e;
                continue;
            }
        }
        if is_list_item(line) {
            let (e, item_lines) = p.list_end(k, md);
            let items = item_lines
                .iter()
                .filter_map(|&i| p.lines.get(i).map(|l| l.start))
                .collect();
            p.push(k, e, Kind::List { items });
            k = e;
            continue;
        }
        // A paragraph: up to a blank line, or a block that interrupts it.
        let mut e = k + 1;
        while let Some(l) = p.line(e) {
            if is_blank(l) || is_list_item(l) {
                break;
            }
            if md {
                if let Some(level) = setext_underline(l) {
                    // The line above is a heading; the lines before it a paragraph.
                    let title = p.line(e - 1).unwrap_or_default().trim().to_string();
                    p.push(k, e - 1, Kind::Paragraph);
                    p.push(e - 1, e + 1, Kind::Heading { level, title });
                    k = e + 1;
                    continue 'blocks;
                }
                if fence_open(l).is_some() || atx_heading(l).is_some() {
                    break;
                }
            }
            e += 1;
        }
        p.push(k, e, Kind::Paragraph);
        k = e;
    }
    p.blocks
}

/// A section: its heading path and its blocks (its heading first).
#[derive(Debug)]
struct Section {
    path: Vec<String>,
    blocks: Vec<Block>,
}

/// Groups blocks into sections at each heading.
fn sections(blocks: Vec<Block>) -> Vec<Section> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut out = vec![Section {
        path: Vec::new(),
        blocks: Vec::new(),
    }];
    for block in blocks {
        if let Kind::Heading { level, title } = &block.kind {
            while stack.last().is_some_and(|(l, _)| l >= level) {
                stack.pop();
            }
            stack.push((*level, clean_title(title)));
            out.push(Section {
                path: stack.iter().map(|(_, t)| t.clone()).collect(),
                blocks: Vec::new(),
            });
        }
        if let Some(section) = out.last_mut() {
            section.blocks.push(block);
        }
    }
    out.retain(|s| !s.blocks.is_empty());
    out
}

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
        assert!(is_list_item("- a"));
        assert!(is_list_item("   * Changing"));
        assert!(is_list_item("12. twelve"));
        assert!(is_list_item("3) three"));
        assert!(is_list_item("#. auto"));
        assert!(!is_list_item("**bold**"));
        assert!(!is_list_item("---"));
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
