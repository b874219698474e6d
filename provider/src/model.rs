//! The model catalogue: what each provider says about its models, in one shape.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// What a model can do. `false` means "not known to", which is what gates thinking parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// It takes tool definitions and calls tools natively.
    pub tools: bool,
    /// It can think before answering (reasoning levels apply).
    pub thinking: bool,
    /// It reads images.
    pub vision: bool,
    /// Anthropic: the model takes `thinking: {type: "adaptive"}` (and wants it over budgets).
    pub adaptive_thinking: bool,
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Prices {
    /// Price of a million prompt tokens.
    pub input_per_million: f64,
    /// Price of a million answer tokens.
    pub output_per_million: f64,
    /// Price of a million prompt tokens read from the provider's cache, where it prices them apart.
    pub cache_read_per_million: Option<f64>,
    /// Price of a million prompt tokens written to the provider's cache, where it prices them apart.
    pub cache_write_per_million: Option<f64>,
}

/// One model as its provider lists it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// The provider's model id (without the `provider/` prefix).
    pub id: String,
    /// The name the provider shows people, when it differs from the id.
    pub display_name: Option<String>,
    /// Tokens of context (Ollama: the trained window from `/api/show`).
    pub context_window: Option<u64>,
    /// The largest answer the model can give, in tokens, where the provider says.
    pub max_output_tokens: Option<u64>,
    /// What the model can do, as far as the provider says.
    pub capabilities: Capabilities,
    /// What it costs, where the provider lists prices.
    pub prices: Option<Prices>,
}

/// How long a fetched model list is trusted.
pub const MODEL_CACHE_TTL: Duration = Duration::from_secs(300);

/// A short-lived cache of one provider's model list, so a stream can look up a model's
/// capabilities without listing every time.
#[derive(Debug, Default)]
pub(crate) struct ModelCache {
    entry: Mutex<Option<(Instant, Vec<ModelInfo>)>>,
}

impl ModelCache {
    pub(crate) fn find(&self, id: &str) -> Option<ModelInfo> {
        let guard = self.entry.lock().ok()?;
        match &*guard {
            Some((at, models)) if at.elapsed() < MODEL_CACHE_TTL => {
                models.iter().find(|m| m.id == id).cloned()
            }
            _ => None,
        }
    }

    pub(crate) fn is_fresh(&self) -> bool {
        self.entry.lock().ok().is_some_and(|g| {
            g.as_ref()
                .is_some_and(|(at, _)| at.elapsed() < MODEL_CACHE_TTL)
        })
    }

    pub(crate) fn put(&self, models: Vec<ModelInfo>) {
        if let Ok(mut guard) = self.entry.lock() {
            *guard = Some((Instant::now(), models));
        }
    }
}

/// Parses a decimal USD-per-token price (OpenRouter) into USD per million tokens.
pub(crate) fn per_token_to_per_million(text: &str) -> Option<f64> {
    let value: f64 = text.trim().parse().ok()?;
    (value >= 0.0).then(|| (value * 1_000_000.0 * 1e6).round() / 1e6)
}
