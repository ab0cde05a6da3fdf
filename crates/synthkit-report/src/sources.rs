//! The `Sources` section: every source with its score, section, the calls that read it
//! and the answer's markers citing it.
//!
//! A large run (more than [`caps::LARGE_RUN_SOURCES`] sources) lists the cited sources
//! first, open, and the others in collapsed groups of [`caps::SOURCE_GROUP`], so the
//! browser lays out only what is opened; a link into a closed group opens it (browsers
//! open a `<details>` holding a linked target, and the page's script does too).

use crate::caps;
use crate::html::Html;
use crate::index::Index;
use crate::record::RunRecord;
use crate::text::thousands;

/// Writes the section.
pub(crate) fn section(h: &mut Html, run: &RunRecord, index: &Index<'_>) {
    h.markup("<section id=\"sources\"><h2>Sources</h2>");
    if run.sources.is_empty() {
        h.markup("<p class=\"note\">No source is known.</p>");
    }
    let cited = |p: usize| index.markers.get(p).is_some_and(|m| !m.is_empty());
    if run.sources.len() <= caps::LARGE_RUN_SOURCES {
        for p in 0..run.sources.len() {
            source(h, run, index, p);
        }
    } else {
        h.markup("<p class=\"note\">")
            .value(thousands(run.sources.len() as u64))
            .markup(" sources: the cited ones first, the others in collapsed groups of ")
            .value(thousands(caps::SOURCE_GROUP as u64))
            .markup(".</p>");
        for p in (0..run.sources.len()).filter(|&p| cited(p)) {
            source(h, run, index, p);
        }
        let rest: Vec<usize> = (0..run.sources.len()).filter(|&p| !cited(p)).collect();
        for group in rest.chunks(caps::SOURCE_GROUP) {
            let (Some(first), Some(last)) = (group.first(), group.last()) else {
                continue;
            };
            h.markup("<details class=\"level\"><summary>sources ")
                .value(thousands(*first as u64 + 1))
                .markup("–")
                .value(thousands(*last as u64 + 1))
                .markup(" (")
                .value(thousands(group.len() as u64))
                .markup(", collapsed: click to open)</summary>");
            for &p in group {
                source(h, run, index, p);
            }
            h.markup("</details>");
        }
    }
    if run.sources_omitted > 0 {
        h.markup("<p class=\"note\">")
            .value(thousands(run.sources_omitted as u64))
            .markup(" more sources are not listed.</p>");
    }
    h.markup("</section>\n");
}

/// Source `p`'s entry (`#src-p`).
fn source(h: &mut Html, run: &RunRecord, index: &Index<'_>, p: usize) {
    let Some(s) = run.sources.get(p) else {
        return;
    };
    let markers = index.markers.get(p).map_or(&[][..], Vec::as_slice);
    h.markup(if markers.is_empty() {
        "<article class=\"source\" id=\"src-"
    } else {
        "<article class=\"source cited\" id=\"src-"
    })
    .value(p)
    .markup("\"><h3>");
    for m in markers {
        h.markup("<span class=\"tag good\">[")
            .value(m)
            .markup("]</span> ");
    }
    h.text(&s.id).markup("</h3><p class=\"meta\">");
    if let Some(score) = s.score {
        h.element("span", "tag", &format!("score {score:.4}"));
    }
    if let Some(section) = &s.section {
        h.element("span", "tag", section);
    }
    let readers = index.readers.get(p).map_or(&[][..], Vec::as_slice);
    if readers.is_empty() {
        h.element("span", "tag", "read by no call");
    } else {
        h.markup("<span class=\"tag\">read by ");
        for c in readers.iter().take(caps::CALL_LINKS_PER_SOURCE) {
            index.call_link(h, *c);
            h.markup(" ");
        }
        if readers.len() > caps::CALL_LINKS_PER_SOURCE {
            h.value(format_args!(
                "+{} more",
                readers.len() - caps::CALL_LINKS_PER_SOURCE
            ));
        }
        h.markup("</span>");
    }
    h.markup("</p>");
    if let Some(image) = &s.image {
        h.markup("<p class=\"thumbs\">");
        index.thumbnail(h, &s.id, image);
        h.markup("</p>");
    }
    h.markup("<pre class=\"excerpt\">");
    write_excerpt(h, run, &s.id, &s.excerpt);
    if !s.is_whole() {
        h.markup("<span class=\"more\">… ")
            .value(thousands(
                s.text_bytes.saturating_sub(s.excerpt.len()) as u64
            ))
            .markup(" more bytes</span>");
    }
    h.markup("</pre></article>\n");
}

/// `excerpt` escaped, the quotes found in node `id` highlighted (`<mark>`, titled with
/// their status); character offsets past the excerpt are cut.
fn write_excerpt(h: &mut Html, run: &RunRecord, id: &str, excerpt: &str) {
    let mut spans: Vec<(usize, usize, &str)> = run
        .quotes
        .iter()
        .filter(|q| q.node_id == id)
        .filter_map(|q| Some((q.start?, q.end?, q.status.as_str())))
        .filter(|(a, b, _)| a < b)
        .collect();
    spans.sort_unstable();
    if spans.is_empty() {
        h.text(excerpt);
        return;
    }
    let chars: Vec<char> = excerpt.chars().collect();
    let piece = |a: usize, b: usize| -> String {
        chars
            .get(a.min(chars.len())..b.min(chars.len()))
            .unwrap_or_default()
            .iter()
            .collect()
    };
    let mut at = 0;
    for (a, b, status) in spans {
        // Overlapping quotes: the part already highlighted is not repeated.
        let a = a.max(at);
        if a >= b || a >= chars.len() {
            continue;
        }
        h.text(&piece(at, a));
        h.markup("<mark class=\"quote ")
            .text(status)
            .markup("\" title=\"")
            .text(status)
            .markup("\">")
            .text(&piece(a, b))
            .markup("</mark>");
        at = b;
    }
    h.text(&piece(at, chars.len()));
}
