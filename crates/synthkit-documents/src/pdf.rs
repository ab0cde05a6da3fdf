//! PDF to plain text with `pdf-extract` (on `lopdf`).
//!
//! Chosen over `lopdf`'s own `extract_text` after measuring both on the PDFs found on a
//! Debian machine (libtasn1.pdf 263 KB, shared-mime-info-spec.pdf 140 KB, a 351 KB USENIX
//! paper): pdf-extract keeps words whole and lines in reading order ("The rest of this paper
//! is organized as follows"), where lopdf splits words at kerning ("organiz ed as f
//! ollows") and puts page numbers and dot leaders on lines of their own. pdf-extract is
//! slower (207 ms against 27 ms for the 263 KB manual, release build), which is small beside
//! what is done with the text afterwards.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Whether the bytes are a PDF: `%PDF-` within the first 1024 bytes, as readers accept it.
pub fn is_pdf(bytes: &[u8]) -> bool {
    let head = bytes.get(..1024).unwrap_or(bytes);
    head.windows(5).any(|w| w == b"%PDF-")
}

/// The text of a PDF, page after page. Errors say why it could not be read (not a PDF,
/// damaged, encrypted with a password, or a document the extractor failed on).
pub fn pdf_text(bytes: &[u8]) -> Result<String, String> {
    // pdf-extract still has panicking paths on unusual documents: one bad file must not
    // take the whole read down with it (the panic hook still prints its message).
    match catch_unwind(AssertUnwindSafe(|| {
        pdf_extract::extract_text_from_mem(bytes)
    })) {
        Ok(Ok(text)) => Ok(tidy(&text)),
        Ok(Err(e)) => Err(format!("cannot extract PDF text: {e}")),
        Err(_) => Err("cannot extract PDF text: the PDF parser failed on this file".to_owned()),
    }
}

/// Trailing spaces trimmed, runs of blank lines (page breaks) cut to one.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0usize;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(is_pdf(b"%PDF-1.4\n"));
        assert!(!is_pdf(b"plain text"));
        assert!(pdf_text(b"%PDF-1.4\nthis is not a pdf").is_err());
    }

    #[test]
    fn tidy_collapses_blank_runs() {
        assert_eq!(tidy("\n\n a  \n\n\n\nb\nc\n\n"), " a\n\nb\nc\n");
    }
}
