//! `--price-input`, `--price-cached-input`, `--price-output`, `--prices FILE` and
//! `--max-cost`: what tokens cost (no price table ships: they go stale) and a cap on a run.

use std::path::PathBuf;

use clap::Args;

/// What the provider charges, per million tokens (`ask`, `summarize`, `batch`, `eval`,
/// `serve`).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Cost")]
pub struct PriceArgs {
    /// USD per million prompt tokens (with --price-output: the cost in --json).
    ///
    /// USD per million prompt tokens the server reads (the provider's input price): with
    /// --price-output, --json's usage says what the run cost ("cost_usd") and --plan what
    /// it may cost at most.
    #[arg(long, value_name = "USD", requires = "price_output")]
    pub price_input: Option<f64>,
    /// USD per million prompt tokens the server reads from its prompt cache
    /// [default: --price-input].
    #[arg(
        hide_short_help = true,
        long,
        value_name = "USD",
        requires = "price_input"
    )]
    pub price_cached_input: Option<f64>,
    /// USD per million completion tokens.
    ///
    /// USD per million completion tokens (thinking included).
    #[arg(long, value_name = "USD", requires = "price_input")]
    pub price_output: Option<f64>,
    /// The prices from a JSON file: {"input": N, "cached_input": N, "output": N}, USD per
    /// million tokens (cached_input optional).
    #[arg(hide_short_help = true, long, value_name = "FILE",
          conflicts_with_all = ["price_input", "price_cached_input", "price_output"])]
    pub prices: Option<PathBuf>,
}

/// The prices and `--max-cost` (`ask`, `summarize`, `batch`).
#[derive(Debug, Clone, Default, Args)]
pub struct CostArgs {
    /// The prices.
    #[command(flatten)]
    pub prices: PriceArgs,
    /// The most the run may cost, in USD at the prices given.
    ///
    /// The most the run may cost, in USD at the prices given (needs them): a run whose
    /// plan may cost more is not started (the plan is printed; --yes does not lift it),
    /// and no call goes out that could take what the calls cost past it. For `batch`, the
    /// whole batch.
    #[arg(long, value_name = "USD", help_heading = "Cost")]
    pub max_cost: Option<f64>,
}
