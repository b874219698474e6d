//! The user's MCP servers managed without editing JSON (`totem mcp add|list|remove`): entries in
//! settings.json, and their secret header and environment values sealed in secrets.json like
//! provider keys (settings.json lists the secret names, never the values).

use std::collections::BTreeMap;

use totem_protocol::{McpServerAddParams, McpServerInfo, McpServerList};

use super::sections::McpServerSettings;
use super::{ApiKey, ConfigError, Settings, SettingsFile};
use crate::mcp_client::oauth::{self, TokenStore};

/// Where a secret of server `server` is sealed in secrets.json: `mcp/NAME/env/VAR` or
/// `mcp/NAME/header/NAME`. Provider names cannot hold `/`, so these never meet a provider's.
fn secret_key(server: &str, kind: &str, name: &str) -> String {
    format!("mcp/{server}/{kind}/{name}")
}

impl Settings {
    /// Adds (or with `replace`, replaces) an MCP server in the user's settings; its secret values
    /// are sealed, and those of a replaced entry that are not given again are forgotten.
    pub fn add_mcp_server(&self, p: McpServerAddParams) -> Result<McpServerInfo, ConfigError> {
        let _writing = crate::util::lock(&self.writing);
        let name = p.name.trim().to_string();
        let mut secrets = Vec::new();
        for (kind, values) in [("env", &p.secret_env), ("header", &p.secret_headers)] {
            for (key, value) in values {
                let value = ApiKey::new(value).map_err(|e| {
                    ConfigError::BadRequest(format!("{kind} `{key}` of MCP server `{name}`: {e}"))
                })?;
                secrets.push((secret_key(&name, kind, key), value));
            }
        }
        let entry = McpServerSettings {
            command: p.command.map(|c| c.trim().to_string()),
            args: p.args,
            env: p.env,
            url: p.url.map(|u| u.trim().to_string()),
            headers: p.headers,
            tools: p.tools,
            secret_env: p.secret_env.into_keys().collect(),
            secret_headers: p.secret_headers.into_keys().collect(),
            ..McpServerSettings::default()
        };
        entry.validate(&name).map_err(ConfigError::BadRequest)?;
        self.update(|settings| {
            if settings.mcp_servers.contains_key(&name) && !p.replace {
                return Err(ConfigError::BadRequest(format!(
                    "an MCP server named `{name}` exists already; remove it first (`totem mcp remove {name}`) or add it again with --replace"
                )));
            }
            settings.mcp_servers.insert(name.clone(), entry.clone());
            Ok(())
        })?;
        self.forget_mcp_secrets(&name)?;
        for (key, value) in &secrets {
            self.secrets.set(key, value)?;
        }
        tracing::info!(server = %name, secrets = secrets.len(), "MCP server added");
        Ok(mcp_info(&name, &entry))
    }

    /// Removes an MCP server of the user's settings and its sealed secrets.
    pub fn remove_mcp_server(&self, name: &str) -> Result<(), ConfigError> {
        let _writing = crate::util::lock(&self.writing);
        self.update(|settings| match settings.mcp_servers.remove(name) {
            Some(_) => Ok(()),
            None => Err(ConfigError::NoMcpServer(name.to_string())),
        })?;
        self.forget_mcp_secrets(name)?;
        tracing::info!(server = %name, "MCP server removed");
        Ok(())
    }

    /// The configured MCP servers, for `mcp.list`, with secret values left out, only their names.
    pub fn list_mcp_servers(&self) -> McpServerList {
        let settings = self.current();
        McpServerList {
            servers: settings
                .mcp_servers
                .iter()
                .map(|(name, entry)| {
                    let login_refused = oauth::refused(&self.secrets, name);
                    McpServerInfo {
                        logged_in: self.is_logged_in(name) && login_refused.is_none(),
                        login_refused,
                        login_redirect_uri: oauth::registered_redirect(&self.secrets, name),
                        ..mcp_info(name, entry)
                    }
                })
                .collect(),
        }
    }

    /// Whether OAuth tokens of server `name` are stored (`totem mcp login`).
    pub fn is_logged_in(&self, name: &str) -> bool {
        self.secrets.has(&oauth::secret_key(name)).unwrap_or(false)
    }

    /// Forgets the OAuth tokens of server `name` (and the note that they were refused); its
    /// client registration stays, for the next login. Returns whether there were tokens.
    pub fn log_out_of_mcp_server(&self, name: &str) -> Result<bool, ConfigError> {
        if !self.current().mcp_servers.contains_key(name) {
            return Err(ConfigError::NoMcpServer(name.to_string()));
        }
        let had = oauth::log_out(&self.secrets, name)?;
        tracing::info!(server = %name, had, "MCP server logged out");
        Ok(had)
    }

    /// The MCP servers of `settings` (the caller's read of the user's settings) with their secret
    /// values put back into `env` and `headers`, for starting them. A secret that cannot be read
    /// switches its server off (the entry stays, so that a project's server of that name does not
    /// take its place), with the reason.
    pub fn mcp_servers_with_secrets(
        &self,
        settings: &SettingsFile,
    ) -> (BTreeMap<String, McpServerSettings>, Vec<String>) {
        let mut out = BTreeMap::new();
        let mut problems = Vec::new();
        for (name, entry) in &settings.mcp_servers {
            let entry = self.unseal(name, entry).unwrap_or_else(|problem| {
                problems.push(problem);
                McpServerSettings {
                    enabled: false,
                    ..entry.clone()
                }
            });
            out.insert(name.clone(), entry);
        }
        (out, problems)
    }

    /// One of the user's MCP servers with its secrets put back, or why it cannot start; `None`
    /// when settings.json has no server of that name.
    pub fn mcp_server_with_secrets(&self, name: &str) -> Option<Result<McpServerSettings, String>> {
        let settings = self.current();
        let entry = settings.mcp_servers.get(name)?;
        Some(self.unseal(name, entry))
    }

    /// `entry` with the values of its secret variables and headers unsealed into `env` and
    /// `headers`, or a sentence saying which secret could not be read.
    fn unseal(&self, name: &str, entry: &McpServerSettings) -> Result<McpServerSettings, String> {
        let mut entry = entry.clone();
        let wanted = [
            ("env", entry.secret_env.clone()),
            ("header", entry.secret_headers.clone()),
        ];
        for (kind, names) in wanted {
            for key in names {
                let value = match self.secrets.get(&secret_key(name, kind, &key)) {
                    Ok(Some(value)) => value.into_inner(),
                    Ok(None) => {
                        return Err(format!(
                            "MCP server `{name}` is not started: its secret {kind} `{key}` is not stored; add it again with `totem mcp add {name} … --replace`"
                        ));
                    }
                    Err(e) => return Err(format!("MCP server `{name}` is not started: {e}")),
                };
                match kind {
                    "env" => entry.env.insert(key, value),
                    _ => entry.headers.insert(key, value),
                };
            }
        }
        if entry.url.is_some() && self.is_logged_in(name) {
            entry.oauth = Some(TokenStore::new(self.secrets.clone(), name));
        }
        Ok(entry)
    }

    fn forget_mcp_secrets(&self, server: &str) -> Result<(), ConfigError> {
        let prefix = format!("mcp/{server}/");
        for key in self.secrets.names()? {
            if key.starts_with(&prefix) {
                self.secrets.remove(&key)?;
            }
        }
        Ok(())
    }
}

fn mcp_info(name: &str, entry: &McpServerSettings) -> McpServerInfo {
    let secrets = entry
        .secret_env
        .iter()
        .map(|n| format!("env {n}"))
        .chain(entry.secret_headers.iter().map(|n| format!("header {n}")))
        .collect();
    McpServerInfo {
        name: name.to_string(),
        command: entry.command.clone(),
        args: entry.args.clone(),
        url: entry.url.clone(),
        env: entry.env.keys().chain(&entry.secret_env).cloned().collect(),
        headers: entry
            .headers
            .keys()
            .chain(&entry.secret_headers)
            .cloned()
            .collect(),
        secrets,
        tools: entry.tools.clone(),
        enabled: entry.enabled,
        logged_in: false,
        login_refused: None,
        login_redirect_uri: None,
    }
}
