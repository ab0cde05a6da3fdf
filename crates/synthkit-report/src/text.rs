//! Numbers and text as the pages show them.

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
