//! Release headers of plain text: the headings of NEWS files and changelogs, which have no
//! markup, so that each chunk knows which release it is about (its `section`). Shared by
//! the structure-aware chunker (`synthkit-documents`) and the offline answerer
//! (`synthkit-extractive`), which must agree on what a release header is.
//!
//! - GNU outline headings: `* Noteworthy changes in release 9.1 (2022-04-15) [stable]`
//!   (a `*` line naming a version, level 1) and the `** Bug fixes` lines under them
//!   (level 2).
//! - A release line on its own between blank lines: `Version 1.2 (2020-01-01)`, `v2.0.1`,
//!   `1.4.2`, a Debian changelog's `pkg (1.2-3) unstable; urgency=low`.
//! - A paragraph right after a rule line (`-----`, `=====`, at least 10 long) whose first
//!   line names a version: bash's `This is a terse description of the new features added
//!   to bash-4.0 since the release of bash-3.2.` Its first sentence is the title; the
//!   paragraph stays text.

/// Whether `text` holds a version number (`8.6`, `v1.2.3`, `2.0-1`, `bash-4.0`).
pub fn has_version(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    chars.windows(3).any(|w| match w {
        [a, '.', b] => a.is_ascii_digit() && b.is_ascii_digit(),
        _ => false,
    })
}

/// A line announcing a release on its own (`Version 1.2 (2020-01-01)`, `v2.0`, `1.4.2`,
/// a Debian changelog's `pkg (1.2-3) unstable; urgency=low`).
pub fn is_version_line(trimmed: &str) -> bool {
    if !has_version(trimmed) || trimmed.ends_with('.') || trimmed.split_whitespace().count() > 10 {
        return false;
    }
    if trimmed.contains("urgency=") {
        return true;
    }
    let first = trimmed
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_start_matches(['[', '('])
        .to_ascii_lowercase();
    first == "version"
        || first == "release"
        || first.starts_with(|c: char| c.is_ascii_digit())
        || (first.starts_with('v')
            && first
                .get(1..2)
                .is_some_and(|c| c.chars().all(|d| d.is_ascii_digit())))
}

/// An outline heading (`* Release 1.2`, `** Bug fixes`): its level and title.
pub fn outline_heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|&c| c == '*').count();
    let rest = line.get(level..)?.strip_prefix(' ')?.trim();
    (level > 0 && rest.chars().any(char::is_alphanumeric)).then_some((level, rest))
}

/// A rule line: at least 10 of one of `-`, `=`, `_`, `*`, nothing else.
pub fn is_rule(line: &str) -> bool {
    let t = line.trim();
    let Some(c) = t.chars().next() else {
        return false;
    };
    matches!(c, '-' | '=' | '_' | '*') && t.chars().count() >= 10 && t.chars().all(|d| d == c)
}

/// Words of a paragraph that heads a release.
const RELEASE_WORDS: &[&str] = &["release", "version", "changes", "new features", "news"];

/// The title of a paragraph that heads a release (after a rule line): its first sentence,
/// when its first line names a version and it speaks of a release, version, changes or
/// new features.
pub fn release_paragraph_title(first_line: &str, paragraph: &str) -> Option<String> {
    if !has_version(first_line) {
        return None;
    }
    let flat = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = flat
        .match_indices(". ")
        .map(|(i, _)| i + 1)
        .find(|&i| i >= 20)
        .unwrap_or(flat.len());
    let title = flat.get(..end).unwrap_or(&flat).trim();
    let lower = title.to_lowercase();
    let speaks = RELEASE_WORDS.iter().any(|w| lower.contains(w));
    (speaks && has_version(title) && title.split_whitespace().count() <= 40)
        .then(|| title.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_lines() {
        assert!(is_version_line("Version 1.2 (2020-01-01)"));
        assert!(is_version_line("v2.0.1"));
        assert!(is_version_line("bash (5.2.15-2) unstable; urgency=medium"));
        assert!(!is_version_line("Requires Python 3.8 or later"));
        assert_eq!(
            outline_heading("* Noteworthy changes in release 9.1 (2022-04-15) [stable]"),
            Some((1, "Noteworthy changes in release 9.1 (2022-04-15) [stable]"))
        );
        assert_eq!(outline_heading("** Bug fixes"), Some((2, "Bug fixes")));
        assert!(is_rule(
            "-------------------------------------------------------------------------------"
        ));
        assert!(!is_rule("----") && !is_rule("-- x --"));
        assert_eq!(
            release_paragraph_title(
                "This is a terse description of the new features added to bash-4.0 since",
                "This is a terse description of the new features added to bash-4.0 since\nthe release of bash-3.2.  As always, the manual page is the place to look."
            )
            .as_deref(),
            Some("This is a terse description of the new features added to bash-4.0 since the release of bash-3.2.")
        );
        assert_eq!(
            release_paragraph_title("No version here", "No version here."),
            None
        );
        let readme = "\"make check\" failure on IRIX 6.5 and Solaris <= 9";
        assert_eq!(release_paragraph_title(readme, readme), None);
    }
}
