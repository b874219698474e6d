//! What the agent reads from the user's settings: the settings in force when a run starts (typed
//! by the config module when the file was read; a change applies to the next run) and which
//! provider serves a model. [`provider_for`] is the one place a run turns a model name into a
//! provider.

use std::sync::Arc;
use std::time::Duration;

use totem_provider::{Capabilities, ModelInfo, Prices, Provider, ToolMode};

use crate::config::SettingsFile;
use crate::daemon::Daemon;

/// The settings in force now (the config module re-reads the file when it changes). While
/// settings.json on disk is broken nothing starts: the previous settings may lack a rule the user
/// just wrote, so the error is returned, naming the file, the line and what to fix.
pub fn load(daemon: &Daemon) -> Result<Arc<SettingsFile>, String> {
    if let Some(error) = daemon.settings.load_error() {
        return Err(format!(
            "settings.json is not loaded: {error}. Fix the file; nothing starts until then"
        ));
    }
    Ok(daemon.settings.current())
}

/// A provider ready for a run, with the model it serves.
#[derive(Clone)]
pub struct ResolvedModel {
    /// The provider that serves the model.
    pub provider: Arc<dyn Provider>,
    /// The provider's own model id.
    pub model: String,
    /// `provider/model`, as users write it.
    pub name: String,
    /// What the provider lists about the model (window, prices), when it lists it.
    pub info: Option<ModelInfo>,
}

/// Windows of this many tokens or fewer are offered the reduced tool set.
pub const SMALL_WINDOW: u64 = 8192;

/// The tools a small window is offered: enough to read, change and run things, in a fraction of
/// the bytes of them all.
pub const SMALL_WINDOW_TOOLS: &[&str] = &["read", "list", "edit", "write", "bash"];

/// The tools that change part of a file, left out when content comes as code blocks.
const PARTIAL_CHANGES: &[&str] = &["edit", "patch", "multiedit"];

/// Models of this many billion parameters or fewer (by the size in their name) get the short
/// prompt for small models.
pub const SMALL_PARAMETERS_B: f64 = 4.0;

/// Models of this many billion parameters or fewer (by the size in their name) write a file's
/// content as a code block in constrained steps (see [`ToolOffer::code_blocks`]).
pub const TINY_PARAMETERS_B: f64 = 1.0;

/// Models the probe measured slower than this (output tokens per second) get the short prompt.
pub const SLOW_TOKENS_PER_SECOND: f64 = 20.0;

/// The temperature local servers get when neither the model's nor the provider's settings give
/// one: low, for tool calls that follow the schema (llama.cpp's own default is 0.8).
pub const LOCAL_TEMPERATURE: f32 = 0.2;

/// How a run offers the model its tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolOffer {
    /// Which tools are offered: all, or only the read-only ones.
    pub mode: ToolMode,
    /// Only [`SMALL_WINDOW_TOOLS`] (and no MCP tools).
    pub reduced: bool,
    /// With tools in text: each answer is held to one JSON object (a call or the final answer)
    /// by the server.
    pub constrained: bool,
    /// With constrained steps: `write` takes only the path, and the file's content comes in a
    /// second answer, as a code block; `edit` and the other partial changes are not offered.
    /// Qwen2.5-Coder 0.5B picked the wrong oldString in every edit and rewrote `about;` as
    /// `about;` inside JSON, yet fixed the file in a code block (bench-tasks).
    pub code_blocks: bool,
}

/// The parameter count in a model's name, in billions: `qwen2.5-coder:1.5b`,
/// `Qwen2.5-Coder-0.5B-Instruct-GGUF`, `smollm2-360m` (0.36), `llama3.2:3b`. `None` when the name
/// gives none.
pub fn parameters_in_name(name: &str) -> Option<f64> {
    let lower = name.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut found = None;
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit()
            || (i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.'))
        {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let Ok(number) = lower[start..i].parse::<f64>() else {
            continue;
        };
        let unit = bytes.get(i).copied();
        let ends = bytes.get(i + 1).is_none_or(|c| !c.is_ascii_alphanumeric());
        let scale = match unit {
            Some(b'b') if ends => 1.0,
            Some(b'm') if ends => 0.001,
            _ => continue,
        };
        found = Some(number * scale);
    }
    found
}

impl ToolOffer {
    /// The tools are described in the system prompt and the calls read from the text.
    pub fn in_text(&self) -> bool {
        self.mode == ToolMode::Text
    }

    /// Whether the tool `name` is offered at all.
    pub fn offers(&self, name: &str) -> bool {
        self.mode != ToolMode::None
            && (!self.reduced || SMALL_WINDOW_TOOLS.contains(&name))
            && !(self.writes_code_blocks() && PARTIAL_CHANGES.contains(&name))
    }

    /// Whether a `write` call names only its path and its content comes as a code block.
    pub fn writes_code_blocks(&self) -> bool {
        self.constrained && self.code_blocks && self.in_text()
    }
}

impl ResolvedModel {
    /// Whether the model's window is known to be [`SMALL_WINDOW`] tokens or less.
    pub fn small_window(&self) -> bool {
        self.info
            .as_ref()
            .and_then(|i| i.context_window)
            .is_some_and(|w| w <= SMALL_WINDOW)
    }

    /// A small model, given the short prompt: as its `small` setting says; otherwise a small
    /// window, a name that says [`SMALL_PARAMETERS_B`] or fewer parameters, or a probed speed
    /// under [`SLOW_TOKENS_PER_SECOND`].
    pub fn small(&self) -> bool {
        let settings = self.provider.config().model(&self.model);
        settings.small.unwrap_or_else(|| {
            self.small_window()
                || parameters_in_name(&self.model).is_some_and(|b| b <= SMALL_PARAMETERS_B)
                || settings
                    .tokens_per_second
                    .is_some_and(|t| t < SLOW_TOKENS_PER_SECOND)
        })
    }

    /// Whether the model is served on this machine or a private network (a local server: it gets
    /// Totem's sampling defaults).
    pub fn local(&self) -> bool {
        crate::config::is_local(&self.provider.config().base_url)
    }

    /// As the model's settings say (set by the user, or saved by `totem models --probe`);
    /// otherwise natively, or in text when its server lists it without tool calling. A small
    /// model gets the reduced set unless the model's `reducedTools` says otherwise. Tools in text
    /// are constrained where the server takes a JSON schema, unless `constrained: false`.
    pub fn tool_offer(&self) -> ToolOffer {
        let listed = if self.info.as_ref().is_some_and(|i| !i.capabilities.tools) {
            ToolMode::Text
        } else {
            ToolMode::Native
        };
        self.offer_with(listed)
    }

    /// The offer for a model whose server refused native tool calls (vLLM started without
    /// `--enable-auto-tool-choice`): tools in text, unless its settings say otherwise.
    pub fn text_tool_offer(&self) -> ToolOffer {
        self.offer_with(ToolMode::Text)
    }

    fn offer_with(&self, listed: ToolMode) -> ToolOffer {
        let settings = self.provider.config().model(&self.model);
        let mode = settings.tools.unwrap_or(listed);
        let schema_kind = matches!(
            self.provider.config().kind,
            totem_provider::ProviderKind::Openai | totem_provider::ProviderKind::Ollama
        );
        ToolOffer {
            mode,
            reduced: settings.reduced_tools.unwrap_or_else(|| self.small()),
            constrained: mode == ToolMode::Text
                && schema_kind
                && settings.constrained != Some(false),
            code_blocks: settings.code_blocks.unwrap_or_else(|| {
                parameters_in_name(&self.model).is_some_and(|b| b <= TINY_PARAMETERS_B)
            }),
        }
    }
}

/// Turns a model name (or none: the settings' default, else the first listed model with tools)
/// into a provider and a model, through the config module. The error says what to configure.
pub async fn provider_for(
    daemon: &Daemon,
    model_ref: Option<&str>,
) -> Result<ResolvedModel, String> {
    let name = match model_ref {
        Some(name) => name.to_string(),
        None => daemon.settings.default_model().await.ok_or_else(|| {
            if daemon.settings.current().providers.is_empty() {
                format!(
                    "no model to run: no provider is configured and no local Ollama with a tool-capable model answered at {}; start Ollama (or set OLLAMA_HOST), add a provider with `totem provider add`, or pass a model as provider/model",
                    crate::config::implicit_ollama_url()
                )
            } else {
                "no model to run: no configured provider lists a model that supports tools; set `defaultModel`, or pass a model as provider/model".to_string()
            }
        })?,
    };
    let resolved = daemon
        .settings
        .provider_for(&name)
        .map_err(|e| e.to_string())?;
    let provider_name = resolved
        .name
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    // The list tells the window, capabilities and prices; a provider that cannot list still runs.
    let info = match tokio::time::timeout(
        Duration::from_secs(30),
        daemon.settings.list_models(Some(&provider_name)),
    )
    .await
    {
        Ok(Ok(list)) => list
            .models
            .into_iter()
            .find(|m| m.name == resolved.name)
            .map(|m| ModelInfo {
                id: m.id,
                display_name: m.display_name,
                context_window: m.context_window,
                max_output_tokens: m.max_output_tokens,
                capabilities: Capabilities {
                    tools: m.capabilities.tools,
                    thinking: m.capabilities.thinking,
                    vision: m.capabilities.vision,
                    adaptive_thinking: m.capabilities.adaptive_thinking,
                },
                prices: m.prices.map(|p| Prices {
                    input_per_million: p.input_per_million,
                    output_per_million: p.output_per_million,
                    cache_read_per_million: p.cache_read_per_million,
                    cache_write_per_million: p.cache_write_per_million,
                }),
            }),
        _ => None,
    };
    Ok(ResolvedModel {
        name: resolved.name,
        provider: resolved.provider,
        model: resolved.model,
        info,
    })
}

#[cfg(test)]
mod tests {
    use super::parameters_in_name;

    #[test]
    fn the_parameter_count_is_read_from_the_models_name() {
        assert_eq!(parameters_in_name("qwen2.5-coder:1.5b"), Some(1.5));
        assert_eq!(
            parameters_in_name("Qwen2.5-Coder-0.5B-Instruct-GGUF"),
            Some(0.5)
        );
        assert_eq!(parameters_in_name("llama3.2:3b"), Some(3.0));
        assert_eq!(parameters_in_name("smollm2-360m"), Some(0.36));
        // A mixture's size is not read (it is not small either way).
        assert_eq!(parameters_in_name("mixtral:8x7b"), None);
        assert_eq!(parameters_in_name("qwen3:8b"), Some(8.0));
        // Versions and windows are not sizes.
        assert_eq!(parameters_in_name("llama3.2:latest"), None);
        assert_eq!(parameters_in_name("gpt-4o-mini"), None);
        assert_eq!(parameters_in_name("smollm2"), None);
    }
}
