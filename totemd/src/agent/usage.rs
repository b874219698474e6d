//! Usage and pricing: each answer's tokens, priced when the provider lists the model's prices,
//! added to the run and the session and announced as a `usage` event.

use totem_protocol::{EventKind, Usage};
use totem_provider::{Completion, Prices};

use super::run::{Runner, StepError};

impl Runner {
    /// Adds an answer's usage to the run and the session and announces it. `context` is the
    /// estimated size of the request that produced the answer.
    pub(super) fn account(
        &mut self,
        completion: &Completion,
        message_id: &str,
        context: u64,
    ) -> Result<(), StepError> {
        let Some(tokens) = completion.usage else {
            return Ok(());
        };
        let prices = self.model.info.as_ref().and_then(|i| i.prices);
        let usage = priced(&tokens, prices.as_ref());
        let run = self.usage.get_or_insert_with(Usage::default);
        run.add(&usage);
        let run = *run;
        let session = self.live.update(self.daemon.store(), |s| {
            s.usage.get_or_insert_with(Usage::default).add(&usage);
        })?;
        self.emit(EventKind::Usage {
            run_id: self.run_id.clone(),
            message_id: message_id.to_string(),
            usage,
            run,
            session: session.usage.unwrap_or_default(),
            context_tokens: Some(context),
            context_window: self.window(),
        })
    }
}

/// One answer's tokens as the protocol reports them, with their cost when `prices` are known.
/// Cache reads and writes without their own price cost as much as input.
fn priced(tokens: &Usage, prices: Option<&Prices>) -> Usage {
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    Usage {
        cost_usd: prices.map(|p| {
            per(tokens.input_tokens, p.input_per_million)
                + per(tokens.output_tokens, p.output_per_million)
                + per(
                    tokens.cache_read_tokens,
                    p.cache_read_per_million.unwrap_or(p.input_per_million),
                )
                + per(
                    tokens.cache_write_tokens,
                    p.cache_write_per_million.unwrap_or(p.input_per_million),
                )
        }),
        ..*tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Usage {
        Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cache_read_tokens: 2_000_000,
            cache_write_tokens: 100_000,
            reasoning_tokens: 40_000,
            cost_usd: None,
        }
    }

    #[test]
    fn cost_counts_every_kind_of_token_at_its_price() {
        let prices = Prices {
            input_per_million: 3.0,
            output_per_million: 15.0,
            cache_read_per_million: Some(0.3),
            cache_write_per_million: Some(3.75),
        };
        let usage = priced(&tokens(), Some(&prices));
        let cost = usage.cost_usd.unwrap();
        assert!((cost - (3.0 + 7.5 + 0.6 + 0.375)).abs() < 1e-9, "{cost}");
        assert_eq!(usage.reasoning_tokens, 40_000);
        assert_eq!(usage.cache_read_tokens, 2_000_000);
    }

    #[test]
    fn cache_without_its_own_price_costs_as_input_and_no_prices_no_cost() {
        let prices = Prices {
            input_per_million: 1.0,
            output_per_million: 2.0,
            cache_read_per_million: None,
            cache_write_per_million: None,
        };
        let cost = priced(&tokens(), Some(&prices)).cost_usd.unwrap();
        assert!((cost - (1.0 + 1.0 + 2.0 + 0.1)).abs() < 1e-9, "{cost}");
        assert_eq!(priced(&tokens(), None).cost_usd, None);
    }
}
