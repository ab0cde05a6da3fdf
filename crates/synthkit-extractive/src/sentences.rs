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
    indent, is_field_line, is_markup_only, label, list_marker, prose_row, table_cells,
};
use super::split::{ends_sentence, is_closer};

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
    /// A table row, its cells joined by `; `, each after its column's header
    /// (`Length: 128-bit; Signed: i128; Unsigned: u128`).
    Row,
    /// A line of code.
    Code,
    /// A heading (a title, a release header), a candidate only when the question asks for
    /// a title or a release.
    Heading,
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
    /// For a sentence ending with a colon right before code: how many code lines follow.
    pub code: usize,
    /// Where it is: an index into [`Parsed::contexts`].
    pub context: usize,
    /// The heading just before it, for the first sentence of a section: its words help
    /// rank the sentence ("## Weather limits" above the list of limits).
    pub title: Option<String>,
    /// Its file (a hash of the path named by the metadata block before it), if named: a
    /// forward reference may reach into the next piece of the same file.
    pub file: Option<u64>,
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
    /// Where sentences are: the words of their file's path, their chunk's heading path
    /// and the last heading above them (one entry per change).
    pub contexts: Vec<String>,
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
        after_rule: false,
        para_after_rule: false,
        table_header: None,
        section: String::new(),
        last_heading: String::new(),
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
    /// The last line was a rule (`-----` after a blank line).
    pub(super) after_rule: bool,
    /// The open paragraph started right after a rule (a release paragraph may head it).
    pub(super) para_after_rule: bool,
    /// The open table's header cells, while its rows are read.
    pub(super) table_header: Option<Vec<String>>,
    /// The chunk's heading path (`section:` metadata).
    pub(super) section: String,
    /// The last heading read (never taken).
    pub(super) last_heading: String,
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
        let after_rule = std::mem::take(&mut self.after_rule);
        if !t.starts_with('|') {
            self.table_header = None;
        }
        if let Some(n) = label(t) {
            self.flush();
            self.source = Some(n);
            self.out.labelled = true;
            // Headings carry over only to a later piece of the same file.
            self.label_pending = true;
            self.doc += 1;
            self.title = None;
            self.section.clear();
            self.last_heading.clear();
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
            self.row(i, t);
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
                self.after_rule = blank_before || i == 0;
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
            self.para_after_rule = after_rule;
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
        let title = collapse(&clean(text).text);
        if title.chars().any(char::is_alphanumeric) {
            // A candidate of its own, ranked with its file's name (`coreutils/NEWS`),
            // shown with its brackets (`[stable]`).
            let file = self.file.as_deref().map(path_words);
            let shown = collapse(&clean_with(text.trim_start_matches(['*', '#', ' ']), false).text);
            self.push(shown, Kind::Heading, None);
            if let Some(s) = self.out.sentences.last_mut() {
                s.title = file;
            }
            self.para += 1;
        }
        self.last_heading = title.clone();
        // A heading of a version and little else (rustdoc's `1.32.0 · Source`) has no
        // words to rank by: the title above it stays.
        let words = title
            .split_whitespace()
            .filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2)
            .count();
        if words >= 2 || self.title.is_none() {
            self.title = Some(title);
        }
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
        // The heading titles the section's first sentence of substance (rustdoc's
        // `1.32.0 · Source` and `Expand description` lines are not one).
        let title =
            if matches!(kind, Kind::Code | Kind::Heading) || text.split_whitespace().count() < 4 {
                None
            } else {
                self.title.take()
            };
        let context = self.context();
        self.out.sentences.push(Sentence {
            text,
            kind,
            para: self.para,
            doc: self.doc,
            source: self.source,
            heading: self.current_heading(),
            lead,
            items: 0,
            code: 0,
            context,
            title,
            file: self.file.as_deref().map(super::rank::term_id),
        });
    }

    /// The index of the current context in [`Parsed::contexts`] (added when it changed).
    fn context(&mut self) -> usize {
        let file = self.file.as_deref().map(path_words).unwrap_or_default();
        let here = format!("{file} {} {}", self.section, self.last_heading);
        if self.out.contexts.last() != Some(&here) {
            self.out.contexts.push(here);
        }
        self.out.contexts.len().saturating_sub(1)
    }

    pub(super) fn code(&mut self, t: &str) {
        if t.chars().any(char::is_alphanumeric) {
            self.push(t.to_string(), Kind::Code, None);
            self.para += 1;
        }
    }

    /// A table row at line `i`: the header (the row before a separator row) is kept for
    /// the rows after it; a row reads `Header: cell; Header: cell`, empty cells left out.
    /// A table without a header keeps only rows with prose.
    fn row(&mut self, i: usize, t: &str) {
        let next = self.at(i + 1).trim();
        let Some(cells) = table_cells(t) else {
            self.last = Last::Other;
            return;
        };
        if next.starts_with('|') && table_cells(next).is_none() && next.contains('-') {
            self.table_header = Some(super::markup::table_cells_in_place(t));
            self.last = Last::Other;
            return;
        }
        let text = match &self.table_header {
            Some(header) => labelled_row(header, t),
            None if prose_row(&cells) => Some(cells.join("; ")),
            None => None,
        };
        if let Some(text) = text {
            self.push(text, Kind::Row, None);
            self.para += 1;
        }
        self.last = Last::Other;
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
        // A sentence ending with a colon right before code announces it.
        for l in 0..n {
            let announces = self.out.sentences.get(l).is_some_and(|s| {
                matches!(s.kind, Kind::Prose | Kind::Item { .. })
                    && s.items == 0
                    && s.text.trim_end_matches(is_closer).ends_with(':')
            });
            if !announces {
                continue;
            }
            let doc = self.out.sentences.get(l).map(|s| s.doc);
            let count = (l + 1..n)
                .take_while(|&k| {
                    self.out
                        .sentences
                        .get(k)
                        .is_some_and(|s| s.kind == Kind::Code && Some(s.doc) == doc)
                })
                .count();
            if let Some(s) = self.out.sentences.get_mut(l) {
                s.code = count;
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

/// A row's cells after their column's header (`Unsigned: u128`), empty cells left out;
/// `None` without a cell.
fn labelled_row(header: &[String], t: &str) -> Option<String> {
    let cells = super::markup::table_cells_in_place(t);
    let parts: Vec<String> = cells
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_empty())
        .map(
            |(k, c)| match header.get(k).filter(|h| !h.is_empty() && *h != c) {
                Some(h) => format!("{}: {c}", h.trim_end_matches(':')),
                None => c.clone(),
            },
        )
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// A file path's words for ranking (`…/coreutils/NEWS.gz` gives `coreutils NEWS gz`), an
/// mdBook chapter's `ch16-00-concurrency` giving `chapter 16 00 concurrency`.
pub(super) fn path_words(path: &str) -> String {
    let mut out = String::new();
    for part in path
        .split(|c: char| !c.is_alphanumeric())
        .filter(|p| !p.is_empty())
    {
        let chapter = part
            .strip_prefix("ch")
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if !out.is_empty() {
            out.push(' ');
        }
        match chapter {
            Some(n) => {
                out.push_str("chapter ");
                out.push_str(n.trim_start_matches('0'));
            }
            None => out.push_str(part),
        }
    }
    out
}

impl Parsed {
    /// Appends `more` to these sentences, its indices shifted.
    pub(crate) fn append(&mut self, more: Parsed) {
        let offset = self.sentences.len();
        let para_offset = self.sentences.last().map_or(0, |s| s.para + 1);
        let heading_offset = self.headings.len();
        let context_offset = self.contexts.len();
        self.headings.extend(more.headings);
        self.contexts.extend(more.contexts);
        self.labelled |= more.labelled;
        self.sentences
            .extend(more.sentences.into_iter().map(|mut s| {
                s.para += para_offset;
                s.heading = s.heading.map(|h| h + heading_offset);
                s.context += context_offset;
                s.lead = s.lead.map(|l| l + offset);
                s
            }));
    }
}
