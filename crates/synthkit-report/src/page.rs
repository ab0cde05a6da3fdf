//! The page: head, answer, sources, settings; the synthesis and the budget are drawn by
//! [`crate::picture`].

use std::cell::Cell;
use std::collections::HashMap;

use crate::caps;
use crate::html::Html;
use crate::picture;
use crate::record::{ImageRecord, RunRecord};
use crate::style::{SCRIPT, STYLE};

/// Where each source is on the page (`#src-K`) and which calls read it.
pub(crate) struct Index<'a> {
    /// Node id to its position among the sources.
    pub(crate) position: HashMap<&'a str, usize>,
    /// Source position to the calls that read it directly, in call order.
    pub(crate) readers: Vec<Vec<u64>>,
    /// Source position to the answer's markers citing it.
    pub(crate) markers: Vec<Vec<u32>>,
    /// Source position to its section.
    pub(crate) sections: Vec<Option<&'a str>>,
    /// Call number to its box's place: level and index in the level.
    pub(crate) places: HashMap<u64, (u32, usize)>,
    /// Source position to its image, for image nodes.
    pub(crate) images: Vec<Option<&'a ImageRecord>>,
    /// Bytes of image data URLs the page may still embed (from [`caps::PAGE_IMAGE_BYTES`]).
    image_room: Cell<usize>,
}

impl<'a> Index<'a> {
    fn new(run: &'a RunRecord) -> Self {
        let position: HashMap<&str, usize> = run
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let mut readers = vec![Vec::new(); run.sources.len()];
        for step in run.steps.iter().filter(|s| s.input_calls.is_empty()) {
            for id in &step.node_ids {
                if let Some(&p) = position.get(id.as_str()) {
                    readers[p].push(step.call);
                }
            }
        }
        let places: HashMap<u64, (u32, usize)> = run
            .steps
            .iter()
            .map(|s| (s.call, (s.level, s.index)))
            .collect();
        for r in &mut readers {
            r.sort_unstable_by_key(|c| (places.get(c).copied(), *c));
            r.dedup();
        }
        let mut markers = vec![Vec::new(); run.sources.len()];
        for c in run.citations.iter().flatten() {
            for id in &c.node_ids {
                if let Some(&p) = position.get(id.as_str()) {
                    markers[p].push(c.marker);
                }
            }
        }
        Self {
            position,
            readers,
            markers,
            sections: run.sources.iter().map(|s| s.section.as_deref()).collect(),
            places,
            images: run.sources.iter().map(|s| s.image.as_ref()).collect(),
            image_room: Cell::new(caps::PAGE_IMAGE_BYTES),
        }
    }

    /// Node `id`'s image, when it is a listed image node.
    pub(crate) fn image_of(&self, id: &str) -> Option<&'a ImageRecord> {
        let p = *self.position.get(id)?;
        self.images.get(p).copied().flatten()
    }

    /// Writes a thumbnail of node `id`'s `image` (`alt` and title its id), or, past the
    /// page's image budget or without the image's data, the id and why it is not shown.
    pub(crate) fn thumbnail(&self, h: &mut Html, id: &str, image: &ImageRecord) {
        let len = image.data_url_len();
        let url = (len <= self.image_room.get())
            .then(|| image.data_url())
            .flatten();
        match url {
            Some(url) => {
                self.image_room.set(self.image_room.get() - len);
                h.markup("<img class=\"thumb\" src=\"")
                    .text(&url)
                    .markup("\" alt=\"")
                    .text(id)
                    .markup("\" title=\"")
                    .text(id)
                    .markup("\">");
            }
            None => {
                h.markup("<span class=\"thumb none\">")
                    .text(id)
                    .markup(": image not embedded (page image budget)</span>");
            }
        }
    }

    /// Writes a link to call `call`'s box, named as its box is (`L0 #3`: level 0, the
    /// level's call at index 3).
    pub(crate) fn call_link(&self, h: &mut Html, call: u64) {
        h.markup("<a href=\"#call-").value(call).markup("\">");
        match self.places.get(&call) {
            Some((level, index)) => h.value(format_args!("L{level} #{index}")),
            None => h.value(format_args!("call {call}")),
        };
        h.markup("</a>");
    }

    /// Writes a link to node `id` (plain text when it is not listed).
    pub(crate) fn node_link(&self, h: &mut Html, id: &str) {
        match self.position.get(id) {
            Some(&p) => {
                h.markup("<a class=\"node\" href=\"#src-")
                    .value(p)
                    .markup("\">")
                    .text(id)
                    .markup("</a>");
            }
            None => {
                h.element("span", "node", id);
            }
        }
    }
}

/// The whole page for `run`.
pub fn render(run: &RunRecord) -> String {
    let index = Index::new(run);
    let mut h = Html::new();
    h.markup(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
         <meta name=\"generator\" content=\"synthkit-report\"><title>synthkit report: ",
    )
    .text(&first_chars(&run.query, 80))
    .markup("</title><style>")
    .markup(STYLE)
    .markup("</style></head><body>\n");
    header(&mut h, run);
    answer(&mut h, run, &index);
    picture::synthesis(&mut h, run, &index);
    picture::budget(&mut h, run);
    crate::sources::section(&mut h, run, &index);
    settings(&mut h, run);
    h.markup("<script>")
        .markup(SCRIPT)
        .markup("</script>\n</body></html>\n");
    h.finish()
}

fn header(h: &mut Html, run: &RunRecord) {
    h.markup("<header><h1>synthkit report</h1><p class=\"query\">")
        .text(&run.query)
        .markup("</p><p class=\"meta\">");
    if let Some(mode) = run.mode {
        h.element("span", "tag", mode.as_str());
    }
    if !run.model.is_empty() {
        h.element("span", "tag", &run.model);
    }
    h.element(
        "span",
        "tag",
        &format!(
            "{} calls · {} prompt + {} completion tokens",
            thousands(run.usage.calls),
            thousands(run.usage.prompt_tokens),
            thousands(run.usage.completion_tokens)
        ),
    );
    if let Some(ms) = run.total_ms {
        h.element("span", "tag", &format!("{:.0} ms", ms));
    }
    match run.grounded {
        Some(true) => h.element("span", "tag good", "grounded"),
        Some(false) => h.element("span", "tag bad", "not grounded"),
        None => h.element("span", "tag", "grounding unknown"),
    };
    h.markup(
        "</p><nav><a href=\"#answer\">Answer</a> <a href=\"#synthesis\">Synthesis</a> \
         <a href=\"#budget\">Budget</a> <a href=\"#sources\">Sources</a> \
         <a href=\"#settings\">Settings</a></nav></header>\n",
    );
}

fn answer(h: &mut Html, run: &RunRecord, index: &Index<'_>) {
    h.markup("<section id=\"answer\"><h2>Answer</h2>");
    if let Some(error) = &run.error {
        h.markup("<p class=\"failed\" id=\"failure\"><strong>The run failed</strong>: ")
            .text(error)
            .markup("</p><p class=\"note\">There is no answer; the calls made before the failure are drawn below.</p></section>\n");
        return;
    }
    let Some(text) = &run.answer else {
        h.markup("<p class=\"note\" id=\"unfinished\">This report was made from the calls alone: the trace has no run line, so the run was killed or is incomplete. The answer and the sources are not known, and the last level drawn is not known to be the final one.</p></section>\n");
        return;
    };
    // Marker number to the position of its first listed source.
    let target: HashMap<u32, usize> = run
        .citations
        .iter()
        .flatten()
        .filter_map(|c| {
            let p = c
                .node_ids
                .iter()
                .find_map(|id| index.position.get(id.as_str()))?;
            Some((c.marker, *p))
        })
        .collect();
    h.markup("<div class=\"answer\">");
    write_with_markers(h, text, &target);
    h.markup("</div>");
    if let Some(cits) = &run.citations {
        if cits.is_empty() {
            h.markup("<p class=\"note\">The answer cites no source.</p>");
        } else {
            h.markup("<ul class=\"citations\">");
            for c in cits {
                h.markup("<li>[").value(c.marker).markup("] ");
                for id in &c.node_ids {
                    index.node_link(h, id);
                    h.markup(" ");
                }
                h.markup("</li>");
            }
            h.markup("</ul>");
        }
    }
    if !run.quotes.is_empty() {
        // Quote mode: each quote with its status, linked to the source it is in.
        h.markup("<ul class=\"quotes\">");
        for q in &run.quotes {
            let class = match q.status.as_str() {
                "verified" => "tag good",
                _ => "tag bad",
            };
            h.markup("<li>[").value(q.marker).markup("] &ldquo;");
            h.text(&q.quote).markup("&rdquo; ");
            h.element("span", class, &q.status);
            h.markup(" ");
            index.node_link(h, &q.node_id);
            if let (Some(a), Some(b)) = (q.start, q.end) {
                h.markup(" ")
                    .element("span", "tag", &format!("chars {a}-{b}"));
            }
            h.markup("</li>");
        }
        h.markup("</ul>");
    }
    h.markup("</section>\n");
}

/// `text` escaped, each `[n]` marker with a known target as a link to it.
fn write_with_markers(h: &mut Html, text: &str, target: &HashMap<u32, usize>) {
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let marker = (digits > 0 && after[digits..].starts_with(']'))
            .then(|| after[..digits].parse::<u32>().ok())
            .flatten()
            .and_then(|n| target.get(&n).map(|p| (n, *p)));
        match marker {
            Some((n, p)) => {
                h.text(&rest[..open]);
                h.markup("<a class=\"cite\" href=\"#src-")
                    .value(p)
                    .markup("\">[")
                    .value(n)
                    .markup("]</a>");
                rest = &after[digits + 1..];
            }
            None => {
                h.text(&rest[..=open]);
                rest = after;
            }
        }
    }
    h.text(rest);
}

fn settings(h: &mut Html, run: &RunRecord) {
    h.markup("<section id=\"settings\"><h2>Settings and usage</h2><table class=\"kv\">");
    let mut row = |k: &str, v: String| {
        h.markup("<tr><th>")
            .text(k)
            .markup("</th><td>")
            .text(&v)
            .markup("</td></tr>");
    };
    if let Some(mode) = run.mode {
        row("mode", mode.as_str().to_string());
    }
    if !run.backend.is_empty() {
        row("backend", run.backend.clone());
    }
    if !run.model.is_empty() {
        row("model", run.model.clone());
    }
    if let Some(b) = run.budget {
        row("context window", thousands(b.context_window as u64));
        row(
            "output reserve (num_output)",
            thousands(b.num_output as u64),
        );
        row("prompt limit", thousands(b.max_prompt_tokens as u64));
    }
    row("calls", thousands(run.usage.calls));
    row("prompt tokens", thousands(run.usage.prompt_tokens));
    row("completion tokens", thousands(run.usage.completion_tokens));
    row(
        "replies cut at the output limit",
        thousands(run.usage.truncated_calls),
    );
    if let Some(ms) = run.total_ms {
        row("time", format!("{ms:.0} ms"));
    }
    for (k, v) in &run.settings {
        row(k, v.clone());
    }
    h.markup("</table></section>\n");
}

/// `n` with thin separators every three digits (`12,345`).
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first `n` characters of `text`, with `…` when there were more.
pub(crate) fn first_chars(text: &str, n: usize) -> String {
    let mut out: String = text.chars().take(n).collect();
    if text.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}
