//! A small HTML writer: every text and attribute value goes through [`escape`]; markup
//! comes only from string literals in this crate.

use std::fmt::Write as _;

/// Writes `text` HTML-escaped (`&`, `<`, `>`, `"`, `'`): safe as element text and as a
/// quoted attribute value. A reply or chunk holding `</script>` or `<img onerror=...>`
/// shows as text.
pub fn escape(out: &mut String, text: &str) {
    let mut last = 0;
    for (i, b) in text.bytes().enumerate() {
        let rep = match b {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            _ => continue,
        };
        out.push_str(&text[last..i]);
        out.push_str(rep);
        last = i + 1;
    }
    out.push_str(&text[last..]);
}

/// A page being written.
#[derive(Debug, Default)]
pub struct Html {
    out: String,
}

impl Html {
    /// An empty page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Markup, written as is: only string literals of this crate (`&'static str`).
    pub fn markup(&mut self, markup: &'static str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// Text, escaped.
    pub fn text(&mut self, text: &str) -> &mut Self {
        escape(&mut self.out, text);
        self
    }

    /// A number or other displayable value, escaped.
    pub fn value(&mut self, value: impl std::fmt::Display) -> &mut Self {
        let mut s = String::new();
        let _ = write!(s, "{value}");
        escape(&mut self.out, &s);
        self
    }

    /// `<tag class="class">text</tag>`, the text escaped.
    pub fn element(&mut self, tag: &'static str, class: &'static str, text: &str) -> &mut Self {
        self.out.push('<');
        self.out.push_str(tag);
        if !class.is_empty() {
            self.out.push_str(" class=\"");
            self.out.push_str(class);
            self.out.push('"');
        }
        self.out.push('>');
        escape(&mut self.out, text);
        self.out.push_str("</");
        self.out.push_str(tag);
        self.out.push('>');
        self
    }

    /// The page so far.
    pub fn finish(self) -> String {
        self.out
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        let mut h = Html::new();
        h.text("</script><img src=x onerror='alert(1)'> & \"q\"");
        assert_eq!(
            h.finish(),
            "&lt;/script&gt;&lt;img src=x onerror=&#39;alert(1)&#39;&gt; &amp; &quot;q&quot;"
        );
    }
}
