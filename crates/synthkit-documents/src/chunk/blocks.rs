//! Reading a document's text as blocks (headings, paragraphs, lists, code) and grouping
//! them into sections by heading: Markdown (and HTML converted to it), reStructuredText
//! and plain text. The packing of blocks into chunks is in the parent module.

use super::*;
use synthkit::text::plain;

// ---------------------------------------------------------------------------------------
// Lines

/// One line: its byte range without the line break, and its text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Line<'a> {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) text: &'a str,
}

pub(super) fn split_lines(text: &str) -> Vec<Line<'_>> {
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

pub(super) fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// The width of the leading whitespace (a tab goes to the next multiple of 4).
pub(super) fn indent(line: &str) -> usize {
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
pub(super) fn is_list_item(line: &str) -> bool {
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

pub(super) fn starts_with_space(s: &str) -> bool {
    s.is_empty() || s.starts_with(char::is_whitespace)
}

/// A Markdown code fence opening: its character and length.
pub(super) fn fence_open(line: &str) -> Option<(char, usize)> {
    if indent(line) > 3 {
        return None;
    }
    let t = line.trim_start();
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.chars().take_while(|x| *x == c).count();
    let info = t.get(n..).unwrap_or_default();
    (n >= 3 && !(c == '`' && info.contains('`'))).then_some((c, n))
}

pub(super) fn fence_close(line: &str, c: char, n: usize) -> bool {
    if indent(line) > 3 {
        return false;
    }
    let t = line.trim();
    t.chars().count() >= n && t.chars().all(|x| x == c)
}

/// A Markdown ATX heading: its level and title.
pub(super) fn atx_heading(line: &str) -> Option<(usize, String)> {
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
pub(super) fn setext_underline(line: &str) -> Option<usize> {
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
pub(super) fn adornment(line: &str) -> Option<(char, usize)> {
    let t = line.trim_end();
    let c = t.chars().next().filter(char::is_ascii_punctuation)?;
    let n = t.chars().count();
    (n >= 2 && t.chars().all(|x| x == c)).then_some((c, n))
}

/// A heading's title as plain text: images and badges dropped, links reduced to their
/// text, HTML tags dropped, entities decoded (`&nbsp;` and the like as spaces), and
/// whitespace collapsed.
pub(super) fn clean_title(title: &str) -> String {
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
pub(super) fn bracketed(s: &str, target: bool) -> Option<(&str, &str)> {
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
pub(super) fn is_html_tag(inner: &str) -> bool {
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
pub(super) enum Kind {
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
pub(super) struct Block {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) kind: Kind,
}

/// Trims whitespace off the range `start..end` of `text`; `None` when nothing is left.
pub(super) fn trim_range(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let slice = text.get(start..end)?;
    let head = slice.trim_start();
    let s = start + (slice.len() - head.len());
    let e = s + head.trim_end().len();
    (s < e).then_some((s, e))
}

pub(super) struct Parser<'a> {
    pub(super) text: &'a str,
    pub(super) lines: Vec<Line<'a>>,
    pub(super) blocks: Vec<Block>,
    /// RST title styles (character, overlined) in order of first appearance.
    pub(super) rst_styles: Vec<(char, bool)>,
}

impl Parser<'_> {
    /// Adds the block made of lines `from..to`.
    pub(super) fn push(&mut self, from: usize, to: usize, kind: Kind) {
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

    pub(super) fn line(&self, k: usize) -> Option<&str> {
        self.lines.get(k).map(|l| l.text)
    }

    /// The end of the block opened by line `k` and continued by the lines after it that
    /// are indented at least `min`, with the blank lines between them.
    pub(super) fn indented_end(&self, k: usize, min: usize) -> usize {
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
    pub(super) fn list_end(&self, k: usize, md: bool) -> (usize, Vec<usize>) {
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
    pub(super) fn rst_title(&self, k: usize) -> Option<(String, (char, bool), usize)> {
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

    pub(super) fn rst_level(&mut self, style: (char, bool)) -> usize {
        match self.rst_styles.iter().position(|s| *s == style) {
            Some(i) => i + 1,
            None => {
                self.rst_styles.push(style);
                self.rst_styles.len()
            }
        }
    }

    /// A YAML front matter block at the start of a Markdown text: the line after it.
    pub(super) fn front_matter(&self) -> Option<usize> {
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

impl Parser<'_> {
    /// A plain-text release header at line `k` (see [`synthkit::text::plain`]): the lines of the
    /// heading block (after the rule line at `k`, for a release paragraph), its level and
    /// title.
    fn release_header(&self, k: usize, outline: bool) -> Option<((usize, usize), usize, String)> {
        let line = self.line(k)?;
        let t = line.trim();
        let blank_before = k == 0 || self.line(k - 1).is_some_and(is_blank);
        let blank_after = self.line(k + 1).is_none_or(is_blank);
        if let Some((level, title)) = plain::outline_heading(line) {
            // A heading is a line of its own (a list item's first line is not).
            let versioned = level == 1 && plain::has_version(title) && !title.ends_with('.');
            return (blank_before && blank_after && (versioned || (level >= 2 && outline)))
                .then(|| ((k, k + 1), level, title.to_string()));
        }
        if blank_before && blank_after && plain::is_version_line(t) {
            return Some(((k, k + 1), 1, t.to_string()));
        }
        if !plain::is_rule(line) {
            return None;
        }
        let mut n = k + 1;
        while self.line(n).is_some_and(is_blank) {
            n += 1;
        }
        let mut e = n;
        while self.line(e).is_some_and(|l| !is_blank(l)) {
            e += 1;
        }
        let first = self.line(n)?;
        let paragraph: Vec<&str> = (n..e).filter_map(|i| self.line(i)).collect();
        let title = plain::release_paragraph_title(first, &paragraph.join("\n"))?;
        Some(((n, e), 1, title))
    }
}

/// Reads `text` as blocks of `format`.
pub(super) fn parse(text: &str, format: Format) -> Vec<Block> {
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
    let plain = format == Format::Plain;
    // A level-1 outline heading was seen: `** Bug fixes` lines are headings under it.
    let mut outline = false;
    'blocks: while let Some(line) = p.line(k) {
        if is_blank(line) {
            k += 1;
            continue;
        }
        if plain && let Some(((from, to), level, title)) = p.release_header(k, outline) {
            outline |= line.starts_with('*');
            // A rule line, then the paragraph heading the release: the rule ends the
            // section before.
            p.push(k, from, Kind::Paragraph);
            p.push(from, to, Kind::Heading { level, title });
            k = to;
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
pub(super) struct Section {
    pub(super) path: Vec<String>,
    pub(super) blocks: Vec<Block>,
}

/// Groups blocks into sections at each heading.
pub(super) fn sections(blocks: Vec<Block>) -> Vec<Section> {
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
