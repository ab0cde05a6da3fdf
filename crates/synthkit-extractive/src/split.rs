//! Running text into sentences: terminators, abbreviations and initials.

/// Words whose trailing period does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "al", "approx", "apr", "aug", "ca", "cf", "co", "corp", "dec", "dept", "dr", "e.g", "eg",
    "est", "feb", "fig", "figs", "i.e", "ie", "inc", "jan", "jr", "jul", "jun", "lt", "ltd", "mar",
    "mr", "mrs", "ms", "mt", "no", "nos", "nov", "oct", "p", "pp", "prof", "sep", "sept", "sr",
    "st", "vol", "vols", "vs",
];

/// Whether a line ends a sentence (a terminator, possibly followed by closing quotes or
/// brackets); a line without one continues on the next line when it is long enough.
pub(super) fn ends_sentence(line: &str) -> bool {
    line.trim_end_matches(is_closer)
        .chars()
        .last()
        .is_some_and(|c| matches!(c, '.' | '!' | '?' | '。' | '！' | '？'))
}

pub(super) fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '”' | '’' | '»' | '」' | '』')
}

/// Splits running text at sentence ends, white space collapsed.
pub(super) fn split_segment(text: &str, out: &mut Vec<String>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut start = 0usize;
    let mut i = 0usize;
    while let Some(&(pos, c)) = chars.get(i) {
        // Inline code (`a. b`) is never cut.
        if c == '`' {
            let run = chars
                .get(i..)
                .unwrap_or_default()
                .iter()
                .take_while(|&&(_, d)| d == '`')
                .count();
            let close = (i + run..chars.len()).find(|&k| {
                chars
                    .get(k..k + run)
                    .is_some_and(|w| w.iter().all(|&(_, d)| d == '`'))
                    && chars.get(k + run).is_none_or(|&(_, d)| d != '`')
            });
            i = close.map_or(i + run, |k| k + run);
            continue;
        }
        let cjk = matches!(c, '。' | '！' | '？');
        if !(cjk || matches!(c, '.' | '!' | '?')) {
            i += 1;
            continue;
        }
        // Take the whole run of terminators and closing quotes/brackets.
        let mut j = i + 1;
        while let Some(&(_, d)) = chars.get(j) {
            if matches!(d, '.' | '!' | '?' | '。' | '！' | '？') || is_closer(d) {
                j += 1;
            } else {
                break;
            }
        }
        let end = chars.get(j).map_or(text.len(), |&(p, _)| p);
        let next = chars.get(j).map(|&(_, d)| d);
        let boundary = if cjk {
            true
        } else {
            match next {
                None => true,
                Some(d) if d.is_whitespace() => {
                    let next_word = chars
                        .get(j..)
                        .unwrap_or_default()
                        .iter()
                        .map(|&(_, d)| d)
                        .find(|d| !d.is_whitespace());
                    let lower_next = next_word.is_some_and(char::is_lowercase);
                    let abbreviation =
                        c == '.' && is_abbreviation(text.get(start..pos).unwrap_or(""));
                    // A citation marker after a quoted terminator (`is "." [3].`) is
                    // the sentence's own.
                    let marker_next = starts_with_marker(text.get(end..).unwrap_or(""));
                    !lower_next && !abbreviation && !marker_next
                }
                Some(_) => false,
            }
        };
        if boundary {
            push_sentence(text.get(start..end).unwrap_or(""), out);
            start = end;
        }
        i = j;
    }
    push_sentence(text.get(start..).unwrap_or(""), out);
}

/// Whether `text` (after white space) starts with a citation marker (`[3]`, `[1, 4]`).
fn starts_with_marker(text: &str) -> bool {
    let Some(inside) = text.trim_start().strip_prefix('[') else {
        return false;
    };
    inside.split_once(']').is_some_and(|(inside, _)| {
        inside.chars().any(|c| c.is_ascii_digit())
            && inside
                .chars()
                .all(|c| c.is_ascii_digit() || c == ',' || c == ' ')
    })
}

/// Whether the word just before a period is an abbreviation or an initial.
fn is_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or("")
        .trim_start_matches(|c: char| !c.is_alphanumeric());
    let mut chars = word.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && c.is_uppercase()
    {
        return true;
    }
    let lower = word.to_lowercase();
    ABBREVIATIONS.contains(&lower.as_str())
}

fn push_sentence(s: &str, out: &mut Vec<String>) {
    if !s.chars().any(char::is_alphanumeric) {
        return;
    }
    let normalized: Vec<&str> = s.split_whitespace().collect();
    out.push(normalized.join(" "));
}

/// A sentence's leading bracketed note (`[bug introduced in 8.6]`, not a marker) and the
/// text after it.
pub(super) fn bracket_note(s: &str) -> (Option<&str>, &str) {
    if !s.starts_with('[') {
        return (None, s);
    }
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    // Markers after the note stay with it.
                    let mut end = i + 1;
                    while let Some(after) = s.get(end..) {
                        let trimmed = after.trim_start();
                        let skip = after.len() - trimmed.len();
                        match trimmed.find(']') {
                            Some(close)
                                if trimmed.starts_with('[')
                                    && !super::cite::markers(&format!(
                                        " {}",
                                        trimmed.get(..=close).unwrap_or("")
                                    ))
                                    .is_empty() =>
                            {
                                end += skip + close + 1;
                            }
                            _ => break,
                        }
                    }
                    let note = s.get(..end).unwrap_or(s);
                    let rest = s.get(end..).unwrap_or("").trim_start();
                    let words = note.chars().any(char::is_alphabetic);
                    let ok = words && !rest.starts_with(['.', ',', ';', ':', '(']);
                    return if ok { (Some(note), rest) } else { (None, s) };
                }
            }
            _ => {}
        }
    }
    (None, s)
}
