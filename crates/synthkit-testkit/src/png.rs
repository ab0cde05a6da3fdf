//! Small PNG images of any size, written here: tests make the pictures they send, so no
//! image file lives in the repository.
//!
//! The image is 8-bit RGB, its pixels a pattern drawn from `seed`, stored without
//! compression (zlib "stored" blocks): any PNG decoder reads it.

/// A `width` x `height` RGB PNG whose pixels depend on `seed`.
pub fn png(width: u32, height: u32, seed: u8) -> Vec<u8> {
    let mut raw = Vec::with_capacity((height as usize) * (1 + 3 * width as usize));
    for y in 0..height {
        raw.push(0); // filter: none
        for x in 0..width {
            let v = (x.wrapping_mul(7) ^ y.wrapping_mul(13)) as u8;
            raw.extend_from_slice(&[v.wrapping_add(seed), v ^ seed, seed.wrapping_sub(v)]);
        }
    }
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8 bits, RGB, deflate, no filter, no interlace
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &zlib_stored(&raw));
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(kind.iter().chain(data));
    out.extend_from_slice(&crc.to_be_bytes());
}

/// `data` as a zlib stream of stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = data.chunks(65_535).collect();
    if blocks.is_empty() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    for (i, block) in blocks.iter().enumerate() {
        let last = u8::from(i + 1 == blocks.len());
        let len = block.len() as u16;
        out.push(last);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

fn crc32<'a>(bytes: impl Iterator<Item = &'a u8>) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_and_adler_match_known_values() {
        assert_eq!(crc32(b"IEND".iter()), 0xae42_6082);
        let z = zlib_stored(b"Wikipedia");
        assert_eq!(z.get(z.len() - 4..).unwrap(), &0x11e6_0398u32.to_be_bytes());
    }

    #[test]
    fn header_and_size() {
        let p = png(300, 200, 9);
        assert!(p.starts_with(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"));
        assert_eq!(&p[16..24], &[0, 0, 1, 44, 0, 0, 0, 200]);
        assert!(p.ends_with(&[0xae, 0x42, 0x60, 0x82]));
    }
}
