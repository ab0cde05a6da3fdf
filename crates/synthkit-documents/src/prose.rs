//! What is not prose for a reader, though it is text: stylesheets, scripts, SVG images,
//! JSON data and redirect pages (a documentation site's assets). Found in a folder, they
//! are skipped as [`SkipReason::Asset`](super::SkipReason::Asset) unless the reader keeps
//! everything; a file named on its own is always read.

use super::report::Asset;

/// Words a redirect page may have (`Redirecting to macro.eprintln.html...`).
const REDIRECT_MAX_WORDS: usize = 40;

/// The asset a file name says (its extension, inside a `.gz`): `.css`, `.scss`, `.sass`,
/// `.less` are styles; `.js`, `.mjs`, `.cjs`, `.map` scripts; `.svg`, `.svgz` images;
/// `.json` data; `.woff`, `.woff2`, `.ttf`, `.otf`, `.eot` fonts.
pub(crate) fn by_name(name: &str) -> Option<Asset> {
    let lower = name.to_ascii_lowercase();
    let inner = lower.strip_suffix(".gz").unwrap_or(&lower);
    let (_, ext) = inner.rsplit_once('.')?;
    match ext {
        "css" | "scss" | "sass" | "less" => Some(Asset::Style),
        "js" | "mjs" | "cjs" | "map" => Some(Asset::Script),
        "svg" | "svgz" => Some(Asset::Svg),
        "json" => Some(Asset::Data),
        "woff" | "woff2" | "ttf" | "otf" | "eot" => Some(Asset::Font),
        _ => None,
    }
}

/// Whether decoded text is an SVG image whatever its name: `<svg` first, after an XML
/// declaration, comments and a doctype.
pub(crate) fn is_svg(text: &str) -> bool {
    let mut rest = text.trim_start_matches('\u{feff}').trim_start();
    for _ in 0..16 {
        if rest.starts_with("<svg") {
            return true;
        }
        let skip = if rest.starts_with("<?") {
            "?>"
        } else if rest.starts_with("<!--") {
            "-->"
        } else if rest.starts_with("<!") {
            ">"
        } else {
            return false;
        };
        match rest.find(skip) {
            Some(end) => {
                rest = rest
                    .get(end + skip.len()..)
                    .unwrap_or_default()
                    .trim_start()
            }
            None => return false,
        }
    }
    false
}

/// Whether an HTML page only redirects to another: a `<meta http-equiv="refresh">` and,
/// once converted, only a few words (`Redirecting to ...`).
pub(crate) fn is_redirect(html: &str, converted: &str) -> bool {
    let head = html.get(..html.len().min(4096)).unwrap_or(html);
    let lower = head.to_ascii_lowercase();
    let refresh = lower.contains("http-equiv=\"refresh\"") || lower.contains("http-equiv=refresh");
    refresh && converted.split_whitespace().count() <= REDIRECT_MAX_WORDS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_contents() {
        assert_eq!(by_name("ayu-highlight-3fdfc3ac.css"), Some(Asset::Style));
        assert_eq!(by_name("book.JS"), Some(Asset::Script));
        assert_eq!(by_name("ferris.svg"), Some(Asset::Svg));
        assert_eq!(by_name("assert.json.gz"), Some(Asset::Data));
        assert_eq!(by_name("FiraSans-Regular.woff2"), Some(Asset::Font));
        assert_eq!(by_name("OpenSans.TTF"), Some(Asset::Font));
        assert_eq!(by_name("README.md"), None);
        assert_eq!(by_name("NEWS.gz"), None);
        assert_eq!(by_name("Makefile"), None);
        assert!(is_svg(
            "<?xml version=\"1.0\"?>\n<!-- x -->\n<svg xmlns=\"...\">"
        ));
        assert!(!is_svg("<html><svg></svg></html>"));
        let page = "<html><head><meta http-equiv=\"refresh\" content=\"0;URL=a.html\"></head>";
        assert!(is_redirect(
            page,
            "# Redirection\n\nRedirecting to a.html..."
        ));
        assert!(!is_redirect(page, &"word ".repeat(100)));
        assert!(!is_redirect("<html><body>", "Redirecting to a.html"));
    }
}
