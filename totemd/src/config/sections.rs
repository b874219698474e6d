//! The sections of settings.json other parts of the daemon use, typed where the file is read:
//! agents (modes), compaction, the Total.js check, formatters and check commands, and the MCP
//! servers the model may use. Every one refuses unknown fields, so a typo is reported when the file
//! is loaded (with its line and the names that are known), never silently ignored at a run.
//!
//! [`SettingsFile::policy`] turns the `permission` section and an agent's lists into the
//! permission policy, both to check them at load and for every run.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use totem_permission::{Policy, Rules, SecretPatterns, Source};

use super::file::SettingsFile;

/// The modes every installation has; `agents` can add more, or give these a prompt or model.
pub const BUILD: &str = "build";
/// The read-only planning mode.
pub const PLAN: &str = "plan";

/// `agents.NAME`: an agent (mode) with its own prompt, model and rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentSettings {
    /// Added to the system prompt after the base prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// `provider/model` this agent runs with unless the prompt names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Only the read-only tools, as in Plan mode.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// Rules as `bash(git *)`, `edit`, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Rules this agent always refuses, written as in `allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

/// `compaction`: how a session's older turns are summarised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionSettings {
    /// A cheaper model for summaries (`provider/model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Fraction of the model's window above which the session compacts (default 0.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
}

/// `totaljs`: the Total.js conventions check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TotaljsSettings {
    /// Rules switched off or on, and their severities; every rule id named must exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<totem_totaljs::CheckConfig>,
    /// The boot check: after a run's edits Totem starts the app and asks the routes they declare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<BootSettings>,
}

/// `totaljs.boot`: the boot check after a run's edits (`totem check --boot` runs it on demand).
///
/// ```json
/// "totaljs": { "boot": { "enabled": false } }
/// "totaljs": { "boot": { "safeRoutes": ["POST /api/reset/"], "timeout": 20 } }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BootSettings {
    /// `false` switches the check off after runs (default on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Routes other than `GET` that are safe to ask with an empty JSON body (`"POST /api/x/"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub safe_routes: Vec<String>,
    /// Seconds the app may take to listen (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

/// `mcpServers.NAME`: one MCP server, a command Totem starts (stdio) or a URL it connects to
/// (streamable HTTP).
///
/// ```json
/// "mcpServers": {
///   "everything": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"] },
///   "docs": { "url": "http://127.0.0.1:8123/mcp", "headers": {"Authorization": "Bearer …"},
///             "role": "docs", "tools": ["search"], "allowAllProjects": true }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerSettings {
    /// The program to start; it speaks MCP on its stdin and stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Arguments passed to `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables added to the program's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A streamable HTTP endpoint, instead of a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with every HTTP request (an `Authorization` token, say).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Only these tools of the server reach the model (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// What Totem uses the server for besides its tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<ServerRole>,
    /// The tool a docs server searches with (default: the first tool whose name has `search`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_tool: Option<String>,
    /// Start it in every project without asking (user settings only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_all_projects: bool,
    /// How long one tool call or prompt may take (default 60 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// `false` keeps the entry but never starts the server (default `true`).
    #[serde(default = "enabled", skip_serializing_if = "is_enabled")]
    pub enabled: bool,
    /// Environment variables whose values are stored encrypted beside the provider keys
    /// (`totem mcp add NAME --env VAR --value-stdin`); user settings only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<String>,
    /// Headers whose values are stored encrypted (`--header NAME --value-stdin`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_headers: Vec<String>,
    /// Its sealed OAuth tokens, when the user logged in to it (`totem mcp login`); never in
    /// settings.json.
    #[serde(skip)]
    pub oauth: Option<crate::mcp_client::oauth::TokenStore>,
}

fn enabled() -> bool {
    true
}

impl Default for McpServerSettings {
    fn default() -> McpServerSettings {
        McpServerSettings {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            tools: None,
            role: None,
            search_tool: None,
            allow_all_projects: false,
            timeout_secs: None,
            enabled: true,
            secret_env: Vec::new(),
            secret_headers: Vec::new(),
            oauth: None,
        }
    }
}

fn is_enabled(enabled: &bool) -> bool {
    *enabled
}

/// An MCP server's special use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ServerRole {
    /// The Total.js documentation server: searched with the prompt before a run's first step in
    /// Total.js projects.
    Docs,
}

impl McpServerSettings {
    /// Checks what serde cannot: a name tools can be prefixed with, one transport, a sane timeout.
    pub fn validate(&self, name: &str) -> Result<(), String> {
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if name.is_empty() || name.len() > 32 || !name.chars().all(plain) {
            return Err(format!(
                "MCP server name `{name}` must be 1 to 32 letters, digits, `-` or `_` (it prefixes the server's tool names)"
            ));
        }
        match (&self.command, &self.url) {
            (Some(c), None) if c.trim().is_empty() => Err(format!(
                "MCP server `{name}`: `command` is empty; give the program to start"
            )),
            (Some(_), None) => {
                if self.headers.is_empty() && self.secret_headers.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "MCP server `{name}`: `headers` apply to a `url` server, not to a command"
                    ))
                }
            }
            (None, Some(url)) => {
                if !self.args.is_empty() || !self.env.is_empty() || !self.secret_env.is_empty() {
                    return Err(format!(
                        "MCP server `{name}`: `args` and `env` apply to a `command` server, not to a URL"
                    ));
                }
                super::file::validate_url(url).map_err(|e| format!("MCP server `{name}`: {e}"))
            }
            (Some(_), Some(_)) => Err(format!(
                "MCP server `{name}` has both `command` and `url`; keep one"
            )),
            (None, None) => Err(format!(
                "MCP server `{name}` needs a `command` (stdio) or a `url` (streamable HTTP)"
            )),
        }?;
        let twice = self
            .secret_env
            .iter()
            .find(|n| self.env.contains_key(*n))
            .or_else(|| {
                self.secret_headers
                    .iter()
                    .find(|n| self.headers.contains_key(*n))
            });
        if let Some(twice) = twice {
            return Err(format!(
                "MCP server `{name}`: `{twice}` is both a plain and a secret value; keep one"
            ));
        }
        if self.timeout_secs == Some(0) {
            return Err(format!(
                "MCP server `{name}`: timeoutSecs must be at least 1"
            ));
        }
        Ok(())
    }
}

impl SettingsFile {
    /// The agent (mode) `mode` as configured; an unconfigured mode has no prompt, model or rules.
    pub fn agent(&self, mode: &str) -> AgentSettings {
        self.agents.get(mode).cloned().unwrap_or_default()
    }

    /// The boot check's settings, or the defaults (on).
    pub fn totaljs_boot(&self) -> BootSettings {
        self.totaljs
            .as_ref()
            .and_then(|t| t.boot.clone())
            .unwrap_or_default()
    }

    /// The configured conventions check, or the default one.
    pub fn totaljs_check(&self) -> totem_totaljs::CheckConfig {
        self.totaljs
            .as_ref()
            .and_then(|t| t.check.clone())
            .unwrap_or_default()
    }

    /// The permission policy of a run in `mode`: the settings' rules and secret patterns, the
    /// mode's (agent's) `allow:`/`deny:` lists and the rules granted for this run (`allow`).
    pub fn policy(&self, mode: &str, allow: &[String]) -> Result<Policy, String> {
        let agent = self.agent(mode);
        let mut policy = Policy::new();
        if let Some(permission) = &self.permission {
            policy
                .add_layer(Source::User, permission.rules.clone())
                .map_err(|e| format!("a rule in `permission.rules` is invalid: {e}"))?;
            policy.set_secrets(
                SecretPatterns::from_settings(&permission.secrets)
                    .map_err(|e| format!("`permission.secrets` is invalid: {e}"))?,
            );
            policy.set_environment(permission.environment.clone());
        }
        if !agent.allow.is_empty() || !agent.deny.is_empty() {
            let invalid = |e: &dyn std::fmt::Display| {
                format!("the rules of agent `{mode}` (agents.{mode}) are invalid: {e}")
            };
            let rules = Rules::from_lists(&agent.allow, &agent.deny).map_err(|e| invalid(&e))?;
            policy
                .add_layer(Source::Agent, rules)
                .map_err(|e| invalid(&e))?;
        }
        if !allow.is_empty() {
            let rules = Rules::from_lists(allow, &[])
                .map_err(|e| format!("a rule granted for this run is invalid: {e}"))?;
            policy
                .add_layer(Source::Run, rules)
                .map_err(|e| format!("a rule granted for this run is invalid: {e}"))?;
        }
        Ok(policy)
    }

    /// Checks the sections serde cannot check alone: model names, rules, rule ids, ranges.
    pub(super) fn validate_sections(&self) -> Result<(), String> {
        let model = |field: String, name: &str| {
            totem_provider::ModelRef::parse(name)
                .map(drop)
                .map_err(|e| format!("{field}: {e}"))
        };
        // Every mode's policy is built once here, so a bad rule is reported at load.
        let modes: HashSet<&str> = [BUILD, PLAN]
            .into_iter()
            .chain(self.agents.keys().map(String::as_str))
            .collect();
        for mode in modes {
            self.policy(mode, &[])?;
        }
        for (name, agent) in &self.agents {
            if name.trim().is_empty() || name.trim() != name {
                return Err(format!(
                    "agent name `{name}` is empty or has spaces around it"
                ));
            }
            if let Some(name_ref) = &agent.model {
                model(format!("agents.{name}.model"), name_ref)?;
            }
        }
        if let Some(compaction) = &self.compaction {
            if let Some(name) = &compaction.model {
                model("compaction.model".into(), name)?;
            }
            if let Some(t) = compaction.threshold
                && !(t > 0.05 && t <= 1.0)
            {
                return Err(format!(
                    "compaction.threshold {t} is outside 0.05..1 (it is a share of the model's window, 0.8 by default)"
                ));
            }
        }
        if let Some(check) = self.totaljs.as_ref().and_then(|t| t.check.as_ref()) {
            check.validate().map_err(|e| {
                format!("the `totaljs.check` section of the settings is invalid: {e}")
            })?;
        }
        for (ext, command) in &self.format {
            if command.trim().is_empty() {
                return Err(format!("format.{ext}: the command is empty"));
            }
        }
        if self.check.iter().any(|c| c.trim().is_empty()) {
            return Err("check: a command is empty".into());
        }
        for (name, server) in &self.mcp_servers {
            server.validate(name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::file::parse;

    fn error(text: &str) -> String {
        parse(Path::new("s.json"), text).unwrap_err().to_string()
    }

    #[test]
    fn every_section_refuses_unknown_fields_with_line_and_known_names() {
        for (text, typo, known) in [
            (
                "{\n\"agents\": {\"review\": {\"promt\": \"x\"}}}",
                "promt",
                "readOnly",
            ),
            (
                "{\n\"compaction\": {\"treshold\": 0.5}}",
                "treshold",
                "threshold",
            ),
            ("{\n\"permission\": {\"rule\": {}}}", "rule", "secrets"),
            (
                "{\n\"totaljs\": {\"check\": {\"disable\": []}}}",
                "disable",
                "disabled",
            ),
            ("{\n\"totaljs\": {\"chek\": {}}}", "chek", "check"),
            (
                "{\n\"mcpServers\": {\"x\": {\"comand\": \"y\"}}}",
                "comand",
                "command",
            ),
        ] {
            let err = error(text);
            assert!(err.contains(typo), "{err}");
            assert!(err.contains(known), "names the known fields: {err}");
            assert!(err.contains("line 2"), "names the line: {err}");
        }
    }

    #[test]
    fn section_values_are_checked_at_load() {
        assert!(error(r#"{"compaction":{"threshold":3}}"#).contains("compaction.threshold"));
        assert!(error(r#"{"compaction":{"model":"nomodel"}}"#).contains("compaction.model"));
        assert!(error(r#"{"agents":{"r":{"model":"x"}}}"#).contains("agents.r.model"));
        let err = error(r#"{"agents":{"r":{"allow":["bash("]}}}"#);
        assert!(err.contains("agent `r`"), "{err}");
        let err = error(r#"{"totaljs":{"check":{"disabled":["handler-thiss"]}}}"#);
        assert!(
            err.contains("totaljs.check") && err.contains("handler-thiss"),
            "{err}"
        );
        assert!(error(r#"{"format":{"js":" "}}"#).contains("format.js"));
    }

    #[test]
    fn typed_sections_round_trip() {
        let text = r#"{"version":1,"permission":{"rules":{"bash":{"git status*":"allow"}}},"agents":{"review":{"model":"ollama/x","readOnly":true}},"mcpServers":{"fs":{"command":"x"}},"totaljs":{"check":{"disabled":["handler-this"]}},"compaction":{"model":"a/b","threshold":0.5},"format":{"js":"prettier {file}"},"check":["npm test"]}"#;
        let settings = parse(Path::new("s.json"), text).unwrap();
        let again = serde_json::to_value(&settings).unwrap();
        let original: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(again, original);
        assert_eq!(settings.agent("review").model.as_deref(), Some("ollama/x"));
        assert!(settings.totaljs_check().disabled.contains("handler-this"));
    }
}
