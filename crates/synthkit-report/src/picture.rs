//! The synthesis as a picture (each call a box; the refine chain in a row with arrows,
//! the tree's levels stacked with the final call on top, accumulate's fan-out joined into
//! one answer) and the budget (each prompt's fill).
//!
//! A box is a `<details>` element: clicking it shows the prompt's nodes (linked to the
//! sources) and the reply, without any script.

use std::collections::BTreeMap;

use synthkit::{ResponseMode, SynthStep};

use crate::caps;
use crate::html::Html;
use crate::index::Index;
use crate::record::RunRecord;
use crate::text::thousands;

/// How the calls of one level are laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Each call feeds the next (refine, compact).
    Chain,
    /// Calls side by side, joined above (tree levels, accumulate).
    Fan,
}

fn shape_of(mode: Option<ResponseMode>) -> Shape {
    match mode {
        Some(ResponseMode::Refine | ResponseMode::Compact) => Shape::Chain,
        _ => Shape::Fan,
    }
}

/// The `Synthesis` section.
pub(crate) fn synthesis(h: &mut Html, run: &RunRecord, index: &Index<'_>) {
    h.markup("<section id=\"synthesis\"><h2>Synthesis</h2>");
    if run.steps.is_empty() {
        h.markup("<p class=\"note\">No model call was recorded.</p></section>\n");
        return;
    }
    h.markup("<p class=\"note\">Each box is one model call: click it for its prompt's nodes and the model's reply. <span class=\"js\"><button type=\"button\" data-open=\"1\">open all levels</button> <button type=\"button\" data-open=\"0\">close all levels</button></span></p>");
    let shape = shape_of(run.mode);
    let mut levels: BTreeMap<u32, Vec<&SynthStep>> = BTreeMap::new();
    for s in &run.steps {
        levels.entry(s.level).or_default().push(s);
    }
    // A level's boxes go by their index in the level (the request's place), not by when
    // their calls finished.
    for calls in levels.values_mut() {
        calls.sort_by_key(|s| (s.index, s.call));
    }
    // Only a run that answered has a last level known to be final.
    let finished = run.answer.is_some();
    let limit = run.budget.map(|b| b.max_prompt_tokens);
    let top = levels.keys().next_back().copied().unwrap_or(0);
    if matches!(
        run.mode,
        Some(ResponseMode::Accumulate | ResponseMode::CompactAccumulate)
    ) {
        if finished {
            h.markup("<div class=\"join\">the answer: the ")
                .value(thousands(run.steps.len() as u64))
                .markup(" replies below, numbered and joined</div><div class=\"up\">▲</div>");
        } else {
            h.markup("<div class=\"join\">the run did not finish (killed, incomplete or failed): the replies below were not joined into an answer</div>");
        }
    }
    for (&level, calls) in levels.iter().rev() {
        let open = calls.len() <= caps::OPEN_LEVEL_CALLS;
        h.markup(if open {
            "<details class=\"level\" open><summary>"
        } else {
            "<details class=\"level\"><summary>"
        });
        let what = match (run.mode, level == top) {
            (Some(ResponseMode::TreeSummarize), true) if finished => "the final summary",
            (Some(ResponseMode::TreeSummarize), true) => {
                "summaries · the run did not finish (killed, incomplete or failed): not the final summary"
            }
            (Some(ResponseMode::TreeSummarize), false) => "summaries",
            (_, _) if shape == Shape::Chain => "the refine chain, left to right",
            _ => "answers",
        };
        h.value(format_args!(
            "Level {level} · {} call{} · {what}",
            thousands(calls.len() as u64),
            if calls.len() == 1 { "" } else { "s" }
        ));
        if !open {
            h.markup(" (collapsed: click to open)");
        }
        h.markup("</summary><div class=\"row\">");
        for (i, step) in calls.iter().enumerate() {
            if i > 0 && shape == Shape::Chain {
                h.markup("<span class=\"arrow\">→</span>");
            }
            call_box(h, step, index, limit);
        }
        h.markup("</div></details>");
        if level > 0 {
            h.markup("<div class=\"up\">▲</div>");
        }
    }
    h.markup("</section>\n");
}

/// One call's box.
/// A warning tag "`n` things" (the names: singular, plural), when `n` is not 0.
fn count_tag(h: &mut Html, n: u32, (one, many): (&'static str, &'static str)) {
    if n > 0 {
        h.markup(" <span class=\"tag bad\">")
            .value(n)
            .markup(" ")
            .markup(if n == 1 { one } else { many })
            .markup("</span>");
    }
}

fn call_box(h: &mut Html, s: &SynthStep, index: &Index<'_>, limit: Option<usize>) {
    let mut class = String::from("call");
    if s.truncated {
        class.push_str(" cut");
    }
    if s.retries > 0 || s.corrections > 0 {
        class.push_str(" warn");
    }
    h.markup("<details class=\"")
        .text(&class)
        .markup("\" id=\"call-")
        .value(s.call)
        .markup("\"><summary><b>#")
        .value(s.index)
        .markup(" ")
        .text(s.step.as_str())
        .markup("</b> <span>L")
        .value(s.level)
        .markup(" · call ")
        .value(s.call)
        .markup("</span> <span>")
        .value(thousands(s.prompt_tokens))
        .markup(" + ")
        .value(thousands(s.completion_tokens))
        .markup(" tok</span> <span>")
        .value(format_args!("{:.0} ms", s.ms))
        .markup("</span>");
    count_tag(h, s.retries, ("retry", "retries"));
    count_tag(h, s.corrections, ("correction", "corrections"));
    if s.truncated {
        h.markup(" <span class=\"tag bad\">reply cut at ")
            .value(s.max_tokens)
            .markup(" tokens</span>");
    }
    h.markup("</summary><div class=\"body\"><p>prompt ")
        .value(thousands(s.prompt_tokens))
        .markup(" tokens");
    if let Some(limit) = limit.filter(|l| *l > 0) {
        h.value(format_args!(
            " ({:.0}% of the {} limit)",
            100.0 * s.counted_prompt_tokens as f64 / limit as f64,
            thousands(limit as u64)
        ));
    }
    h.markup(if s.usage_reported {
        ", counted by the server"
    } else {
        ", counted by synthkit"
    });
    if s.cached_prompt_tokens > 0 {
        // The server read these from its prompt cache instead of processing them.
        h.markup(", ")
            .value(thousands(s.cached_prompt_tokens))
            .markup(" of them from the server's prompt cache");
    }
    h.markup("; reply ")
        .value(thousands(s.completion_tokens))
        .markup(" of ")
        .value(thousands(s.max_tokens as u64))
        .markup(" tokens</p>");
    if !s.input_calls.is_empty() {
        h.markup("<p>reads the summaries of ");
        for c in &s.input_calls {
            index.call_link(h, *c);
            h.markup(" ");
        }
        h.markup("</p>");
    }
    // A step read back from a trace lists the first of its nodes and counts them all.
    let nodes = s.node_count.unwrap_or(0).max(s.node_ids.len());
    h.markup("<p>nodes (")
        .value(thousands(nodes as u64))
        .markup(")");
    if s.node_ids.is_empty() {
        h.markup(": not known");
    }
    h.markup("</p><ul class=\"nodes\">");
    for id in s.node_ids.iter().take(caps::NODE_LINKS_PER_CALL) {
        h.markup("<li>");
        index.node_link(h, id);
        if let Some(section) = index
            .position
            .get(id.as_str())
            .and_then(|&p| index.sections.get(p).copied().flatten())
        {
            h.markup(" <small>").text(section).markup("</small>");
        }
        h.markup("</li>");
    }
    let linked = s.node_ids.len().min(caps::NODE_LINKS_PER_CALL);
    if nodes > linked {
        h.markup("<li>")
            .value(format_args!("+{} more", nodes - linked))
            .markup("</li>");
    }
    h.markup("</ul>");
    // The images the prompt carried: its image nodes' (a tree level above the first reads
    // summaries, which are text).
    if s.input_calls.is_empty() {
        let images: Vec<_> = s
            .node_ids
            .iter()
            .take(caps::NODE_LINKS_PER_CALL)
            .filter_map(|id| Some((id, index.image_of(id)?)))
            .collect();
        if !images.is_empty() {
            h.markup("<p class=\"thumbs\">images sent: ");
            for (id, image) in images {
                index.thumbnail(h, id, image);
                h.markup(" ");
            }
            h.markup("</p>");
        }
    }
    h.markup("<pre class=\"reply\">");
    let (shown, _) = synthkit::steps::cap_text(&s.reply, caps::REPLY_EXCERPT_BYTES);
    h.text(shown);
    let hidden = s.reply_bytes.saturating_sub(shown.len());
    if hidden > 0 {
        h.markup("<span class=\"more\">… ")
            .value(thousands(hidden as u64))
            .markup(" more bytes not kept</span>");
    }
    h.markup("</pre>");
    if !s.thinking.is_empty() {
        // A reasoning model's thinking: beside the reply, never part of it.
        let (shown, _) = synthkit::steps::cap_text(&s.thinking, caps::REPLY_EXCERPT_BYTES);
        h.markup("<details class=\"thinking\"><summary>thinking (")
            .value(thousands(s.reasoning_tokens))
            .markup(" reasoning tokens)</summary><pre class=\"reply\">");
        h.text(shown);
        h.markup("</pre></details>");
    }
    h.markup("</div></details>");
}

/// The `Budget` section: the window, the output reserve and each prompt's fill.
pub(crate) fn budget(h: &mut Html, run: &RunRecord) {
    h.markup("<section id=\"budget\"><h2>Budget</h2>");
    let Some(b) = run.budget else {
        h.markup(
            "<p class=\"note\">The budget is not known (a trace without its run).</p></section>\n",
        );
        return;
    };
    h.markup("<p>context window ")
        .value(thousands(b.context_window as u64))
        .markup(" tokens = prompt limit ")
        .value(thousands(b.max_prompt_tokens as u64))
        .markup(" + output reserve ")
        .value(thousands(b.num_output as u64))
        .markup("</p>");
    h.markup("<table class=\"fill\"><tr><th>call</th><th>step</th><th>prompt tokens</th><th>fill of the prompt limit</th><th>reply tokens</th></tr>");
    let mut steps: Vec<&SynthStep> = run.steps.iter().collect();
    steps.sort_by_key(|s| s.call);
    for s in steps.iter().take(caps::BUDGET_ROWS) {
        let pct = if b.max_prompt_tokens == 0 {
            0.0
        } else {
            (100.0 * s.counted_prompt_tokens as f64 / b.max_prompt_tokens as f64).min(100.0)
        };
        h.markup("<tr><td><a href=\"#call-")
            .value(s.call)
            .markup("\">")
            .value(s.call)
            .markup("</a></td><td>")
            .text(s.step.as_str())
            .value(format_args!(" L{} #{}", s.level, s.index))
            .markup("</td><td>")
            .value(thousands(s.counted_prompt_tokens as u64))
            .markup("</td><td><span class=\"bar\"><span style=\"width:")
            .value(format_args!("{pct:.1}"))
            .markup("%\"></span></span> ")
            .value(format_args!("{pct:.0}%"))
            .markup("</td><td>")
            .value(thousands(s.completion_tokens))
            .markup(" / ")
            .value(thousands(s.max_tokens as u64))
            .markup("</td></tr>");
    }
    h.markup("</table>");
    if steps.len() > caps::BUDGET_ROWS {
        h.markup("<p class=\"note\">")
            .value(thousands((steps.len() - caps::BUDGET_ROWS) as u64))
            .markup(" more calls are not in this table (every call is in the picture above).</p>");
    }
    h.markup("</section>\n");
}
