//! Citation markers in text: `[3]`, `[1, 4]`, `[2-4]`, checked against the sources a
//! prompt showed and renumbered in order of first use, in one pass that works on a whole
//! answer or on a stream of deltas.

use std::collections::{BTreeSet, HashMap};

/// The longest marker considered, in bytes (`[100001, 100002, 100003]` is 25): room for a
/// list of a dozen six-digit sources; anything longer in brackets is text. It also bounds
/// what a stream holds back while a marker may still be open.
pub(crate) const MAX_MARKER_LEN: usize = 160;
/// A range such as `[2-40]` expands to at most this many numbers.
const MAX_RANGE: u32 = 64;

/// The numbers a marker's inside (`1, 4`, `2-4`) names, or `None` when it is not a
/// marker.
pub(crate) fn parse_marker(inside: &str) -> Option<Vec<u32>> {
    let mut numbers = Vec::new();
    for part in inside.split([',', ';']) {
        let part = part.trim();
        let (from, to) = match part.split_once(['-', '–']) {
            Some((a, b)) => (number(a.trim())?, number(b.trim())?),
            None => {
                let n = number(part)?;
                (n, n)
            }
        };
        if to < from || to - from >= MAX_RANGE {
            return None;
        }
        numbers.extend(from..=to);
    }
    (!numbers.is_empty()).then_some(numbers)
}

/// A source number: any run of digits that names one (1 to `u32::MAX`; no limit on the
/// digits beyond what a source number can be, so the 100,000th source is `[100000]`).
fn number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&n| n > 0)
}

/// Whether `c` may appear inside a marker's brackets.
pub(crate) fn marker_char(c: char) -> bool {
    c.is_ascii_digit() || matches!(c, ',' | ';' | ' ' | '-' | '–')
}

/// The marker whose `[` is at byte `start` of `text`: its end (after the `]`) and the
/// numbers it names; `None` when no marker starts there. Reads as
/// [`MarkerRewriter`] does: at most [`MAX_MARKER_LEN`] bytes, marker characters only.
pub(crate) fn marker_at(text: &str, start: usize) -> Option<(usize, Vec<u32>)> {
    let rest = text.get(start..)?.strip_prefix('[')?;
    // The bytes read so far, `[` included, as the rewriter counts them.
    let mut len = 1;
    for c in rest.chars() {
        if c == ']' {
            let inside = rest.get(..len - 1)?;
            return parse_marker(inside).map(|ns| (start + len + 1, ns));
        }
        if !marker_char(c) || len >= MAX_MARKER_LEN {
            return None;
        }
        len += c.len_utf8();
    }
    None
}

/// Every marker of `text`, in order: `(start, end, numbers)` in bytes. Linear in `text`:
/// a failed marker is read no further than the next `[`.
pub(crate) fn markers(text: &str) -> impl Iterator<Item = (usize, usize, Vec<u32>)> + '_ {
    let mut from = 0;
    std::iter::from_fn(move || {
        loop {
            let start = from + text.get(from..)?.find('[')?;
            from = start + 1;
            if let Some((end, numbers)) = marker_at(text, start) {
                from = end;
                return Some((start, end, numbers));
            }
        }
    })
}

/// Every number named by a marker in `text` (label lines included).
pub(crate) fn numbers_in(text: &str) -> BTreeSet<u32> {
    markers(text).flat_map(|(_, _, ns)| ns).collect()
}

/// The numbers of the label lines in `text`: lines that are exactly `[n]`, as the engine
/// puts them before each source.
pub(crate) fn label_lines(text: &str) -> BTreeSet<u32> {
    text.lines().filter_map(super::label_number).collect()
}

/// The most removed markers listed ([`super::Citations::removed`]); the rest are only
/// counted ([`super::Citations::removed_count`]).
pub const MAX_REMOVED_LISTED: usize = 64;

/// Markers removed, as written: the first [`MAX_REMOVED_LISTED`], and how many in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RemovedMarkers {
    pub(crate) listed: Vec<String>,
    pub(crate) count: usize,
}

impl RemovedMarkers {
    /// Counts `marker`, and lists it while there is room.
    pub(crate) fn push(&mut self, marker: &str) {
        self.count += 1;
        if self.listed.len() < MAX_REMOVED_LISTED {
            self.listed.push(marker.to_string());
        }
    }

    /// Adds `later`'s markers after these.
    pub(crate) fn append(&mut self, later: RemovedMarkers) {
        let room = MAX_REMOVED_LISTED.saturating_sub(self.listed.len());
        self.listed.extend(later.listed.into_iter().take(room));
        self.count += later.count;
    }

    /// Whether no marker was removed.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Rewrites markers as text passes through: numbers outside `allowed` are dropped (a
/// marker left empty is removed with the space before it, and reported), and with
/// renumbering the remaining numbers become 1, 2, ... in order of first use.
///
/// Feed it the whole text or a stream's deltas with [`MarkerRewriter::push`], then call
/// [`MarkerRewriter::finish`]; the output is the same either way.
#[derive(Debug)]
pub(crate) struct MarkerRewriter {
    allowed: BTreeSet<u32>,
    renumber: bool,
    /// Whether kept markers are written out (false: checked, counted, then removed).
    show: bool,
    /// Original number to new number, and the originals in order of first use.
    new_numbers: HashMap<u32, u32>,
    order: Vec<u32>,
    /// Markers removed, as written (bounded).
    removed: RemovedMarkers,
    /// Whitespace held back: it is dropped if a removed marker follows.
    spaces: String,
    /// A possible marker being read (starts with `[`).
    marker: String,
}

impl MarkerRewriter {
    pub(crate) fn new(allowed: BTreeSet<u32>, renumber: bool) -> Self {
        Self {
            allowed,
            renumber,
            show: true,
            new_numbers: HashMap::new(),
            order: Vec::new(),
            removed: RemovedMarkers::default(),
            spaces: String::new(),
            marker: String::new(),
        }
    }

    /// Removes the kept markers too (they are still counted in [`MarkerRewriter::order`]).
    pub(crate) fn hiding_markers(mut self) -> Self {
        self.show = false;
        self
    }

    /// Rewrites `delta`; text that may still be part of a marker is held back.
    pub(crate) fn push(&mut self, delta: &str) -> String {
        let mut out = String::with_capacity(delta.len());
        for c in delta.chars() {
            self.push_char(c, &mut out);
        }
        out
    }

    fn push_char(&mut self, c: char, out: &mut String) {
        if !self.marker.is_empty() {
            if c == ']' {
                self.marker.push(c);
                self.close_marker(out);
                return;
            }
            if marker_char(c) && self.marker.len() < MAX_MARKER_LEN {
                self.marker.push(c);
                return;
            }
            // Not a marker after all.
            self.flush_raw(out);
        }
        if c == '[' {
            self.marker.push(c);
        } else if c.is_whitespace() {
            self.spaces.push(c);
        } else {
            out.push_str(&self.spaces);
            self.spaces.clear();
            out.push(c);
        }
    }

    fn flush_raw(&mut self, out: &mut String) {
        out.push_str(&self.spaces);
        self.spaces.clear();
        out.push_str(&self.marker);
        self.marker.clear();
    }

    fn close_marker(&mut self, out: &mut String) {
        let written = std::mem::take(&mut self.marker);
        let inside = written
            .get(1..written.len().saturating_sub(1))
            .unwrap_or_default();
        let Some(numbers) = parse_marker(inside) else {
            out.push_str(&self.spaces);
            self.spaces.clear();
            out.push_str(&written);
            return;
        };
        let mut kept: Vec<u32> = Vec::new();
        // A marker may name thousands of numbers (`[1-64, 1-64, ...]`): kept ones are
        // looked up in a set, not in `kept`.
        let mut seen: BTreeSet<u32> = BTreeSet::new();
        let mut dropped_any = false;
        for n in numbers {
            if !self.allowed.contains(&n) {
                dropped_any = true;
                continue;
            }
            let m = if self.renumber {
                let next = self.order.len() as u32 + 1;
                *self.new_numbers.entry(n).or_insert_with(|| {
                    self.order.push(n);
                    next
                })
            } else {
                n
            };
            if seen.insert(m) {
                kept.push(m);
            }
        }
        if kept.is_empty() {
            self.removed.push(&written);
            // The space before a removed marker goes with it.
            self.spaces.clear();
            return;
        }
        if dropped_any {
            self.removed.push(&written);
        }
        if !self.show {
            self.spaces.clear();
            return;
        }
        out.push_str(&self.spaces);
        self.spaces.clear();
        out.push('[');
        for (i, m) in kept.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&m.to_string());
        }
        out.push(']');
    }

    /// Gives back what was held (an unfinished marker is text).
    pub(crate) fn finish(&mut self) -> String {
        let mut out = String::new();
        self.flush_raw(&mut out);
        out
    }

    /// Rewrites a whole text.
    pub(crate) fn rewrite(&mut self, text: &str) -> String {
        let mut out = self.push(text);
        out.push_str(&self.finish());
        out
    }

    /// The original source numbers, in order of first use (the new number of
    /// `order()[i]` is `i + 1` when renumbering).
    pub(crate) fn order(&self) -> &[u32] {
        &self.order
    }

    /// The number in the answer of original source `n` (itself without renumbering);
    /// `None` when `n` was not cited.
    pub(crate) fn new_number(&self, n: u32) -> Option<u32> {
        if self.renumber {
            self.new_numbers.get(&n).copied()
        } else {
            Some(n)
        }
    }

    /// The source numbers the text may cite.
    pub(crate) fn allowed(&self) -> &BTreeSet<u32> {
        &self.allowed
    }

    /// The markers removed (wholly or in part) so far, as written (the first
    /// [`MAX_REMOVED_LISTED`] listed, all counted).
    pub(crate) fn take_removed(&mut self) -> RemovedMarkers {
        std::mem::take(&mut self.removed)
    }
}

/// Removes every marker from `text` (and the space before each).
pub(crate) fn strip_markers(text: &str) -> String {
    let mut r = MarkerRewriter::new(BTreeSet::new(), false);
    let out = r.rewrite(text);
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ns: &[u32]) -> BTreeSet<u32> {
        ns.iter().copied().collect()
    }

    #[test]
    fn parses_lists_and_ranges() {
        assert_eq!(parse_marker("3"), Some(vec![3]));
        assert_eq!(parse_marker("1, 4"), Some(vec![1, 4]));
        assert_eq!(parse_marker("2-4"), Some(vec![2, 3, 4]));
        assert_eq!(parse_marker("0"), None);
        assert_eq!(parse_marker("x"), None);
        assert_eq!(parse_marker(""), None);
        assert_eq!(parse_marker("4-2"), None);
        assert_eq!(parse_marker("1-9999"), None);
        assert_eq!(parse_marker("78233"), Some(vec![78233]));
        assert_eq!(
            parse_marker("100000, 4000000000"),
            Some(vec![100000, 4_000_000_000])
        );
        assert_eq!(parse_marker("99999999999"), None);
    }

    #[test]
    fn renumbers_in_order_of_first_use() {
        let mut r = MarkerRewriter::new(set(&[1, 2, 3, 4]), true);
        let out = r.rewrite("A [3]. B [1, 3]. C [4][3].");
        assert_eq!(out, "A [1]. B [2, 1]. C [3][1].");
        assert_eq!(r.order(), &[3, 1, 4]);
    }

    #[test]
    fn removes_markers_not_shown_with_their_space() {
        let mut r = MarkerRewriter::new(set(&[1]), true);
        let out = r.rewrite("A [7]. B [1, 9]. C[8] d.");
        assert_eq!(out, "A. B [1]. C d.");
        let removed = r.take_removed();
        assert_eq!(removed.listed, vec!["[7]", "[1, 9]", "[8]"]);
        assert_eq!(removed.count, 3);
    }

    #[test]
    fn leaves_other_brackets_alone() {
        let mut r = MarkerRewriter::new(set(&[1]), true);
        let text = "see [the docs](x) and a[i] or [] or [1a] [0]";
        assert_eq!(r.rewrite(text), text);
        assert!(r.take_removed().is_empty());
    }

    #[test]
    fn streaming_gives_the_same_text_at_any_split() {
        let text = "The mirror is cleaned [2]. It opens [1, 5] at dusk [9].\n[3]";
        let mut whole = MarkerRewriter::new(set(&[1, 2, 3]), true);
        let expected = whole.rewrite(text);
        for cut in 0..text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let mut r = MarkerRewriter::new(set(&[1, 2, 3]), true);
            let mut out = r.push(&text[..cut]);
            out.push_str(&r.push(&text[cut..]));
            out.push_str(&r.finish());
            assert_eq!(out, expected, "cut at {cut}");
        }
    }

    #[test]
    fn finds_numbers_and_label_lines() {
        assert_eq!(numbers_in("a [1] b [2, 4] [x] [3-4]"), set(&[1, 2, 3, 4]));
        assert_eq!(label_lines("[1]\nfoo [2]\n[3]\n [4]"), set(&[1, 3]));
    }

    #[test]
    fn markers_are_read_as_the_rewriter_reads_them() {
        let long = format!("[{}]", "1, ".repeat(60));
        let text = format!(
            "a [1] [x] [[2] b[3-4]] [12345678901] [0] [5 ; 6] [7\u{2013}8] {long} [9] [1, 2 ["
        );
        // The rewriter, allowing nothing, removes every marker it reads.
        let mut r = MarkerRewriter::new(BTreeSet::new(), false);
        r.rewrite(&text);
        let removed = r.take_removed().listed;
        let read: Vec<&str> = markers(&text).map(|(a, b, _)| &text[a..b]).collect();
        assert_eq!(read, removed);
        assert_eq!(
            read,
            vec!["[1]", "[2]", "[3-4]", "[5 ; 6]", "[7\u{2013}8]", "[9]"]
        );
        assert_eq!(numbers_in(&text), set(&[1, 2, 3, 4, 5, 6, 7, 8, 9]));
    }

    #[test]
    fn a_marker_naming_thousands_of_numbers_keeps_each_once() {
        let mut r = MarkerRewriter::new((1..=64).collect(), true);
        let marker = format!("[{}]", vec!["1-64"; 30].join(","));
        let out = r.rewrite(&marker);
        assert_eq!(out.matches(", ").count(), 63, "{out}");
        assert_eq!(r.order().len(), 64);
    }

    #[test]
    fn hidden_markers_are_counted_and_removed() {
        let mut r = MarkerRewriter::new(set(&[1, 2]), true).hiding_markers();
        assert_eq!(r.rewrite("A [2]. B [1][5]."), "A. B.");
        assert_eq!(r.order(), &[2, 1]);
        assert_eq!(r.take_removed().listed, vec!["[5]"]);
    }

    #[test]
    fn strips_all_markers() {
        assert_eq!(strip_markers("A [1]. B [2, 3]."), "A. B.");
    }
}
