//! Totem's settings: `$TOTEM_HOME/settings.json` ([`file`], its agent and MCP sections typed in
//! [`sections`]), the encrypted provider keys ([`secrets`]) and the providers and model lists
//! built from them ([`models`]).
//!
//! [`Settings`] is the daemon's live view. The file is the truth: it is re-read whenever it
//! changes on disk, and a file that does not parse or check leaves the previous settings in force
//! (the error is logged, reported by `provider.list` and `totem doctor`, and refuses new runs) and
//! blocks changes until it is fixed, so a typo is never overwritten with defaults.
//!
//! The run loop gets its provider with [`Settings::provider_for`] (`ollama/qwen3:8b` → provider
//! and model id) and, when the session names no model, [`Settings::default_model`].

pub mod file;
mod mcp_servers;
mod models;
mod probe;
pub use probe::is_local;
pub mod secrets;
pub mod sections;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use totem_protocol::{
    ProviderAddParams, ProviderInfo, ProviderKind, ProviderList, ProviderTimeouts,
};
use totem_provider::{ModelRef, Provider, ProviderConfig, ProviderError};

pub use file::{SETTINGS_VERSION, SettingsFile};
pub use models::MODEL_LIST_TTL;
pub use secrets::{ApiKey, Secrets};
pub use sections::{
    AgentSettings, BootSettings, CompactionSettings, McpServerSettings, ServerRole, TotaljsSettings,
};
pub use totem_protocol::ProviderSettings;

/// The provider used without any configuration: a local Ollama.
pub const IMPLICIT_PROVIDER: &str = "ollama";

/// What can go wrong reading or changing settings. Messages name the file involved and never
/// contain a key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not valid JSON or has an unknown field.
    #[error("{}: line {line}, column {column}: {message}", path.display())]
    Malformed {
        /// The settings file.
        path: PathBuf,
        /// Line of the error, from 1.
        line: usize,
        /// Column of the error, from 1.
        column: usize,
        /// What the parser found wrong.
        message: String,
    },
    /// The file parses but a value in it is not acceptable.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The settings file.
        path: PathBuf,
        /// Which value is wrong and why.
        message: String,
    },
    /// Reading or writing a settings or secrets file failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`, …), for the message.
        action: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The secrets file or the master key cannot be used.
    #[error("{}: {message}", path.display())]
    Secret {
        /// The secrets file or key file.
        path: PathBuf,
        /// What is wrong with it; never the key.
        message: String,
    },
    /// The caller asked for something invalid; the message says what.
    #[error("{0}")]
    BadRequest(String),
    /// No provider has this name.
    #[error("no provider named `{0}`; `totem provider list` shows the configured ones")]
    NoProvider(String),
    /// A provider of this name exists and replacing it was not asked for.
    #[error("a provider named `{0}` exists already; remove it first or add it again with replace")]
    Exists(String),
    /// No MCP server has this name in the user's settings.
    #[error("no MCP server named `{0}` in your settings; `totem mcp list` shows them")]
    NoMcpServer(String),
    #[error(
        "settings are not changed while the file on disk is broken ({0}); fix the file or move it away, then try again"
    )]
    /// settings.json on disk does not load, so changing it could lose what the user wrote.
    Broken(String),
    /// The provider refused or failed (listing models, checking a key).
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// A model name resolved to the provider that serves it.
#[derive(Clone)]
pub struct ResolvedModel {
    /// `provider/model`.
    pub name: String,
    /// The provider's own model id.
    pub model: String,
    /// The provider that serves the model.
    pub provider: Arc<dyn Provider>,
}

impl std::fmt::Debug for ResolvedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedModel")
            .field("name", &self.name)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// What identifies one version of the file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode: meta.ino(),
        })
    }
}

struct State {
    current: Arc<SettingsFile>,
    /// The version of the file `current` or `error` came from (`None`: no file).
    stamp: Option<Stamp>,
    /// Why the file on disk is not in force, when it is not.
    error: Option<String>,
    /// Bumped on every change of settings or keys; caches are valid for one generation.
    generation: u64,
}

type BuiltProvider = (u64, Arc<dyn Provider>);

/// The daemon's settings, providers and model lists.
pub struct Settings {
    path: PathBuf,
    state: RwLock<State>,
    /// Serializes changes (read, modify, write) within this daemon.
    writing: Mutex<()>,
    secrets: Secrets,
    /// Built providers by name, with the settings generation they were built for.
    providers: Mutex<HashMap<String, BuiltProvider>>,
    models: models::ModelCache,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// Loads `home/settings.json`. Never fails: a broken file is logged, reported by
    /// [`Settings::load_error`], and the defaults stay in force until it is fixed.
    pub fn open(home: &Path) -> Settings {
        let settings = Settings {
            path: home.join("settings.json"),
            state: RwLock::new(State {
                current: Arc::new(SettingsFile::default()),
                stamp: None,
                error: None,
                generation: 0,
            }),
            writing: Mutex::new(()),
            secrets: Secrets::new(home),
            providers: Mutex::new(HashMap::new()),
            models: models::ModelCache::default(),
        };
        settings.reload_if_changed();
        settings
    }

    /// Where the settings live.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The encrypted key store (provider keys, the MCP server's HTTP token).
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// The settings in force, re-read first if the file changed on disk.
    pub fn current(&self) -> Arc<SettingsFile> {
        self.reload_if_changed();
        self.read_state().current.clone()
    }

    /// Why settings.json on disk is not in force, if it is not.
    pub fn load_error(&self) -> Option<String> {
        self.reload_if_changed();
        self.read_state().error.clone()
    }

    fn read_state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        crate::util::read_lock(&self.state)
    }

    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        crate::util::write_lock(&self.state)
    }

    fn reload_if_changed(&self) {
        let stamp = Stamp::of(&self.path);
        if self.read_state().stamp == stamp && self.read_state().generation > 0 {
            return;
        }
        let mut state = self.write_state();
        if state.stamp == stamp && state.generation > 0 {
            return;
        }
        state.stamp = stamp;
        state.generation += 1;
        match file::read(&self.path) {
            Ok(settings) => {
                if state.error.take().is_some() {
                    tracing::info!(path = %self.path.display(), "settings are readable again");
                }
                state.current = Arc::new(settings);
            }
            Err(e) => {
                tracing::error!(error = %e, "settings.json not loaded; the previous settings stay in force");
                state.error = Some(e.to_string());
            }
        }
    }

    /// Forgets built providers and cached model lists (after a key changed).
    fn invalidate(&self) {
        self.write_state().generation += 1;
    }

    /// Applies `change` to the settings and writes the file, unless the file on disk is broken.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut SettingsFile) -> Result<T, ConfigError>,
    ) -> Result<T, ConfigError> {
        self.reload_if_changed();
        let (mut next, error) = {
            let state = self.read_state();
            ((*state.current).clone(), state.error.clone())
        };
        if let Some(error) = error {
            return Err(ConfigError::Broken(error));
        }
        let out = change(&mut next)?;
        next.validate().map_err(ConfigError::BadRequest)?;
        file::write(&self.path, &next)?;
        let mut state = self.write_state();
        state.stamp = Stamp::of(&self.path);
        state.current = Arc::new(next);
        state.error = None;
        state.generation += 1;
        Ok(out)
    }

    /// Adds (or with `replace`, replaces) a provider and stores its key encrypted. A provider
    /// added without a key has none, even if an earlier one of that name had.
    pub fn add_provider(&self, params: ProviderAddParams) -> Result<ProviderInfo, ConfigError> {
        let _writing = crate::util::lock(&self.writing);
        let key = params
            .key
            .as_deref()
            .map(ApiKey::new)
            .transpose()
            .map_err(|e| {
                ConfigError::BadRequest(format!("key of provider `{}`: {e}", params.name))
            })?;
        let url = match params.url.as_deref().map(str::trim) {
            Some(url) if !url.is_empty() => url.trim_end_matches('/').to_string(),
            _ => params.kind.default_base_url().to_string(),
        };
        let entry = ProviderSettings {
            name: params.name.trim().to_string(),
            kind: params.kind,
            url,
            default_model: params.default_model.map(|m| m.trim().to_string()),
            ollama: params.ollama,
            temperature: params.temperature,
            timeouts: params.timeouts,
            max_retries: params.max_retries,
            models: params.models.clone().unwrap_or_default(),
        };
        file::validate_provider(&entry).map_err(ConfigError::BadRequest)?;
        let name = entry.name.clone();
        self.update(|settings| {
            match settings.providers.iter_mut().find(|p| p.name == entry.name) {
                Some(_) if !params.replace => Err(ConfigError::Exists(entry.name.clone())),
                Some(existing) => {
                    let models = std::mem::take(&mut existing.models);
                    *existing = entry.clone();
                    if params.models.is_none() {
                        existing.models = models;
                    }
                    Ok(())
                }
                None => {
                    settings.providers.push(entry.clone());
                    Ok(())
                }
            }
        })?;
        let stored = match &key {
            Some(key) => self.secrets.set(&name, key),
            None => self.secrets.remove(&name).map(|_| ()),
        };
        self.invalidate();
        if let Err(e) = stored {
            tracing::error!(provider = %name, error = %e, "provider saved but its key was not");
            return Err(e);
        }
        tracing::info!(provider = %name, kind = ?entry.kind, url = %entry.url, has_key = key.is_some(), "provider added");
        Ok(info(&entry, key.is_some()))
    }

    /// Removes a provider and its key.
    pub fn remove_provider(&self, name: &str) -> Result<(), ConfigError> {
        let _writing = crate::util::lock(&self.writing);
        self.update(|settings| {
            let before = settings.providers.len();
            settings.providers.retain(|p| p.name != name);
            if settings.providers.len() == before {
                return Err(ConfigError::NoProvider(name.to_string()));
            }
            Ok(())
        })?;
        self.secrets.remove(name)?;
        self.invalidate();
        tracing::info!(provider = %name, "provider removed");
        Ok(())
    }

    /// The configured providers, without keys.
    pub fn list_providers(&self) -> Result<ProviderList, ConfigError> {
        let settings = self.current();
        let with_key = self.secrets.names()?;
        Ok(ProviderList {
            providers: settings
                .providers
                .iter()
                .map(|p| info(p, with_key.contains(&p.name)))
                .collect(),
            default_model: settings.default_model.clone(),
            settings_error: self.load_error(),
        })
    }

    /// The providers in use: the configured ones, or the implicit local Ollama when there are
    /// none. The flag says which one is implicit.
    fn providers_in_use(settings: &SettingsFile) -> Vec<(ProviderSettings, bool)> {
        if settings.providers.is_empty() {
            return vec![(implicit_ollama(), true)];
        }
        settings
            .providers
            .iter()
            .map(|p| (p.clone(), false))
            .collect()
    }

    /// The settings of one provider in use, by name.
    fn entry(settings: &SettingsFile, name: &str) -> Result<(ProviderSettings, bool), ConfigError> {
        Self::providers_in_use(settings)
            .into_iter()
            .find(|(p, _)| p.name == name)
            .ok_or_else(|| ConfigError::NoProvider(name.to_string()))
    }

    /// What the provider crate needs to call `entry`, its key decrypted.
    fn provider_config(&self, entry: &ProviderSettings) -> Result<ProviderConfig, ConfigError> {
        let mut config =
            ProviderConfig::new(entry.name.clone(), entry.kind).with_base_url(entry.url.clone());
        config.api_key = self.secrets.get(&entry.name)?.map(ApiKey::into_inner);
        if let Some(key) = &config.api_key {
            crate::redact::register(key);
        }
        config.default_model = entry.default_model.clone();
        if let Some(ollama) = &entry.ollama {
            if let Some(ctx) = ollama.ctx {
                config.ollama.ctx = ctx;
            }
            config.ollama.ctx_max = ollama.ctx_max;
            config.ollama.keep_alive = ollama.keep_alive.clone();
        }
        config.temperature = entry.temperature;
        let ProviderTimeouts {
            connect_secs,
            response_secs,
            idle_secs,
        } = entry.timeouts.clone().unwrap_or_default();
        if let Some(s) = connect_secs {
            config.connect_timeout = Duration::from_secs(s);
        }
        if let Some(s) = response_secs {
            config.response_timeout = Duration::from_secs(s);
        }
        if let Some(s) = idle_secs {
            config.idle_timeout = Duration::from_secs(s);
        }
        if let Some(n) = entry.max_retries {
            config.retry.max_retries = n;
        }
        config.models = entry.models.clone();
        Ok(config)
    }

    /// The provider named `name` (the implicit local Ollama when none is configured), built once
    /// per settings generation and shared.
    pub fn provider(&self, name: &str) -> Result<Arc<dyn Provider>, ConfigError> {
        let settings = self.current();
        let generation = self.read_state().generation;
        let mut built = crate::util::lock(&self.providers);
        if let Some((g, provider)) = built.get(name)
            && *g == generation
        {
            return Ok(provider.clone());
        }
        let (entry, _) = Self::entry(&settings, name)?;
        let provider = totem_provider::build(self.provider_config(&entry)?)?;
        built.insert(name.to_string(), (generation, provider.clone()));
        Ok(provider)
    }

    /// Lets go of the HTTP clients of the built providers that made no request for `unused`
    /// (their root certificates and pooled connections); the providers themselves stay, with what
    /// they learned of their models. Returns how many clients were let go of.
    pub fn release_idle_clients(&self, unused: std::time::Duration) -> usize {
        let built: Vec<Arc<dyn Provider>> = crate::util::lock(&self.providers)
            .values()
            .map(|(_, provider)| provider.clone())
            .collect();
        built
            .iter()
            .filter(|provider| provider.release_idle_client(unused))
            .count()
    }

    /// Resolves what a user typed as a model: `provider/model`, or a provider's name alone for
    /// its default model. This is how a run gets its provider.
    pub fn provider_for(&self, model: &str) -> Result<ResolvedModel, ConfigError> {
        let model = model.trim();
        let reference = if model.contains('/') {
            ModelRef::parse(model).map_err(ConfigError::BadRequest)?
        } else {
            let settings = self.current();
            let (entry, _) = Self::entry(&settings, model).map_err(|_| {
                ConfigError::BadRequest(format!(
                    "`{model}` is not a model name: write it as provider/model, e.g. ollama/qwen3:8b"
                ))
            })?;
            let default = entry.default_model.ok_or_else(|| {
                ConfigError::BadRequest(format!(
                    "provider `{model}` has no default model; name one as {model}/MODEL"
                ))
            })?;
            ModelRef {
                provider: entry.name,
                model: default,
            }
        };
        Ok(ResolvedModel {
            name: reference.to_string(),
            provider: self.provider(&reference.provider)?,
            model: reference.model,
        })
    }
}

/// A local Ollama, used while no provider is configured: where `OLLAMA_HOST` says, as for the
/// `ollama` command itself, else on its default port.
fn implicit_ollama() -> ProviderSettings {
    ProviderSettings {
        name: IMPLICIT_PROVIDER.to_string(),
        kind: ProviderKind::Ollama,
        url: implicit_ollama_url(),
        default_model: None,
        ollama: None,
        temperature: None,
        timeouts: Some(ProviderTimeouts {
            connect_secs: Some(2),
            response_secs: None,
            idle_secs: None,
        }),
        max_retries: None,
        models: Default::default(),
    }
}

/// Where the implicit local Ollama is looked for.
pub fn implicit_ollama_url() -> String {
    std::env::var("OLLAMA_HOST")
        .ok()
        .and_then(|host| ollama_host_url(&host))
        .unwrap_or_else(|| ProviderKind::Ollama.default_base_url().to_string())
}

/// The base URL an `OLLAMA_HOST` value means, read as the `ollama` command reads it: `HOST`,
/// `HOST:PORT` or a URL; without a port, 11434 (80 or 443 for a URL); `0.0.0.0` (where a server listens) is
/// reached on 127.0.0.1. `None` for an empty or unusable value.
fn ollama_host_url(value: &str) -> Option<String> {
    let value = value.trim().trim_end_matches('/');
    if value.is_empty() {
        return None;
    }
    let (scheme, rest, default_port) = match value.split_once("://") {
        Some(("https", rest)) => ("https", rest, "443"),
        Some((scheme, rest)) => (scheme, rest, "80"),
        None => ("http", value, "11434"),
    };
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, port.parse::<u16>().ok()?.to_string()),
        _ => (rest, default_port.to_string()),
    };
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "[::]" => "[::1]",
        host => host,
    };
    let url = format!("{scheme}://{host}:{port}");
    reqwest::Url::parse(&url).ok().map(|_| url)
}

fn info(p: &ProviderSettings, has_key: bool) -> ProviderInfo {
    ProviderInfo {
        settings: p.clone(),
        has_key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(name: &str, key: Option<&str>) -> ProviderAddParams {
        ProviderAddParams {
            name: name.into(),
            kind: ProviderKind::Openai,
            url: Some("http://127.0.0.1:9/v1/".into()),
            key: key.map(str::to_owned),
            default_model: Some("gpt-4o-mini".into()),
            ollama: None,
            temperature: None,
            timeouts: None,
            max_retries: None,
            models: None,
            replace: false,
        }
    }

    #[test]
    fn an_idle_providers_http_client_is_let_go_of_and_the_provider_kept() {
        let home = tempfile::tempdir().unwrap();
        let settings = Settings::open(home.path());
        settings.add_provider(add("work", None)).unwrap();
        let built = settings.provider("work").unwrap();
        assert_eq!(
            settings.release_idle_clients(std::time::Duration::from_secs(3600)),
            0,
            "used just now"
        );
        assert_eq!(settings.release_idle_clients(std::time::Duration::ZERO), 1);
        assert_eq!(settings.release_idle_clients(std::time::Duration::ZERO), 0);
        // The provider itself stays (with what it learned of its models).
        assert!(Arc::ptr_eq(&built, &settings.provider("work").unwrap()));
    }

    #[test]
    fn added_provider_is_listed_without_its_key_and_resolves() {
        let home = tempfile::tempdir().unwrap();
        let settings = Settings::open(home.path());
        let info = settings
            .add_provider(add("work", Some("sk-unit-7777")))
            .unwrap();
        assert!(info.has_key);
        assert_eq!(info.settings.url, "http://127.0.0.1:9/v1");
        let listed = serde_json::to_string(&settings.list_providers().unwrap()).unwrap();
        assert!(listed.contains("\"hasKey\":true"), "{listed}");
        assert!(!listed.contains("sk-unit"), "{listed}");
        let resolved = settings.provider_for("work").unwrap();
        assert_eq!(resolved.name, "work/gpt-4o-mini");
        assert_eq!(
            resolved.provider.config().api_key.as_deref(),
            Some("sk-unit-7777")
        );
        let on_disk = std::fs::read_to_string(home.path().join("settings.json")).unwrap();
        assert!(!on_disk.contains("sk-unit"));
        // A reopened daemon sees the same.
        let again = Settings::open(home.path());
        assert_eq!(again.list_providers().unwrap().providers.len(), 1);
    }

    #[test]
    fn adding_twice_needs_replace_and_replacing_without_key_drops_it() {
        let home = tempfile::tempdir().unwrap();
        let settings = Settings::open(home.path());
        settings.add_provider(add("a", Some("sk-1"))).unwrap();
        assert!(matches!(
            settings.add_provider(add("a", None)),
            Err(ConfigError::Exists(_))
        ));
        let mut again = add("a", None);
        again.replace = true;
        assert!(!settings.add_provider(again).unwrap().has_key);
        assert_eq!(settings.provider("a").unwrap().config().api_key, None);
    }

    #[test]
    fn a_broken_file_keeps_the_previous_settings_and_blocks_changes() {
        let home = tempfile::tempdir().unwrap();
        let settings = Settings::open(home.path());
        settings.add_provider(add("a", None)).unwrap();
        std::fs::write(settings.path(), "{\"version\": 1,\n \"providers\": [}\n").unwrap();
        assert_eq!(settings.current().providers.len(), 1);
        let error = settings.load_error().unwrap();
        assert!(error.contains("settings.json: line 2, column"), "{error}");
        let refused = settings.add_provider(add("b", None)).unwrap_err();
        assert!(matches!(refused, ConfigError::Broken(_)), "{refused}");
        assert!(
            std::fs::read_to_string(settings.path())
                .unwrap()
                .contains("[}")
        );
    }

    #[test]
    fn ollama_host_is_read_as_ollama_reads_it() {
        let url = |v: &str| ollama_host_url(v);
        assert_eq!(
            url("127.0.0.1:11500").as_deref(),
            Some("http://127.0.0.1:11500")
        );
        assert_eq!(url("0.0.0.0").as_deref(), Some("http://127.0.0.1:11434"));
        assert_eq!(url("gpu-box").as_deref(), Some("http://gpu-box:11434"));
        assert_eq!(
            url("https://ollama.lan/").as_deref(),
            Some("https://ollama.lan:443")
        );
        assert_eq!(url("[::1]").as_deref(), Some("http://[::1]:11434"));
        assert_eq!(
            url("http://[::1]:9000").as_deref(),
            Some("http://[::1]:9000")
        );
        assert_eq!(url(""), None);
        assert_eq!(url("host:notaport"), None);
    }

    #[test]
    fn without_providers_the_local_ollama_is_implicit() {
        let home = tempfile::tempdir().unwrap();
        let settings = Settings::open(home.path());
        let provider = settings.provider("ollama").unwrap();
        assert_eq!(provider.config().base_url, "http://127.0.0.1:11434");
        assert!(matches!(
            settings.provider("other"),
            Err(ConfigError::NoProvider(_))
        ));
        assert!(settings.provider_for("qwen3").is_err());
        assert_eq!(
            settings.provider_for("ollama/qwen3:8b").unwrap().model,
            "qwen3:8b"
        );
    }
}
