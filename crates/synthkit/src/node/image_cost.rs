//! What an image costs in prompt tokens, the way each server charges it
//! ([`ImageCost`]), and the pixel size of a PNG, JPEG, GIF or WebP image read from its
//! header ([`image_dimensions`]).
//!
//! ```
//! use synthkit::node::image_cost::{openai_tile_tokens, anthropic_size_tokens};
//! // OpenAI's published examples (gpt-4o, `detail: high`).
//! assert_eq!(openai_tile_tokens(1024, 1024), 765);
//! assert_eq!(openai_tile_tokens(2048, 4096), 1105);
//! // Anthropic's: (width * height) / 750 after fitting 1568 px and about 1.2 MP.
//! assert_eq!(anthropic_size_tokens(200, 200), 54);
//! assert_eq!(anthropic_size_tokens(1092, 1092), 1590);
//! ```

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::NodeImage;

/// How the prompt tokens of an image are counted for a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ImageCost {
    /// The server counts it: the whole prompt with its images goes to the model's exact
    /// counter (llama.cpp's `/v1/chat/completions/input_tokens`, vLLM's `/tokenize`,
    /// `/v1/messages/count_tokens`), and packing learns each image's cost from it.
    ServerCount,
    /// OpenAI's rule for its vision models (`detail: high`): fit in 2048×2048, scale
    /// the shortest side down to 768, then 85 + 170 per 512-pixel tile.
    OpenAiTiles,
    /// Anthropic's rule: fit the long side in 1568 pixels and the area in about 1.2
    /// megapixels, then `width * height / 750`.
    AnthropicSize,
    /// A fixed number of tokens per image.
    Fixed(usize),
}

impl ImageCost {
    /// The tokens `image` costs by this rule; `None` for [`ImageCost::ServerCount`],
    /// which only the server knows. An image whose size cannot be read from its header
    /// costs the most an image can by the rule.
    pub fn tokens(self, image: &NodeImage) -> Option<usize> {
        match self {
            ImageCost::ServerCount => None,
            ImageCost::Fixed(n) => Some(n),
            ImageCost::OpenAiTiles => Some(match image_dimensions(image) {
                Some((w, h)) => openai_tile_tokens(w, h),
                None => openai_tile_tokens(768, 2048),
            }),
            ImageCost::AnthropicSize => Some(match image_dimensions(image) {
                Some((w, h)) => anthropic_size_tokens(w, h),
                None => ANTHROPIC_MAX_TOKENS,
            }),
        }
    }

    /// The snake-case name (`server_count`, `open_ai_tiles`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ImageCost::ServerCount => "server_count",
            ImageCost::OpenAiTiles => "open_ai_tiles",
            ImageCost::AnthropicSize => "anthropic_size",
            ImageCost::Fixed(_) => "fixed",
        }
    }
}

/// The most tokens Anthropic charges for one image.
const ANTHROPIC_MAX_TOKENS: usize = 1600;

/// OpenAI's tile rule for a `w`×`h` image (gpt-4o and gpt-4.1, `detail: high`).
pub fn openai_tile_tokens(w: u32, h: u32) -> usize {
    let (mut w, mut h) = (f64::from(w.max(1)), f64::from(h.max(1)));
    if w > 2048.0 || h > 2048.0 {
        let s = 2048.0 / w.max(h);
        (w, h) = (w * s, h * s);
    }
    let short = w.min(h);
    if short > 768.0 {
        let s = 768.0 / short;
        (w, h) = (w * s, h * s);
    }
    let tiles = |x: f64| (x.floor() / 512.0).ceil().max(1.0) as usize;
    85 + 170 * tiles(w) * tiles(h)
}

/// Anthropic's size rule for a `w`×`h` image.
pub fn anthropic_size_tokens(w: u32, h: u32) -> usize {
    let (mut w, mut h) = (f64::from(w.max(1)), f64::from(h.max(1)));
    let long = w.max(h);
    if long > 1568.0 {
        let s = 1568.0 / long;
        (w, h) = ((w * s).floor().max(1.0), (h * s).floor().max(1.0));
    }
    let most = (ANTHROPIC_MAX_TOKENS * 750) as f64;
    if w * h > most {
        let s = (most / (w * h)).sqrt();
        (w, h) = ((w * s).floor().max(1.0), (h * s).floor().max(1.0));
    }
    ((w * h / 750.0).ceil() as usize).min(ANTHROPIC_MAX_TOKENS)
}

/// The pixel size (width, height) of `image`, read from its PNG, JPEG, GIF or WebP
/// header; `None` when the header is not readable.
pub fn image_dimensions(image: &NodeImage) -> Option<(u32, u32)> {
    let bytes = base64::engine::general_purpose::STANDARD_PAD_INDIFFERENT
        .decode(image.base64())
        .ok()?;
    dimensions_of(&bytes)
}

/// The pixel size in an image file's header.
pub fn dimensions_of(b: &[u8]) -> Option<(u32, u32)> {
    let u16be = |i: usize| Some(u32::from(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?])));
    let u16le = |i: usize| Some(u32::from(u16::from_le_bytes([*b.get(i)?, *b.get(i + 1)?])));
    let u24le = |i: usize| {
        Some(
            u32::from(*b.get(i)?)
                | u32::from(*b.get(i + 1)?) << 8
                | u32::from(*b.get(i + 2)?) << 16,
        )
    };
    let u32be = |i: usize| Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?));
    let found = if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        (u32be(16)?, u32be(20)?)
    } else if b.starts_with(b"GIF8") {
        (u16le(6)?, u16le(8)?)
    } else if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        match b.get(12..16)? {
            b"VP8 " => (u16le(26)? & 0x3fff, u16le(28)? & 0x3fff),
            b"VP8L" => {
                let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
                ((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1)
            }
            b"VP8X" => (u24le(24)? + 1, u24le(27)? + 1),
            _ => return None,
        }
    } else if b.starts_with(&[0xff, 0xd8]) {
        jpeg_dimensions(b, &u16be)?
    } else {
        return None;
    };
    (found.0 > 0 && found.1 > 0).then_some(found)
}

/// Walks a JPEG's segments to its frame header (SOF0 to SOF15 but DHT, JPG and DAC).
fn jpeg_dimensions(b: &[u8], u16be: &dyn Fn(usize) -> Option<u32>) -> Option<(u32, u32)> {
    let mut i = 2;
    // Each step moves past one segment: at most one step per byte.
    while i + 1 < b.len() {
        if *b.get(i)? != 0xff {
            return None;
        }
        let marker = *b.get(i + 1)?;
        match marker {
            0xff => i += 1,
            0xd8 | 0x01 | 0xd0..=0xd7 => i += 2,
            0xc0..=0xcf if !matches!(marker, 0xc4 | 0xc8 | 0xcc) => {
                return Some((u16be(i + 7)?, u16be(i + 5)?));
            }
            0xd9 | 0xda => return None,
            _ => i += 2 + usize::try_from(u16be(i + 2)?).ok()?,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_published_examples() {
        assert_eq!(openai_tile_tokens(1024, 1024), 765);
        assert_eq!(openai_tile_tokens(2048, 4096), 1105);
        // Small images are one tile.
        assert_eq!(openai_tile_tokens(64, 64), 255);
        assert_eq!(openai_tile_tokens(0, 0), 255);
        // 4096×8192 fits 1024×2048 first, then 768×1536: 2×3 tiles.
        assert_eq!(openai_tile_tokens(4096, 8192), 1105);
    }

    #[test]
    fn anthropic_published_examples() {
        assert_eq!(anthropic_size_tokens(200, 200), 54);
        assert_eq!(anthropic_size_tokens(1000, 1000), 1334);
        assert_eq!(anthropic_size_tokens(1092, 1092), 1590);
        // Larger images are scaled down: never past 1600 tokens.
        assert!(anthropic_size_tokens(4000, 3000) <= 1600);
        assert!(anthropic_size_tokens(8000, 100) <= 1600);
    }

    #[test]
    fn headers_of_every_format() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&300u32.to_be_bytes());
        png.extend_from_slice(&200u32.to_be_bytes());
        assert_eq!(dimensions_of(&png), Some((300, 200)));
        let gif = b"GIF89a\x40\x01\xc8\x00";
        assert_eq!(dimensions_of(gif), Some((320, 200)));
        // JPEG: SOI, an APP0 segment, then SOF0 (precision, height, width).
        let jpeg = [
            0xff, 0xd8, 0xff, 0xe0, 0, 4, 0, 0, 0xff, 0xc0, 0, 11, 8, 0, 50, 0, 70, 3,
        ];
        assert_eq!(dimensions_of(&jpeg), Some((70, 50)));
        let mut vp8x = b"RIFF\0\0\0\0WEBPVP8X\0\0\0\0\0\0\0\0".to_vec();
        vp8x.extend_from_slice(&[99, 0, 0, 49, 0, 0]);
        assert_eq!(dimensions_of(&vp8x), Some((100, 50)));
        let mut vp8l = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        // width 10 (9 stored), height 20 (19 stored).
        let bits: u32 = 9 | (19 << 14);
        vp8l.extend_from_slice(&bits.to_le_bytes());
        assert_eq!(dimensions_of(&vp8l), Some((10, 20)));
        let mut vp8 = b"RIFF\0\0\0\0WEBPVP8 \0\0\0\0\0\0\0\x9d\x01\x2a".to_vec();
        vp8.extend_from_slice(&[64, 0, 32, 0]);
        assert_eq!(dimensions_of(&vp8), Some((64, 32)));
        for broken in [
            &b""[..],
            b"\x89PNG\r\n\x1a\n",
            b"GIF8",
            &[0xff, 0xd8, 0xff, 0xda],
            &[0xff, 0xd8, 0xff, 0xe0, 0xff, 0xff],
        ] {
            assert_eq!(dimensions_of(broken), None);
        }
    }

    #[test]
    fn unreadable_sizes_cost_the_most() {
        let image = NodeImage::from_bytes(b"\x89PNG\r\n\x1a\n", None).unwrap();
        assert_eq!(
            ImageCost::OpenAiTiles.tokens(&image),
            Some(openai_tile_tokens(768, 2048))
        );
        assert_eq!(ImageCost::AnthropicSize.tokens(&image), Some(1600));
        assert_eq!(ImageCost::ServerCount.tokens(&image), None);
        assert_eq!(ImageCost::Fixed(7).tokens(&image), Some(7));
    }
}
