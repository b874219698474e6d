//! Params and results of the provider and model methods: `provider.add|list|remove|test` and
//! `model.list`. API keys go in (`provider.add`) and never come out: results say `hasKey` only.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Ollama's native API (`/api/chat`). Default URL `http://127.0.0.1:11434`.
    Ollama,
    /// OpenAI chat completions: OpenAI, OpenRouter, LM Studio, llama.cpp, vLLM. Default URL
    /// `https://api.openai.com/v1`; other servers' URLs include their version path.
    Openai,
    /// Anthropic Messages. Default URL `https://api.anthropic.com`.
    Anthropic,
    /// Google Gemini. Default URL `https://generativelanguage.googleapis.com`.
    Gemini,
}

impl ProviderKind {
    /// The name settings and `--kind` use.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Ollama => "ollama",
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
        }
    }

    /// The public endpoint used when no base URL is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Ollama => "http://127.0.0.1:11434",
            ProviderKind::Openai => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
            ProviderKind::Gemini => "https://generativelanguage.googleapis.com",
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ProviderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ollama" => Ok(ProviderKind::Ollama),
            "openai" => Ok(ProviderKind::Openai),
            "anthropic" => Ok(ProviderKind::Anthropic),
            "gemini" => Ok(ProviderKind::Gemini),
            other => Err(format!(
                "unknown provider kind `{other}`: expected ollama, openai, anthropic or gemini"
            )),
        }
    }
}

/// Ollama's context sizing and keep-alive (DESIGN §4: `ollama.ctx`, `ollama.ctxMax`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OllamaOptions {
    /// The smallest `num_ctx` sent (default 8192).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx: Option<u32>,
    /// The largest `num_ctx` sent, whatever the model's window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx_max: Option<u32>,
    /// How long Ollama keeps the model loaded (`"5m"`, `"1h"`, `"-1"`); unset leaves its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<String>,
}

/// How long to wait for a provider, in seconds. Unset fields keep the defaults (10/300/120).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderTimeouts {
    /// Opening the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_secs: Option<u64>,
    /// Waiting for the response headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_secs: Option<u64>,
    /// Silence allowed between two chunks of a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_secs: Option<u64>,
}

/// How a model is offered Totem's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// The API's own tool calling (`tools` in the request, tool-call messages).
    Native,
    /// The tools are described in the system prompt and the model writes each call as JSON in
    /// its text; for servers whose chat template drops `tools`.
    Text,
    /// No tools: the model only answers.
    None,
}

impl ToolMode {
    /// The word settings.json uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::Native => "native",
            ToolMode::Text => "text",
            ToolMode::None => "none",
        }
    }
}

/// What settings.json says about one model (`providers[].models.ID`), for servers that do not
/// tell; `totem models --probe` writes it too. Unset fields keep what the provider lists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelSettings {
    /// Tokens of context the server gives the model; sets the compaction threshold and the
    /// default output cap (a quarter of it, at most 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Output token limit sent with every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// How the model is offered tools: `native`, `text` or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolMode>,
    /// 0..2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// `false`: never stream (the server cannot); `true`: always stream, even where the server
    /// answers nothing (no retry without streaming). Unset: stream, and ask again without
    /// streaming when the server cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// `false`: offer every tool even in a small window; `true`: only read, list, edit, write
    /// and bash whatever the window. Unset: the reduced set for windows of 8,192 tokens or less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduced_tools: Option<bool>,
    /// With tools in text: `false` never asks the server to hold each answer to one JSON object
    /// (a call of one of the run's tools, or the final answer). Unset or `true`: constrained
    /// where the server takes a JSON schema (llama.cpp, LM Studio, Ollama), plain text elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrained: Option<bool>,
    /// Nucleus sampling sent with every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Penalty on repeated tokens, sent to local servers that take it (llama.cpp, Ollama).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_penalty: Option<f32>,
    /// `true`: the short prompt for small models (the five main tools, the essentials only)
    /// whatever the window; `false`: the full prompt. Unset: short for models of 4B parameters
    /// or less (by their name), models the probe measured below 20 tokens/s, and windows of
    /// 8,192 tokens or less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small: Option<bool>,
    /// With constrained steps: `true` asks for a file's new content as a code block, in an
    /// answer of its own after the model named the file (`write` takes only the path, and `edit`
    /// is not offered); `false` keeps content inside the JSON call. Unset: code blocks for models
    /// of 1B parameters or less (by their name), which copy and escape badly inside JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_blocks: Option<bool>,
    /// Output tokens per second the probe measured; a slow model gets fewer steps per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_second: Option<f64>,
    /// OpenAI-compatible servers: the field the output limit goes in. Unset:
    /// `max_completion_tokens` on api.openai.com, `max_tokens` elsewhere, and the other one
    /// from then on when the server refuses the first (Azure and gateways in front of
    /// reasoning models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_limit_field: Option<OutputLimitField>,
}

/// Where an OpenAI-compatible server takes the output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputLimitField {
    /// `max_tokens`: every local server and most gateways.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's reasoning models, on OpenAI or Azure.
    MaxCompletionTokens,
}

/// `provider.add`: the entry to store ([`ProviderSettings`]) with its key. It differs from the
/// stored entry on purpose: `url` may be left out (the kind's endpoint is stored), `models` left
/// out keeps a replaced provider's ones, and the key goes in here but is stored apart.
#[derive(Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderAddParams {
    /// The name users type before the slash in `provider/model`: letters, digits, `.`, `_`, `-`.
    pub name: String,
    /// The wire format it speaks.
    pub kind: ProviderKind,
    /// Base URL; defaults to the kind's public endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The API key. Stored encrypted; no method ever returns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The model used when only the provider is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// Ollama only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ollama: Option<OllamaOptions>,
    /// Temperature sent when a request sets none (typically for local servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// How long to wait for the provider; unset keeps the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<ProviderTimeouts>,
    /// Retries of a failed call before any output streamed (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Per-model settings by the provider's model id. Replacing a provider without them keeps
    /// the ones it had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<std::collections::BTreeMap<String, ModelSettings>>,
    /// Replace a provider of the same name (its stored key too) instead of refusing.
    #[serde(default)]
    pub replace: bool,
}

impl std::fmt::Debug for ProviderAddParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderAddParams")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("default_model", &self.default_model)
            .field("ollama", &self.ollama)
            .field("temperature", &self.temperature)
            .field("timeouts", &self.timeouts)
            .field("max_retries", &self.max_retries)
            .field("models", &self.models)
            .field("replace", &self.replace)
            .finish()
    }
}

/// One configured provider as settings.json stores it (`providers[]`); `provider.list` shows it
/// as it is, with `hasKey`. The key is not part of it: it is stored encrypted apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderSettings {
    /// The name users type before the slash in `provider/model`.
    pub name: String,
    /// The wire format it speaks.
    pub kind: ProviderKind,
    /// Base URL, always written out (the kind's default when none was given).
    pub url: String,
    /// The model used when only the provider is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// Ollama only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ollama: Option<OllamaOptions>,
    /// Temperature sent when a request sets none (typically for local servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// How long to wait for the provider; unset keeps the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<ProviderTimeouts>,
    /// Retries of a failed call before any output streamed (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Per-model settings by the provider's model id (`{"qwen3:8b": {"contextWindow": 8192}}`),
    /// for servers that do not tell; `totem models --probe` writes them too.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub models: std::collections::BTreeMap<String, ModelSettings>,
}

/// A configured provider as clients see it: everything but the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderInfo {
    /// The provider as settings.json stores it.
    #[serde(flatten)]
    pub settings: ProviderSettings,
    /// A key is stored for this provider (encrypted; never returned).
    pub has_key: bool,
}

/// What `provider.list` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderList {
    /// In the order they were added.
    pub providers: Vec<ProviderInfo>,
    /// The configured default model (`provider/model`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// Set when settings.json on disk could not be read: the file, line, column and what is
    /// wrong. The daemon keeps using the settings it had and refuses changes until it is fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_error: Option<String>,
}

/// `provider.remove`, `mcpServer.remove`, `mcpServer.logout`: a provider or MCP server by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderRef {
    /// The provider's or MCP server's name.
    pub name: String,
}

/// `provider.test`: is the provider reachable, and (with `probe`) what can its models do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderTestParams {
    /// The provider to test.
    pub name: String,
    /// Also ask each model a tiny scripted question set (a plain answer, one native tool call,
    /// the same in text form, streaming with tools) and save what it can do as its settings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probe: bool,
    /// Probe only this model (the provider's model id); otherwise its first eight models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// What a probe found out about one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelProbe {
    /// `provider/model`.
    pub name: String,
    /// It answered a plain question.
    pub answers: bool,
    /// It called a tool through the API's own tool calling.
    pub native_tools: bool,
    /// It called a tool by writing the call in its text, in the shape Totem reads.
    pub text_tools: bool,
    /// It called a tool in a streamed answer; absent when it has no native tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams_tool_calls: Option<bool>,
    /// Tokens of context, as the server says (listed, or in its own error for a too-long
    /// request); absent when it does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Output speed of the plain answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_second: Option<f64>,
    /// Asked only of a model without native tool calls: whether it called the tool when the
    /// server held its answer to a JSON schema (`false` also when the server refused the schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrained: Option<bool>,
    /// The temperature runs send (the model's or the provider's setting, else 0.2 for a local
    /// server); absent: the server's own default. The probe's questions are asked at 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The settings saved for the model (what the probe found, and what the user had set).
    pub settings: ModelSettings,
    /// In words: what the model can do and what to do about it.
    pub message: String,
}

/// What a removal returns: the name of what was removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRemoved {
    /// The removed provider's or MCP server's name.
    pub name: String,
}

/// What `provider.test` found: whether the provider answered its model list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderTestResult {
    /// The provider tested.
    pub name: String,
    /// The base URL that was asked.
    pub url: String,
    /// The provider listed its models.
    pub reachable: bool,
    /// How many models it listed (0 when unreachable).
    pub models: u32,
    /// In plain words: what was reached and how many models it has, or what went wrong and
    /// what to check.
    pub message: String,
    /// How long the test took, in milliseconds.
    pub elapsed_ms: u64,
    /// Whether the provider's default model is among the models it listed; absent when it has
    /// no default model or did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model_listed: Option<bool>,
    /// With `probe`: one entry per model asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ModelProbe>,
}

/// `model.list`: the models of every configured provider.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelListParams {
    /// Only this provider's models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// What a model can do; `false` means "not known to".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelCapabilities {
    /// It can call tools.
    pub tools: bool,
    /// It can think before answering (reasoning output).
    pub thinking: bool,
    /// It takes images as input.
    pub vision: bool,
    /// Anthropic: the model takes adaptive thinking.
    #[serde(default)]
    pub adaptive_thinking: bool,
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelPrices {
    /// Price of input tokens.
    pub input_per_million: f64,
    /// Price of output tokens.
    pub output_per_million: f64,
    /// Price of input tokens read from the prompt cache, where the provider prices it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_million: Option<f64>,
    /// Price of input tokens written to the prompt cache, where the provider prices it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_million: Option<f64>,
}

/// One model of one provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    /// What users type: `provider/model` (`ollama/qwen3:8b`).
    pub name: String,
    /// The provider's name, as configured.
    pub provider: String,
    /// The provider's own model id.
    pub id: String,
    /// A readable name, where the provider gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Tokens of context, where the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Output token limit, where the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// What the model is known to do.
    pub capabilities: ModelCapabilities,
    /// Prices, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<ModelPrices>,
    /// What settings.json (or a probe) says about the model; its `contextWindow` is already
    /// the `contextWindow` above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<ModelSettings>,
}

/// A provider that could not list its models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelListError {
    /// The provider's name.
    pub provider: String,
    /// What went wrong, in words.
    pub message: String,
}

/// What `model.list` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelList {
    /// Providers in settings order, each provider's models in its own order.
    pub models: Vec<ModelEntry>,
    /// Providers that did not answer; their models are missing from `models`.
    pub errors: Vec<ModelListError>,
    /// The model a session uses when none is chosen: the configured default, else the first
    /// listed model that supports tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
}

/// `mcpServer.add`: an MCP server in the user's settings.json. Values given as secrets are stored
/// encrypted beside the provider keys; settings.json names them but never holds them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerAddParams {
    /// The name the server is known by in settings and in its tools' names.
    pub name: String,
    /// The program to start (it speaks MCP on stdin and stdout); or give `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Arguments for `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// A streamable HTTP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Environment variables for the program, kept in settings.json.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// HTTP headers, kept in settings.json.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Environment variables whose values are secrets (stored encrypted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_env: BTreeMap<String, String>,
    /// HTTP headers whose values are secrets (stored encrypted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_headers: BTreeMap<String, String>,
    /// Only these tools reach the model (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Replace a server of the same name instead of refusing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace: bool,
}

/// An MCP server of the user's settings, as `totem mcp list` shows it: secret values never.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInfo {
    /// The server's name.
    pub name: String,
    /// The program it starts, for a local server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Arguments for `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The HTTP endpoint, for a remote server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Names of the environment variables it gets (values not shown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Names of the headers it gets (values not shown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// Which of those are stored encrypted: `env NAME` or `header NAME`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Only these tools reach the model (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Sessions start it and get its tools; `false` when settings.json turns it off.
    pub enabled: bool,
    /// OAuth tokens of it are stored (`totem mcp login`) and its authorization server has not
    /// refused to renew them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub logged_in: bool,
    /// Its login expired: why, in a sentence (its authorization server refused to renew the
    /// tokens); `totem mcp login` again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_refused: Option<String>,
    /// The loopback redirect URI of Totem's client registration with its authorization server:
    /// `totem mcp login` listens there again so that the registration is reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_redirect_uri: Option<String>,
}

/// What `mcpServer.list` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerList {
    /// Settings order.
    pub servers: Vec<McpServerInfo>,
}

/// `mcpServer.test`: start the server, list what it offers, stop it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerTestParams {
    /// The server to test.
    pub name: String,
    /// The folder a command is started in (default: Totem's home).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
}

/// What `mcpServer.test` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerTestResult {
    /// The server tested.
    pub name: String,
    /// It started and listed its tools.
    pub ok: bool,
    /// Its tools, when it started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Why it did not start or answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From the start to the tool list.
    pub millis: u64,
}

/// `mcpServer.login`: start logging in to a remote server that wants OAuth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerLoginParams {
    /// The server to log in to.
    pub name: String,
    /// Where the browser comes back: the caller's loopback address, `http://127.0.0.1:PORT/…`.
    pub redirect_uri: String,
    /// A client registered by hand with the authorization server; without it Totem registers
    /// itself (dynamic client registration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

/// What `mcpServer.login` returns: where to send the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerLoginStarted {
    /// The server being logged in to.
    pub name: String,
    /// The page to open in the browser.
    pub authorization_url: String,
}

/// `mcpServer.loginFinish`: the URL the browser was sent back to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerLoginFinishParams {
    /// The server being logged in to.
    pub name: String,
    /// The redirect URI with the authorization server's `code` and `state` (or `error`).
    pub callback_url: String,
}

/// What `mcpServer.logout` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerLogoutResult {
    /// The server logged out of.
    pub name: String,
    /// Whether tokens were stored.
    pub was_logged_in: bool,
}
