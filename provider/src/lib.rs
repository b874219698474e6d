//! Totem's model providers: one streaming abstraction over Ollama (native API), OpenAI-compatible
//! chat completions, Anthropic Messages and Google Gemini.
//!
//! Build a provider from its [`ProviderConfig`] with [`build`], then call [`Provider::stream`] with a
//! neutral [`ChatRequest`]; fold the events with [`TurnBuilder`] (or call [`Provider::complete`]) to
//! get the assistant turn to send back next time, signatures included.

#![deny(missing_docs)]

mod anthropic;
mod body;
mod error;
mod event;
mod frame;
mod gemini;
mod http;
mod model;
mod ollama;
mod openai;
pub mod redact;
mod request;
mod settings;
mod wire;

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;

pub use anthropic::{AnthropicProvider, anthropic_thinking_budget};
pub use body::parse_stream;
pub use error::{ProviderError, TimeoutPhase};
pub use event::{Completion, FinishReason, RetryNotice, StreamEvent, TurnBuilder, Usage};
pub use gemini::{GeminiProvider, gemini_schema};
pub use http::{CLIENT_IDLE, EventStream};
pub use model::{Capabilities, MODEL_CACHE_TTL, ModelInfo, Prices};
pub use ollama::{CTX_STEP, CtxDoesNotFit, OllamaProvider, size_num_ctx};
pub use openai::OpenAiProvider;
pub use request::{
    AssistantPart, ChatRequest, DEFAULT_MAX_OUTPUT_TOKENS, Image, Message, ReasoningLevel,
    ToolCall, ToolDefinition, ToolResult, estimate_tokens, synthetic_call_id,
};
pub use settings::{
    ModelRef, ModelSettings, OllamaSettings, ProviderConfig, ProviderKind, RetrySettings, ToolMode,
    default_output_cap,
};

/// A model provider. Cheap to clone behind an `Arc<dyn Provider>`; every call is independent.
pub trait Provider: Send + Sync {
    /// The configuration it was built from (the key stays inside; `Debug` masks it).
    fn config(&self) -> &ProviderConfig;

    /// Streams one answer. The single primitive every other call derives from.
    ///
    /// Failures before any output are retried per [`RetrySettings`]; an error after output has
    /// streamed ends the stream with that error and nothing is repeated. Poll it inside a Tokio
    /// runtime: the response body is read and framed on a task of its own.
    fn stream(&self, request: ChatRequest) -> EventStream;

    /// The provider's models, with context window, capabilities and prices where it gives them.
    fn list_models(&self) -> BoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>>;

    /// Takes a model list fetched elsewhere (by another provider built for the same server) as
    /// this provider's own, so a stream does not ask for it again.
    fn remember_models(&self, models: &[ModelInfo]) {
        let _ = models;
    }

    /// Lets go of the HTTP client (root certificates, pooled connections) when no request was
    /// started for `unused` ([`CLIENT_IDLE`] in the daemon); the next request builds it again.
    /// Returns whether it did.
    fn release_idle_client(&self, unused: std::time::Duration) -> bool {
        let _ = unused;
        false
    }

    /// The whole answer at once, collected from [`Provider::stream`].
    fn complete(
        &self,
        request: ChatRequest,
    ) -> BoxFuture<'static, Result<Completion, ProviderError>> {
        let mut stream = self.stream(request);
        Box::pin(async move {
            let mut turn = TurnBuilder::new();
            while let Some(event) = stream.next().await {
                turn.push(event?);
            }
            Ok(turn.finish())
        })
    }
}

/// Builds the provider a configuration describes.
pub fn build(config: ProviderConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    Ok(match config.kind {
        ProviderKind::Ollama => Arc::new(OllamaProvider::new(config)?),
        ProviderKind::Openai => Arc::new(OpenAiProvider::new(config)?),
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(config)?),
        ProviderKind::Gemini => Arc::new(GeminiProvider::new(config)?),
    })
}
