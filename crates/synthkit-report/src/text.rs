//! Numbers and text as the pages show them.

pub(crate) use synthkit::text::thousands;

/// The first `n` characters of `text`, with `…` when there were more.
pub(crate) fn first_chars(text: &str, n: usize) -> String {
    let mut out: String = text.chars().take(n).collect();
    if text.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}
