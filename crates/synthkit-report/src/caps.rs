//! The caps that keep a report small and quick to open, even for 10,000 chunks.
//!
//! | what | cap |
//! |---|---|
//! | a call's reply shown in its box | [`REPLY_EXCERPT_BYTES`] (the step itself keeps up to `synthkit::steps::MAX_STEP_REPLY_BYTES`) |
//! | node links listed in a call's box | [`NODE_LINKS_PER_CALL`] |
//! | a source's excerpt | [`SOURCE_EXCERPT_BYTES`], [`SOURCE_EXCERPT_BYTES_LARGE`] past [`LARGE_RUN_SOURCES`] sources |
//! | call links listed per source | [`CALL_LINKS_PER_SOURCE`] |
//! | sources listed | [`MAX_SOURCES`]; past [`LARGE_RUN_SOURCES`], the uncited ones in collapsed groups of [`SOURCE_GROUP`] |
//! | rows of the budget table | [`BUDGET_ROWS`] |
//! | a level shown open | at most [`OPEN_LEVEL_CALLS`] calls; larger levels start collapsed |
//! | images (thumbnails of image nodes, as `data:` URLs) | [`PAGE_IMAGE_BYTES`] of data URLs on one page, and of base64 kept in one [`crate::RunRecord`]; past it an image shows as its node id and "image not embedded (page image budget)" |
//!
//! Whatever a cap leaves out is said on the page ("… 1,234 more bytes", "+12 more").

/// Bytes of a call's reply shown in its box.
pub const REPLY_EXCERPT_BYTES: usize = 4 * 1024;
/// Node links listed in a call's box.
pub const NODE_LINKS_PER_CALL: usize = 40;
/// Bytes of a source's text shown.
pub const SOURCE_EXCERPT_BYTES: usize = 1024;
/// Bytes of a source's text shown in a large run.
pub const SOURCE_EXCERPT_BYTES_LARGE: usize = 240;
/// Sources from which a run counts as large.
pub const LARGE_RUN_SOURCES: usize = 1000;
/// Uncited sources per collapsed group in a large run.
pub const SOURCE_GROUP: usize = 500;
/// Call links listed per source.
pub const CALL_LINKS_PER_SOURCE: usize = 12;
/// Sources listed (the rest are counted).
pub const MAX_SOURCES: usize = 20_000;
/// Rows of the budget table (every call is still in the picture).
pub const BUDGET_ROWS: usize = 2_000;
/// Calls of a level that start open; larger levels start collapsed.
pub const OPEN_LEVEL_CALLS: usize = 60;

/// Bytes of image data URLs one page embeds (each thumbnail counted where it is shown: in
/// a call's box and in the sources), and of image base64 one [`crate::RunRecord`] keeps:
/// 8 MiB. Past it an image is named, not shown.
pub const PAGE_IMAGE_BYTES: usize = 8 * 1024 * 1024;
/// The most a thumbnail is drawn across, in CSS pixels.
pub const THUMBNAIL_PX: usize = 96;

/// The excerpt size for a run with `sources` sources.
pub fn source_excerpt_bytes(sources: usize) -> usize {
    if sources > LARGE_RUN_SOURCES {
        SOURCE_EXCERPT_BYTES_LARGE
    } else {
        SOURCE_EXCERPT_BYTES
    }
}
