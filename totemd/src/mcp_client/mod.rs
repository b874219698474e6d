//! Totem as an MCP client: the servers a user configured (settings `mcpServers`, the project's
//! `.totem/mcp.json`) whose tools and prompts the model may use.
//!
//! - [`server_config`]: the configuration and how the two sources merge;
//! - [`client`]: one connected server (stdio child process or streamable HTTP);
//! - [`pool`]: one instance of a server per project, shared by its sessions, stopped when idle;
//! - [`session`]: a session's servers and what they offer the model now;
//! - [`tools`]: namespaced names, `mcp_prompt`, results as text;
//! - [`docs`]: the Total.js docs server searched before a run's first step;
//! - [`oauth`]: `totem mcp login` to remote servers, their tokens sealed and refreshed.
//!
//! A server starts only inside a run, after the user allowed it (`agent/mcp.rs` asks): a
//! permission question of kind `mcpServer` whose "always" answer remembers the rule
//! `mcp_server: {<name>: allow}`; `allowAllProjects` in the user's settings starts it without
//! asking. A server stops after an idle time, when the last session using it is deleted, or with
//! the daemon; [`leftovers`] ends those a daemon
//! killed without stopping them left behind.

pub mod client;
pub mod docs;
pub mod leftovers;
pub mod oauth;
pub mod pool;
pub mod server_config;
pub mod session;
pub mod tools;

pub use server_config::{McpServerSettings, ServerConfig, ServerRole};
pub use session::SessionServers;

/// The tool name of the permission to start a server (rules `mcp_server: {"name": "allow"}`,
/// `--allow 'mcp_server(name)'`).
pub const START_PERMISSION: &str = "mcp_server";
