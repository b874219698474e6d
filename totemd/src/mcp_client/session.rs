//! The MCP servers of one session: those it uses (instances shared with the project's other
//! sessions, see [`super::pool`]), those the user allowed or declined, and the tools, prompts
//! and resources they offer the model right now.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use totem_provider::ToolDefinition;

use super::client::Connection;
use super::tools::{
    OfferedTool, PROMPT_TOOL, RESOURCE_TOOL, ServerResources, offered, prompt_tool, resource_tool,
};
use crate::util::lock;

#[derive(Default)]
struct State {
    running: Vec<Arc<Connection>>,
    /// Servers the user refused to start in this session: not asked again until it ends.
    declined: HashSet<String>,
    /// Servers the user allowed in this session: started again without asking after they stopped
    /// idle.
    allowed: HashSet<String>,
    /// Failed starts (their ids, see `super::pool::Failure`) this session was told about.
    reported: HashSet<u64>,
}

/// A session's servers.
#[derive(Default)]
pub struct SessionServers {
    state: Mutex<State>,
}

impl SessionServers {
    /// The running connection to `name`, if it is still alive.
    pub fn get(&self, name: &str) -> Option<Arc<Connection>> {
        lock(&self.state)
            .running
            .iter()
            .find(|c| c.name() == name && !c.is_stopped())
            .cloned()
    }

    /// Forgets servers that stopped; returns their names.
    pub fn drop_stopped(&self) -> Vec<String> {
        let mut state = lock(&self.state);
        let stopped: Vec<String> = state
            .running
            .iter()
            .filter(|c| c.is_stopped())
            .map(|c| c.name().to_string())
            .collect();
        state.running.retain(|c| !c.is_stopped());
        stopped
    }

    /// Uses `connection` (in place of an older connection of the same name).
    pub fn insert(&self, connection: Arc<Connection>) {
        let mut state = lock(&self.state);
        state.running.retain(|c| c.name() != connection.name());
        state.running.push(connection);
    }

    /// Lets the session start the server `name` without asking again.
    pub fn allow(&self, name: &str) {
        lock(&self.state).allowed.insert(name.to_string());
    }

    /// Whether the user allowed the server `name` for this session.
    pub fn is_allowed(&self, name: &str) -> bool {
        lock(&self.state).allowed.contains(name)
    }

    /// Records that the user declined to start the server `name`; it is not asked again.
    pub fn decline(&self, name: &str) {
        lock(&self.state).declined.insert(name.to_string());
    }

    /// Whether the user declined the server `name` in this session.
    pub fn is_declined(&self, name: &str) -> bool {
        lock(&self.state).declined.contains(name)
    }

    /// Lets go of every server (the session was deleted); returns them.
    pub fn detach_all(&self) -> Vec<Arc<Connection>> {
        std::mem::take(&mut lock(&self.state).running)
    }

    /// Whether the session uses `connection`.
    pub fn holds(&self, connection: &Arc<Connection>) -> bool {
        lock(&self.state)
            .running
            .iter()
            .any(|c| Arc::ptr_eq(c, connection))
    }

    /// Whether the failed start `id` is news to this session (it is not from now on).
    pub fn first_report(&self, id: u64) -> bool {
        lock(&self.state).reported.insert(id)
    }

    /// Holds the servers the session uses with `lease`, for a run starting now.
    pub fn hold_all(&self, lease: &super::pool::RunLease) {
        for connection in self.alive() {
            lease.hold(&connection);
        }
    }

    fn alive(&self) -> Vec<Arc<Connection>> {
        lock(&self.state)
            .running
            .iter()
            .filter(|c| !c.is_stopped())
            .cloned()
            .collect()
    }

    /// The tools on offer: every live server's tools that pass its whitelist, in Plan mode only
    /// those marked read-only. A name already taken (by a built-in tool or an earlier server) is
    /// skipped.
    pub fn offered(&self, read_only: bool) -> Vec<(Arc<Connection>, OfferedTool)> {
        static BUILTIN: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        let builtin = BUILTIN.get_or_init(|| {
            totem_tools::Registry::builtin()
                .names(false)
                .into_iter()
                .map(str::to_string)
                .collect()
        });
        let mut seen: HashSet<String> = builtin.iter().cloned().collect();
        seen.insert(PROMPT_TOOL.to_string());
        seen.insert(RESOURCE_TOOL.to_string());
        let mut out = Vec::new();
        for connection in self.alive() {
            for listed in connection.tools() {
                let Some(tool) = offered(connection.name(), &listed) else {
                    continue;
                };
                if !connection.config.offers(&tool.tool) || (read_only && !tool.read_only) {
                    continue;
                }
                if seen.insert(tool.exposed.clone()) {
                    out.push((connection.clone(), tool));
                }
            }
        }
        out
    }

    /// Every live server's prompts, as (server, listed prompt).
    pub fn prompts(&self) -> Vec<(String, Value)> {
        self.alive()
            .iter()
            .flat_map(|c| {
                c.prompts()
                    .into_iter()
                    .map(|p| (c.name().to_string(), p))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every live server's resources and resource templates.
    pub fn resources(&self) -> Vec<ServerResources> {
        self.alive()
            .iter()
            .map(|c| {
                let (resources, templates) = c.resources();
                ServerResources {
                    server: c.name().to_string(),
                    resources,
                    templates,
                }
            })
            .collect()
    }

    /// What the model is offered from MCP servers for the next request.
    pub fn definitions(&self, read_only: bool) -> Vec<ToolDefinition> {
        let mut out: Vec<ToolDefinition> = self
            .offered(read_only)
            .into_iter()
            .map(|(_, t)| ToolDefinition {
                name: t.exposed,
                description: t.description,
                parameters: t.parameters,
            })
            .collect();
        if let Some((description, parameters)) = prompt_tool(&self.prompts()) {
            out.push(ToolDefinition {
                name: PROMPT_TOOL.into(),
                description,
                parameters,
            });
        }
        if let Some((description, parameters)) = resource_tool(&self.resources()) {
            out.push(ToolDefinition {
                name: RESOURCE_TOOL.into(),
                description,
                parameters,
            });
        }
        out
    }

    /// The offered tool the model calls `exposed`.
    pub fn find(&self, exposed: &str) -> Option<(Arc<Connection>, OfferedTool)> {
        // Found among every mode's tools: the caller checks the mode, so it can say why.
        self.offered(false)
            .into_iter()
            .find(|(_, t)| t.exposed == exposed)
    }

    /// Whether any server is running (the model may call `mcp_prompt`).
    pub fn has_prompts(&self) -> bool {
        !self.prompts().is_empty()
    }

    /// Whether a running server lists resources or templates (the model may call `mcp_resource`).
    pub fn has_resources(&self) -> bool {
        resource_tool(&self.resources()).is_some()
    }
}

impl SessionServers {
    /// The live docs servers (`role: "docs"`).
    pub fn docs(&self) -> Vec<Arc<Connection>> {
        self.alive()
            .into_iter()
            .filter(|c| c.config.is_docs())
            .collect()
    }
}
