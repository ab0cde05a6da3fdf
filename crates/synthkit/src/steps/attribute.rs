//! Which nodes a call read: each prompt's context is located in the packing join of the
//! texts it was cut from (the nodes' texts for the first level, the level below's
//! summaries above it).
//!
//! Every level's prompts are cut from its join in order (refine and accumulate walk the
//! nodes in order; tree_summarize packs a level's texts in order), so the calls of a level,
//! taken by index, are found one after the other: each search starts where the previous
//! context started and looks no further than a window past where it ended. The work is
//! linear in the text, even for 10,000 chunks, and a context that is not found (a custom
//! template, a prompt made outside the packing) leaves its step without node ids rather
//! than searching everything.

use super::Recorded;

/// Slack past the previous context's end that a search window allows (bytes).
const WINDOW_SLACK: usize = 4096;

/// The packing join of one level's texts and where each text starts in it.
struct Segments {
    text: String,
    /// Byte offset of each text kept, in order.
    starts: Vec<usize>,
    /// The position, among the level's texts, of each text kept.
    owners: Vec<usize>,
}

impl Segments {
    /// The join of `texts` as packing makes it: trimmed, empties dropped, blank lines
    /// between.
    fn new<'a>(texts: impl Iterator<Item = &'a str>) -> Self {
        let mut s = Self {
            text: String::new(),
            starts: Vec::new(),
            owners: Vec::new(),
        };
        for (i, t) in texts.enumerate() {
            let t = t.trim();
            if t.is_empty() {
                continue;
            }
            if !s.text.is_empty() {
                s.text.push_str("\n\n");
            }
            s.starts.push(s.text.len());
            s.owners.push(i);
            s.text.push_str(t);
        }
        s
    }

    /// The texts (by their position among the level's) that bytes `a..b` overlap.
    fn covering(&self, a: usize, b: usize) -> Vec<usize> {
        let first = self.starts.partition_point(|&s| s <= a).saturating_sub(1);
        let last = self.starts.partition_point(|&s| s < b).saturating_sub(1);
        self.owners
            .get(first..=last.max(first))
            .map(<[usize]>::to_vec)
            .unwrap_or_default()
    }

    /// Finds `context` at or after the cursor, within its window.
    fn locate(&self, cursor: &mut Cursor, context: &str) -> Option<(usize, usize)> {
        let context = context.trim();
        if context.is_empty() {
            return None;
        }
        let unlabeled = strip_label(context);
        for candidate in [Some(context), unlabeled].into_iter().flatten() {
            let mut end = (cursor.last_end + 2 * candidate.len() + WINDOW_SLACK + cursor.slack)
                .min(self.text.len());
            while !self.text.is_char_boundary(end) {
                end -= 1;
            }
            let Some(haystack) = self.text.get(cursor.from..end) else {
                continue;
            };
            if let Some(p) = haystack.find(candidate) {
                let a = cursor.from + p;
                *cursor = Cursor {
                    from: a,
                    last_end: a + candidate.len(),
                    slack: 0,
                };
                return Some((a, a + candidate.len()));
            }
        }
        cursor.slack = cursor.slack.saturating_add(2 * context.len());
        None
    }
}

/// Where the next search of a level starts.
#[derive(Default)]
struct Cursor {
    /// The previous context's start.
    from: usize,
    /// The previous context's end.
    last_end: usize,
    /// Extra window for contexts not found since the last one found.
    slack: usize,
}

/// `context` without a leading citation label line (`[n]` and a newline), which packing
/// adds to a piece that starts inside a source.
fn strip_label(context: &str) -> Option<&str> {
    let rest = context.strip_prefix('[')?;
    let (digits, rest) = rest.split_once(']')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(rest.strip_prefix('\n')?.trim())
}

/// The level below the one being attributed.
struct Below {
    /// Each call's number and node ids, in index order.
    summaries: Vec<(u64, Vec<String>)>,
    /// The join of its replies.
    segments: Segments,
}

/// Fills the node ids (and, above the first level, the input calls) of `calls`, which
/// are ordered by level, then index. `nodes` are the ids and texts of the nodes with text.
/// A call whose node ids are known already (packing named them) keeps them; at the first
/// level its context is not searched for, nor above it when packing also named the
/// summaries it held.
pub(super) fn node_ids(calls: &mut [Recorded], nodes: &[(String, String)]) {
    let first = Segments::new(nodes.iter().map(|(_, t)| t.as_str()));
    let mut below: Option<Below> = None;
    for level in calls.chunk_by_mut(|a, b| a.step.level == b.step.level) {
        let mut cursor = Cursor::default();
        for call in level.iter_mut() {
            let Some(context) = call.context.take() else {
                continue;
            };
            match &below {
                None if !call.step.node_ids.is_empty() => {}
                None => {
                    if let Some((a, b)) = first.locate(&mut cursor, &context) {
                        call.step.node_ids = first
                            .covering(a, b)
                            .into_iter()
                            .filter_map(|n| nodes.get(n).map(|(id, _)| id.clone()))
                            .collect();
                    }
                }
                // Packing named the summaries it gave the call (and their nodes).
                Some(_) if !call.step.input_calls.is_empty() && !call.step.node_ids.is_empty() => {}
                Some(Below {
                    summaries,
                    segments,
                }) => {
                    let Some((a, b)) = segments.locate(&mut cursor, &context) else {
                        continue;
                    };
                    let mut ids: Vec<String> = Vec::new();
                    let mut inputs = Vec::new();
                    for k in segments.covering(a, b) {
                        let Some((number, under)) = summaries.get(k) else {
                            continue;
                        };
                        inputs.push(*number);
                        for id in under {
                            if !ids.contains(id) {
                                ids.push(id.clone());
                            }
                        }
                    }
                    call.step.input_calls = inputs;
                    if call.step.node_ids.is_empty() {
                        call.step.node_ids = ids;
                    }
                }
            }
        }
        let segments = Segments::new(level.iter().map(|c| c.reply.as_str()));
        let summaries = level
            .iter()
            .map(|c| (c.step.call, c.step.node_ids.clone()))
            .collect();
        below = Some(Below {
            summaries,
            segments,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_names_every_text_a_range_touches() {
        let s = Segments::new(["alpha", "  ", "beta", "gamma"].into_iter());
        assert_eq!(s.text, "alpha\n\nbeta\n\ngamma");
        assert_eq!(s.covering(0, 5), vec![0]);
        assert_eq!(s.covering(2, 9), vec![0, 2]);
        assert_eq!(s.covering(7, 18), vec![2, 3]);
    }

    #[test]
    fn contexts_are_found_in_order_and_labels_are_skipped() {
        let s = Segments::new(["[1]\none two three", "[2]\nfour five"].into_iter());
        let mut c = Cursor::default();
        assert_eq!(s.locate(&mut c, "[1]\none two"), Some((0, 11)));
        let (a, b) = s.locate(&mut c, "[1]\nthree\n\n[2]\nfour").unwrap();
        assert_eq!(s.covering(a, b), vec![0, 1]);
        assert_eq!(s.locate(&mut c, "not there"), None);
        assert_eq!(strip_label("[12]\n x"), Some("x"));
        assert_eq!(strip_label("[a]\n x"), None);
    }
}
