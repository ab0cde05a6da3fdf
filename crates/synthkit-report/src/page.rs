//! The page: head, answer, sources, settings; the synthesis and the budget are drawn by
//! [`crate::picture`].

use std::collections::HashMap;

use crate::html::Html;
use crate::index::Index;
use crate::picture;
use crate::record::RunRecord;
use crate::style::{SCRIPT, STYLE};
use crate::text::{first_chars, thousands};

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
    if let Some(usd) = run.usage.cost_usd {
        row("cost", format!("${usd:.6} at the prices given"));
    }
    if let Some(ms) = run.total_ms {
        row("time", format!("{ms:.0} ms"));
    }
    for (k, v) in &run.settings {
        row(k, v.clone());
    }
    h.markup("</table></section>\n");
}
