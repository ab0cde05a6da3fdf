//! Paragraphs and items into sentences, and metadata blocks into the parser's state: the
//! end of each open block of the sentence splitter.

use super::inline::clean;
use super::markup::{has_version, is_metadata_line};
use super::sentences::{Kind, Last, Parser, collapse};
use super::split::{bracket_note, ends_sentence, is_closer, split_segment};
use synthkit::text::plain::release_paragraph_title;

impl Parser<'_> {
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
            self.last_heading.clear();
            self.section = lines
                .iter()
                .find_map(|l| l.strip_prefix("section:"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            // A chunk's heading path (`section: Guide > Install`): its last heading titles
            // the chunk's first sentence (a heading line in the text takes over).
            // Its headings with a version are the release it is about.
            if let Some(section) = lines.iter().find_map(|l| l.strip_prefix("section:")) {
                let last = section.rsplit(" > ").next().unwrap_or(section).trim();
                self.title = (!last.is_empty()).then(|| last.to_string());
                self.stack = section
                    .split(" > ")
                    .enumerate()
                    .map(|(k, title)| {
                        let title = title.trim();
                        let idx = has_version(title).then(|| {
                            self.out.headings.push(title.to_string());
                            self.out.headings.len() - 1
                        });
                        (k + 1, idx)
                    })
                    .collect();
            }
            self.last = Last::Other;
            return;
        }
        // A paragraph naming a version right after a rule line heads a release (bash's
        // NEWS: `This is a terse description of the new features added to bash-4.0 ...`).
        if std::mem::take(&mut self.para_after_rule)
            && let Some(first) = lines.first()
            && let Some(title) = release_paragraph_title(first, &lines.join("\n"))
        {
            self.heading(1, &title);
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
}
