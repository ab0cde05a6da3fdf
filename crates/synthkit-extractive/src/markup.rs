//! Line-level markup: what a line of Markdown, reStructuredText, converted HTML or plain
//! text is (a fence, a heading underline, a list item, a table row, a directive, a source
//! label…), for the sentence splitter.

use super::inline::clean;

/// The characters of rst section adornments (and Markdown setext underlines).
const ADORNMENTS: &[char] = &['=', '-', '~', '^', '*', '#', '+'];

/// rst directives whose body is code.
const CODE_DIRECTIVES: &[&str] = &["code-block", "code", "sourcecode", "literalinclude"];

/// rst directives whose argument and body are prose (admonitions and the like).
const PROSE_DIRECTIVES: &[&str] = &[
    "note",
    "warning",
    "tip",
    "hint",
    "important",
    "attention",
    "caution",
    "danger",
    "error",
    "seealso",
    "admonition",
    "versionadded",
    "versionchanged",
    "deprecated",
    "topic",
    "sidebar",
];

/// The indentation of `line` in columns (a tab counts 4).
pub(super) fn indent(line: &str) -> usize {
    let mut n = 0;
    for c in line.chars() {
        match c {
            ' ' => n += 1,
            '\t' => n += 4,
            _ => break,
        }
    }
    n
}

/// A code fence (```` ``` ```` or `~~~`, at least 3): its character and length.
pub(super) fn fence(trimmed: &str) -> Option<(char, usize)> {
    let c = trimmed.chars().next().filter(|&c| c == '`' || c == '~')?;
    let n = trimmed.chars().take_while(|&d| d == c).count();
    // A backtick fence's info string has no backtick (else it is inline code).
    let info = trimmed.get(n..).unwrap_or("");
    (n >= 3 && !(c == '`' && info.contains('`'))).then_some((c, n))
}

/// Whether `trimmed` closes a fence opened with `open`.
pub(super) fn closes_fence(trimmed: &str, open: (char, usize)) -> bool {
    let n = trimmed.chars().take_while(|&d| d == open.0).count();
    n >= open.1 && trimmed.chars().all(|d| d == open.0)
}

/// A source label line, exactly `[n]`: its number (the engine's own reader).
pub(super) use synthkit::citation::label_number as label;

/// A section adornment (`=====`, `-----`, `~~~`): one character from [`ADORNMENTS`]
/// repeated, at least 3 long; its character.
pub(super) fn adornment(trimmed: &str) -> Option<char> {
    let c = trimmed.chars().next().filter(|c| ADORNMENTS.contains(c))?;
    (trimmed.chars().count() >= 3 && trimmed.chars().all(|d| d == c)).then_some(c)
}

/// An ATX heading (`## Title`): its level and text.
pub(super) fn atx_heading(trimmed: &str) -> Option<(usize, String)> {
    let level = trimmed.chars().take_while(|&c| c == '#').count();
    let rest = trimmed.get(level..)?;
    if level == 0 || level > 6 || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some((level, rest.trim().trim_end_matches('#').trim().to_string()))
}

/// An HTML heading on one line (`<h2 …>Title</h2>`): its level and text.
pub(super) fn html_heading(trimmed: &str) -> Option<(usize, String)> {
    let lower = trimmed.get(..3)?.to_ascii_lowercase();
    let level = lower.strip_prefix("<h")?.parse::<usize>().ok()?;
    (1..=6)
        .contains(&level)
        .then(|| (level, clean(trimmed).text.trim().to_string()))
}

/// An outline heading (`* Release 1.2`, `** Bug fixes`, as GNU NEWS files and Emacs
/// outlines have them): its level (the number of stars) and text.
pub(super) fn outline_heading(trimmed: &str) -> Option<(usize, String)> {
    let level = trimmed.chars().take_while(|&c| c == '*').count();
    let rest = trimmed.get(level..)?.strip_prefix(' ')?;
    (level > 0 && rest.chars().any(char::is_alphanumeric)).then(|| (level, rest.trim().to_string()))
}

/// Version numbers and release lines, read as the chunker reads them.
pub(super) use synthkit::text::plain::{has_version, is_version_line};

/// What an rst directive line (`.. name:: argument`) is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Directive {
    /// Its body is code.
    Code,
    /// Its argument (given here) and body are prose.
    Prose(String),
    /// Skipped with its body: images, targets (`.. _label:`), comments, substitutions…
    Skip,
}

/// An rst explicit markup line (`.. name::`, `.. _label:`, `.. |sub| image::`, `..`).
pub(super) fn directive(trimmed: &str) -> Option<Directive> {
    let rest = trimmed.strip_prefix("..")?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let rest = rest.trim_start();
    if let Some((name, arg)) = rest.split_once("::") {
        let name = name.trim().to_ascii_lowercase();
        if CODE_DIRECTIVES.contains(&name.as_str()) {
            return Some(Directive::Code);
        }
        if PROSE_DIRECTIVES.contains(&name.as_str()) {
            return Some(Directive::Prose(arg.trim().to_string()));
        }
    }
    Some(Directive::Skip)
}

/// A list item's marker (`- `, `* `, `+ `, `• `, `1. `, `1) `, `a) `): the marker's width
/// (the item's text starts that many columns after the line's indentation).
pub(super) fn list_marker(trimmed: &str) -> Option<usize> {
    for marker in ["- ", "* ", "+ ", "• ", "‣ ", "– "] {
        if trimmed.starts_with(marker) {
            let spaces = trimmed
                .get(marker.len()..)?
                .chars()
                .take_while(|&c| c == ' ')
                .count();
            return Some(marker.chars().count() + spaces.min(3));
        }
    }
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    let letter = digits == 0
        && trimmed
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase())
        && trimmed.get(1..3) == Some(") ");
    if (1..=3).contains(&digits) || letter {
        let n = digits.max(1);
        let rest = trimmed.get(n..)?;
        if rest.starts_with(". ") || rest.starts_with(") ") {
            let spaces = rest.get(1..)?.chars().take_while(|&c| c == ' ').count();
            return Some(n + 1 + spaces.min(3));
        }
    }
    None
}

/// A `key: value` metadata line, as nodes render their metadata: a lowercase key without
/// spaces, a colon and a space.
pub(super) fn is_metadata_line(line: &str) -> bool {
    let line = line.trim();
    let Some((key, value)) = line.split_once(':') else {
        return false;
    };
    let mut chars = key.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    first_ok
        && key.len() <= 40
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && (value.is_empty() || value.starts_with(' '))
        && line.chars().count() <= 300
}

/// Lines that are never text: link reference definitions (`[id]: https://…`), Emacs
/// mode lines (`-*- outline -*-`).
pub(super) fn is_markup_only(trimmed: &str) -> bool {
    if trimmed.contains("-*-") {
        return true;
    }
    if let Some(rest) = trimmed.strip_prefix('[')
        && let Some((_, target)) = rest.split_once("]:")
    {
        let target = target.trim();
        return !target.contains(' ') && !target.is_empty();
    }
    false
}

/// An rst field or directive option line (`:alt: A logo`, `:linenos:`).
pub(super) fn is_field_line(trimmed: &str) -> bool {
    trimmed.starts_with(':')
        && trimmed
            .get(1..)
            .and_then(|r| r.split_once(':'))
            .is_some_and(|(name, _)| !name.is_empty() && !name.contains(' '))
}

/// Commands that start a shell line.
const COMMANDS: &[&str] = &[
    "apt", "apt-get", "brew", "cargo", "cd", "cmake", "curl", "docker", "git", "go", "ls", "make",
    "mkdir", "npm", "pip", "pip3", "python", "python3", "rustup", "sudo", "wget", "yarn",
];

/// Whether a line looks like code rather than words (for indented blocks).
pub(super) fn code_ish(trimmed: &str) -> bool {
    if ["$ ", "# ", "% ", ">>> ", "//", "./"]
        .iter()
        .any(|p| trimmed.starts_with(p))
    {
        return true;
    }
    let first = trimmed.split_whitespace().next().unwrap_or("");
    if COMMANDS.contains(&first) {
        return true;
    }
    // Command-line flags: `--region`, ` -v`.
    let flag = trimmed.split_whitespace().any(|w| {
        let w = w.trim_start_matches(['\'', '"', '(', '`']);
        (w.starts_with("--") && w.chars().nth(2).is_some_and(char::is_alphanumeric))
            || (w.len() == 2
                && w.starts_with('-')
                && w.chars().nth(1).is_some_and(|c| c.is_ascii_alphabetic()))
    });
    if flag {
        return true;
    }
    trimmed.contains(['{', '}', ';', '=', '$', '<', '>', '\\', '|'])
        || trimmed.contains("()")
        || trimmed.contains("::")
        || trimmed.contains("&&")
}

/// Whether an indented block (its non-blank lines, trimmed) reads as prose: sentences of
/// words, not commands.
pub(super) fn prose_block(lines: &[&str]) -> bool {
    let text = lines.join(" ");
    let words = text.split_whitespace().count();
    let chars = text.chars().count().max(1);
    let symbols = text
        .chars()
        .filter(|c| "{}();=$<>\\|&[]".contains(*c))
        .count();
    let avg_line = chars / lines.len().max(1);
    words >= 8
        && avg_line >= 30
        && symbols * 40 < chars
        && text
            .trim_end()
            .ends_with(['.', '!', '?', ':', ')', '"', '\''])
}

/// A table row (`| a | b |`): its cells, cleaned; `None` for a separator row
/// (`|---|:---:|`) or a row without text.
pub(super) fn table_cells(trimmed: &str) -> Option<Vec<String>> {
    if !trimmed.chars().any(char::is_alphanumeric) {
        return None;
    }
    let cells: Vec<String> = table_cells_in_place(trimmed)
        .into_iter()
        .filter(|c| !c.is_empty())
        .collect();
    (!cells.is_empty()).then_some(cells)
}

/// A table row's cells, cleaned, in their columns (empty cells kept, the empty one after
/// a closing `|` left out).
pub(super) fn table_cells_in_place(trimmed: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = trimmed.trim_start_matches('|').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    if !cell.trim().is_empty() {
        cells.push(cell);
    }
    cells
        .iter()
        .map(|c| {
            clean(c)
                .text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Whether a table row reads as prose: some cell has at least 5 words.
pub(super) fn prose_row(cells: &[String]) -> bool {
    cells.iter().any(|c| c.split_whitespace().count() >= 5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        assert_eq!(fence("```rust"), Some(('`', 3)));
        assert_eq!(fence("~~~~"), Some(('~', 4)));
        assert_eq!(fence("``x``"), None);
        assert!(closes_fence("````", ('`', 3)) && !closes_fence("``", ('`', 3)));
        assert_eq!(label("[12]"), Some(12));
        assert_eq!(label("[a]"), None);
        assert_eq!(adornment("======"), Some('='));
        assert_eq!(adornment("- - -"), None);
        assert_eq!(atx_heading("## Title ##"), Some((2, "Title".to_string())));
        assert_eq!(atx_heading("#hashtag"), None);
        assert_eq!(
            outline_heading("** Bug fixes"),
            Some((2, "Bug fixes".to_string()))
        );
        assert!(is_version_line("Version 1.2 (2020-01-01)"));
        assert!(is_version_line("v2.0.1"));
        assert!(!is_version_line("Requires Python 3.8 or later"));
        assert_eq!(directive(".. code-block:: python"), Some(Directive::Code));
        assert_eq!(directive(".. _install:"), Some(Directive::Skip));
        assert_eq!(
            directive(".. note:: Be careful."),
            Some(Directive::Prose("Be careful.".into()))
        );
        assert_eq!(directive("...and so on"), None);
        assert_eq!(list_marker("- item"), Some(2));
        assert_eq!(list_marker("12. item"), Some(4));
        assert_eq!(list_marker("-r flag"), None);
        assert!(is_markup_only("[badge]: https://img.shields.io/x.svg"));
        assert!(is_field_line(":alt: A logo") && !is_markup_only(":alt: A logo"));
        assert!(code_ish("let x = 5;") && !code_ish("show all files"));
        assert!(code_ish("cargo run --release") && code_ish("tool -v file"));
        assert_eq!(table_cells("| --- | :---: |"), None);
        assert_eq!(
            table_cells(r"| `a\|b` | [or](x) |"),
            Some(vec!["`a|b`".to_string(), "or".to_string()])
        );
    }
}
