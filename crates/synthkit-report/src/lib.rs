//! One self-contained HTML page per synthesis.
//!
//! The page shows the answer with its `[n]` citations linked (`#src-K` anchors) to the
//! cited chunks and whether it is grounded; the synthesis as a picture, each model call a
//! box (step, level, index, prompt and completion tokens, time, retries, context
//! corrections, a reply cut at the output limit) that opens on a click to show the
//! prompt's nodes (ids, sections) and the model's reply; the budget (window, output
//! reserve, each prompt's fill); the sources with their scores and the calls that read
//! them; the run's settings and usage.
//!
//! The file stands alone: inline CSS and a little inline script, nothing fetched (its
//! Content-Security-Policy forbids any load), readable without JavaScript (`<details>`
//! and anchors do the work). Every text is HTML-escaped by one small writer
//! ([`html::escape`]): replies and chunks are untrusted, and a `</script>` or
//! `<img onerror=...>` in them shows as text. No templating crate: the page is a few
//! hundred lines of markup, and a writer whose only raw input is `&'static str` makes
//! escaping the default rather than a filter to remember.
//!
//! An image node's image shows as a thumbnail (at most [`caps::THUMBNAIL_PX`] pixels wide,
//! `alt` its node id) in the box of each call whose prompt carried it and in the sources.
//! Images are embedded as `data:` URLs (the page still fetches nothing), at most
//! [`caps::PAGE_IMAGE_BYTES`] (8 MiB) of them on one page; past that budget an image is
//! named with "image not embedded (page image budget)".
//!
//! Large runs stay quick to open: levels of many calls start collapsed and excerpts are
//! capped ([`caps`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::sync::Arc;
//! use synthkit::{Node, ResponseMode, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//! use synthkit_report::{RunRecord, render};
//!
//! let model = ScriptedModel::constant(ModelInfo::new("demo"), "Blue.");
//! let synth = Synthesizer::builder(Arc::new(model))
//!     .mode(ResponseMode::Refine)
//!     .return_steps(true)
//!     .build()
//!     .unwrap();
//! let nodes = vec![Node::new("a", "The sky is blue."), Node::new("b", "<b>Grass</b> is green.")];
//! let response = synth.synthesize("What colour is the sky?", nodes).await.unwrap();
//! let page = render(&RunRecord::from_response("What colour is the sky?", ResponseMode::Refine, &response));
//! assert!(page.contains("id=\"call-2\""));
//! assert!(page.contains("&lt;b&gt;Grass"));
//! # }
//! ```

pub mod caps;
#[cfg(feature = "eval")]
mod eval_page;
pub mod html;
mod index;
mod page;
mod picture;
pub mod record;
mod sources;
mod style;
mod text;
pub mod trace;

#[cfg(feature = "eval")]
pub use eval_page::{EVAL_ANSWER_CHARS, render_eval};
pub use page::render;
pub use record::{BudgetRecord, CitationRecord, ImageRecord, RunRecord, SourceRecord, UsageRecord};
pub use trace::{TraceError, read_trace};
