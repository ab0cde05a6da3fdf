//! Citation markers: ` [n]` and ` [n, m]` after a sentence's words, before its final
//! terminator ("The mirror is cleaned every six months [2].").

/// Sentence terminators a marker goes before (a lead-in's colon included).
const TERMINATORS: &[char] = &['.', '!', '?', '。', '！', '？', ':', ';'];

/// The markers in `text`: each ` [n]` / ` [n, m]` preceded by white space, as
/// `(start, end, numbers)` byte ranges.
fn find(text: &str) -> Vec<(usize, usize, Vec<u32>)> {
    let mut found = Vec::new();
    for (open, _) in text.match_indices('[') {
        let before_ok = text
            .get(..open)
            .is_some_and(|b| b.is_empty() || b.ends_with(char::is_whitespace));
        if !before_ok {
            continue;
        }
        let Some(rest) = text.get(open + 1..) else {
            continue;
        };
        let Some(close) = rest.find(']') else {
            continue;
        };
        let inner = rest.get(..close).unwrap_or("");
        let numbers: Option<Vec<u32>> = inner
            .split(',')
            .map(|n| {
                let n = n.trim();
                if n.is_empty() || !n.chars().all(|c| c.is_ascii_digit()) {
                    None
                } else {
                    n.parse().ok()
                }
            })
            .collect();
        if let Some(numbers) = numbers {
            found.push((open, open + 1 + close + 1, numbers));
        }
    }
    found
}

/// The source numbers `text`'s markers name, in order of appearance.
pub(super) fn markers(text: &str) -> Vec<u32> {
    find(text).into_iter().flat_map(|(_, _, n)| n).collect()
}

/// `text` without its markers (and the space before each).
pub(super) fn strip_markers(text: &str) -> String {
    let found = find(text);
    if found.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for (start, end, _) in found {
        out.push_str(text.get(pos..start).unwrap_or("").trim_end());
        pos = end;
    }
    out.push_str(text.get(pos..).unwrap_or(""));
    out
}

/// `text` with the marker `[source]` before its final run of terminators (at its end when
/// it has none): "Cleaned every month [2].", "The following are disallowed [1]:".
pub(super) fn mark(text: &str, source: u32) -> String {
    // A trailing bracketed note stays after the marked sentence:
    // "Fixed sort -b [2]. [bug introduced in 8.6]".
    if text.ends_with(']')
        && let Some(open) = text.rfind(". [")
        && markers(text.get(open + 2..).unwrap_or("")).is_empty()
    {
        let (head, note) = text.split_at(open + 1);
        return format!("{}{note}", mark(head, source));
    }
    let body = text.trim_end_matches(TERMINATORS);
    let tail = text.get(body.len()..).unwrap_or("");
    if body.is_empty() {
        return format!("{text} [{source}]");
    }
    format!("{} [{source}]{tail}", body.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip() {
        assert_eq!(mark("Cleaned every month.", 2), "Cleaned every month [2].");
        assert_eq!(
            mark("The following are disallowed:", 1),
            "The following are disallowed [1]:"
        );
        assert_eq!(mark("No terminator", 3), "No terminator [3]");
        assert_eq!(mark("… a window …", 3), "… a window … [3]");
        assert_eq!(
            mark("Fixed sort -b. [bug introduced in 8.6]", 2),
            "Fixed sort -b [2]. [bug introduced in 8.6]"
        );
        assert_eq!(markers("A [1]. B [2, 3]."), vec![1, 2, 3]);
        assert_eq!(markers("Footnote[1] and [a] and [12x]"), Vec::<u32>::new());
        assert_eq!(
            strip_markers("Cleaned every month [2]."),
            "Cleaned every month."
        );
        assert_eq!(strip_markers("A [1, 2] b [3]"), "A b");
    }
}
