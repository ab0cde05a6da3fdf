//! Sentence splitting: paragraphs into sentences, skipping metadata header blocks,
//! headings, rules and code fences, with list items and table rows standing alone and
//! abbreviations and initials not ending a sentence.

/// Words whose trailing period does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "al", "approx", "apr", "aug", "ca", "cf", "co", "corp", "dec", "dept", "dr", "e.g", "eg",
    "est", "feb", "fig", "figs", "i.e", "ie", "inc", "jan", "jr", "jul", "jun", "lt", "ltd", "mar",
    "mr", "mrs", "ms", "mt", "no", "nos", "nov", "oct", "p", "pp", "prof", "sep", "sept", "sr",
    "st", "vol", "vols", "vs",
];

/// Appends the sentences of `text` to `out`, whitespace collapsed.
pub(super) fn split_sentences(text: &str, out: &mut Vec<String>) {
    let mut block: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            split_block(&block, out);
            block.clear();
        } else {
            block.push(line);
        }
    }
    split_block(&block, out);
}

/// A `key: value` metadata line, as nodes render their metadata: a lowercase key without
/// spaces, a colon and a space.
fn is_metadata_line(line: &str) -> bool {
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

/// Strips a list marker (`- `, `* `, `+ `, `• `, `1. `, `1) `, `> `); `None` when the line
/// has none.
fn strip_marker(line: &str) -> Option<&str> {
    for marker in ["- ", "* ", "+ ", "• ", "> "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return Some(rest);
        }
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        let rest = line.get(digits..)?;
        return rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") "));
    }
    None
}

/// Whether a line ends a sentence (a terminator, possibly followed by closing quotes or
/// brackets); a line without one continues on the next line when it is long enough.
fn ends_sentence(line: &str) -> bool {
    line.trim_end_matches(is_closer)
        .chars()
        .last()
        .is_some_and(|c| matches!(c, '.' | '!' | '?' | '。' | '！' | '？'))
}

/// Splits one paragraph: metadata blocks are skipped; headings, rules and code fences
/// dropped; list items and table rows stand alone; wrapped lines are joined.
fn split_block(lines: &[&str], out: &mut Vec<String>) {
    if lines.is_empty() || lines.iter().all(|l| is_metadata_line(l)) {
        return;
    }
    let mut segment = String::new();
    let mut prev_len = 0usize;
    let mut prev_ends = true;
    for raw in lines {
        let line = raw.trim();
        if !line.chars().any(char::is_alphanumeric) || line.starts_with("```") {
            flush(&mut segment, out);
            prev_ends = true;
            continue;
        }
        if line.starts_with('#') {
            flush(&mut segment, out);
            prev_ends = true;
            continue;
        }
        let (content, starts_new) = if let Some(rest) = strip_marker(line) {
            (rest, true)
        } else if line.starts_with('|') {
            (line.trim_matches('|').trim(), true)
        } else {
            (line, false)
        };
        let joins = !starts_new && !segment.is_empty() && !prev_ends && prev_len >= 40;
        if !joins {
            flush(&mut segment, out);
        } else {
            segment.push(' ');
        }
        segment.push_str(content);
        prev_len = line.chars().count();
        prev_ends = ends_sentence(line);
    }
    flush(&mut segment, out);
}

fn flush(segment: &mut String, out: &mut Vec<String>) {
    if !segment.is_empty() {
        split_segment(segment, out);
        segment.clear();
    }
}

fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '”' | '’' | '»' | '」' | '』')
}

/// Splits running text at sentence ends.
fn split_segment(text: &str, out: &mut Vec<String>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut start = 0usize;
    let mut i = 0usize;
    while let Some(&(pos, c)) = chars.get(i) {
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
                    !lower_next && !abbreviation
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
