//! The prices and the cost cap from the flags: [`CostSettings`].

use std::sync::Arc;

use anyhow::Result;
use synthkit::cost::{Prices, checked_cap};
use synthkit::layer::cost::CostLedger;

use crate::flags::{CostArgs, PriceArgs, usage};

/// The largest `--prices` file read: 64 KiB (a price file is one small object).
pub const MAX_PRICES_BYTES: u64 = 64 << 10;

/// What tokens cost and what a run may cost at most.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostSettings {
    /// The prices per million tokens.
    pub prices: Prices,
    /// `--max-cost`.
    pub max_cost: Option<f64>,
}

impl CostSettings {
    /// The cost settings `args` ask for: `None` without prices; `--max-cost` without them
    /// refused.
    pub fn of(args: &CostArgs) -> Result<Option<Self>> {
        let max_cost = args
            .max_cost
            .map(|cap| checked_cap(cap).map_err(|e| usage(format!("{e} (--max-cost)"))))
            .transpose()?;
        match (prices(&args.prices)?, max_cost) {
            (Some(prices), max_cost) => Ok(Some(Self { prices, max_cost })),
            (None, Some(_)) => Err(usage(
                "--max-cost needs the prices: give --price-input and --price-output (USD per million tokens), or --prices FILE",
            )),
            (None, None) => Ok(None),
        }
    }

    /// A ledger that holds a run to `--max-cost`, if one is given.
    pub fn ledger(&self) -> Option<Arc<CostLedger>> {
        let cap = self.max_cost?;
        CostLedger::new(self.prices, cap).ok()
    }
}

/// The prices `args` give: the three flags, or the file.
pub fn prices(args: &PriceArgs) -> Result<Option<Prices>> {
    if let Some(path) = &args.prices {
        let cannot = |e: &dyn std::fmt::Display| {
            usage(format!("cannot read --prices `{}`: {e}", path.display()))
        };
        let file = std::fs::File::open(path).map_err(|e| cannot(&e))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_PRICES_BYTES + 1),
            &mut bytes,
        )
        .map_err(|e| cannot(&e))?;
        if bytes.len() as u64 > MAX_PRICES_BYTES {
            return Err(cannot(
                &"it is over 64 KiB: a price file is one small JSON object",
            ));
        }
        return Prices::from_json(&bytes)
            .map(Some)
            .map_err(|e| usage(format!("--prices `{}`: {e}", path.display())));
    }
    let (Some(input), Some(output)) = (args.price_input, args.price_output) else {
        return Ok(None);
    };
    let prices = Prices::new(input, output)
        .map_err(|e| usage(format!("{e} (--price-input, --price-output)")))?;
    match args.price_cached_input {
        Some(p) => prices
            .with_cached_input(p)
            .map(Some)
            .map_err(|e| usage(format!("{e} (--price-cached-input)"))),
        None => Ok(Some(prices)),
    }
}
