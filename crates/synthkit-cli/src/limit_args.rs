//! The limit and retry flags shared by `ask`, `summarize` and `serve`: one definition,
//! checked once, applied to the library's model stack.

use anyhow::Result;
use clap::Args;
use synthkit::layer::retry::RetryPolicy;
use synthkit::layer::stack::StackBuilder;

use crate::model_args::positive_seconds;

/// The default of `--retries`.
pub const DEFAULT_RETRIES: u32 = RetryPolicy::DEFAULT_MAX_ATTEMPTS;

/// Rate budgets and retries.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitArgs {
    /// Requests per minute to the model. Every send counts, retries included; calls wait
    /// for their turn. With `serve --redis-url`, one budget for every replica.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rpm: Option<u32>,
    /// Tokens per minute to the model: every send (retries included) is charged its prompt
    /// tokens plus its whole output reserve (--num-output). With `serve --redis-url`, one
    /// budget for every replica.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub tpm: Option<u32>,
    /// The most sends of one model call, the first included: 429s, overloads, 5xx,
    /// timeouts and dropped connections are sent again (exponential backoff with full
    /// jitter, honouring Retry-After) until this many sends; 1 sends each call once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RETRIES, value_parser = clap::value_parser!(u32).range(1..))]
    pub retries: u32,
    /// The most seconds one model call may take from its first send, waits for the rate
    /// budget and Retry-After included: no send is started that would wait past it.
    #[arg(long, value_name = "SECS", default_value_t = RetryPolicy::DEFAULT_MAX_ELAPSED.as_secs_f64())]
    pub retry_max_secs: f64,
}

impl LimitArgs {
    /// The retry policy the flags ask for.
    pub fn retry_policy(&self) -> Result<RetryPolicy> {
        let total = positive_seconds("--retry-max-secs", self.retry_max_secs)?;
        Ok(RetryPolicy::default()
            .with_max_attempts(self.retries)
            .with_max_elapsed(total))
    }

    /// `--rpm` and `--tpm` as numbers, 0 for none.
    pub fn rates(&self) -> (u32, u32) {
        (self.rpm.unwrap_or(0), self.tpm.unwrap_or(0))
    }

    /// `builder` with the retry policy and, unless a shared budget replaces them, the
    /// per-process rates.
    pub fn apply(&self, builder: StackBuilder, shared_budget: bool) -> Result<StackBuilder> {
        let builder = builder.retry(self.retry_policy()?);
        if shared_budget {
            return Ok(builder);
        }
        let (rpm, tpm) = self.rates();
        Ok(builder.rates_per_minute(rpm, tpm))
    }
}
