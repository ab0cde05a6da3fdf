//! A request's prices and cost cap: what prices its usage and what its plan is checked
//! against (the service's `--prices` and `--max-cost`, or the request's own cap).

use crate::state::AppState;

/// A request's prices and cost cap.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cost {
    pub(crate) prices: Option<synthkit::cost::Prices>,
    pub(crate) max_cost: Option<f64>,
}

impl Cost {
    /// Prices `usage` (its `cost_usd`) and adds the cost to the metrics.
    pub(crate) fn price(&self, state: &AppState, usage: &mut synthkit::UsageTotals) {
        if let Some(p) = &self.prices {
            p.price(usage);
            state.inner.metrics.add_cost(usage.cost_usd.unwrap_or(0.0));
        }
    }
}
