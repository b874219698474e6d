//! How one configured provider is reached, and how users name its models.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use totem_protocol::ProviderKind;

/// Ollama-only settings: the `num_ctx` range (DESIGN §4) and how long the model stays loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OllamaSettings {
    /// `ollama.ctx`: the smallest `num_ctx` sent.
    pub ctx: u32,
    /// `ollama.ctxMax`: the largest `num_ctx` sent, whatever the model's window.
    pub ctx_max: Option<u32>,
    /// `keep_alive` as Ollama takes it (`"5m"`, `"1h"`, `"-1"`, `"0"`); `None` leaves the server default.
    pub keep_alive: Option<String>,
}

impl Default for OllamaSettings {
    fn default() -> Self {
        OllamaSettings {
            ctx: 8192,
            ctx_max: None,
            keep_alive: None,
        }
    }
}

/// When and how often a failed call is tried again (only while nothing has streamed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrySettings {
    /// Attempts after the first.
    pub max_retries: u32,
    /// First backoff; doubles on each retry.
    pub initial_backoff: Duration,
    /// Cap on the exponential backoff.
    pub max_backoff: Duration,
    /// A `Retry-After` longer than this is not waited for: the error goes to the caller instead.
    pub max_retry_after: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetrySettings {
    /// The wait before retry number `retry` (0-based): exponential, capped.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(16));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// How a model is offered Totem's tools, and what settings.json says about one model: the
/// protocol's types (the daemon hands them over as read).
pub use totem_protocol::{ModelSettings, ToolMode};

/// The output cap sent when nothing better is known: a quarter of the window, at most 4096
/// tokens, so a model that repeats itself stops long before it has filled its context.
pub fn default_output_cap(context_window: Option<u64>) -> u32 {
    const CAP: u32 = 4096;
    context_window
        .map(|w| u32::try_from(w / 4).unwrap_or(CAP).clamp(1, CAP))
        .unwrap_or(CAP)
}

/// One configured provider as it is called: every default filled in, timeouts as durations, the
/// key decrypted. It differs on purpose from the entry settings.json stores
/// ([`totem_protocol::ProviderSettings`]), which holds only what the user set (so a changed
/// default reaches every provider that did not set it) and never the key; the daemon builds this
/// from that entry and the key it keeps encrypted.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfig {
    /// The name users type before the slash (`ollama`, `openrouter`, `work-claude`).
    pub name: String,
    /// The wire format it speaks.
    pub kind: ProviderKind,
    /// Base URL. OpenAI-compatible URLs include the version path (`https://openrouter.ai/api/v1`,
    /// `http://127.0.0.1:1234/v1`); the others are the host root.
    pub base_url: String,
    /// The API key, decrypted. Never logged (`Debug` masks it) and never serialized.
    #[serde(default, skip_serializing)]
    pub api_key: Option<String>,
    /// The model used when only the provider is named (`ollama` rather than `ollama/qwen3:8b`).
    pub default_model: Option<String>,
    /// How `num_ctx` is sized and how long the model stays loaded; read by Ollama only.
    pub ollama: OllamaSettings,
    /// Temperature sent when the request sets none (typically for local servers).
    pub temperature: Option<f32>,
    /// How long opening the connection may take.
    pub connect_timeout: Duration,
    /// How long to wait for the response headers.
    pub response_timeout: Duration,
    /// How long a stream may stay silent between two chunks.
    pub idle_timeout: Duration,
    /// When a failed call is tried again.
    pub retry: RetrySettings,
    /// Per-model settings, by the provider's model id.
    #[serde(default)]
    pub models: BTreeMap<String, ModelSettings>,
}

impl ProviderConfig {
    /// A config with the kind's public URL and default timeouts.
    pub fn new(name: impl Into<String>, kind: ProviderKind) -> Self {
        ProviderConfig {
            name: name.into(),
            kind,
            base_url: kind.default_base_url().to_owned(),
            api_key: None,
            default_model: None,
            ollama: OllamaSettings::default(),
            temperature: None,
            connect_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
            retry: RetrySettings::default(),
            models: BTreeMap::new(),
        }
    }

    /// The settings of one model (empty when none are given).
    pub fn model(&self, id: &str) -> ModelSettings {
        self.models.get(id).cloned().unwrap_or_default()
    }

    /// The same config reaching the server at `url`.
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The same config sending `key` (decrypted) with every request.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The base URL without a trailing slash, ready for `format!("{base}/path")`.
    pub(crate) fn base(&self) -> &str {
        self.base_url.trim_end_matches('/')
    }
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("default_model", &self.default_model)
            .field("ollama", &self.ollama)
            .field("temperature", &self.temperature)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("retry", &self.retry)
            .field("models", &self.models)
            .finish()
    }
}

/// A model as users name it: `provider/model` (`ollama/qwen3:8b`, `openrouter/anthropic/claude-sonnet-4`).
/// Only the first slash separates: model ids may contain slashes themselves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    /// The configured provider's name, before the first slash.
    pub provider: String,
    /// The provider's own model id, after it (may hold slashes).
    pub model: String,
}

impl ModelRef {
    /// Parses `provider/model`. Both halves must be non-empty.
    pub fn parse(text: &str) -> Result<ModelRef, String> {
        let text = text.trim();
        match text.split_once('/') {
            Some((provider, model)) if !provider.is_empty() && !model.is_empty() => Ok(ModelRef {
                provider: provider.to_owned(),
                model: model.to_owned(),
            }),
            _ => Err(format!(
                "`{text}` is not a model name: write it as provider/model, e.g. ollama/qwen3:8b"
            )),
        }
    }
}

impl std::str::FromStr for ModelRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModelRef::parse(s)
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ref_splits_on_first_slash_only() {
        let r = ModelRef::parse("openrouter/anthropic/claude-sonnet-4").unwrap();
        assert_eq!(r.provider, "openrouter");
        assert_eq!(r.model, "anthropic/claude-sonnet-4");
        assert_eq!(r.to_string(), "openrouter/anthropic/claude-sonnet-4");
        assert_eq!(
            ModelRef::parse("ollama/qwen3:8b").unwrap().model,
            "qwen3:8b"
        );
    }

    #[test]
    fn model_ref_rejects_missing_halves() {
        assert!(ModelRef::parse("qwen3").is_err());
        assert!(ModelRef::parse("/qwen3").is_err());
        assert!(ModelRef::parse("ollama/").is_err());
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let r = RetrySettings {
            max_retries: 9,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(700),
            max_retry_after: Duration::from_secs(1),
        };
        assert_eq!(r.backoff(0), Duration::from_millis(100));
        assert_eq!(r.backoff(1), Duration::from_millis(200));
        assert_eq!(r.backoff(2), Duration::from_millis(400));
        assert_eq!(r.backoff(3), Duration::from_millis(700));
        assert_eq!(r.backoff(40), Duration::from_millis(700));
    }

    #[test]
    fn the_default_output_cap_is_a_quarter_of_the_window_up_to_4096() {
        assert_eq!(default_output_cap(None), 4096);
        assert_eq!(default_output_cap(Some(2048)), 512);
        assert_eq!(default_output_cap(Some(8192)), 2048);
        assert_eq!(default_output_cap(Some(131_072)), 4096);
        assert_eq!(default_output_cap(Some(2)), 1);
    }

    #[test]
    fn debug_masks_the_key() {
        let c = ProviderConfig::new("x", ProviderKind::Openai).with_api_key("sk-secret-123");
        let shown = format!("{c:?}");
        assert!(!shown.contains("sk-secret-123"));
        assert!(shown.contains("<redacted>"));
    }
}
