//! What the agent reads from the user's settings: which provider serves a model, the agents
//! (modes) defined there, permission rules, compaction and the commands run after an edit.
//!
//! The settings file (`$TOTEM_HOME/settings.json`) is owned by the config module, which keeps the
//! agent's sections as raw JSON; this types them each time a run starts, so a change applies to
//! the next run. [`provider_for`] is the one place a run turns a model name into a provider.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use totem_provider::{Capabilities, ModelInfo, Prices, Provider};

use crate::daemon::Daemon;

/// A configured agent (mode): its own prompt, model and rules.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSettings {
    /// Added to the system prompt after the base prompt.
    #[serde(default)]
    pub prompt: Option<String>,
    /// `provider/model` this agent runs with unless the prompt names one.
    #[serde(default)]
    pub model: Option<String>,
    /// Only the read-only tools, as in Plan mode.
    #[serde(default)]
    pub read_only: bool,
    /// Rules as `bash(git *)`, `edit`, …
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSettings {
    /// A cheaper model for summaries (`provider/model`).
    #[serde(default)]
    pub model: Option<String>,
    /// Fraction of the model's window above which the session compacts (default 0.8).
    #[serde(default)]
    pub threshold: Option<f64>,
}

/// The parts of the settings the agent uses, typed from the sections the config module keeps as
/// raw JSON (`agents`, `compaction`, `permission`, `totaljs`).
#[derive(Debug, Clone, Default)]
pub struct AgentFileSettings {
    pub default_model: Option<String>,
    pub agents: BTreeMap<String, AgentSettings>,
    pub compaction: CompactionSettings,
    /// Formatter per file extension (`{"js": "npx prettier --write {file}"}`), from settings;
    /// AGENTS.md can name more.
    pub format: BTreeMap<String, String>,
    /// Check commands run after every edit, from settings; AGENTS.md can name more.
    pub check: Vec<String>,
    pub permission: Option<serde_json::Value>,
    pub totaljs: Option<serde_json::Value>,
    /// `totaljs.check`: conventions rules switched off or on, and their severities; every rule id
    /// it names exists (a misspelt one is an error, not silently ignored).
    pub totaljs_check: totem_totaljs::CheckConfig,
}

fn section<T: serde::de::DeserializeOwned + Default>(
    name: &str,
    value: &Option<serde_json::Value>,
) -> Result<T, String> {
    match value {
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| format!("the `{name}` section of the settings is invalid: {e}")),
        None => Ok(T::default()),
    }
}

impl AgentFileSettings {
    /// The settings in force now (the config module re-reads the file when it changes).
    pub fn load(daemon: &Daemon) -> Result<AgentFileSettings, String> {
        let file = daemon.settings.current();
        Ok(AgentFileSettings {
            default_model: file.default_model.clone(),
            agents: section("agents", &file.agents)?,
            compaction: section("compaction", &file.compaction)?,
            format: section("format", &file.format)?,
            check: section("check", &file.check)?,
            permission: file.permission.clone(),
            totaljs: file.totaljs.clone(),
            totaljs_check: totaljs_check(file.totaljs.as_ref())?,
        })
    }
}

fn totaljs_check(
    totaljs: Option<&serde_json::Value>,
) -> Result<totem_totaljs::CheckConfig, String> {
    let invalid = |e: &dyn std::fmt::Display| {
        format!(
            "the `totaljs.check` section of the settings is invalid: {e}; fix it in settings.json"
        )
    };
    let Some(check) = totaljs.and_then(|t| t.get("check")) else {
        return Ok(totem_totaljs::CheckConfig::default());
    };
    let config: totem_totaljs::CheckConfig =
        serde_json::from_value(check.clone()).map_err(|e| invalid(&e))?;
    config.validate().map_err(|e| invalid(&e))?;
    Ok(config)
}

/// A provider ready for a run, with the model it serves.
#[derive(Clone)]
pub struct ResolvedModel {
    pub provider: Arc<dyn Provider>,
    /// The provider's own model id.
    pub model: String,
    /// `provider/model`, as users write it.
    pub name: String,
    /// What the provider lists about the model (window, prices), when it lists it.
    pub info: Option<ModelInfo>,
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
            "no model to run: no provider is configured (and no local Ollama answered) or none of its models supports tools; add one with `totem provider add`, or pass a model as provider/model".to_string()
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
