//! How the index stores its values: deflated blobs with a bound on what they inflate to,
//! and postings as LEB128 gaps and counts.

use std::io::{Read, Write};

use anyhow::{Context, Result, anyhow};
use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compressed (deflate, fastest level: the index is written once per change and read on
/// every question).
pub(super) fn deflate(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = DeflateEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(bytes)?;
    encoder.finish()
}

/// The most a stored value may inflate to (64 MiB, a file's default size limit): a
/// damaged index cannot make a read hold more.
const MAX_INFLATED: u64 = 64 << 20;

pub(super) fn inflate(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    DeflateDecoder::new(bytes)
        .take(MAX_INFLATED + 1)
        .read_to_end(&mut out)
        .context("the index is damaged")?;
    if out.len() as u64 > MAX_INFLATED {
        return Err(anyhow!("the index is damaged (a value too large)"));
    }
    Ok(out)
}

/// Appends `n` as a LEB128 variable-length integer.
pub(super) fn varint(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a LEB128 integer of `bytes` at `at`, moving past it.
pub(super) fn read_varint(bytes: &[u8], at: &mut usize) -> Result<u32> {
    let mut n: u32 = 0;
    for shift in (0..35).step_by(7) {
        let byte = *bytes
            .get(*at)
            .ok_or_else(|| anyhow!("the index is damaged (cut postings)"))?;
        *at += 1;
        let bits = u32::from(byte & 0x7f);
        if shift == 28 && bits > 0x0f {
            return Err(anyhow!("the index is damaged (bad postings)"));
        }
        n |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(anyhow!("the index is damaged (bad postings)"))
}

/// A word's postings: each chunk holding it (ascending) with its count.
pub(super) fn postings(bytes: &[u8]) -> Result<Vec<(u32, u32)>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut chunk: u32 = 0;
    while at < bytes.len() {
        let gap = read_varint(bytes, &mut at)?;
        let count = read_varint(bytes, &mut at)?;
        chunk = chunk
            .checked_add(gap)
            .ok_or_else(|| anyhow!("the index is damaged (bad postings)"))?;
        out.push((chunk, count));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_round_trip() {
        let mut list = Vec::new();
        let mut last = 0;
        for (chunk, count) in [(0u32, 1u32), (5, 300), (70_000, 2), (u32::MAX, 1)] {
            varint(&mut list, chunk - last);
            varint(&mut list, count);
            last = chunk;
        }
        assert_eq!(
            postings(&list).unwrap(),
            vec![(0, 1), (5, 300), (70_000, 2), (u32::MAX, 1)]
        );
        assert!(postings(&[0x80]).is_err());
        assert!(postings(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).is_err());
    }
}
