//! A small, fast hasher for caches keyed by short strings from the text being processed
//! (no protection against hash flooding is needed there).

use std::hash::Hasher;

/// The hasher.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            self.add(u64::from_le_bytes(b));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            for (d, s) in b.iter_mut().zip(rest) {
                *d = *s;
            }
            self.add(u64::from_le_bytes(b) ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The multiplications leave their best bits at the top; the table indexes with
        // the bottom ones.
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads() {
        use std::hash::Hash;
        let h = |s: &str| {
            let mut f = FxHasher::default();
            s.hash(&mut f);
            f.finish()
        };
        assert_ne!(h("a"), h("b"));
        assert_ne!(h("abcdefgh"), h("abcdefgh "));
    }
}
