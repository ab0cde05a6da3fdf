//! Copies: documents whose text is (nearly) all in other documents read. A folder of
//! documentation often holds the same text several times: mdBook's `print.html` (every
//! chapter again on one page), Node's `all.html`, a page both as Markdown and as HTML, a
//! file copied under two names. Read as they are, they double what a model is sent and
//! crowd a question's best passages out of `--top-k`.
//!
//! How a copy is found: each document's words (letters and digits, lowercased, so markup
//! does not matter: a Markdown page and its HTML rendering have the same words) are cut
//! into overlapping runs of [`SHINGLE_WORDS`] words ("shingles"), hashed; a sample of the
//! hashes is kept (all of them up to [`MAX_SAMPLES`] over all documents, else one in 2, 4,
//! ...). A shingle found in more than [`BOILERPLATE_DOCS`] documents is boilerplate (a
//! licence, a page footer, a method every type has) and says nothing about copying. Then,
//! largest document first, a document is a copy when at least [`COPY_SHARE`] of its other
//! shingles are in documents still kept; it is left out, so its copies elsewhere stay.
//! Documents with identical words are copies of the first one whatever their size.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use rustc_hash::{FxBuildHasher, FxHashMap};

use super::Document;

/// Words in a shingle.
pub const SHINGLE_WORDS: usize = 8;
/// A shingle in more documents than this is boilerplate.
pub const BOILERPLATE_DOCS: u32 = 8;
/// The share of a document's shingles found elsewhere that makes it a copy.
pub const COPY_SHARE: f64 = 0.8;
/// The most sampled shingles kept over all documents (a bound on memory: about 30 bytes
/// each).
pub const MAX_SAMPLES: usize = 2_000_000;
/// A document with fewer sampled shingles is only compared whole (exact copies).
const MIN_SAMPLES: usize = 8;

/// A document found to be a copy: its index, the index of the document sharing the most
/// text with it, and the share of its text found elsewhere, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Copy {
    pub index: usize,
    pub of: usize,
    pub percent: u8,
}

/// Where a shingle is: how many documents hold it, and the first few of them.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    docs: u32,
    live: u32,
    first: [u32; 3],
}

/// The copies among `docs` (see the [module documentation](self)); documents for which
/// `keep` is true are never copies (files named on their own).
pub(crate) fn find(docs: &[Document], keep: impl Fn(usize) -> bool) -> Vec<Copy> {
    let words: Vec<Vec<u64>> = docs.iter().map(|d| word_hashes(&d.text)).collect();
    let total: usize = words
        .iter()
        .map(|w| w.len().saturating_sub(SHINGLE_WORDS - 1))
        .sum();
    let modulus = total.div_ceil(MAX_SAMPLES).max(1).next_power_of_two() as u64;
    let samples: Vec<Vec<u64>> = words.iter().map(|w| shingles(w, modulus)).collect();

    let mut copies: Vec<Copy> = Vec::new();
    let mut removed = vec![false; docs.len()];
    // Identical words: a copy of the first.
    let mut whole: HashMap<u64, usize> = HashMap::new();
    for (i, w) in words.iter().enumerate() {
        if w.is_empty() {
            continue;
        }
        let h = hash_all(w);
        match whole.get(&h) {
            Some(&first) if !keep(i) => {
                if let Some(r) = removed.get_mut(i) {
                    *r = true;
                }
                copies.push(Copy {
                    index: i,
                    of: first,
                    percent: 100,
                });
            }
            Some(_) => {}
            None => {
                whole.insert(h, i);
            }
        }
    }
    drop(words);

    let mut index: FxHashMap<u64, Seen> = FxHashMap::default();
    for (i, s) in samples.iter().enumerate() {
        if removed.get(i).copied().unwrap_or(true) {
            continue;
        }
        for &h in s {
            let seen = index.entry(h).or_default();
            if let Some(slot) = seen.first.get_mut(seen.docs as usize) {
                *slot = i as u32;
            }
            seen.docs += 1;
            seen.live += 1;
        }
    }
    // Largest first; among equals, the later one first, so the first found stays.
    let size = |i: usize| samples.get(i).map_or(0, Vec::len);
    let mut order: Vec<usize> = (0..docs.len())
        .filter(|&i| !removed.get(i).copied().unwrap_or(true))
        .collect();
    order.sort_by(|&a, &b| size(b).cmp(&size(a)).then(b.cmp(&a)));
    for i in order {
        let Some(mine) = samples.get(i) else {
            continue;
        };
        if keep(i) || mine.len() < MIN_SAMPLES {
            continue;
        }
        let telling: Vec<&Seen> = mine
            .iter()
            .filter_map(|h| index.get(h))
            .filter(|s| s.docs <= BOILERPLATE_DOCS)
            .collect();
        if telling.len() < MIN_SAMPLES {
            continue;
        }
        let covered = telling.iter().filter(|s| s.live >= 2).count();
        let share = covered as f64 / telling.len() as f64;
        if share < COPY_SHARE {
            continue;
        }
        // The kept document sharing the most with it.
        let mut tally: HashMap<u32, usize> = HashMap::new();
        for s in &telling {
            let n = (s.docs as usize).min(s.first.len());
            for &d in s.first.get(..n).unwrap_or_default() {
                if d as usize != i && !removed.get(d as usize).copied().unwrap_or(true) {
                    *tally.entry(d).or_insert(0) += 1;
                }
            }
        }
        let Some(of) = tally
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(&d, _)| d as usize)
        else {
            continue;
        };
        if let Some(r) = removed.get_mut(i) {
            *r = true;
        }
        for h in mine {
            if let Some(s) = index.get_mut(h) {
                s.live = s.live.saturating_sub(1);
            }
        }
        copies.push(Copy {
            index: i,
            of,
            percent: (share * 100.0).floor() as u8,
        });
    }
    copies.sort_by_key(|c| c.index);
    copies
}

/// The hashes of `text`'s words: runs of letters and digits, lowercased; Markdown link
/// targets (`](https://…)`) and HTML tags are no words, so a page and its rendering
/// match.
fn word_hashes(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut hasher = FxBuildHasher.build_hasher();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        // Skip a link target or a tag to its end (bounded: at most one line).
        let skip_to = match (prev, c, chars.peek()) {
            (']', '(', _) => Some(')'),
            (_, '<', Some(n)) if n.is_ascii_alphabetic() || *n == '/' => Some('>'),
            _ => None,
        };
        prev = c;
        if let Some(end) = skip_to {
            for d in chars.by_ref() {
                if d == end || d == '\n' {
                    break;
                }
            }
            prev = end;
        }
        if skip_to.is_none() && c.is_alphanumeric() {
            for l in c.to_lowercase() {
                hasher.write_u32(l as u32);
            }
            in_word = true;
        } else if in_word {
            out.push(hasher.finish());
            hasher = FxBuildHasher.build_hasher();
            in_word = false;
        }
    }
    if in_word {
        out.push(hasher.finish());
    }
    out
}

/// The distinct sampled shingle hashes of a document's words: those divisible by
/// `modulus` (all of them for 1), sorted.
fn shingles(words: &[u64], modulus: u64) -> Vec<u64> {
    let mut out: Vec<u64> = words
        .windows(SHINGLE_WORDS)
        .map(hash_all)
        .filter(|h| h % modulus == 0)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn hash_all(words: &[u64]) -> u64 {
    let mut hasher = FxBuildHasher.build_hasher();
    for &w in words {
        hasher.write_u64(w);
    }
    // Mix the low bits, which the sampling looks at.
    let h = hasher.finish();
    h ^ (h >> 29) ^ (h >> 47)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    fn doc(name: &str, text: &str) -> Document {
        Document::new(name, text, Format::Markdown)
    }

    fn chapter(topic: &str) -> String {
        (0..40)
            .map(|i| {
                format!("Sentence {i} of the chapter about {topic} says something of its own.")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_page_of_all_chapters_is_a_copy_and_the_chapters_stay() {
        let (a, b) = (chapter("ownership"), chapter("borrowing"));
        let docs = vec![
            doc("ch1.html", &a),
            doc("ch2.html", &b),
            doc("print.html", &format!("# The book\n\n{a}\n\n{b}")),
        ];
        let copies = find(&docs, |_| false);
        assert_eq!(copies.len(), 1, "{copies:?}");
        assert_eq!(copies[0].index, 2);
        assert!(copies[0].percent >= 95);
    }

    #[test]
    fn markup_does_not_hide_a_copy_and_the_first_stays() {
        let a = chapter("slices");
        let md = format!(
            "# Slices\n\n{}",
            a.replace("the chapter", "[the **chapter**](https://x.y/ch.html)")
        );
        let html = format!("<h1>Slices</h1><p>{}</p>", a.replace(". ", ".</p>\n<p>"));
        let docs = vec![doc("slices.md", &md), doc("slices.html", &html)];
        let copies = find(&docs, |_| false);
        assert_eq!(copies.iter().map(|c| c.index).collect::<Vec<_>>(), vec![1]);
        assert_eq!(copies[0].of, 0);
    }

    #[test]
    fn shared_boilerplate_and_small_overlaps_are_not_copies() {
        let licence = chapter("the licence");
        let docs: Vec<Document> = (0..12)
            .map(|i| {
                doc(
                    &format!("{i}/copyright"),
                    &format!("{}\n\n{licence}", chapter(&format!("package {i}"))),
                )
            })
            .collect();
        assert!(find(&docs, |_| false).is_empty());
        let docs = vec![
            doc("a.md", &chapter("mirrors")),
            doc(
                "b.md",
                &format!(
                    "{}\n\n{}",
                    chapter("domes"),
                    chapter("mirrors").get(..300).unwrap()
                ),
            ),
        ];
        assert!(find(&docs, |_| false).is_empty());
    }

    #[test]
    fn exact_copies_of_short_files_and_kept_files() {
        let docs = vec![
            doc("a/README", "Short note."),
            doc("b/README", "short  note"),
        ];
        assert_eq!(
            find(&docs, |_| false).first().map(|c| (c.index, c.of)),
            Some((1, 0))
        );
        assert!(find(&docs, |i| i == 1).is_empty());
    }
}
