//! Passages into sentences, markup-aware (Markdown, reStructuredText, HTML converted to
//! Markdown-style text, plain text).
//!
//! Skipped: metadata header blocks (`file_path: notes.md`), headings (`#` lines, setext
//! and rst underlined or over- and underlined titles, outline `*` headings, lone release
//! lines), rules, rst directives other than code and admonitions (`.. image::`,
//! `.. _label:`), link definitions, badge and link-only lines, HTML-only lines and
//! comments, separator and all-short table rows. Code (fenced blocks, indented blocks,
//! rst literal blocks after `::` and `.. code-block::` bodies) becomes [`Kind::Code`]
//! sentences, one a line. List items and prose table rows stand alone; a sentence ending
//! with one colon directly followed by list items is their lead-in. A source label line
//! (`[n]`) attributes what follows to source `n`. Inline markup is cleaned
//! ([`super::inline`]).

use super::inline::{clean, clean_with};
use super::markup::{
    Directive, adornment, atx_heading, code_ish, directive, fence, has_version, html_heading,
    indent, is_field_line, is_markup_only, is_metadata_line, label, list_marker, prose_row,
    table_cells,
};
use super::split::{bracket_note, ends_sentence, is_closer, split_segment};

/// What a sentence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Running text.
    Prose,
    /// A list item, nested `depth` levels deep.
    Item {
        /// 0 for a top-level item.
        depth: usize,
    },
    /// A table row with prose, its cells joined by `; `.
    Row,
    /// A line of code.
    Code,
}

/// One sentence of the passages.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sentence {
    /// The text shown, inline markup cleaned, white space collapsed.
    pub text: String,
    /// What it is.
    pub kind: Kind,
    /// Its paragraph: sentences of one paragraph share the number.
    pub para: usize,
    /// Its document: the number goes up at each source label and metadata block.
    pub doc: usize,
    /// The source label it follows (`[n]`), if any.
    pub source: Option<u32>,
    /// The innermost enclosing heading with a version number (an index into
    /// [`Parsed::headings`]).
    pub heading: Option<usize>,
    /// For a list item: the sentence introducing its list.
    pub lead: Option<usize>,
    /// For a lead-in: how many list items follow it.
    pub items: usize,
    /// The heading just before it, for the first sentence of a section: its words help
    /// rank the sentence ("## Weather limits" above the list of limits).
    pub title: Option<String>,
}

/// A text's sentences and headings.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Parsed {
    /// The sentences in order.
    pub sentences: Vec<Sentence>,
    /// Headings with a version number, cleaned.
    pub headings: Vec<String>,
    /// Whether the text had a source label line.
    pub labelled: bool,
}

/// What came last, for the lines that follow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Last {
    Other,
    /// A paragraph: its last sentence if that ends with one colon; `literal` when it ended
    /// with `::` (an rst literal block follows).
    Para {
        lead: Option<usize>,
        literal: bool,
        indent: usize,
    },
    /// A list: its lead-in, the first item's indentation, the current item's text column,
    /// and whether its items have no markers (short lines indented under a lead-in).
    List {
        lead: Option<usize>,
        base: usize,
        content: usize,
        bare: bool,
    },
}

/// Splits `text` into sentences. See the [module documentation](self).
pub(super) fn parse(text: &str) -> Parsed {
    let mut p = Parser {
        lines: text.lines().collect(),
        out: Parsed::default(),
        buf: Vec::new(),
        item: None,
        buf_indent: 0,
        para: 0,
        source: None,
        stack: Vec::new(),
        last: Last::Other,
        blank: true,
        in_comment: false,
        prose_until: 0,
        title: None,
        label_pending: false,
        file: None,
        doc: 0,
    };
    let mut i = 0;
    while i < p.lines.len() {
        i = p.line(i);
    }
    p.flush();
    p.finish()
}

pub(super) struct Parser<'a> {
    pub(super) lines: Vec<&'a str>,
    pub(super) out: Parsed,
    /// The open paragraph's (or item's) lines, trimmed.
    pub(super) buf: Vec<String>,
    /// The open item's depth and lead-in, when `buf` is an item.
    pub(super) item: Option<(usize, Option<usize>)>,
    pub(super) buf_indent: usize,
    pub(super) para: usize,
    pub(super) source: Option<u32>,
    /// Enclosing headings: level, index into `out.headings` when it has a version.
    pub(super) stack: Vec<(usize, Option<usize>)>,
    pub(super) last: Last,
    /// Whether the previous line was blank (or the text starts here).
    pub(super) blank: bool,
    pub(super) in_comment: bool,
    /// Lines before this index are prose even when indented (an admonition's body).
    pub(super) prose_until: usize,
    /// The last heading, until a sentence takes it as its title.
    pub(super) title: Option<String>,
    /// A label line was read and no metadata block has yet said which file follows.
    pub(super) label_pending: bool,
    /// The file named by the last metadata block (`file_path: …`).
    pub(super) file: Option<String>,
    /// The current document's number.
    pub(super) doc: usize,
}

impl<'a> Parser<'a> {
    pub(super) fn at(&self, i: usize) -> &'a str {
        self.lines.get(i).copied().unwrap_or("")
    }

    /// Handles line `i`; returns the next line to handle.
    fn line(&mut self, i: usize) -> usize {
        let raw = self.at(i);
        let ind = indent(raw);
        let t = strip_quote(raw.trim());
        if self.in_comment {
            self.in_comment = !t.contains("-->");
            return i + 1;
        }
        if t.is_empty() {
            self.flush();
            self.blank = true;
            return i + 1;
        }
        let blank_before = std::mem::replace(&mut self.blank, false);
        if let Some(n) = label(t) {
            self.flush();
            self.source = Some(n);
            self.out.labelled = true;
            // Headings carry over only to a later piece of the same file.
            self.label_pending = true;
            self.doc += 1;
            self.title = None;
            self.last = Last::Other;
            self.blank = true;
            return i + 1;
        }
        if t.starts_with("<!--") && !t.contains("-->") {
            self.flush();
            self.in_comment = true;
            return i + 1;
        }
        let underline = !blank_before && self.item.is_none() && !self.buf.is_empty();
        if let Some(f) = fence(t).filter(|_| !(underline && adornment(t).is_some())) {
            self.flush();
            return self.fenced(i + 1, f);
        }
        if t.starts_with(">>>") {
            self.flush();
            self.code(t);
            return i + 1;
        }
        if blank_before && i >= self.prose_until {
            if let Last::Para {
                literal: true,
                indent: base,
                ..
            } = self.last
                && ind > base
            {
                return self.code_block(i, base);
            }
            if let Last::List { base, content, .. } = self.last
                && ind > base
                && ind < content + 4
                && list_marker(t).is_none()
            {
                // A further paragraph of the last item.
                self.reopen_item();
            } else if ind >= 4 && list_marker(t).is_none() {
                return self.indented(i);
            }
        }
        if let Some(d) = directive(t) {
            self.flush();
            return match d {
                Directive::Code => self.code_block(i + 1, ind),
                Directive::Skip => self.skip_body(i + 1, ind),
                Directive::Prose(arg) => {
                    self.prose_until = self.body_end(i + 1, ind);
                    if arg.chars().any(char::is_alphanumeric) {
                        self.buf.push(arg);
                        self.buf_indent = ind;
                    }
                    i + 1
                }
            };
        }
        if is_markup_only(t) || (i < self.prose_until && is_field_line(t)) {
            self.flush();
            return i + 1;
        }
        if t.starts_with('|') {
            self.flush();
            self.row(t);
            return i + 1;
        }
        if let Some((level, text)) = atx_heading(t).or_else(|| html_heading(t)) {
            self.flush();
            self.heading(level, &text);
            return i + 1;
        }
        if t.starts_with('#') {
            self.flush();
            self.last = Last::Other;
            return i + 1;
        }
        if let Some(c) = adornment(t) {
            // An underline makes the line above a heading (setext, rst).
            if self.item.is_none()
                && !blank_before
                && let Some(title) = self.buf.pop()
            {
                self.flush();
                self.heading(adornment_level(c), &title);
            } else {
                self.flush();
                self.last = Last::Other;
            }
            return i + 1;
        }
        if !t.chars().any(char::is_alphanumeric) {
            self.flush();
            self.last = Last::Other;
            return i + 1;
        }
        let lone = blank_before && self.at(i + 1).trim().is_empty();
        if lone && self.lone_heading(i, t) {
            return i + 1;
        }
        if let Some(width) = list_marker(t) {
            let text = t
                .char_indices()
                .nth(width)
                .map_or("", |(b, _)| t.get(b..).unwrap_or(""));
            self.start_item(ind, width, text.trim());
            return i + 1;
        }
        if self.item.is_some() {
            let continues = match self.last {
                Last::List {
                    base, bare: true, ..
                } => {
                    if ind == base && t.chars().count() <= 80 && !code_ish(t) {
                        self.start_item(ind, 0, t);
                        return i + 1;
                    }
                    ind > base
                }
                Last::List { content, .. } => {
                    ind >= content || self.buf.last().is_some_and(|l| !ends_sentence(l))
                }
                _ => false,
            };
            if continues {
                self.buf.push(t.to_string());
                return i + 1;
            }
            self.flush();
            self.last = Last::Other;
        }
        // Short lines indented under a line ending with one colon: a list.
        if !blank_before
            && ind > self.buf_indent + 1
            && self
                .buf
                .last()
                .is_some_and(|l| l.ends_with(':') && !l.ends_with("::"))
            && t.chars().count() <= 80
            && !code_ish(t)
        {
            self.flush();
            self.start_item(ind, 0, t);
            return i + 1;
        }
        if self.buf.is_empty() {
            self.buf_indent = ind;
        }
        self.buf.push(t.to_string());
        i + 1
    }

    pub(super) fn heading(&mut self, level: usize, text: &str) {
        self.settle_label();
        while self.stack.last().is_some_and(|&(l, _)| l >= level) {
            self.stack.pop();
        }
        let idx = has_version(text).then(|| {
            let cleaned = clean_with(text.trim_start_matches(['*', '#', ' ']), false).text;
            self.out.headings.push(collapse(&cleaned));
            self.out.headings.len() - 1
        });
        self.stack.push((level, idx));
        self.title = Some(collapse(&clean(text).text));
        self.last = Last::Other;
    }

    /// Text follows a label without a metadata block: another source, its own headings.
    fn settle_label(&mut self) {
        if std::mem::take(&mut self.label_pending) {
            self.stack.clear();
            self.file = None;
        }
    }

    fn current_heading(&self) -> Option<usize> {
        self.stack.iter().rev().find_map(|&(_, idx)| idx)
    }

    pub(super) fn push(&mut self, text: String, kind: Kind, lead: Option<usize>) {
        self.settle_label();
        let title = if kind == Kind::Code {
            None
        } else {
            self.title.take()
        };
        self.out.sentences.push(Sentence {
            text,
            kind,
            para: self.para,
            doc: self.doc,
            source: self.source,
            heading: self.current_heading(),
            lead,
            items: 0,
            title,
        });
    }

    pub(super) fn code(&mut self, t: &str) {
        if t.chars().any(char::is_alphanumeric) {
            self.push(t.to_string(), Kind::Code, None);
            self.para += 1;
        }
    }

    fn row(&mut self, t: &str) {
        if let Some(cells) = table_cells(t)
            && prose_row(&cells)
        {
            self.push(cells.join("; "), Kind::Row, None);
            self.para += 1;
        }
        self.last = Last::Other;
    }

    /// Ends the open paragraph or item, adding its sentences.
    pub(super) fn flush(&mut self) {
        let lines = std::mem::take(&mut self.buf);
        let item = self.item.take();
        if lines.is_empty() {
            return;
        }
        if let Some((depth, lead)) = item {
            let c = clean(&lines.join(" "));
            if c.text_outside && c.text.chars().any(char::is_alphanumeric) {
                self.push(collapse(&c.text), Kind::Item { depth }, lead);
            }
            self.para += 1;
            return;
        }
        if lines.iter().all(|l| is_metadata_line(l)) {
            let file = lines
                .iter()
                .find_map(|l| l.strip_prefix("file_path:"))
                .map(|f| f.trim().to_string());
            if self.label_pending && (file.is_none() || file != self.file) {
                self.stack.clear();
            }
            if !self.label_pending {
                self.doc += 1;
            }
            self.label_pending = false;
            self.file = file;
            // A chunk's heading path (`section: Guide > Install`): its last heading titles
            // the chunk's first sentence (a heading line in the text takes over).
            if let Some(section) = lines.iter().find_map(|l| l.strip_prefix("section:")) {
                let last = section.rsplit(" > ").next().unwrap_or(section).trim();
                self.title = (!last.is_empty()).then(|| last.to_string());
            }
            self.last = Last::Other;
            return;
        }
        let first = self.out.sentences.len();
        let mut segment = String::new();
        let mut prev_len = 0usize;
        let mut prev_ends = true;
        let mut segments = Vec::new();
        for line in &lines {
            let c = clean(line);
            let text = c.text.trim();
            if (c.had_markup && !c.text_outside) || !text.chars().any(char::is_alphanumeric) {
                segments.push(std::mem::take(&mut segment));
                prev_ends = true;
                continue;
            }
            if segment.is_empty() || prev_ends || prev_len < 40 {
                segments.push(std::mem::take(&mut segment));
            } else {
                segment.push(' ');
            }
            // Cleaned as a whole below: inline markup may span lines.
            segment.push_str(line.trim());
            prev_len = line.trim().chars().count();
            prev_ends = ends_sentence(text);
        }
        segments.push(segment);
        let mut split = Vec::new();
        for seg in segments.iter().filter(|s| !s.is_empty()) {
            split_segment(&clean(seg).text, &mut split);
        }
        // A bracketed note (`[bug introduced in 8.6]`) belongs to the sentence before it,
        // also when text without a blank line follows it (an earlier answer re-read).
        let mut sentences: Vec<String> = Vec::new();
        for s in split {
            let (note, rest) = bracket_note(&s);
            match (sentences.last_mut(), note) {
                (Some(prev), Some(note)) => {
                    prev.push(' ');
                    prev.push_str(note);
                    if !rest.is_empty() {
                        sentences.push(rest.to_string());
                    }
                }
                _ => sentences.push(s),
            }
        }
        // rst: `text::` shows as `text:`, a lone `::` vanishes; a literal block follows.
        let literal = lines.last().is_some_and(|l| l.trim_end().ends_with("::"));
        if literal && let Some(last) = sentences.last_mut().filter(|l| l.ends_with("::")) {
            last.pop();
            if last.ends_with(" :") || last == ":" {
                last.pop();
                let trimmed = last.trim_end().to_string();
                *last = trimmed;
            }
        }
        for s in sentences
            .into_iter()
            .filter(|s| s.chars().any(char::is_alphanumeric))
        {
            self.push(s, Kind::Prose, None);
        }
        self.para += 1;
        let lead = (self.out.sentences.len() > first && !literal)
            .then(|| self.out.sentences.len() - 1)
            .filter(|&l| {
                self.out
                    .sentences
                    .get(l)
                    .is_some_and(|s| s.text.trim_end_matches(is_closer).ends_with(':'))
            });
        self.last = Last::Para {
            lead,
            literal,
            indent: self.buf_indent,
        };
    }

    /// Counts each lead-in's items (a lead-in without items is an ordinary sentence).
    fn finish(mut self) -> Parsed {
        let n = self.out.sentences.len();
        for l in 0..n {
            let count = (l + 1..n)
                .take_while(|&k| self.out.sentences.get(k).is_some_and(|s| s.lead == Some(l)))
                .count();
            if let Some(s) = self.out.sentences.get_mut(l) {
                s.items = count;
            }
        }
        // Items whose lead-in was lost (not directly before them) stand alone.
        for k in 0..n {
            let lead = self.out.sentences.get(k).and_then(|s| s.lead);
            if let Some(l) = lead {
                let ok = self
                    .out
                    .sentences
                    .get(l)
                    .is_some_and(|s| l < k && k <= l + s.items);
                if !ok && let Some(s) = self.out.sentences.get_mut(k) {
                    s.lead = None;
                }
            }
        }
        self.out
    }
}

/// Section level of an rst/setext adornment character.
fn adornment_level(c: char) -> usize {
    match c {
        '=' => 1,
        '-' => 2,
        _ => 3,
    }
}

/// A line without its blockquote markers (`> `).
fn strip_quote(t: &str) -> &str {
    if t.starts_with(">>>") {
        return t;
    }
    let mut t = t;
    while let Some(rest) = t.strip_prefix('>') {
        t = rest.trim_start();
    }
    t
}

/// White space collapsed to single spaces.
pub(super) fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
