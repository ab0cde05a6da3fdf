//! HTML to Markdown-style text: headings as `#` lines, lists as `- item` (`1. item`),
//! tables one row per line with cells between ` | `, code blocks fenced, paragraphs
//! separated by blank lines.
//!
//! Parsed with html5ever (through `scraper`, which keeps the DOM) and walked here. Chosen
//! over `html2text` after converting the Rust book's `ch04-01-what-is-ownership.html` and
//! `appendix-02-operators.html` with it: html2text keeps headings and lists, but draws
//! tables with box characters wrapped at a width (cutting `Operator` into `Opera`/`tor`),
//! turns code blocks into inline backticks, and adds the page's keyboard-help and theme
//! menu plus link footnotes.
//!
//! What is dropped: `<script>`, `<style>`, `<noscript>`, `<template>`, `<svg>`, `<head>`
//! (the `<title>` becomes a `#` heading when the content has no heading), form controls,
//! `<nav>` and anything `hidden` or `aria-hidden`. When the page has one `<main>` (or
//! `role="main"`), only it is converted: sidebars, menus and footers stay out. Emphasis and
//! link targets are dropped (their text is kept); inline code keeps its backticks.

use scraper::{ElementRef, Html, Node};

/// Whether text looks like an HTML document: `<!DOCTYPE html` or `<html` at its start
/// (after white space, an XML declaration and comments).
pub fn looks_like_html(text: &str) -> bool {
    let mut rest = text.trim_start_matches('\u{feff}').trim_start();
    // An XML declaration (XHTML) and comments may come first.
    if let Some(after) = rest.strip_prefix("<?xml") {
        match after.find("?>") {
            Some(end) => rest = after.get(end + 2..).unwrap_or_default().trim_start(),
            None => return false,
        }
    }
    while let Some(after) = rest.strip_prefix("<!--") {
        match after.find("-->") {
            Some(end) => rest = after.get(end + 3..).unwrap_or_default().trim_start(),
            None => return false,
        }
    }
    let head: String = rest
        .chars()
        .take(14)
        .collect::<String>()
        .to_ascii_lowercase();
    head.starts_with("<!doctype html") || head.starts_with("<html")
}

/// Converts an HTML document to Markdown-style text.
pub fn html_to_markdown(html: &str) -> String {
    let doc = Html::parse_document(html);
    let root = doc.root_element();
    let content = main_element(root).unwrap_or(root);
    let mut blocks = Vec::new();
    if !content
        .descendent_elements()
        .any(|e| matches!(e.value().name(), "h1" | "h2" | "h3" | "h4" | "h5" | "h6"))
        && let Some(title) = root
            .descendent_elements()
            .find(|e| e.value().name() == "title")
    {
        let title = inline_text(title);
        if !title.is_empty() {
            blocks.push(format!("# {title}"));
        }
    }
    blocks.extend(Blocks::of(content));
    let mut out = blocks.join("\n\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The page's one `<main>` (or `role="main"`) element, if it has exactly one.
fn main_element(root: ElementRef<'_>) -> Option<ElementRef<'_>> {
    let mut mains = root
        .descendent_elements()
        .filter(|e| e.value().name() == "main" || e.attr("role") == Some("main"));
    let first = mains.next()?;
    // A `role="main"` inside `<main>` (or the reverse) is the same region.
    match mains.next() {
        None => Some(first),
        Some(second) if first.descendent_elements().any(|d| d.id() == second.id()) => Some(first),
        Some(_) => None,
    }
}

/// Elements whose content is never text for a reader.
fn is_dropped(el: ElementRef<'_>) -> bool {
    let v = el.value();
    matches!(
        v.name(),
        "script"
            | "style"
            | "noscript"
            | "template"
            | "svg"
            | "canvas"
            | "iframe"
            | "object"
            | "embed"
            | "head"
            | "button"
            | "select"
            | "input"
            | "textarea"
            | "audio"
            | "video"
            | "nav"
    ) || v.attr("hidden").is_some()
        || v.attr("aria-hidden") == Some("true")
        || v.attr("role") == Some("navigation")
}

/// Elements that start a new block (the rest are inline).
fn is_block(name: &str) -> bool {
    matches!(
        name,
        "address"
            | "article"
            | "aside"
            | "blockquote"
            | "body"
            | "caption"
            | "center"
            | "dd"
            | "details"
            | "dialog"
            | "div"
            | "dl"
            | "dt"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "form"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "header"
            | "hgroup"
            | "hr"
            | "html"
            | "legend"
            | "li"
            | "main"
            | "menu"
            | "ol"
            | "p"
            | "pre"
            | "section"
            | "summary"
            | "table"
            | "tbody"
            | "td"
            | "tfoot"
            | "th"
            | "thead"
            | "tr"
            | "ul"
    )
}

/// Inline text being gathered: white space collapsed, `<br>` kept as a line break.
#[derive(Default)]
struct Inline {
    text: String,
    space: bool,
}

impl Inline {
    fn push_text(&mut self, s: &str) {
        for c in s.chars() {
            if c.is_whitespace() {
                self.space = true;
            } else {
                if self.space && !self.text.is_empty() && !self.text.ends_with('\n') {
                    self.text.push(' ');
                }
                self.space = false;
                self.text.push(c);
            }
        }
    }

    fn push_raw(&mut self, s: &str) {
        if self.space && !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push(' ');
        }
        self.space = false;
        self.text.push_str(s);
    }

    fn line_break(&mut self) {
        self.text.push('\n');
        self.space = false;
    }

    /// The text gathered, each line trimmed, blank lines dropped; empties `self`.
    fn take(&mut self) -> String {
        let out = self
            .text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        self.text.clear();
        self.space = false;
        out
    }

    /// Walks `el`'s children as inline content (blocks inside are flattened to lines).
    fn walk(&mut self, el: ElementRef<'_>) {
        for child in el.children() {
            match child.value() {
                Node::Text(t) => self.push_text(t),
                Node::Element(_) => {
                    if let Some(e) = ElementRef::wrap(child) {
                        self.element(e);
                    }
                }
                _ => {}
            }
        }
    }

    /// One element as inline content.
    fn element(&mut self, e: ElementRef<'_>) {
        if is_dropped(e) {
            return;
        }
        match e.value().name() {
            "br" => self.line_break(),
            "img" => {
                if let Some(alt) = e.attr("alt").filter(|a| !a.trim().is_empty()) {
                    self.push_text(alt);
                }
            }
            "code" | "kbd" | "samp" | "tt" => {
                let mut inner = Inline::default();
                inner.walk(e);
                let code = inner.take().replace('\n', " ");
                if !code.is_empty() {
                    let tick = if code.contains('`') { "``" } else { "`" };
                    let pad = if code.starts_with('`') || code.ends_with('`') {
                        " "
                    } else {
                        ""
                    };
                    self.push_raw(&format!("{tick}{pad}{code}{pad}{tick}"));
                }
            }
            name if is_block(name) => {
                self.line_break();
                self.walk(e);
                self.line_break();
            }
            _ => self.walk(e),
        }
    }
}

/// An element's inline text on one line.
fn inline_text(el: ElementRef<'_>) -> String {
    let mut inline = Inline::default();
    inline.walk(el);
    inline.take().replace('\n', " ")
}

/// Markdown blocks, in order.
#[derive(Default)]
struct Blocks {
    blocks: Vec<String>,
    inline: Inline,
}

impl Blocks {
    /// The blocks of an element's children.
    fn of(el: ElementRef<'_>) -> Vec<String> {
        Self::gathered(|b| b.walk(el))
    }

    /// The blocks `fill` gathers, the last inline text flushed.
    fn gathered(fill: impl FnOnce(&mut Blocks)) -> Vec<String> {
        let mut b = Blocks::default();
        fill(&mut b);
        b.flush();
        b.blocks
    }

    fn flush(&mut self) {
        let text = self.inline.take();
        if !text.is_empty() {
            self.blocks.push(text);
        }
    }

    fn push(&mut self, block: String) {
        self.flush();
        if !block.trim().is_empty() {
            self.blocks.push(block);
        }
    }

    fn walk(&mut self, el: ElementRef<'_>) {
        for child in el.children() {
            match child.value() {
                Node::Text(t) => self.inline.push_text(t),
                Node::Element(_) => {
                    let Some(e) = ElementRef::wrap(child) else {
                        continue;
                    };
                    if !is_dropped(e) {
                        self.element(e);
                    }
                }
                _ => {}
            }
        }
    }

    fn element(&mut self, e: ElementRef<'_>) {
        let name = e.value().name();
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = name
                    .strip_prefix('h')
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(1);
                let text = inline_text(e);
                if text.is_empty() {
                    self.flush();
                } else {
                    self.push(format!("{} {text}", "#".repeat(level)));
                }
            }
            "ul" | "ol" | "menu" => {
                let list = list(e);
                self.push(list);
            }
            "pre" => self.push(code_block(e)),
            "table" => {
                self.flush();
                for block in table(e) {
                    self.push(block);
                }
            }
            "blockquote" => {
                let inner = Blocks::of(e).join("\n\n");
                let quoted = inner
                    .lines()
                    .map(|l| {
                        if l.is_empty() {
                            ">".to_owned()
                        } else {
                            format!("> {l}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                self.push(quoted);
            }
            "hr" => self.flush(),
            "br" => self.inline.line_break(),
            n if is_block(n) => {
                self.flush();
                self.walk(e);
                self.flush();
            }
            _ => {
                // Inline element: its text joins the current paragraph; blocks inside it
                // (a `<div>` in a `<span>`, or in a link) are kept as blocks.
                if e.descendent_elements().any(|d| is_block(d.value().name())) {
                    self.walk(e);
                } else {
                    self.inline.element(e);
                }
            }
        }
    }
}

/// A list, one item a line (`- ` or `N. `), nested lists and further blocks of an item
/// indented under it.
fn list(el: ElementRef<'_>) -> String {
    let ordered = el.value().name() == "ol";
    let mut n: i64 = el
        .attr("start")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    let mut lines = Vec::new();
    for item in el.child_elements() {
        if is_dropped(item) {
            continue;
        }
        let blocks = if item.value().name() == "li" {
            Blocks::of(item)
        } else {
            // Stray content directly in the list.
            Blocks::of_one(item)
        };
        if blocks.is_empty() {
            continue;
        }
        let marker = if ordered {
            format!("{n}. ")
        } else {
            "- ".to_owned()
        };
        n += 1;
        let indent = " ".repeat(marker.len());
        let body = blocks.join("\n");
        for (i, line) in body.lines().enumerate() {
            if i == 0 {
                lines.push(format!("{marker}{line}"));
            } else if line.is_empty() {
                lines.push(String::new());
            } else {
                lines.push(format!("{indent}{line}"));
            }
        }
    }
    lines.join("\n")
}

impl Blocks {
    /// The blocks of one element (itself, not only its children).
    fn of_one(el: ElementRef<'_>) -> Vec<String> {
        Self::gathered(|b| b.element(el))
    }
}

/// A fenced code block, its language from `class="language-…"` on `<pre>` or its `<code>`.
fn code_block(pre: ElementRef<'_>) -> String {
    let mut code = String::new();
    raw_text(pre, &mut code);
    let code = code.trim_matches('\n').trim_end();
    let lang = std::iter::once(pre)
        .chain(pre.child_elements().filter(|c| c.value().name() == "code"))
        .filter_map(|e| e.attr("class"))
        .flat_map(str::split_whitespace)
        .find_map(|c| {
            c.strip_prefix("language-")
                .or_else(|| c.strip_prefix("lang-"))
        })
        .unwrap_or("");
    let mut fence = "```".to_owned();
    while code.contains(fence.as_str()) {
        fence.push('`');
    }
    format!("{fence}{lang}\n{code}\n{fence}")
}

/// Text as it is (white space kept), `<br>` as a newline.
fn raw_text(el: ElementRef<'_>, out: &mut String) {
    for child in el.children() {
        match child.value() {
            Node::Text(t) => out.push_str(t),
            Node::Element(_) => {
                if let Some(e) = ElementRef::wrap(child) {
                    if e.value().name() == "br" {
                        out.push('\n');
                    } else if !is_dropped(e) {
                        raw_text(e, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A table: its caption as a paragraph, then one row a line, `| a | b |`, with the
/// Markdown separator row after the first (header) row.
fn table(el: ElementRef<'_>) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    collect_rows(el, &mut rows, &mut blocks);
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    if width > 0 {
        let mut lines = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let mut cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
            cells.resize(width, String::new());
            lines.push(format!("| {} |", cells.join(" | ")).replace("|  |", "| |"));
            if i == 0 {
                lines.push(format!("|{}", " --- |".repeat(width)));
            }
        }
        blocks.push(lines.join("\n"));
    }
    blocks
}

/// The rows of a table (through `thead`/`tbody`/`tfoot`, not into nested tables).
fn collect_rows(el: ElementRef<'_>, rows: &mut Vec<Vec<String>>, blocks: &mut Vec<String>) {
    for child in el.child_elements() {
        if is_dropped(child) {
            continue;
        }
        match child.value().name() {
            "caption" => {
                let text = inline_text(child);
                if !text.is_empty() {
                    blocks.push(text);
                }
            }
            "thead" | "tbody" | "tfoot" => collect_rows(child, rows, blocks),
            "tr" => {
                let cells: Vec<String> = child
                    .child_elements()
                    .filter(|c| matches!(c.value().name(), "td" | "th"))
                    .map(inline_text)
                    .collect();
                if !cells.is_empty() && cells.iter().any(|c| !c.is_empty()) {
                    rows.push(cells);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        for (text, html) in [
            ("<!DOCTYPE html>\n<html>", true),
            ("\u{feff}  <!-- hi -->\n<HTML lang=en>", true),
            ("<?xml version=\"1.0\"?>\n<!DOCTYPE html>", true),
            ("<?xml version=\"1.0\"?><svg/>", false),
            ("Plain text about <html> tags", false),
        ] {
            assert_eq!(looks_like_html(text), html, "{text:?}");
        }
    }

    #[test]
    fn structure_is_kept() {
        let html = r##"<!DOCTYPE html><html><head><title>T</title><style>p{}</style>
            <script>var x = 1;</script></head><body>
            <nav><a href="/">Home</a></nav>
            <h1>Title <a href="#t">here</a></h1>
            <p>First   paragraph with <code>code</code> and <em>emphasis</em>.</p>
            <ul><li>one</li><li>two<ul><li>nested</li></ul></li></ul>
            <ol start="3"><li>three</li><li>four</li></ol>
            <table><caption>Ops</caption><thead><tr><th>Op</th><th>Meaning</th></tr></thead>
            <tbody><tr><td><code>+</code></td><td>add</td></tr>
            <tr><td>|</td><td>or</td></tr></tbody></table>
            <pre><code class="language-rust">fn main() {
    println!("hi");
}</code></pre>
            <blockquote><p>Quoted.</p></blockquote>
            <p>Line<br>break</p>
            <script>document.write("no")</script>
            </body></html>"##;
        let md = html_to_markdown(html);
        let expected = "# Title here\n\n\
            First paragraph with `code` and emphasis.\n\n\
            - one\n- two\n  - nested\n\n\
            3. three\n4. four\n\n\
            Ops\n\n\
            | Op | Meaning |\n| --- | --- |\n| `+` | add |\n| \\| | or |\n\n\
            ```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\n\
            > Quoted.\n\n\
            Line\nbreak\n";
        assert_eq!(md, expected);
    }

    #[test]
    fn main_only_and_title() {
        let html = "<html><head><title>Page</title></head><body><div class=menu>Menu</div>\
            <main><h2>Section</h2><p>Body.</p></main><footer>Footer</footer></body></html>";
        assert_eq!(html_to_markdown(html), "## Section\n\nBody.\n");
        // Without any heading, the title names the page.
        let html = "<html><head><title>Page</title></head><body><p>Body.</p></body></html>";
        assert_eq!(html_to_markdown(html), "# Page\n\nBody.\n");
    }
}
