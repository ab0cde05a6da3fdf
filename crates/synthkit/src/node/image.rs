//! Images carried by nodes (LlamaIndex's `ImageNode`): base64 data and its format.
//!
//! A [`NodeImage`] is checked when it is made: the data is standard base64 (padded or
//! not; ASCII whitespace such as line breaks is dropped), it decodes to at most a size cap
//! ([`DEFAULT_MAX_IMAGE_BYTES`], 20 MiB, unless the reader is given another), and its first
//! bytes are a PNG, JPEG, WebP or GIF image of the mime type given (when none is given, the
//! bytes say which). The decoded bytes are never held: the check decodes in small pieces,
//! and the image keeps its base64 text, shared between clones.
//!
//! Images are only ever data: synthkit never fetches an image by URL nor reads one from a
//! file path (an `image_url` other than a `data:` URL, or an `image_path`, is an error).
//!
//! A synthesis sends each image to the model at its node's place in the context, as a
//! chat message's image part, counted by [`crate::node::ImageCost`]; a model without
//! vision refuses them before any call ([`crate::SynthError::ImagesUnsupported`]).

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The largest image a node may carry by default, in decoded bytes: 20 MiB (the most
/// OpenAI's chat API takes for one image).
pub const DEFAULT_MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// Base64 characters decoded at a time while checking (a multiple of 4).
const CHUNK_CHARS: usize = 4096;
/// The decoded bytes the format is read from.
const HEAD_BYTES: usize = 12;
/// The most characters of a user's mime type an error message shows.
const SHOWN_CHARS: usize = 40;

/// An image format a node may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageFormat {
    /// `image/png`.
    Png,
    /// `image/jpeg` (`image/jpg` is read as this).
    Jpeg,
    /// `image/webp`.
    Webp,
    /// `image/gif`.
    Gif,
}

impl ImageFormat {
    /// The format's mime type.
    pub fn mime_type(self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Webp => "image/webp",
            ImageFormat::Gif => "image/gif",
        }
    }

    /// The format a mime type names (case and parameters such as `; charset=x` ignored;
    /// `image/jpg` is JPEG), if it is one of the four.
    pub fn from_mime_type(mime_type: &str) -> Option<Self> {
        let essence = mime_type.split(';').next().unwrap_or_default().trim();
        let known = [
            ("image/png", ImageFormat::Png),
            ("image/jpeg", ImageFormat::Jpeg),
            ("image/jpg", ImageFormat::Jpeg),
            ("image/webp", ImageFormat::Webp),
            ("image/gif", ImageFormat::Gif),
        ];
        known
            .into_iter()
            .find(|(name, _)| essence.eq_ignore_ascii_case(name))
            .map(|(_, format)| format)
    }

    /// The format whose signature `bytes` (an image's first bytes, 12 are enough) start
    /// with, if any.
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageFormat::Png)
        } else if bytes.starts_with(b"\xff\xd8\xff") {
            Some(ImageFormat::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageFormat::Gif)
        } else if bytes.len() >= 12
            && bytes.starts_with(b"RIFF")
            && bytes.get(8..12) == Some(b"WEBP".as_slice())
        {
            Some(ImageFormat::Webp)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            ImageFormat::Png => "PNG",
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::Webp => "WebP",
            ImageFormat::Gif => "GIF",
        }
    }
}

/// Why data is not an image a node may carry; the message says what to change. (Node JSON
/// errors wrap it with the node's position and field: [`super::NodeJsonError::Image`].)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The data is not standard base64.
    #[error(
        "not valid base64 ({reason}): give the image's bytes in standard base64 (A-Z, a-z, 0-9, + and /, optionally `=`-padded)"
    )]
    Base64 {
        /// What is wrong, and where.
        reason: String,
    },
    /// The data is empty.
    #[error("the image is empty: give the image's bytes, or no image")]
    Empty,
    /// The data decodes to more bytes than the cap.
    #[error(
        "the image is {size} bytes, over the limit of {max} bytes an image: give a smaller image (scale it down or compress it)"
    )]
    TooLarge {
        /// Its decoded size in bytes.
        size: usize,
        /// The cap.
        max: usize,
    },
    /// The bytes are none of the four formats.
    #[error(
        "the bytes are not a PNG, JPEG, WebP or GIF image (their first bytes are none of these formats' signatures): convert the image to one of them"
    )]
    UnknownFormat,
    /// A mime type other than the four formats'.
    #[error(
        "the mime type {given} is not supported: give image/png, image/jpeg, image/webp or image/gif (or none, to take it from the bytes)"
    )]
    UnsupportedMime {
        /// The mime type given (its first characters, quoted).
        given: String,
    },
    /// The mime type given and the bytes disagree.
    #[error(
        "the mime type is {given} but the bytes are a {actual} image: give the image's real mime type (or none, to take it from the bytes)"
    )]
    MimeMismatch {
        /// The mime type given.
        given: &'static str,
        /// The format of the bytes.
        actual: &'static str,
    },
    /// An image given by URL (not a `data:` URL): never fetched.
    #[error(
        "synthkit never fetches an image by URL: fetch it yourself and give its bytes as base64 (`image`), or as a `data:<mime type>;base64,<data>` URL"
    )]
    Url,
    /// An image given by file path: never read.
    #[error(
        "synthkit never reads an image from a file path: read the file yourself and give its bytes as base64 (`image`)"
    )]
    Path,
    /// A `data:` URL that is not `data:<mime type>;base64,<data>`.
    #[error(
        "a data URL must be `data:<mime type>;base64,<data>` (base64, with a mime type): give the image that way"
    )]
    DataUrl,
}

/// An image a node carries: its format and its bytes as base64, checked when made (see
/// [the module](self)). Clones share the data. Its `Debug` shows the format and size, not
/// the data; its serde form is `{"mime_type": "image/png", "data": "<base64>"}` (reading
/// it checks it with the default cap; `mime_type` may be left out).
///
/// ```
/// use synthkit::node::{ImageFormat, NodeImage};
///
/// let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
/// let image = NodeImage::from_bytes(png, None)?;
/// assert_eq!(image.format(), ImageFormat::Png);
/// assert_eq!(image.data_url(), "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==");
/// assert!(NodeImage::from_base64("iVBORw0KGgoAAAANSUhEUg==", Some("image/jpeg")).is_err());
/// # Ok::<(), synthkit::node::ImageError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ImageJson")]
pub struct NodeImage {
    format: ImageFormat,
    /// Standard base64, no whitespace.
    data: Arc<str>,
    /// The decoded size in bytes.
    len: usize,
}

impl NodeImage {
    /// An image from base64 `data` and its mime type, if known (else the bytes say it),
    /// decoding to at most [`DEFAULT_MAX_IMAGE_BYTES`].
    pub fn from_base64(
        data: impl Into<String>,
        mime_type: Option<&str>,
    ) -> Result<Self, ImageError> {
        Self::from_base64_capped(data, mime_type, DEFAULT_MAX_IMAGE_BYTES)
    }

    /// An image from base64 `data` and its mime type, if known, decoding to at most
    /// `max_bytes`.
    pub fn from_base64_capped(
        data: impl Into<String>,
        mime_type: Option<&str>,
        max_bytes: usize,
    ) -> Result<Self, ImageError> {
        let given = mime_type.map(parse_mime).transpose()?;
        let mut data: String = data.into();
        if data.bytes().any(|b| b.is_ascii_whitespace()) {
            data.retain(|c| !c.is_ascii_whitespace());
        }
        let (len, head) = check_base64(&data, max_bytes)?;
        let format = ImageFormat::sniff(&head).ok_or(ImageError::UnknownFormat)?;
        if let Some(given) = given
            && given != format
        {
            return Err(ImageError::MimeMismatch {
                given: given.mime_type(),
                actual: format.name(),
            });
        }
        Ok(NodeImage {
            format,
            data: data.into(),
            len,
        })
    }

    /// An image from its bytes (encoded here) and its mime type, if known, at most
    /// [`DEFAULT_MAX_IMAGE_BYTES`].
    pub fn from_bytes(bytes: &[u8], mime_type: Option<&str>) -> Result<Self, ImageError> {
        if bytes.len() > DEFAULT_MAX_IMAGE_BYTES {
            return Err(ImageError::TooLarge {
                size: bytes.len(),
                max: DEFAULT_MAX_IMAGE_BYTES,
            });
        }
        Self::from_base64(
            base64::engine::general_purpose::STANDARD.encode(bytes),
            mime_type,
        )
    }

    /// An image from a `data:<mime type>;base64,<data>` URL, decoding to at most
    /// `max_bytes`. Any other URL is [`ImageError::Url`]: images are never fetched.
    pub fn from_data_url(url: &str, max_bytes: usize) -> Result<Self, ImageError> {
        let scheme = url.get(..5).unwrap_or_default();
        if !scheme.eq_ignore_ascii_case("data:") {
            return Err(ImageError::Url);
        }
        let rest = url.get(5..).unwrap_or_default();
        let (header, data) = rest.split_once(',').ok_or(ImageError::DataUrl)?;
        let (mime, encoding) = header.rsplit_once(';').ok_or(ImageError::DataUrl)?;
        if !encoding.trim().eq_ignore_ascii_case("base64") || mime.trim().is_empty() {
            return Err(ImageError::DataUrl);
        }
        Self::from_base64_capped(data, Some(mime), max_bytes)
    }

    /// The image's format.
    pub fn format(&self) -> ImageFormat {
        self.format
    }

    /// The image's mime type (`image/png`, ...).
    pub fn mime_type(&self) -> &'static str {
        self.format.mime_type()
    }

    /// The image's bytes as standard base64 (no whitespace).
    pub fn base64(&self) -> &str {
        &self.data
    }

    /// The image's size in bytes, decoded.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the image has no bytes (never: an empty image is refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A short name of the image's content for cache keys: its mime type, size and a
    /// 64-bit hash of its data.
    pub(crate) fn fingerprint(&self) -> String {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.data.hash(&mut h);
        format!("{}:{}:{:016x}", self.mime_type(), self.len, h.finish())
    }

    /// The image as a `data:<mime type>;base64,<data>` URL.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime_type(), self.data)
    }
}

impl fmt::Debug for NodeImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeImage")
            .field("mime_type", &self.mime_type())
            .field("bytes", &self.len)
            .finish_non_exhaustive()
    }
}

/// The serde form of an image.
#[derive(Deserialize)]
struct ImageJson {
    #[serde(default)]
    mime_type: Option<String>,
    data: String,
}

impl TryFrom<ImageJson> for NodeImage {
    type Error = ImageError;

    fn try_from(json: ImageJson) -> Result<Self, ImageError> {
        NodeImage::from_base64(json.data, json.mime_type.as_deref())
    }
}

impl Serialize for NodeImage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut s = serializer.serialize_struct("NodeImage", 2)?;
        s.serialize_field("mime_type", self.mime_type())?;
        s.serialize_field("data", &*self.data)?;
        s.end()
    }
}

fn parse_mime(mime_type: &str) -> Result<ImageFormat, ImageError> {
    ImageFormat::from_mime_type(mime_type).ok_or_else(|| ImageError::UnsupportedMime {
        given: shown(mime_type),
    })
}

/// A user's text as an error shows it: quoted, its first [`SHOWN_CHARS`] characters.
fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{:?}...", text.get(..cut).unwrap_or(text)),
        None => format!("{text:?}"),
    }
}

/// Checks that `data` (no whitespace) is standard base64 decoding to 1..=`max_bytes`
/// bytes, decoding it a piece at a time; returns the decoded size and first bytes.
fn check_base64(data: &str, max_bytes: usize) -> Result<(usize, Vec<u8>), ImageError> {
    let bytes = data.as_bytes();
    let symbols = bytes.len() - bytes.iter().rev().take_while(|b| **b == b'=').count();
    let len = match symbols % 4 {
        1 => {
            return Err(ImageError::Base64 {
                reason: format!(
                    "{symbols} characters before the padding: a length of 4n+1 is never base64"
                ),
            });
        }
        rem => symbols / 4 * 3 + rem.saturating_sub(1),
    };
    if len == 0 {
        return Err(ImageError::Empty);
    }
    if len > max_bytes {
        return Err(ImageError::TooLarge {
            size: len,
            max: max_bytes,
        });
    }
    let engine = &base64::engine::general_purpose::STANDARD_PAD_INDIFFERENT;
    let mut buffer = [0u8; CHUNK_CHARS / 4 * 3];
    let mut head = Vec::with_capacity(HEAD_BYTES);
    let chunks = bytes.chunks(CHUNK_CHARS);
    let last = chunks.len().saturating_sub(1);
    for (i, chunk) in chunks.enumerate() {
        let start = i * CHUNK_CHARS;
        if i < last
            && let Some(at) = chunk.iter().position(|b| *b == b'=')
        {
            return Err(ImageError::Base64 {
                reason: format!("`=` at character {} before the end", start + at),
            });
        }
        let n = engine
            .decode_slice(chunk, &mut buffer)
            .map_err(|e| base64_error(e, start))?;
        if head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - head.len()).min(n);
            head.extend_from_slice(buffer.get(..take).unwrap_or_default());
        }
    }
    Ok((len, head))
}

/// A decoding error as [`ImageError::Base64`], its offsets counted from the data's start.
fn base64_error(e: base64::DecodeSliceError, start: usize) -> ImageError {
    use base64::{DecodeError, DecodeSliceError};
    let reason = match e {
        DecodeSliceError::DecodeError(DecodeError::InvalidByte(at, byte)) => {
            format!("character {} is {:?}", start + at, char::from(byte))
        }
        DecodeSliceError::DecodeError(DecodeError::InvalidLastSymbol { offset, .. }) => {
            format!(
                "the last symbol, at character {}, has bits left over",
                start + offset
            )
        }
        DecodeSliceError::DecodeError(DecodeError::InvalidLength(_)) => "a bad length".into(),
        DecodeSliceError::DecodeError(DecodeError::InvalidPadding) => "bad padding".into(),
        other => other.to_string(),
    };
    ImageError::Base64 { reason }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";
    const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0";
    const GIF: &[u8] = b"GIF89a\x01\0\x01\0";
    const WEBP: &[u8] = b"RIFF\x24\0\0\0WEBPVP8 ";

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn the_four_formats_are_read_from_their_bytes() {
        for (bytes, format) in [
            (PNG, ImageFormat::Png),
            (JPEG, ImageFormat::Jpeg),
            (GIF, ImageFormat::Gif),
            (WEBP, ImageFormat::Webp),
        ] {
            let image = NodeImage::from_base64(b64(bytes), None).unwrap();
            assert_eq!(image.format(), format);
            assert_eq!(image.len(), bytes.len());
            let given = NodeImage::from_base64(b64(bytes), Some(format.mime_type())).unwrap();
            assert_eq!(given, image);
        }
        let jpg = NodeImage::from_base64(b64(JPEG), Some("IMAGE/JPG; q=1")).unwrap();
        assert_eq!(jpg.mime_type(), "image/jpeg");
    }

    #[test]
    fn padding_is_optional_and_whitespace_dropped() {
        let padded = b64(PNG);
        assert!(padded.ends_with('='), "{padded}");
        let bare = padded.trim_end_matches('=');
        let wrapped: String = padded
            .as_bytes()
            .chunks(8)
            .map(|c| format!("{}\r\n", std::str::from_utf8(c).unwrap()))
            .collect();
        for data in [padded.as_str(), bare, wrapped.as_str()] {
            let image = NodeImage::from_base64(data, Some("image/png")).unwrap();
            assert_eq!(image.len(), PNG.len(), "{data:?}");
            assert!(!image.base64().contains('\n'));
        }
    }

    #[test]
    fn bad_base64_names_the_character() {
        let mut data = b64(PNG);
        data.replace_range(4..5, "%");
        let e = NodeImage::from_base64(data, None).unwrap_err();
        assert!(matches!(e, ImageError::Base64 { .. }), "{e:?}");
        assert!(e.to_string().contains("character 4 is '%'"), "{e}");
        // URL-safe base64 is not standard base64.
        let e = NodeImage::from_base64(
            b64(b"\xff\xd8\xff\xfb\xef\xbe")
                .replace('+', "-")
                .replace('/', "_"),
            None,
        );
        assert!(matches!(e, Err(ImageError::Base64 { .. })), "{e:?}");
        // Padding inside the data, and a length no base64 has.
        assert!(matches!(
            NodeImage::from_base64("iVBO=RwKGgo=", None),
            Err(ImageError::Base64 { .. })
        ));
        let e = NodeImage::from_base64("iVBORw0KG", None).unwrap_err();
        assert!(e.to_string().contains("4n+1"), "{e}");
        assert_eq!(NodeImage::from_base64("", None), Err(ImageError::Empty));
    }

    #[test]
    fn padding_in_an_early_piece_is_refused() {
        // Each 4096-character piece decodes alone: `=` ending a piece that is not the last
        // would pass the decoder.
        let mut data = b64(&[PNG, &[7u8; 5000]].concat());
        data.replace_range(CHUNK_CHARS - 2..CHUNK_CHARS, "==");
        let e = NodeImage::from_base64(data, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("`=` at character 4094 before the end"),
            "{e}"
        );
    }

    #[test]
    fn long_images_are_checked_to_the_end() {
        let mut data = b64(&[PNG, &[7u8; 20_000]].concat());
        let good = NodeImage::from_base64(data.clone(), None).unwrap();
        assert_eq!(good.len(), PNG.len() + 20_000);
        data.replace_range(20_000..20_001, "!");
        let e = NodeImage::from_base64(data, None).unwrap_err();
        assert!(e.to_string().contains("character 20000 is '!'"), "{e}");
    }

    #[test]
    fn wrong_magic_or_mime_is_refused() {
        let e = NodeImage::from_base64(b64(b"%PDF-1.7 not an image"), None).unwrap_err();
        assert_eq!(e, ImageError::UnknownFormat);
        let e = NodeImage::from_base64(b64(PNG), Some("image/gif")).unwrap_err();
        assert_eq!(
            e,
            ImageError::MimeMismatch {
                given: "image/gif",
                actual: "PNG"
            }
        );
        let e = NodeImage::from_base64(b64(PNG), Some("image/tiff")).unwrap_err();
        assert!(
            e.to_string().contains("\"image/tiff\" is not supported"),
            "{e}"
        );
        let long = "x".repeat(1000);
        let e = NodeImage::from_base64(b64(PNG), Some(&long)).unwrap_err();
        assert!(e.to_string().len() < 300, "{e}");
    }

    #[test]
    fn over_the_cap_is_refused_before_decoding() {
        let data = b64(&[PNG, &[0u8; 100]].concat());
        let size = PNG.len() + 100;
        let e = NodeImage::from_base64_capped(data.clone(), None, size - 1).unwrap_err();
        assert_eq!(
            e,
            ImageError::TooLarge {
                size,
                max: size - 1
            }
        );
        assert!(NodeImage::from_base64_capped(data, None, size).is_ok());
        // Not base64 at all, but the size alone is refused.
        let huge = "@".repeat(DEFAULT_MAX_IMAGE_BYTES / 3 * 4 + 8);
        assert!(matches!(
            NodeImage::from_base64(huge, None),
            Err(ImageError::TooLarge { .. })
        ));
    }

    #[test]
    fn data_urls_are_read_and_other_urls_refused() {
        let url = format!("data:image/png;base64,{}", b64(PNG));
        let image = NodeImage::from_data_url(&url, DEFAULT_MAX_IMAGE_BYTES).unwrap();
        assert_eq!(image.data_url(), url);
        for bad in [
            "data:image/png,abc",
            "data:;base64,iVBO",
            "data:image/png;base64",
        ] {
            assert_eq!(
                NodeImage::from_data_url(bad, 100),
                Err(ImageError::DataUrl),
                "{bad}"
            );
        }
        let e = NodeImage::from_data_url("https://user:secret@example.com/a.png?key=k", 100)
            .unwrap_err();
        assert_eq!(e, ImageError::Url);
        assert!(!e.to_string().contains("secret") && !e.to_string().contains("key="));
    }

    #[test]
    fn debug_shows_no_data_and_serde_round_trips() {
        let image = NodeImage::from_bytes(&[PNG, &[1u8; 3000]].concat(), None).unwrap();
        let debug = format!("{image:?}");
        assert!(debug.len() < 80, "{debug}");
        assert!(
            debug.contains("image/png") && debug.contains("3020"),
            "{debug}"
        );
        let json = serde_json::to_value(&image).unwrap();
        assert_eq!(json["mime_type"], "image/png");
        let back: NodeImage = serde_json::from_value(json).unwrap();
        assert_eq!(back, image);
        let bad: Result<NodeImage, _> =
            serde_json::from_value(serde_json::json!({"data": b64(b"not an image")}));
        assert!(bad.unwrap_err().to_string().contains("not a PNG, JPEG"));
    }
}
