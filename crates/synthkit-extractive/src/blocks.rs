//! Blocks of lines for the sentence splitter: fenced and indented code, rst literal blocks
//! and directive bodies, indented runs of short lines that list what a lead-in announces,
//! list items, and headings on a line of their own (outline `*` headings, release lines).

use super::markup::{
    closes_fence, code_ish, has_version, indent, is_field_line, is_version_line, outline_heading,
    prose_block,
};
use super::sentences::{Kind, Last, Parser};

impl<'a> Parser<'a> {
    /// A fenced block from line `i` to its closing fence (or the end).
    pub(super) fn fenced(&mut self, mut i: usize, open: (char, usize)) -> usize {
        while i < self.lines.len() {
            let t = self.at(i).trim();
            if closes_fence(t, open) {
                i += 1;
                break;
            }
            self.code(t);
            i += 1;
        }
        self.last = Last::Other;
        self.blank = true;
        i
    }

    /// The end of an indented body: lines from `i` that are blank or indented deeper
    /// than `base` (trailing blank lines excluded).
    pub(super) fn body_end(&self, i: usize, base: usize) -> usize {
        let mut end = i;
        let mut k = i;
        while k < self.lines.len() {
            let l = self.at(k);
            if l.trim().is_empty() {
                k += 1;
                continue;
            }
            if indent(l) <= base {
                break;
            }
            k += 1;
            end = k;
        }
        end
    }

    /// An indented body of code (an rst literal block or code directive).
    pub(super) fn code_block(&mut self, i: usize, base: usize) -> usize {
        let end = self.body_end(i, base);
        for k in i..end {
            let t = self.at(k).trim();
            if !is_field_line(t) {
                self.code(t);
            }
        }
        self.last = Last::Other;
        self.blank = true;
        end
    }

    /// A directive's body, skipped.
    pub(super) fn skip_body(&mut self, i: usize, base: usize) -> usize {
        self.last = Last::Other;
        self.blank = true;
        self.body_end(i, base)
    }

    /// A block indented 4 or more after a blank line: a list of short lines after a
    /// lead-in, prose, or code.
    pub(super) fn indented(&mut self, i: usize) -> usize {
        let mut end = i;
        let mut k = i;
        while k < self.lines.len() {
            let l = self.at(k);
            if !l.trim().is_empty() && indent(l) < 4 {
                break;
            }
            k += 1;
            if !l.trim().is_empty() {
                end = k;
            }
        }
        let lines: Vec<&str> = (i..end)
            .map(|k| self.at(k).trim())
            .filter(|l| !l.is_empty())
            .collect();
        let lead = match self.last {
            Last::Para { lead: Some(l), .. } => Some(l),
            _ => None,
        };
        let listy = lines.iter().all(|l| {
            l.chars().count() <= 80 && !code_ish(l) && l.chars().any(char::is_alphanumeric)
        });
        if lead.is_some() && listy {
            let base = indent(self.at(i));
            for k in i..end {
                let l = self.at(k);
                if l.trim().is_empty() {
                    continue;
                }
                if indent(l) > base && self.item.is_some() {
                    self.buf.push(l.trim().to_string());
                } else {
                    self.flush();
                    self.start_item(base, 0, l.trim());
                }
            }
            self.flush();
            self.blank = true;
            return end;
        }
        if prose_block(&lines) {
            self.prose_until = end;
            return i;
        }
        for l in lines {
            self.code(l);
        }
        self.last = Last::Other;
        self.blank = true;
        end
    }

    /// A heading on a line of its own (outline `*` headings, release lines).
    pub(super) fn lone_heading(&mut self, i: usize, t: &str) -> bool {
        if let Some((level, text)) = outline_heading(t) {
            let next = (i + 1..self.lines.len())
                .map(|k| self.at(k).trim())
                .find(|l| !l.is_empty())
                .unwrap_or("");
            let sub = next.starts_with("** ");
            if level >= 2 || sub || (has_version(t) && !t.ends_with('.')) {
                self.flush();
                self.heading(level, &text);
                return true;
            }
        }
        if is_version_line(t) {
            self.flush();
            self.heading(1, t);
            return true;
        }
        false
    }

    pub(super) fn start_item(&mut self, ind: usize, width: usize, text: &str) {
        self.flush();
        let (lead, base, depth) = match self.last {
            Last::List { lead, base, .. } if ind >= base => {
                (lead, base, (ind - base).div_ceil(2).min(3))
            }
            Last::List { lead, .. } => (lead, ind, 0),
            Last::Para { lead, .. } => (lead, ind, 0),
            Last::Other => match self.title.take() {
                // A list right under a heading: the heading introduces it.
                Some(title) => {
                    let lead_in = format!("{}:", title.trim_end_matches([':', '.']));
                    self.push(lead_in, Kind::Prose, None);
                    self.para += 1;
                    (Some(self.out.sentences.len() - 1), ind, 0)
                }
                None => (None, ind, 0),
            },
        };
        self.item = Some((depth, lead));
        self.buf.push(text.to_string());
        self.buf_indent = ind;
        self.last = Last::List {
            lead,
            base,
            content: ind + width.max(2),
            bare: width == 0,
        };
    }

    /// Takes the last item back into the buffer, for a further paragraph of it.
    pub(super) fn reopen_item(&mut self) {
        if self.buf.is_empty()
            && let Some(s) = self.out.sentences.last()
            && let Kind::Item { depth } = s.kind
        {
            let lead = s.lead;
            let text = s.text.clone();
            self.out.sentences.pop();
            self.item = Some((depth, lead));
            self.buf.push(text);
        }
    }
}
