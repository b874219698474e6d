//! The settings file, `$TOTEM_HOME/settings.json`: its types, how it is read (with the line and
//! column of any mistake) and how it is written (atomically, readable by the user only).
//!
//! Every section is typed when the file is read (the agent's ones in [`super::sections`]) and
//! unknown fields are refused, so a mistake is reported at load, by `provider.list` and
//! `totem doctor`, not at the first run that would use it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use totem_permission::PermissionSettings;
use totem_protocol::{ModelSettings, ProviderKind, ProviderSettings};

use super::ConfigError;
use super::sections::{AgentSettings, CompactionSettings, McpServerSettings, TotaljsSettings};

/// The settings format this build reads and writes.
pub const SETTINGS_VERSION: u32 = 1;

fn current_version() -> u32 {
    SETTINGS_VERSION
}

/// Everything in settings.json. Unknown fields are errors, so a typo is reported, not ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettingsFile {
    /// Layout version of the file; a version other than [`SETTINGS_VERSION`] is refused.
    #[serde(default = "current_version")]
    pub version: u32,
    /// The model sessions use when none is chosen, as `provider/model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// A small model that names each session after its first answer, as `provider/model`;
    /// without it a session keeps the title taken from its first prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_model: Option<String>,
    /// Configured providers, in the order they were added. Keys are not here: they live
    /// encrypted in secrets.json.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<ProviderSettings>,
    /// Permission rules and secret-file patterns (`totem_permission`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionSettings>,
    /// Agents (modes) with their own prompt, model and rules.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, AgentSettings>,
    /// MCP servers whose tools the model may use; each starts inside a run once the user allowed
    /// it (see `crate::mcp_client`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, McpServerSettings>,
    /// How long an MCP server no run used keeps running, in seconds (600 by default); a project's
    /// sessions share one instance of each server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server_idle_secs: Option<u64>,
    /// How long a run waits for an MCP server that is starting before it goes on without it, in
    /// seconds (10 by default, at most the server's `timeoutSecs`; 0 never waits): the server's
    /// tools join the run when it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server_start_wait_secs: Option<u64>,
    /// Totem's own MCP server: its streamable HTTP listener (`totem mcp` serves stdio without
    /// settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<McpListenSettings>,
    /// The Total.js conventions check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totaljs: Option<TotaljsSettings>,
    /// Compaction: the summary model and the threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionSettings>,
    /// Formatter per file extension, run after the agent writes a file:
    /// `{"js": "npx prettier --write {file}"}`. AGENTS.md can name more.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub format: BTreeMap<String, String>,
    /// Check commands run after every edit, their findings returned to the model:
    /// `["npm run lint -- {file}"]`. AGENTS.md can name more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check: Vec<String>,
    /// What totemd writes to its log files under `logs/`: `error`, `warn`, `info` (the default),
    /// `debug`, `trace`, or a filter such as `totemd=debug`. Read when totemd starts; `--log`,
    /// `TOTEM_LOG` and `RUST_LOG` take precedence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// Interactive terminals: `{"idleTimeoutSecs": 3600, "scrollbackLines": 1000}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminals: Option<crate::terminal::TerminalSettings>,
}

impl Default for SettingsFile {
    fn default() -> Self {
        SettingsFile {
            version: SETTINGS_VERSION,
            default_model: None,
            title_model: None,
            providers: Vec::new(),
            permission: None,
            agents: BTreeMap::new(),
            mcp_servers: BTreeMap::new(),
            mcp_server_idle_secs: None,
            mcp_server_start_wait_secs: None,
            mcp_server: None,
            totaljs: None,
            compaction: None,
            format: BTreeMap::new(),
            check: Vec::new(),
            log_level: None,
            terminals: None,
        }
    }
}

/// `mcpServer`: how other agents reach Totem's MCP server over HTTP, and what the runs they
/// start may do without asking.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpListenSettings {
    /// The HTTP listener for other agents.
    #[serde(default)]
    pub http: McpHttpSettings,
    /// Permission rules for every run another agent starts (`session.ask`, the MCP tools), as in
    /// an agent's `allow:` list (`edit`, `bash(cargo test*)`): the user's pre-approval. Only this
    /// file grants them; no tool argument can.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

/// `mcpServer.http`: the streamable HTTP listener, off unless enabled. Every request needs the
/// bearer token `totem mcp token` creates; read when totemd starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpHttpSettings {
    /// Whether totemd listens for MCP over HTTP at all.
    #[serde(default)]
    pub enabled: bool,
    /// TCP port of the listener.
    #[serde(default = "default_mcp_port")]
    pub port: u16,
    /// An IP address; anything but loopback is refused while no token exists.
    #[serde(default = "default_mcp_bind")]
    pub bind: String,
}

fn default_mcp_port() -> u16 {
    7311
}

fn default_mcp_bind() -> String {
    "127.0.0.1".into()
}

impl Default for McpHttpSettings {
    fn default() -> Self {
        McpHttpSettings {
            enabled: false,
            port: default_mcp_port(),
            bind: default_mcp_bind(),
        }
    }
}

impl McpHttpSettings {
    /// The socket address to listen on.
    pub fn addr(&self) -> Result<std::net::SocketAddr, String> {
        let ip: std::net::IpAddr = self.bind.parse().map_err(|_| {
            format!(
                "mcpServer.http.bind `{}` is not an IP address; use 127.0.0.1",
                self.bind
            )
        })?;
        Ok(std::net::SocketAddr::new(ip, self.port))
    }

    /// Where clients reach the listener.
    pub fn url(&self) -> String {
        match self.addr() {
            Ok(addr) if addr.ip().is_unspecified() => format!("http://127.0.0.1:{}/mcp", self.port),
            Ok(addr) => format!("http://{addr}/mcp"),
            Err(_) => format!("http://{}:{}/mcp", self.bind, self.port),
        }
    }
}

impl SettingsFile {
    /// The provider entry named `name`, if any.
    pub fn provider(&self, name: &str) -> Option<&ProviderSettings> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Checks what serde cannot: names, URLs, ranges and duplicates.
    pub fn validate(&self) -> Result<(), String> {
        if self.version != SETTINGS_VERSION {
            return Err(format!(
                "version {} is not one this totemd reads (it reads {SETTINGS_VERSION}); update totemd",
                self.version
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for provider in &self.providers {
            validate_provider(provider)?;
            if !seen.insert(provider.name.as_str()) {
                return Err(format!("provider `{}` is listed twice", provider.name));
            }
        }
        if let Some(mcp) = &self.mcp_server {
            mcp.http.addr()?;
            if mcp.http.port == 0 {
                return Err("mcpServer.http.port must be a port number above 0".into());
            }
            totem_permission::Rules::from_lists(&mcp.allow, &[])
                .map_err(|e| format!("mcpServer.allow: {e}"))?;
        }
        if self.mcp_server_idle_secs == Some(0) {
            return Err(
                "mcpServerIdleSecs must be above 0 (seconds an unused MCP server keeps running; 600 by default)".into(),
            );
        }
        if let Some(model) = &self.default_model {
            totem_provider::ModelRef::parse(model).map_err(|e| format!("defaultModel: {e}"))?;
        }
        if let Some(model) = &self.title_model {
            totem_provider::ModelRef::parse(model).map_err(|e| format!("titleModel: {e}"))?;
        }
        if let Some(level) = &self.log_level {
            validate_log_level(level)?;
        }
        self.validate_sections()
    }
}

fn validate_model_settings(model: &ModelSettings) -> Result<(), String> {
    if let Some(t) = model.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(format!("temperature {t} is outside 0..2"));
    }
    if model.context_window == Some(0) || model.max_output_tokens == Some(0) {
        return Err("contextWindow and maxOutputTokens must be above 0".into());
    }
    if let (Some(window), Some(max)) = (model.context_window, model.max_output_tokens)
        && u64::from(max) >= window
    {
        return Err(format!(
            "maxOutputTokens ({max}) leaves no room in contextWindow ({window}) for the prompt"
        ));
    }
    Ok(())
}

/// Checks what serde cannot in one provider's entry: its name, URL and ranges.
pub fn validate_provider(provider: &ProviderSettings) -> Result<(), String> {
    validate_name(&provider.name)?;
    validate_url(&provider.url).map_err(|e| format!("provider `{}`: {e}", provider.name))?;
    let context = |e: String| format!("provider `{}`: {e}", provider.name);
    if let Some(model) = &provider.default_model
        && (model.trim().is_empty() || model.trim() != model)
    {
        return Err(context(format!(
            "defaultModel `{model}` is empty or has spaces around it"
        )));
    }
    if let Some(ollama) = &provider.ollama {
        if provider.kind != ProviderKind::Ollama {
            return Err(context(
                "`ollama` options apply to Ollama providers only".into(),
            ));
        }
        if let (Some(ctx), Some(max)) = (ollama.ctx, ollama.ctx_max)
            && max < ctx
        {
            return Err(context(format!(
                "ollama.ctxMax ({max}) is smaller than ollama.ctx ({ctx})"
            )));
        }
        if ollama.ctx == Some(0) || ollama.ctx_max == Some(0) {
            return Err(context(
                "ollama.ctx and ollama.ctxMax must be above 0".into(),
            ));
        }
    }
    if let Some(t) = provider.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(context(format!("temperature {t} is outside 0..2")));
    }
    for (id, model) in &provider.models {
        validate_model_settings(model).map_err(|e| context(format!("models.{id}: {e}")))?;
    }
    if let Some(timeouts) = &provider.timeouts {
        for (field, value) in [
            ("connectSecs", timeouts.connect_secs),
            ("responseSecs", timeouts.response_secs),
            ("idleSecs", timeouts.idle_secs),
        ] {
            if value == Some(0) {
                return Err(context(format!("timeouts.{field} must be at least 1")));
            }
        }
    }
    Ok(())
}

/// A provider name is what users type before the slash, so it is kept plain.
pub fn validate_name(name: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 {
        return Err(format!(
            "provider name `{name}` must be 1 to 64 characters long"
        ));
    }
    if !name.chars().all(plain) || name.starts_with(['.', '-']) {
        return Err(format!(
            "provider name `{name}` may hold only letters, digits, `.`, `_` and `-`, and start with a letter or digit"
        ));
    }
    Ok(())
}

/// A log filter as `tracing` reads it, except that a bare word must be a level: `infoo` would
/// otherwise be taken for a module name and silently log nothing of interest.
pub fn validate_log_level(level: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let hint = "use error, warn, info, debug or trace, or a filter such as totemd=debug";
    for directive in level.split(',').map(str::trim) {
        if !directive.contains(['=', '['])
            && !LEVELS.contains(&directive.to_ascii_lowercase().as_str())
        {
            return Err(format!(
                "logLevel `{level}`: `{directive}` is not a level; {hint}"
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(level)
        .map(drop)
        .map_err(|e| format!("logLevel `{level}` is not a log filter ({e}); {hint}"))
}

/// Checks that `url` is an `http` or `https` URL with a host and no spaces; the error says what is
/// wrong.
pub fn validate_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("URL `{url}` must start with http:// or https://"))?;
    if rest.is_empty() || rest.starts_with('/') || url.chars().any(char::is_whitespace) {
        return Err(format!("URL `{url}` has no host or contains spaces"));
    }
    Ok(())
}

/// Reads the settings file. A missing file is the default settings; anything else wrong is an
/// error naming the file (and the line and column, for JSON mistakes).
pub fn read(path: &Path) -> Result<SettingsFile, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SettingsFile::default()),
        Err(source) => {
            return Err(ConfigError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    parse(path, &text)
}

/// Parses settings text that came from `path`.
pub fn parse(path: &Path, text: &str) -> Result<SettingsFile, ConfigError> {
    let settings: SettingsFile =
        serde_json::from_str(text).map_err(|e| ConfigError::Malformed {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: without_position(&e),
        })?;
    settings
        .validate()
        .map_err(|message| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
    Ok(settings)
}

/// serde_json ends its messages with " at line L column C"; we say where ourselves.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Writes the settings file atomically, readable by the user only.
pub fn write(path: &Path, settings: &SettingsFile) -> Result<(), ConfigError> {
    let mut text = serde_json::to_vec_pretty(settings).map_err(|e| ConfigError::Io {
        action: "encode",
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    text.push(b'\n');
    write_private(path, &text)
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a
/// reader sees the old file or the new one, never half of one. The file is created 0600.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| ConfigError::Io {
            action,
            path,
            source,
        }
    };
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let temp = temp_path(path);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(source) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(io("write", &temp)(source));
    }
    if let Err(source) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(io("replace", path)(source));
    }
    // The rename is durable once the folder is synced; failing that is not worth an error.
    if let Ok(folder) = std::fs::File::open(dir) {
        let _ = folder.sync_all();
    }
    Ok(())
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "settings".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        ulid::Ulid::new()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_json_names_file_line_and_column() {
        let path = Path::new("/home/u/.totem/settings.json");
        let err = parse(path, "{\n  \"version\": 1,\n  \"providers\": [,]\n}").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/home/u/.totem/settings.json"), "{text}");
        assert!(text.contains("line 3"), "{text}");
        assert!(text.contains("column 17"), "{text}");
    }

    #[test]
    fn unknown_fields_are_errors() {
        let err = parse(Path::new("s.json"), r#"{"version":1,"defaultModle":"a/b"}"#).unwrap_err();
        assert!(err.to_string().contains("defaultModle"), "{err}");
        let err = parse(
            Path::new("s.json"),
            r#"{"providers":[{"name":"a","kind":"ollama","url":"http://x","apiKey":"k"}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("apiKey"), "{err}");
    }

    #[test]
    fn log_level_is_a_level_or_a_filter() {
        let ok = parse(Path::new("s.json"), r#"{"version":1,"logLevel":"trace"}"#).unwrap();
        assert_eq!(ok.log_level.as_deref(), Some("trace"));
        parse(Path::new("s.json"), r#"{"logLevel":"info,totemd=debug"}"#).unwrap();
        let err = parse(Path::new("s.json"), r#"{"logLevel":"infoo"}"#).unwrap_err();
        assert!(err.to_string().contains("`infoo` is not a level"), "{err}");
    }

    #[test]
    fn mcp_server_section_has_defaults_and_is_checked() {
        let ok = parse(
            Path::new("s.json"),
            r#"{"mcpServer":{"http":{"enabled":true}}}"#,
        )
        .unwrap();
        let http = ok.mcp_server.unwrap().http;
        assert_eq!((http.enabled, http.port), (true, 7311));
        assert_eq!(http.url(), "http://127.0.0.1:7311/mcp");
        let err = parse(
            Path::new("s.json"),
            r#"{"mcpServer":{"http":{"bind":"localhost"}}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not an IP address"), "{err}");
        let err = parse(
            Path::new("s.json"),
            r#"{"mcpServer":{"http":{"enabeld":true}}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("enabeld"), "{err}");
        let err = parse(Path::new("s.json"), r#"{"mcpServer":{"http":{"port":0}}}"#).unwrap_err();
        assert!(err.to_string().contains("port"), "{err}");
        let ok = parse(Path::new("s.json"), r#"{"mcpServer":{"allow":["edit"]}}"#).unwrap();
        assert_eq!(ok.mcp_server.unwrap().allow, ["edit"]);
        let err = parse(Path::new("s.json"), r#"{"mcpServer":{"allow":["edit("]}}"#).unwrap_err();
        assert!(err.to_string().contains("mcpServer.allow"), "{err}");
    }

    #[test]
    fn newer_version_and_duplicates_are_refused() {
        let err = parse(Path::new("s.json"), r#"{"version":2}"#).unwrap_err();
        assert!(err.to_string().contains("update totemd"), "{err}");
        let err = parse(
            Path::new("s.json"),
            r#"{"providers":[{"name":"a","kind":"ollama","url":"http://x"},{"name":"a","kind":"openai","url":"http://y"}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }

    #[test]
    fn model_settings_are_typed_and_checked() {
        let text = r#"{"providers":[{"name":"l","kind":"openai","url":"http://x/v1","models":{"smollm2":{"contextWindow":2048,"maxOutputTokens":256,"tools":"text","temperature":0.0,"stream":false}}}]}"#;
        let settings = parse(Path::new("s.json"), text).unwrap();
        let model = &settings.providers[0].models["smollm2"];
        assert_eq!(model.context_window, Some(2048));
        assert_eq!(model.tools, Some(totem_protocol::ToolMode::Text));
        assert_eq!(model.stream, Some(false));
        let again = serde_json::to_value(&settings).unwrap();
        assert_eq!(again["providers"][0]["models"]["smollm2"]["tools"], "text");
        for (models, says) in [
            (r#"{"m":{"contextWindw":2048}}"#, "contextWindw"),
            (r#"{"m":{"tools":"json"}}"#, "json"),
            (r#"{"m":{"temperature":3}}"#, "models.m: temperature 3"),
            (r#"{"m":{"contextWindow":0}}"#, "above 0"),
            (
                r#"{"m":{"contextWindow":2048,"maxOutputTokens":2048}}"#,
                "leaves no room",
            ),
        ] {
            let text = format!(
                r#"{{"providers":[{{"name":"l","kind":"openai","url":"http://x/v1","models":{models}}}]}}"#
            );
            let err = parse(Path::new("s.json"), &text).unwrap_err().to_string();
            assert!(err.contains(says), "{models}: {err}");
        }
    }

    #[test]
    fn names_and_urls_are_checked() {
        assert!(validate_name("work-claude.2").is_ok());
        assert!(validate_name("a/b").is_err());
        assert!(validate_name("").is_err());
        assert!(validate_name("-x").is_err());
        assert!(validate_url("http://127.0.0.1:11434").is_ok());
        assert!(validate_url("https://openrouter.ai/api/v1").is_ok());
        assert!(validate_url("ftp://x").is_err());
        assert!(validate_url("http://").is_err());
    }

    #[test]
    fn written_file_is_private_and_complete() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let settings = SettingsFile {
            default_model: Some("ollama/qwen3:8b".into()),
            ..SettingsFile::default()
        };
        write(&path, &settings).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read(&path).unwrap(), settings);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "temporary file left behind");
    }
}
