//! Keeping secrets out of what is shown: URLs without their user-info or query.
//!
//! A base URL may carry credentials (`http://user:password@host/v1`, which the HTTP
//! client sends as basic authentication; `http://host/v1?api-version=1&key=...`, as
//! gateways take keys). Everything synthkit shows (messages, errors, log lines, traces,
//! `Debug` output, health probes) passes URLs through [`redact_url`], or whole texts that
//! may contain URLs through [`redact_urls`], so the user-info and the query are shown as
//! `***`: `http://***@host/v1`, `http://host/v1?***`.
//!
//! ```
//! use synthkit::secret::{redact_url, redact_urls};
//!
//! assert_eq!(redact_url("http://me:hunter2@127.0.0.1:8080/v1"), "http://***@127.0.0.1:8080/v1");
//! assert_eq!(redact_url("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
//! assert_eq!(redact_url("http://h/v1?api-version=1&key=k"), "http://h/v1?***");
//! assert_eq!(
//!     redact_urls("error sending request for url (http://me:hunter2@host/v1/models)"),
//!     "error sending request for url (http://***@host/v1/models)"
//! );
//! ```
//!
//! Written here rather than taken from the `url` crate: a URL parser normalises what it
//! shows (and fails on the malformed URLs that most need redacting in error messages),
//! and none scans free text; this is a small scan that only ever removes characters.

/// What the user-info of a URL is shown as.
pub const REDACTED_USERINFO: &str = "***";

/// What a URL's query is shown as.
pub const REDACTED_QUERY: &str = "***";

/// `url` with its user-info (`user:password@`) shown as `***@` and its query as `?***`;
/// unchanged when it has neither. Malformed URLs are handled too: everything between `://` and the `@` that ends
/// the user-info is hidden, even when the password holds characters a URL may not
/// (`/`, `?`, `#`).
pub fn redact_url(url: &str) -> String {
    redact_urls(url)
}

/// `text` with the user-info of every URL in it (any scheme: `scheme://user:pw@host`)
/// shown as `***@`, and its query (`?api-version=1&key=...`) as `?***`. A URL runs from
/// its `://` to the next whitespace or quote (a `)` with at most one `,` `:` `.` `;`
/// after it at its end is kept, as error messages write `(for url http://...):`).
pub fn redact_urls(text: &str) -> String {
    if !text.contains("://") || !(text.contains('@') || text.contains('?')) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let token_end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .unwrap_or(tail.len());
        let (token, after) = tail.split_at(token_end);
        let shown = match userinfo_end(token) {
            Some(end) => {
                out.push_str(REDACTED_USERINFO);
                token.get(end..).unwrap_or_default()
            }
            None => token,
        };
        push_without_query(&mut out, shown);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Pushes `url` (the part after the user-info) with its query shown as `?***`, keeping a
/// closing `)` and one punctuation mark after it at the end of the token.
fn push_without_query(out: &mut String, url: &str) {
    let Some(q) = url.find('?') else {
        out.push_str(url);
        return;
    };
    out.push_str(url.get(..=q).unwrap_or_default());
    out.push_str(REDACTED_QUERY);
    let query = url.get(q + 1..).unwrap_or_default();
    let trimmed = query.trim_end_matches([',', ':', '.', ';']);
    let tail = if trimmed.ends_with(')') {
        let punct = query.len() - trimmed.len();
        if punct <= 1 {
            query.get(trimmed.len() - 1..)
        } else {
            None
        }
    } else {
        None
    };
    out.push_str(tail.unwrap_or_default());
}

/// Where the user-info of `token` (what follows `://`) ends: the index of the `@` that
/// closes it. The `@` is the last one in the authority (up to the first `/`, `?` or
/// `#`); a token with no `@` there but one further on is taken to have a password with
/// one of those characters in it, so everything up to the last `@` is user-info (more is
/// hidden rather than a secret shown).
fn userinfo_end(token: &str) -> Option<usize> {
    let authority_end = token.find(['/', '?', '#']).unwrap_or(token.len());
    let authority = token.get(..authority_end).unwrap_or_default();
    authority.rfind('@').or_else(|| token.rfind('@'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_is_hidden_and_the_rest_kept() {
        let cases = [
            ("http://u:p@h/v1", "http://***@h/v1"),
            ("https://u@h:8443", "https://***@h:8443"),
            ("http://:p@h", "http://***@h"),
            ("http://u:p@@h/", "http://***@h/"),
            ("http://h/v1", "http://h/v1"),
            // An `@` after the authority may end a password with a `/` in it: hidden.
            ("http://h/a@b", "http://***@b"),
            ("http://u:p@h/a@b", "http://***@h/a@b"),
            ("http://u:pa/ss@h/v1", "http://***@h/v1"),
            ("http://u:pa#ss@h/v1", "http://***@h/v1"),
            ("http://u:p%40w@h/v1", "http://***@h/v1"),
            ("", ""),
            ("no url @ all", "no url @ all"),
            ("http://", "http://"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn queries_are_hidden() {
        let cases = [
            ("http://h/v1?api-version=2024-06-01", "http://h/v1?***"),
            ("http://u:p@h/v1?key=k", "http://***@h/v1?***"),
            (
                "http://h/v1/chat/completions?k=v#frag",
                "http://h/v1/chat/completions?***",
            ),
            ("http://h/v1?", "http://h/v1?***"),
            ("http://h/v1", "http://h/v1"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
        assert_eq!(
            redact_urls(
                "error sending request for url (http://127.0.0.1:1/v1/models?key=sekrit): refused"
            ),
            "error sending request for url (http://127.0.0.1:1/v1/models?***): refused"
        );
        assert_eq!(redact_urls("what? no url"), "what? no url");
    }

    #[test]
    fn every_url_in_a_text_is_redacted() {
        assert_eq!(
            redact_urls("a http://u:p@h/x and redis://:pw@r:6379/0, \"https://k@s/\" end"),
            "a http://***@h/x and redis://***@r:6379/0, \"https://***@s/\" end"
        );
        assert_eq!(
            redact_urls("for url (http://u:secret@127.0.0.1:1/v1/models): refused"),
            "for url (http://***@127.0.0.1:1/v1/models): refused"
        );
        let multibyte = "é http://ü:é@h/ é";
        assert_eq!(redact_urls(multibyte), "é http://***@h/ é");
    }
}
