//! Inline markup cleaned out of the text an answer shows: Markdown links and images,
//! emphasis, raw HTML tags and comments, reStructuredText roles, literals and references,
//! and backslash escapes. Inline code keeps its backticks (they read well).

/// HTML element names whose tags are stripped (others, such as `Vec<T>`, are kept).
const HTML_TAGS: &[&str] = &[
    "a",
    "abbr",
    "article",
    "b",
    "big",
    "blockquote",
    "br",
    "center",
    "code",
    "dd",
    "del",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "figcaption",
    "figure",
    "font",
    "footer",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "i",
    "img",
    "ins",
    "kbd",
    "li",
    "mark",
    "nav",
    "ol",
    "p",
    "picture",
    "pre",
    "s",
    "samp",
    "section",
    "small",
    "source",
    "span",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "tt",
    "u",
    "ul",
    "var",
    "video",
];

/// What cleaning found in a piece of text.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Cleaned {
    /// The text with inline markup removed (white space not yet collapsed).
    pub text: String,
    /// Whether it had a link, an image or an HTML tag.
    pub had_markup: bool,
    /// Whether a letter or digit occurs outside links, images and tags.
    pub text_outside: bool,
}

impl Cleaned {
    /// Markup (a link, an image, a tag) replaced by `shown`.
    fn markup(&mut self, shown: &str) {
        self.had_markup = true;
        self.text.push_str(shown);
    }

    /// An rst reference or role whose text `inner` (`Title <target>`) shows as its title.
    fn reference(&mut self, inner: &str) {
        self.text.push_str(strip_target(inner).trim());
        self.text_outside |= inner.chars().any(char::is_alphanumeric);
    }
}

/// Cleans inline markup out of `s`. See the [module documentation](self).
pub(super) fn clean(s: &str) -> Cleaned {
    clean_with(s, true)
}

/// [`clean`], with shortcut reference links (`[Guides]`) shown as their text or, for
/// headings (`… [stable]`), left as they are.
pub(super) fn clean_with(s: &str, shortcuts: bool) -> Cleaned {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Cleaned::default();
    let mut i = 0usize;
    let at = |k: usize| chars.get(k).copied();
    while let Some(c) = at(i) {
        // Backslash escapes: `\|` → `|`.
        if c == '\\' && at(i + 1).is_some_and(|d| d.is_ascii_punctuation()) {
            out.text.extend(at(i + 1));
            i += 2;
            continue;
        }
        // Inline code is kept as it is, backticks included.
        if c == '`' {
            let run = count_run(&chars, i, '`');
            if let Some(end) = find_run(&chars, i + run, '`', run) {
                let inner: String = chars.get(i + run..end).unwrap_or_default().iter().collect();
                let after = end + run;
                // rst references: `text <url>`_ and `text`_ show their text.
                if run == 1 && at(after) == Some('_') {
                    out.reference(&inner);
                    i = after + count_run(&chars, after, '_');
                    continue;
                }
                out.text.push('`');
                out.text.push_str(&inner);
                out.text.push('`');
                out.text_outside |= inner.chars().any(char::is_alphanumeric);
                i = after;
                continue;
            }
        }
        // Emoji shortcodes (`:balloon:`) go.
        if c == ':'
            && let Some(next) = shortcode(&chars, i)
        {
            i = next;
            continue;
        }
        // rst roles: :ref:`Title <target>` → Title.
        if c == ':'
            && let Some((inner, next)) = rst_role(&chars, i)
        {
            out.reference(&inner);
            i = next;
            continue;
        }
        // Images, links and tags: their text (or nothing).
        if let Some((shown, next)) = markup(&chars, i, shortcuts) {
            out.markup(&shown);
            i = next;
            continue;
        }
        // HTML entities: `&amp;` → `&`.
        if c == '&'
            && let Some((decoded, next)) = entity(&chars, i)
        {
            out.text.push(decoded);
            i = next;
            continue;
        }
        // Strong emphasis `**x**` and emphasis `*x*`: the markers go.
        if (c == '*' || c == '_') && emphasis_marker(&chars, i) {
            i += count_run(&chars, i, c).min(3);
            continue;
        }
        // rst references: `Jansson_` → Jansson.
        if c == '_'
            && i > 0
            && chars.get(i - 1).is_some_and(|d| d.is_alphanumeric())
            && at(i + 1).is_none_or(|d| !(d.is_alphanumeric() || d == '_'))
        {
            i += 1;
            continue;
        }
        if c.is_alphanumeric() {
            out.text_outside = true;
        }
        out.text.push(c);
        i += 1;
    }
    out
}

/// The length of the run of `c` starting at `i`.
fn count_run(chars: &[char], i: usize, c: char) -> usize {
    chars
        .get(i..)
        .unwrap_or_default()
        .iter()
        .take_while(|&&d| d == c)
        .count()
}

/// The start of the next run of exactly `len` `c`s at or after `from`.
fn find_run(chars: &[char], from: usize, c: char, len: usize) -> Option<usize> {
    let mut k = from;
    while k < chars.len() {
        if chars.get(k) == Some(&c) {
            let run = count_run(chars, k, c);
            if run == len {
                return Some(k);
            }
            k += run;
        } else {
            k += 1;
        }
    }
    None
}

/// `Title <target>` → `Title` (rst references and roles).
fn strip_target(inner: &str) -> &str {
    match (inner.rfind('<'), inner.ends_with('>')) {
        (Some(lt), true) if lt > 0 => inner.get(..lt).unwrap_or(inner),
        _ => inner,
    }
}

/// An emoji shortcode at `i` (`:balloon:` between spaces): the index after it.
fn shortcode(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 && !chars.get(i - 1).is_some_and(|c| c.is_whitespace()) {
        return None;
    }
    let len = chars
        .get(i + 1..)?
        .iter()
        .take_while(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '+' | '-')
        })
        .count();
    let close = i + 1 + len;
    let after_ok = chars.get(close + 1).is_none_or(|c| c.is_whitespace());
    (len >= 2 && chars.get(close) == Some(&':') && after_ok)
        .then(|| close + 1 + usize::from(chars.get(close + 1).is_some()))
}

/// An rst role at `i` (`:name:`content``): its content and the index after it.
fn rst_role(chars: &[char], i: usize) -> Option<(String, usize)> {
    if i > 0 && chars.get(i - 1).is_some_and(|c| c.is_alphanumeric()) {
        return None;
    }
    let mut k = i + 1;
    while chars
        .get(k)
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '.'))
    {
        k += 1;
    }
    if k == i + 1 || chars.get(k) != Some(&':') || chars.get(k + 1) != Some(&'`') {
        return None;
    }
    let start = k + 2;
    let end = find_run(chars, start, '`', 1)?;
    let inner: String = chars.get(start..end)?.iter().collect();
    Some((inner, end + 1))
}

/// Markup at `i`: what it shows as text and the index after it. Images (`![alt](img)`)
/// show nothing; shortcut reference links (`[Guides]`, with `shortcuts`) and links their
/// text, cleaned, unless the link wraps an image (`[![alt](img)](url)`: dropped with it);
/// an HTML tag or autolink what [`angle`] makes of it.
fn markup(chars: &[char], i: usize, shortcuts: bool) -> Option<(String, usize)> {
    match chars.get(i)? {
        '!' if chars.get(i + 1) == Some(&'[') => {
            link(chars, i + 1).map(|(_, next)| (String::new(), next))
        }
        '[' => {
            let shortcut = shortcuts.then(|| shortcut(chars, i)).flatten();
            let (text, next) = shortcut.or_else(|| {
                link(chars, i).map(|(text, next)| {
                    let image = text.trim_start().starts_with("![");
                    (if image { String::new() } else { text }, next)
                })
            })?;
            Some((clean(&text).text, next))
        }
        '<' => angle(chars, i),
        _ => None,
    }
}

/// A Markdown link at `i` (`[text](url)` or `[text][ref]`): its text and the index after
/// it. `[n]` alone (a citation marker) and other bracketed text are not links.
fn link(chars: &[char], i: usize) -> Option<(String, usize)> {
    if chars.get(i) != Some(&'[') {
        return None;
    }
    let mut depth = 0usize;
    let mut k = i;
    let close = loop {
        match chars.get(k)? {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    break k;
                }
            }
            '\n' => return None,
            _ => {}
        }
        k += 1;
    };
    let text: String = chars.get(i + 1..close)?.iter().collect();
    if text
        .chars()
        .all(|c| c.is_ascii_digit() || c == ',' || c == ' ')
    {
        return None;
    }
    let (open, shut) = match chars.get(close + 1) {
        Some('(') => ('(', ')'),
        Some('[') => ('[', ']'),
        _ => return None,
    };
    let mut depth = 0usize;
    let mut k = close + 1;
    loop {
        let c = *chars.get(k)?;
        if c == open {
            depth += 1;
        } else if c == shut {
            depth -= 1;
            if depth == 0 {
                return Some((text, k + 1));
            }
        } else if c == '\n' {
            return None;
        }
        k += 1;
    }
}

/// A shortcut reference link at `i`: `[text]` of at most three words, not a citation
/// marker and not followed by `(`, `[` or `:`. Its text and the index after it.
fn shortcut(chars: &[char], i: usize) -> Option<(String, usize)> {
    let close = i + chars.get(i..)?.iter().position(|&c| c == ']')?;
    let text: String = chars.get(i + 1..close)?.iter().collect();
    let after = chars.get(close + 1).copied();
    let before_ok = i == 0
        || chars
            .get(i - 1)
            .is_some_and(|c| c.is_whitespace() || *c == '(');
    let ok = before_ok
        && !text.contains(['[', '!'])
        && text.chars().any(char::is_alphabetic)
        && text.split_whitespace().count() <= 3
        && after.is_none_or(|c| !matches!(c, '(' | '[' | ':'));
    ok.then_some((text, close + 1))
}

/// An HTML entity at `i` (`&amp;`, `&#39;`, `&#x2014;`): the character and the index
/// after it.
fn entity(chars: &[char], i: usize) -> Option<(char, usize)> {
    let semi = i + chars.get(i..)?.iter().take(10).position(|&c| c == ';')?;
    let name: String = chars.get(i + 1..semi)?.iter().collect();
    let c = match name.as_str() {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" | "emsp" | "ensp" | "thinsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "copy" => '©',
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code)?
        }
    };
    Some((c, semi + 1))
}

/// An HTML tag or comment (dropped), or an autolink `<https://…>` (its address), at `i`.
fn angle(chars: &[char], i: usize) -> Option<(String, usize)> {
    let rest: String = chars.get(i..)?.iter().take(4).collect();
    if rest == "<!--" {
        let s: String = chars.get(i..)?.iter().collect();
        let end = s.find("-->").map_or(s.len(), |e| e + 3);
        return Some((String::new(), i + s.get(..end)?.chars().count()));
    }
    let close = i + chars.get(i..)?.iter().position(|&c| c == '>')?;
    let inner: String = chars.get(i + 1..close)?.iter().collect();
    if inner.contains('<') {
        return None;
    }
    let lower = inner.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
    {
        return Some((inner, close + 1));
    }
    let name: String = lower
        .trim_start_matches('/')
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    if !HTML_TAGS.contains(&name.as_str()) {
        return None;
    }
    let after_name = lower
        .trim_start_matches('/')
        .get(name.len()..)
        .unwrap_or("");
    if !(after_name.is_empty() || after_name.starts_with([' ', '/', '\t'])) {
        return None;
    }
    let replacement = if name == "br" { " " } else { "" };
    Some((replacement.to_string(), close + 1))
}

/// Whether the `*` run at `i` opens or closes emphasis: `**x**`, `*x*`
/// (a single `_` is left alone: snake_case words).
fn emphasis_marker(chars: &[char], i: usize) -> bool {
    let Some(&c) = chars.get(i) else {
        return false;
    };
    if i > 0 && chars.get(i - 1) == Some(&c) {
        return false;
    }
    // `_x_`/`__x__` are left alone: snake_case and dunder names.
    if c == '_' {
        return false;
    }
    let run = count_run(chars, i, c);
    let before = if i == 0 {
        None
    } else {
        chars.get(i - 1).copied()
    };
    let after = chars.get(i + run).copied();
    let word = |ch: Option<char>| ch.is_some_and(char::is_alphanumeric);
    let space = |ch: Option<char>| ch.is_none_or(char::is_whitespace);
    // Opening: not after a word character, followed by a non-space with a closing run.
    let opens = !word(before) && !space(after) && find_run(chars, i + run, c, run).is_some();
    // Closing: after a non-space, not followed by a word character.
    let closes = !space(before) && !word(after) && before != Some(c);
    opens || (closes && has_opener(chars, i, c, run))
}

/// Whether a matching opening run of `len` `c`s precedes `i`.
fn has_opener(chars: &[char], i: usize, c: char, len: usize) -> bool {
    let mut k = 0usize;
    while k < i {
        if chars.get(k) == Some(&c) {
            let run = count_run(chars, k, c);
            if run == len && k + run < i {
                return true;
            }
            k += run;
        } else {
            k += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::clean;

    fn text(s: &str) -> String {
        clean(s).text
    }

    #[test]
    fn links_images_and_tags() {
        assert_eq!(
            text("See [the guide](https://x.org/g) now."),
            "See the guide now."
        );
        assert_eq!(text("Logo ![logo](a.png) here"), "Logo  here");
        assert_eq!(
            text("[![Crates.io](https://img.shields.io/c.svg)](https://crates.io/c)"),
            ""
        );
        assert_eq!(text("A <b>bold</b> move<br>ahead"), "A bold move ahead");
        assert_eq!(text("Keep Vec<T> as is"), "Keep Vec<T> as is");
        assert_eq!(
            text("Mail <mailto:a@b.c> or <https://x.org>"),
            "Mail mailto:a@b.c or https://x.org"
        );
        assert_eq!(text("x<!-- hidden -->y"), "xy");
        assert_eq!(text("A &amp; B&emsp;&#39;C&#x27;"), "A & B 'C'");
        assert_eq!(
            text(":balloon: Thanks! Time: 10:30 or a:b:c"),
            "Thanks! Time: 10:30 or a:b:c"
        );
        assert_eq!(
            text("See the [Guides] or [API documentation]."),
            "See the Guides or API documentation."
        );
        assert_eq!(
            text("[bug introduced in coreutils-9.0]"),
            "[bug introduced in coreutils-9.0]"
        );
        let badges = clean(
            "[![CI](https://ci/badge.svg)](https://ci) [![Docs](https://d/b.svg)](https://d)",
        );
        assert!(badges.had_markup && !badges.text_outside);
    }

    #[test]
    fn emphasis_code_and_markers() {
        assert_eq!(
            text("It is **very** fast and *safe*."),
            "It is very fast and safe."
        );
        assert_eq!(
            text("Use `a*b` and snake_case_names"),
            "Use `a*b` and snake_case_names"
        );
        assert_eq!(text("2 * 3 * 4"), "2 * 3 * 4");
        assert_eq!(text("Cleaned every month [2]."), "Cleaned every month [2].");
        assert_eq!(text(r"a \| b \* c"), "a | b * c");
    }

    #[test]
    fn rst_inline() {
        assert_eq!(text("Run ``make`` first."), "Run `make` first.");
        assert_eq!(
            text("See :ref:`the install guide <install>`."),
            "See the install guide."
        );
        assert_eq!(
            text("Read `Python <https://python.org>`_ docs."),
            "Read Python docs."
        );
        assert_eq!(text("Call :func:`foo`."), "Call foo.");
        assert_eq!(
            text("Jansson_ is a library; see __init__ and foo_bar."),
            "Jansson is a library; see __init__ and foo_bar."
        );
    }
}
