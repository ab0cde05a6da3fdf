//! How much of a difference is chance: a bootstrap interval of each correct rate, and a
//! paired comparison of two systems (or two modes) on the same cases.
//!
//! A benchmark of a few dozen cases cannot rank systems that differ by a case or two. Two
//! measures say how far to trust a difference:
//!
//! - [`bootstrap_interval`]: the 95 % percentile bootstrap interval of a share of right
//!   answers: the cases are drawn again with replacement [`BOOTSTRAP_RESAMPLES`] times
//!   (a fixed seed, so the same rows always give the same interval) and the middle 95 % of
//!   the resampled shares is kept.
//! - [`paired`](super::totals::paired): on the cases both answered, how many only the first got right and how
//!   many only the second, and the exact two-sided sign test on those discordant cases
//!   (McNemar's exact test): the chance of a split at least that uneven if neither were
//!   better. Cases both got right or both got wrong say nothing about which is better.
//!
//! ```
//! use synthkit_frontend::eval::noise::{bootstrap_interval, sign_test};
//!
//! let (low, high) = bootstrap_interval(&[true, true, false, true]).unwrap();
//! assert!(low <= 0.75 && 0.75 <= high);
//! // 8 cases only A got right, 1 only B: unlikely to be chance.
//! assert!(sign_test(8, 1) < 0.05);
//! // 3 against 1 could well be.
//! assert!(sign_test(3, 1) > 0.5);
//! ```

use serde::{Deserialize, Serialize};

/// How many times [`bootstrap_interval`] draws the cases again.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The seed of [`bootstrap_interval`]'s draws (fixed: the same rows give the same interval).
pub const BOOTSTRAP_SEED: u64 = 0x005E_ED0F_5EED;

/// SplitMix64: a small, well-mixed generator; plenty for resampling indices.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0); the modulo bias is below 2^-40 for any benchmark size.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The 95 % percentile bootstrap interval of the share of `outcomes` that are true
/// (`None` without outcomes).
pub fn bootstrap_interval(outcomes: &[bool]) -> Option<(f64, f64)> {
    let n = outcomes.len();
    if n == 0 {
        return None;
    }
    let mut rng = SplitMix64(BOOTSTRAP_SEED);
    let mut shares: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let right = (0..n)
                .filter(|_| outcomes.get(rng.below(n)).copied().unwrap_or(false))
                .count();
            right as f64 / n as f64
        })
        .collect();
    shares.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = (q * (BOOTSTRAP_RESAMPLES - 1) as f64).round() as usize;
        shares.get(i).copied().unwrap_or(0.0)
    };
    Some((at(0.025), at(0.975)))
}

/// The exact two-sided sign test of a split of discordant cases: the chance, if both sides
/// were equally good, of a split at least as uneven as `a` against `b`. 1 when there is no
/// discordant case.
pub fn sign_test(a: usize, b: usize) -> f64 {
    let n = a + b;
    if n == 0 {
        return 1.0;
    }
    let k = a.min(b);
    // P(X <= k) for X ~ Binomial(n, 1/2), in log space (no underflow for large n).
    let ln2 = std::f64::consts::LN_2;
    let mut ln_choose = 0.0f64; // ln C(n, 0)
    let mut tail = 0.0f64;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_choose - n as f64 * ln2).exp();
    }
    (2.0 * tail).min(1.0)
}

/// Two systems (or two modes) on the cases both answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Paired {
    /// The first side, `system/mode`.
    pub a: String,
    /// The second side, `system/mode`.
    pub b: String,
    /// Cases both answered.
    pub cases: usize,
    /// Cases both got right.
    pub both: usize,
    /// Cases only `a` got right.
    pub only_a: usize,
    /// Cases only `b` got right.
    pub only_b: usize,
    /// Cases both got wrong.
    pub neither: usize,
    /// [`sign_test`] of `only_a` against `only_b`.
    pub p_value: f64,
}

impl Paired {
    /// One line for a reader: `a vs b on N cases: only a right in X, only b in Y (sign
    /// test p = P)`.
    pub fn describe(&self) -> String {
        format!(
            "{} vs {} on {} case{}: only the first right in {}, only the second in {} \
             (both right {}, both wrong {}; sign test p = {:.2})",
            self.a,
            self.b,
            self.cases,
            if self.cases == 1 { "" } else { "s" },
            self.only_a,
            self.only_b,
            self.both,
            self.neither,
            self.p_value
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sign_test_matches_the_binomial() {
        // 5 against 0: 2 * (1/2)^5 = 0.0625.
        assert!((sign_test(5, 0) - 0.0625).abs() < 1e-12);
        assert!((sign_test(0, 5) - 0.0625).abs() < 1e-12);
        // 6 against 1: 2 * (1 + 7) / 128 = 0.125.
        assert!((sign_test(6, 1) - 0.125).abs() < 1e-12);
        // An even split, and no discordant case: no evidence at all.
        assert_eq!(sign_test(4, 4), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
        // Large n does not underflow: 600 against 400 is far from chance.
        let p = sign_test(600, 400);
        assert!(p > 0.0 && p < 1e-9, "{p}");
    }

    #[test]
    fn bootstrap_interval_brackets_the_share() {
        assert_eq!(bootstrap_interval(&[]), None);
        assert_eq!(bootstrap_interval(&[true; 10]), Some((1.0, 1.0)));
        assert_eq!(bootstrap_interval(&[false; 10]), Some((0.0, 0.0)));
        let outcomes: Vec<bool> = (0..12).map(|i| i % 2 == 0).collect();
        let (lo, hi) = bootstrap_interval(&outcomes).unwrap();
        // 6 of 12: the interval is wide (about 0.25 to 0.75) and holds 0.5.
        assert!(lo < 0.5 && hi > 0.5, "{lo} {hi}");
        assert!(lo > 0.1 && hi < 0.9, "{lo} {hi}");
        // More cases, the same share: a narrower interval.
        let many: Vec<bool> = (0..400).map(|i| i % 2 == 0).collect();
        let (mlo, mhi) = bootstrap_interval(&many).unwrap();
        assert!(mhi - mlo < (hi - lo) / 3.0, "{mlo} {mhi}");
        // Deterministic.
        assert_eq!(bootstrap_interval(&outcomes), Some((lo, hi)));
    }
}
