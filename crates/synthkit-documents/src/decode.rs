//! Bytes to text, recognised by content rather than by extension.
//!
//! The rule, in order:
//!
//! 1. A byte-order mark decides: UTF-8, UTF-16 LE or UTF-16 BE (decoded with
//!    `encoding_rs`, the mark removed).
//! 2. Without one, a NUL byte in the first [`PROBE_BYTES`] bytes means binary (as git and
//!    ripgrep decide). UTF-16 without a byte-order mark is therefore binary.
//! 3. Valid UTF-8 is taken as it is.
//! 4. Invalid UTF-8 with no valid multi-byte sequence at all is a legacy 8-bit file: it is
//!    decoded as the charset its HTML `<meta charset>` names, if any, else as windows-1252
//!    (the WHATWG default for unlabelled Western text, a superset of printable latin-1), so
//!    `caf\xE9` reads `café`. Invalid UTF-8 that also holds valid multi-byte sequences is
//!    UTF-8 with damage: the bad bytes become U+FFFD. Either way [`Decoded::note`] says so.
//! 5. Whatever the decoding, the first [`PROBE_BYTES`] characters are checked: a NUL, or
//!    more than one in twenty that are control characters (other than tab, newlines, form
//!    feed, backspace and escape) or U+FFFD (at least four in texts under 64 characters),
//!    means binary.
//!
//! Legacy multi-byte encodings without a label (Shift_JIS, GBK, ...) are not guessed: they
//! decode as windows-1252 and read as mojibake, with the note.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE, WINDOWS_1252};

/// Bytes (and decoded characters) inspected to tell binary from text.
pub const PROBE_BYTES: usize = 8192;

/// Text decoded from bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decoded {
    /// The text, without a byte-order mark.
    pub text: String,
    /// The encoding used: `UTF-8`, `UTF-16LE`, `UTF-16BE`, `windows-1252`, or the one an
    /// HTML `<meta charset>` named.
    pub encoding: &'static str,
    /// Why the text may not be exactly what the file meant, when it may not: invalid
    /// UTF-8 replaced or decoded with a legacy encoding, or malformed UTF-16 replaced.
    pub note: Option<String>,
}

/// Decodes `bytes` by the rule in the [module documentation](self). `html`: the bytes are
/// HTML, whose `<meta charset>` is honoured when they are not valid UTF-8. `None`: binary.
pub fn decode(bytes: &[u8], html: bool) -> Option<Decoded> {
    let probe = bytes.get(..PROBE_BYTES).unwrap_or(bytes);
    if Encoding::for_bom(bytes).is_none() && probe.contains(&0) {
        return None;
    }
    let decoded = decode_text(bytes, html);
    if looks_binary(&decoded.text) {
        return None;
    }
    Some(decoded)
}

/// The `encoding_rs` name of an encoding's label (`UTF-8`, `windows-1252`): how an
/// encoding saved by its name is restored (see [`ReadNote`](crate::ReadNote)'s and
/// [`ReadFile`](crate::ReadFile)'s serde forms). `None`: no encoding has that label.
pub fn encoding_named(label: &str) -> Option<&'static str> {
    Encoding::for_label(label.as_bytes()).map(Encoding::name)
}

/// Decodes `bytes` as [`decode`] does, without telling binary from text: for bytes that
/// must be taken as text whatever they hold (a file given to count its tokens).
pub fn decode_always(bytes: &[u8]) -> Decoded {
    decode_text(bytes, false)
}

fn decode_text(bytes: &[u8], html: bool) -> Decoded {
    if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        let rest = bytes.get(bom_len..).unwrap_or_default();
        let (text, had_errors) = encoding.decode_without_bom_handling(rest);
        let note = had_errors.then(|| {
            format!(
                "is not valid {} (after its byte-order mark); invalid sequences were replaced with U+FFFD",
                encoding.name()
            )
        });
        return Decoded {
            text: text.into_owned(),
            encoding: encoding.name(),
            note,
        };
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Decoded {
            text: text.to_owned(),
            encoding: UTF_8.name(),
            note: None,
        },
        Err(e) => {
            let offset = e.valid_up_to();
            if has_multibyte_utf8(bytes) {
                let text = String::from_utf8_lossy(bytes).into_owned();
                return Decoded {
                    text,
                    encoding: UTF_8.name(),
                    note: Some(format!(
                        "is not valid UTF-8 (first bad byte at offset {offset}); invalid bytes were replaced with U+FFFD"
                    )),
                };
            }
            let encoding = html
                .then(|| meta_charset(bytes))
                .flatten()
                .filter(|enc| *enc != UTF_8 && *enc != UTF_16LE && *enc != UTF_16BE)
                .unwrap_or(WINDOWS_1252);
            let (text, _, _) = encoding.decode(bytes);
            Decoded {
                text: text.into_owned(),
                encoding: encoding.name(),
                note: Some(format!(
                    "is not valid UTF-8 (first bad byte at offset {offset}); decoded as {}",
                    encoding.name()
                )),
            }
        }
    }
}

/// Whether the bytes hold at least one valid multi-byte UTF-8 sequence.
fn has_multibyte_utf8(bytes: &[u8]) -> bool {
    bytes.utf8_chunks().any(|chunk| !chunk.valid().is_ascii())
}

/// The encoding an HTML `<meta charset=...>` (or `content="...; charset=..."`) names in the
/// first 1024 bytes, as browsers look for it.
fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = bytes.get(..1024).unwrap_or(bytes);
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let at = head.find("charset=")? + "charset=".len();
    let label: String = head
        .get(at..)?
        .trim_start_matches(['"', '\''])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
        .collect();
    Encoding::for_label(label.as_bytes())
}

/// Whether decoded text looks binary: a NUL, or too many control characters or U+FFFD in
/// its first [`PROBE_BYTES`] characters.
pub(crate) fn looks_binary(text: &str) -> bool {
    let mut total = 0usize;
    let mut suspicious = 0usize;
    for c in text.chars().take(PROBE_BYTES) {
        total += 1;
        match c {
            '\0' => return true,
            '\t' | '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{08}' | '\u{1b}' => {}
            '\u{FFFD}' => suspicious += 1,
            c if c.is_control() => suspicious += 1,
            _ => {}
        }
    }
    // Short texts need a few such characters: one bad byte in a ten-word note is text.
    suspicious * 20 > total.max(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_and_boms() {
        let d = decode("héllo".as_bytes(), false).unwrap();
        assert_eq!(
            (d.text.as_str(), d.encoding, d.note),
            ("héllo", "UTF-8", None)
        );
        let d = decode(b"\xEF\xBB\xBFhi", false).unwrap();
        assert_eq!(d.text, "hi");
        let mut le = vec![0xFF, 0xFE];
        le.extend("Grüße".encode_utf16().flat_map(u16::to_le_bytes));
        let d = decode(&le, false).unwrap();
        assert_eq!((d.text.as_str(), d.encoding), ("Grüße", "UTF-16LE"));
        let mut be = vec![0xFE, 0xFF];
        be.extend("Grüße".encode_utf16().flat_map(u16::to_be_bytes));
        assert_eq!(decode(&be, false).unwrap().text, "Grüße");
    }

    #[test]
    fn legacy_and_damaged_utf8() {
        let d = decode(b"The caf\xe9 opens.", false).unwrap();
        assert_eq!(d.text, "The café opens.");
        assert_eq!(d.encoding, "windows-1252");
        assert!(d.note.unwrap().contains("not valid UTF-8"));
        // Valid multi-byte UTF-8 beside a bad byte: UTF-8 with damage.
        let d = decode(
            "naïve \u{2014} "
                .as_bytes()
                .iter()
                .chain(b"\xff ok")
                .copied()
                .collect::<Vec<_>>()
                .as_slice(),
            false,
        )
        .unwrap();
        assert_eq!(d.text, "naïve \u{2014} \u{FFFD} ok");
        // HTML names its charset.
        let html =
            b"<html><head><meta charset=\"iso-8859-7\"></head><body>\xe1\xe2\xe3</body></html>";
        assert!(decode(html, true).unwrap().text.contains("αβγ"));
    }

    #[test]
    fn binary() {
        assert!(decode(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", false).is_none());
        assert!(decode(b"ELF\x02\x01\0\0", false).is_none());
        let noise: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1)
            .collect();
        assert!(decode(&noise, false).is_none());
        assert!(decode(b"form\x0cfeed and \x1b[1mbold\x1b[0m", false).is_some());
    }
}
