//! Which MCP servers a session may use: the user's `mcpServers` in settings.json and the project's
//! `.totem/mcp.json`, merged (the user's entry wins when both name the same server).
//!
//! A project file comes with the repository, so it cannot mark its own servers as allowed for
//! every project: that field is ignored there, with a notice.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

pub use crate::config::{McpServerSettings, ServerRole};

/// How long a tool call or prompt may take unless the server's `timeoutSecs` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// `.totem/mcp.json` in a project.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProjectFile {
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpServerSettings>,
}

/// Where a server's entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The user's settings.json.
    User,
    /// The project's own `.totem` settings.
    Project,
}

/// A server a session may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The server's name, its key under `mcpServers`.
    pub name: String,
    /// Its entry in settings.
    pub settings: McpServerSettings,
    /// Which settings file it came from.
    pub origin: Origin,
}

impl ServerConfig {
    /// How long a call to this server may take (`timeoutSecs`, or the default).
    pub fn timeout(&self) -> Duration {
        self.settings
            .timeout_secs
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs)
    }

    /// Whether the model may see `tool` (the whitelist).
    pub fn offers(&self, tool: &str) -> bool {
        self.settings
            .tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool))
    }

    /// Whether the server is the docs search (`role: docs`).
    pub fn is_docs(&self) -> bool {
        self.settings.role == Some(ServerRole::Docs)
    }

    /// What it is, for messages: the command line or the URL.
    pub fn describe(&self) -> String {
        match (&self.settings.command, &self.settings.url) {
            (Some(command), _) => {
                let mut line = command.clone();
                for arg in &self.settings.args {
                    line.push(' ');
                    line.push_str(arg);
                }
                line
            }
            (None, Some(url)) => url.clone(),
            (None, None) => String::new(),
        }
    }
}

/// Header and environment values of the user's servers hold tokens: never shown or logged.
pub fn register_secrets(settings: &McpServerSettings) {
    for value in settings.headers.values().chain(settings.env.values()) {
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .unwrap_or(value);
        crate::redact::register(token);
    }
}

/// The servers of a project: the user's, then the project's own ones under names the user's
/// settings do not use. Problems are returned as notices; a broken entry is left out.
pub fn servers(
    user: &BTreeMap<String, McpServerSettings>,
    root: &Path,
) -> (Vec<ServerConfig>, Vec<String>) {
    let mut notices = Vec::new();
    user.values().for_each(register_secrets);
    let mut out: Vec<ServerConfig> = user
        .iter()
        .filter(|(_, settings)| settings.enabled)
        .map(|(name, settings)| ServerConfig {
            name: name.clone(),
            settings: settings.clone(),
            origin: Origin::User,
        })
        .collect();
    let path = root.join(".totem/mcp.json");
    let project = match std::fs::read_to_string(&path) {
        Ok(text) => match serde_json::from_str::<ProjectFile>(&text) {
            Ok(file) => file.mcp_servers,
            Err(e) => {
                notices.push(format!(
                    "{} is not valid ({e}); its MCP servers are not used until it is fixed",
                    path.display()
                ));
                BTreeMap::new()
            }
        },
        Err(_) => BTreeMap::new(),
    };
    for (name, mut settings) in project {
        // A user's entry wins, even a disabled one: it switches the project's server off.
        if out.iter().any(|s| s.name == name) || user.contains_key(&name) || !settings.enabled {
            continue;
        }
        if let Err(e) = settings.validate(&name) {
            notices.push(format!("{e} (in {})", path.display()));
            continue;
        }
        // Secret values are the user's, sealed under their own server names: a project's entry
        // names none.
        settings.secret_env.clear();
        settings.secret_headers.clear();
        if settings.allow_all_projects {
            notices.push(format!(
                "MCP server `{name}` in {}: `allowAllProjects` is ignored in a project file; Totem asks before starting it",
                path.display()
            ));
            settings.allow_all_projects = false;
        }
        out.push(ServerConfig {
            name,
            settings,
            origin: Origin::Project,
        });
    }
    (out, notices)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpServerSettings, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn a_command_or_a_url_and_nothing_unknown() {
        let s = parse(r#"{"command":"npx","args":["-y","x"],"tools":["echo"]}"#).unwrap();
        assert!(s.validate("everything").is_ok());
        assert!(parse(r#"{"command":"npx","arg":["x"]}"#).is_err());
        let s = parse(r#"{"url":"http://127.0.0.1:1/mcp","headers":{"A":"b"}}"#).unwrap();
        assert!(s.validate("remote").is_ok());
        let both = parse(r#"{"url":"http://x/mcp","command":"y"}"#).unwrap();
        assert!(both.validate("x").unwrap_err().contains("keep one"));
        let none = parse(r#"{}"#).unwrap();
        assert!(none.validate("x").is_err());
        assert!(s.validate("has space").is_err());
        assert!(s.validate("a/b").is_err());
    }

    #[test]
    fn project_servers_cannot_allow_themselves_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".totem")).unwrap();
        std::fs::write(
            dir.path().join(".totem/mcp.json"),
            r#"{"mcpServers":{"mine":{"command":"x","allowAllProjects":true},"shared":{"command":"y"}}}"#,
        )
        .unwrap();
        let mut user = BTreeMap::new();
        user.insert(
            "shared".to_string(),
            parse(r#"{"command":"z","allowAllProjects":true}"#).unwrap(),
        );
        let (servers, notices) = servers(&user, dir.path());
        let shared = servers.iter().find(|s| s.name == "shared").unwrap();
        assert_eq!(shared.settings.command.as_deref(), Some("z"));
        assert!(shared.settings.allow_all_projects);
        let mine = servers.iter().find(|s| s.name == "mine").unwrap();
        assert!(!mine.settings.allow_all_projects);
        assert_eq!(mine.origin, Origin::Project);
        assert!(notices[0].contains("allowAllProjects"), "{notices:?}");
    }
}
