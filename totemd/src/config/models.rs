//! Model lists of every provider in use, cached briefly, and `provider.test`.
//!
//! Listing is done by a provider built without retries and with short timeouts: a person is
//! waiting for the answer, and a server that is down should say so at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::join_all;
use totem_protocol::{
    ModelCapabilities, ModelEntry, ModelList, ModelListError, ModelPrices, ProviderTestParams,
    ProviderTestResult, ToolMode,
};
use totem_provider::{ModelInfo, ProviderError};

use super::{ConfigError, ProviderSettings, Settings};

/// How long a provider's model list is reused before it is asked again.
pub const MODEL_LIST_TTL: Duration = Duration::from_secs(60);

const LIST_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const LIST_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A fetched list: the settings generation it belongs to and when it was fetched.
struct CachedList {
    generation: u64,
    at: Instant,
    models: Vec<ModelInfo>,
}

#[derive(Default)]
pub(super) struct ModelCache {
    lists: Mutex<HashMap<String, CachedList>>,
}

impl ModelCache {
    fn get(&self, provider: &str, generation: u64) -> Option<Vec<ModelInfo>> {
        let lists = crate::util::lock(&self.lists);
        match lists.get(provider) {
            Some(list) if list.generation == generation && list.at.elapsed() < MODEL_LIST_TTL => {
                Some(list.models.clone())
            }
            _ => None,
        }
    }

    fn put(&self, provider: &str, generation: u64, models: Vec<ModelInfo>) {
        let mut lists = crate::util::lock(&self.lists);
        let list = CachedList {
            generation,
            at: Instant::now(),
            models,
        };
        lists.insert(provider.to_string(), list);
    }
}

impl Settings {
    /// Asks one provider for its models, without retries and with short timeouts.
    async fn fetch_models(
        &self,
        entry: &ProviderSettings,
        generation: u64,
    ) -> Result<Vec<ModelInfo>, ConfigError> {
        let mut config = self.provider_config(entry)?;
        config.retry.max_retries = 0;
        config.connect_timeout = config.connect_timeout.min(LIST_CONNECT_TIMEOUT);
        config.response_timeout = config.response_timeout.min(LIST_RESPONSE_TIMEOUT);
        let provider = totem_provider::build(config)?;
        let mut models = provider.list_models().await?;
        apply_settings(entry, &mut models);
        self.models.put(&entry.name, generation, models.clone());
        // The provider runs use keeps the list too, so a run does not ask for it again.
        if let Ok(runs) = self.provider(&entry.name) {
            runs.remember_models(&models);
        }
        Ok(models)
    }

    /// The models of every provider in use (or of `only`), as users name them. Providers that
    /// do not answer are listed in `errors`; the others' models are still returned.
    pub async fn list_models(&self, only: Option<&str>) -> Result<ModelList, ConfigError> {
        let settings = self.current();
        let generation = self.read_state().generation;
        let targets = match only {
            Some(name) => vec![Self::entry(&settings, name)?],
            None => Self::providers_in_use(&settings),
        };
        let lists = join_all(targets.iter().map(|(entry, _)| async move {
            match self.models.get(&entry.name, generation) {
                Some(models) => Ok(models),
                None => self.fetch_models(entry, generation).await,
            }
        }))
        .await;
        let mut list = ModelList {
            models: Vec::new(),
            errors: Vec::new(),
            default_model: None,
        };
        for ((entry, implicit), result) in targets.iter().zip(lists) {
            match result {
                Ok(models) => list
                    .models
                    .extend(models.iter().map(|m| model_entry(entry, m))),
                Err(e) => {
                    let mut message = e.to_string();
                    if *implicit {
                        message.push_str(
                            " (no provider is configured, so Totem looked for a local Ollama; add one with `totem provider add`)",
                        );
                    }
                    tracing::debug!(provider = %entry.name, error = %message, "model list failed");
                    list.errors.push(ModelListError {
                        provider: entry.name.clone(),
                        message,
                    });
                }
            }
        }
        // The configured default; else the first provider's own default model (what
        // `--default-model` set); else the first listed model that calls tools.
        let provider_default = targets.iter().find_map(|(entry, _)| {
            let model = entry.default_model.as_deref()?;
            Some(format!("{}/{model}", entry.name))
        });
        list.default_model = settings
            .default_model
            .clone()
            .or(provider_default)
            .or_else(|| {
                list.models
                    .iter()
                    .find(|m| m.capabilities.tools)
                    .map(|m| m.name.clone())
            });
        Ok(list)
    }

    /// What the provider lists about `provider/model` (window, capabilities, prices), from the
    /// cached list while it is fresh. `None` when the provider does not list the model or does
    /// not answer: a run can still go ahead without it.
    pub async fn model_info(&self, name: &str) -> Option<ModelInfo> {
        let reference = totem_provider::ModelRef::parse(name).ok()?;
        let settings = self.current();
        let generation = self.read_state().generation;
        let (entry, _) = Self::entry(&settings, &reference.provider).ok()?;
        let models = match self.models.get(&entry.name, generation) {
            Some(models) => models,
            None => self.fetch_models(&entry, generation).await.ok()?,
        };
        models.into_iter().find(|m| m.id == reference.model)
    }

    /// The model a session uses when none is chosen: the configured default, else the first
    /// provider's default model, else the first listed model that supports tools. `None` when no provider offers one.
    pub async fn default_model(&self) -> Option<String> {
        if let Some(model) = self.current().default_model.clone() {
            return Some(model);
        }
        self.list_models(None).await.ok()?.default_model
    }

    /// Asks a provider for its model list and says in plain words how that went.
    /// With `probe`, also asks its models (or `model` alone) what they can do, and saves that
    /// as their settings (see [`super::probe`]).
    pub async fn test_provider(
        &self,
        params: &ProviderTestParams,
    ) -> Result<ProviderTestResult, ConfigError> {
        let name = params.name.as_str();
        let settings = self.current();
        let generation = self.read_state().generation;
        let (entry, implicit) = Self::entry(&settings, name)?;
        let started = Instant::now();
        let result = self.fetch_models(&entry, generation).await;
        let probes = match (&result, params.probe) {
            (Ok(models), true) => {
                self.probe_models(&entry, implicit, models, params.model.as_deref())
                    .await?
            }
            _ => Vec::new(),
        };
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let default_model_listed = match (&result, entry.default_model.as_deref()) {
            (Ok(models), Some(default)) => Some(models.iter().any(|m| m.id == default)),
            _ => None,
        };
        let (reachable, models, message) = match result {
            Ok(models) if models.is_empty() => (
                true,
                0,
                format!(
                    "{name} answered at {} but lists no models; install or enable one there first",
                    entry.url
                ),
            ),
            Ok(models) => (
                true,
                models.len() as u32,
                format!(
                    "{name} answered at {} and lists {} model{}; {}",
                    entry.url,
                    models.len(),
                    if models.len() == 1 { "" } else { "s" },
                    default_model_check(name, entry.default_model.as_deref(), &models)
                ),
            ),
            Err(ConfigError::Provider(e)) => (false, 0, test_failure(&e)),
            Err(other) => return Err(other),
        };
        Ok(ProviderTestResult {
            name: entry.name,
            url: entry.url,
            reachable,
            models,
            message,
            elapsed_ms,
            default_model_listed,
            probes,
        })
    }
}

/// Whether the provider's default model is among its models, in words, naming one to pick when
/// it is not.
fn default_model_check(provider: &str, default: Option<&str>, models: &[ModelInfo]) -> String {
    let suggestion = models
        .iter()
        .find(|m| m.capabilities.tools)
        .or(models.first())
        .map(|m| m.id.as_str())
        .unwrap_or_default();
    match default {
        Some(model) if models.iter().any(|m| m.id == model) => {
            format!("its default model {model} is there")
        }
        Some(model) => format!(
            "but its default model {model} is not among them: pick one of `totem models --provider {provider}` (e.g. {provider}/{suggestion}) and add the provider again with `--replace --default-model`"
        ),
        None => format!(
            "no default model is set; name one as {provider}/MODEL, e.g. {provider}/{suggestion}"
        ),
    }
}

fn test_failure(e: &ProviderError) -> String {
    match e {
        ProviderError::ModelNotFound { .. } | ProviderError::InvalidRequest { status: 404, .. } => {
            format!("{e}; the URL may lack or repeat a version path such as /v1")
        }
        _ => e.to_string(),
    }
}

/// What settings.json says about a provider's models wins over what the server lists: it is
/// there because the server does not tell (or tells wrong).
fn apply_settings(entry: &ProviderSettings, models: &mut [ModelInfo]) {
    for model in models {
        let Some(settings) = entry.models.get(&model.id) else {
            continue;
        };
        if let Some(window) = settings.context_window {
            model.context_window = Some(window);
        }
        if let Some(max) = settings.max_output_tokens {
            model.max_output_tokens = Some(u64::from(max));
        }
        if let Some(tools) = settings.tools {
            model.capabilities.tools = tools != ToolMode::None;
        }
    }
}

fn model_entry(provider: &ProviderSettings, m: &ModelInfo) -> ModelEntry {
    ModelEntry {
        name: format!("{}/{}", provider.name, m.id),
        provider: provider.name.clone(),
        id: m.id.clone(),
        display_name: m.display_name.clone(),
        context_window: m.context_window,
        max_output_tokens: m.max_output_tokens,
        capabilities: ModelCapabilities {
            tools: m.capabilities.tools,
            thinking: m.capabilities.thinking,
            vision: m.capabilities.vision,
            adaptive_thinking: m.capabilities.adaptive_thinking,
        },
        prices: m.prices.map(|p| ModelPrices {
            input_per_million: p.input_per_million,
            output_per_million: p.output_per_million,
            cache_read_per_million: p.cache_read_per_million,
            cache_write_per_million: p.cache_write_per_million,
        }),
        settings: provider.models.get(&m.id).cloned(),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use totem_protocol::{ProviderAddParams, ProviderKind};

    /// A minimal Ollama serving `/api/tags` and `/api/show` as PROVIDERS.md §1.2–1.3 shows them.
    /// Returns its base URL and a counter of `/api/tags` requests.
    async fn tiny_ollama() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let tags = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = tags.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // Read the head and, for POST, the small JSON body.
                loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request);
                    if n == 0
                        || (text.contains("\r\n\r\n")
                            && (text.starts_with("GET") || text.ends_with('}')))
                    {
                        break;
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let body = if text.starts_with("GET /api/tags") {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    r#"{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest","size":2019393189,"details":{"family":"llama","parameter_size":"3.2B"}}]}"#
                } else {
                    r#"{"parameters":"stop \"<|eot_id|>\"","details":{"family":"llama"},"model_info":{"general.architecture":"llama","llama.context_length":131072},"capabilities":["completion","tools"]}"#
                };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            }
        });
        (url, tags)
    }

    #[tokio::test]
    async fn model_info_comes_from_the_list_and_is_cached() {
        let (url, tags) = tiny_ollama().await;
        let home = tempfile::tempdir().unwrap();
        let settings = Settings::open(home.path());
        settings
            .add_provider(ProviderAddParams {
                name: "local".into(),
                kind: ProviderKind::Ollama,
                url: Some(url),
                key: None,
                default_model: None,
                ollama: None,
                temperature: None,
                timeouts: None,
                max_retries: None,
                models: None,
                replace: false,
            })
            .unwrap();
        let info = settings.model_info("local/llama3.2:latest").await.unwrap();
        assert_eq!(info.context_window, Some(131072));
        assert!(info.capabilities.tools);
        assert!(settings.model_info("local/missing").await.is_none());
        assert!(
            settings
                .model_info("nobody/llama3.2:latest")
                .await
                .is_none()
        );
        assert_eq!(
            tags.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "second lookup cached"
        );
        let list = settings.list_models(None).await.unwrap();
        assert_eq!(list.models[0].name, "local/llama3.2:latest");
        assert_eq!(list.default_model.as_deref(), Some("local/llama3.2:latest"));
        assert_eq!(
            tags.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "model.list cached too"
        );
    }
}
