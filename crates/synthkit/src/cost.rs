//! Money: the prices a user pays per million tokens, and what a run costs or may cost at
//! them.
//!
//! synthkit ships no price table (one would go stale): the user gives the prices, per
//! million prompt tokens read fresh, per million read from the server's prompt cache, and
//! per million completion tokens (thinking included), in one currency of their choosing
//! (the front ends' flags say USD). [`Prices::cost`] is what a run's usage cost;
//! [`Prices::bound`] is what calls may cost at most before they are made (every prompt
//! token read fresh, every reply as long as its cap), the figure a plan and a cap use.
//! [`crate::layer::cost`] holds a run to a cap at every call.
//!
//! ```
//! use synthkit::cost::Prices;
//! use synthkit::UsageTotals;
//!
//! let prices = Prices::new(0.15, 0.60)?.with_cached_input(0.075)?;
//! let mut usage = UsageTotals::default();
//! usage.prompt_tokens = 1_000_000;
//! usage.cached_prompt_tokens = 400_000;
//! usage.completion_tokens = 10_000;
//! // 600k fresh at 0.15, 400k cached at 0.075, 10k out at 0.60.
//! assert!((prices.cost(&usage) - (0.09 + 0.03 + 0.006)).abs() < 1e-12);
//! assert!((prices.bound(1_000_000, 10_000) - (0.15 + 0.006)).abs() < 1e-12);
//! # Ok::<(), synthkit::cost::PriceError>(())
//! ```

use serde::{Deserialize, Serialize};

use crate::observe::UsageTotals;

/// A price that cannot be one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PriceError {
    /// Not a finite number at or above zero.
    #[error("the {what} price must be a number of at least 0, got {value}")]
    Invalid {
        /// Which price (`input`, `cached input`, `output`, `cost cap`).
        what: &'static str,
        /// What was given.
        value: f64,
    },
    /// A price file that is not `{"input": N, "output": N}` with an optional
    /// `"cached_input": N`.
    #[error(
        "the prices are not {{\"input\": N, \"cached_input\": N, \"output\": N}} (per million tokens; cached_input optional): {0}"
    )]
    File(String),
}

/// Prices per million tokens: prompt tokens read fresh, prompt tokens read from the
/// server's cache, and completion tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Prices {
    /// Per million prompt tokens the server reads (or writes to its cache).
    pub input: f64,
    /// Per million prompt tokens the server reads from its prompt cache (default: the
    /// input price, as for a server that gives no discount).
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Per million completion tokens, thinking included.
    pub output: f64,
}

impl Prices {
    /// Prices of `input` and `output` per million tokens (cached input as input).
    pub fn new(input: f64, output: f64) -> Result<Self, PriceError> {
        Ok(Self {
            input: checked("input", input)?,
            cached_input: None,
            output: checked("output", output)?,
        })
    }

    /// These prices with cached prompt tokens at `price` per million.
    pub fn with_cached_input(mut self, price: f64) -> Result<Self, PriceError> {
        self.cached_input = Some(checked("cached input", price)?);
        Ok(self)
    }

    /// Prices from a JSON object `{"input": N, "cached_input": N, "output": N}`
    /// (`cached_input` optional), each per million tokens.
    pub fn from_json(bytes: &[u8]) -> Result<Self, PriceError> {
        let read: Prices =
            serde_json::from_slice(bytes).map_err(|e| PriceError::File(e.to_string()))?;
        let prices = Self::new(read.input, read.output)?;
        match read.cached_input {
            Some(p) => prices.with_cached_input(p),
            None => Ok(prices),
        }
    }

    /// The price of a cached prompt token, per million.
    pub fn cached_input_price(&self) -> f64 {
        self.cached_input.unwrap_or(self.input)
    }

    /// What `usage` cost: its cached prompt tokens at the cached price, its other prompt
    /// tokens at the input price, its completion tokens at the output price.
    pub fn cost(&self, usage: &UsageTotals) -> f64 {
        let cached = usage.cached_prompt_tokens.min(usage.prompt_tokens);
        let fresh = usage.prompt_tokens - cached;
        per_million(fresh, self.input)
            + per_million(cached, self.cached_input_price())
            + per_million(usage.completion_tokens, self.output)
    }

    /// Sets `usage.cost_usd` to what it cost at these prices (rounded to a millionth, as
    /// reports show money).
    pub fn price(&self, usage: &mut UsageTotals) {
        usage.cost_usd = Some((self.cost(usage) * 1e6).round() / 1e6);
    }

    /// The most calls with `prompt_tokens` prompt tokens and replies of at most
    /// `max_completion_tokens` tokens may cost: every prompt token read fresh.
    pub fn bound(&self, prompt_tokens: usize, max_completion_tokens: usize) -> f64 {
        per_million(prompt_tokens as u64, self.input)
            + per_million(max_completion_tokens as u64, self.output)
    }
}

/// A cap on what a run may cost, in the prices' currency: a finite number at or above 0.
pub fn checked_cap(cap: f64) -> Result<f64, PriceError> {
    checked("cost cap", cap)
}

fn checked(what: &'static str, value: f64) -> Result<f64, PriceError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(PriceError::Invalid { what, value })
    }
}

fn per_million(tokens: u64, price: f64) -> f64 {
    tokens as f64 * price / 1_000_000.0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cached_tokens_are_priced_apart_and_never_above_the_prompt() {
        let prices = Prices::new(2.0, 8.0).unwrap();
        // A server's cached count past the prompt is taken as the whole prompt.
        let usage = UsageTotals {
            prompt_tokens: 500_000,
            cached_prompt_tokens: 900_000,
            completion_tokens: 250_000,
            ..UsageTotals::default()
        };
        // No discount given: cached tokens cost as input.
        assert!((prices.cost(&usage) - (1.0 + 2.0)).abs() < 1e-12);
        let discounted = prices.with_cached_input(0.5).unwrap();
        assert!((discounted.cost(&usage) - (0.25 + 2.0)).abs() < 1e-12);
    }

    #[test]
    fn bad_prices_are_refused_with_what_to_change() {
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = Prices::new(bad, 1.0).unwrap_err();
            assert!(e.to_string().contains("input price must be"), "{e}");
        }
        assert!(checked_cap(-0.01).is_err());
        let e = Prices::from_json(br#"{"input": 1, "outptu": 2}"#).unwrap_err();
        assert!(matches!(e, PriceError::File(_)), "{e}");
        let e = Prices::from_json(br#"{"input": 1, "output": -2}"#).unwrap_err();
        assert!(e.to_string().contains("output price"), "{e}");
        let p = Prices::from_json(br#"{"input": 1, "cached_input": 0.1, "output": 2}"#).unwrap();
        assert_eq!(p.cached_input_price(), 0.1);
    }
}
